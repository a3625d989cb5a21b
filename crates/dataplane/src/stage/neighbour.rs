//! The neighbour stage: turns the route stage's "to this neighbour" into a frame on the wire —
//! destination MAC from the neighbour table, source MAC of the egress port, TTL / hop limit
//! minus one (IPv4 with the RFC 1624 incremental checksum update) — or holds the packet while
//! the neighbour is being resolved.
//!
//! A packet for a gateway whose adjacency is current ([`Adjacencies`]) is rewritten from it
//! without asking the neighbour table: that is every forwarded packet but the first after a
//! neighbour changed. The others ask the table (one hash probe), and a gateway found resolved
//! gets its adjacency rebuilt for the packets after it.
//!
//! Counters: [`ResolveCounters`]. Dispositions: out by the neighbour's port; held (the packet
//! leaves the batch and its frame waits in the neighbour table; an ARP request or neighbour
//! solicitation goes out, paced per neighbour); [`DropReason::NoNeighbour`] when the
//! neighbour's hold queue or the table is full. One batch function, [`Resolve::process`].
//!
//! A held packet is rewritten before it waits (source MAC, TTL): when the answer comes, only the
//! destination MAC is written ([`Discovery::release`]). Held packets leave the batch: the batch
//! is compacted once at the end, keeping the order of the others, so the worker neither sends
//! nor frees their frames.
//!
//! Trace format ([`Resolution`], kept by `process::<true>` for [`Resolve::trace`]): `rewrite
//! 02:00:00:00:00:c1`, `held for 10.1.0.7 (1 waiting), request sent`, `hold queue for 10.1.0.7
//! full`, `table full, 10.1.0.7 not added`.

use std::fmt;
use std::net::IpAddr;

use wirespeed_packet::wire::{EthernetAddress, ipv4};
use wirespeed_packet::{Batch, DropReason, FramePool, MAX_BATCH, Meta};

use crate::app::Context;
use crate::stage::discovery::Discovery;
use crate::stage::route::Next;
use crate::table::adjacency::Adjacencies;
use crate::table::interfaces::Interfaces;
use crate::table::neighbour::{Lookup, NeighbourTable, Timers};

/// What the stage did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResolveCounters {
    /// Packets rewritten and sent to a known neighbour.
    pub forwarded: u64,
    /// Packets put on hold behind an unresolved neighbour.
    pub held: u64,
    /// Packets dropped because the hold queue was full.
    pub hold_full: u64,
    /// Packets dropped because no entry could be created (table full).
    pub table_full: u64,
}

/// What the stage did with one packet; its `Display` is the stage's trace line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// Not to be forwarded (decided or dropped before).
    Skipped,
    /// Rewritten for the known neighbour at this MAC and sent.
    Rewritten(EthernetAddress),
    /// Waiting for `addr` to be resolved, with `waiting` packets in all (this one included);
    /// `requested`: a request went out for it with this packet.
    Held {
        addr: IpAddr,
        waiting: u16,
        requested: bool,
    },
    /// Dropped: the hold queue for `addr` was full.
    HoldFull(IpAddr),
    /// Dropped: no entry could be made for `addr`.
    TableFull(IpAddr),
}

impl fmt::Display for Resolution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Resolution::Skipped => f.write_str("-"),
            Resolution::Rewritten(mac) => write!(f, "rewrite {mac}"),
            Resolution::Held {
                addr,
                waiting,
                requested,
            } => {
                write!(f, "held for {addr} ({waiting} waiting)")?;
                if requested {
                    f.write_str(", request sent")?;
                }
                Ok(())
            }
            Resolution::HoldFull(addr) => write!(f, "hold queue for {addr} full"),
            Resolution::TableFull(addr) => write!(f, "table full, {addr} not added"),
        }
    }
}

/// Neighbour resolution and the rewrite. See the module documentation.
#[derive(Debug)]
pub struct Resolve {
    timers: Timers,
    counters: ResolveCounters,
    held: [bool; MAX_BATCH],
    /// What `process::<true>` did with each packet of the last batch (indexed as the batch was
    /// before held packets left it).
    trace: [Resolution; MAX_BATCH],
}

impl Resolve {
    /// Requests for one neighbour are paced and limited by `timers`.
    pub fn new(timers: Timers) -> Self {
        Resolve {
            timers,
            counters: ResolveCounters::default(),
            held: [false; MAX_BATCH],
            trace: [Resolution::Skipped; MAX_BATCH],
        }
    }

    pub fn counters(&self) -> ResolveCounters {
        self.counters
    }

    /// The outcomes of the last batch processed with tracing on, packet by packet, indexed as
    /// the batch was before held packets left it.
    pub fn trace(&self, len: usize) -> &[Resolution] {
        self.trace.get(..len).unwrap_or(&self.trace)
    }

    /// Sends or holds every packet whose `next` is [`Next::Forward`]; held packets are removed
    /// from `batch` before returning. Gateways' rewrites come from `adjacencies` while they are
    /// current and are rebuilt there when not. With `TRACE`, each outcome is kept for
    /// [`Resolve::trace`].
    #[allow(clippy::too_many_arguments)]
    pub fn process<const TRACE: bool>(
        &mut self,
        ctx: &mut Context<'_>,
        interfaces: &Interfaces,
        neighbours: &mut NeighbourTable,
        adjacencies: &mut Adjacencies,
        discovery: &mut Discovery,
        batch: &mut Batch,
        next: &[Next],
    ) {
        let generation = neighbours.generation();
        let mut any_held = false;
        let (descs, metas) = batch.split_mut();
        for (i, (((desc, meta), next), held)) in descs
            .iter()
            .zip(metas.iter_mut())
            .zip(next)
            .zip(self.held.iter_mut())
            .enumerate()
        {
            *held = false;
            if TRACE && let Some(slot) = self.trace.get_mut(i) {
                *slot = Resolution::Skipped;
            }
            let Next::Forward {
                neighbour: key,
                hop,
            } = *next
            else {
                continue;
            };
            if let Some(adjacency) = hop.and_then(|hop| adjacencies.current(hop, generation)) {
                rewrite(ctx.pool, desc, meta, Some(adjacency.dst), adjacency.src);
                meta.out_port = adjacency.port;
                self.counters.forwarded += 1;
                if TRACE && let Some(slot) = self.trace.get_mut(i) {
                    *slot = Resolution::Rewritten(adjacency.dst);
                }
                continue;
            }
            let port = key.port();
            let src_mac = interfaces.mac(port).unwrap_or(EthernetAddress([0; 6]));
            let slot = match neighbours.lookup(&key) {
                Lookup::Resolved(mac) => {
                    if let Some(hop) = hop {
                        adjacencies.refresh(hop, generation, mac, src_mac, port);
                    }
                    rewrite(ctx.pool, desc, meta, Some(mac), src_mac);
                    meta.out_port = port;
                    self.counters.forwarded += 1;
                    if TRACE && let Some(slot) = self.trace.get_mut(i) {
                        *slot = Resolution::Rewritten(mac);
                    }
                    continue;
                }
                Lookup::Pending(slot) => slot,
                Lookup::Unknown => match neighbours.insert_incomplete(key, ctx.now) {
                    Ok(slot) => slot,
                    Err(_) => {
                        self.counters.table_full += 1;
                        meta.drop = Some(DropReason::NoNeighbour);
                        if TRACE && let Some(slot) = self.trace.get_mut(i) {
                            *slot = Resolution::TableFull(key.addr());
                        }
                        continue;
                    }
                },
            };
            let requested = neighbours.request_due(slot, ctx.now, &self.timers);
            if requested {
                discovery.request(ctx, interfaces, key);
            }
            rewrite(ctx.pool, desc, meta, None, src_mac);
            let resolution = if neighbours.hold(slot, *desc).is_ok() {
                self.counters.held += 1;
                *held = true;
                any_held = true;
                Resolution::Held {
                    addr: key.addr(),
                    waiting: if TRACE {
                        neighbours.entry(slot).map_or(0, |entry| entry.held)
                    } else {
                        0
                    },
                    requested,
                }
            } else {
                self.counters.hold_full += 1;
                meta.drop = Some(DropReason::NoNeighbour);
                Resolution::HoldFull(key.addr())
            };
            if TRACE && let Some(slot) = self.trace.get_mut(i) {
                *slot = resolution;
            }
        }
        if any_held {
            remove_marked(batch, &self.held);
        }
    }
}

/// Writes the MACs (the destination only when known) and decrements the TTL / hop limit. The
/// route stage checked the IPv4 header (length, checksum, TTL above 1).
#[inline(always)]
fn rewrite(
    pool: &mut FramePool,
    desc: &wirespeed_packet::Desc,
    meta: &Meta,
    dst_mac: Option<EthernetAddress>,
    src_mac: EthernetAddress,
) {
    let start = usize::from(desc.offset);
    let Some(packet) = pool
        .frame_mut(desc.frame)
        .get_mut(start..start + usize::from(desc.len))
    else {
        return;
    };
    if let Some(eth) = packet.first_chunk_mut::<12>() {
        if let Some(mac) = dst_mac {
            eth[..6].copy_from_slice(&mac.0);
        }
        eth[6..12].copy_from_slice(&src_mac.0);
    }
    let l3 = usize::from(meta.l3_offset);
    if meta.flags & Meta::FLAG_IPV4 != 0 {
        if let Some(header) = packet
            .get_mut(l3..)
            .and_then(|ip| ip.first_chunk_mut::<{ ipv4::HEADER_LEN }>())
        {
            ipv4::Packet::new_unchecked(&mut header[..]).decrement_ttl();
        }
    } else if let Some(hop_limit) = packet.get_mut(l3 + 7) {
        *hop_limit = hop_limit.saturating_sub(1);
    }
}

/// Removes the packets whose `marked` flag is set from `batch`, keeping the order of the rest.
fn remove_marked(batch: &mut Batch, marked: &[bool]) {
    let len = batch.len();
    let (descs, metas) = batch.split_mut();
    let mut write = len;
    for read in (0..len).rev() {
        if marked.get(read).copied().unwrap_or(false) {
            continue;
        }
        write -= 1;
        // `write >= read`: at most as many packets are kept as were read.
        descs[write] = descs[read];
        metas[write] = metas[read];
    }
    batch.consume_front(write);
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirespeed_packet::Desc;

    #[test]
    fn remove_marked_keeps_order() {
        let mut batch = Batch::new(8);
        for frame in 0..6 {
            batch.push(Desc {
                frame,
                ..Desc::default()
            });
        }
        remove_marked(&mut batch, &[false, true, false, true, true, false]);
        let frames: Vec<u32> = batch.descs().iter().map(|d| d.frame).collect();
        assert_eq!(frames, [0, 2, 5]);
        remove_marked(&mut batch, &[true, true, true]);
        assert!(batch.is_empty());
    }

    #[test]
    fn outcomes_read_as_trace_lines() {
        let addr: IpAddr = "10.1.0.9".parse().unwrap();
        let held = Resolution::Held {
            addr,
            waiting: 3,
            requested: false,
        };
        assert_eq!(held.to_string(), "held for 10.1.0.9 (3 waiting)");
        assert_eq!(
            Resolution::HoldFull(addr).to_string(),
            "hold queue for 10.1.0.9 full"
        );
        assert_eq!(
            Resolution::TableFull(addr).to_string(),
            "table full, 10.1.0.9 not added"
        );
        assert_eq!(
            Resolution::Rewritten(EthernetAddress([2, 0, 0, 0, 0, 0xc1])).to_string(),
            "rewrite 02:00:00:00:00:c1"
        );
    }
}
