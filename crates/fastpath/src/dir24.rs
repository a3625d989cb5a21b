//! The kernel's IPv4 routes ([`KernelRoutes4`]): DIR-24-8 arrays in user space's own layout,
//! which the program reads (`tbl24`, `tbl8`) and this side writes through shared mappings.
//!
//! The arrays are a copy of an [`Ipv4Fib`] kept here, built from the router's changes as the
//! router builds its own: after each change, the entries it can have touched are copied into
//! the kernel's arrays, a word only where it differs. A route of length up to /24 touches the
//! tbl24 entries it covers and the tbl8 groups they point at; a longer one its /24's entry and
//! group. Groups are written before the tbl24 entries that point at them, so the program never
//! follows a pointer into a group not yet filled; a group freed by a removal is no longer
//! pointed at once the removal's tbl24 entry is copied, before any insert can reuse it. A
//! replacement (a million routes) builds a new table and copies it (where either table has
//! routes, or whole), while the router keeps `routes_ready` closed: the program then reads
//! neither array, so it never meets a group renumbered by the rebuild.
//!
//! Why a copy and not the LPM trie the kernel offers: at a million routes the trie's walk of
//! dozens of nodes held the router at 0.23x the XDP redirect, against 1.0x with one route
//! (docs/benchmarks.md, "The router on the fast path"); DIR-24-8 needs one or two reads.

use aya::maps::MapData;
use wirespeed_dataplane::table::fib::{Ipv4Fib, Ipv4Prefix, NextHop};
use wirespeed_packet::memory::SharedWords;

use crate::maps::{DIR24_BLOCK, DIR24_LOCAL, ROUTE_ECMP, ROUTE_LOCAL, TBL24_BLOCKS};

/// tbl8 groups of the kernel's array (32 MiB): a million BGP-like routes need about 15 600.
pub const TBL8_GROUPS: u32 = 1 << 15;

/// See the module documentation.
pub struct KernelRoutes4 {
    fib: Ipv4Fib,
    tbl24: SharedWords,
    tbl8: SharedWords,
    /// Groups of `tbl8` (its mapping's length in groups).
    groups: u32,
}

impl std::fmt::Debug for KernelRoutes4 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelRoutes4")
            .field("routes", &self.fib.len())
            .field("groups", &self.groups)
            .finish_non_exhaustive()
    }
}

impl KernelRoutes4 {
    /// Maps `tbl24` (of [`TBL24_BLOCKS`] blocks) and `tbl8` (of `groups` blocks), both empty.
    pub(crate) fn map(tbl24: &MapData, tbl8: &MapData, groups: u32) -> std::io::Result<Self> {
        use std::os::fd::AsFd;
        Self::over(tbl24.fd().as_fd(), tbl8.fd().as_fd(), groups)
    }

    /// [`Self::map`] over any two descriptors of the arrays' sizes, zeroed.
    fn over(
        tbl24: std::os::fd::BorrowedFd<'_>,
        tbl8: std::os::fd::BorrowedFd<'_>,
        groups: u32,
    ) -> std::io::Result<Self> {
        let words = |blocks: u32| blocks as usize * DIR24_BLOCK;
        Ok(KernelRoutes4 {
            fib: Ipv4Fib::with_tbl8_limit(groups),
            tbl24: SharedWords::map(tbl24, words(TBL24_BLOCKS))?,
            tbl8: SharedWords::map(tbl8, words(groups))?,
            groups,
        })
    }

    /// Sets the route `prefix` to the kernel's value `value` (a hop id, [`ROUTE_LOCAL`] or
    /// [`ROUTE_ECMP`]); false, and nothing changed, when the table cannot take it (no tbl8
    /// group left, or a hop id beyond the entries' 23 bits).
    pub(crate) fn insert(&mut self, prefix: Ipv4Prefix, value: u32) -> bool {
        let Some(hop) = next_hop(value) else {
            return false;
        };
        if self.fib.insert(prefix, hop).is_err() {
            return false;
        }
        self.copy(prefix);
        true
    }

    /// Removes the route for exactly `prefix` (absent is fine).
    pub(crate) fn remove(&mut self, prefix: Ipv4Prefix) {
        if self.fib.remove(prefix).is_some() {
            self.copy(prefix);
        }
    }

    /// Replaces every route by `routes` (prefix, kernel value) and copies the table whole;
    /// false, and nothing changed, when the table cannot take them (as [`Self::insert`]).
    pub(crate) fn replace(&mut self, routes: &[(Ipv4Prefix, u32)]) -> bool {
        let Some(routes) = routes
            .iter()
            .map(|&(prefix, value)| Some((prefix, next_hop(value)?)))
            .collect::<Option<Vec<_>>>()
        else {
            return false;
        };
        let Ok(fib) = Ipv4Fib::from_routes_with_tbl8_limit(self.groups, routes) else {
            return false;
        };
        let old = std::mem::replace(&mut self.fib, fib);
        // The copy can differ only where a route of either table lies: copied range by range
        // while those cover less than the table (a start-up's few routes: a whole copy is 16M
        // words), else whole.
        let prefixes = || {
            old.routes()
                .chain(self.fib.routes())
                .map(|(prefix, _)| prefix)
        };
        let covered: usize = prefixes()
            .map(|prefix| 1usize << 24u8.saturating_sub(prefix.len()))
            .sum();
        if covered < TBL24_ENTRIES {
            for prefix in prefixes() {
                self.copy(prefix);
            }
        } else {
            let (tbl24, tbl8) = self.fib.arrays();
            self.tbl8.write(0, tbl8);
            self.tbl24.write(0, tbl24);
        }
        true
    }

    /// Copies the entries a change of `prefix` can have touched (see the module documentation).
    fn copy(&self, prefix: Ipv4Prefix) {
        let (tbl24, tbl8) = self.fib.arrays();
        let first = (prefix.addr() >> 8) as usize;
        let count = 1usize << 24u8.saturating_sub(prefix.len());
        let Some(entries) = tbl24.get(first..first + count) else {
            return;
        };
        for &entry in entries {
            if entry & Ipv4Fib::ENTRY_GROUP != 0 {
                let start = (entry & GROUP_INDEX) as usize * DIR24_BLOCK;
                if let Some(group) = tbl8.get(start..start + DIR24_BLOCK) {
                    self.tbl8.write(start, group);
                }
            }
        }
        self.tbl24.write(first, entries);
    }
}

/// Entries of tbl24.
const TBL24_ENTRIES: usize = 1 << 24;
/// The bits of a tbl24 entry that number its tbl8 group.
const GROUP_INDEX: u32 = (1 << 24) - 1;

/// The table's next hop for the kernel's value `value`.
fn next_hop(value: u32) -> Option<NextHop> {
    match value {
        ROUTE_LOCAL => NextHop::hop(DIR24_LOCAL),
        ROUTE_ECMP => NextHop::ecmp(0),
        DIR24_LOCAL => None,
        id => NextHop::hop(id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::sync::atomic::Ordering;

    /// What the program would read for `addr` in the shared arrays.
    fn kernel_lookup(routes: &KernelRoutes4, addr: u32) -> u32 {
        let tbl24 = routes.tbl24.words();
        let entry = tbl24[(addr >> 8) as usize].load(Ordering::Relaxed);
        if entry & Ipv4Fib::ENTRY_GROUP == 0 {
            return entry;
        }
        let slot = (entry & GROUP_INDEX) as usize * DIR24_BLOCK + (addr & 0xff) as usize;
        routes.tbl8.words()[slot].load(Ordering::Relaxed)
    }

    /// Random routes changed one by one and replaced whole: after each step the program reads
    /// in the shared arrays what the router's own table answers, for destinations in and
    /// around every route.
    #[test]
    fn the_shared_arrays_answer_as_the_table_after_every_change() {
        let groups = 64;
        let scratch = |words| SharedWords::scratch(words).expect("scratch file");
        let (a, b) = (scratch(1 << 24), scratch(groups * DIR24_BLOCK));
        let mut routes = KernelRoutes4::over(a.as_fd(), b.as_fd(), groups as u32).expect("map");
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut prefixes = Vec::new();
        for step in 0..400 {
            let r = next();
            // Addresses in a few /16s so that routes overlap and share groups.
            let addr = 0x0a00_0000 | ((r as u32 % 4) << 16) | (r >> 20) as u32 & 0xffff;
            let len = [8, 12, 16, 20, 24, 25, 28, 32][(r >> 8) as usize % 8];
            let prefix = Ipv4Prefix::new(addr & (u32::MAX << (32 - len)), len).unwrap();
            match step % 10 {
                0..=5 => {
                    assert!(routes.insert(prefix, (r >> 40) as u32 % 1000 + 1));
                    prefixes.push(prefix);
                }
                6..=8 if !prefixes.is_empty() => {
                    routes.remove(prefixes.swap_remove((r >> 32) as usize % prefixes.len()));
                }
                _ => {
                    let keep: Vec<_> = prefixes
                        .iter()
                        .step_by(2)
                        .map(|&p| (p, routes.fib.route(p).map_or(0, NextHop::id)))
                        .collect();
                    assert!(routes.replace(&keep));
                    prefixes = keep.iter().map(|&(p, _)| p).collect();
                }
            }
            for &prefix in &prefixes {
                for addr in [prefix.addr(), prefix.addr() | 0xff, prefix.addr() ^ 0x100] {
                    let want = routes.fib.lookup(addr).map_or(0, |hop| hop.id());
                    let got = kernel_lookup(&routes, addr);
                    let got = if got & Ipv4Fib::ENTRY_VALID == 0 {
                        0
                    } else {
                        got & NextHop::MAX_ID
                    };
                    assert_eq!(got, want, "step {step}, {addr:#x}");
                }
            }
        }
    }

    #[test]
    fn kernel_values_become_entries_the_program_reads_back() {
        let local = next_hop(ROUTE_LOCAL).unwrap();
        assert_eq!((local.id(), local.is_ecmp()), (DIR24_LOCAL, false));
        assert!(next_hop(ROUTE_ECMP).unwrap().is_ecmp());
        assert_eq!(next_hop(7).unwrap().id(), 7);
        // The id that stands for "local" and ids beyond 23 bits are no hop.
        assert_eq!(next_hop(DIR24_LOCAL), None);
        assert_eq!(next_hop(1 << 23), None);
    }
}
