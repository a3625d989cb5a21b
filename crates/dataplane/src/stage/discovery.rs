//! The neighbour discovery stage: ARP (RFC 826) and IPv6 neighbour discovery (RFC 4861 §7) as
//! a router speaks them.
//!
//! Counters: [`DiscoveryCounters`]. Dispositions of an ARP/NDP packet: answered in place (an ARP
//! reply or a neighbour advertisement for one of the router's addresses leaves by the port the
//! request came in on), [`DropReason::Consumed`] (learned from, or ignored), or
//! [`DropReason::Truncated`] / [`DropReason::BadL4Header`] when malformed. One batch function,
//! [`Discovery::process`], looks at ARP and ICMPv6 ND packets only and leaves the rest alone.
//!
//! Learning is conservative, as a router's must be: a neighbour is created only from a request
//! for one of the router's own addresses (RFC 826's "merge" rule; RFC 4861 §7.2.3), replies and
//! advertisements only update entries the router created by asking (unsolicited ones are
//! ignored, as Linux does by default), senders must be on the ingress port's link, and static
//! entries are never overwritten. When an entry becomes reachable, the packets that waited for
//! it get their destination MAC and are emitted. The same stage builds the requests the router
//! sends to resolve a next hop ([`Discovery::request`]).
//!
//! Trace format ([`Discovered`], kept by `process::<true>` for [`Discovery::trace`]): `arp reply
//! 10.0.0.1 is-at 02:..`, `nd advert 2001:db8::1 is-at 02:..`, `arp learned 10.1.0.7 at 02:..,
//! released 2`, `arp ignored`, `nd malformed`.
//!
//! Every field is read through bounds-checked slices after the `wire` views' `new_checked`:
//! malformed input is counted, never trusted and never a panic.

use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

use wirespeed_packet::wire::{EtherType, EthernetAddress, IpProtocol, arp, icmpv6, ipv6};
use wirespeed_packet::{Batch, Desc, DropReason, MAX_BATCH, Meta};

use crate::app::Context;
use crate::stage::icmp_error::{Created, emit_created};
use crate::table::interfaces::Interfaces;
use crate::table::neighbour::{NeighbourKey, NeighbourTable, Refused};

const ETHERTYPE_ARP: u16 = 0x0806;
const PROTO_ICMPV6: u8 = 58;
const ND_ROUTER_SOLICIT: u8 = 133;
const ND_NEIGHBOR_SOLICIT: u8 = 135;
const ND_NEIGHBOR_ADVERT: u8 = 136;
const ND_REDIRECT: u8 = 137;
const OPTION_SOURCE_LLA: u8 = 1;
const OPTION_TARGET_LLA: u8 = 2;
/// Neighbour advertisement flags (RFC 4861 §4.4): router, solicited, override.
const NA_ROUTER: u32 = 1 << 31;
const NA_SOLICITED: u32 = 1 << 30;
const NA_OVERRIDE: u32 = 1 << 29;
/// Length of an NS or NA with one link-layer address option: header, target, option.
const ND_LEN: usize = icmpv6::HEADER_LEN + 16 + 8;
/// Ethernet + IPv6 + ND message.
const ND_FRAME_LEN: usize = 14 + ipv6::HEADER_LEN + ND_LEN;
/// Ethernet minimum without FCS: ARP frames are padded to it.
const MIN_FRAME_LEN: usize = 60;
const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

/// What the stage did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiscoveryCounters {
    /// ARP requests for the router's addresses, answered.
    pub arp_replied: u64,
    /// ARP packets that made an entry reachable or refreshed it.
    pub arp_learned: u64,
    /// ARP requests the router sent to resolve a next hop.
    pub arp_requests: u64,
    /// ARP packets not for the router, unsolicited replies, gratuitous ARP for unknown hosts.
    pub arp_ignored: u64,
    /// ARP packets too short, not Ethernet/IPv4, with a bad operation or sender.
    pub arp_malformed: u64,
    /// Neighbour solicitations for the router's addresses, answered.
    pub nd_replied: u64,
    /// NS/NA that made an entry reachable or refreshed it.
    pub nd_learned: u64,
    /// Neighbour solicitations the router sent.
    pub nd_solicits: u64,
    /// ND messages not for the router, unsolicited advertisements, RS/RA/redirects.
    pub nd_ignored: u64,
    /// ND messages failing RFC 4861 validation (hop limit, checksum, code, length, options).
    pub nd_malformed: u64,
    /// Entries not created because the table was full.
    pub refused: u64,
    /// Held packets sent once their neighbour answered.
    pub released: u64,
    /// No address on the port to send a request from.
    pub no_source: u64,
    pub pool_empty: u64,
    pub emit_overflow: u64,
}

/// Which protocol a packet of the stage spoke.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Arp,
    Nd,
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Protocol::Arp => "arp",
            Protocol::Nd => "nd",
        })
    }
}

/// What the stage did with one packet; its `Display` is the stage's trace line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Discovered {
    /// Not ARP or ND, or decided by an earlier stage.
    Skipped,
    /// Answered in place: `addr` (one of the router's) is at `mac`. Learning the asker may have
    /// released packets that waited for it.
    Replied {
        protocol: Protocol,
        addr: IpAddr,
        mac: EthernetAddress,
        released: u16,
    },
    /// An entry the router asked for (or knew) became reachable at `mac`.
    Learned {
        protocol: Protocol,
        addr: IpAddr,
        mac: EthernetAddress,
        released: u16,
    },
    /// Not for the router, unsolicited, or a message the router does not act on.
    Ignored(Protocol),
    Malformed(Protocol),
}

impl fmt::Display for Discovered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let released = match *self {
            Discovered::Skipped => return f.write_str("-"),
            Discovered::Ignored(protocol) => return write!(f, "{protocol} ignored"),
            Discovered::Malformed(protocol) => return write!(f, "{protocol} malformed"),
            Discovered::Replied {
                protocol: Protocol::Arp,
                addr,
                mac,
                released,
            } => {
                write!(f, "arp reply {addr} is-at {mac}")?;
                released
            }
            Discovered::Replied {
                protocol: Protocol::Nd,
                addr,
                mac,
                released,
            } => {
                write!(f, "nd advert {addr} is-at {mac}")?;
                released
            }
            Discovered::Learned {
                protocol,
                addr,
                mac,
                released,
            } => {
                write!(f, "{protocol} learned {addr} at {mac}")?;
                released
            }
        };
        if released > 0 {
            write!(f, ", released {released}")?;
        }
        Ok(())
    }
}

/// ARP and NDP. See the module documentation.
#[derive(Debug)]
pub struct Discovery {
    counters: DiscoveryCounters,
    /// What `process::<true>` did with each packet of the last batch.
    trace: [Discovered; MAX_BATCH],
}

impl Default for Discovery {
    fn default() -> Self {
        Self::new()
    }
}

/// A packet the stage handled: what to do with it.
enum Outcome {
    /// Rewritten in place into a reply of this length; send it back out of the ingress port.
    Reply(u16),
    Drop(DropReason),
}

impl Discovery {
    pub fn new() -> Self {
        Discovery {
            counters: DiscoveryCounters::default(),
            trace: [Discovered::Skipped; MAX_BATCH],
        }
    }

    pub fn counters(&self) -> DiscoveryCounters {
        self.counters
    }

    /// The outcomes of the last batch processed with tracing on, packet by packet.
    pub fn trace(&self, len: usize) -> &[Discovered] {
        self.trace.get(..len).unwrap_or(&self.trace)
    }

    /// Whether this stage may have something to do with the packet `meta` describes: an ARP
    /// frame, or an ICMPv6 message (perhaps ND). The router skips the stage's pass over a batch
    /// in which no packet qualifies; a packet that does is looked at exactly as before.
    #[inline]
    pub fn may_handle(meta: &Meta) -> bool {
        meta.ethertype == ETHERTYPE_ARP
            || (meta.flags & Meta::FLAG_IPV6 != 0
                && meta.ip_proto == PROTO_ICMPV6
                && meta.l4_offset != 0)
    }

    /// Handles every undecided ARP and ICMPv6 ND packet of `batch`. With `TRACE`, each outcome
    /// is kept for [`Discovery::trace`].
    pub fn process<const TRACE: bool>(
        &mut self,
        ctx: &mut Context<'_>,
        interfaces: &Interfaces,
        neighbours: &mut NeighbourTable,
        batch: &mut Batch,
    ) {
        let (descs, metas) = batch.split_mut();
        for (i, (desc, meta)) in descs.iter_mut().zip(metas.iter_mut()).enumerate() {
            if TRACE && let Some(slot) = self.trace.get_mut(i) {
                *slot = Discovered::Skipped;
            }
            if meta.drop.is_some() || meta.out_port != Meta::NO_PORT {
                continue;
            }
            if !Self::may_handle(meta) {
                continue;
            }
            let (outcome, discovered) = if meta.ethertype == ETHERTYPE_ARP {
                self.arp(ctx, interfaces, neighbours, desc, meta)
            } else if is_nd(ctx, desc, meta) {
                self.nd(ctx, interfaces, neighbours, desc, meta)
            } else {
                continue;
            };
            if TRACE && let Some(slot) = self.trace.get_mut(i) {
                *slot = discovered;
            }
            match outcome {
                Outcome::Reply(len) => {
                    desc.len = len;
                    meta.out_port = desc.port;
                }
                Outcome::Drop(reason) => meta.drop = Some(reason),
            }
        }
    }

    fn arp(
        &mut self,
        ctx: &mut Context<'_>,
        interfaces: &Interfaces,
        neighbours: &mut NeighbourTable,
        desc: &Desc,
        meta: &Meta,
    ) -> (Outcome, Discovered) {
        const MALFORMED: Discovered = Discovered::Malformed(Protocol::Arp);
        let port = desc.port;
        let start = usize::from(desc.offset) + usize::from(meta.l3_offset);
        let end = usize::from(desc.offset) + usize::from(desc.len);
        let Some(bytes) = ctx.pool.frame(desc.frame).get(start..end) else {
            self.counters.arp_malformed += 1;
            return (Outcome::Drop(DropReason::Truncated), MALFORMED);
        };
        let request = match arp::Packet::new_checked(bytes).and_then(|p| arp::Repr::parse(&p)) {
            Ok(repr) => repr,
            Err(wirespeed_packet::wire::Error::Truncated) => {
                self.counters.arp_malformed += 1;
                return (Outcome::Drop(DropReason::Truncated), MALFORMED);
            }
            Err(_) => {
                self.counters.arp_malformed += 1;
                return (Outcome::Drop(DropReason::Consumed), MALFORMED);
            }
        };
        let sender_ok = request.source_hardware_addr.is_unicast()
            && request.source_hardware_addr != EthernetAddress([0; 6]);
        if !sender_ok {
            self.counters.arp_malformed += 1;
            return (Outcome::Drop(DropReason::Consumed), MALFORMED);
        }
        let sender = request.source_protocol_addr;
        let learnable = !sender.is_unspecified()
            && interfaces.on_link_v4(port, sender)
            && !interfaces.owns_v4(port, sender);
        let for_us = interfaces.owns_v4(port, request.target_protocol_addr);
        match request.operation {
            arp::Operation::Request if for_us => {
                let mut released = 0;
                if learnable {
                    released = self
                        .learn(
                            ctx,
                            neighbours,
                            NeighbourKey::v4(sender, port),
                            request.source_hardware_addr,
                            true,
                            Family::V4,
                        )
                        .unwrap_or(0);
                }
                let Some(mac) = interfaces.mac(port) else {
                    return (
                        Outcome::Drop(DropReason::Consumed),
                        Discovered::Ignored(Protocol::Arp),
                    );
                };
                let reply = arp::Repr {
                    operation: arp::Operation::Reply,
                    source_hardware_addr: mac,
                    source_protocol_addr: request.target_protocol_addr,
                    target_hardware_addr: request.source_hardware_addr,
                    target_protocol_addr: sender,
                };
                let at = usize::from(desc.offset);
                let Some(frame) = ctx
                    .pool
                    .frame_mut(desc.frame)
                    .get_mut(at..at + MIN_FRAME_LEN)
                else {
                    return (
                        Outcome::Drop(DropReason::Consumed),
                        Discovered::Ignored(Protocol::Arp),
                    );
                };
                write_arp(frame, request.source_hardware_addr, mac, &reply);
                self.counters.arp_replied += 1;
                let replied = Discovered::Replied {
                    protocol: Protocol::Arp,
                    addr: IpAddr::V4(request.target_protocol_addr),
                    mac,
                    released,
                };
                (Outcome::Reply(MIN_FRAME_LEN as u16), replied)
            }
            arp::Operation::Request | arp::Operation::Reply => {
                // Replies to our requests, and refreshes from neighbours we already know.
                let learned = if learnable {
                    self.learn(
                        ctx,
                        neighbours,
                        NeighbourKey::v4(sender, port),
                        request.source_hardware_addr,
                        false,
                        Family::V4,
                    )
                } else {
                    None
                };
                let discovered = match learned {
                    Some(released) => Discovered::Learned {
                        protocol: Protocol::Arp,
                        addr: IpAddr::V4(sender),
                        mac: request.source_hardware_addr,
                        released,
                    },
                    None => {
                        self.counters.arp_ignored += 1;
                        Discovered::Ignored(Protocol::Arp)
                    }
                };
                (Outcome::Drop(DropReason::Consumed), discovered)
            }
            arp::Operation::Unknown(_) => {
                self.counters.arp_malformed += 1;
                (Outcome::Drop(DropReason::Consumed), MALFORMED)
            }
        }
    }

    fn nd(
        &mut self,
        ctx: &mut Context<'_>,
        interfaces: &Interfaces,
        neighbours: &mut NeighbourTable,
        desc: &Desc,
        meta: &Meta,
    ) -> (Outcome, Discovered) {
        const IGNORED: Discovered = Discovered::Ignored(Protocol::Nd);
        let port = desc.port;
        let Some(message) = NdMessage::parse(ctx, desc, meta) else {
            self.counters.nd_malformed += 1;
            return (
                Outcome::Drop(DropReason::BadL4Header),
                Discovered::Malformed(Protocol::Nd),
            );
        };
        match message.kind {
            ND_NEIGHBOR_SOLICIT => {
                if !interfaces.owns_v6(port, message.target) {
                    self.counters.nd_ignored += 1;
                    return (Outcome::Drop(DropReason::Consumed), IGNORED);
                }
                let mut released = 0;
                if let Some(lla) = message.link_layer
                    && !message.src.is_unspecified()
                    && interfaces.on_link_v6(port, message.src)
                {
                    released = self
                        .learn(
                            ctx,
                            neighbours,
                            NeighbourKey::v6(message.src, port),
                            lla,
                            true,
                            Family::V6,
                        )
                        .unwrap_or(0);
                }
                let Some(mac) = interfaces.mac(port) else {
                    return (Outcome::Drop(DropReason::Consumed), IGNORED);
                };
                // Duplicate address detection probes (unspecified source) get an unsolicited
                // advertisement to all nodes (RFC 4861 §7.2.4).
                let (dst, dst_mac, flags) = if message.src.is_unspecified() {
                    (ALL_NODES, multicast_mac(ALL_NODES), NA_ROUTER | NA_OVERRIDE)
                } else {
                    let dst_mac = message.link_layer.unwrap_or(message.eth_src);
                    (message.src, dst_mac, NA_ROUTER | NA_SOLICITED | NA_OVERRIDE)
                };
                let at = usize::from(desc.offset);
                let Some(frame) = ctx
                    .pool
                    .frame_mut(desc.frame)
                    .get_mut(at..at + ND_FRAME_LEN)
                else {
                    return (Outcome::Drop(DropReason::Consumed), IGNORED);
                };
                write_nd(
                    frame,
                    NdFrame {
                        dst_mac,
                        src_mac: mac,
                        src: message.target,
                        dst,
                        kind: ND_NEIGHBOR_ADVERT,
                        flags,
                        target: message.target,
                        option: OPTION_TARGET_LLA,
                    },
                );
                self.counters.nd_replied += 1;
                let replied = Discovered::Replied {
                    protocol: Protocol::Nd,
                    addr: IpAddr::V6(message.target),
                    mac,
                    released,
                };
                (Outcome::Reply(ND_FRAME_LEN as u16), replied)
            }
            ND_NEIGHBOR_ADVERT => {
                let learned = match message.link_layer {
                    Some(lla) if interfaces.on_link_v6(port, message.target) => self
                        .learn(
                            ctx,
                            neighbours,
                            NeighbourKey::v6(message.target, port),
                            lla,
                            false,
                            Family::V6,
                        )
                        .map(|released| (lla, released)),
                    _ => None,
                };
                let discovered = match learned {
                    Some((mac, released)) => Discovered::Learned {
                        protocol: Protocol::Nd,
                        addr: IpAddr::V6(message.target),
                        mac,
                        released,
                    },
                    None => {
                        self.counters.nd_ignored += 1;
                        IGNORED
                    }
                };
                (Outcome::Drop(DropReason::Consumed), discovered)
            }
            _ => {
                self.counters.nd_ignored += 1;
                (Outcome::Drop(DropReason::Consumed), IGNORED)
            }
        }
    }

    /// Records `key` at `mac` (creating the entry only with `create`) and sends the packets that
    /// waited for it. Returns how many were sent when an entry was updated, `None` otherwise.
    fn learn(
        &mut self,
        ctx: &mut Context<'_>,
        neighbours: &mut NeighbourTable,
        key: NeighbourKey,
        mac: EthernetAddress,
        create: bool,
        family: Family,
    ) -> Option<u16> {
        match neighbours.learn(key, mac, ctx.now, create) {
            Ok(Some(slot)) => {
                match family {
                    Family::V4 => self.counters.arp_learned += 1,
                    Family::V6 => self.counters.nd_learned += 1,
                }
                Some(self.release(ctx, neighbours, slot, mac, key.port()))
            }
            Ok(None) => None,
            Err(Refused::TableFull | Refused::HoldFull) => {
                self.counters.refused += 1;
                None
            }
        }
    }

    /// Sends the packets waiting behind `slot` to `mac` out of `port`. They were rewritten when
    /// they were held (source MAC, TTL); only the destination MAC was missing. Returns how many
    /// were sent.
    pub fn release(
        &mut self,
        ctx: &mut Context<'_>,
        neighbours: &mut NeighbourTable,
        slot: u32,
        mac: EthernetAddress,
        port: u16,
    ) -> u16 {
        let counters = &mut self.counters;
        let mut sent = 0u16;
        neighbours.drain(slot, |desc| {
            let at = usize::from(desc.offset);
            if let Some(dst) = ctx.pool.frame_mut(desc.frame).get_mut(at..at + 6) {
                dst.copy_from_slice(&mac.0);
            }
            let meta = Meta {
                out_port: port,
                ..Meta::EMPTY
            };
            if ctx.emit(desc, meta) {
                counters.released += 1;
                sent = sent.saturating_add(1);
            } else {
                counters.emit_overflow += 1;
            }
        });
        sent
    }

    /// Sends an ARP request or a neighbour solicitation for `key` out of its port.
    pub fn request(&mut self, ctx: &mut Context<'_>, interfaces: &Interfaces, key: NeighbourKey) {
        let port = key.port();
        let Some(mac) = interfaces.mac(port) else {
            self.counters.no_source += 1;
            return;
        };
        let mut frame = [0u8; ND_FRAME_LEN];
        let (len, v4) = match key.addr() {
            IpAddr::V4(target) => {
                let Some(from) = interfaces.source_v4(port, target) else {
                    self.counters.no_source += 1;
                    return;
                };
                let request = arp::Repr {
                    operation: arp::Operation::Request,
                    source_hardware_addr: mac,
                    source_protocol_addr: from,
                    target_hardware_addr: EthernetAddress([0; 6]),
                    target_protocol_addr: target,
                };
                write_arp(
                    &mut frame[..MIN_FRAME_LEN],
                    EthernetAddress::BROADCAST,
                    mac,
                    &request,
                );
                (MIN_FRAME_LEN, true)
            }
            IpAddr::V6(target) => {
                let Some(from) = interfaces.source_v6(port, target) else {
                    self.counters.no_source += 1;
                    return;
                };
                let group = solicited_node(target);
                write_nd(
                    &mut frame,
                    NdFrame {
                        dst_mac: multicast_mac(group),
                        src_mac: mac,
                        src: from,
                        dst: group,
                        kind: ND_NEIGHBOR_SOLICIT,
                        flags: 0,
                        target,
                        option: OPTION_SOURCE_LLA,
                    },
                );
                (ND_FRAME_LEN, false)
            }
        };
        match emit_created(ctx, port, frame.get(..len).unwrap_or_default()) {
            Created::Sent if v4 => self.counters.arp_requests += 1,
            Created::Sent => self.counters.nd_solicits += 1,
            Created::PoolEmpty => self.counters.pool_empty += 1,
            Created::Overflow => self.counters.emit_overflow += 1,
        }
    }
}

#[derive(Clone, Copy)]
enum Family {
    V4,
    V6,
}

/// Whether the ICMPv6 message at `meta.l4_offset` is one of the ND types.
fn is_nd(ctx: &Context<'_>, desc: &Desc, meta: &Meta) -> bool {
    let at = usize::from(desc.offset) + usize::from(meta.l4_offset);
    let kind = ctx.pool.frame(desc.frame).get(at).copied().unwrap_or(0);
    (ND_ROUTER_SOLICIT..=ND_REDIRECT).contains(&kind)
}

/// A validated NS or NA (or another ND type, with only `kind` meaningful).
struct NdMessage {
    kind: u8,
    eth_src: EthernetAddress,
    src: Ipv6Addr,
    target: Ipv6Addr,
    /// The source (NS) or target (NA) link-layer address option.
    link_layer: Option<EthernetAddress>,
}

impl NdMessage {
    /// RFC 4861 §7.1.1 / §7.1.2 validation; `None` when the message fails it.
    fn parse(ctx: &Context<'_>, desc: &Desc, meta: &Meta) -> Option<NdMessage> {
        let start = usize::from(desc.offset);
        let packet = ctx
            .pool
            .frame(desc.frame)
            .get(start..start + usize::from(desc.len))?;
        let eth_src = EthernetAddress::from_bytes(packet.get(6..12)?)?;
        let l3 = usize::from(meta.l3_offset);
        let ip = ipv6::Packet::new_checked(packet.get(l3..)?).ok()?;
        let end = l3 + ipv6::HEADER_LEN + usize::from(ip.payload_len());
        let icmp_bytes = packet.get(usize::from(meta.l4_offset)..end)?;
        let icmp = icmpv6::Packet::new_checked(icmp_bytes).ok()?;
        let kind = u8::from(icmp.msg_type());
        if kind != ND_NEIGHBOR_SOLICIT && kind != ND_NEIGHBOR_ADVERT {
            return Some(NdMessage {
                kind,
                eth_src,
                src: ip.src_addr(),
                target: Ipv6Addr::UNSPECIFIED,
                link_layer: None,
            });
        }
        if ip.hop_limit() != 255
            || icmp.msg_code() != 0
            || icmp_bytes.len() < icmpv6::HEADER_LEN + 16
            || !icmp.verify_checksum(ip.src_addr(), ip.dst_addr())
        {
            return None;
        }
        let target: [u8; 16] = icmp_bytes.get(8..24)?.try_into().ok()?;
        let target = Ipv6Addr::from(target);
        if target.is_multicast() {
            return None;
        }
        let wanted = if kind == ND_NEIGHBOR_SOLICIT {
            OPTION_SOURCE_LLA
        } else {
            OPTION_TARGET_LLA
        };
        let link_layer = link_layer_option(icmp_bytes.get(24..)?, wanted)?;
        let src = ip.src_addr();
        if kind == ND_NEIGHBOR_SOLICIT && src.is_unspecified() && link_layer.is_some() {
            return None;
        }
        if link_layer.is_some_and(|mac| mac.is_multicast()) {
            return None;
        }
        Some(NdMessage {
            kind,
            eth_src,
            src,
            target,
            link_layer,
        })
    }
}

/// The link-layer address option of type `wanted` among `options`: `Some(None)` when absent,
/// `None` when an option has length zero or overruns the message (RFC 4861 §4.6).
fn link_layer_option(options: &[u8], wanted: u8) -> Option<Option<EthernetAddress>> {
    let mut rest = options;
    let mut found = None;
    while !rest.is_empty() {
        let kind = *rest.first()?;
        let len = usize::from(*rest.get(1)?) * 8;
        if len == 0 {
            return None;
        }
        let option = rest.get(..len)?;
        if kind == wanted {
            found = EthernetAddress::from_bytes(option.get(2..)?);
        }
        rest = rest.get(len..)?;
    }
    Some(found)
}

/// ff02::1:ffXX:XXXX for the low 24 bits of `target` (RFC 4291 §2.7.1).
fn solicited_node(target: Ipv6Addr) -> Ipv6Addr {
    Ipv6Addr::from_bits(0xff02_0000_0000_0000_0000_0001_ff00_0000 | (target.to_bits() & 0xff_ffff))
}

/// 33:33 and the low 32 bits of an IPv6 multicast group (RFC 2464 §7).
fn multicast_mac(group: Ipv6Addr) -> EthernetAddress {
    let o = group.octets();
    EthernetAddress([0x33, 0x33, o[12], o[13], o[14], o[15]])
}

/// Writes an Ethernet + ARP frame into `frame` (at least 42 bytes), zero padding after.
fn write_arp(frame: &mut [u8], dst: EthernetAddress, src: EthernetAddress, repr: &arp::Repr) {
    frame.fill(0);
    if frame.len() < 14 + arp::PACKET_LEN {
        return;
    }
    let (eth, body) = frame.split_at_mut(14);
    eth[..6].copy_from_slice(&dst.0);
    eth[6..12].copy_from_slice(&src.0);
    eth[12..14].copy_from_slice(&u16::from(EtherType::Arp).to_be_bytes());
    repr.emit(&mut arp::Packet::new_unchecked(body));
}

/// What an NS or NA frame carries.
struct NdFrame {
    dst_mac: EthernetAddress,
    src_mac: EthernetAddress,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    kind: u8,
    flags: u32,
    target: Ipv6Addr,
    /// Which link-layer address option carries `src_mac`.
    option: u8,
}

/// Writes an Ethernet + IPv6 + NS/NA frame of [`ND_FRAME_LEN`] bytes into `frame`.
fn write_nd(frame: &mut [u8], nd: NdFrame) {
    let Some(frame) = frame.get_mut(..ND_FRAME_LEN) else {
        return;
    };
    let (eth, rest) = frame.split_at_mut(14);
    eth[..6].copy_from_slice(&nd.dst_mac.0);
    eth[6..12].copy_from_slice(&nd.src_mac.0);
    eth[12..14].copy_from_slice(&u16::from(EtherType::Ipv6).to_be_bytes());
    let (ip, icmp) = rest.split_at_mut(ipv6::HEADER_LEN);
    ipv6::Repr {
        src_addr: nd.src,
        dst_addr: nd.dst,
        next_header: IpProtocol::Icmpv6,
        payload_len: ND_LEN as u16,
        hop_limit: 255,
        traffic_class: 0,
        flow_label: 0,
    }
    .emit(&mut ipv6::Packet::new_unchecked(ip));
    icmp[8..24].copy_from_slice(&nd.target.octets());
    icmp[24] = nd.option;
    icmp[25] = 1;
    icmp[26..32].copy_from_slice(&nd.src_mac.0);
    let mut view = icmpv6::Packet::new_unchecked(icmp);
    icmpv6::Repr {
        message: icmpv6::Message::from(nd.kind),
        code: 0,
        rest_of_header: nd.flags,
    }
    .emit(&mut view);
    view.fill_checksum(nd.src, nd.dst);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_validated() {
        let mac = [2, 0, 0, 0, 0, 7];
        let mut one = vec![OPTION_SOURCE_LLA, 1];
        one.extend_from_slice(&mac);
        assert_eq!(
            link_layer_option(&one, OPTION_SOURCE_LLA),
            Some(Some(EthernetAddress(mac)))
        );
        assert_eq!(link_layer_option(&one, OPTION_TARGET_LLA), Some(None));
        assert_eq!(link_layer_option(&[], OPTION_SOURCE_LLA), Some(None));
        assert_eq!(link_layer_option(&[1, 0, 0, 0], OPTION_SOURCE_LLA), None);
        assert_eq!(link_layer_option(&[1, 2, 0, 0, 0, 0, 0, 0], 1), None);
        assert_eq!(link_layer_option(&[1], 1), None);
    }

    #[test]
    fn solicited_node_groups() {
        let target: Ipv6Addr = "2001:db8::12:3456".parse().unwrap();
        let group = solicited_node(target);
        assert_eq!(group, "ff02::1:ff12:3456".parse::<Ipv6Addr>().unwrap());
        assert_eq!(
            multicast_mac(group),
            EthernetAddress([0x33, 0x33, 0xff, 0x12, 0x34, 0x56])
        );
    }

    #[test]
    fn outcomes_read_as_trace_lines() {
        let mac = EthernetAddress([2, 0, 0, 0, 0, 0xa0]);
        let reply = Discovered::Replied {
            protocol: Protocol::Nd,
            addr: "2001:db8::1".parse().unwrap(),
            mac,
            released: 0,
        };
        assert_eq!(
            reply.to_string(),
            "nd advert 2001:db8::1 is-at 02:00:00:00:00:a0"
        );
        let reply = Discovered::Replied {
            protocol: Protocol::Arp,
            addr: "10.0.0.1".parse().unwrap(),
            mac,
            released: 3,
        };
        assert_eq!(
            reply.to_string(),
            "arp reply 10.0.0.1 is-at 02:00:00:00:00:a0, released 3"
        );
        let learned = Discovered::Learned {
            protocol: Protocol::Nd,
            addr: "2001:db8:1::9".parse().unwrap(),
            mac,
            released: 0,
        };
        assert_eq!(
            learned.to_string(),
            "nd learned 2001:db8:1::9 at 02:00:00:00:00:a0"
        );
        assert_eq!(
            Discovered::Ignored(Protocol::Arp).to_string(),
            "arp ignored"
        );
        assert_eq!(
            Discovered::Malformed(Protocol::Nd).to_string(),
            "nd malformed"
        );
        assert_eq!(Discovered::Skipped.to_string(), "-");
    }
}
