//! The MAC table of the learning bridge: (VLAN, MAC) -> port, with a fixed capacity and aging.
//!
//! Why it is built this way:
//! * **Fixed memory.** Every bucket is allocated at construction and nothing is allocated
//!   afterwards, so a flood of random source MACs cannot grow memory. The table holds at most
//!   `capacity` live entries; a new source beyond that is *refused* and counted, and the hosts
//!   already learned stay (a flood never evicts them: they keep getting unicast).
//! * **One cache line per bucket.** A bucket is 64 bytes: four keys and four stamps. A key packs
//!   the VLAN and the MAC into one `u64` (bit 63 marks the slot as used); a stamp is the TSC of
//!   the last time the source was seen with its low 16 bits replaced by the port. Losing 16 bits
//!   of TSC (about 28 µs at 2.3 GHz) costs nothing for ages counted in seconds, and it keeps a
//!   lookup to one line per candidate bucket.
//! * **Two candidate buckets per key** (bucketed cuckoo): the low and the high half of a 64-bit
//!   finaliser of the key (two multiply-xorshift rounds, in which every key bit reaches every
//!   result bit). Weaker choices were measured first: CRC32C is linear, so two CRCs with
//!   different seeds always pair the same two buckets, and a second hash built from the CRC or
//!   from one multiplication let sequential MACs pile up (refusals at 50-60 % load); a CRC32C for
//!   the first bucket and the finaliser for the second worked but cost a function call per MAC
//!   (the bridge bench: 67.7 -> 61.2 ns per packet without it, 1k MACs). A new
//!   key goes to the emptier bucket; when both are full, a short breadth-first cuckoo search
//!   moves a chain of entries each to its other bucket to make room (one level of moves
//!   alone still refused at 73 % load). The bucket array has at least 25 % more slots than
//!   the capacity; unit tests fill tables to capacity with random and with sequential MACs.
//!   The hashes are not keyed: someone who chooses MACs can fill both buckets of a victim
//!   address before it is learned. That victim is then flooded, never lost, and counted.
//! * **Aging without a timer.** An entry older than the configured age is treated as absent by
//!   every lookup at once, may be reused by a new key in the same bucket, and is cleared by
//!   [`MacTable::sweep`], which the learn stage calls with a few buckets per batch, so the live
//!   count comes back down without a separate thread or a full scan.
//! * **Mirrored where the kernel forwards.** With the XDP fast path, the kernel forwards known
//!   unicast by a copy of this table. A [`MacSync`] given to [`MacTable::mirror_into`] hears of
//!   every change at once (a new or moved source, an entry aged, reused, swept or flushed),
//!   never of a refresh, so the copy never holds an entry this table no longer has and the
//!   hot path pays nothing while nothing changes.
//! * **Batch-friendly.** [`MacTable::hash`] and [`MacTable::prefetch`] let a stage hash every
//!   key of a batch and prefetch the buckets before it compares anything.

use wirespeed_packet::cpu::prefetch;
use wirespeed_packet::wire::EthernetAddress;

/// Entries per bucket: four 8-byte keys and four 8-byte stamps fill one cache line.
pub const SLOTS: usize = 4;

/// Buckets a cuckoo search for room visits at most (insertions only, below capacity).
const SEARCH_NODES: usize = 64;

/// The largest capacity a table accepts: 1 Mi entries, 32 MiB of buckets.
pub const MAX_CAPACITY: usize = 1 << 20;

/// Low bits of a stamp that hold the port instead of time.
const PORT_BITS: u64 = 0xffff;

/// Marks a used slot; VLAN and MAC use bits 0..60.
const USED: u64 = 1 << 63;

#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
struct Bucket {
    /// [`MacKey`] bits, 0 for an empty slot.
    keys: [u64; SLOTS],
    /// Last-seen TSC (low 16 bits cleared) | port.
    stamps: [u64; SLOTS],
}

const _: () = assert!(std::mem::size_of::<Bucket>() == 64);

/// A (VLAN, MAC) pair packed into one word: what the table is keyed by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MacKey(u64);

impl MacKey {
    /// The key of `mac` in VLAN `vlan` (the VLAN id's 12 bits are used).
    #[inline]
    pub fn new(vlan: u16, mac: EthernetAddress) -> MacKey {
        let m = mac.0;
        let mac_bits = u64::from_be_bytes([0, 0, m[0], m[1], m[2], m[3], m[4], m[5]]);
        MacKey(USED | (u64::from(vlan & 0x0fff) << 48) | mac_bits)
    }

    pub fn vlan(self) -> u16 {
        ((self.0 >> 48) & 0x0fff) as u16
    }

    pub fn mac(self) -> EthernetAddress {
        let b = self.0.to_be_bytes();
        EthernetAddress([b[2], b[3], b[4], b[5], b[6], b[7]])
    }
}

/// The two candidate buckets of a key, computed once per packet by [`MacTable::hash`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MacHash {
    first: u32,
    second: u32,
}

/// What [`MacTable::learn`] did with a source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Learned {
    /// Already known on this port: its last-seen time was refreshed.
    Refreshed,
    /// A new entry (or one that had aged out and came back).
    New,
    /// Known on another port (`from`): the entry now points to the new port.
    Moved { from: u16 },
    /// No room: the table holds `capacity` live entries, or both candidate buckets are full.
    Refused,
}

/// One row of "show mac table".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MacEntry {
    pub vlan: u16,
    pub mac: EthernetAddress,
    pub port: u16,
    /// TSC cycles since the source was last seen (to a resolution of 65536 cycles).
    pub idle_cycles: u64,
}

/// Errors of [`MacTable::new`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MacTableError {
    #[error("MAC table capacity {0} is out of range: give a capacity between 1 and {MAX_CAPACITY}")]
    Capacity(usize),
}

/// A copy of the table kept elsewhere (the XDP fast path's MAC map): told of every change.
pub trait MacSync: Send + std::fmt::Debug {
    /// `key` now lives behind `port` (new, moved, or relearned after aging).
    fn learned(&mut self, key: MacKey, port: u16);
    /// `key` is no longer known.
    fn forgotten(&mut self, key: MacKey);
    /// Every key is forgotten.
    fn cleared(&mut self);
    /// Entries the copy could not take (it was full); their frames stay on the user-space path.
    fn refused(&self) -> u64 {
        0
    }
}

/// Fixed-capacity (VLAN, MAC) -> port table with aging. See the module documentation.
#[derive(Debug)]
pub struct MacTable {
    buckets: Box<[Bucket]>,
    mask: u32,
    capacity: usize,
    /// Used slots, aged or not (aged ones are cleared by `sweep` or reused by `learn`).
    len: usize,
    age_cycles: u64,
    /// Next bucket `sweep` looks at.
    sweep_next: usize,
    /// Entries found aged and cleared or reused.
    aged: u64,
    /// Entries moved to their other bucket to make room for a new one.
    displaced: u64,
    /// The copy told of every change, if any.
    mirror: Option<Box<dyn MacSync>>,
}

impl MacTable {
    /// A table for `capacity` entries that forgets a source not seen for `age_cycles` TSC
    /// cycles (`u64::MAX`: never). All memory is allocated here.
    pub fn new(capacity: usize, age_cycles: u64) -> Result<MacTable, MacTableError> {
        if capacity == 0 || capacity > MAX_CAPACITY {
            return Err(MacTableError::Capacity(capacity));
        }
        // At least 25 % spare slots, a power of two of buckets, at least two.
        let buckets = (capacity + capacity / 4)
            .div_ceil(SLOTS)
            .next_power_of_two()
            .max(2);
        Ok(MacTable {
            buckets: vec![Bucket::default(); buckets].into_boxed_slice(),
            mask: (buckets - 1) as u32,
            capacity,
            len: 0,
            age_cycles,
            sweep_next: 0,
            aged: 0,
            displaced: 0,
            mirror: None,
        })
    }

    /// Changes the age at which an entry is forgotten (a reloaded configuration's): entries
    /// are stamped with the time last seen, not an expiry, so the new age applies to every
    /// entry at once, with nothing to rewrite.
    pub fn set_age_cycles(&mut self, age_cycles: u64) {
        self.age_cycles = age_cycles;
    }

    /// Makes `mirror` a copy of the table (cleared, then given every live entry at `now`) and
    /// tells it of every change from now on.
    pub fn mirror_into(&mut self, mut mirror: Box<dyn MacSync>, now: u64) {
        mirror.cleared();
        for entry in self.entries(now) {
            mirror.learned(MacKey::new(entry.vlan, entry.mac), entry.port);
        }
        self.mirror = Some(mirror);
    }

    /// Empties the mirror and stops telling it anything (the bridge gained an ACL, which only
    /// user space applies).
    pub fn stop_mirroring(&mut self) {
        if let Some(mut mirror) = self.mirror.take() {
            mirror.cleared();
        }
    }

    /// Entries the mirror could not take, while there is one.
    pub fn mirror_refused(&self) -> Option<u64> {
        self.mirror.as_ref().map(|mirror| mirror.refused())
    }

    /// Whether a mirror is told of the changes.
    pub fn is_mirrored(&self) -> bool {
        self.mirror.is_some()
    }

    fn mirror_learned(&mut self, key: MacKey, port: u16) {
        if let Some(mirror) = self.mirror.as_mut() {
            mirror.learned(key, port);
        }
    }

    fn mirror_forgotten(&mut self, key: u64) {
        if let Some(mirror) = self.mirror.as_mut() {
            mirror.forgotten(MacKey(key));
        }
    }

    /// The most live entries the table holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Used entries, including aged ones not yet swept.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Entries cleared or reused because they had aged out.
    pub fn aged(&self) -> u64 {
        self.aged
    }

    /// Entries moved to their other bucket to make room for a new one.
    pub fn displaced(&self) -> u64 {
        self.displaced
    }

    /// Bytes of bucket memory (fixed at construction).
    pub fn memory(&self) -> usize {
        std::mem::size_of_val(&*self.buckets)
    }

    /// The candidate buckets of `key`.
    #[inline]
    pub fn hash(&self, key: MacKey) -> MacHash {
        // Every bit of the key reaches every bit of `mixed`: its halves are the two choices.
        let mut mixed = key.0;
        mixed ^= mixed >> 33;
        mixed = mixed.wrapping_mul(0xff51_afd7_ed55_8ccd);
        mixed ^= mixed >> 33;
        mixed = mixed.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        mixed ^= mixed >> 33;
        MacHash {
            first: mixed as u32 & self.mask,
            second: (mixed >> 32) as u32 & self.mask,
        }
    }

    /// Asks the CPU to bring both candidate buckets into cache.
    #[inline]
    pub fn prefetch(&self, hash: MacHash) {
        if let Some(bucket) = self.buckets.get(hash.first as usize) {
            prefetch(bucket);
        }
        if let Some(bucket) = self.buckets.get(hash.second as usize) {
            prefetch(bucket);
        }
    }

    #[inline]
    fn is_aged(&self, stamp: u64, now: u64) -> bool {
        now.saturating_sub(stamp & !PORT_BITS) > self.age_cycles
    }

    /// The port `key` was last seen on, unless it is unknown or aged out.
    #[inline]
    pub fn lookup(&self, key: MacKey, hash: MacHash, now: u64) -> Option<u16> {
        for index in [hash.first, hash.second] {
            let bucket = self.buckets.get(index as usize)?;
            for slot in 0..SLOTS {
                if bucket.keys[slot] == key.0 {
                    let stamp = bucket.stamps[slot];
                    return (!self.is_aged(stamp, now)).then_some((stamp & PORT_BITS) as u16);
                }
            }
        }
        None
    }

    /// Records that `key` was seen on `port` at `now`.
    #[inline]
    pub fn learn(&mut self, key: MacKey, hash: MacHash, port: u16, now: u64) -> Learned {
        let stamp = (now & !PORT_BITS) | u64::from(port);
        let indexes = [hash.first as usize, hash.second as usize];
        // Known already?
        for &index in &indexes {
            let Some(bucket) = self.buckets.get(index) else {
                return Learned::Refused;
            };
            if let Some(slot) = bucket.keys.iter().position(|&k| k == key.0) {
                let old = bucket.stamps[slot];
                let aged = self.is_aged(old, now);
                if let Some(bucket) = self.buckets.get_mut(index) {
                    bucket.stamps[slot] = stamp;
                }
                if aged {
                    self.aged += 1;
                    self.mirror_learned(key, port);
                    return Learned::New;
                }
                let from = (old & PORT_BITS) as u16;
                return if from == port {
                    Learned::Refreshed
                } else {
                    self.mirror_learned(key, port);
                    Learned::Moved { from }
                };
            }
        }
        // A new key.
        let Some((index, slot)) = self.place(indexes, now) else {
            return Learned::Refused;
        };
        if let Some(bucket) = self.buckets.get_mut(index) {
            bucket.keys[slot] = key.0;
            bucket.stamps[slot] = stamp;
        }
        self.mirror_learned(key, port);
        Learned::New
    }

    /// Finds a slot for a new key in one of the buckets `indexes`: a free slot of the emptier
    /// bucket, or else one freed by cuckoo displacement (below).
    fn place(&mut self, indexes: [usize; 2], now: u64) -> Option<(usize, usize)> {
        let free = |table: &MacTable, index: usize| {
            table.buckets.get(index).map_or(0, |bucket| {
                (0..SLOTS)
                    .filter(|&slot| {
                        bucket.keys[slot] == 0 || table.is_aged(bucket.stamps[slot], now)
                    })
                    .count()
            })
        };
        let order = if free(self, indexes[1]) > free(self, indexes[0]) {
            [indexes[1], indexes[0]]
        } else {
            indexes
        };
        for index in order {
            if let Some(slot) = self.claim(index, now) {
                return Some((index, slot));
            }
        }
        // A full table refuses at once: a flood of new sources never pays for a search.
        if self.len >= self.capacity {
            return None;
        }
        self.displace(order, now)
    }

    /// Breadth-first search, over at most [`SEARCH_NODES`] buckets, for a chain of entries
    /// that can each move to their other bucket, ending in a bucket with room; then moves them
    /// from the end of the chain back, which frees a slot in one of `roots`. An entry is only
    /// ever moved to a free slot of its other bucket, so nothing learned is pushed out, and
    /// every bucket appears once in the search, so no entry moves twice.
    fn displace(&mut self, roots: [usize; 2], now: u64) -> Option<(usize, usize)> {
        // (bucket, parent node, slot of the parent bucket whose entry moves here)
        let mut nodes = [(0usize, u8::MAX, 0u8); SEARCH_NODES];
        nodes[0] = (roots[0], u8::MAX, 0);
        nodes[1] = (roots[1], u8::MAX, 0);
        let mut count = if roots[0] == roots[1] { 1 } else { 2 };
        let mut next = 0;
        while next < count {
            let (bucket, _, _) = nodes[next];
            for slot in 0..SLOTS {
                let Some(other) = self.alternate(bucket, slot) else {
                    continue;
                };
                if nodes[..count].iter().any(|node| node.0 == other) {
                    continue;
                }
                if let Some(target) = self.claim(other, now) {
                    // Move along the chain, from its end back to a root.
                    let (mut to_bucket, mut to_slot) = (other, target);
                    let (mut node, mut from_slot) = (next, slot);
                    loop {
                        let from_bucket = nodes[node].0;
                        self.move_entry((from_bucket, from_slot), (to_bucket, to_slot));
                        self.displaced += 1;
                        let (_, parent, parent_slot) = nodes[node];
                        if parent == u8::MAX {
                            return Some((from_bucket, from_slot));
                        }
                        (to_bucket, to_slot) = (from_bucket, from_slot);
                        (node, from_slot) = (usize::from(parent), usize::from(parent_slot));
                    }
                }
                if count < SEARCH_NODES {
                    nodes[count] = (other, next as u8, slot as u8);
                    count += 1;
                }
            }
            next += 1;
        }
        None
    }

    fn move_entry(&mut self, from: (usize, usize), to: (usize, usize)) {
        let entry = self
            .buckets
            .get(from.0)
            .map_or((0, 0), |b| (b.keys[from.1], b.stamps[from.1]));
        if let Some(bucket) = self.buckets.get_mut(to.0) {
            bucket.keys[to.1] = entry.0;
            bucket.stamps[to.1] = entry.1;
        }
    }

    /// Takes a slot of bucket `index` for a new entry: an aged one (reused), or an empty one
    /// while the table is below capacity. Keeps `len` and `aged` right.
    fn claim(&mut self, index: usize, now: u64) -> Option<usize> {
        let bucket = self.buckets.get(index)?;
        let used = |slot: usize| bucket.keys[slot] != 0;
        if let Some(slot) =
            (0..SLOTS).find(|&slot| used(slot) && self.is_aged(bucket.stamps[slot], now))
        {
            let old = bucket.keys[slot];
            self.aged += 1;
            self.mirror_forgotten(old);
            return Some(slot);
        }
        if self.len >= self.capacity {
            return None;
        }
        let slot = (0..SLOTS).find(|&slot| !used(slot))?;
        self.len += 1;
        Some(slot)
    }

    /// The other candidate bucket of the entry in `slot` of bucket `index`.
    fn alternate(&self, index: usize, slot: usize) -> Option<usize> {
        let key = *self.buckets.get(index)?.keys.get(slot)?;
        if key == 0 {
            return None;
        }
        let hash = self.hash(MacKey(key));
        Some(if hash.first as usize == index {
            hash.second as usize
        } else {
            hash.first as usize
        })
    }

    /// Clears the aged entries of the next `buckets` buckets (round robin); returns how many.
    pub fn sweep(&mut self, now: u64, buckets: usize) -> usize {
        let mut cleared = 0;
        let count = self.buckets.len();
        for _ in 0..buckets.min(count) {
            let index = self.sweep_next;
            self.sweep_next = (index + 1) & self.mask as usize;
            let Some(bucket) = self.buckets.get(index) else {
                continue;
            };
            let stale: [bool; SLOTS] = std::array::from_fn(|slot| {
                bucket.keys[slot] != 0 && self.is_aged(bucket.stamps[slot], now)
            });
            if let Some(bucket) = self.buckets.get_mut(index) {
                for slot in (0..SLOTS).filter(|&slot| stale[slot]) {
                    let key = bucket.keys[slot];
                    bucket.keys[slot] = 0;
                    bucket.stamps[slot] = 0;
                    cleared += 1;
                    if let Some(mirror) = self.mirror.as_mut() {
                        mirror.forgotten(MacKey(key));
                    }
                }
            }
        }
        self.len -= cleared;
        self.aged += cleared as u64;
        cleared
    }

    /// Forgets every entry.
    pub fn flush(&mut self) {
        self.buckets.fill(Bucket::default());
        self.len = 0;
        if let Some(mirror) = self.mirror.as_mut() {
            mirror.cleared();
        }
    }

    /// Forgets the entries that point to `port` (a port that went down or left the bridge);
    /// returns how many.
    pub fn flush_port(&mut self, port: u16) -> usize {
        let mut cleared = 0;
        for bucket in self.buckets.iter_mut() {
            for slot in 0..SLOTS {
                if bucket.keys[slot] != 0 && (bucket.stamps[slot] & PORT_BITS) as u16 == port {
                    if let Some(mirror) = self.mirror.as_mut() {
                        mirror.forgotten(MacKey(bucket.keys[slot]));
                    }
                    bucket.keys[slot] = 0;
                    bucket.stamps[slot] = 0;
                    cleared += 1;
                }
            }
        }
        self.len -= cleared;
        cleared
    }

    /// The live entries at `now` (aged ones left out), in table order.
    pub fn entries(&self, now: u64) -> impl Iterator<Item = MacEntry> + '_ {
        self.buckets.iter().flat_map(move |bucket| {
            (0..SLOTS).filter_map(move |slot| {
                let (key, stamp) = (bucket.keys[slot], bucket.stamps[slot]);
                if key == 0 || self.is_aged(stamp, now) {
                    return None;
                }
                let key = MacKey(key);
                Some(MacEntry {
                    vlan: key.vlan(),
                    mac: key.mac(),
                    port: (stamp & PORT_BITS) as u16,
                    idle_cycles: now.saturating_sub(stamp & !PORT_BITS),
                })
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mac(n: u64) -> EthernetAddress {
        let b = n.to_be_bytes();
        EthernetAddress([0x02, b[3], b[4], b[5], b[6], b[7]])
    }

    fn learn(table: &mut MacTable, vlan: u16, n: u64, port: u16, now: u64) -> Learned {
        let key = MacKey::new(vlan, mac(n));
        let hash = table.hash(key);
        table.learn(key, hash, port, now)
    }

    fn lookup(table: &MacTable, vlan: u16, n: u64, now: u64) -> Option<u16> {
        let key = MacKey::new(vlan, mac(n));
        table.lookup(key, table.hash(key), now)
    }

    #[test]
    fn key_round_trips_vlan_and_mac() {
        let key = MacKey::new(4094, mac(0x1234_5678));
        assert_eq!(key.vlan(), 4094);
        assert_eq!(key.mac(), mac(0x1234_5678));
    }

    #[test]
    fn learns_refreshes_moves_and_separates_vlans() {
        let mut table = MacTable::new(16, 1 << 40).unwrap();
        assert_eq!(learn(&mut table, 10, 1, 3, 1 << 20), Learned::New);
        assert_eq!(learn(&mut table, 10, 1, 3, 2 << 20), Learned::Refreshed);
        assert_eq!(lookup(&table, 10, 1, 2 << 20), Some(3));
        assert_eq!(lookup(&table, 20, 1, 2 << 20), None);
        assert_eq!(learn(&mut table, 20, 1, 5, 2 << 20), Learned::New);
        assert_eq!(
            learn(&mut table, 10, 1, 4, 3 << 20),
            Learned::Moved { from: 3 }
        );
        assert_eq!(lookup(&table, 10, 1, 3 << 20), Some(4));
        assert_eq!(lookup(&table, 20, 1, 3 << 20), Some(5));
        assert_eq!(table.len(), 2);
    }

    #[test]
    fn fills_to_capacity_with_random_keys_and_then_refuses() {
        let capacity = 26_214;
        let mut table = MacTable::new(capacity, u64::MAX).unwrap();
        let memory = table.memory();
        let mut x = 0x1234_5678_9abc_def0u64;
        let mut refused = 0;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if learn(&mut table, (x >> 48) as u16 & 0xfff, x, 1, 0) == Learned::Refused {
                refused += 1;
            }
        }
        assert_eq!(table.len(), capacity);
        assert_eq!(refused, 100_000 - capacity);
        assert_eq!(table.buckets.len() * SLOTS, 32_768);
        // At 80 % load two choices alone are not enough: the cuckoo search made room.
        assert!(table.displaced() > 0);
        assert_eq!(table.entries(0).count(), capacity);
        assert_eq!(table.memory(), memory);
    }

    #[test]
    fn fills_to_capacity_with_sequential_macs_and_finds_every_one() {
        // 26214 is the tightest case: 80 % of the slots are used at capacity.
        for capacity in [1_000, 1_016, 26_214, 100_016] {
            let mut table = MacTable::new(capacity, u64::MAX).unwrap();
            for n in 0..capacity as u64 {
                let port = (n % 7) as u16;
                assert_eq!(
                    learn(&mut table, 1, n, port, 0),
                    Learned::New,
                    "{n} of {capacity}"
                );
            }
            assert_eq!(learn(&mut table, 1, 1 << 39, 1, 0), Learned::Refused);
            assert_eq!(table.len(), capacity);
            for n in 0..capacity as u64 {
                assert_eq!(lookup(&table, 1, n, 0), Some((n % 7) as u16), "{n}");
            }
            if capacity == 26_214 {
                assert_eq!(table.memory(), 8192 * 64);
            }
        }
    }

    #[test]
    fn aged_entries_are_absent_reusable_and_swept() {
        let age = 1 << 20;
        let mut table = MacTable::new(2, age).unwrap();
        learn(&mut table, 1, 1, 1, 0);
        learn(&mut table, 1, 2, 1, 0);
        assert_eq!(learn(&mut table, 1, 3, 1, 0), Learned::Refused);
        let later = 4 * age;
        assert_eq!(lookup(&table, 1, 1, later), None);
        assert_eq!(table.entries(later).count(), 0);
        // An aged entry comes back as new.
        assert_eq!(learn(&mut table, 1, 1, 2, later), Learned::New);
        assert_eq!(table.aged(), 1);
        // The sweep clears the other one, making room for a third key.
        let swept = table.sweep(later, 1 << 20);
        assert_eq!(swept, 1);
        assert_eq!(table.len(), 1);
        assert_eq!(learn(&mut table, 1, 3, 1, later), Learned::New);
        assert_eq!(table.len(), 2);
    }

    /// One thing a mirror was told: "learned", "forgotten" or "cleared", MAC number, port.
    type Event = (&'static str, u64, u16);

    /// What a mirror was told.
    #[derive(Debug, Default, Clone)]
    struct Told(std::sync::Arc<std::sync::Mutex<Vec<Event>>>);

    impl Told {
        fn take(&self) -> Vec<Event> {
            std::mem::take(&mut *self.0.lock().unwrap())
        }
    }

    /// The number `mac` made the key's MAC from.
    fn number(key: MacKey) -> u64 {
        let m = key.mac().0;
        u64::from_be_bytes([0, 0, 0, m[1], m[2], m[3], m[4], m[5]])
    }

    impl MacSync for Told {
        fn learned(&mut self, key: MacKey, port: u16) {
            self.0.lock().unwrap().push(("learned", number(key), port));
        }
        fn forgotten(&mut self, key: MacKey) {
            self.0.lock().unwrap().push(("forgotten", number(key), 0));
        }
        fn cleared(&mut self) {
            self.0.lock().unwrap().push(("cleared", 0, 0));
        }
    }

    #[test]
    fn a_mirror_hears_every_change_and_no_refresh() {
        let age = 1 << 20;
        let mut table = MacTable::new(4, age).unwrap();
        learn(&mut table, 1, 1, 1, 0);
        let told = Told::default();
        table.mirror_into(Box::new(told.clone()), 0);
        // Made a copy of what the table had.
        assert_eq!(told.take(), [("cleared", 0, 0), ("learned", 1, 1)]);
        assert_eq!(learn(&mut table, 1, 1, 1, 10), Learned::Refreshed);
        assert_eq!(learn(&mut table, 1, 2, 2, 10), Learned::New);
        assert_eq!(learn(&mut table, 1, 2, 3, 10), Learned::Moved { from: 2 });
        assert_eq!(told.take(), [("learned", 2, 2), ("learned", 2, 3)]);
        // Aged and swept: forgotten; relearned: learned again.
        let later = 4 * age;
        assert_eq!(table.sweep(later, 1 << 20), 2);
        let mut forgotten: Vec<u64> = told
            .take()
            .iter()
            .map(|&(what, n, _)| {
                assert_eq!(what, "forgotten");
                n
            })
            .collect();
        forgotten.sort_unstable();
        assert_eq!(forgotten, [1, 2]);
        learn(&mut table, 1, 1, 1, later);
        table.flush_port(1);
        table.flush();
        assert_eq!(
            told.take(),
            [("learned", 1, 1), ("forgotten", 1, 0), ("cleared", 0, 0)]
        );
        // Stopped: emptied, and told nothing more.
        learn(&mut table, 1, 3, 1, later);
        table.stop_mirroring();
        learn(&mut table, 1, 4, 1, later);
        assert_eq!(told.take(), [("learned", 3, 1), ("cleared", 0, 0)]);
        assert!(!table.is_mirrored());
    }

    #[test]
    fn flush_port_forgets_only_that_port() {
        let mut table = MacTable::new(8, u64::MAX).unwrap();
        learn(&mut table, 1, 1, 1, 0);
        learn(&mut table, 1, 2, 2, 0);
        assert_eq!(table.flush_port(1), 1);
        assert_eq!(lookup(&table, 1, 1, 0), None);
        assert_eq!(lookup(&table, 1, 2, 0), Some(2));
        table.flush();
        assert!(table.is_empty());
        assert_eq!(lookup(&table, 1, 2, 0), None);
    }

    #[test]
    fn capacity_is_checked() {
        assert!(MacTable::new(0, 1).is_err());
        assert!(MacTable::new(MAX_CAPACITY + 1, 1).is_err());
    }
}
