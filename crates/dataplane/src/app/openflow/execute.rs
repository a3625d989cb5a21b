//! What running a flow's answer does to a packet: the fast path's plans (an output, a drop)
//! as one store per packet, and the full action list (rewrites, copies, floods, frames for the
//! controller, groups) packet by packet, with the counts each adds.

use wirespeed_packet::{Desc, DropReason, Meta};

use super::group::{GroupKind, GroupTable, MAX_GROUP_DEPTH};
use super::packet_in::{self, Origin, Reason};
use super::table::{Hot, Plan, Resolved};
use super::{Action, OpenFlowCounters, action};
use crate::app::Context;

/// Everything `execute` changes besides the packet.
pub(super) struct Effects<'a> {
    pub(super) counters: &'a mut OpenFlowCounters,
    pub(super) copy: &'a mut [u8],
    pub(super) ports: u16,
    pub(super) packet_in: &'a mut Option<packet_in::Sender>,
    /// Read only: a group's counts are cells (see [`super::group`]).
    pub(super) groups: &'a GroupTable,
    /// The batch index of the packet being decided: its flow key picks a select group's
    /// bucket.
    pub(super) at: usize,
}

impl Effects<'_> {
    /// Decides the packets of one group by `plan` (an output or a drop is one store per
    /// packet; anything else runs `resolved`'s actions packet by packet, the only case that
    /// reads `resolved`); returns the group's bytes as they arrived. `first` is the batch
    /// index of `descs[0]`.
    #[inline(always)]
    pub(super) fn apply(
        &mut self,
        plan: Plan,
        resolved: &Resolved,
        ctx: &mut Context<'_>,
        (descs, metas): (&mut [Desc], &mut [Meta]),
        first: usize,
    ) -> u64 {
        let mut bytes = 0;
        match plan {
            Plan::Output(port) => {
                for (desc, meta) in descs.iter().zip(metas) {
                    bytes += u64::from(desc.len);
                    meta.out_port = port;
                }
            }
            Plan::Discard(reason) => {
                for (desc, meta) in descs.iter().zip(metas) {
                    bytes += u64::from(desc.len);
                    meta.drop = Some(reason);
                }
            }
            Plan::Actions => {
                for (i, (desc, meta)) in descs.iter_mut().zip(metas).enumerate() {
                    bytes += u64::from(desc.len);
                    self.at = first + i;
                    let mut origins = resolved.origins.iter();
                    self.execute(&resolved.actions, &mut origins, ctx, desc, meta, 0);
                }
            }
        }
        bytes
    }

    /// Counts `packets` packets of `bytes` bytes decided by `hot`'s answer, the last at TSC
    /// `now`: in `hot` (folded into its flows later) and, when a table missed, in the app's
    /// `table_misses`.
    #[inline(always)]
    pub(super) fn count(&mut self, hot: &mut Hot, packets: u64, bytes: u64, now: u64) {
        hot.count(packets, bytes, now);
        if hot.miss {
            self.counters.table_misses += packets;
        }
    }

    /// Runs `actions` (a [`Plan::Actions`] result, at least one, ending with an output; or a
    /// group's bucket, `depth` groups down) on one packet: the last output moves the packet,
    /// earlier ones send copies; a list that ends without an output drops it. `origins` says
    /// where each CONTROLLER action came from (a bucket's have none: the default's).
    fn execute(
        &mut self,
        actions: &[Action],
        origins: &mut std::slice::Iter<'_, Origin>,
        ctx: &mut Context<'_>,
        desc: &mut Desc,
        meta: &mut Meta,
        depth: usize,
    ) {
        let Some(last) = actions.len().checked_sub(1) else {
            meta.drop = Some(DropReason::NoOutput);
            return;
        };
        for (i, action) in actions.iter().enumerate() {
            let final_action = i == last;
            match *action {
                Action::Controller(max_len) => {
                    let origin = origins.next().copied().unwrap_or_default();
                    self.send_to_controller(ctx, desc, origin, max_len);
                    if final_action {
                        // The control plane took it: it goes nowhere else.
                        meta.drop = Some(DropReason::Consumed);
                    }
                }
                Action::Output(port) => {
                    if final_action {
                        meta.out_port = port;
                    } else {
                        self.send_copy(ctx, desc, meta, port);
                    }
                }
                Action::InPort => {
                    if usize::from(desc.port) >= usize::from(self.ports) {
                        // From no port (a controller's frame through the tables): nowhere.
                        if final_action {
                            meta.drop = Some(DropReason::NoOutput);
                        }
                    } else if final_action {
                        meta.out_port = desc.port;
                    } else {
                        self.send_copy(ctx, desc, meta, desc.port);
                    }
                }
                Action::Flood | Action::All => {
                    // ALL is a flood that includes the ingress port.
                    let skip = if *action == Action::All {
                        None
                    } else {
                        Some(desc.port)
                    };
                    let last_port = (0..self.ports).rev().find(|&p| Some(p) != skip);
                    for port in (0..self.ports).filter(|&p| Some(p) != skip) {
                        if final_action && Some(port) == last_port {
                            meta.out_port = port;
                        } else {
                            self.send_copy(ctx, desc, meta, port);
                        }
                    }
                    if final_action && last_port.is_none() {
                        meta.drop = Some(DropReason::NoOutput);
                    }
                }
                Action::Group(id) => {
                    if final_action {
                        self.group(ctx, id, desc, meta, depth);
                    } else if let Some((mut copy, mut copy_meta)) = self.copy_of(ctx, desc, meta) {
                        self.group(ctx, id, &mut copy, &mut copy_meta, depth);
                        self.send(ctx, copy, copy_meta);
                    }
                }
                _ => {
                    let frame = ctx.pool.frame_mut(desc.frame);
                    if let Err(reason) = action::rewrite(action, frame, desc, meta) {
                        meta.drop = Some(reason);
                        return;
                    }
                    if final_action {
                        // A bucket of rewrites only: they went nowhere.
                        meta.drop = Some(DropReason::NoOutput);
                    }
                }
            }
        }
    }

    /// Sends the packet through group `id`, which a list `depth` groups down named: an `all`
    /// group's buckets each take a copy but the last, which takes the packet; a select or
    /// indirect group's one bucket takes the packet. A group that is gone (or a chain deeper
    /// than the table allows, which its checks never let happen) drops it. No copy is made
    /// once the batch of created packets is full (counted in `emit_overflow`), so chains of
    /// `all` groups (up to 32^4 copies of one packet) cost at most a batch of copies.
    fn group(
        &mut self,
        ctx: &mut Context<'_>,
        id: u32,
        desc: &mut Desc,
        meta: &mut Meta,
        depth: usize,
    ) {
        let groups = self.groups;
        let Some(group) = groups.get(id).filter(|_| depth < MAX_GROUP_DEPTH) else {
            meta.drop = Some(DropReason::NoOutput);
            return;
        };
        group.count(desc.len);
        let no_origins = &mut [].iter();
        if group.kind != GroupKind::All {
            let hash = ctx.keys.get(self.at).map_or(0, |key| key.hash());
            let Some(bucket) = group.pick(hash) else {
                meta.drop = Some(DropReason::NoOutput);
                return;
            };
            bucket.count(desc.len);
            self.execute(&bucket.actions, no_origins, ctx, desc, meta, depth + 1);
            return;
        }
        let Some((last, copied)) = group.buckets.split_last() else {
            meta.drop = Some(DropReason::NoOutput);
            return;
        };
        for bucket in copied {
            bucket.count(desc.len);
            if ctx.extra.is_full() {
                self.counters.emit_overflow += 1;
                continue;
            }
            if let Some((mut copy, mut copy_meta)) = self.copy_of(ctx, desc, meta) {
                self.execute(
                    &bucket.actions,
                    no_origins,
                    ctx,
                    &mut copy,
                    &mut copy_meta,
                    depth + 1,
                );
                self.send(ctx, copy, copy_meta);
            }
        }
        last.count(desc.len);
        self.execute(&last.actions, no_origins, ctx, desc, meta, depth + 1);
    }

    /// Hands the packet as it is now (at most `max_len` bytes) to the agent for the
    /// controller, or counts it lost.
    fn send_to_controller(
        &mut self,
        ctx: &Context<'_>,
        desc: &Desc,
        origin: packet_in::Origin,
        max_len: u16,
    ) {
        let start = usize::from(desc.offset);
        let frame = ctx
            .pool
            .frame(desc.frame)
            .get(start..start + usize::from(desc.len))
            .unwrap_or_default();
        let sent = self
            .packet_in
            .as_mut()
            .is_some_and(|ring| packet_in::send(ring, origin, desc.port, frame, max_len));
        match (sent, origin.reason) {
            (true, _) => self.counters.packet_in += 1,
            (false, Reason::NoMatch) => self.counters.packet_in_dropped_no_match += 1,
            (false, Reason::Action) => self.counters.packet_in_dropped_action += 1,
        }
    }

    /// Sends a copy of the packet as it is now to `port`.
    fn send_copy(&mut self, ctx: &mut Context<'_>, desc: &Desc, meta: &Meta, port: u16) {
        if let Some((copy, mut copy_meta)) = self.copy_of(ctx, desc, meta) {
            copy_meta.out_port = port;
            self.send(ctx, copy, copy_meta);
        }
    }

    /// A copy of the packet as it is now, in a frame of the pool (counted lost when the pool
    /// has none).
    fn copy_of(&mut self, ctx: &mut Context<'_>, desc: &Desc, meta: &Meta) -> Option<(Desc, Meta)> {
        let len = usize::from(desc.len);
        let start = usize::from(desc.offset);
        let source = ctx.pool.frame(desc.frame).get(start..start + len)?;
        let buffer = self.copy.get_mut(..len)?;
        buffer.copy_from_slice(source);
        let Some(copy) = ctx.pool.alloc_copy(buffer, desc.queue) else {
            self.counters.pool_empty += 1;
            return None;
        };
        let copy = Desc {
            port: desc.port,
            ..copy
        };
        Some((
            copy,
            Meta {
                drop: None,
                ..*meta
            },
        ))
    }

    /// Hands a copy to the worker (which sends it, or counts its drop reason).
    fn send(&mut self, ctx: &mut Context<'_>, copy: Desc, copy_meta: Meta) {
        if ctx.emit(copy, copy_meta) {
            self.counters.copies += 1;
        } else {
            self.counters.emit_overflow += 1;
        }
    }
}
