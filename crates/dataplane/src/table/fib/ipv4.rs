//! IPv4 FIB: DIR-24-8 (Gupta, Lin, McKeown, "Routing lookups in hardware at memory access speeds",
//! 1998; the layout of DPDK's rte_lpm).
//!
//! The first 24 bits of the destination index `tbl24`, a 2^24-entry array (64 MiB); an entry is a
//! next hop, empty, or the number of a 256-entry `tbl8` group that the last 8 bits index. So a
//! lookup is one read, or two for destinations under a prefix longer than /24 (about 1.5 % of a
//! BGP table). Prefixes are leaf-pushed: a /16 is written into the 256 tbl24 entries it covers.
//!
//! Entry (u32): bit 31 valid, bit 30 group pointer (tbl24 only, then bits 0..24 are the group
//! number), bits 24..30 the length of the prefix that wrote the entry, bits 0..24 the [`NextHop`].
//! The length lets insert leave longer prefixes alone and lets remove find the entries the
//! removed route wrote; what they fall back to comes from the route set kept beside the table
//! ([`Rib`]). A group is allocated when the first prefix longer than /24 lands in its /24 and
//! freed when the last one leaves (then no entry of it is longer than /24, so all 256 entries are
//! equal and collapse back into the tbl24 entry).
//!
//! Memory: 64 MiB for tbl24 plus 1 KiB per group in use; groups are capped by the tbl8 limit
//! ([`Ipv4Fib::with_tbl8_limit`], default 65 536). A 1M-route BGP-like table needs about 15 000
//! groups, about 80 MiB in all (see `benches/fib.rs`).

use super::prefix::Ipv4Prefix;
use super::rib::Rib;
use super::{ECMP, FibError, NextHop, VALID, reserve_blocks};
use wirespeed_packet::memory::ReservedTable;

const TBL24_LEN: usize = 1 << 24;
const GROUP_LEN: usize = 256;
const GROUP: u32 = 1 << 30;
const GROUP_INDEX: u32 = (1 << 24) - 1;
const DEPTH_SHIFT: u32 = 24;

/// The length of the prefix that wrote `entry` (0 for an empty entry).
const fn depth(entry: u32) -> u8 {
    ((entry >> DEPTH_SHIFT) & 0x3f) as u8
}

/// The table entry for `hop` written by a prefix of length `len`.
const fn entry(hop: NextHop, len: u8) -> u32 {
    hop.bits() | ((len as u32) << DEPTH_SHIFT)
}

/// The lookup arrays, apart from the route set so that a build can read one and write the other.
struct Tables {
    /// An array, not a slice, of 2^24 entries: any address shifted right by 8 indexes it, so a
    /// lookup needs no bounds check.
    tbl24: Box<[u32; TBL24_LEN]>,
    /// The groups, reserved for the tbl8 limit at creation (see `reserve_blocks`).
    tbl8: ReservedTable<u32>,
    free: Vec<u32>,
    limit: u32,
}

impl Tables {
    fn groups_allocated(&self) -> usize {
        self.tbl8.len() / GROUP_LEN
    }

    /// The tbl8 group of the /24 at `index`, allocated (a copy of the tbl24 entry in every slot)
    /// if it has none yet.
    fn group_of(&mut self, index: usize) -> Result<usize, FibError> {
        let Some(&current) = self.tbl24.get(index) else {
            return Err(FibError::PrefixLength { len: 33, max: 32 });
        };
        if current & GROUP != 0 {
            return Ok((current & GROUP_INDEX) as usize);
        }
        let group = match self.free.pop() {
            Some(group) => {
                let group = group as usize;
                if let Some(slots) = self
                    .tbl8
                    .get_mut(group * GROUP_LEN..(group + 1) * GROUP_LEN)
                {
                    slots.fill(current);
                }
                group
            }
            None => {
                let group = self.groups_allocated();
                if group >= self.limit as usize {
                    return Err(FibError::Tbl8Exhausted { limit: self.limit });
                }
                if !self.tbl8.grow(GROUP_LEN, current) {
                    return Err(FibError::Tbl8Exhausted { limit: self.limit });
                }
                group
            }
        };
        if let Some(slot) = self.tbl24.get_mut(index) {
            *slot = GROUP | group as u32;
        }
        Ok(group)
    }

    /// The slots `first..first + count` of `group`.
    fn group_slots(&mut self, group: usize, first: usize, count: usize) -> &mut [u32] {
        let start = group * GROUP_LEN + first;
        self.tbl8.get_mut(start..start + count).unwrap_or_default()
    }

    /// Writes `new` (from a prefix of length `len`) into every slot the prefix `addr/len` covers
    /// whose current prefix is not longer: `overwrite` skips that test (bulk build, shortest first).
    fn write(&mut self, addr: u32, len: u8, new: u32, overwrite: bool) -> Result<(), FibError> {
        let keep = |slot: u32| !overwrite && depth(slot) > len;
        if len <= 24 {
            let first = (addr >> 8) as usize;
            let count = 1usize << (24 - len);
            let Tables { tbl24, tbl8, .. } = self;
            for slot in tbl24.get_mut(first..first + count).unwrap_or_default() {
                if *slot & GROUP != 0 {
                    let start = (*slot & GROUP_INDEX) as usize * GROUP_LEN;
                    for inner in tbl8.get_mut(start..start + GROUP_LEN).unwrap_or_default() {
                        if !keep(*inner) {
                            *inner = new;
                        }
                    }
                } else if !keep(*slot) {
                    *slot = new;
                }
            }
        } else {
            let group = self.group_of((addr >> 8) as usize)?;
            let count = 1usize << (32 - len);
            for slot in self.group_slots(group, (addr & 0xff) as usize, count) {
                if !keep(*slot) {
                    *slot = new;
                }
            }
        }
        Ok(())
    }

    /// Replaces what the prefix `addr/len` wrote by `replacement`, and frees the group of a
    /// /24 that no longer holds a prefix longer than /24.
    fn erase(&mut self, addr: u32, len: u8, replacement: u32) {
        let written = |slot: u32| slot & VALID != 0 && depth(slot) == len;
        let Tables {
            tbl24, tbl8, free, ..
        } = self;
        if len <= 24 {
            let first = (addr >> 8) as usize;
            let count = 1usize << (24 - len);
            for slot in tbl24.get_mut(first..first + count).unwrap_or_default() {
                if *slot & GROUP != 0 {
                    let start = (*slot & GROUP_INDEX) as usize * GROUP_LEN;
                    for inner in tbl8.get_mut(start..start + GROUP_LEN).unwrap_or_default() {
                        if written(*inner) {
                            *inner = replacement;
                        }
                    }
                } else if written(*slot) {
                    *slot = replacement;
                }
            }
            return;
        }
        let Some(head) = tbl24.get_mut((addr >> 8) as usize) else {
            return;
        };
        if *head & GROUP == 0 {
            return;
        }
        let group = *head & GROUP_INDEX;
        let start = group as usize * GROUP_LEN;
        let Some(slots) = tbl8.get_mut(start..start + GROUP_LEN) else {
            return;
        };
        let first = (addr & 0xff) as usize;
        for slot in slots.iter_mut().skip(first).take(1 << (32 - len)) {
            if written(*slot) {
                *slot = replacement;
            }
        }
        if slots.iter().all(|&slot| depth(slot) <= 24) {
            *head = slots.first().copied().unwrap_or(0);
            free.push(group);
        }
    }
}

/// IPv4 longest-prefix-match table (DIR-24-8) with its route set.
pub struct Ipv4Fib {
    tables: Tables,
    rib: Rib<u32>,
}

impl Default for Ipv4Fib {
    fn default() -> Self {
        Self::new()
    }
}

impl Ipv4Fib {
    /// Entries of a tbl8 group (the last 8 bits of a destination index one).
    pub const GROUP_LEN: usize = GROUP_LEN;
    /// Entry bit: a route (see the module documentation for the entry's layout).
    pub const ENTRY_VALID: u32 = VALID;
    /// Entry bit: a tbl24 entry that holds a tbl8 group number (bits 0..24) instead of a route.
    pub const ENTRY_GROUP: u32 = GROUP;
    /// Entry bit: the route's next hop is an ECMP group.
    pub const ENTRY_ECMP: u32 = ECMP;

    /// Default cap on tbl8 groups (64 MiB of groups at most).
    pub const DEFAULT_TBL8_LIMIT: u32 = 1 << 16;
    /// The most tbl8 groups an entry can address.
    pub const MAX_TBL8_LIMIT: u32 = 1 << 24;

    /// An empty table with the default tbl8 limit. Allocates tbl24 (64 MiB, zeroed lazily by
    /// the OS).
    pub fn new() -> Self {
        Self::with_tbl8_limit(Self::DEFAULT_TBL8_LIMIT)
    }

    /// An empty table that allocates at most `groups` tbl8 groups (capped at
    /// [`Ipv4Fib::MAX_TBL8_LIMIT`]): that many /24s may hold prefixes longer than /24. The
    /// address space for that many groups is reserved at once (it takes memory only as groups
    /// are made; see `reserve_blocks` for a system that refuses so much).
    pub fn with_tbl8_limit(groups: u32) -> Self {
        let Ok(tbl24) = Box::<[u32; TBL24_LEN]>::try_from(vec![0; TBL24_LEN].into_boxed_slice())
        else {
            unreachable!("a boxed slice of TBL24_LEN entries is a boxed array of them");
        };
        // Before the first write faults its pages in: random lookups then miss the TLB far
        // less (see `wirespeed_packet::memory`).
        wirespeed_packet::memory::advise_huge_pages(&tbl24[..]);
        let (tbl8, limit) = reserve_blocks(0, GROUP_LEN, groups.min(Self::MAX_TBL8_LIMIT));
        Ipv4Fib {
            tables: Tables {
                tbl24,
                tbl8,
                free: Vec::new(),
                limit,
            },
            rib: Rib::new(),
        }
    }

    /// Builds a table from `routes` in one pass (a later duplicate prefix wins), much faster
    /// than inserting one by one: every prefix is written once, shortest first.
    pub fn from_routes(
        routes: impl IntoIterator<Item = (Ipv4Prefix, NextHop)>,
    ) -> Result<Self, FibError> {
        Self::from_routes_with_tbl8_limit(Self::DEFAULT_TBL8_LIMIT, routes)
    }

    /// [`Ipv4Fib::from_routes`] with a tbl8 limit.
    pub fn from_routes_with_tbl8_limit(
        groups: u32,
        routes: impl IntoIterator<Item = (Ipv4Prefix, NextHop)>,
    ) -> Result<Self, FibError> {
        let mut fib = Self::with_tbl8_limit(groups);
        let routes: Vec<(Ipv4Prefix, NextHop)> = routes.into_iter().collect();
        let mut per_len = [0usize; 33];
        let mut long_slash24s = Vec::new();
        for (prefix, _) in &routes {
            if let Some(n) = per_len.get_mut(usize::from(prefix.len())) {
                *n += 1;
            }
            if prefix.len() > 24 {
                long_slash24s.push(prefix.addr() >> 8);
            }
        }
        long_slash24s.sort_unstable();
        long_slash24s.dedup();
        let groups_needed = long_slash24s.len();
        if groups_needed > fib.tables.limit as usize {
            return Err(FibError::Tbl8Exhausted {
                limit: fib.tables.limit,
            });
        }
        fib.rib.reserve(&per_len);
        for (prefix, hop) in routes {
            fib.rib.insert(prefix.addr(), prefix.len(), hop);
        }
        let Ipv4Fib { tables, rib } = &mut fib;
        for len in 0..=32 {
            for (addr, hop) in rib.of_len(len) {
                tables.write(addr, len, entry(hop, len), true)?;
            }
        }
        Ok(fib)
    }

    /// Adds or replaces the route `prefix -> hop`; returns the next hop it replaced. Fails, and
    /// changes nothing, when the prefix is longer than /24 and no tbl8 group is left.
    pub fn insert(
        &mut self,
        prefix: Ipv4Prefix,
        hop: NextHop,
    ) -> Result<Option<NextHop>, FibError> {
        let (addr, len) = (prefix.addr(), prefix.len());
        // Writes first: the only failure (no group left) happens before anything changed.
        self.tables.write(addr, len, entry(hop, len), false)?;
        Ok(self.rib.insert(addr, len, hop))
    }

    /// Deletes the route for exactly `prefix`; returns its next hop. Destinations it covered fall
    /// back to the longest remaining route that covers them.
    pub fn remove(&mut self, prefix: Ipv4Prefix) -> Option<NextHop> {
        let (addr, len) = (prefix.addr(), prefix.len());
        let hop = self.rib.remove(addr, len)?;
        let replacement = self.rib.covering(addr, len).map_or(0, |(l, h)| entry(h, l));
        self.tables.erase(addr, len, replacement);
        Some(hop)
    }

    /// The next hop of exactly `prefix` (not a longest-prefix match).
    pub fn route(&self, prefix: Ipv4Prefix) -> Option<NextHop> {
        self.rib.route(prefix.addr(), prefix.len())
    }

    /// Every route, shortest prefixes first.
    pub fn routes(&self) -> impl Iterator<Item = (Ipv4Prefix, NextHop)> + '_ {
        self.rib
            .iter()
            .filter_map(|(addr, len, hop)| Ipv4Prefix::new(addr, len).ok().map(|p| (p, hop)))
    }

    /// Number of routes.
    pub fn len(&self) -> usize {
        self.rib.len()
    }

    /// The lookup arrays as they stand: tbl24 (2^24 entries) and the tbl8 groups made so far
    /// ([`Ipv4Fib::GROUP_LEN`] entries each), entries as the module documentation lays them
    /// out. For a copy that another reader looks up the same way: the XDP fast path's arrays.
    pub fn arrays(&self) -> (&[u32], &[u32]) {
        (&self.tables.tbl24[..], &self.tables.tbl8[..])
    }

    /// Whether the table holds no route.
    pub fn is_empty(&self) -> bool {
        self.rib.len() == 0
    }

    /// The next hop for destination `addr` (host order, `Ipv4Addr::to_bits`): one read, two under
    /// a prefix longer than /24.
    #[inline]
    pub fn lookup(&self, addr: u32) -> Option<NextHop> {
        NextHop::from_entry(self.entry(addr))
    }

    /// The hop id of the route for `addr` when that route names one next hop, `None` when
    /// there is no route or it names an ECMP group: [`Ipv4Fib::lookup`] and
    /// [`NextHop::target`] in one test of the entry's flags, for the router's fast path.
    #[inline(always)]
    pub fn lookup_hop(&self, addr: u32) -> Option<u32> {
        let entry = self.entry(addr);
        (entry & (VALID | ECMP) == VALID).then_some(entry & NextHop::MAX_ID)
    }

    /// The table entry that decides `addr`: its tbl24 entry, or the tbl8 slot that one points
    /// to.
    #[inline(always)]
    fn entry(&self, addr: u32) -> u32 {
        // In bounds: a 24-bit index into 2^24 entries.
        let slot = self.tables.tbl24[(addr >> 8) as usize];
        if slot & GROUP == 0 {
            return slot;
        }
        let index = ((slot & GROUP_INDEX) as usize) << 8 | (addr & 0xff) as usize;
        self.tables.tbl8.get(index).copied().unwrap_or(0)
    }

    /// Starts bringing the tbl24 entry of `addr` into the cache, so that a lookup of `addr`
    /// issued a little later does not wait for memory (l3fwd's prefetch of the next packets).
    #[inline(always)]
    pub fn prefetch(&self, addr: u32) {
        // In bounds, as in `entry`.
        wirespeed_packet::cpu::prefetch(&self.tables.tbl24[(addr >> 8) as usize]);
    }

    /// Looks up `addrs[i]` into `out[i]` for `i < min(addrs.len(), out.len())`.
    ///
    /// The lookups of a batch are independent, so the CPU keeps many tbl24 misses in flight at
    /// once when they come back to back in one tight loop. Measured at 1M routes (benches/fib.rs,
    /// same run): this loop 126 M lookups/s, a DPDK-style split (read every tbl24 entry of a
    /// 32-address step into an array, then follow the groups) 54 M/s: the split only adds
    /// instructions per lookup, and the oldest outstanding load holds the reorder buffer either
    /// way. Prefetching pays only when there is other work between it and the lookup
    /// ([`Ipv4Fib::prefetch`]).
    pub fn lookup_batch(&self, addrs: &[u32], out: &mut [Option<NextHop>]) {
        for (result, &addr) in out.iter_mut().zip(addrs) {
            *result = self.lookup(addr);
        }
    }

    /// Bytes of the lookup arrays (tbl24 and the allocated tbl8 groups): what the data plane
    /// touches.
    pub fn memory_bytes(&self) -> usize {
        (self.tables.tbl24.len() + self.tables.tbl8.len()) * size_of::<u32>()
    }

    /// Bytes of the route set kept for the control plane.
    pub fn rib_memory_bytes(&self) -> usize {
        self.rib.memory_bytes()
    }

    /// tbl8 groups in use (one per /24 that holds a prefix longer than /24).
    pub fn tbl8_groups_in_use(&self) -> usize {
        self.tables.groups_allocated() - self.tables.free.len()
    }

    /// The most tbl8 groups this table will allocate.
    pub fn tbl8_limit(&self) -> u32 {
        self.tables.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(addr: [u8; 4], len: u8) -> Ipv4Prefix {
        Ipv4Prefix::new(u32::from_be_bytes(addr), len).unwrap()
    }
    fn a(addr: [u8; 4]) -> u32 {
        u32::from_be_bytes(addr)
    }
    fn hop(id: u32) -> NextHop {
        NextHop::hop(id).unwrap()
    }

    #[test]
    fn removing_a_middle_prefix_keeps_longer_and_restores_shorter() {
        let mut fib = Ipv4Fib::new();
        fib.insert(p([10, 0, 0, 0], 8), hop(8)).unwrap();
        fib.insert(p([10, 1, 2, 0], 24), hop(24)).unwrap();
        fib.insert(p([10, 1, 0, 0], 16), hop(16)).unwrap();
        fib.insert(p([10, 1, 2, 128], 25), hop(25)).unwrap();
        assert_eq!(fib.lookup(a([10, 1, 3, 1])), Some(hop(16)));
        assert_eq!(fib.lookup(a([10, 1, 2, 1])), Some(hop(24)));
        assert_eq!(fib.lookup(a([10, 1, 2, 200])), Some(hop(25)));
        assert_eq!(fib.remove(p([10, 1, 0, 0], 16)), Some(hop(16)));
        assert_eq!(fib.lookup(a([10, 1, 3, 1])), Some(hop(8)));
        assert_eq!(fib.lookup(a([10, 1, 2, 1])), Some(hop(24)));
        assert_eq!(fib.lookup(a([10, 1, 2, 200])), Some(hop(25)));
        assert_eq!(fib.remove(p([10, 1, 2, 0], 24)), Some(hop(24)));
        assert_eq!(fib.lookup(a([10, 1, 2, 1])), Some(hop(8)));
        assert_eq!(fib.lookup(a([10, 1, 2, 129])), Some(hop(25)));
        assert_eq!(fib.lookup(a([11, 0, 0, 0])), None);
        assert_eq!(fib.remove(p([10, 1, 0, 0], 16)), None, "already gone");
        assert_eq!(fib.len(), 2);
    }

    #[test]
    fn default_route_and_host_routes() {
        let mut fib = Ipv4Fib::new();
        fib.insert(p([0, 0, 0, 0], 0), hop(0)).unwrap();
        fib.insert(p([255, 255, 255, 255], 32), hop(1)).unwrap();
        fib.insert(p([0, 0, 0, 0], 32), hop(2)).unwrap();
        assert_eq!(fib.lookup(0), Some(hop(2)));
        assert_eq!(fib.lookup(1), Some(hop(0)));
        assert_eq!(fib.lookup(u32::MAX), Some(hop(1)));
        assert_eq!(fib.lookup(u32::MAX - 1), Some(hop(0)));
        assert_eq!(
            fib.insert(p([0, 0, 0, 0], 0), hop(5)),
            Ok(Some(hop(0))),
            "replace"
        );
        assert_eq!(fib.lookup(1), Some(hop(5)));
        assert_eq!(fib.remove(p([0, 0, 0, 0], 0)), Some(hop(5)));
        assert_eq!(fib.lookup(1), None);
        assert_eq!(fib.lookup(0), Some(hop(2)));
        assert_eq!(fib.remove(p([0, 0, 0, 0], 32)), Some(hop(2)));
        assert_eq!(fib.remove(p([255, 255, 255, 255], 32)), Some(hop(1)));
        assert_eq!(fib.lookup(0), None);
        assert_eq!(fib.tbl8_groups_in_use(), 0);
        assert!(fib.is_empty());
    }

    #[test]
    fn the_largest_tbl8_limit_reserves_what_the_system_allows_and_forwards() {
        let mut fib = Ipv4Fib::with_tbl8_limit(Ipv4Fib::MAX_TBL8_LIMIT);
        assert!(fib.tbl8_limit() > 0);
        let start = fib.tables.tbl8.as_ptr();
        for i in 0..600u32 {
            let [_, b, c, _] = (i << 8).to_be_bytes();
            fib.insert(p([10, b, c, 64], 26), hop(i % 5 + 1)).unwrap();
        }
        assert_eq!(fib.tables.tbl8.as_ptr(), start, "tbl8 moved");
        assert_eq!(fib.tbl8_groups_in_use(), 600);
        for i in 0..600u32 {
            let [_, b, c, _] = (i << 8).to_be_bytes();
            assert_eq!(fib.lookup(a([10, b, c, 100])), Some(hop(i % 5 + 1)));
            assert_eq!(fib.lookup(a([10, b, c, 1])), None);
        }
    }

    #[test]
    fn tbl8_exhaustion_is_an_error_and_changes_nothing() {
        let mut fib = Ipv4Fib::with_tbl8_limit(2);
        fib.insert(p([1, 0, 0, 0], 25), hop(1)).unwrap();
        fib.insert(p([1, 0, 0, 128], 25), hop(2)).unwrap(); // same /24, same group
        fib.insert(p([2, 0, 0, 0], 26), hop(3)).unwrap();
        fib.insert(p([3, 0, 0, 0], 8), hop(4)).unwrap();
        let err = fib.insert(p([3, 0, 0, 0], 30), hop(5));
        assert_eq!(err, Err(FibError::Tbl8Exhausted { limit: 2 }));
        assert!(err.unwrap_err().to_string().contains("with_tbl8_limit"));
        assert_eq!(fib.route(p([3, 0, 0, 0], 30)), None);
        assert_eq!(fib.lookup(a([3, 0, 0, 1])), Some(hop(4)));
        assert_eq!(fib.tbl8_groups_in_use(), 2);
        let routes = [
            (p([1, 0, 0, 0], 25), hop(1)),
            (p([2, 0, 0, 0], 25), hop(1)),
            (p([3, 0, 0, 0], 25), hop(1)),
        ];
        assert_eq!(
            Ipv4Fib::from_routes_with_tbl8_limit(2, routes).err(),
            Some(FibError::Tbl8Exhausted { limit: 2 })
        );
    }

    #[test]
    fn a_group_is_freed_with_its_last_long_prefix_and_reused() {
        let mut fib = Ipv4Fib::new();
        fib.insert(p([10, 0, 0, 0], 8), hop(8)).unwrap();
        fib.insert(p([10, 1, 1, 16], 28), hop(28)).unwrap();
        fib.insert(p([10, 1, 1, 16], 30), hop(30)).unwrap();
        fib.insert(p([10, 1, 1, 0], 24), hop(24)).unwrap();
        assert_eq!(fib.tbl8_groups_in_use(), 1);
        assert_eq!(fib.lookup(a([10, 1, 1, 17])), Some(hop(30)));
        assert_eq!(fib.lookup(a([10, 1, 1, 21])), Some(hop(28)));
        assert_eq!(fib.lookup(a([10, 1, 1, 99])), Some(hop(24)));
        fib.remove(p([10, 1, 1, 16], 28)).unwrap();
        assert_eq!(fib.tbl8_groups_in_use(), 1);
        assert_eq!(fib.lookup(a([10, 1, 1, 21])), Some(hop(24)));
        fib.remove(p([10, 1, 1, 16], 30)).unwrap();
        assert_eq!(
            fib.tbl8_groups_in_use(),
            0,
            "last long prefix gone, group freed"
        );
        assert_eq!(fib.lookup(a([10, 1, 1, 17])), Some(hop(24)));
        fib.remove(p([10, 1, 1, 0], 24)).unwrap();
        assert_eq!(fib.lookup(a([10, 1, 1, 17])), Some(hop(8)));
        let bytes = fib.memory_bytes();
        fib.insert(p([20, 0, 0, 0], 32), hop(32)).unwrap();
        assert_eq!(fib.tbl8_groups_in_use(), 1);
        assert_eq!(
            fib.memory_bytes(),
            bytes,
            "freed group reused, nothing allocated"
        );
        assert_eq!(fib.lookup(a([20, 0, 0, 0])), Some(hop(32)));
        assert_eq!(fib.lookup(a([20, 0, 0, 1])), None);
    }

    #[test]
    fn batch_matches_single_lookups_and_ecmp_hops_pass_through() {
        let mut fib = Ipv4Fib::new();
        let group = NextHop::ecmp(3).unwrap();
        fib.insert(p([192, 168, 0, 0], 16), group).unwrap();
        fib.insert(p([192, 168, 7, 7], 32), hop(NextHop::MAX_ID))
            .unwrap();
        let addrs: Vec<u32> = (0..100u32)
            .map(|i| a([192, 168, 7, 0]) + i * 3 - 30)
            .collect();
        let mut out = vec![None; addrs.len()];
        fib.lookup_batch(&addrs, &mut out);
        for (&addr, &result) in addrs.iter().zip(&out) {
            assert_eq!(result, fib.lookup(addr));
        }
        assert_eq!(fib.lookup(a([192, 168, 9, 9])), Some(group));
        assert_eq!(
            fib.lookup(a([192, 168, 7, 7])).map(NextHop::id),
            Some(NextHop::MAX_ID)
        );
        let mut short = [None; 2];
        fib.lookup_batch(&addrs, &mut short);
        assert_eq!(short[1], fib.lookup(addrs[1]));
    }
}
