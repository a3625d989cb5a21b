//! Flow keys and CRC32C, the hash every table of the data plane uses.
//!
//! A [`FlowKey`] is the set of parsed fields a forwarding decision may depend on. It has a fixed
//! `repr(C)` layout of 56 bytes with no padding at all (checked at compile time), so two equal
//! keys are equal byte for byte and hash alike; the exact-match cache compares and hashes them
//! as seven 8-byte words.
//!
//! What is hashed is the key's little-endian byte image ([`FlowKey::to_bytes`], which on
//! x86_64 is the key exactly as it lies in memory), taken as seven 8-byte words
//! ([`FlowKey::words`]): the SSE4.2 hash is seven `crc32` instructions. The words are put
//! together from the fields, not read from the key's memory: the parser hashes a key it has
//! just built in registers, and re-reading a key just written field by field with 8-byte loads
//! defeats store forwarding (measured: ~79 -> ~76 TSC cycles per packet on the cross-connect
//! under load, 67-92 -> 49-71 in interleaved runs, although it costs more instructions).
//! The big-endian image used before cost ~19 instructions per packet to build.

//! [`crc32c`] uses the SSE4.2 `crc32` instruction where the CPU has it (one instruction per
//! 8 bytes) and a table-driven software CRC32C otherwise; both give identical results (unit and
//! property tests check both against the standard check values). The choice is made once, on
//! first use, and kept in a [`OnceLock`]: per call it costs one load and a predictable branch.
//! The hot path does better: the batch parser is compiled a second time for SSE4.2 and chosen
//! once per batch, so there the hash is inlined (see [`crate::parse::parse_batch`]).

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::OnceLock;

use crate::wire::EthernetAddress;

/// The fields a forwarding decision depends on.
///
/// * IP addresses are 16 bytes for both families: an IPv4 address is stored **IPv4-mapped**
///   (`::ffff:a.b.c.d`, RFC 4291 §2.5.5.2), so one key type and one hash serve both. For ARP
///   (Ethernet/IPv4) `ip_src`/`ip_dst` hold the sender and target protocol addresses, mapped
///   the same way, and `ip_proto` the low byte of the ARP operation (as Open vSwitch does).
/// * `l4_src`/`l4_dst` are the TCP/UDP ports. For ICMP and ICMPv6, `l4_src` holds
///   `type << 8 | code` and `l4_dst` is 0 (a match on the type or the code masks one byte).
///   For non-first fragments both are 0 and [`FlowKey::FLAG_LATER_FRAGMENT`] is set.
/// * `vlan` is the outermost tag's TCI without its DEI bit: the VLAN id in the low 12 bits
///   ([`FlowKey::VLAN_VID`]), the priority (PCP) in the top 3 ([`FlowKey::VLAN_PCP`]), as Open
///   vSwitch keeps them; valid when [`FlowKey::FLAG_VLAN`] is set. The bit between is always 0.
/// * `in_port` is the port's index, one byte: a switch has at most [`FlowKey::MAX_PORTS`]
///   ports, and [`FlowKey::NO_PORT`] is a frame from no port (one a controller sent through
///   the tables). The byte that frees is `ip_tos`, the IP header's TOS (IPv4) or traffic class
///   (IPv6) byte: DSCP in its top 6 bits, ECN in the low 2; 0 for other frames. So the key
///   stays 56 bytes, seven words to hash and compare, and still matches on DSCP and ECN.
/// * Everything the parse did not reach is zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct FlowKey {
    pub ip_src: [u8; 16],
    pub ip_dst: [u8; 16],
    pub dst_mac: EthernetAddress,
    pub src_mac: EthernetAddress,
    pub in_port: u8,
    /// TOS / traffic class: DSCP << 2 | ECN.
    pub ip_tos: u8,
    pub vlan: u16,
    /// EtherType after the VLAN tags.
    pub ethertype: u16,
    pub l4_src: u16,
    pub l4_dst: u16,
    /// IP protocol / IPv6 upper-layer next header (ARP: operation).
    pub ip_proto: u8,
    /// `FLAG_*` bits.
    pub flags: u8,
}

/// Size of a [`FlowKey`] in bytes.
pub const FLOW_KEY_LEN: usize = 56;

// No implicit padding: the fields add up to the size, so the byte image is fully defined.
const _: () = assert!(std::mem::size_of::<FlowKey>() == FLOW_KEY_LEN);
const _: () = assert!(16 + 16 + 6 + 6 + 2 + 2 * 4 + 2 == FLOW_KEY_LEN);

impl FlowKey {
    /// The outer frame carried a VLAN tag; `vlan` is its VLAN id.
    pub const FLAG_VLAN: u8 = 1 << 0;
    /// The IP packet is a fragment (first or later).
    pub const FLAG_FRAGMENT: u8 = 1 << 1;
    /// The IP packet is a fragment other than the first: it has no L4 header, ports are 0.
    pub const FLAG_LATER_FRAGMENT: u8 = 1 << 2;
    /// The VLAN id's bits in `vlan`.
    pub const VLAN_VID: u16 = 0x0fff;
    /// The priority's (PCP's) bits in `vlan`.
    pub const VLAN_PCP: u16 = 0xe000;
    /// Where the priority starts in `vlan`.
    pub const VLAN_PCP_SHIFT: u32 = 13;
    /// The DSCP's bits in `ip_tos`.
    pub const TOS_DSCP: u8 = 0xfc;
    /// The ECN's bits in `ip_tos`.
    pub const TOS_ECN: u8 = 0x03;
    /// Ports a switch may have: their indices fit `in_port` below [`FlowKey::NO_PORT`].
    pub const MAX_PORTS: usize = 255;
    /// `in_port` of a frame from no port.
    pub const NO_PORT: u8 = u8::MAX;

    /// `in_port` for the port index `port` (a descriptor's): [`FlowKey::NO_PORT`] for an index
    /// past [`FlowKey::MAX_PORTS`] (`Meta::NO_PORT`, a frame from the controller).
    #[inline(always)]
    pub fn port_byte(port: u16) -> u8 {
        u8::try_from(port).unwrap_or(FlowKey::NO_PORT)
    }

    /// The all-zero key.
    pub const EMPTY: FlowKey = FlowKey {
        ip_src: [0; 16],
        ip_dst: [0; 16],
        dst_mac: EthernetAddress([0; 6]),
        src_mac: EthernetAddress([0; 6]),
        in_port: 0,
        ip_tos: 0,
        vlan: 0,
        ethertype: 0,
        l4_src: 0,
        l4_dst: 0,
        ip_proto: 0,
        flags: 0,
    };

    /// The 16-byte form of an IPv4 address used in keys (IPv4-mapped IPv6).
    pub fn map_ipv4(addr: Ipv4Addr) -> [u8; 16] {
        addr.to_ipv6_mapped().octets()
    }

    /// `ip_src` as IPv4, when it holds an IPv4-mapped address.
    pub fn ipv4_src(&self) -> Option<Ipv4Addr> {
        Ipv6Addr::from(self.ip_src).to_ipv4_mapped()
    }

    /// `ip_dst` as IPv4, when it holds an IPv4-mapped address.
    pub fn ipv4_dst(&self) -> Option<Ipv4Addr> {
        Ipv6Addr::from(self.ip_dst).to_ipv4_mapped()
    }

    /// The key's byte image: the fields in declaration order, multi-byte numbers
    /// little-endian. On little-endian machines (x86_64, aarch64) this is exactly the key's
    /// in-memory representation; on any machine it is the same bytes, so the hash is the same
    /// everywhere.
    #[inline]
    pub fn to_bytes(&self) -> [u8; FLOW_KEY_LEN] {
        let mut bytes = [0u8; FLOW_KEY_LEN];
        bytes[0..16].copy_from_slice(&self.ip_src);
        bytes[16..32].copy_from_slice(&self.ip_dst);
        bytes[32..38].copy_from_slice(&self.dst_mac.0);
        bytes[38..44].copy_from_slice(&self.src_mac.0);
        bytes[44] = self.in_port;
        bytes[45] = self.ip_tos;
        bytes[46..48].copy_from_slice(&self.vlan.to_le_bytes());
        bytes[48..50].copy_from_slice(&self.ethertype.to_le_bytes());
        bytes[50..52].copy_from_slice(&self.l4_src.to_le_bytes());
        bytes[52..54].copy_from_slice(&self.l4_dst.to_le_bytes());
        bytes[54] = self.ip_proto;
        bytes[55] = self.flags;
        bytes
    }

    /// CRC32C of [`FlowKey::to_bytes`] with seed 0 (equal to `crc32c(0, &key.to_bytes())`).
    ///
    /// This entry point decides per call which code runs (one load and a predictable branch,
    /// and a call the compiler cannot inline). The parse of a whole batch
    /// ([`crate::parse::parse_batch`]) decides once per batch instead and runs a copy of the
    /// parser compiled for SSE4.2, in which [`FlowKey::hash_sse42`] is seven inlined `crc32`
    /// instructions.
    #[inline]
    pub fn hash(&self) -> u32 {
        match implementation() {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Implementation::Sse42` is chosen only when `is_x86_feature_detected!`
            // found SSE4.2 on this CPU, so the instructions exist.
            Implementation::Sse42 => unsafe { self.hash_sse42() },
            _ => self.hash_portable(),
        }
    }

    /// [`FlowKey::hash`] in software.
    #[inline]
    pub fn hash_portable(&self) -> u32 {
        crc32c_portable(0, &self.to_bytes())
    }

    /// [`FlowKey::to_bytes`] as seven little-endian 8-byte words, assembled from the fields.
    /// Built this way (rather than by reading the key's memory) a key that is still in
    /// registers is hashed without a round trip through memory, and a key just written field
    /// by field is not re-read with wider loads (which would defeat store forwarding).
    #[inline(always)]
    pub fn words(&self) -> [u64; FLOW_KEY_LEN / 8] {
        let src = u128::from_le_bytes(self.ip_src);
        let dst = u128::from_le_bytes(self.ip_dst);
        let d = self.dst_mac.0;
        let s = self.src_mac.0;
        let [v0, v1] = self.vlan.to_le_bytes();
        let [e0, e1] = self.ethertype.to_le_bytes();
        let [a0, a1] = self.l4_src.to_le_bytes();
        let [b0, b1] = self.l4_dst.to_le_bytes();
        [
            src as u64,
            (src >> 64) as u64,
            dst as u64,
            (dst >> 64) as u64,
            u64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], s[0], s[1]]),
            u64::from_le_bytes([s[2], s[3], s[4], s[5], self.in_port, self.ip_tos, v0, v1]),
            u64::from_le_bytes([e0, e1, a0, a1, b0, b1, self.ip_proto, self.flags]),
        ]
    }

    /// [`FlowKey::words`] read straight from the key's memory: seven loads where `words`
    /// assembles them from eleven fields. For keys written well before they are read (a flow
    /// cache comparing a batch's keys after the parse), where no store is still waiting to be
    /// forwarded to the wide loads.
    #[inline(always)]
    pub fn stored_words(&self) -> [u64; FLOW_KEY_LEN / 8] {
        // SAFETY: `FlowKey` is `repr(C)` without padding (asserted above: the fields add up to
        // its size), so all 56 bytes behind `self` are initialised, and `read_unaligned`
        // copies them out whatever the alignment; every bit pattern is a valid `[u64; 7]`.
        let words = unsafe {
            core::ptr::read_unaligned((self as *const FlowKey).cast::<[u64; FLOW_KEY_LEN / 8]>())
        };
        // The memory is `to_bytes()` only where the u16 fields are little-endian: elsewhere
        // the words are assembled. (`from_le` is the identity on little-endian targets.)
        if cfg!(target_endian = "little") {
            words.map(u64::from_le)
        } else {
            self.words()
        }
    }

    /// [`FlowKey::hash`] with the SSE4.2 `crc32` instruction: one per word of
    /// [`FlowKey::words`]. Inlined into callers compiled with SSE4.2.
    ///
    /// # Safety
    /// The CPU must have SSE4.2 (`is_x86_feature_detected!("sse4.2")`); [`FlowKey::hash`]
    /// checks that for you.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "sse4.2")]
    #[inline]
    pub fn hash_sse42(&self) -> u32 {
        use std::arch::x86_64::_mm_crc32_u64;
        let mut crc = u64::from(u32::MAX);
        for word in self.words() {
            crc = _mm_crc32_u64(crc, word);
        }
        // The instruction leaves the upper 32 bits zero.
        !(crc as u32)
    }
}

/// The reflected CRC32C (Castagnoli) polynomial.
const POLY: u32 = 0x82f6_3b78;

/// Slicing-by-8 tables: `TABLES[0]` is the classic byte table, `TABLES[k][b]` the CRC of byte
/// `b` followed by `k` zero bytes.
static TABLES: [[u32; 256]; 8] = build_tables();

const fn build_tables() -> [[u32; 256]; 8] {
    let mut tables = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
            bit += 1;
        }
        tables[0][i] = crc;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = tables[k - 1][i];
            tables[k][i] = (prev >> 8) ^ tables[0][(prev & 0xff) as usize];
            i += 1;
        }
        k += 1;
    }
    tables
}

/// CRC32C in software (slicing by 8). `seed` is a previous result (0 to start), so
/// `crc32c_portable(crc32c_portable(0, a), b) == crc32c_portable(0, a ++ b)`.
pub fn crc32c_portable(seed: u32, bytes: &[u8]) -> u32 {
    let mut crc = !seed;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let lo = crc ^ u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        let t = &TABLES;
        crc = t[7][(lo & 0xff) as usize]
            ^ t[6][((lo >> 8) & 0xff) as usize]
            ^ t[5][((lo >> 16) & 0xff) as usize]
            ^ t[4][(lo >> 24) as usize]
            ^ t[3][usize::from(chunk[4])]
            ^ t[2][usize::from(chunk[5])]
            ^ t[1][usize::from(chunk[6])]
            ^ t[0][usize::from(chunk[7])];
    }
    for &byte in chunks.remainder() {
        crc = (crc >> 8) ^ TABLES[0][((crc ^ u32::from(byte)) & 0xff) as usize];
    }
    !crc
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
fn crc32c_sse42(seed: u32, bytes: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u8, _mm_crc32_u64};
    let mut crc = u64::from(!seed);
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        crc = _mm_crc32_u64(crc, u64::from_le_bytes(word));
    }
    // The instruction leaves the upper 32 bits zero.
    let mut crc = crc as u32;
    for &byte in chunks.remainder() {
        crc = _mm_crc32_u8(crc, byte);
    }
    !crc
}

/// CRC32C with the CPU's instruction; `None` when the CPU (or architecture) lacks it.
pub fn crc32c_hardware(seed: u32, bytes: &[u8]) -> Option<u32> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: SSE4.2 was detected on this CPU just above.
            return Some(unsafe { crc32c_sse42(seed, bytes) });
        }
    }
    let _ = (seed, bytes);
    None
}

/// Which CRC32C code this CPU runs, decided once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Implementation {
    /// The SSE4.2 `crc32` instruction; only ever chosen after the CPU was seen to have it.
    Sse42,
    Portable,
}

static IMPLEMENTATION: OnceLock<Implementation> = OnceLock::new();

#[inline]
fn implementation() -> Implementation {
    *IMPLEMENTATION.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("sse4.2") {
                return Implementation::Sse42;
            }
        }
        Implementation::Portable
    })
}

/// Whether [`crc32c`] runs on the CPU's CRC32C instruction.
pub fn crc32c_uses_hardware() -> bool {
    implementation() == Implementation::Sse42
}

/// CRC32C (Castagnoli, as iSCSI and ext4 use it) of `bytes`, continuing from `seed` (0 to
/// start): `crc32c(0, b"123456789") == 0xe306_9283`. Hardware where available, same result.
#[inline]
pub fn crc32c(seed: u32, bytes: &[u8]) -> u32 {
    match implementation() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Implementation::Sse42` is chosen only when `is_x86_feature_detected!`
        // found SSE4.2 on this CPU, so the instructions exist.
        Implementation::Sse42 => unsafe { crc32c_sse42(seed, bytes) },
        _ => crc32c_portable(seed, bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_check_values() {
        for f in [crc32c, crc32c_portable] {
            assert_eq!(f(0, b"123456789"), 0xe306_9283);
            assert_eq!(f(0, b""), 0);
            // RFC 3720 B.4: 32 bytes of zeros, 32 bytes of 0xff, 0..=31 ascending.
            assert_eq!(f(0, &[0u8; 32]), 0x8a91_36aa);
            assert_eq!(f(0, &[0xffu8; 32]), 0x62a8_ab43);
            let ascending: Vec<u8> = (0..32).collect();
            assert_eq!(f(0, &ascending), 0x46dd_794e);
        }
    }

    #[test]
    fn seed_continues_a_crc() {
        let data: Vec<u8> = (0..100u8).collect();
        for split in 0..data.len() {
            let (a, b) = data.split_at(split);
            assert_eq!(crc32c(crc32c(0, a), b), crc32c(0, &data));
            assert_eq!(
                crc32c_portable(crc32c_portable(0, a), b),
                crc32c_portable(0, &data)
            );
        }
    }

    #[test]
    fn hardware_matches_portable_when_present() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 31 + 7) as u8).collect();
        for len in 0..data.len() {
            if let Some(hw) = crc32c_hardware(0x1234_5678, &data[..len]) {
                assert_eq!(hw, crc32c_portable(0x1234_5678, &data[..len]));
            }
        }
        #[cfg(target_arch = "x86_64")]
        assert_eq!(
            crc32c_uses_hardware(),
            std::arch::is_x86_feature_detected!("sse4.2")
        );
    }

    #[test]
    fn stored_words_are_the_assembled_words() {
        let bytes = |first: u8| core::array::from_fn::<u8, 16, _>(|i| first + i as u8);
        let [a, b, c, d, e, f, g, h, i, j, k, l, ..] = bytes(33);
        let key = FlowKey {
            ip_src: bytes(1),
            ip_dst: bytes(17),
            dst_mac: crate::wire::EthernetAddress([a, b, c, d, e, f]),
            src_mac: crate::wire::EthernetAddress([g, h, i, j, k, l]),
            in_port: 0x2d,
            ip_tos: 0x2e,
            vlan: 0x302f,
            ethertype: 0x3231,
            l4_src: 0x3433,
            l4_dst: 0x3635,
            ip_proto: 0x37,
            flags: 0x38,
        };
        assert_eq!(key.stored_words(), key.words());
        assert_eq!(FlowKey::EMPTY.stored_words(), [0; 7]);
    }

    #[test]
    fn key_image_and_mapping() {
        let key = FlowKey {
            ip_src: FlowKey::map_ipv4(Ipv4Addr::new(10, 0, 0, 1)),
            in_port: 2,
            ip_tos: 0xb8,
            l4_dst: 53,
            flags: FlowKey::FLAG_VLAN,
            ..FlowKey::EMPTY
        };
        let bytes = key.to_bytes();
        assert_eq!(
            &bytes[..16],
            &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1]
        );
        assert_eq!(&bytes[44..46], &[2, 0xb8]);
        assert_eq!(&bytes[52..54], &[53, 0]);
        assert_eq!(bytes[55], FlowKey::FLAG_VLAN);
        assert_eq!(key.ipv4_src(), Some(Ipv4Addr::new(10, 0, 0, 1)));
        assert_eq!(key.ipv4_dst(), None);
        assert_eq!(key.hash(), crc32c_portable(0, &bytes));
        assert_eq!(key.hash_portable(), crc32c_portable(0, &bytes));
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: SSE4.2 was detected just above.
            assert_eq!(unsafe { key.hash_sse42() }, crc32c_portable(0, &bytes));
        }
        let words: Vec<u8> = key.words().iter().flat_map(|w| w.to_le_bytes()).collect();
        assert_eq!(words, bytes);
        assert_eq!(key.stored_words(), key.words());
        #[cfg(target_endian = "little")]
        {
            // SAFETY: `FlowKey` is `repr(C)` without padding (asserted above), so every byte of
            // the value is initialised and any byte pattern is a valid array; sizes are equal.
            let image = unsafe { std::mem::transmute::<FlowKey, [u8; FLOW_KEY_LEN]>(key) };
            assert_eq!(image, bytes);
        }
        assert_ne!(key.hash(), FlowKey::EMPTY.hash());
    }
}
