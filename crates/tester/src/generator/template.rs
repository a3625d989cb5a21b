//! Frame templates: a UDP frame built once, stamped into pool frames with a per-flow field.
//!
//! A template is the complete frame as bytes (Ethernet, optional 802.1Q tag, IPv4 or IPv6, UDP,
//! zero payload up to the frame size), with correct checksums. Sending flow *i* copies the bytes
//! and rewrites the UDP source port to `src_port + i`, fixing the UDP checksum with the RFC 1624
//! incremental update: no per-packet checksum over the frame, so IPv6 is as cheap as IPv4.
//!
//! A template may also spread its frames over many destinations ([`Template::with_destinations`]
//! for IPv4, [`Template::with_destinations6`] for IPv6): frame *i* then goes to destination
//! `i % n`, and stamping rewrites the destination address too, with the checksums again updated
//! incrementally (the FIB-size sweep sends to addresses spread over every installed route this
//! way). An IPv6 destination is 16 bytes of the UDP pseudo-header: rather than eight word
//! updates per frame, each destination keeps its own flow-0 UDP checksum, computed once.
//!
//! Frame sizes follow RFC 2544: they count the 4-byte FCS, which the NIC (or veth) adds, so a
//! "64-byte frame" is 60 bytes in the buffer.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use wirespeed_packet::checksum;
use wirespeed_packet::wire::{
    EtherType, EthernetAddress, IpProtocol, ethernet, ipv4, ipv6, udp, vlan,
};

/// Bytes of the Ethernet FCS that frame sizes include and buffers do not.
pub const FCS_LEN: usize = 4;

/// What to build.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateConfig {
    /// Frame size including FCS, as RFC 2544 counts it (64..=1518, more with jumbo frames).
    pub frame_size: u16,
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    /// 802.1Q VLAN id to tag with, if any.
    pub vlan: Option<u16>,
    /// Source and destination address; both IPv4 or both IPv6.
    pub src_ip: IpAddr,
    pub dst_ip: IpAddr,
    pub src_port: u16,
    pub dst_port: u16,
    /// Number of flows; flow *i* uses UDP source port `src_port + i` (mod 2^16).
    pub flows: u32,
}

impl Default for TemplateConfig {
    fn default() -> Self {
        Self {
            frame_size: 64,
            src_mac: [0x02, 0x57, 0x53, 0, 0, 0x01],
            dst_mac: [0x02, 0x57, 0x53, 0, 0, 0xfe],
            vlan: None,
            src_ip: IpAddr::from([198, 18, 0, 1]),
            dst_ip: IpAddr::from([198, 19, 0, 1]),
            src_port: 1024,
            dst_port: 9,
            flows: 1,
        }
    }
}

/// Why a template cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error(
        "frame size {size} is too small for these headers; the smallest is {min} bytes (with FCS)"
    )]
    TooSmall { size: u16, min: usize },
    #[error("frame size {size} is larger than the largest supported frame, {max} bytes")]
    TooLarge { size: u16, max: usize },
    #[error("source and destination addresses must both be IPv4 or both IPv6")]
    MixedFamilies,
    #[error("a template needs at least one flow")]
    NoFlows,
    #[error("VLAN id {0} is not in 1..=4094")]
    VlanId(u16),
    #[error(
        "a template spreads over destinations of its own IP version, and needs at least one; \
         give addresses of the template's version and at least one destination"
    )]
    Destinations,
}

/// Largest buffer a template makes (a 9000-byte MTU jumbo frame with one tag).
pub const MAX_FRAME_LEN: usize = 9000 + ethernet::HEADER_LEN + vlan::HEADER_LEN;

/// A built template.
#[derive(Clone, Debug)]
pub struct Template {
    bytes: Vec<u8>,
    udp_offset: usize,
    base_src_port: u16,
    base_checksum: u16,
    flows: u32,
    /// Offset of the IP header.
    ip_offset: usize,
    /// With [`Template::with_destinations`]: the IPv4 destinations (host order) frames cycle
    /// through; empty otherwise.
    destinations: Vec<u32>,
    /// With [`Template::with_destinations6`]: the IPv6 destinations frames cycle through, each
    /// with the UDP checksum of flow 0 sent to it; empty otherwise.
    destinations6: Vec<([u8; 16], u16)>,
    /// The IPv4 header checksum of the frame of flow 0 (with destination 0).
    base_ip_checksum: u16,
}

impl Template {
    pub fn new(config: &TemplateConfig) -> Result<Self, TemplateError> {
        if config.flows == 0 {
            return Err(TemplateError::NoFlows);
        }
        if let Some(id) = config.vlan
            && !(1..=4094).contains(&id)
        {
            return Err(TemplateError::VlanId(id));
        }
        let l2_len = ethernet::HEADER_LEN + config.vlan.map_or(0, |_| vlan::HEADER_LEN);
        let l3_len = match (config.src_ip, config.dst_ip) {
            (IpAddr::V4(_), IpAddr::V4(_)) => ipv4::HEADER_LEN,
            (IpAddr::V6(_), IpAddr::V6(_)) => ipv6::HEADER_LEN,
            _ => return Err(TemplateError::MixedFamilies),
        };
        let headers = l2_len + l3_len + udp::HEADER_LEN;
        let min = (headers + FCS_LEN).max(64);
        let len = (config.frame_size as usize).saturating_sub(FCS_LEN);
        if (config.frame_size as usize) < min {
            return Err(TemplateError::TooSmall {
                size: config.frame_size,
                min,
            });
        }
        if len > MAX_FRAME_LEN {
            return Err(TemplateError::TooLarge {
                size: config.frame_size,
                max: MAX_FRAME_LEN + FCS_LEN,
            });
        }
        let mut bytes = vec![0u8; len];
        let l3_ethertype = if config.src_ip.is_ipv4() {
            EtherType::Ipv4
        } else {
            EtherType::Ipv6
        };
        let outer = ethernet::Repr {
            src_addr: EthernetAddress(config.src_mac),
            dst_addr: EthernetAddress(config.dst_mac),
            ethertype: if config.vlan.is_some() {
                EtherType::Vlan
            } else {
                l3_ethertype
            },
        };
        outer.emit(&mut ethernet::Packet::new_unchecked(&mut bytes[..]));
        if let Some(vid) = config.vlan {
            let tag = vlan::Repr {
                pcp: 0,
                dei: false,
                vid,
                ethertype: l3_ethertype,
            };
            tag.emit(&mut vlan::Packet::new_unchecked(
                &mut bytes[ethernet::HEADER_LEN..],
            ));
        }
        let udp_len = len - l2_len - l3_len;
        let udp_offset = l2_len + l3_len;
        let udp_repr = udp::Repr {
            src_port: config.src_port,
            dst_port: config.dst_port,
            payload_len: (udp_len - udp::HEADER_LEN) as u16,
        };
        udp_repr.emit(&mut udp::Packet::new_unchecked(&mut bytes[udp_offset..]));
        match (config.src_ip, config.dst_ip) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => {
                let ip = ipv4::Repr {
                    src_addr: src,
                    dst_addr: dst,
                    protocol: IpProtocol::Udp,
                    payload_len: udp_len as u16,
                    ttl: 64,
                    dscp: 0,
                    ecn: 0,
                    ident: 0,
                    dont_frag: true,
                    more_frags: false,
                    frag_offset: 0,
                };
                ip.emit(&mut ipv4::Packet::new_unchecked(&mut bytes[l2_len..]));
                udp::Packet::new_unchecked(&mut bytes[udp_offset..]).fill_checksum_v4(src, dst);
            }
            (IpAddr::V6(src), IpAddr::V6(dst)) => {
                let ip = ipv6::Repr {
                    src_addr: src,
                    dst_addr: dst,
                    next_header: IpProtocol::Udp,
                    payload_len: udp_len as u16,
                    hop_limit: 64,
                    traffic_class: 0,
                    flow_label: 0,
                };
                ip.emit(&mut ipv6::Packet::new_unchecked(&mut bytes[l2_len..]));
                udp::Packet::new_unchecked(&mut bytes[udp_offset..]).fill_checksum_v6(src, dst);
            }
            _ => return Err(TemplateError::MixedFamilies),
        }
        let base_checksum = udp::Packet::new_unchecked(&bytes[udp_offset..]).checksum();
        Ok(Self {
            bytes,
            udp_offset,
            base_src_port: config.src_port,
            base_checksum,
            flows: config.flows,
            ip_offset: l2_len,
            destinations: Vec::new(),
            destinations6: Vec::new(),
            base_ip_checksum: 0,
        })
    }

    /// This (IPv4) template with frame *i* sent to `destinations[i % n]` instead of one
    /// destination. The flow's UDP source port still cycles with `i % flows`.
    pub fn with_destinations(mut self, destinations: Vec<Ipv4Addr>) -> Result<Self, TemplateError> {
        let Some(&first) = destinations.first() else {
            return Err(TemplateError::Destinations);
        };
        let udp_offset = self.udp_offset;
        let (ip_bytes, udp_bytes) = self.bytes.split_at_mut(udp_offset);
        // The IP header ends where UDP starts: an IPv4 template's is exactly 20 bytes.
        let header = &mut ip_bytes[self.ip_offset..];
        if header.len() != ipv4::HEADER_LEN || header[0] >> 4 != 4 {
            return Err(TemplateError::Destinations);
        }
        let mut ip = ipv4::Packet::new_unchecked(header);
        let src = ip.src_addr();
        ip.set_dst_addr(first);
        ip.fill_checksum();
        self.base_ip_checksum = ip.checksum();
        let mut udp_packet = udp::Packet::new_unchecked(udp_bytes);
        udp_packet.set_src_port(self.base_src_port);
        udp_packet.fill_checksum_v4(src, first);
        self.base_checksum = udp_packet.checksum();
        self.destinations = destinations.into_iter().map(u32::from).collect();
        Ok(self)
    }

    /// This (IPv6) template with frame *i* sent to `destinations[i % n]`, as
    /// [`Template::with_destinations`].
    pub fn with_destinations6(
        mut self,
        destinations: Vec<Ipv6Addr>,
    ) -> Result<Self, TemplateError> {
        let udp_offset = self.udp_offset;
        let (ip_bytes, udp_bytes) = self.bytes.split_at_mut(udp_offset);
        let header = &mut ip_bytes[self.ip_offset..];
        if destinations.is_empty() || header.len() != ipv6::HEADER_LEN || header[0] >> 4 != 6 {
            return Err(TemplateError::Destinations);
        }
        let mut ip = ipv6::Packet::new_unchecked(header);
        let src = ip.src_addr();
        let mut udp_packet = udp::Packet::new_unchecked(udp_bytes);
        udp_packet.set_src_port(self.base_src_port);
        self.destinations6 = destinations
            .iter()
            .map(|&destination| {
                udp_packet.fill_checksum_v6(src, destination);
                (destination.octets(), udp_packet.checksum())
            })
            .collect();
        // The template's own bytes are the frame to the first destination.
        let (first, checksum) = self.destinations6[0];
        ip.set_dst_addr(Ipv6Addr::from(first));
        udp_packet.set_checksum(checksum);
        self.base_checksum = checksum;
        Ok(self)
    }

    /// [`Template::with_destinations`] or [`Template::with_destinations6`], by the version of
    /// `destinations` (all of one version).
    pub fn with_spread(self, destinations: &[IpAddr]) -> Result<Self, TemplateError> {
        let v4: Option<Vec<Ipv4Addr>> = destinations
            .iter()
            .map(|a| match a {
                IpAddr::V4(a) => Some(*a),
                IpAddr::V6(_) => None,
            })
            .collect();
        let v6: Option<Vec<Ipv6Addr>> = destinations
            .iter()
            .map(|a| match a {
                IpAddr::V6(a) => Some(*a),
                IpAddr::V4(_) => None,
            })
            .collect();
        match (v4, v6) {
            (Some(v4), _) if !v4.is_empty() => self.with_destinations(v4),
            (_, Some(v6)) if !v6.is_empty() => self.with_destinations6(v6),
            _ => Err(TemplateError::Destinations),
        }
    }

    /// The destinations frames cycle through (0 for a one-destination template).
    pub fn destinations(&self) -> usize {
        self.destinations.len().max(self.destinations6.len())
    }

    /// Length of every frame of this template (without FCS).
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Always false: a template has at least an Ethernet header.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Number of flows.
    pub fn flows(&self) -> u32 {
        self.flows
    }

    /// The frame of flow 0.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Bytes of every header (Ethernet, VLAN tag, IP, UDP): all that differs between the
    /// frames of different flows and destinations, and all a forwarder rewrites.
    pub fn head_len(&self) -> usize {
        self.udp_offset + udp::HEADER_LEN
    }

    /// How many different frames the template sends before frame *i* repeats: the flows, or
    /// with destinations the least common multiple of the flows and the destinations.
    pub fn patterns(&self) -> u64 {
        let flows = u64::from(self.flows.max(1));
        let destinations = self.destinations().max(1) as u64;
        let gcd = |mut a: u64, mut b: u64| {
            while b != 0 {
                (a, b) = (b, a % b);
            }
            a
        };
        flows / gcd(flows, destinations) * destinations
    }

    /// Writes the frame of flow `flow % flows` to the front of `out`; returns its length, or 0
    /// when `out` is too short.
    #[inline]
    pub fn write(&self, out: &mut [u8], flow: u32) -> usize {
        let Some(out) = out.get_mut(..self.bytes.len()) else {
            return 0;
        };
        out.copy_from_slice(&self.bytes);
        self.stamp(out, flow)
    }

    /// The frame of flow `flow % flows` in a buffer of its own: for code that builds its frames
    /// once (tests, benchmarks, the DuT probe); the generator writes into its pool with
    /// [`Template::write`] and [`Template::stamp`] instead.
    pub fn frame(&self, flow: u32) -> Vec<u8> {
        let mut frame = self.bytes.clone();
        self.stamp(&mut frame, flow);
        frame
    }

    /// Turns a frame that already holds this template (of any flow) into flow `flow % flows`
    /// by rewriting only the fields that differ between flows (4 bytes); returns the frame
    /// length, or 0 when `out` is too short. This is the generator's per-packet work: frames
    /// are filled with the template once, at start-up.
    #[inline]
    pub fn stamp(&self, out: &mut [u8], flow: u32) -> usize {
        let Some(out) = out.get_mut(..self.bytes.len()) else {
            return 0;
        };
        let index = flow % self.flows;
        let port = self.base_src_port.wrapping_add(index as u16);
        let mut udp_checksum = checksum::update_word(self.base_checksum, self.base_src_port, port);
        if let Some(&base) = self.destinations.first() {
            let count = self.destinations.len() as u32;
            let destination = self
                .destinations
                .get((flow % count) as usize)
                .copied()
                .unwrap_or(base);
            // The destination is in the IPv4 header and in the UDP pseudo-header: both sums
            // move by the same words.
            let ip_checksum = checksum::update_u32(self.base_ip_checksum, base, destination);
            udp_checksum = checksum::update_u32(udp_checksum, base, destination);
            let mut ip = ipv4::Packet::new_unchecked(&mut out[self.ip_offset..]);
            ip.set_dst_addr(destination.into());
            ip.set_checksum(ip_checksum);
        }
        let count6 = self.destinations6.len() as u32;
        if let Some(&(destination, checksum)) = self
            .destinations6
            .get(flow.checked_rem(count6).unwrap_or(0) as usize)
        {
            udp_checksum = checksum::update_word(checksum, self.base_src_port, port);
            let mut ip = ipv6::Packet::new_unchecked(&mut out[self.ip_offset..]);
            ip.set_dst_addr(Ipv6Addr::from(destination));
        }
        // In UDP a computed checksum of zero is sent as all ones (zero means "none").
        if udp_checksum == 0 {
            udp_checksum = 0xffff;
        }
        if index == 0 && self.destinations() == 0 {
            udp_checksum = self.base_checksum;
        }
        let mut packet = udp::Packet::new_unchecked(&mut out[self.udp_offset..]);
        packet.set_src_port(port);
        packet.set_checksum(udp_checksum);
        self.bytes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn udp_checksum_ok(frame: &[u8], v6: bool) -> bool {
        let l3 = ethernet::HEADER_LEN;
        if v6 {
            let ip = ipv6::Packet::new_checked(&frame[l3..]).unwrap();
            let udp = &frame[l3 + ipv6::HEADER_LEN..];
            checksum::verify_transport_v6(ip.src_addr(), ip.dst_addr(), 17, udp)
        } else {
            let ip = ipv4::Packet::new_checked(&frame[l3..]).unwrap();
            let udp = &frame[l3 + ipv4::HEADER_LEN..];
            checksum::verify_transport_v4(ip.src_addr(), ip.dst_addr(), 17, udp)
        }
    }

    #[test]
    fn a_frame_of_its_own_is_what_write_gives() {
        let spread = Template::new(&TemplateConfig {
            flows: 7,
            ..TemplateConfig::default()
        })
        .unwrap()
        .with_destinations(vec![
            Ipv4Addr::new(198, 19, 0, 1),
            Ipv4Addr::new(198, 19, 9, 9),
        ])
        .unwrap();
        let plain = Template::new(&TemplateConfig::default()).unwrap();
        for template in [plain, spread] {
            let mut out = vec![0u8; 2048];
            for flow in [0, 1, 6, 7, 1000] {
                let len = template.write(&mut out, flow);
                assert_eq!(template.frame(flow), out[..len], "flow {flow}");
            }
        }
    }

    #[test]
    fn a_64_byte_ipv4_template_is_60_bytes_with_valid_checksums_for_every_flow() {
        let config = TemplateConfig {
            flows: 300,
            ..TemplateConfig::default()
        };
        let template = Template::new(&config).unwrap();
        assert_eq!(template.len(), 60);
        let mut out = [0u8; 2048];
        let mut ports = std::collections::HashSet::new();
        for flow in 0..300 {
            let len = template.write(&mut out, flow);
            let frame = &out[..len];
            let ip = ipv4::Packet::new_checked(&frame[14..]).unwrap();
            assert!(ip.verify_checksum());
            assert!(udp_checksum_ok(frame, false), "flow {flow}");
            ports.insert(udp::Packet::new_checked(&frame[34..]).unwrap().src_port());
        }
        assert_eq!(ports.len(), 300);
        // Stamping a frame of one flow into another gives the same bytes as writing it afresh.
        let mut fresh = [0u8; 2048];
        template.write(&mut out, 5);
        for flow in [0, 1, 299, 300, 77] {
            template.stamp(&mut out, flow);
            template.write(&mut fresh, flow);
            assert_eq!(out[..60], fresh[..60], "flow {flow}");
        }
    }

    #[test]
    fn ipv6_and_vlan_templates_have_the_right_layout() {
        let config = TemplateConfig {
            frame_size: 128,
            src_ip: IpAddr::V6(Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1)),
            dst_ip: IpAddr::V6(Ipv6Addr::new(0x2001, 2, 0, 1, 0, 0, 0, 1)),
            flows: 4,
            ..TemplateConfig::default()
        };
        let template = Template::new(&config).unwrap();
        let mut out = [0u8; 256];
        for flow in 0..4 {
            let len = template.write(&mut out, flow);
            assert_eq!(len, 124);
            assert!(udp_checksum_ok(&out[..len], true));
        }
        let tagged = Template::new(&TemplateConfig {
            vlan: Some(100),
            ..TemplateConfig::default()
        })
        .unwrap();
        let bytes = tagged.bytes();
        assert_eq!(&bytes[12..14], &[0x81, 0x00]);
        assert_eq!(&bytes[14..16], &[0x00, 100]);
        assert_eq!(&bytes[16..18], &[0x08, 0x00]);
    }

    /// The first 30 frames of `template` (3 flows over `destinations`): each stamped over
    /// another flow's frame is the frame written afresh, goes to `destinations[i % n]` with
    /// valid checksums, and from its flow's port.
    fn assert_spread(template: &Template, destinations: &[IpAddr]) {
        let v6 = destinations[0].is_ipv6();
        let udp_at = ethernet::HEADER_LEN
            + if v6 {
                ipv6::HEADER_LEN
            } else {
                ipv4::HEADER_LEN
            };
        let mut out = [0u8; 2048];
        let mut fresh = [0u8; 2048];
        for flow in 0..30u32 {
            let len = template.write(&mut fresh, flow);
            template.stamp(&mut out, flow);
            if flow > 0 {
                assert_eq!(out[..len], fresh[..len], "flow {flow}");
            }
            template.write(&mut out, flow);
            let frame = &out[..len];
            let destination = if v6 {
                IpAddr::from(ipv6::Packet::new_checked(&frame[14..]).unwrap().dst_addr())
            } else {
                let ip = ipv4::Packet::new_checked(&frame[14..]).unwrap();
                assert!(ip.verify_checksum(), "flow {flow}");
                IpAddr::from(ip.dst_addr())
            };
            assert_eq!(
                destination,
                destinations[flow as usize % destinations.len()]
            );
            assert!(udp_checksum_ok(frame, v6), "flow {flow}");
            let udp = udp::Packet::new_checked(&frame[udp_at..]).unwrap();
            assert_eq!(udp.src_port(), 1024 + (flow % 3) as u16);
        }
    }

    #[test]
    fn frames_spread_over_destinations_have_valid_checksums_and_cycle_through_them() {
        let destinations: Vec<Ipv4Addr> = (0..5u32)
            .map(|i| Ipv4Addr::from(0x0a00_0001 + i * 0x0001_0101))
            .collect();
        let template = Template::new(&TemplateConfig {
            flows: 3,
            ..TemplateConfig::default()
        })
        .unwrap()
        .with_destinations(destinations.clone())
        .unwrap();
        assert_eq!(template.destinations(), 5);
        assert_eq!(&template.bytes()[30..34], &destinations[0].octets());
        let spread: Vec<IpAddr> = destinations.iter().map(|&a| a.into()).collect();
        assert_spread(&template, &spread);
        let v6 = Template::new(&TemplateConfig {
            frame_size: 128,
            src_ip: IpAddr::V6(Ipv6Addr::LOCALHOST),
            dst_ip: IpAddr::V6(Ipv6Addr::LOCALHOST),
            ..TemplateConfig::default()
        })
        .unwrap();
        assert_eq!(
            v6.with_destinations(destinations).unwrap_err(),
            TemplateError::Destinations
        );
        assert_eq!(
            Template::new(&TemplateConfig::default())
                .unwrap()
                .with_destinations(Vec::new())
                .unwrap_err(),
            TemplateError::Destinations
        );
    }

    #[test]
    fn ipv6_frames_spread_over_destinations_have_valid_checksums_and_cycle_through_them() {
        let destinations: Vec<Ipv6Addr> = (0..5u128)
            .map(|i| Ipv6Addr::from((0x2400_0000_0000_0000 << 64) + (i << 80) + i * 0x1234_5678))
            .collect();
        let template = Template::new(&TemplateConfig {
            frame_size: 128,
            src_ip: IpAddr::V6(Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1)),
            dst_ip: IpAddr::V6(Ipv6Addr::new(0x2001, 2, 0, 0xff, 0, 0, 0, 1)),
            flows: 3,
            ..TemplateConfig::default()
        })
        .unwrap()
        .with_destinations6(destinations.clone())
        .unwrap();
        assert_eq!(template.destinations(), 5);
        assert_eq!(template.patterns(), 15);
        assert_eq!(&template.bytes()[38..54], &destinations[0].octets());
        let spread: Vec<IpAddr> = destinations.iter().map(|&a| a.into()).collect();
        assert_spread(&template, &spread);
        // An IPv4 template takes no IPv6 destinations, and an empty list is refused.
        assert_eq!(
            Template::new(&TemplateConfig::default())
                .unwrap()
                .with_destinations6(destinations.clone())
                .unwrap_err(),
            TemplateError::Destinations
        );
        let mixed = [IpAddr::from(destinations[0]), IpAddr::from([10, 0, 0, 1])];
        assert_eq!(
            template.clone().with_spread(&mixed).unwrap_err(),
            TemplateError::Destinations
        );
        assert_eq!(
            template.clone().with_spread(&spread).unwrap().bytes(),
            template.bytes()
        );
        assert_eq!(
            template.with_destinations6(Vec::new()).unwrap_err(),
            TemplateError::Destinations
        );
    }

    #[test]
    fn impossible_templates_are_refused() {
        let v6 = TemplateConfig {
            src_ip: IpAddr::V6(Ipv6Addr::LOCALHOST),
            dst_ip: IpAddr::V6(Ipv6Addr::LOCALHOST),
            ..TemplateConfig::default()
        };
        assert_eq!(
            Template::new(&v6).unwrap_err(),
            TemplateError::TooSmall { size: 64, min: 66 }
        );
        let mixed = TemplateConfig {
            dst_ip: IpAddr::V6(Ipv6Addr::LOCALHOST),
            ..TemplateConfig::default()
        };
        assert_eq!(
            Template::new(&mixed).unwrap_err(),
            TemplateError::MixedFamilies
        );
        let none = TemplateConfig {
            flows: 0,
            ..TemplateConfig::default()
        };
        assert_eq!(Template::new(&none).unwrap_err(), TemplateError::NoFlows);
        let huge = TemplateConfig {
            frame_size: 10_000,
            ..TemplateConfig::default()
        };
        assert!(matches!(
            Template::new(&huge),
            Err(TemplateError::TooLarge { .. })
        ));
        assert_eq!(
            Template::new(&TemplateConfig {
                src_ip: Ipv4Addr::LOCALHOST.into(),
                ..TemplateConfig::default()
            })
            .map(|t| t.len()),
            Ok(60)
        );
        let mut short = [0u8; 10];
        assert_eq!(
            Template::new(&TemplateConfig::default())
                .unwrap()
                .write(&mut short, 0),
            0
        );
    }
}
