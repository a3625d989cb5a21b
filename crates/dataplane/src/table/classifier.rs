//! The wildcard classifier: priority rules over masked flow keys, found by tuple space search.
//!
//! Every rule is a [`FlowMatch`] (a key and a mask over [`FlowKey`]'s fields) with a priority.
//! Rules with the same mask share a *subtable*: a hash map from the masked key to the rules with
//! that masked value. A lookup masks the packet's key once per subtable and probes that
//! subtable's map, so its cost grows with the number of distinct masks, not of rules (Open
//! vSwitch's dpcls, `lib/dpif-netdev-dpcls.h`, does the same). Ten masks over a thousand rules
//! cost ten hash probes.
//!
//! Subtables are visited in the order of their hits (re-ranked by [`Classifier::rank`], which
//! the stages call between batches), so the subtable that decides most packets is probed first.
//! Because a rule of a later subtable may still have a higher priority, each subtable records
//! the highest priority it holds, and the search skips a subtable that cannot beat the best
//! match found so far. Ties between equal priorities go to the rule inserted first, so the
//! result is the same as a linear scan of the rules in insertion order, whatever the ranking.
//!
//! A lookup also reports which fields it *consulted* (the union of the masks of the subtables
//! it probed): a packet that agrees with this key on those fields gets the same answer. The
//! openflow app builds its megaflows from that.
//!
//! Maps key on the masked key as seven 64-bit words (masking is seven ANDs) hashed by
//! independent multiplications. Insertions and removals allocate and are control-path operations; a lookup never
//! allocates. Capacity is fixed at construction and counted when it refuses a rule.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::net::{Ipv4Addr, Ipv6Addr};

use wirespeed_packet::flow_key::FlowKey;
use wirespeed_packet::wire::EthernetAddress;

use crate::table::flow_cache::Words;

/// A wildcard match: a packet's key `k` matches when `k & mask == key`, and the pipeline's
/// metadata `m` (OpenFlow's, written by earlier tables) when `m & metadata_mask == metadata`.
///
/// `key` is kept normalized (`key & mask == key`, the same for the metadata), so two matches
/// over the same packets compare equal. The builder methods set one field each.
///
/// The metadata is no part of the flow key: it exists only while the slow path walks the
/// tables, and it follows from what the earlier tables matched (consulted fields), so a
/// megaflow stays exact without carrying it. Rules differing only in it share a subtable and a
/// list, where the lookup takes the best whose metadata matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowMatch {
    key: FlowKey,
    mask: FlowKey,
    metadata: u64,
    metadata_mask: u64,
}

impl Default for FlowMatch {
    fn default() -> Self {
        Self::any()
    }
}

/// `key & mask`, field by field.
#[inline]
pub fn mask_key(key: &FlowKey, mask: &FlowKey) -> FlowKey {
    let and16 = |a: &[u8; 16], b: &[u8; 16]| -> [u8; 16] {
        (u128::from_ne_bytes(*a) & u128::from_ne_bytes(*b)).to_ne_bytes()
    };
    let and6 = |a: &EthernetAddress, b: &EthernetAddress| {
        let mut out = [0u8; 6];
        for (o, (x, y)) in out.iter_mut().zip(a.0.iter().zip(b.0.iter())) {
            *o = x & y;
        }
        EthernetAddress(out)
    };
    FlowKey {
        ip_src: and16(&key.ip_src, &mask.ip_src),
        ip_dst: and16(&key.ip_dst, &mask.ip_dst),
        dst_mac: and6(&key.dst_mac, &mask.dst_mac),
        src_mac: and6(&key.src_mac, &mask.src_mac),
        in_port: key.in_port & mask.in_port,
        ip_tos: key.ip_tos & mask.ip_tos,
        vlan: key.vlan & mask.vlan,
        ethertype: key.ethertype & mask.ethertype,
        l4_src: key.l4_src & mask.l4_src,
        l4_dst: key.l4_dst & mask.l4_dst,
        ip_proto: key.ip_proto & mask.ip_proto,
        flags: key.flags & mask.flags,
    }
}

/// `a | b`, field by field (the union of two masks).
#[inline]
pub fn union_mask(a: &FlowKey, b: &FlowKey) -> FlowKey {
    let or16 = |x: &[u8; 16], y: &[u8; 16]| -> [u8; 16] {
        (u128::from_ne_bytes(*x) | u128::from_ne_bytes(*y)).to_ne_bytes()
    };
    let or6 = |x: &EthernetAddress, y: &EthernetAddress| {
        let mut out = [0u8; 6];
        for (o, (p, q)) in out.iter_mut().zip(x.0.iter().zip(y.0.iter())) {
            *o = p | q;
        }
        EthernetAddress(out)
    };
    FlowKey {
        ip_src: or16(&a.ip_src, &b.ip_src),
        ip_dst: or16(&a.ip_dst, &b.ip_dst),
        dst_mac: or6(&a.dst_mac, &b.dst_mac),
        src_mac: or6(&a.src_mac, &b.src_mac),
        in_port: a.in_port | b.in_port,
        ip_tos: a.ip_tos | b.ip_tos,
        vlan: a.vlan | b.vlan,
        ethertype: a.ethertype | b.ethertype,
        l4_src: a.l4_src | b.l4_src,
        l4_dst: a.l4_dst | b.l4_dst,
        ip_proto: a.ip_proto | b.ip_proto,
        flags: a.flags | b.flags,
    }
}

/// A 128-bit mask of the first `len` bits (clamped to 128), as big-endian bytes.
fn prefix_mask(len: u8) -> [u8; 16] {
    let len = u32::from(len.min(128));
    let bits = u128::MAX.checked_shl(128 - len).unwrap_or(0);
    bits.to_be_bytes()
}

/// The 128-bit mask of an IPv4 address mask in a key (IPv4-mapped: the 96 bits above it are
/// the mapping's, always matched).
fn v4_mask(mask: Ipv4Addr) -> [u8; 16] {
    (u128::MAX << 32 | u128::from(mask.to_bits())).to_be_bytes()
}

fn v4_prefix(len: u8) -> Ipv4Addr {
    Ipv4Addr::from_bits(
        u32::MAX
            .checked_shl(32 - u32::from(len.min(32)))
            .unwrap_or(0),
    )
}

fn and_bytes(a: [u8; 16], b: [u8; 16]) -> [u8; 16] {
    (u128::from_ne_bytes(a) & u128::from_ne_bytes(b)).to_ne_bytes()
}

impl FlowMatch {
    /// Matches every packet.
    pub const fn any() -> Self {
        Self {
            key: FlowKey::EMPTY,
            mask: FlowKey::EMPTY,
            metadata: 0,
            metadata_mask: 0,
        }
    }

    /// A match from a key and a mask (the key is normalized), any metadata.
    pub fn new(key: FlowKey, mask: FlowKey) -> Self {
        Self {
            key: mask_key(&key, &mask),
            mask,
            metadata: 0,
            metadata_mask: 0,
        }
    }

    /// Exactly this key, every field.
    pub fn exact(key: FlowKey) -> Self {
        let mask = FlowKey {
            ip_src: [0xff; 16],
            ip_dst: [0xff; 16],
            dst_mac: EthernetAddress([0xff; 6]),
            src_mac: EthernetAddress([0xff; 6]),
            in_port: u8::MAX,
            ip_tos: u8::MAX,
            vlan: u16::MAX,
            ethertype: u16::MAX,
            l4_src: u16::MAX,
            l4_dst: u16::MAX,
            ip_proto: u8::MAX,
            flags: u8::MAX,
        };
        Self::new(key, mask)
    }

    pub fn key(&self) -> &FlowKey {
        &self.key
    }

    pub fn mask(&self) -> &FlowKey {
        &self.mask
    }

    /// The metadata matched and its mask (mask 0: any).
    pub fn metadata_match(&self) -> (u64, u64) {
        (self.metadata, self.metadata_mask)
    }

    /// Whether some packet matches both: wherever both masks have bits, the keys agree.
    pub fn overlaps(&self, other: &FlowMatch) -> bool {
        let (key, mask) = (self.key.words(), self.mask.words());
        let (other_key, other_mask) = (other.key.words(), other.mask.words());
        (0..key.len()).all(|i| (key[i] ^ other_key[i]) & mask[i] & other_mask[i] == 0)
            && (self.metadata ^ other.metadata) & self.metadata_mask & other.metadata_mask == 0
    }

    /// Whether a packet with `key` matches (its metadata aside).
    #[inline]
    pub fn matches(&self, key: &FlowKey) -> bool {
        mask_key(key, &self.mask) == self.key
    }

    /// Whether the pipeline's metadata `metadata` matches.
    #[inline]
    pub fn matches_metadata(&self, metadata: u64) -> bool {
        metadata & self.metadata_mask == self.metadata
    }

    /// Whether every packet `other` matches is matched by `self` too (`self` is at most as
    /// specific as `other` and agrees with it): OpenFlow's non-strict flow selection.
    pub fn covers(&self, other: &FlowMatch) -> bool {
        union_mask(&self.mask, &other.mask) == other.mask
            && mask_key(&other.key, &self.mask) == self.key
            && self.metadata_mask | other.metadata_mask == other.metadata_mask
            && other.metadata & self.metadata_mask == self.metadata
    }

    /// The pipeline's metadata under `mask` (OpenFlow's OXM `metadata`, which write-metadata
    /// in an earlier table sets).
    pub fn metadata(mut self, value: u64, mask: u64) -> Self {
        self.metadata = value & mask;
        self.metadata_mask = mask;
        self
    }

    /// Ingress port (an index past [`FlowKey::MAX_PORTS`] is the key's "no port").
    pub fn in_port(mut self, port: u16) -> Self {
        self.key.in_port = FlowKey::port_byte(port);
        self.mask.in_port = u8::MAX;
        self
    }

    /// IP DSCP (6 bits; the prerequisite IPv4 or IPv6 is the caller's).
    pub fn ip_dscp(mut self, dscp: u8) -> Self {
        self.key.ip_tos =
            (self.key.ip_tos & !FlowKey::TOS_DSCP) | ((dscp << 2) & FlowKey::TOS_DSCP);
        self.mask.ip_tos |= FlowKey::TOS_DSCP;
        self
    }

    /// IP ECN (2 bits; the prerequisite IPv4 or IPv6 is the caller's).
    pub fn ip_ecn(mut self, ecn: u8) -> Self {
        self.key.ip_tos = (self.key.ip_tos & !FlowKey::TOS_ECN) | (ecn & FlowKey::TOS_ECN);
        self.mask.ip_tos |= FlowKey::TOS_ECN;
        self
    }

    pub fn eth_dst(self, mac: EthernetAddress) -> Self {
        self.eth_dst_masked(mac, EthernetAddress([0xff; 6]))
    }

    pub fn eth_src(self, mac: EthernetAddress) -> Self {
        self.eth_src_masked(mac, EthernetAddress([0xff; 6]))
    }

    /// The destination MAC address's bits under `mask` (any bits, not only a prefix).
    pub fn eth_dst_masked(mut self, mac: EthernetAddress, mask: EthernetAddress) -> Self {
        self.key.dst_mac = EthernetAddress(std::array::from_fn(|i| mac.0[i] & mask.0[i]));
        self.mask.dst_mac = mask;
        self
    }

    /// The source MAC address's bits under `mask`.
    pub fn eth_src_masked(mut self, mac: EthernetAddress, mask: EthernetAddress) -> Self {
        self.key.src_mac = EthernetAddress(std::array::from_fn(|i| mac.0[i] & mask.0[i]));
        self.mask.src_mac = mask;
        self
    }

    /// EtherType after the VLAN tags.
    pub fn ethertype(mut self, ethertype: u16) -> Self {
        self.key.ethertype = ethertype;
        self.mask.ethertype = u16::MAX;
        self
    }

    /// Tagged with outer VLAN id `vid` (its priority aside).
    pub fn vlan(mut self, vid: u16) -> Self {
        self.key.vlan = (self.key.vlan & !FlowKey::VLAN_VID) | (vid & FlowKey::VLAN_VID);
        self.mask.vlan |= FlowKey::VLAN_VID;
        self.key.flags |= FlowKey::FLAG_VLAN;
        self.mask.flags |= FlowKey::FLAG_VLAN;
        self
    }

    /// Tagged, any VLAN id and priority.
    pub fn tagged(mut self) -> Self {
        self.key.flags |= FlowKey::FLAG_VLAN;
        self.mask.flags |= FlowKey::FLAG_VLAN;
        self
    }

    /// Tagged, the outer tag's priority (PCP, 0..7) `pcp` (its id aside).
    pub fn vlan_pcp(mut self, pcp: u8) -> Self {
        let bits = (u16::from(pcp) << FlowKey::VLAN_PCP_SHIFT) & FlowKey::VLAN_PCP;
        self.key.vlan = (self.key.vlan & !FlowKey::VLAN_PCP) | bits;
        self.mask.vlan |= FlowKey::VLAN_PCP;
        self.key.flags |= FlowKey::FLAG_VLAN;
        self.mask.flags |= FlowKey::FLAG_VLAN;
        self
    }

    /// Not VLAN tagged.
    pub fn untagged(mut self) -> Self {
        self.key.vlan = 0;
        self.mask.vlan = FlowKey::VLAN_VID;
        self.key.flags &= !FlowKey::FLAG_VLAN;
        self.mask.flags |= FlowKey::FLAG_VLAN;
        self
    }

    /// IP protocol (IPv6: upper-layer next header).
    pub fn ip_proto(mut self, protocol: u8) -> Self {
        self.key.ip_proto = protocol;
        self.mask.ip_proto = u8::MAX;
        self
    }

    /// IPv4 source in `addr/len` (also requires the packet to be IPv4).
    pub fn ipv4_src(self, addr: Ipv4Addr, len: u8) -> Self {
        self.ipv4_src_masked(addr, v4_prefix(len))
    }

    /// IPv4 destination in `addr/len` (also requires the packet to be IPv4).
    pub fn ipv4_dst(self, addr: Ipv4Addr, len: u8) -> Self {
        self.ipv4_dst_masked(addr, v4_prefix(len))
    }

    /// IPv4 source bits under `mask`, any bits (also requires the packet to be IPv4).
    pub fn ipv4_src_masked(self, addr: Ipv4Addr, mask: Ipv4Addr) -> Self {
        self.address(true, FlowKey::map_ipv4(addr), v4_mask(mask), 0x0800)
    }

    /// IPv4 destination bits under `mask` (also requires the packet to be IPv4).
    pub fn ipv4_dst_masked(self, addr: Ipv4Addr, mask: Ipv4Addr) -> Self {
        self.address(false, FlowKey::map_ipv4(addr), v4_mask(mask), 0x0800)
    }

    /// IPv6 source in `addr/len` (also requires the packet to be IPv6).
    pub fn ipv6_src(self, addr: Ipv6Addr, len: u8) -> Self {
        self.ipv6_src_masked(addr, Ipv6Addr::from(prefix_mask(len)))
    }

    /// IPv6 destination in `addr/len` (also requires the packet to be IPv6).
    pub fn ipv6_dst(self, addr: Ipv6Addr, len: u8) -> Self {
        self.ipv6_dst_masked(addr, Ipv6Addr::from(prefix_mask(len)))
    }

    /// IPv6 source bits under `mask`, any bits (also requires the packet to be IPv6).
    pub fn ipv6_src_masked(self, addr: Ipv6Addr, mask: Ipv6Addr) -> Self {
        self.address(true, addr.octets(), mask.octets(), 0x86dd)
    }

    /// IPv6 destination bits under `mask` (also requires the packet to be IPv6).
    pub fn ipv6_dst_masked(self, addr: Ipv6Addr, mask: Ipv6Addr) -> Self {
        self.address(false, addr.octets(), mask.octets(), 0x86dd)
    }

    /// The key's source (`src`) or destination address under `mask`, and the EtherType of
    /// the frames that carry it there.
    fn address(mut self, src: bool, addr: [u8; 16], mask: [u8; 16], ethertype: u16) -> Self {
        let (key, key_mask) = if src {
            (&mut self.key.ip_src, &mut self.mask.ip_src)
        } else {
            (&mut self.key.ip_dst, &mut self.mask.ip_dst)
        };
        *key = and_bytes(addr, mask);
        *key_mask = mask;
        self.ethertype(ethertype)
    }

    /// ARP's operation (requires the frame to be ARP). The flow key keeps its low byte where
    /// IP keeps the protocol, as Open vSwitch does: operations are 1..=25 (IANA).
    pub fn arp_op(mut self, operation: u8) -> Self {
        self.key.ip_proto = operation;
        self.mask.ip_proto = u8::MAX;
        self.ethertype(0x0806)
    }

    /// ARP's sender protocol address under `mask` (in the key's source address, IPv4-mapped).
    pub fn arp_spa(self, addr: Ipv4Addr, mask: Ipv4Addr) -> Self {
        self.address(true, FlowKey::map_ipv4(addr), v4_mask(mask), 0x0806)
    }

    /// ARP's target protocol address under `mask` (in the key's destination address).
    pub fn arp_tpa(self, addr: Ipv4Addr, mask: Ipv4Addr) -> Self {
        self.address(false, FlowKey::map_ipv4(addr), v4_mask(mask), 0x0806)
    }

    /// ICMP / ICMPv6 type: the high byte of the key's source port field (the parser keeps
    /// `type << 8 | code` there).
    pub fn icmp_type(mut self, icmp_type: u8) -> Self {
        self.key.l4_src = (self.key.l4_src & 0x00ff) | u16::from(icmp_type) << 8;
        self.mask.l4_src |= 0xff00;
        self
    }

    /// ICMP / ICMPv6 code: the low byte of the key's source port field.
    pub fn icmp_code(mut self, code: u8) -> Self {
        self.key.l4_src = (self.key.l4_src & 0xff00) | u16::from(code);
        self.mask.l4_src |= 0x00ff;
        self
    }

    /// TCP/UDP source port.
    pub fn l4_src(mut self, port: u16) -> Self {
        self.key.l4_src = port;
        self.mask.l4_src = u16::MAX;
        self
    }

    /// TCP/UDP destination port.
    pub fn l4_dst(mut self, port: u16) -> Self {
        self.key.l4_dst = port;
        self.mask.l4_dst = u16::MAX;
        self
    }
}

/// A rule's handle: stable while the rule exists; reused after it is removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(pub u32);

/// Why the classifier refused a rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClassifierError {
    /// Every slot is in use.
    #[error("classifier full ({capacity} rules): remove rules or build it with a larger capacity")]
    Full { capacity: usize },
}

/// Counters of a classifier.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassifierCounters {
    pub lookups: u64,
    pub hits: u64,
    /// Subtables probed, over all lookups (divided by `lookups`: the cost of a lookup).
    pub probes: u64,
    /// Rules refused because the classifier was full.
    pub refused: u64,
}

struct Rule<T> {
    priority: u32,
    /// Insertion order: breaks ties between equal priorities (first inserted wins).
    sequence: u64,
    matcher: FlowMatch,
    subtable: usize,
    data: T,
}

/// A masked key as the seven words of [`FlowKey::words`]: the map key of a subtable.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Masked(Words);

impl Masked {
    fn of(key: &FlowKey) -> Self {
        Masked(key.words())
    }
}

impl Hash for Masked {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // Independent multiplications (no chain through the words), then one mixing step.
        const K: [u64; 7] = [
            0x9e37_79b9_7f4a_7c15,
            0xc2b2_ae3d_27d4_eb4f,
            0x1656_67b1_9e37_79f9,
            0x85eb_ca77_c2b2_ae63,
            0x27d4_eb2f_1656_67c5,
            0xff51_afd7_ed55_8ccd,
            0xc4ce_b9fe_1a85_ec53,
        ];
        let mut h = 0u64;
        for (word, k) in self.0.iter().zip(K) {
            h ^= word.wrapping_mul(k);
        }
        // MurmurHash3's finalizer: a product only carries a bit upwards, so without shifts
        // that bring every bit down, keys that differ in high bits only (IPv4 addresses sit
        // in the top half of their word) shared their low bits, which index the map: 100 000
        // /32 flows probed one group, and inserting them was quadratic.
        h ^= h >> 33;
        h = h.wrapping_mul(K[5]);
        h ^= h >> 33;
        h = h.wrapping_mul(K[6]);
        h ^= h >> 33;
        state.write_u64(h);
    }
}

/// Passes the value [`Masked`] wrote through (it is mixed already).
#[derive(Default)]
struct PassHasher(u64);

impl Hasher for PassHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

#[derive(Clone, Copy, Default)]
struct BuildPass;

impl BuildHasher for BuildPass {
    type Hasher = PassHasher;
    fn build_hasher(&self) -> PassHasher {
        PassHasher::default()
    }
}

struct Subtable {
    mask: FlowKey,
    mask_words: Words,
    /// Masked key -> rules with that value, best first (priority down, then insertion order).
    map: HashMap<Masked, Vec<u32>, BuildPass>,
    rules: usize,
    max_priority: u32,
    /// Rules of priority `max_priority`: only removing the last of them makes the subtable
    /// look for its new highest priority (a scan of its rules), not every removal at the
    /// highest priority (deleting 100 000 flows of one priority was quadratic).
    at_max: usize,
    hits: u64,
}

/// Priority rules over masked keys, each carrying a `T`.
pub struct Classifier<T> {
    rules: Vec<Option<Rule<T>>>,
    free: Vec<u32>,
    subtables: Vec<Subtable>,
    /// Subtable indexes in probing order (most hits first).
    order: Vec<usize>,
    capacity: usize,
    sequence: u64,
    len: usize,
    counters: ClassifierCounters,
}

impl<T> Classifier<T> {
    /// An empty classifier for at most `capacity` rules.
    pub fn new(capacity: usize) -> Self {
        Self {
            rules: Vec::new(),
            free: Vec::new(),
            subtables: Vec::new(),
            order: Vec::new(),
            capacity,
            sequence: 0,
            len: 0,
            counters: ClassifierCounters::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Number of distinct masks (subtables) in use.
    pub fn masks(&self) -> usize {
        self.order.len()
    }

    pub fn counters(&self) -> ClassifierCounters {
        self.counters
    }

    /// Adds a rule. Control path: may allocate.
    pub fn insert(
        &mut self,
        priority: u32,
        matcher: FlowMatch,
        data: T,
    ) -> Result<RuleId, ClassifierError> {
        if self.len >= self.capacity {
            self.counters.refused += 1;
            return Err(ClassifierError::Full {
                capacity: self.capacity,
            });
        }
        let subtable = match self
            .subtables
            .iter()
            .position(|s| s.rules > 0 && s.mask == matcher.mask)
        {
            Some(index) => index,
            None => {
                let index = match self.subtables.iter().position(|s| s.rules == 0) {
                    Some(index) => index,
                    None => {
                        self.subtables.push(Subtable {
                            mask: matcher.mask,
                            mask_words: matcher.mask.words(),
                            map: HashMap::with_hasher(BuildPass),
                            rules: 0,
                            max_priority: 0,
                            at_max: 0,
                            hits: 0,
                        });
                        self.subtables.len() - 1
                    }
                };
                let table = &mut self.subtables[index];
                table.mask = matcher.mask;
                table.mask_words = matcher.mask.words();
                table.hits = 0;
                table.max_priority = 0;
                table.at_max = 0;
                self.order.push(index);
                index
            }
        };
        let sequence = self.sequence;
        self.sequence += 1;
        let rule = Rule {
            priority,
            sequence,
            matcher,
            subtable,
            data,
        };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.rules[slot as usize] = Some(rule);
                slot
            }
            None => {
                self.rules.push(Some(rule));
                (self.rules.len() - 1) as u32
            }
        };
        let rules = &self.rules;
        let rank = |id: &u32| {
            rules[*id as usize]
                .as_ref()
                .map(|r| (std::cmp::Reverse(r.priority), r.sequence))
        };
        let table = &mut self.subtables[subtable];
        let list = table.map.entry(Masked::of(&matcher.key)).or_default();
        let at = list.partition_point(|id| rank(id) <= rank(&slot));
        list.insert(at, slot);
        table.rules += 1;
        if priority > table.max_priority || table.at_max == 0 {
            table.max_priority = priority;
            table.at_max = 1;
        } else if priority == table.max_priority {
            table.at_max += 1;
        }
        self.len += 1;
        Ok(RuleId(slot))
    }

    /// Removes a rule and returns its data; `None` when `id` names no rule.
    pub fn remove(&mut self, id: RuleId) -> Option<T> {
        let rule = self.rules.get_mut(id.0 as usize)?.take()?;
        let table = &mut self.subtables[rule.subtable];
        if let Some(list) = table.map.get_mut(&Masked::of(&rule.matcher.key)) {
            list.retain(|&slot| slot != id.0);
            if list.is_empty() {
                table.map.remove(&Masked::of(&rule.matcher.key));
            }
        }
        table.rules -= 1;
        if table.rules == 0 {
            let index = rule.subtable;
            self.order.retain(|&i| i != index);
            table.map = HashMap::with_hasher(BuildPass);
        } else if rule.priority == table.max_priority {
            table.at_max -= 1;
            if table.at_max == 0 {
                let priorities = table
                    .map
                    .values()
                    .flatten()
                    .filter_map(|&slot| self.rules[slot as usize].as_ref())
                    .map(|r| r.priority);
                let max = priorities.clone().max().unwrap_or(0);
                table.max_priority = max;
                table.at_max = priorities.filter(|&p| p == max).count();
            }
        }
        self.free.push(id.0);
        self.len -= 1;
        Some(rule.data)
    }

    /// Removes every rule.
    pub fn clear(&mut self) {
        self.rules.clear();
        self.free.clear();
        self.subtables.clear();
        self.order.clear();
        self.len = 0;
    }

    /// The rule with exactly this priority and match, if any.
    pub fn find(&self, priority: u32, matcher: &FlowMatch) -> Option<RuleId> {
        let table = self
            .subtables
            .iter()
            .find(|s| s.mask == matcher.mask && s.rules > 0)?;
        table
            .map
            .get(&Masked::of(&matcher.key))?
            .iter()
            .copied()
            .find(|&slot| {
                self.rules[slot as usize]
                    .as_ref()
                    .is_some_and(|r| r.priority == priority && r.matcher == *matcher)
            })
            .map(RuleId)
    }

    pub fn data(&self, id: RuleId) -> Option<&T> {
        self.rules.get(id.0 as usize)?.as_ref().map(|r| &r.data)
    }

    pub fn data_mut(&mut self, id: RuleId) -> Option<&mut T> {
        self.rules
            .get_mut(id.0 as usize)?
            .as_mut()
            .map(|r| &mut r.data)
    }

    /// The rule's priority and match.
    pub fn rule(&self, id: RuleId) -> Option<(u32, &FlowMatch)> {
        self.rules
            .get(id.0 as usize)?
            .as_ref()
            .map(|r| (r.priority, &r.matcher))
    }

    /// Every rule: id, priority, match and data, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (RuleId, u32, &FlowMatch, &T)> {
        self.iter_slots(0..self.rules.len())
    }

    /// Slots so far, in use or free: every rule id is below this.
    pub fn slots(&self) -> usize {
        self.rules.len()
    }

    /// The rules whose slots are in `range`, as [`Classifier::iter`] gives them: one page of
    /// a table read in bounded parts.
    pub fn iter_slots(
        &self,
        range: std::ops::Range<usize>,
    ) -> impl Iterator<Item = (RuleId, u32, &FlowMatch, &T)> {
        let end = range.end.min(self.rules.len());
        let start = range.start.min(end);
        self.rules[start..end]
            .iter()
            .enumerate()
            .filter_map(move |(at, rule)| {
                rule.as_ref()
                    .map(|r| (RuleId((start + at) as u32), r.priority, &r.matcher, &r.data))
            })
    }

    /// Every rule's data, mutable (control path: timers, counters).
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.rules.iter_mut().flatten().map(|r| &mut r.data)
    }

    /// The best rule for `key` with the pipeline's `metadata`: highest priority, then first
    /// inserted. `consulted` receives the union of the masks of every subtable probed: the
    /// fields the answer depends on.
    #[inline]
    pub fn lookup(
        &mut self,
        key: &FlowKey,
        metadata: u64,
        consulted: &mut FlowKey,
    ) -> Option<RuleId> {
        self.search::<true>(key, metadata, consulted)
    }

    /// The best rule for `key` (metadata 0), without recording the consulted fields (the fast
    /// path).
    #[inline]
    pub fn classify(&mut self, key: &FlowKey) -> Option<RuleId> {
        let mut unused = FlowKey::EMPTY;
        self.search::<false>(key, 0, &mut unused)
    }

    #[inline]
    fn search<const CONSULT: bool>(
        &mut self,
        key: &FlowKey,
        metadata: u64,
        consulted: &mut FlowKey,
    ) -> Option<RuleId> {
        self.counters.lookups += 1;
        let words = key.words();
        let mut best: Option<(u32, u64, u32, usize)> = None;
        for &index in &self.order {
            let table = &self.subtables[index];
            if let Some((priority, ..)) = best
                && table.max_priority < priority
            {
                continue;
            }
            self.counters.probes += 1;
            if CONSULT {
                *consulted = union_mask(consulted, &table.mask);
            }
            let mut masked = words;
            for (word, mask) in masked.iter_mut().zip(&table.mask_words) {
                *word &= mask;
            }
            let Some(list) = table.map.get(&Masked(masked)) else {
                continue;
            };
            // Best first: the first whose metadata matches (with no metadata match, the first).
            let rules = &self.rules;
            let Some((slot, rule)) = list.iter().find_map(|&slot| {
                let rule = rules[slot as usize].as_ref()?;
                rule.matcher
                    .matches_metadata(metadata)
                    .then_some((slot, rule))
            }) else {
                continue;
            };
            let better = match best {
                None => true,
                Some((priority, sequence, ..)) => {
                    rule.priority > priority
                        || (rule.priority == priority && rule.sequence < sequence)
                }
            };
            if better {
                best = Some((rule.priority, rule.sequence, slot, index));
            }
        }
        let (_, _, slot, index) = best?;
        self.subtables[index].hits += 1;
        self.counters.hits += 1;
        Some(RuleId(slot))
    }

    /// Re-orders the subtables by hits, most first. Called between batches.
    pub fn rank(&mut self) {
        let subtables = &self.subtables;
        self.order
            .sort_by_key(|&i| std::cmp::Reverse(subtables[i].hits));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(port: u8, dst: u16) -> FlowKey {
        FlowKey {
            in_port: port,
            l4_dst: dst,
            ..FlowKey::EMPTY
        }
    }

    /// The map indexes by the hash's low bits: keys that differ only in an IPv4 address's
    /// last bytes (the top bits of their word) must still spread over them.
    #[test]
    fn keys_that_differ_in_high_bits_only_spread_over_the_low_bits_of_the_hash() {
        let mut low = std::collections::HashSet::new();
        for host in 0..4096u32 {
            let mut key = FlowKey::EMPTY;
            let address = std::net::Ipv4Addr::from(0x0a00_0000 | host).to_ipv6_mapped();
            key.ip_dst = address.octets();
            low.insert(BuildPass.hash_one(Masked::of(&key)) & 0xfff);
        }
        // 4096 random 12-bit values take about 2590 distinct ones.
        assert!(low.len() > 2400, "{} distinct", low.len());
    }

    #[test]
    fn highest_priority_wins_across_subtables_and_ties_go_to_the_first() {
        let mut c = Classifier::new(16);
        let a = c.insert(10, FlowMatch::any().in_port(1), 'a').unwrap();
        let b = c.insert(20, FlowMatch::any().l4_dst(80), 'b').unwrap();
        let _ = c.insert(20, FlowMatch::any().in_port(1).l4_dst(80), 'c');
        let mut consulted = FlowKey::EMPTY;
        assert_eq!(c.lookup(&key(1, 80), 0, &mut consulted), Some(b));
        assert_eq!(consulted.in_port, u8::MAX);
        assert_eq!(c.lookup(&key(1, 81), 0, &mut consulted), Some(a));
        assert_eq!(c.lookup(&key(2, 81), 0, &mut consulted), None);
        assert_eq!(c.masks(), 3);
        assert_eq!(c.remove(b), Some('b'));
        let id = c.lookup(&key(1, 80), 0, &mut consulted).unwrap();
        assert_eq!(c.data(id), Some(&'c'));
    }

    #[test]
    fn a_subtable_keeps_its_highest_priority_until_the_last_rule_at_it_goes() {
        let mut c = Classifier::new(16);
        // Probed first: in_port's subtable, priority 15.
        c.insert(15, FlowMatch::any().in_port(1), 'a').unwrap();
        let mut high: Vec<RuleId> = (80..83)
            .map(|dst| c.insert(20, FlowMatch::any().l4_dst(dst), 'b').unwrap())
            .collect();
        c.insert(10, FlowMatch::any().l4_dst(90), 'c').unwrap();
        let mut consulted = FlowKey::EMPTY;
        // Two of the three priority-20 rules gone: the third still beats priority 15.
        for id in high.drain(..2) {
            c.remove(id);
        }
        let id = c.lookup(&key(1, 82), 0, &mut consulted).unwrap();
        assert_eq!(c.data(id), Some(&'b'));
        // The last gone: the subtable's best is 10, below in_port's 15.
        c.remove(high[0]);
        let id = c.lookup(&key(1, 90), 0, &mut consulted).unwrap();
        assert_eq!(c.data(id), Some(&'a'));
        let id = c.lookup(&key(2, 90), 0, &mut consulted).unwrap();
        assert_eq!(c.data(id), Some(&'c'));
        // A rule above it raises it again.
        c.insert(30, FlowMatch::any().l4_dst(91), 'd').unwrap();
        let id = c.lookup(&key(1, 91), 0, &mut consulted).unwrap();
        assert_eq!(c.data(id), Some(&'d'));
    }

    #[test]
    fn capacity_is_enforced_and_counted() {
        let mut c = Classifier::new(1);
        c.insert(1, FlowMatch::any(), ()).unwrap();
        assert!(c.insert(1, FlowMatch::any(), ()).is_err());
        assert_eq!(c.counters().refused, 1);
    }

    #[test]
    fn covers_is_non_strict_selection() {
        let wide = FlowMatch::any().in_port(1);
        let narrow = FlowMatch::any().in_port(1).l4_dst(80);
        assert!(wide.covers(&narrow));
        assert!(!narrow.covers(&wide));
        assert!(FlowMatch::any().covers(&wide));
        assert!(!FlowMatch::any().in_port(2).covers(&narrow));
    }
}
