//! The local stage: packets addressed to one of the router's own addresses.
//!
//! Counters: [`LocalCounters`]. Dispositions: an ICMP / ICMPv6 echo request is turned into its
//! echo reply in place (addresses and MACs swapped, checksums recomputed) and leaves by the
//! port it came in on; everything else is [`DropReason::Consumed`] and counted as unhandled:
//! the router has no host stack behind its addresses. One batch function, [`Local::process`].
//! Trace format ([`Delivered`], kept by `process::<true>` for [`Local::trace`]): `echo reply`,
//! `consumed (no host stack)`.

use std::fmt;

use wirespeed_packet::wire::{icmpv4, icmpv6, ipv4, ipv6};
use wirespeed_packet::{Batch, DropReason, MAX_BATCH, Meta};

use crate::app::Context;
use crate::stage::route::Next;
use crate::table::interfaces::Interfaces;

const PROTO_ICMP: u8 = 1;
const PROTO_ICMPV6: u8 = 58;
/// TTL / hop limit of the replies the router originates.
const ORIGIN_TTL: u8 = 64;

/// What the stage did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LocalCounters {
    /// Echo requests answered.
    pub echo_replies: u64,
    /// Other packets for the router, dropped.
    pub unhandled: u64,
}

/// What the stage did with one packet; its `Display` is the stage's trace line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivered {
    /// Not for the router.
    Skipped,
    /// Answered in place.
    EchoReply,
    /// For the router, but nothing here handles it.
    Unhandled,
}

impl fmt::Display for Delivered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Delivered::Skipped => "-",
            Delivered::EchoReply => "echo reply",
            Delivered::Unhandled => "consumed (no host stack)",
        })
    }
}

/// Answers pings to the router. See the module documentation.
#[derive(Debug)]
pub struct Local {
    counters: LocalCounters,
    /// What `process::<true>` did with each packet of the last batch.
    trace: [Delivered; MAX_BATCH],
}

impl Default for Local {
    fn default() -> Self {
        Self::new()
    }
}

impl Local {
    pub fn new() -> Self {
        Local {
            counters: LocalCounters::default(),
            trace: [Delivered::Skipped; MAX_BATCH],
        }
    }

    pub fn counters(&self) -> LocalCounters {
        self.counters
    }

    /// The outcomes of the last batch processed with tracing on, packet by packet.
    pub fn trace(&self, len: usize) -> &[Delivered] {
        self.trace.get(..len).unwrap_or(&self.trace)
    }

    /// Handles every packet whose `next` is [`Next::Local`]. With `TRACE`, each outcome is
    /// kept for [`Local::trace`].
    pub fn process<const TRACE: bool>(
        &mut self,
        ctx: &mut Context<'_>,
        interfaces: &Interfaces,
        batch: &mut Batch,
        next: &[Next],
    ) {
        let (descs, metas) = batch.split_mut();
        for (i, ((desc, meta), next)) in descs.iter().zip(metas.iter_mut()).zip(next).enumerate() {
            if TRACE && let Some(slot) = self.trace.get_mut(i) {
                *slot = Delivered::Skipped;
            }
            if *next != Next::Local {
                continue;
            }
            let start = usize::from(desc.offset);
            let mac = interfaces.mac(desc.port);
            let answered = match (
                mac,
                ctx.pool
                    .frame_mut(desc.frame)
                    .get_mut(start..start + usize::from(desc.len)),
            ) {
                (Some(mac), Some(packet)) if meta.flags & Meta::FLAG_GROUP_DST == 0 => {
                    echo_reply(packet, meta, mac.0)
                }
                _ => false,
            };
            let delivered = if answered {
                self.counters.echo_replies += 1;
                meta.out_port = desc.port;
                Delivered::EchoReply
            } else {
                self.counters.unhandled += 1;
                meta.drop = Some(DropReason::Consumed);
                Delivered::Unhandled
            };
            if TRACE && let Some(slot) = self.trace.get_mut(i) {
                *slot = delivered;
            }
        }
    }
}

/// Rewrites an echo request in `packet` into its reply; `false` (and `packet` untouched) when it
/// is not a well-formed echo request.
fn echo_reply(packet: &mut [u8], meta: &Meta, mac: [u8; 6]) -> bool {
    let l3 = usize::from(meta.l3_offset);
    let l4 = usize::from(meta.l4_offset);
    if l4 == 0 || meta.flags & Meta::FLAG_FRAGMENT != 0 {
        return false;
    }
    let Some((eth, rest)) = packet.split_at_mut_checked(l3) else {
        return false;
    };
    if meta.flags & Meta::FLAG_IPV4 != 0 && meta.ip_proto == PROTO_ICMP {
        let Ok(mut ip) = ipv4::Packet::new_checked(&mut rest[..]) else {
            return false;
        };
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        {
            let Ok(mut icmp) = icmpv4::Packet::new_checked(ip.payload_mut()) else {
                return false;
            };
            if icmp.msg_type() != icmpv4::Message::EchoRequest || icmp.msg_code() != 0 {
                return false;
            }
            icmp.set_msg_type(icmpv4::Message::EchoReply);
            icmp.fill_checksum();
        }
        ip.set_src_addr(dst);
        ip.set_dst_addr(src);
        ip.set_ttl(ORIGIN_TTL);
        ip.fill_checksum();
    } else if meta.flags & Meta::FLAG_IPV6 != 0 && meta.ip_proto == PROTO_ICMPV6 {
        let Ok(ip) = ipv6::Packet::new_checked(&mut rest[..]) else {
            return false;
        };
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        let ip_len = ipv6::HEADER_LEN + usize::from(ip.payload_len());
        let Some(at) = l4.checked_sub(l3) else {
            return false;
        };
        let Some(segment) = rest.get_mut(at..ip_len) else {
            return false;
        };
        let Ok(mut icmp) = icmpv6::Packet::new_checked(segment) else {
            return false;
        };
        if icmp.msg_type() != icmpv6::Message::EchoRequest || icmp.msg_code() != 0 {
            return false;
        }
        icmp.set_msg_type(icmpv6::Message::EchoReply);
        icmp.fill_checksum(dst, src);
        let mut ip = ipv6::Packet::new_unchecked(&mut rest[..]);
        ip.set_src_addr(dst);
        ip.set_dst_addr(src);
        ip.set_hop_limit(ORIGIN_TTL);
    } else {
        return false;
    }
    if let Some(eth) = eth.first_chunk_mut::<12>() {
        let mut peer = [0u8; 6];
        peer.copy_from_slice(&eth[6..12]);
        eth[..6].copy_from_slice(&peer);
        eth[6..12].copy_from_slice(&mac);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_read_as_trace_lines() {
        assert_eq!(Delivered::EchoReply.to_string(), "echo reply");
        assert_eq!(Delivered::Unhandled.to_string(), "consumed (no host stack)");
        assert_eq!(Delivered::Skipped.to_string(), "-");
    }
}
