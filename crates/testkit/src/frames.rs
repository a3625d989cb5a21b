//! Frame builders and proptest strategies for tests and benchmarks.
//!
//! Frames are built with the packet crate's own `Repr::emit`s, with correct checksums, so a
//! test that parses them exercises the same code the generator will. A [`FrameBuilder`] says
//! what a frame holds (addresses, VLAN tags, L3, L4, fragmenting, IPv6 extension headers) and
//! how long it is; [`FrameBuilder::build`] pads the payload with a counting pattern to reach
//! the asked length. Lengths are as ports carry frames: without the 4-byte FCS, so a "64-byte
//! frame" on the wire is `frame_len(60)` here ([`FCS_LEN`]).

use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use wirespeed_packet::wire::{
    EtherType, EthernetAddress, IpProtocol, arp, ethernet, icmpv4, icmpv6, ipv4, ipv6, tcp, udp,
    vlan,
};

/// Bytes of Ethernet frame check sequence that ports do not carry.
pub const FCS_LEN: usize = 4;

/// The network layer of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L3 {
    Ipv4 { src: Ipv4Addr, dst: Ipv4Addr },
    Ipv6 { src: Ipv6Addr, dst: Ipv6Addr },
}

/// The transport layer of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L4 {
    Udp {
        src_port: u16,
        dst_port: u16,
    },
    Tcp {
        src_port: u16,
        dst_port: u16,
    },
    /// ICMP echo request (ICMPv4 or ICMPv6 after the IP version).
    Echo {
        ident: u16,
        seq_no: u16,
    },
}

/// What an IP frame holds; [`FrameBuilder::build`] writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameBuilder {
    pub src_mac: EthernetAddress,
    pub dst_mac: EthernetAddress,
    /// VLAN ids, outermost first. With two tags the outer is an 802.1ad service tag.
    pub vlans: Vec<u16>,
    pub l3: L3,
    pub l4: L4,
    /// IPv4 TTL / IPv6 hop limit.
    pub ttl: u8,
    /// IPv4 only: fragment offset in bytes (a multiple of 8) and the MF flag.
    pub fragment: Option<(u16, bool)>,
    /// IPv6 only: 8-byte destination options headers before the transport header.
    pub extension_headers: usize,
    /// Frame length without FCS; `None` for headers plus [`FrameBuilder::payload_len`].
    pub frame_len: Option<usize>,
    /// Payload bytes after the transport header when `frame_len` is `None`.
    pub payload_len: usize,
}

/// A locally administered source MAC used by the builders.
pub const SRC_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x01]);
/// A locally administered destination MAC used by the builders.
pub const DST_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x02]);

impl FrameBuilder {
    fn new(l3: L3, l4: L4) -> FrameBuilder {
        FrameBuilder {
            src_mac: SRC_MAC,
            dst_mac: DST_MAC,
            vlans: Vec::new(),
            l3,
            l4,
            ttl: 64,
            fragment: None,
            extension_headers: 0,
            frame_len: None,
            payload_len: 0,
        }
    }

    /// 10.0.0.1:1024 -> 10.0.0.2:1025 over UDP: the RFC 2544 style test flow.
    pub fn ipv4_udp() -> FrameBuilder {
        Self::new(
            L3::Ipv4 {
                src: Ipv4Addr::new(10, 0, 0, 1),
                dst: Ipv4Addr::new(10, 0, 0, 2),
            },
            L4::Udp {
                src_port: 1024,
                dst_port: 1025,
            },
        )
    }

    /// 2001:db8::1:1024 -> 2001:db8::2:1025 over UDP.
    pub fn ipv6_udp() -> FrameBuilder {
        Self::new(
            L3::Ipv6 {
                src: Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1),
                dst: Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2),
            },
            L4::Udp {
                src_port: 1024,
                dst_port: 1025,
            },
        )
    }

    pub fn with_l3(mut self, l3: L3) -> FrameBuilder {
        self.l3 = l3;
        self
    }

    pub fn with_l4(mut self, l4: L4) -> FrameBuilder {
        self.l4 = l4;
        self
    }

    pub fn macs(mut self, src: EthernetAddress, dst: EthernetAddress) -> FrameBuilder {
        self.src_mac = src;
        self.dst_mac = dst;
        self
    }

    /// Adds a VLAN tag inside the ones already there.
    pub fn vlan(mut self, vid: u16) -> FrameBuilder {
        self.vlans.push(vid);
        self
    }

    pub fn ttl(mut self, ttl: u8) -> FrameBuilder {
        self.ttl = ttl;
        self
    }

    pub fn fragment(mut self, offset: u16, more: bool) -> FrameBuilder {
        self.fragment = Some((offset, more));
        self
    }

    pub fn extension_headers(mut self, count: usize) -> FrameBuilder {
        self.extension_headers = count;
        self
    }

    /// Total frame length without FCS (payload padded or cut to fit, never below the
    /// headers).
    pub fn frame_len(mut self, len: usize) -> FrameBuilder {
        self.frame_len = Some(len);
        self
    }

    pub fn payload_len(mut self, len: usize) -> FrameBuilder {
        self.payload_len = len;
        self.frame_len = None;
        self
    }

    /// Bytes before the network layer.
    pub fn l2_len(&self) -> usize {
        ethernet::HEADER_LEN + vlan::HEADER_LEN * self.vlans.len()
    }

    fn l3_len(&self) -> usize {
        match self.l3 {
            L3::Ipv4 { .. } => ipv4::HEADER_LEN,
            L3::Ipv6 { .. } => ipv6::HEADER_LEN + 8 * self.extension_headers,
        }
    }

    fn l4_len(&self) -> usize {
        match self.l4 {
            L4::Udp { .. } => udp::HEADER_LEN,
            L4::Tcp { .. } => tcp::HEADER_LEN,
            L4::Echo { .. } => icmpv4::HEADER_LEN,
        }
    }

    /// Length of all headers.
    pub fn headers_len(&self) -> usize {
        self.l2_len() + self.l3_len() + self.l4_len()
    }

    /// The frame's bytes.
    pub fn build(&self) -> Vec<u8> {
        let headers = self.headers_len();
        let payload_len = match self.frame_len {
            Some(len) => len.saturating_sub(headers),
            None => self.payload_len,
        };
        let mut frame = vec![0u8; headers + payload_len];
        for (i, byte) in frame[headers..].iter_mut().enumerate() {
            *byte = i as u8;
        }

        let first_type = |vlans: &[u16], l3: &L3| match (vlans.len(), l3) {
            (0, L3::Ipv4 { .. }) => EtherType::Ipv4,
            (0, L3::Ipv6 { .. }) => EtherType::Ipv6,
            (1, _) => EtherType::Vlan,
            _ => EtherType::QinQ,
        };
        ethernet::Repr {
            src_addr: self.src_mac,
            dst_addr: self.dst_mac,
            ethertype: first_type(&self.vlans, &self.l3),
        }
        .emit(&mut ethernet::Packet::new_unchecked(&mut frame[..]));
        let mut at = ethernet::HEADER_LEN;
        for (i, &vid) in self.vlans.iter().enumerate() {
            let rest = &self.vlans[i + 1..];
            let ethertype = match (rest.len(), &self.l3) {
                (0, L3::Ipv4 { .. }) => EtherType::Ipv4,
                (0, L3::Ipv6 { .. }) => EtherType::Ipv6,
                _ => EtherType::Vlan,
            };
            vlan::Repr {
                pcp: 0,
                dei: false,
                vid,
                ethertype,
            }
            .emit(&mut vlan::Packet::new_unchecked(&mut frame[at..]));
            // The TPID sits in the previous header's EtherType field; the tag view starts at
            // the TCI and ends with the EtherType of what follows.
            at += vlan::HEADER_LEN;
        }
        self.emit_l3(&mut frame[self.l2_len()..], payload_len);
        frame
    }

    fn emit_l3(&self, ip: &mut [u8], payload_len: usize) {
        let l4_len = self.l4_len() + payload_len;
        match self.l3 {
            L3::Ipv4 { src, dst } => {
                let (frag_offset, more_frags) = self.fragment.unwrap_or((0, false));
                let repr = ipv4::Repr {
                    src_addr: src,
                    dst_addr: dst,
                    protocol: match self.l4 {
                        L4::Udp { .. } => IpProtocol::Udp,
                        L4::Tcp { .. } => IpProtocol::Tcp,
                        L4::Echo { .. } => IpProtocol::Icmp,
                    },
                    payload_len: l4_len as u16,
                    ttl: self.ttl,
                    dscp: 0,
                    ecn: 0,
                    ident: 0x1234,
                    dont_frag: self.fragment.is_none(),
                    more_frags,
                    frag_offset,
                };
                repr.emit(&mut ipv4::Packet::new_unchecked(&mut ip[..]));
                let segment = &mut ip[ipv4::HEADER_LEN..];
                self.emit_l4(segment, |packet| match packet {
                    Checksum::Udp(mut p) => p.fill_checksum_v4(src, dst),
                    Checksum::Tcp(mut p) => p.fill_checksum_v4(src, dst),
                    Checksum::Icmp(bytes) => icmpv4::Packet::new_unchecked(bytes).fill_checksum(),
                });
            }
            L3::Ipv6 { src, dst } => {
                let upper = match self.l4 {
                    L4::Udp { .. } => IpProtocol::Udp,
                    L4::Tcp { .. } => IpProtocol::Tcp,
                    L4::Echo { .. } => IpProtocol::Icmpv6,
                };
                let ext_len = 8 * self.extension_headers;
                let repr = ipv6::Repr {
                    src_addr: src,
                    dst_addr: dst,
                    next_header: if self.extension_headers > 0 {
                        IpProtocol::Ipv6Opts
                    } else {
                        upper
                    },
                    payload_len: (ext_len + l4_len) as u16,
                    hop_limit: self.ttl,
                    traffic_class: 0,
                    flow_label: 0,
                };
                repr.emit(&mut ipv6::Packet::new_unchecked(&mut ip[..]));
                for i in 0..self.extension_headers {
                    let next_header = if i + 1 == self.extension_headers {
                        upper
                    } else {
                        IpProtocol::Ipv6Opts
                    };
                    let at = ipv6::HEADER_LEN + 8 * i;
                    ipv6::OptionsRepr {
                        next_header,
                        header_len: 8,
                    }
                    .emit(&mut ipv6::ExtHeader::new_unchecked(&mut ip[at..at + 8]));
                }
                let segment = &mut ip[ipv6::HEADER_LEN + ext_len..];
                self.emit_l4(segment, |packet| match packet {
                    Checksum::Udp(mut p) => p.fill_checksum_v6(src, dst),
                    Checksum::Tcp(mut p) => p.fill_checksum_v6(src, dst),
                    Checksum::Icmp(bytes) => {
                        icmpv6::Packet::new_unchecked(bytes).fill_checksum(src, dst)
                    }
                });
            }
        }
    }

    fn emit_l4(&self, segment: &mut [u8], fill: impl FnOnce(Checksum<'_>)) {
        match self.l4 {
            L4::Udp { src_port, dst_port } => {
                let payload_len = (segment.len() - udp::HEADER_LEN) as u16;
                let mut packet = udp::Packet::new_unchecked(&mut segment[..]);
                udp::Repr {
                    src_port,
                    dst_port,
                    payload_len,
                }
                .emit(&mut packet);
                fill(Checksum::Udp(packet));
            }
            L4::Tcp { src_port, dst_port } => {
                let mut packet = tcp::Packet::new_unchecked(&mut segment[..]);
                tcp::Repr {
                    src_port,
                    dst_port,
                    seq_number: 1,
                    ack_number: 0,
                    flags: tcp::flags::ACK,
                    window_len: 65535,
                    urgent_at: 0,
                    max_seg_size: None,
                    window_scale: None,
                    sack_permitted: false,
                }
                .emit(&mut packet);
                fill(Checksum::Tcp(packet));
            }
            L4::Echo { ident, seq_no } => {
                // ICMPv4 and ICMPv6 echo share the layout; only the type number differs.
                let mut packet = icmpv4::Packet::new_unchecked(&mut segment[..]);
                icmpv4::Repr::echo_request(ident, seq_no).emit(&mut packet);
                if let L3::Ipv6 { .. } = self.l3 {
                    segment[0] = u8::from(icmpv6::Message::EchoRequest);
                }
                fill(Checksum::Icmp(segment));
            }
        }
    }
}

/// A transport header whose checksum is still to be filled, handed to the L3 code that knows
/// the pseudo-header.
enum Checksum<'a> {
    Udp(udp::Packet<&'a mut [u8]>),
    Tcp(tcp::Packet<&'a mut [u8]>),
    Icmp(&'a mut [u8]),
}

/// An ARP request "who has `target`? tell `sender`" from `sender_mac`, broadcast, padded to the
/// 60-byte Ethernet minimum.
pub fn arp_request(sender_mac: EthernetAddress, sender: Ipv4Addr, target: Ipv4Addr) -> Vec<u8> {
    let mut frame = vec![0u8; 60];
    ethernet::Repr {
        src_addr: sender_mac,
        dst_addr: EthernetAddress::BROADCAST,
        ethertype: EtherType::Arp,
    }
    .emit(&mut ethernet::Packet::new_unchecked(&mut frame[..]));
    arp::Repr {
        operation: arp::Operation::Request,
        source_hardware_addr: sender_mac,
        source_protocol_addr: sender,
        target_hardware_addr: EthernetAddress([0; 6]),
        target_protocol_addr: target,
    }
    .emit(&mut arp::Packet::new_unchecked(
        &mut frame[ethernet::HEADER_LEN..],
    ));
    frame
}

/// Any unicast or group MAC.
pub fn arb_mac() -> impl Strategy<Value = EthernetAddress> {
    any::<[u8; 6]>().prop_map(EthernetAddress)
}

/// Either IP version with arbitrary addresses.
pub fn arb_l3() -> impl Strategy<Value = L3> {
    prop_oneof![
        (any::<u32>(), any::<u32>()).prop_map(|(s, d)| L3::Ipv4 {
            src: Ipv4Addr::from(s),
            dst: Ipv4Addr::from(d),
        }),
        (any::<u128>(), any::<u128>()).prop_map(|(s, d)| L3::Ipv6 {
            src: Ipv6Addr::from(s),
            dst: Ipv6Addr::from(d),
        }),
    ]
}

/// UDP, TCP or ICMP echo with arbitrary ports / identifiers.
pub fn arb_l4() -> impl Strategy<Value = L4> {
    prop_oneof![
        (any::<u16>(), any::<u16>()).prop_map(|(s, d)| L4::Udp {
            src_port: s,
            dst_port: d
        }),
        (any::<u16>(), any::<u16>()).prop_map(|(s, d)| L4::Tcp {
            src_port: s,
            dst_port: d
        }),
        (any::<u16>(), any::<u16>()).prop_map(|(i, q)| L4::Echo {
            ident: i,
            seq_no: q
        }),
    ]
}

/// Arbitrary valid, unfragmented IP frames: any MACs, 0..=2 VLAN tags, IPv4 or IPv6 (with
/// 0..=3 extension headers), UDP/TCP/ICMP echo, payload 0..=200 bytes.
pub fn arb_frame_builder() -> impl Strategy<Value = FrameBuilder> {
    (
        arb_mac(),
        arb_mac(),
        proptest::collection::vec(0u16..4096, 0..=2),
        arb_l3(),
        arb_l4(),
        1u8..=255,
        0usize..=3,
        0usize..=200,
    )
        .prop_map(|(src, dst, vlans, l3, l4, ttl, ext, payload)| {
            let mut builder = FrameBuilder::new(l3, l4).macs(src, dst).ttl(ttl);
            builder.vlans = vlans;
            if let L3::Ipv6 { .. } = l3 {
                builder.extension_headers = ext;
            }
            builder.payload_len(payload)
        })
}

/// The bytes of [`arb_frame_builder`] frames.
pub fn arb_frame() -> impl Strategy<Value = Vec<u8>> {
    arb_frame_builder().prop_map(|builder| builder.build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sixty_byte_ipv4_udp_frame() {
        let frame = FrameBuilder::ipv4_udp().frame_len(60).build();
        assert_eq!(frame.len(), 60);
        let ip = ipv4::Packet::new_checked(&frame[14..]).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!(ip.total_len(), 46);
        let udp = udp::Packet::new_checked(ip.payload()).unwrap();
        assert_eq!((udp.src_port(), udp.dst_port()), (1024, 1025));
        assert!(udp.verify_checksum_v4(ip.src_addr(), ip.dst_addr()));
        assert_eq!(udp.payload().len(), 18);
    }

    #[test]
    fn tagged_ipv6_tcp_frame() {
        let frame = FrameBuilder::ipv6_udp()
            .with_l4(L4::Tcp {
                src_port: 80,
                dst_port: 8080,
            })
            .vlan(100)
            .vlan(200)
            .extension_headers(2)
            .payload_len(10)
            .build();
        let eth = ethernet::Packet::new_checked(&frame[..]).unwrap();
        assert_eq!(eth.ethertype(), EtherType::QinQ);
        let outer = vlan::Packet::new_checked(eth.payload()).unwrap();
        assert_eq!((outer.vid(), outer.ethertype()), (100, EtherType::Vlan));
        let inner = vlan::Packet::new_checked(outer.payload()).unwrap();
        assert_eq!((inner.vid(), inner.ethertype()), (200, EtherType::Ipv6));
        let ip = ipv6::Packet::new_checked(inner.payload()).unwrap();
        let upper = ipv6::walk_extension_headers(ip.payload(), ip.next_header()).unwrap();
        assert_eq!((upper.protocol, upper.offset), (IpProtocol::Tcp, 16));
        let tcp = tcp::Packet::new_checked(&ip.payload()[16..]).unwrap();
        assert_eq!(tcp.dst_port(), 8080);
        assert_eq!(tcp.payload().len(), 10);
        // The checksum covers the upper-layer packet only, not the extension headers.
        assert!(tcp.verify_checksum_v6(ip.src_addr(), ip.dst_addr()));
    }

    #[test]
    fn echo_frames_carry_valid_checksums() {
        let v4 = FrameBuilder::ipv4_udp()
            .with_l4(L4::Echo {
                ident: 7,
                seq_no: 9,
            })
            .payload_len(5)
            .build();
        let icmp = icmpv4::Packet::new_checked(&v4[34..]).unwrap();
        assert!(icmp.verify_checksum());
        assert_eq!(icmp.echo_seq_no(), 9);
        let v6 = FrameBuilder::ipv6_udp()
            .with_l4(L4::Echo {
                ident: 7,
                seq_no: 9,
            })
            .build();
        let ip = ipv6::Packet::new_checked(&v6[14..]).unwrap();
        let icmp = icmpv6::Packet::new_checked(ip.payload()).unwrap();
        assert_eq!(icmp.msg_type(), icmpv6::Message::EchoRequest);
        assert!(icmp.verify_checksum(ip.src_addr(), ip.dst_addr()));
    }

    #[test]
    fn arp_request_frame() {
        let frame = arp_request(
            SRC_MAC,
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
        );
        assert_eq!(frame.len(), 60);
        let packet = arp::Packet::new_checked(&frame[14..]).unwrap();
        let repr = arp::Repr::parse(&packet).unwrap();
        assert_eq!(repr.target_protocol_addr, Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(repr.operation, arp::Operation::Request);
    }
}
