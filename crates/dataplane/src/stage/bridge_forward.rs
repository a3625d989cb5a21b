//! The bridge's forwarding stage: sends every packet to the port its destination was learned
//! on, or floods it to the other ports of its VLAN, then gives it the tag of its output port.
//!
//! Like Snabb's learning bridge, it first sorts the batch into three kinds and then handles
//! each kind in its own loop:
//! * **discard**: link-local control frames to 01:80:c2:00:00:0x (STP, LACP, 802.1X, LLDP...),
//!   which a bridge must not relay ([`DropReason::Consumed`], counted as `control`);
//! * **unicast**: a learned destination. All destinations of the batch are hashed and their
//!   buckets prefetched before the first comparison. A destination on the ingress port is
//!   dropped as [`DropReason::SameSegment`];
//! * **flood**: unknown unicast, broadcast and multicast go to every other port that carries
//!   the VLAN. The received frame goes to the first of them; every other port gets a copy in a
//!   frame taken from the pool and sent with [`Context::emit`]. Copies are made from the frame
//!   as it arrived (before its own tag rewrite) and then retagged for their port. When the pool
//!   is empty or the app's extra batch is full, that copy is not made and counted
//!   (`flood_pool_empty`, `flood_emit_overflow`): the other ports still get theirs.
//!
//! Finally every packet that leaves gets its output port's tag ([`Vlans::tag`]).

use std::fmt;

use wirespeed_packet::pool::MAX_FRAME_SIZE;
use wirespeed_packet::{Batch, Desc, DropReason, MAX_BATCH, Meta};

use crate::app::Context;
use crate::stage::vlan::{BatchVlans, Vlans};
use crate::table::mac::{MacHash, MacKey, MacTable};

/// Counters of the forwarding stage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ForwardCounters {
    /// Packets sent to a learned port.
    pub unicast: u64,
    /// Packets flooded (each counted once, however many ports it reached).
    pub flooded: u64,
    /// Copies made for flooding (on top of the original frame).
    pub flood_copies: u64,
    /// Flood copies not made: no free frame in the pool.
    pub flood_pool_empty: u64,
    /// Flood copies not made: the extra batch was full.
    pub flood_emit_overflow: u64,
    /// Packets whose destination is on their ingress port.
    pub same_segment: u64,
    /// Link-local control frames, not relayed.
    pub control: u64,
    /// Packets of a VLAN no other port carries.
    pub no_member: u64,
}

/// Where the stage sends one packet; its `Display` is the stage's trace line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Forwarding {
    /// Not decided yet, or dropped by an earlier stage.
    Undecided,
    Control,
    Lookup,
    Unicast(u16),
    /// The destination was learned on the ingress port.
    SameSegment,
    Flood,
}

impl fmt::Display for Forwarding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Forwarding::Undecided => write!(f, "-"),
            Forwarding::Control => write!(f, "control frame, not relayed"),
            Forwarding::Lookup => write!(f, "lookup"),
            Forwarding::Unicast(port) => write!(f, "unicast to port {port}"),
            Forwarding::SameSegment => write!(f, "destination on the ingress port"),
            Forwarding::Flood => write!(f, "flood"),
        }
    }
}

/// Forwards a batch by the [`MacTable`].
#[derive(Debug)]
pub struct BridgeForward {
    kinds: [Forwarding; MAX_BATCH],
    keys: [MacKey; MAX_BATCH],
    hashes: [MacHash; MAX_BATCH],
    /// The received bytes of the packet being flooded, copied once per flooded packet so the
    /// copies can be written while the pool is borrowed mutably.
    scratch: Box<[u8]>,
    counters: ForwardCounters,
}

impl Default for BridgeForward {
    fn default() -> Self {
        Self::new()
    }
}

/// Whether `mac` is in 01:80:c2:00:00:00..0f, the addresses 802.1Q reserves for link-local
/// protocols that bridges never relay.
#[inline]
fn is_link_local(mac: &[u8; 6]) -> bool {
    mac[..5] == [0x01, 0x80, 0xc2, 0x00, 0x00] && mac[5] & 0xf0 == 0
}

impl BridgeForward {
    pub fn new() -> Self {
        BridgeForward {
            kinds: [Forwarding::Undecided; MAX_BATCH],
            keys: [MacKey::new(0, Default::default()); MAX_BATCH],
            hashes: [MacHash::default(); MAX_BATCH],
            scratch: vec![0; MAX_FRAME_SIZE as usize].into_boxed_slice(),
            counters: ForwardCounters::default(),
        }
    }

    pub fn counters(&self) -> ForwardCounters {
        self.counters
    }

    /// What the last batch's packets were sorted into, packet by packet (the stage's trace;
    /// kept for every batch because the sorting is how the stage works).
    pub fn trace(&self, len: usize) -> &[Forwarding] {
        self.kinds.get(..len).unwrap_or(&self.kinds)
    }

    /// Decides every packet of `batch` not yet dropped (`vlans[i]` is its VLAN).
    pub fn process(
        &mut self,
        table: &MacTable,
        vlans: &mut Vlans,
        ctx: &mut Context<'_>,
        batch: &mut Batch,
        batch_vlans: &BatchVlans,
    ) {
        let len = batch.len();
        // 1. Sort; hash and prefetch the unicast destinations.
        for (i, meta) in batch.meta_mut().iter_mut().enumerate() {
            self.kinds[i] = Forwarding::Undecided;
            if meta.drop.is_some() {
                continue;
            }
            let Some(key) = ctx.keys.get(i) else {
                meta.drop = Some(DropReason::NoOutput);
                continue;
            };
            let dst = key.dst_mac;
            self.kinds[i] = if is_link_local(&dst.0) {
                meta.drop = Some(DropReason::Consumed);
                self.counters.control += 1;
                Forwarding::Control
            } else if dst.is_multicast() {
                Forwarding::Flood
            } else {
                let mac_key = MacKey::new(batch_vlans[i], dst);
                let hash = table.hash(mac_key);
                table.prefetch(hash);
                self.keys[i] = mac_key;
                self.hashes[i] = hash;
                Forwarding::Lookup
            };
        }
        // 2. Unicast: compare.
        let (descs, metas) = batch.split_mut();
        for i in 0..len {
            if self.kinds[i] != Forwarding::Lookup {
                continue;
            }
            let in_port = descs[i].port;
            self.kinds[i] = match table.lookup(self.keys[i], self.hashes[i], ctx.now) {
                Some(port) if port == in_port => {
                    metas[i].drop = Some(DropReason::SameSegment);
                    self.counters.same_segment += 1;
                    Forwarding::SameSegment
                }
                // An entry for a port that no longer carries the VLAN is not trusted.
                Some(port) if vlans.carries(port, batch_vlans[i]) => {
                    metas[i].out_port = port;
                    self.counters.unicast += 1;
                    Forwarding::Unicast(port)
                }
                _ => Forwarding::Flood,
            };
        }
        // 3. Flood: copies for all member ports but the first, which gets the original.
        for i in 0..len {
            if self.kinds[i] == Forwarding::Flood {
                self.flood(vlans, ctx, &descs[i], &mut metas[i], batch_vlans[i]);
            }
        }
        // 4. Every original that leaves gets its output port's tag.
        for i in 0..len {
            let meta = &mut metas[i];
            if meta.drop.is_some() || meta.out_port == Meta::NO_PORT {
                continue;
            }
            let egress = vlans.egress(meta.out_port, batch_vlans[i]);
            let desc = &mut descs[i];
            if let Err(reason) = vlans.tag(ctx.pool.frame_mut(desc.frame), desc, egress) {
                meta.drop = Some(reason);
            }
        }
    }

    fn flood(
        &mut self,
        vlans: &mut Vlans,
        ctx: &mut Context<'_>,
        desc: &Desc,
        meta: &mut Meta,
        vlan: u16,
    ) {
        let in_port = desc.port;
        let Some(first) = vlans.members(vlan).iter().copied().find(|&p| p != in_port) else {
            meta.drop = Some(DropReason::NoOutput);
            self.counters.no_member += 1;
            return;
        };
        self.counters.flooded += 1;
        meta.out_port = first;
        let start = usize::from(desc.offset);
        let len = usize::from(desc.len);
        let mut copied = false;
        // `members` borrows `vlans`, which `tag` needs mutably: walk the list by index.
        let members = vlans.members(vlan).len();
        for index in 0..members {
            let Some(&port) = vlans.members(vlan).get(index) else {
                break;
            };
            if port == in_port || port == first {
                continue;
            }
            if ctx.extra.room() == 0 {
                self.counters.flood_emit_overflow += 1;
                continue;
            }
            let Some(frame) = ctx.pool.alloc() else {
                self.counters.flood_pool_empty += 1;
                continue;
            };
            if !copied {
                let (Some(source), Some(scratch)) = (
                    ctx.pool.frame(desc.frame).get(start..start + len),
                    self.scratch.get_mut(..len),
                ) else {
                    ctx.pool.release(frame);
                    return;
                };
                scratch.copy_from_slice(source);
                copied = true;
            }
            let buffer = ctx.pool.frame_mut(frame);
            let (Some(target), Some(source)) =
                (buffer.get_mut(start..start + len), self.scratch.get(..len))
            else {
                ctx.pool.release(frame);
                continue;
            };
            target.copy_from_slice(source);
            let mut copy = Desc { frame, ..*desc };
            let egress = vlans.egress(port, vlan);
            if vlans
                .tag(ctx.pool.frame_mut(frame), &mut copy, egress)
                .is_err()
            {
                ctx.pool.release(frame);
                continue;
            }
            let copy_meta = Meta {
                out_port: port,
                drop: None,
                ..*meta
            };
            if ctx.emit(copy, copy_meta) {
                self.counters.flood_copies += 1;
            } else {
                self.counters.flood_emit_overflow += 1;
            }
        }
    }
}
