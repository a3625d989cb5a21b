//! Apps: configured pipelines. An app decides, for every packet of a batch, where it goes.
//!
//! The worker owns the ports, the pool and the batches; an app only reads and rewrites frames in
//! place and sets each packet's disposition in its [`Meta`](wirespeed_packet::Meta): an output
//! port in `out_port`, or a reason in `drop`. The worker then hands packets to the TX batches in
//! bulk and counts the drops per reason, so no app needs to know about ports or TX rings.
//!
//! Run-time changes reach an app through [`App::command`], called by its worker between batches
//! (see [`crate::command`]): an app that keeps a table implements the commands for it there.

pub mod bridge;
pub mod fields;
pub mod openflow;
pub mod router;
pub mod router_mirror;
pub mod trace;
pub mod xconnect;

use wirespeed_io::Port;
use wirespeed_packet::flow_key::FlowKey;
use wirespeed_packet::{Batch, Desc, FramePool, Meta};

pub use openflow::OpenFlow;
pub use router::Router;
pub use xconnect::Xconnect;

use crate::command::{AppCommand, AppReply};

/// What an app may use while processing one batch.
pub struct Context<'a> {
    /// The worker's frames: packets are read and rewritten in place here.
    pub pool: &'a mut FramePool,
    /// One flow key per packet of the batch, filled by the parse stage.
    pub keys: &'a mut [FlowKey],
    /// The worker's clock (TSC) at the start of this batch. Stages never read a clock themselves,
    /// so every decision is reproducible from its inputs.
    pub now: u64,
    /// Packets the app creates while processing the batch (flood copies, ICMP errors, ARP
    /// replies), each with its `out_port` set; the worker sends them after the batch. Bounded:
    /// see [`Context::emit`].
    pub extra: &'a mut Batch,
}

impl Context<'_> {
    /// Queues a packet the app created (its frame taken from `pool`) for output. When the
    /// extra batch is full the frame goes back to the pool and `false` is returned: the app
    /// counts that as [`DropReason::EmitOverflow`](wirespeed_packet::DropReason::EmitOverflow).
    pub fn emit(&mut self, desc: Desc, meta: Meta) -> bool {
        if self.extra.push_with_meta(desc, meta) {
            return true;
        }
        self.pool.release(desc.frame);
        false
    }
}

/// How full one of an app's tables is, for the metrics: entries in use and, where the table
/// has one, the most it holds (a route table's limit is the memory its longer prefixes take,
/// which its own row says: `routes_v4_tbl8_groups`, `routes_v6_nodes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableFill {
    pub table: &'static str,
    pub entries: u64,
    pub capacity: Option<u64>,
}

impl TableFill {
    /// `table` with `entries` in use of at most `capacity` (`None`: no fixed capacity).
    pub fn new(table: &'static str, entries: usize, capacity: Option<usize>) -> TableFill {
        TableFill {
            table,
            entries: entries as u64,
            capacity: capacity.map(|most| most as u64),
        }
    }
}

/// One of an app's exact-match caches: lookups it answered and lookups it sent on to the
/// slower table behind it, for the hit ratio.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheLookups {
    pub cache: &'static str,
    pub hits: u64,
    pub misses: u64,
}

/// A configured pipeline.
pub trait App: Send {
    /// Short name for stats output.
    fn name(&self) -> &'static str;

    /// Decides every packet of `batch`: sets `out_port` or `drop` in its metadata.
    fn process(&mut self, ctx: &mut Context<'_>, batch: &mut Batch);

    /// Appends the app's own counters (name, value) for stats output.
    fn counters(&self, out: &mut Vec<(&'static str, u64)>);

    /// Appends how full each of the app's tables is (apps without tables keep the default).
    fn tables(&self, _out: &mut Vec<TableFill>) {}

    /// Appends the lookups of each of the app's exact-match caches.
    fn caches(&self, _out: &mut Vec<CacheLookups>) {}

    /// Housekeeping while the worker has nothing to do, right before it sleeps (TSC `now`):
    /// where the XDP fast path forwards in the kernel, user space may see no traffic for a
    /// long time, and what ages must still age.
    fn idle(&mut self, _now: u64) {}

    /// Gives back every frame the app still holds (e.g. packets waiting for a neighbour); the
    /// worker calls it when it shuts down.
    fn release_all(&mut self, _pool: &mut FramePool) {}

    /// Applies a run-time change or answers a query, between two batches. A replaced table goes
    /// back in [`AppReply::Retired`] so that it is freed on the control thread. Apps without
    /// tables keep the default: every command is unsupported.
    fn command(&mut self, command: AppCommand, ctx: &CommandContext<'_>) -> AppReply {
        let _ = (command, ctx);
        AppReply::Unsupported
    }
}

/// What an app may use while it applies a command.
pub struct CommandContext<'a> {
    /// The worker's ports, indexed as in `Desc::port` and `Meta::out_port`: resolves the port
    /// names commands carry.
    pub ports: &'a [Box<dyn Port>],
    /// The worker's clock (TSC) when the command is applied.
    pub now: u64,
}

impl CommandContext<'_> {
    /// The index of the port named `name`.
    pub fn port_index(&self, name: &str) -> Option<u16> {
        self.ports
            .iter()
            .position(|port| port.info().name == name)
            .and_then(|index| u16::try_from(index).ok())
    }

    /// The name of port `index` (its number when there is no such port), for `show` tables.
    pub fn port_name(&self, index: u16) -> String {
        self.ports
            .get(usize::from(index))
            .map_or_else(|| index.to_string(), |port| port.info().name.clone())
    }

    /// The names of every port, for messages that list what is accepted.
    pub fn port_names(&self) -> String {
        let names: Vec<&str> = self
            .ports
            .iter()
            .map(|port| port.info().name.as_str())
            .collect();
        names.join(", ")
    }
}

/// Most rows a `show` command returns; the last row then says how many were left out, so a
/// million-route table never makes a worker build a reply of hundreds of megabytes.
pub const MAX_SHOW_ROWS: usize = 10_000;
