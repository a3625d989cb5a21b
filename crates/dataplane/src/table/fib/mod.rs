//! The router's longest-prefix-match tables (FIB): [`Ipv4Fib`] (DIR-24-8) and [`Ipv6Fib`]
//! (a 16-8-8-... multibit trie), their compressed alternatives [`Ipv4Trie`] and [`Ipv6Trie`]
//! (Poptrie: the same interface in a few MiB, see [`Poptrie`]), plus [`EcmpGroups`] to spread a
//! prefix over several next hops. The router holds [`Fib4`] and [`Fib6`], which are either
//! structure as `[router] fib` says ([`FibKind`]).
//!
//! A FIB maps a prefix to a [`NextHop`]: a small integer the router resolves in its own next-hop
//! table (output port, MAC addresses). A next hop is either one hop id or an ECMP group id; the
//! router asks [`EcmpGroups::resolve`] to pick a group member by the packet's flow hash, so one
//! flow always takes the same path.
//!
//! Both tables keep the route set (the RIB, [`rib`]) beside the lookup structure: removing a route
//! must restore whatever covering route was shadowed by it, and only the route set knows that.
//! Allocation happens on the control path (insert, remove, build); lookups never allocate.
//! Lookups come in two forms: `lookup(addr)` and `lookup_batch(addrs, out)`, which keeps the cache
//! misses of many destinations in flight together. How, was measured (benches/fib.rs): the IPv6
//! trie walks a step of [`LOOKUP_STEP`] destinations level by level in lockstep (2.4x the single
//! lookups at 200k routes); DIR-24-8 needs at most two reads, and a tight loop of independent
//! reads overlapped them better than a DPDK-style index-then-read split. A caller that knows its
//! destinations well before it looks them up (the router, right after the parse) starts their
//! tbl24 reads with `Ipv4Fib::prefetch` (`wirespeed_packet::cpu::prefetch`). Every lookup array
//! is in transparent huge pages, so that random reads into it do not miss the TLB as well: tbl24
//! asks for them at its allocation, and the arrays that grow (tbl8, the IPv6 trie's nodes) are
//! [`ReservedTable`]s, which never move and so keep them ([`reserve_blocks`]).

mod choice;
mod ecmp;
mod ipv4;
mod ipv6;
mod poptrie;
mod prefix;
mod rib;

use core::fmt;
use core::num::NonZeroU32;

use wirespeed_packet::memory::ReservedTable;

pub use choice::{Fib4, Fib6, FibKind};
pub use ecmp::EcmpGroups;
pub use ipv4::Ipv4Fib;
pub use ipv6::Ipv6Fib;
pub use poptrie::{Ipv4Trie, Ipv6Trie, Poptrie};
pub use prefix::{Ipv4Prefix, Ipv6Prefix};

/// A lookup array reserved for `fixed` entries and up to `limit` blocks of `block` entries (tbl8
/// groups, trie nodes), with `fixed` of them in use (zero); returns it and the block limit it
/// holds. The reservation takes memory only as the array grows; where the system refuses one
/// that large (strict overcommit), the limit is halved until it accepts one, and the table's
/// "exhausted" error names the limit that holds.
fn reserve_blocks(fixed: usize, block: usize, limit: u32) -> (ReservedTable<u32>, u32) {
    let mut limit = limit;
    loop {
        let capacity = fixed.saturating_add(block.saturating_mul(limit as usize));
        match ReservedTable::new(capacity) {
            Some(mut table) => {
                table.grow(fixed, 0);
                return (table, limit);
            }
            None if limit > 0 => limit /= 2,
            None => panic!("cannot reserve a lookup array of {fixed} entries: out of memory"),
        }
    }
}

/// Number of addresses one `lookup_batch` step handles together (its arrays live on the stack).
pub const LOOKUP_STEP: usize = 32;

/// Marks a table entry (and every [`NextHop`]) as a route; an all-zero entry is "no route".
const VALID: u32 = 1 << 31;
/// Marks a [`NextHop`] as an ECMP group rather than a single hop.
const ECMP: u32 = 1 << 23;
/// The bits of a table entry that form the [`NextHop`].
const HOP_BITS: u32 = VALID | ECMP | NextHop::MAX_ID;

/// The result of a FIB lookup: one next-hop id, or one ECMP group id.
///
/// Stored as the table entry itself (bit 31 set, bit 23 = ECMP, bits 0..23 the id), so a lookup
/// turns an entry into a `NextHop` with a mask and `Option<NextHop>` is four bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct NextHop(NonZeroU32);

/// What a [`NextHop`] designates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// One entry of the router's next-hop table.
    Hop(u32),
    /// One group of [`EcmpGroups`]; the flow hash picks the member.
    Ecmp(u32),
}

impl NextHop {
    /// The largest hop id or ECMP group id a FIB entry can carry (23 bits).
    pub const MAX_ID: u32 = (1 << 23) - 1;

    /// A single next hop, `None` if `id` exceeds [`NextHop::MAX_ID`].
    pub const fn hop(id: u32) -> Option<NextHop> {
        if id > Self::MAX_ID {
            return None;
        }
        match NonZeroU32::new(VALID | id) {
            Some(raw) => Some(NextHop(raw)),
            None => None,
        }
    }

    /// An ECMP group, `None` if `group` exceeds [`NextHop::MAX_ID`].
    pub const fn ecmp(group: u32) -> Option<NextHop> {
        if group > Self::MAX_ID {
            return None;
        }
        match NonZeroU32::new(VALID | ECMP | group) {
            Some(raw) => Some(NextHop(raw)),
            None => None,
        }
    }

    /// The hop id or the group id (see [`NextHop::is_ecmp`]).
    pub const fn id(self) -> u32 {
        self.0.get() & Self::MAX_ID
    }

    /// Whether this designates an ECMP group.
    pub const fn is_ecmp(self) -> bool {
        self.0.get() & ECMP != 0
    }

    /// What this next hop designates.
    pub const fn target(self) -> Target {
        if self.is_ecmp() {
            Target::Ecmp(self.id())
        } else {
            Target::Hop(self.id())
        }
    }

    /// The entry bits stored in a table (valid flag, ECMP flag, id).
    const fn bits(self) -> u32 {
        self.0.get()
    }

    /// The next hop a table entry holds: `None` unless its valid bit is set. Branch-free.
    #[inline(always)]
    fn from_entry(entry: u32) -> Option<NextHop> {
        // All ones when bit 31 is set, zero otherwise.
        let valid = ((entry as i32) >> 31) as u32;
        NonZeroU32::new(entry & HOP_BITS & valid).map(NextHop)
    }
}

impl fmt::Debug for NextHop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.target() {
            Target::Hop(id) => write!(f, "NextHop::hop({id})"),
            Target::Ecmp(group) => write!(f, "NextHop::ecmp({group})"),
        }
    }
}

/// Why a FIB change was refused. The table is unchanged when one of these is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FibError {
    /// A prefix length beyond the address width.
    #[error("prefix length /{len} is longer than the {max} bits of the address; use 0..={max}")]
    PrefixLength {
        /// The length asked for.
        len: u8,
        /// The address width.
        max: u8,
    },
    /// Every second-level group of the IPv4 table is in use.
    #[error(
        "IPv4 FIB: all {limit} tbl8 groups (one per /24 holding prefixes longer than /24) are in \
         use; build the table with Ipv4Fib::with_tbl8_limit(larger) or aggregate the long prefixes"
    )]
    Tbl8Exhausted {
        /// The configured number of groups.
        limit: u32,
    },
    /// Every trie node of the IPv6 table is in use.
    #[error(
        "IPv6 FIB: all {limit} trie nodes (256 entries each) are in use; build the table with \
         Ipv6Fib::with_node_limit(larger) or aggregate the prefixes"
    )]
    NodesExhausted {
        /// The configured number of nodes.
        limit: u32,
    },
    /// Every node, or every leaf, of a Poptrie table is in use.
    #[error(
        "Poptrie FIB: all {limit} nodes (or the eight leaves per node allowed with them) are in \
         use; build the table with Ipv4Trie/Ipv6Trie::with_node_limit(larger) or aggregate the \
         prefixes"
    )]
    TrieNodesExhausted {
        /// The configured number of nodes.
        limit: u32,
    },
    /// An ECMP group with no members, or with more members than a group may hold.
    #[error("ECMP group with {members} members; a group needs 1..={max} members")]
    EcmpMembers {
        /// The number of members given.
        members: usize,
        /// The most a group may hold.
        max: usize,
    },
    /// More ECMP groups than a [`NextHop`] can designate.
    #[error(
        "ECMP: {count} groups exist, the most a NextHop can address is {max}; remove unused groups"
    )]
    EcmpGroupsFull {
        /// Groups in use.
        count: usize,
        /// The limit.
        max: u32,
    },
    /// An ECMP group id that does not exist.
    #[error("ECMP group {group} does not exist; create it with EcmpGroups::insert")]
    UnknownEcmpGroup {
        /// The id asked for.
        group: u32,
    },
}
