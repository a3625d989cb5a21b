//! The ICMP error stage: time exceeded and destination unreachable, for IPv4 (RFC 792, RFC 1812
//! §4.3) and IPv6 (RFC 4443), rate-limited by one token bucket.
//!
//! Counters: [`IcmpErrorCounters`]. Dispositions: none of its own — the packet that caused the
//! error keeps the drop reason the router gave it; this stage only *creates* the error, in a
//! fresh frame, and hands it to [`Context::emit`]. One batch function, [`IcmpError::process`],
//! over a per-packet array of [`IcmpKind`]s.
//!
//! What is quoted: for IPv4 the offending IP header plus the first 8 bytes of its payload (RFC
//! 792's minimum, which every host understands); for IPv6 as much of the packet as fits in the
//! IPv6 minimum MTU (RFC 4443 §2.4 (c)). The error leaves by the port the packet came in on, to
//! the MAC it came from, with the router's address on that port as source: the previous hop is
//! on the way back to the source in every network whose paths are symmetric, and this needs no
//! second route and neighbour lookup (a router with asymmetric paths would look up the source).
//!
//! Trace format ([`Signalled`], kept by `process::<true>` for [`IcmpError::trace`]):
//! `time-exceeded to 10.0.0.2`, `unreachable to 2001:db8::2`, `time-exceeded rate-limited`,
//! `unreachable suppressed`, ...
//!
//! Never sent (RFC 1812 §4.3.2.7, RFC 4443 §2.4 (e)): about an ICMP error, a non-first IPv4
//! fragment, a packet sent to a group MAC or a multicast/broadcast address, or from an address
//! that does not name one host. The bucket refills at `rate` per second up to `burst`, counted
//! in TSC cycles from the `now` the worker passes in, so a flood of expiring packets costs at
//! most `rate` errors a second.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use wirespeed_packet::wire::{EtherType, EthernetAddress, IpProtocol, icmpv4, icmpv6, ipv4, ipv6};
use wirespeed_packet::{Batch, Desc, MAX_BATCH, Meta};

use crate::app::Context;
use crate::table::interfaces::Interfaces;

/// IPv6 minimum MTU (RFC 8200 §5): an ICMPv6 error never exceeds it.
const IPV6_MIN_MTU: usize = 1280;
/// The largest error this stage builds: Ethernet + IPv6 minimum MTU.
const MAX_ERROR_LEN: usize = 14 + IPV6_MIN_MTU;
/// TTL / hop limit of the errors the router originates.
const ORIGIN_TTL: u8 = 64;

/// Which error to send about a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IcmpKind {
    /// TTL or hop limit exhausted in transit (IPv4 type 11 code 0, IPv6 type 3 code 0).
    TimeExceeded,
    /// No route to the destination (IPv4 type 3 code 0, IPv6 type 1 code 0).
    NoRoute,
}

impl fmt::Display for IcmpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IcmpKind::TimeExceeded => "time-exceeded",
            IcmpKind::NoRoute => "unreachable",
        })
    }
}

/// What the stage did about one packet; its `Display` is the stage's trace line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signalled {
    /// No error was due.
    Skipped,
    /// The error went out, to the packet's source.
    Sent {
        kind: IcmpKind,
        to: IpAddr,
    },
    RateLimited(IcmpKind),
    /// Not allowed (about an error, to a group address, a later fragment, ...).
    Suppressed(IcmpKind),
    /// The ingress port has no address of the packet's family.
    NoSource(IcmpKind),
    PoolEmpty(IcmpKind),
    Overflow(IcmpKind),
}

impl fmt::Display for Signalled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Signalled::Skipped => f.write_str("-"),
            Signalled::Sent { kind, to } => write!(f, "{kind} to {to}"),
            Signalled::RateLimited(kind) => write!(f, "{kind} rate-limited"),
            Signalled::Suppressed(kind) => write!(f, "{kind} suppressed"),
            Signalled::NoSource(kind) => write!(f, "{kind} not sent: no address on the port"),
            Signalled::PoolEmpty(kind) => write!(f, "{kind} not sent: pool empty"),
            Signalled::Overflow(kind) => write!(f, "{kind} not sent: emit overflow"),
        }
    }
}

/// What the stage did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IcmpErrorCounters {
    pub time_exceeded: u64,
    pub unreachable: u64,
    /// Refused by the token bucket.
    pub rate_limited: u64,
    /// Not allowed by the rules above (about an error, to a group address, ...).
    pub suppressed: u64,
    /// The ingress port has no address of the packet's family to send from.
    pub no_source: u64,
    /// No free frame for the error.
    pub pool_empty: u64,
    /// The app's output for created packets was full.
    pub emit_overflow: u64,
}

/// A token bucket counted in TSC cycles: `credit` cycles buy one token each `cost` cycles.
#[derive(Clone, Copy, Debug)]
pub struct TokenBucket {
    cost: u64,
    cap: u64,
    credit: u64,
    last: u64,
}

impl TokenBucket {
    /// `rate` tokens a second (0: never), at most `burst` at once, for a clock of `hz` ticks a
    /// second. Starts full.
    pub fn new(rate: u32, burst: u32, hz: u64) -> Self {
        let cost = if rate == 0 {
            u64::MAX
        } else {
            (hz / u64::from(rate)).max(1)
        };
        let cap = cost.saturating_mul(u64::from(burst.max(1)));
        TokenBucket {
            cost,
            cap,
            credit: if rate == 0 { 0 } else { cap },
            last: 0,
        }
    }

    /// Takes a token at time `now` if one is there.
    pub fn take(&mut self, now: u64) -> bool {
        if self.cost == u64::MAX {
            return false;
        }
        let elapsed = now.saturating_sub(self.last);
        self.last = self.last.max(now);
        self.credit = self.credit.saturating_add(elapsed).min(self.cap);
        if self.credit >= self.cost {
            self.credit -= self.cost;
            true
        } else {
            false
        }
    }
}

/// Creates ICMP errors. See the module documentation.
#[derive(Debug)]
pub struct IcmpError {
    bucket: TokenBucket,
    counters: IcmpErrorCounters,
    scratch: Box<[u8; MAX_ERROR_LEN]>,
    /// What `process::<true>` did about each packet of the last batch.
    trace: [Signalled; MAX_BATCH],
}

/// Why no error was built.
enum Skip {
    Suppressed,
    NoSource,
}

impl IcmpError {
    /// At most `rate` errors a second, `burst` at once; `hz` is the TSC rate.
    pub fn new(rate: u32, burst: u32, hz: u64) -> Self {
        IcmpError {
            bucket: TokenBucket::new(rate, burst, hz),
            counters: IcmpErrorCounters::default(),
            scratch: Box::new([0; MAX_ERROR_LEN]),
            trace: [Signalled::Skipped; MAX_BATCH],
        }
    }

    pub fn counters(&self) -> IcmpErrorCounters {
        self.counters
    }

    /// The outcomes of the last batch processed with tracing on, packet by packet.
    pub fn trace(&self, len: usize) -> &[Signalled] {
        self.trace.get(..len).unwrap_or(&self.trace)
    }

    /// Sends the error `kinds[i]` asks for about packet `i` of `batch` (as it was received:
    /// call this before rewriting). Packets with `None` are skipped. With `TRACE`, each outcome
    /// is kept for [`IcmpError::trace`].
    pub fn process<const TRACE: bool>(
        &mut self,
        ctx: &mut Context<'_>,
        interfaces: &Interfaces,
        batch: &Batch,
        kinds: &[Option<IcmpKind>],
    ) {
        for (i, ((desc, meta), kind)) in batch
            .descs()
            .iter()
            .zip(batch.meta())
            .zip(kinds)
            .enumerate()
        {
            let signalled = match *kind {
                Some(kind) => self.send(ctx, interfaces, desc, meta, kind),
                None => Signalled::Skipped,
            };
            if TRACE && let Some(slot) = self.trace.get_mut(i) {
                *slot = signalled;
            }
        }
    }

    /// Builds and emits one error about the packet `desc`/`meta`; says what became of it.
    pub fn send(
        &mut self,
        ctx: &mut Context<'_>,
        interfaces: &Interfaces,
        desc: &Desc,
        meta: &Meta,
        kind: IcmpKind,
    ) -> Signalled {
        let start = usize::from(desc.offset);
        let Some(packet) = ctx
            .pool
            .frame(desc.frame)
            .get(start..start + usize::from(desc.len))
        else {
            self.counters.suppressed += 1;
            return Signalled::Suppressed(kind);
        };
        let built = if meta.flags & Meta::FLAG_GROUP_DST != 0 {
            Err(Skip::Suppressed)
        } else if meta.flags & Meta::FLAG_IPV4 != 0 {
            build_v4(&mut self.scratch, interfaces, desc.port, packet, meta, kind)
        } else if meta.flags & Meta::FLAG_IPV6 != 0 {
            build_v6(&mut self.scratch, interfaces, desc.port, packet, meta, kind)
        } else {
            Err(Skip::Suppressed)
        };
        let len = match built {
            Ok(len) => len,
            Err(Skip::Suppressed) => {
                self.counters.suppressed += 1;
                return Signalled::Suppressed(kind);
            }
            Err(Skip::NoSource) => {
                self.counters.no_source += 1;
                return Signalled::NoSource(kind);
            }
        };
        if !self.bucket.take(ctx.now) {
            self.counters.rate_limited += 1;
            return Signalled::RateLimited(kind);
        }
        // The error's destination, as written into it (after the Ethernet header).
        let to = match self.scratch.get(12..14) {
            Some([0x86, 0xdd]) => self
                .scratch
                .get(14 + 24..14 + 40)
                .and_then(|b| <[u8; 16]>::try_from(b).ok())
                .map(|b| IpAddr::V6(Ipv6Addr::from(b))),
            _ => self
                .scratch
                .get(14 + 16..14 + 20)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .map(|b| IpAddr::V4(Ipv4Addr::from(b))),
        }
        .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        match emit_created(ctx, desc.port, self.scratch.get(..len).unwrap_or_default()) {
            Created::Sent => {
                match kind {
                    IcmpKind::TimeExceeded => self.counters.time_exceeded += 1,
                    IcmpKind::NoRoute => self.counters.unreachable += 1,
                }
                Signalled::Sent { kind, to }
            }
            Created::PoolEmpty => {
                self.counters.pool_empty += 1;
                Signalled::PoolEmpty(kind)
            }
            Created::Overflow => {
                self.counters.emit_overflow += 1;
                Signalled::Overflow(kind)
            }
        }
    }
}

/// What became of a packet the router created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Created {
    Sent,
    PoolEmpty,
    Overflow,
}

/// Copies `bytes` into a fresh frame (after the headroom) and emits it on `port`.
pub fn emit_created(ctx: &mut Context<'_>, port: u16, bytes: &[u8]) -> Created {
    // No frame, or a pool whose frames cannot hold the packet: nothing to send.
    let Some(desc) = ctx.pool.alloc_copy(bytes, 0) else {
        return Created::PoolEmpty;
    };
    let desc = Desc { port, ..desc };
    let meta = Meta {
        out_port: port,
        ..Meta::EMPTY
    };
    if ctx.emit(desc, meta) {
        Created::Sent
    } else {
        Created::Overflow
    }
}

/// Writes an Ethernet header into `out[..14]`.
fn ethernet(out: &mut [u8], dst: EthernetAddress, src: EthernetAddress, ethertype: EtherType) {
    if let Some(header) = out.get_mut(..14) {
        header[..6].copy_from_slice(&dst.0);
        header[6..12].copy_from_slice(&src.0);
        header[12..14].copy_from_slice(&u16::from(ethertype).to_be_bytes());
    }
}

fn source_mac(packet: &[u8]) -> EthernetAddress {
    packet
        .get(6..12)
        .and_then(EthernetAddress::from_bytes)
        .unwrap_or(EthernetAddress([0; 6]))
}

/// Whether an IPv4 source names one host (martians were dropped earlier; checked again because
/// an error to such an address would go nowhere or everywhere).
fn unicast_v4(addr: Ipv4Addr) -> bool {
    !(addr.is_unspecified() || addr.is_multicast() || addr.is_broadcast() || addr.is_loopback())
}

fn build_v4(
    out: &mut [u8; MAX_ERROR_LEN],
    interfaces: &Interfaces,
    port: u16,
    packet: &[u8],
    meta: &Meta,
    kind: IcmpKind,
) -> Result<usize, Skip> {
    let l3 = packet
        .get(usize::from(meta.l3_offset)..)
        .unwrap_or_default();
    let ip = ipv4::Packet::new_checked(l3).map_err(|_| Skip::Suppressed)?;
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    if ip.frag_offset() != 0 || !unicast_v4(src) || dst.is_multicast() || dst.is_broadcast() {
        return Err(Skip::Suppressed);
    }
    if ip.protocol() == IpProtocol::Icmp {
        // Error types: unreachable 3, source quench 4, redirect 5, time exceeded 11, parameter
        // problem 12.
        let icmp_type = ip.payload().first().copied().unwrap_or(0);
        if matches!(icmp_type, 3 | 4 | 5 | 11 | 12) {
            return Err(Skip::Suppressed);
        }
    }
    let from = interfaces.source_v4(port, src).ok_or(Skip::NoSource)?;
    let mac = interfaces.mac(port).ok_or(Skip::NoSource)?;
    let header_len = usize::from(ip.header_len());
    let quote_len = usize::from(ip.total_len()).min(header_len + 8);
    let quote = l3.get(..quote_len).ok_or(Skip::Suppressed)?;
    let icmp_len = icmpv4::HEADER_LEN + quote_len;
    let len = 14 + ipv4::HEADER_LEN + icmp_len;
    let frame = out.get_mut(..len).ok_or(Skip::Suppressed)?;
    ethernet(frame, source_mac(packet), mac, EtherType::Ipv4);
    let (_, rest) = frame.split_at_mut(14);
    let (ip_header, icmp) = rest.split_at_mut(ipv4::HEADER_LEN);
    ipv4::Repr {
        src_addr: from,
        dst_addr: src,
        protocol: IpProtocol::Icmp,
        payload_len: icmp_len as u16,
        ttl: ORIGIN_TTL,
        dscp: 0,
        ecn: 0,
        ident: 0,
        dont_frag: false,
        more_frags: false,
        frag_offset: 0,
    }
    .emit(&mut ipv4::Packet::new_unchecked(ip_header));
    let (message, code) = match kind {
        IcmpKind::TimeExceeded => (icmpv4::Message::TimeExceeded, 0),
        IcmpKind::NoRoute => (icmpv4::Message::DstUnreachable, 0),
    };
    icmp[icmpv4::HEADER_LEN..].copy_from_slice(quote);
    let mut view = icmpv4::Packet::new_unchecked(icmp);
    icmpv4::Repr {
        message,
        code,
        rest_of_header: 0,
    }
    .emit(&mut view);
    view.fill_checksum();
    Ok(len)
}

fn build_v6(
    out: &mut [u8; MAX_ERROR_LEN],
    interfaces: &Interfaces,
    port: u16,
    packet: &[u8],
    meta: &Meta,
    kind: IcmpKind,
) -> Result<usize, Skip> {
    let l3 = packet
        .get(usize::from(meta.l3_offset)..)
        .unwrap_or_default();
    let ip = ipv6::Packet::new_checked(l3).map_err(|_| Skip::Suppressed)?;
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    if src.is_unspecified() || src.is_multicast() || src.is_loopback() || dst.is_multicast() {
        return Err(Skip::Suppressed);
    }
    if meta.ip_proto == 58 && meta.l4_offset != 0 {
        let icmp_type = packet
            .get(usize::from(meta.l4_offset))
            .copied()
            .unwrap_or(0);
        if icmp_type < 128 {
            return Err(Skip::Suppressed);
        }
    }
    let from: Ipv6Addr = interfaces.source_v6(port, src).ok_or(Skip::NoSource)?;
    let mac = interfaces.mac(port).ok_or(Skip::NoSource)?;
    let ip_len = ipv6::HEADER_LEN + usize::from(ip.payload_len());
    let quote_len = ip_len.min(IPV6_MIN_MTU - ipv6::HEADER_LEN - icmpv6::HEADER_LEN);
    let quote = l3.get(..quote_len).ok_or(Skip::Suppressed)?;
    let icmp_len = icmpv6::HEADER_LEN + quote_len;
    let len = 14 + ipv6::HEADER_LEN + icmp_len;
    let frame = out.get_mut(..len).ok_or(Skip::Suppressed)?;
    ethernet(frame, source_mac(packet), mac, EtherType::Ipv6);
    let (_, rest) = frame.split_at_mut(14);
    let (ip_header, icmp) = rest.split_at_mut(ipv6::HEADER_LEN);
    ipv6::Repr {
        src_addr: from,
        dst_addr: src,
        next_header: IpProtocol::Icmpv6,
        payload_len: icmp_len as u16,
        hop_limit: ORIGIN_TTL,
        traffic_class: 0,
        flow_label: 0,
    }
    .emit(&mut ipv6::Packet::new_unchecked(ip_header));
    let (message, code) = match kind {
        IcmpKind::TimeExceeded => (icmpv6::Message::TimeExceeded, 0),
        IcmpKind::NoRoute => (icmpv6::Message::DstUnreachable, 0),
    };
    icmp[icmpv6::HEADER_LEN..].copy_from_slice(quote);
    let mut view = icmpv6::Packet::new_unchecked(icmp);
    icmpv6::Repr {
        message,
        code,
        rest_of_header: 0,
    }
    .emit(&mut view);
    view.fill_checksum(from, src);
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_caps_bursts_and_refills() {
        let mut bucket = TokenBucket::new(10, 3, 1000);
        let taken = (0..10).filter(|_| bucket.take(0)).count();
        assert_eq!(taken, 3, "burst");
        assert!(!bucket.take(50));
        assert!(bucket.take(100), "one token per 100 ticks");
        assert!(!bucket.take(150));
        assert_eq!((0..10).filter(|_| bucket.take(10_000)).count(), 3);
        let mut never = TokenBucket::new(0, 5, 1000);
        assert!(!never.take(1_000_000));
    }

    #[test]
    fn outcomes_read_as_trace_lines() {
        let sent = Signalled::Sent {
            kind: IcmpKind::NoRoute,
            to: "2001:db8::2".parse().unwrap(),
        };
        assert_eq!(sent.to_string(), "unreachable to 2001:db8::2");
        assert_eq!(
            Signalled::RateLimited(IcmpKind::TimeExceeded).to_string(),
            "time-exceeded rate-limited"
        );
        assert_eq!(
            Signalled::Suppressed(IcmpKind::NoRoute).to_string(),
            "unreachable suppressed"
        );
        assert_eq!(
            Signalled::NoSource(IcmpKind::NoRoute).to_string(),
            "unreachable not sent: no address on the port"
        );
        assert_eq!(Signalled::Skipped.to_string(), "-");
    }
}
