//! Latency probes: a signature, the flow, a sequence number and the TX timestamp, written into
//! the UDP payload of a template frame, and read back (validated) from a received frame.
//!
//! Layout at the start of the UDP payload, all big-endian:
//!
//! | bytes | field |
//! | --- | --- |
//! | 0..4 | [`SIGNATURE`] |
//! | 4..6 | flow id |
//! | 6..10 | sequence number (per flow, from 0) |
//! | 10..18 | TX timestamp (nanoseconds or TSC cycles; the run records which) |
//!
//! 18 bytes, because that is the UDP payload of the 64-byte IPv4 frame RFC 2544 tests most: every
//! frame of a test carries a probe, at every frame size, so latency and sequence are measured on
//! all of them rather than on a few larger probe frames mixed in (which would change the traffic
//! being measured). The price is a 4-byte signature (a foreign UDP frame starts with it by chance
//! once in 2^32), flow ids up to 65,535 (flows are UDP source ports, 16 bits anyway) and sequence
//! numbers up to 2^32 per flow (71 minutes at 1 Mpps on one flow; a trial lasts at most minutes).
//!
//! Frames are built once from a [`Template`]; per packet the generator stamps the flow
//! ([`Template::stamp`], which sets the UDP checksum of the template's frame with a zero
//! payload) and then writes the probe: 18 bytes of stores plus an RFC 1624 incremental update of
//! that checksum by the ones' complement sum of the 18 new bytes (they start on an even offset
//! of the UDP segment, so they are whole words). The checksum stays correct for IPv4 and IPv6
//! without summing the frame. An IPv4 frame whose checksum is 0 ("none") keeps 0. The probe
//! needs 18 bytes of payload: an untagged IPv4 frame of at least 64 bytes (with FCS), a tagged
//! one 68, IPv6 84; [`ProbeWriter::new`] refuses smaller templates with the smallest size that
//! works.
//!
//! The reader parses Ethernet (up to two VLAN tags), IPv4 (any header length, unfragmented) or
//! IPv6 (no extension headers) and UDP by hand with checked slicing: any byte string gives a
//! probe or a [`ProbeError`], never a panic.

use wirespeed_packet::checksum;

use super::Template;
use super::template::FCS_LEN;

/// The first 4 bytes of every probe's payload.
pub const SIGNATURE: [u8; 4] = *b"wsP2";

/// Bytes a probe takes in the UDP payload.
pub const PROBE_LEN: usize = 18;

/// The smallest IPv6/UDP frame (FCS counted) with room for a probe: 84 bytes, the same 18
/// bytes of payload a 64-byte IPv4 frame carries. (RFC 5180's smallest IPv6 frame, 78 bytes,
/// has no room for one.)
pub const SMALLEST_IPV6_FRAME: u16 = (FCS_LEN + 14 + 40 + 8 + PROBE_LEN) as u16;

/// Offset of the sequence number in the probe.
pub const SEQUENCE_AT: usize = 6;

/// Offset of the TX timestamp in the probe.
pub const TIMESTAMP_AT: usize = 10;

const ETHERNET_LEN: usize = 14;
const UDP_LEN: usize = 8;

/// The fields a probe carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Probe {
    pub flow: u16,
    pub sequence: u32,
    pub timestamp: u64,
}

/// Why a frame carries no probe, or a template cannot carry one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProbeError {
    #[error("frame ends before the probe does")]
    Truncated,
    #[error("not an unfragmented IPv4 or IPv6 UDP frame")]
    NotUdp,
    #[error("UDP payload does not start with the probe signature")]
    NoSignature,
    #[error(
        "the template's UDP payload has {payload} bytes, a probe needs {PROBE_LEN}: use frames of at least {min_frame} bytes"
    )]
    TooShort { payload: usize, min_frame: usize },
}

/// Offsets of the UDP header and payload in `frame`.
fn locate_udp(frame: &[u8]) -> Result<(usize, usize), ProbeError> {
    let word = |at: usize| -> Result<u16, ProbeError> {
        frame
            .get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
            .ok_or(ProbeError::Truncated)
    };
    let mut at = 12;
    let mut ethertype = word(at)?;
    for _ in 0..2 {
        if ethertype == 0x8100 || ethertype == 0x88a8 {
            at += 4;
            ethertype = word(at)?;
        }
    }
    let l3 = at + 2;
    let udp = match ethertype {
        0x0800 => {
            let header = frame.get(l3..l3 + 20).ok_or(ProbeError::Truncated)?;
            let ihl = (header[0] & 0x0f) as usize * 4;
            let fragment = u16::from_be_bytes([header[6], header[7]]) & 0x3fff;
            if header[0] >> 4 != 4 || ihl < 20 || header[9] != 17 || fragment != 0 {
                return Err(ProbeError::NotUdp);
            }
            l3 + ihl
        }
        0x86dd => {
            let header = frame.get(l3..l3 + 40).ok_or(ProbeError::Truncated)?;
            if header[0] >> 4 != 6 || header[6] != 17 {
                return Err(ProbeError::NotUdp);
            }
            l3 + 40
        }
        _ => return Err(ProbeError::NotUdp),
    };
    Ok((udp, udp + UDP_LEN))
}

/// Writes probes into frames of one template.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeWriter {
    /// Offset of the UDP checksum in the frame.
    checksum_at: usize,
    /// Offset of the probe (the UDP payload) in the frame.
    probe_at: usize,
}

impl ProbeWriter {
    /// A writer for frames of `template`, or why they cannot carry a probe.
    pub fn new(template: &Template) -> Result<Self, ProbeError> {
        let (udp, payload) = locate_udp(template.bytes())?;
        let room = template.len().saturating_sub(payload);
        if room < PROBE_LEN {
            return Err(ProbeError::TooShort {
                payload: room,
                min_frame: payload + PROBE_LEN + FCS_LEN,
            });
        }
        Ok(Self {
            checksum_at: udp + 6,
            probe_at: payload,
        })
    }

    /// Offset of the probe in the frame.
    pub fn offset(&self) -> usize {
        self.probe_at
    }

    /// Writes `probe` into `frame` (a frame of the template, any flow, starting at its
    /// Ethernet header, just written by [`Template::write`] or [`Template::stamp`], so that its checksum
    /// is the zero payload's) and updates the UDP checksum; false when `frame` is too short.
    #[inline]
    pub fn write(&self, frame: &mut [u8], probe: &Probe) -> bool {
        let mut bytes = [0u8; PROBE_LEN];
        bytes[..4].copy_from_slice(&SIGNATURE);
        bytes[4..6].copy_from_slice(&probe.flow.to_be_bytes());
        bytes[SEQUENCE_AT..TIMESTAMP_AT].copy_from_slice(&probe.sequence.to_be_bytes());
        bytes[TIMESTAMP_AT..].copy_from_slice(&probe.timestamp.to_be_bytes());
        let Some(area) = frame.get_mut(self.probe_at..self.probe_at + PROBE_LEN) else {
            return false;
        };
        area.copy_from_slice(&bytes);
        let new = checksum::partial(&bytes);
        let Some(field) = frame.get_mut(self.checksum_at..self.checksum_at + 2) else {
            return false;
        };
        let current = u16::from_be_bytes([field[0], field[1]]);
        if current != 0 {
            // The area held zeros, whose sum is 0.
            let mut updated = checksum::update_word(current, 0, new);
            // A computed UDP checksum of 0 is sent as all ones (0 means "none").
            if updated == 0 {
                updated = 0xffff;
            }
            field.copy_from_slice(&updated.to_be_bytes());
        }
        true
    }
}

/// Reads the probe from a received frame (starting at its Ethernet header).
#[inline]
pub fn read(frame: &[u8]) -> Result<Probe, ProbeError> {
    if frame.len() < ETHERNET_LEN {
        return Err(ProbeError::Truncated);
    }
    let (_, payload) = locate_udp(frame)?;
    let bytes = frame
        .get(payload..payload + PROBE_LEN)
        .ok_or(ProbeError::Truncated)?;
    if bytes[..4] != SIGNATURE {
        return Err(ProbeError::NoSignature);
    }
    let mut timestamp = [0u8; 8];
    timestamp.copy_from_slice(&bytes[TIMESTAMP_AT..PROBE_LEN]);
    Ok(Probe {
        flow: u16::from_be_bytes([bytes[4], bytes[5]]),
        sequence: u32::from_be_bytes([bytes[6], bytes[7], bytes[8], bytes[9]]),
        timestamp: u64::from_be_bytes(timestamp),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generator::TemplateConfig;
    use crate::generator::pacing::Rng;
    use proptest::prelude::*;
    use std::net::{IpAddr, Ipv6Addr};

    fn udp_checksum_ok(frame: &[u8]) -> bool {
        let (udp, _) = locate_udp(frame).unwrap();
        let segment = &frame[udp..];
        let l3 = if frame[12..14] == [0x81, 0x00] {
            18
        } else {
            14
        };
        if frame[l3] >> 4 == 6 {
            let src: [u8; 16] = frame[l3 + 8..l3 + 24].try_into().unwrap();
            let dst: [u8; 16] = frame[l3 + 24..l3 + 40].try_into().unwrap();
            checksum::verify_transport_v6(src.into(), dst.into(), 17, segment)
        } else {
            let src: [u8; 4] = frame[l3 + 12..l3 + 16].try_into().unwrap();
            let dst: [u8; 4] = frame[l3 + 16..l3 + 20].try_into().unwrap();
            checksum::verify_transport_v4(src.into(), dst.into(), 17, segment)
        }
    }

    fn configs() -> Vec<TemplateConfig> {
        let v6 = TemplateConfig {
            frame_size: 128,
            src_ip: IpAddr::V6(Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1)),
            dst_ip: IpAddr::V6(Ipv6Addr::new(0x2001, 2, 0, 1, 0, 0, 0, 1)),
            flows: 16,
            ..TemplateConfig::default()
        };
        vec![
            TemplateConfig {
                frame_size: 64,
                flows: 16,
                ..TemplateConfig::default()
            },
            TemplateConfig {
                frame_size: 1518,
                vlan: Some(7),
                flows: 16,
                ..TemplateConfig::default()
            },
            v6,
        ]
    }

    #[test]
    fn probes_round_trip_and_keep_the_udp_checksum_valid() {
        let mut rng = Rng::new(9);
        for config in configs() {
            let template = Template::new(&config).unwrap();
            let writer = ProbeWriter::new(&template).unwrap();
            let mut frame = vec![0u8; 2048];
            let len = template.write(&mut frame, 0);
            for _ in 0..2000 {
                // Restamp to another flow, then write that flow's probe over the last one.
                let probe = Probe {
                    flow: rng.next_u64() as u16 % 16,
                    sequence: rng.next_u64() as u32,
                    timestamp: rng.next_u64(),
                };
                template.stamp(&mut frame, probe.flow.into());
                assert!(writer.write(&mut frame, &probe));
                assert!(udp_checksum_ok(&frame[..len]), "{config:?} {probe:?}");
                assert_eq!(read(&frame[..len]), Ok(probe));
            }
        }
    }

    #[test]
    fn an_ipv4_frame_without_checksum_keeps_none() {
        let template = Template::new(&configs()[0]).unwrap();
        let writer = ProbeWriter::new(&template).unwrap();
        let mut frame = template.bytes().to_vec();
        frame[34 + 6..34 + 8].copy_from_slice(&[0, 0]);
        assert!(writer.write(&mut frame, &Probe::default()));
        assert_eq!(&frame[40..42], &[0, 0]);
        assert_eq!(read(&frame), Ok(Probe::default()));
    }

    #[test]
    fn small_frames_and_foreign_frames_are_refused() {
        // A tagged 64-byte frame has 14 bytes of payload: 68 bytes is the smallest that works.
        let small = Template::new(&TemplateConfig {
            vlan: Some(5),
            ..TemplateConfig::default()
        })
        .unwrap();
        assert_eq!(
            ProbeWriter::new(&small),
            Err(ProbeError::TooShort {
                payload: 14,
                min_frame: 68
            })
        );
        let template = Template::new(&configs()[0]).unwrap();
        let writer = ProbeWriter::new(&template).unwrap();
        let mut frame = template.bytes().to_vec();
        assert_eq!(read(&frame), Err(ProbeError::NoSignature));
        assert!(!writer.write(&mut frame[..50], &Probe::default()));
        writer.write(&mut frame, &Probe::default());
        assert_eq!(read(&frame[..50]), Err(ProbeError::Truncated));
        let mut tcp = frame.clone();
        tcp[14 + 9] = 6;
        assert_eq!(read(&tcp), Err(ProbeError::NotUdp));
        let mut fragment = frame.clone();
        fragment[14 + 6] = 0x20;
        assert_eq!(read(&fragment), Err(ProbeError::NotUdp));
        assert_eq!(read(&frame[..10]), Err(ProbeError::Truncated));
    }

    proptest! {
        #[test]
        fn reading_any_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = read(&bytes);
        }

        #[test]
        fn reading_a_damaged_probe_never_panics(at in 0usize..64, cut in 0usize..64) {
            let template = Template::new(&configs()[0]).unwrap();
            let writer = ProbeWriter::new(&template).unwrap();
            let mut frame = template.bytes().to_vec();
            writer.write(&mut frame, &Probe { flow: 1, sequence: 2, timestamp: 3 });
            if let Some(byte) = frame.get_mut(at) {
                *byte ^= 0x5a;
            }
            let _ = read(&frame[..cut.min(frame.len())]);
        }
    }
}
