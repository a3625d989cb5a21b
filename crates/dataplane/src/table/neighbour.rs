//! The neighbour table (ARP for IPv4, NDP for IPv6): next-hop address on a port -> MAC, with the
//! packets that wait for an address being resolved.
//!
//! Everything is bounded and allocated once, at construction: a slab of `capacity` entries, a
//! linear-probing index twice that size (deletion by backward shift, so no tombstones pile up
//! under churn), and a pool of `hold_total` hold slots shared by all unresolved neighbours, at
//! most `hold_per_neighbour` of them each (RFC 1122 §2.3.2.2 asks for at least one; Linux keeps
//! a byte budget; we keep a packet count, a handful by default). A full table refuses new
//! entries and a full hold queue refuses packets; the caller counts both.
//!
//! Entry life: `Incomplete` (a request was sent, packets may wait) -> `Reachable` when a reply
//! arrives -> removed by [`NeighbourTable::sweep`] when not confirmed for the aging time, or
//! when an incomplete entry ran out of attempts (its held packets are handed back to be freed).
//! `Static` entries come from the configuration and are neither learned over nor aged. The
//! sweep visits a fixed number of slab slots per call, so its cost per batch is constant.
//!
//! Time is a TSC reading passed in by the caller; the table never reads a clock.
//!
//! The table is the source of truth for every MAC the router writes, but the forwarding path
//! does not ask it per packet: it keeps a pre-built rewrite per gateway
//! ([`crate::table::adjacency`]) stamped with the table's [`NeighbourTable::generation`]. Every
//! change that can alter a resolved answer (a MAC learned or changed, an entry made static,
//! removed or aged out) advances the generation, so every stamped rewrite goes stale at once and
//! is rebuilt from the table on its next use.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use wirespeed_packet::Desc;
use wirespeed_packet::wire::EthernetAddress;

const EMPTY: u32 = u32::MAX;

/// A neighbour's address: an IP address on one port (the same link-local address may exist on
/// several links).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NeighbourKey {
    /// IPv4 addresses are stored IPv4-mapped (`::ffff:a.b.c.d`). Bytes rather than a `u128`
    /// keep the key 2-byte aligned, so the route stage's per-packet [`Next`] that carries one
    /// is 28 bytes instead of 48.
    ///
    /// [`Next`]: crate::stage::route::Next
    addr: [u8; 16],
    port: u16,
    v4: bool,
}

impl NeighbourKey {
    /// An IPv4 neighbour on `port`.
    #[inline]
    pub fn v4(addr: Ipv4Addr, port: u16) -> Self {
        NeighbourKey {
            addr: addr.to_ipv6_mapped().octets(),
            port,
            v4: true,
        }
    }

    /// An IPv6 neighbour on `port`.
    #[inline]
    pub fn v6(addr: Ipv6Addr, port: u16) -> Self {
        NeighbourKey {
            addr: addr.octets(),
            port,
            v4: false,
        }
    }

    /// The neighbour's IP address.
    pub fn addr(&self) -> IpAddr {
        let v6 = Ipv6Addr::from(self.addr);
        match (self.v4, v6.to_ipv4_mapped()) {
            (true, Some(v4)) => IpAddr::V4(v4),
            _ => IpAddr::V6(v6),
        }
    }

    /// The port the neighbour is on.
    pub fn port(&self) -> u16 {
        self.port
    }

    #[inline]
    fn hash(&self) -> u64 {
        let addr = u128::from_be_bytes(self.addr);
        let folded = (addr as u64) ^ ((addr >> 64) as u64).rotate_left(29);
        let mixed = (folded ^ u64::from(self.port) << 48 ^ u64::from(self.v4))
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
        mixed ^ (mixed >> 32)
    }
}

/// Where a neighbour's resolution stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NeighbourState {
    /// Requested, no answer yet; packets may be waiting.
    Incomplete,
    /// Answered; aged out when not confirmed again.
    Reachable,
    /// Configured; never aged, never overwritten by what the wire says.
    Static,
}

/// One neighbour.
#[derive(Clone, Copy, Debug)]
pub struct Neighbour {
    pub key: NeighbourKey,
    /// Meaningless while `Incomplete`.
    pub mac: EthernetAddress,
    pub state: NeighbourState,
    /// When a reply last confirmed the MAC (TSC).
    pub confirmed: u64,
    /// When the last request was sent (TSC).
    pub requested: u64,
    /// Requests sent since the entry was created.
    pub attempts: u32,
    /// Packets waiting.
    pub held: u16,
    live: bool,
    head: u32,
    tail: u32,
}

impl Neighbour {
    const VACANT: Neighbour = Neighbour {
        key: NeighbourKey {
            addr: [0; 16],
            port: 0,
            v4: false,
        },
        mac: EthernetAddress([0; 6]),
        state: NeighbourState::Incomplete,
        confirmed: 0,
        requested: 0,
        attempts: 0,
        held: 0,
        live: false,
        head: EMPTY,
        tail: EMPTY,
    };
}

/// "show neighbours": `10.1.0.2 port 1 02:00:00:00:00:c1 reachable`, with `held N` while
/// packets wait.
impl std::fmt::Display for Neighbour {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} port {} ", self.key.addr(), self.key.port())?;
        match self.state {
            NeighbourState::Incomplete => write!(f, "incomplete held {}", self.held),
            NeighbourState::Reachable => write!(f, "{} reachable", self.mac),
            NeighbourState::Static => write!(f, "{} static", self.mac),
        }
    }
}

/// A lookup's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Send to this MAC.
    Resolved(EthernetAddress),
    /// The entry at this slot is being resolved.
    Pending(u32),
    /// No entry.
    Unknown,
}

/// Why a packet or an entry was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Every entry is in use.
    TableFull,
    /// The neighbour's hold queue, or the shared hold pool, is full.
    HoldFull,
}

#[derive(Clone, Copy, Debug)]
struct HeldPacket {
    desc: Desc,
    next: u32,
}

/// How the sweep decides an entry's end.
#[derive(Clone, Copy, Debug)]
pub struct Timers {
    /// A reachable entry not confirmed for this many cycles is removed.
    pub aging: u64,
    /// Cycles between two requests for the same neighbour.
    pub retry: u64,
    /// Requests sent before an incomplete entry is given up.
    pub attempts: u32,
}

/// Address -> MAC with bounded hold queues. See the module documentation.
#[derive(Debug)]
pub struct NeighbourTable {
    index: Box<[u32]>,
    mask: usize,
    entries: Vec<Neighbour>,
    free: Vec<u32>,
    held: Vec<HeldPacket>,
    held_free: Vec<u32>,
    hold_per_neighbour: u16,
    sweep_at: usize,
    /// Advanced by every change that can alter a resolved answer; starts at 1, so 0 never
    /// matches.
    generation: u64,
}

impl NeighbourTable {
    /// The most entries a table is built with (larger requests are cut to it).
    pub const MAX_CAPACITY: usize = 1 << 20;
    /// The most packets a table holds in all (larger requests are cut to it).
    pub const MAX_HOLD: usize = 1 << 16;

    /// Slab slots the sweep visits per call.
    pub const SWEEP_STEP: usize = 8;

    /// A table of `capacity` entries (at least 1) holding at most `hold_per_neighbour` packets per
    /// unresolved neighbour and `hold_total` in all.
    pub fn new(capacity: usize, hold_per_neighbour: u16, hold_total: usize) -> Self {
        let capacity = capacity.clamp(1, Self::MAX_CAPACITY);
        let hold_total = hold_total.min(Self::MAX_HOLD);
        let slots = (capacity * 2).next_power_of_two();
        NeighbourTable {
            index: vec![EMPTY; slots].into_boxed_slice(),
            mask: slots - 1,
            entries: vec![Neighbour::VACANT; capacity],
            free: (0..capacity as u32).rev().collect(),
            held: vec![
                HeldPacket {
                    desc: Desc::default(),
                    next: EMPTY
                };
                hold_total
            ],
            held_free: (0..hold_total as u32).rev().collect(),
            hold_per_neighbour,
            sweep_at: 0,
            generation: 1,
        }
    }

    /// Changes with every entry that becomes resolved, changes its MAC, or goes away: an answer
    /// taken from the table under one generation holds as long as the generation is the same.
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Entries in use.
    pub fn len(&self) -> usize {
        self.entries.len() - self.free.len()
    }

    /// Whether no entry is in use.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most entries the table holds.
    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    /// Packets waiting, over all neighbours.
    pub fn held_packets(&self) -> usize {
        self.held.len() - self.held_free.len()
    }

    /// The index position of `key`, or where the probe ended on an empty slot.
    #[inline]
    fn probe(&self, key: &NeighbourKey) -> (usize, Option<u32>) {
        let mut pos = key.hash() as usize & self.mask;
        loop {
            let slot = self.index.get(pos).copied().unwrap_or(EMPTY);
            if slot == EMPTY {
                return (pos, None);
            }
            if self
                .entries
                .get(slot as usize)
                .is_some_and(|e| e.key == *key)
            {
                return (pos, Some(slot));
            }
            pos = (pos + 1) & self.mask;
        }
    }

    /// The slab slot of `key`.
    #[inline]
    pub fn find(&self, key: &NeighbourKey) -> Option<u32> {
        self.probe(key).1
    }

    /// The entry at `slot`.
    pub fn entry(&self, slot: u32) -> Option<&Neighbour> {
        self.entries.get(slot as usize).filter(|e| e.live)
    }

    /// The hot-path question: where does a packet for `key` go?
    #[inline]
    pub fn lookup(&self, key: &NeighbourKey) -> Lookup {
        match self
            .find(key)
            .and_then(|slot| self.entry(slot).map(|e| (slot, e)))
        {
            Some((_, e)) if e.state != NeighbourState::Incomplete => Lookup::Resolved(e.mac),
            Some((slot, _)) => Lookup::Pending(slot),
            None => Lookup::Unknown,
        }
    }

    fn insert(&mut self, neighbour: Neighbour) -> Result<u32, Refused> {
        let (pos, existing) = self.probe(&neighbour.key);
        if let Some(slot) = existing {
            return Ok(slot);
        }
        let slot = self.free.pop().ok_or(Refused::TableFull)?;
        if let Some(entry) = self.entries.get_mut(slot as usize) {
            *entry = Neighbour {
                live: true,
                ..neighbour
            };
        }
        if let Some(index) = self.index.get_mut(pos) {
            *index = slot;
        }
        Ok(slot)
    }

    /// Creates an incomplete entry for `key` (or returns the existing entry's slot).
    pub fn insert_incomplete(&mut self, key: NeighbourKey, now: u64) -> Result<u32, Refused> {
        self.insert(Neighbour {
            key,
            confirmed: now,
            ..Neighbour::VACANT
        })
    }

    /// Sets a static entry, replacing whatever the table knew. Returns its slot; packets that
    /// were waiting are left for the caller to [`NeighbourTable::drain`].
    pub fn set_static(&mut self, key: NeighbourKey, mac: EthernetAddress) -> Result<u32, Refused> {
        let slot = self.insert(Neighbour {
            key,
            ..Neighbour::VACANT
        })?;
        if let Some(entry) = self.entries.get_mut(slot as usize) {
            if entry.mac != mac || entry.state != NeighbourState::Static {
                self.generation += 1;
            }
            entry.mac = mac;
            entry.state = NeighbourState::Static;
        }
        Ok(slot)
    }

    /// Records what the wire said: `key` is at `mac`. Updates an existing non-static entry; with
    /// `create`, also makes a new one. Returns the slot when the entry is now reachable at
    /// `mac`, so the caller can send the packets that waited.
    pub fn learn(
        &mut self,
        key: NeighbourKey,
        mac: EthernetAddress,
        now: u64,
        create: bool,
    ) -> Result<Option<u32>, Refused> {
        let slot = match self.find(&key) {
            Some(slot) => slot,
            None if create => self.insert_incomplete(key, now)?,
            None => return Ok(None),
        };
        let Some(entry) = self.entries.get_mut(slot as usize) else {
            return Ok(None);
        };
        if entry.state == NeighbourState::Static {
            return Ok(None);
        }
        if entry.mac != mac || entry.state != NeighbourState::Reachable {
            self.generation += 1;
        }
        entry.mac = mac;
        entry.state = NeighbourState::Reachable;
        entry.confirmed = now;
        entry.attempts = 0;
        Ok(Some(slot))
    }

    /// Whether a request for the entry at `slot` should go out now (the previous one is `retry`
    /// cycles old and attempts remain); if so, records it as sent.
    pub fn request_due(&mut self, slot: u32, now: u64, timers: &Timers) -> bool {
        let Some(entry) = self.entries.get_mut(slot as usize).filter(|e| e.live) else {
            return false;
        };
        if entry.state != NeighbourState::Incomplete || entry.attempts >= timers.attempts {
            return false;
        }
        if entry.attempts > 0 && now.wrapping_sub(entry.requested) < timers.retry {
            return false;
        }
        entry.attempts += 1;
        entry.requested = now;
        true
    }

    /// Queues `desc` behind the entry at `slot`.
    pub fn hold(&mut self, slot: u32, desc: Desc) -> Result<(), Refused> {
        let Some(entry) = self.entries.get(slot as usize).filter(|e| e.live) else {
            return Err(Refused::HoldFull);
        };
        if entry.held >= self.hold_per_neighbour {
            return Err(Refused::HoldFull);
        }
        let tail = entry.tail;
        let cell = self.held_free.pop().ok_or(Refused::HoldFull)?;
        if let Some(held) = self.held.get_mut(cell as usize) {
            *held = HeldPacket { desc, next: EMPTY };
        }
        if let Some(previous) = self.held.get_mut(tail as usize) {
            previous.next = cell;
        }
        if let Some(entry) = self.entries.get_mut(slot as usize) {
            if entry.head == EMPTY {
                entry.head = cell;
            }
            entry.tail = cell;
            entry.held += 1;
        }
        Ok(())
    }

    /// Hands every packet waiting behind `slot` to `out`, oldest first, and empties the queue.
    pub fn drain(&mut self, slot: u32, mut out: impl FnMut(Desc)) {
        let Some(entry) = self.entries.get_mut(slot as usize) else {
            return;
        };
        let mut cell = entry.head;
        entry.head = EMPTY;
        entry.tail = EMPTY;
        entry.held = 0;
        while let Some(held) = self.held.get(cell as usize).copied() {
            out(held.desc);
            self.held_free.push(cell);
            cell = held.next;
        }
    }

    /// Deletes the entry at `slot`; its waiting packets go to `out`.
    pub fn remove(&mut self, slot: u32, out: impl FnMut(Desc)) {
        let Some(key) = self.entry(slot).map(|e| e.key) else {
            return;
        };
        self.drain(slot, out);
        let (pos, found) = self.probe(&key);
        if found == Some(slot) {
            self.unindex(pos);
        }
        if let Some(entry) = self.entries.get_mut(slot as usize) {
            *entry = Neighbour::VACANT;
        }
        self.free.push(slot);
        self.generation += 1;
    }

    /// Deletes the entry for `key`; its waiting packets go to `out`. Returns whether it existed.
    pub fn remove_key(&mut self, key: &NeighbourKey, out: impl FnMut(Desc)) -> bool {
        match self.find(key) {
            Some(slot) => {
                self.remove(slot, out);
                true
            }
            None => false,
        }
    }

    /// Backward-shift deletion of index position `pos`: later members of the probe run move up
    /// so that every lookup still meets its key before an empty slot.
    fn unindex(&mut self, pos: usize) {
        let mut hole = pos;
        let mut at = (pos + 1) & self.mask;
        loop {
            let slot = self.index.get(at).copied().unwrap_or(EMPTY);
            if slot == EMPTY {
                break;
            }
            let home = self
                .entries
                .get(slot as usize)
                .map_or(at, |e| e.key.hash() as usize & self.mask);
            if (at.wrapping_sub(home) & self.mask) >= (at.wrapping_sub(hole) & self.mask) {
                if let Some(h) = self.index.get_mut(hole) {
                    *h = slot;
                }
                hole = at;
            }
            at = (at + 1) & self.mask;
        }
        if let Some(h) = self.index.get_mut(hole) {
            *h = EMPTY;
        }
    }

    /// Visits the next [`NeighbourTable::SWEEP_STEP`] slab slots: removes reachable entries older
    /// than the aging time and incomplete entries whose attempts are spent and whose last request
    /// is `retry` old. Packets that waited go to `out`. Returns the entries removed.
    pub fn sweep(&mut self, now: u64, timers: &Timers, mut out: impl FnMut(Desc)) -> usize {
        let mut removed = 0;
        for _ in 0..Self::SWEEP_STEP.min(self.entries.len()) {
            let slot = self.sweep_at as u32;
            // A compare, not `%`: eight dependent divisions a batch cost the router's fast
            // path measurable time.
            self.sweep_at += 1;
            if self.sweep_at >= self.entries.len() {
                self.sweep_at = 0;
            }
            let Some(entry) = self.entry(slot) else {
                continue;
            };
            let expired = match entry.state {
                NeighbourState::Static => false,
                NeighbourState::Reachable => now.wrapping_sub(entry.confirmed) >= timers.aging,
                NeighbourState::Incomplete => {
                    entry.attempts >= timers.attempts
                        && now.wrapping_sub(entry.requested) >= timers.retry
                }
            };
            if expired {
                self.remove(slot, &mut out);
                removed += 1;
            }
        }
        removed
    }

    /// Every entry in use, for "show neighbours".
    pub fn iter(&self) -> impl Iterator<Item = &Neighbour> {
        self.entries.iter().filter(|e| e.live)
    }

    /// Hands every waiting packet of every entry to `out` (shutdown).
    pub fn release_all(&mut self, mut out: impl FnMut(Desc)) {
        for slot in 0..self.entries.len() as u32 {
            self.drain(slot, &mut out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMERS: Timers = Timers {
        aging: 1000,
        retry: 100,
        attempts: 3,
    };

    fn key(n: u32) -> NeighbourKey {
        NeighbourKey::v4(Ipv4Addr::from_bits(0x0a00_0000 + n), 1)
    }

    fn desc(frame: u32) -> Desc {
        Desc {
            frame,
            ..Desc::default()
        }
    }

    #[test]
    fn keys_round_trip_and_families_differ() {
        let v4 = NeighbourKey::v4(Ipv4Addr::new(10, 0, 0, 1), 3);
        assert_eq!(v4.addr(), IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
        assert_eq!(v4.port(), 3);
        let v6 = NeighbourKey::v6("::ffff:10.0.0.1".parse().unwrap(), 3);
        assert_ne!(v4, v6);
        assert!(matches!(v6.addr(), IpAddr::V6(_)));
    }

    #[test]
    fn resolves_holds_drains_in_order() {
        let mut table = NeighbourTable::new(4, 2, 3);
        assert_eq!(table.lookup(&key(1)), Lookup::Unknown);
        let slot = table.insert_incomplete(key(1), 0).unwrap();
        assert_eq!(table.lookup(&key(1)), Lookup::Pending(slot));
        assert!(table.request_due(slot, 0, &TIMERS));
        assert!(!table.request_due(slot, 50, &TIMERS), "paced");
        assert!(table.request_due(slot, 100, &TIMERS));
        table.hold(slot, desc(7)).unwrap();
        table.hold(slot, desc(8)).unwrap();
        assert_eq!(table.hold(slot, desc(9)), Err(Refused::HoldFull));
        let other = table.insert_incomplete(key(2), 0).unwrap();
        table.hold(other, desc(10)).unwrap();
        assert_eq!(
            table.hold(other, desc(11)),
            Err(Refused::HoldFull),
            "total cap"
        );
        let mac = EthernetAddress([2, 0, 0, 0, 0, 9]);
        assert_eq!(table.learn(key(1), mac, 5, false), Ok(Some(slot)));
        assert_eq!(table.lookup(&key(1)), Lookup::Resolved(mac));
        assert_eq!(
            table.entry(other).unwrap().to_string(),
            "10.0.0.2 port 1 incomplete held 1"
        );
        assert_eq!(
            table.entry(slot).unwrap().to_string(),
            "10.0.0.1 port 1 02:00:00:00:00:09 reachable"
        );
        let mut out = Vec::new();
        table.drain(slot, |d| out.push(d.frame));
        assert_eq!(out, [7, 8]);
        assert_eq!(table.held_packets(), 1);
        table.hold(other, desc(11)).unwrap();
        assert_eq!(table.learn(key(3), mac, 5, false), Ok(None), "no create");
    }

    #[test]
    fn the_generation_moves_with_every_change_of_a_resolved_answer_only() {
        let mut table = NeighbourTable::new(8, 2, 8);
        let (a, b) = (
            EthernetAddress([2, 0, 0, 0, 0, 1]),
            EthernetAddress([2, 0, 0, 0, 0, 2]),
        );
        let mut seen = table.generation();
        let mut changed = |table: &NeighbourTable| {
            let moved = table.generation() != seen;
            seen = table.generation();
            moved
        };
        let slot = table.insert_incomplete(key(1), 0).unwrap();
        assert!(!changed(&table), "an incomplete entry resolves nothing");
        table.learn(key(1), a, 5, false).unwrap();
        assert!(changed(&table), "resolved");
        table.learn(key(1), a, 9, false).unwrap();
        assert!(!changed(&table), "confirmed at the same MAC");
        table.learn(key(1), b, 9, false).unwrap();
        assert!(changed(&table), "moved to another MAC");
        table.set_static(key(1), b).unwrap();
        assert!(changed(&table), "made static");
        table.set_static(key(1), b).unwrap();
        assert!(!changed(&table), "the same static entry again");
        table.remove(slot, |_| {});
        assert!(changed(&table), "removed");
        table.learn(key(2), a, 0, true).unwrap();
        assert!(changed(&table), "learned");
        for _ in 0..2 {
            table.sweep(TIMERS.aging, &TIMERS, |_| {});
        }
        assert!(table.is_empty());
        assert!(changed(&table), "aged out");
    }

    #[test]
    fn static_entries_are_not_learned_over_nor_aged() {
        let mut table = NeighbourTable::new(4, 2, 4);
        let mac = EthernetAddress([2, 0, 0, 0, 0, 1]);
        table.set_static(key(1), mac).unwrap();
        assert_eq!(
            table.learn(key(1), EthernetAddress([2; 6]), 0, true),
            Ok(None)
        );
        assert_eq!(table.lookup(&key(1)), Lookup::Resolved(mac));
        for _ in 0..4 {
            table.sweep(u64::MAX / 2, &TIMERS, |_| {});
        }
        assert_eq!(table.len(), 1);
    }

    #[test]
    fn sweep_ages_and_gives_up() {
        let mut table = NeighbourTable::new(8, 4, 8);
        let mac = EthernetAddress([2, 0, 0, 0, 0, 1]);
        table.learn(key(1), mac, 0, true).unwrap();
        let pending = table.insert_incomplete(key(2), 0).unwrap();
        for t in [0, 100, 200] {
            assert!(table.request_due(pending, t, &TIMERS));
        }
        assert!(!table.request_due(pending, 300, &TIMERS), "attempts spent");
        table.hold(pending, desc(3)).unwrap();
        let mut freed = Vec::new();
        assert_eq!(table.sweep(250, &TIMERS, |d| freed.push(d.frame)), 0);
        assert_eq!(table.sweep(300, &TIMERS, |d| freed.push(d.frame)), 1);
        assert_eq!(freed, [3]);
        assert_eq!(table.sweep(1000, &TIMERS, |_| {}), 1);
        assert!(table.is_empty());
        assert_eq!(table.held_packets(), 0);
    }

    #[test]
    fn refuses_when_full_and_survives_churn() {
        let mut table = NeighbourTable::new(16, 1, 16);
        let mac = EthernetAddress([2, 0, 0, 0, 0, 1]);
        for n in 0..16 {
            table.learn(key(n), mac, 0, true).unwrap();
        }
        assert_eq!(table.learn(key(99), mac, 0, true), Err(Refused::TableFull));
        for round in 0..50u32 {
            let gone = key(round % 16);
            assert!(table.remove_key(&gone, |_| {}));
            for n in 0..16 {
                let present = table.find(&key(n)).is_some();
                assert_eq!(present, n != round % 16, "round {round} key {n}");
            }
            table.learn(gone, mac, 0, true).unwrap();
        }
        assert_eq!(table.len(), 16);
    }
}
