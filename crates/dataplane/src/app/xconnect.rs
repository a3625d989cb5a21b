//! The cross-connect: every packet received on a port leaves by that port's peer, unchanged.
//!
//! It is the upper bound of every other app (DPDK's L2FWD in seed 000): the packet is parsed
//! (so the cost of the parse stage is in the figure, as it is for every real app; the flow
//! hash is left out, since nothing here reads it) and otherwise only its descriptor moves. An optional emulated task (seed 001) adds known work per packet.

use wirespeed_packet::{Batch, DropReason, Meta};

use crate::app::{App, Context};
use crate::stage::{Parse, Task};

/// Static port pairs.
pub struct Xconnect {
    /// `peer[p]` is where packets from port `p` go, or `Meta::NO_PORT`.
    peer: Vec<u16>,
    parse: Parse,
    task: Option<Task>,
}

impl Xconnect {
    /// Connects each `(a, b)` both ways; ports are indexes into the worker's port list.
    pub fn new(pairs: &[(u16, u16)], task: Option<Task>) -> Self {
        let ports = pairs
            .iter()
            .map(|&(a, b)| a.max(b) as usize + 1)
            .max()
            .unwrap_or(0);
        let mut peer = vec![Meta::NO_PORT; ports];
        for &(a, b) in pairs {
            peer[a as usize] = b;
            peer[b as usize] = a;
        }
        Self {
            peer,
            // Nothing here reads the flow hash; a task stage does not either.
            parse: Parse::without_flow_hash(),
            task: task.filter(Task::is_active),
        }
    }
}

impl App for Xconnect {
    fn name(&self) -> &'static str {
        "xconnect"
    }

    fn process(&mut self, ctx: &mut Context<'_>, batch: &mut Batch) {
        self.parse.process(ctx.pool, batch, ctx.keys);
        if let Some(task) = &mut self.task {
            task.process(batch);
        }
        let (descs, metas) = batch.split_mut();
        for (desc, meta) in descs.iter().zip(metas.iter_mut()) {
            if meta.drop.is_some() {
                continue;
            }
            match self.peer.get(desc.port as usize) {
                Some(&out) if out != Meta::NO_PORT => meta.out_port = out,
                _ => meta.drop = Some(DropReason::NoOutput),
            }
        }
    }

    fn counters(&self, out: &mut Vec<(&'static str, u64)>) {
        let parse = self.parse.counters();
        out.push(("parse.parsed", parse.parsed));
        out.push(("parse.malformed", parse.malformed));
        if let Some(task) = &self.task {
            out.push(("task.packets", task.counters().packets));
        }
    }
}
