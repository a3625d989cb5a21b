//! Internet checksums (RFC 1071) and their incremental update (RFC 1624).
//!
//! The ones' complement sum does not depend on byte order (RFC 1071 §2(B)): summing the data as
//! native-endian words and swapping the folded result once gives the big-endian sum. So the hot
//! loop reads 8 bytes at a time as a native `u64`, adds its two 32-bit halves into a 64-bit
//! accumulator (no carry handling in the loop, which the compiler can vectorize) and folds at the
//! end. The router uses [`update_word`] / [`update_u32`] to decrement a TTL or rewrite an address
//! without summing the header again.
//!
//! Which function for which protocol: IPv4 header and ICMPv4 use [`internet_checksum`] (no
//! pseudo-header); UDP and TCP use [`transport_v4`] / [`transport_v6`] with their protocol
//! number; ICMPv6 uses [`transport_v6`] with next header 58 (RFC 4443 §2.3). The wire views wrap
//! these as `fill_checksum*` / `verify_checksum*`.
//!
//! Values here are plain `u16`s in host order: a *partial sum* is the folded, **not**
//! complemented ones' complement sum; a *checksum* is its complement, as written in a header.

use std::net::{Ipv4Addr, Ipv6Addr};

/// Bytes summed between two folds of the accumulator: 2^16 chunks of 8 bytes add at most
/// 2^17 * (2^32 - 1) < 2^64, so the accumulator never overflows.
const FOLD_BLOCK: usize = 8 << 16;

/// Folds a 64-bit accumulator of 16-bit words into a 16-bit ones' complement sum.
#[inline]
fn fold(mut acc: u64) -> u16 {
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    acc = (acc & 0xffff) + (acc >> 16);
    acc = (acc & 0xffff) + (acc >> 16);
    acc = (acc & 0xffff) + (acc >> 16);
    acc as u16
}

/// Native-endian sum of one block (at most [`FOLD_BLOCK`] bytes), folded to 16 bits.
#[inline]
fn sum_block_native(data: &[u8]) -> u16 {
    let mut acc: u64 = 0;
    let mut chunks = data.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let word = u64::from_ne_bytes(word);
        acc += (word & 0xffff_ffff) + (word >> 32);
    }
    let mut rest = chunks.remainder();
    if rest.len() >= 4 {
        acc += u64::from(u32::from_ne_bytes([rest[0], rest[1], rest[2], rest[3]]));
        rest = &rest[4..];
    }
    if rest.len() >= 2 {
        acc += u64::from(u16::from_ne_bytes([rest[0], rest[1]]));
        rest = &rest[2..];
    }
    if let Some(&last) = rest.first() {
        // An odd last byte is the high byte of a big-endian word padded with zero.
        acc += u64::from(u16::from_ne_bytes([last, 0]));
    }
    fold(acc)
}

/// The ones' complement sum of `data` as big-endian 16-bit words (odd length padded with a zero
/// byte), folded but not complemented.
#[inline]
pub fn partial(data: &[u8]) -> u16 {
    let mut native: u16 = 0;
    for block in data.chunks(FOLD_BLOCK) {
        // Blocks have even length (except perhaps the last), so word boundaries are preserved.
        native = add(native, sum_block_native(block));
    }
    u16::from_be(native)
}

/// Ones' complement addition of two partial sums.
#[inline]
pub fn add(a: u16, b: u16) -> u16 {
    let sum = u32::from(a) + u32::from(b);
    ((sum & 0xffff) + (sum >> 16)) as u16
}

/// The Internet checksum of `data`: the complement of its ones' complement sum.
#[inline]
pub fn internet_checksum(data: &[u8]) -> u16 {
    !partial(data)
}

/// Whether `data` (including its checksum field) sums to `0xffff`, i.e. carries a valid checksum.
#[inline]
pub fn is_valid(data: &[u8]) -> bool {
    partial(data) == 0xffff
}

/// Partial sum of the IPv4 pseudo-header (RFC 768, RFC 793): addresses, protocol and the length
/// of the transport segment (header plus payload).
#[inline]
pub fn pseudo_header_v4(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, length: u16) -> u16 {
    let s = src.octets();
    let d = dst.octets();
    let mut acc: u32 = 0;
    acc += u32::from(u16::from_be_bytes([s[0], s[1]]));
    acc += u32::from(u16::from_be_bytes([s[2], s[3]]));
    acc += u32::from(u16::from_be_bytes([d[0], d[1]]));
    acc += u32::from(u16::from_be_bytes([d[2], d[3]]));
    acc += u32::from(protocol);
    acc += u32::from(length);
    fold(u64::from(acc))
}

/// Partial sum of the IPv6 pseudo-header (RFC 8200 §8.1): addresses, upper-layer packet length
/// and next header.
#[inline]
pub fn pseudo_header_v6(src: Ipv6Addr, dst: Ipv6Addr, next_header: u8, length: u32) -> u16 {
    let mut acc: u64 = 0;
    for word in src.segments().into_iter().chain(dst.segments()) {
        acc += u64::from(word);
    }
    acc += u64::from(length >> 16) + u64::from(length & 0xffff);
    acc += u64::from(next_header);
    fold(acc)
}

/// Checksum of a transport segment over IPv4 (`segment` with its checksum field zeroed).
#[inline]
pub fn transport_v4(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, segment: &[u8]) -> u16 {
    // Segments longer than 65535 bytes cannot be carried by IPv4; the length wraps like the
    // 16-bit field would, which the caller's length checks rule out.
    let length = segment.len() as u16;
    !add(
        pseudo_header_v4(src, dst, protocol, length),
        partial(segment),
    )
}

/// Checksum of an upper-layer packet over IPv6 (`segment` with its checksum field zeroed).
#[inline]
pub fn transport_v6(src: Ipv6Addr, dst: Ipv6Addr, next_header: u8, segment: &[u8]) -> u16 {
    let length = u32::try_from(segment.len()).unwrap_or(u32::MAX);
    !add(
        pseudo_header_v6(src, dst, next_header, length),
        partial(segment),
    )
}

/// Whether a transport segment over IPv4 (checksum field included) carries a valid checksum.
#[inline]
pub fn verify_transport_v4(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, segment: &[u8]) -> bool {
    transport_v4(src, dst, protocol, segment) == 0
}

/// Whether an upper-layer packet over IPv6 (checksum field included) carries a valid checksum.
#[inline]
pub fn verify_transport_v6(src: Ipv6Addr, dst: Ipv6Addr, next_header: u8, segment: &[u8]) -> bool {
    transport_v6(src, dst, next_header, segment) == 0
}

/// RFC 1624 eqn. 3: the checksum after one 16-bit word of the covered data changed from `old`
/// to `new`: `HC' = ~(~HC + ~m + m')`.
#[inline]
pub fn update_word(checksum: u16, old: u16, new: u16) -> u16 {
    !add(add(!checksum, !old), new)
}

/// RFC 1624 eqn. 3 applied to a 32-bit value (e.g. an IPv4 address) that changed, word by word.
#[inline]
pub fn update_u32(checksum: u16, old: u32, new: u32) -> u16 {
    let sum = add(
        add(!checksum, !(old >> 16) as u16),
        add(!(old as u16), (new >> 16) as u16),
    );
    !add(sum, new as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain definition, one big-endian word at a time, to check the fast loop against.
    fn reference(data: &[u8]) -> u16 {
        let mut acc: u32 = 0;
        for pair in data.chunks(2) {
            let word = u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]);
            acc += u32::from(word);
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc as u16
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: the bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(partial(&data), 0xddf2);
        assert_eq!(internet_checksum(&data), !0xddf2);
    }

    #[test]
    fn known_ipv4_header() {
        // A classic IPv4 header: 45 00 00 73 00 00 40 00 40 11 [b8 61] c0 a8 00 01 c0 a8 00 c7.
        let mut header = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(internet_checksum(&header), 0xb861);
        header[10] = 0xb8;
        header[11] = 0x61;
        assert!(is_valid(&header));
    }

    #[test]
    fn every_length_and_alignment_matches_the_reference() {
        let data: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8 ^ 0xa5).collect();
        for start in 0..9 {
            for end in start..data.len() {
                assert_eq!(partial(&data[start..end]), reference(&data[start..end]));
            }
        }
    }

    #[test]
    fn all_ones_does_not_overflow() {
        let data = vec![0xffu8; 4096];
        assert_eq!(partial(&data), 0xffff);
    }

    #[test]
    fn incremental_word_update_matches_recomputation() {
        let mut data = [0x45u8, 0x00, 0x12, 0x34, 0x40, 0x11, 0xab, 0xcd];
        let before = internet_checksum(&data);
        let old = u16::from_be_bytes([data[4], data[5]]);
        data[4] = 0x3f;
        let new = u16::from_be_bytes([data[4], data[5]]);
        assert_eq!(update_word(before, old, new), internet_checksum(&data));
    }
}
