//! What running a flow's answer does to a packet: the fast path's plans (an output, a drop)
//! as one store per packet, and the full action list (rewrites, copies, floods, frames for the
//! controller) packet by packet, with the counts each adds.

use wirespeed_packet::{Desc, DropReason, Meta};

use super::packet_in::{self, Reason};
use super::table::{Hot, Plan, Resolved};
use super::{Action, OpenFlowCounters, action};
use crate::app::Context;

/// Everything `execute` changes besides the packet.
pub(super) struct Effects<'a> {
    pub(super) counters: &'a mut OpenFlowCounters,
    pub(super) copy: &'a mut [u8],
    pub(super) ports: u16,
    pub(super) packet_in: &'a mut Option<packet_in::Sender>,
}

impl Effects<'_> {
    /// Decides the packets of one group by `plan` (an output or a drop is one store per
    /// packet; anything else runs `resolved`'s actions packet by packet, the only case that
    /// reads `resolved`); returns the group's bytes as they arrived.
    #[inline(always)]
    pub(super) fn apply(
        &mut self,
        plan: Plan,
        resolved: &Resolved,
        ctx: &mut Context<'_>,
        descs: &mut [Desc],
        metas: &mut [Meta],
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
                for (desc, meta) in descs.iter_mut().zip(metas) {
                    bytes += u64::from(desc.len);
                    self.execute(resolved, ctx, desc, meta);
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

    /// Runs `resolved`'s actions (a [`Plan::Actions`] result: at least one, ending with an
    /// output) on one packet.
    fn execute(
        &mut self,
        resolved: &Resolved,
        ctx: &mut Context<'_>,
        desc: &mut Desc,
        meta: &mut Meta,
    ) {
        let actions = &resolved.actions;
        let Some(last) = actions.len().checked_sub(1) else {
            meta.drop = Some(DropReason::NoOutput);
            return;
        };
        let mut origins = resolved.origins.iter();
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
                Action::Flood => {
                    let ingress = desc.port;
                    let last_port = (0..self.ports).rev().find(|&p| p != ingress);
                    for port in (0..self.ports).filter(|&p| p != ingress) {
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
                _ => {
                    let frame = ctx.pool.frame_mut(desc.frame);
                    if let Err(reason) = action::rewrite(action, frame, desc, meta) {
                        meta.drop = Some(reason);
                        return;
                    }
                }
            }
        }
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
        let len = usize::from(desc.len);
        let start = usize::from(desc.offset);
        let Some(source) = ctx.pool.frame(desc.frame).get(start..start + len) else {
            return;
        };
        let Some(buffer) = self.copy.get_mut(..len) else {
            return;
        };
        buffer.copy_from_slice(source);
        let Some(copy) = ctx.pool.alloc_copy(buffer, desc.queue) else {
            self.counters.pool_empty += 1;
            return;
        };
        let copy = Desc {
            port: desc.port,
            ..copy
        };
        let copy_meta = Meta {
            out_port: port,
            drop: None,
            ..*meta
        };
        if ctx.emit(copy, copy_meta) {
            self.counters.copies += 1;
        } else {
            self.counters.emit_overflow += 1;
        }
    }
}
