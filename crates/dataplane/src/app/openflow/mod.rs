//! The OpenFlow app: a pipeline of match-action tables (the wire protocol comes later).
//!
//! The split is seed 004's fast path / slow path, in Open vSwitch's three tiers:
//! 1. **exact-match flow cache** (flow key -> resolved action list), then
//! 2. **megaflow classifier** (tuple space search over the fields the tables consulted),
//!    together the [`FlowLookup`] stage — the fast path;
//! 3. **the tables** (`Pipeline::resolve`) — the slow path, run once per new megaflow. Its
//!    result (the whole pipeline's action list, the flows to credit) is stored and installed
//!    in the megaflow classifier under the consulted fields, so every later packet that agrees
//!    on those fields takes the fast path.
//!
//! Changing the tables (adding, removing, expiring flows) flushes the megaflows and invalidates
//! the cache by generation: the next packets rebuild them from the slow path. The megaflow table
//! has a fixed capacity; when a storm of distinct flows fills it, it is emptied at the start of
//! the next batch (counted), so the long-lived flows get back in after one packet each. Stored results are
//! slots reused after a flush, so after warm-up nothing is allocated per packet.
//!
//! The lookup stage hands the batch over as groups ([`FlowGroup`]): a train of packets with
//! equal keys that the cache answered is one group (Open vSwitch's `packet_batch_per_flow`),
//! so its stored result is fetched once and its counters written once. Each stored result
//! carries a `Plan` decided by the slow path: one output and nothing else (the common case)
//! is a store of the out port per packet; no output is a drop; anything else runs the actions
//! in order, packet by packet: rewrites in place, an output that is not the last one sends a
//! copy (a new frame via [`Context::emit`]), the last output moves the packet itself. Packets,
//! bytes and the time of last use are counted per stored result (one write per group, whatever
//! the number of tables) and folded into every flow entry that matched before flows are read,
//! expired or removed, as Open vSwitch pushes its datapath flows' statistics up to the OpenFlow
//! flows.
//! Idle and hard timeouts are in seconds, converted to TSC ticks with the rate taken at
//! construction; expired flows are removed at the start of a batch, at most every tenth of a
//! second, never per packet.
//!
//! All methods that change tables are called between batches (by the worker's owner);
//! [`App::command`] maps the control socket's `flow add`, `flow del` and `show flows` onto
//! them, reading rules written as text with [`crate::app::fields`], and its group commands
//! onto the group table ([`group`]).
//!
//! Tracing: with [`OpenFlow::set_trace`] the lookup stage runs its `TRACE` variant and the app
//! keeps one [`OpenFlowTrace`] per packet (which tier answered, what the slow path did, where
//! the packet went) in a ring allocated only then; [`OpenFlow::packet_trace`] reads it
//! (`trace(key)` is the slow path's table-by-table walk of one key).

pub mod action;
mod commands;
mod execute;
mod fills;
pub mod group;
mod group_commands;
pub mod kernel;
pub mod packet_in;
mod packet_trace;
pub mod removed;
pub mod table;

use std::time::Duration;

use wirespeed_packet::cpu::tsc_hz;
use wirespeed_packet::{Batch, Desc, DropReason, MAX_BATCH, Meta};

use crate::app::trace::{Arrival, TraceRing};
use crate::app::{App, CommandContext, Context};
use crate::command::{AppCommand, AppReply, FlowEdit};
use crate::stage::Parse;
use crate::stage::flow_cache::{FlowGroup, FlowLookup};
use crate::table::classifier::{Classifier, FlowMatch, RuleId};

pub use action::{Action, SetField};
use execute::Effects;
use group::GroupTable;
use kernel::{FlowSync, KernelCopy};
use packet_trace::push_record;
pub use packet_trace::{OpenFlowTrace, SlowPath};
pub use table::{FlowEntry, FlowError, FlowInfo, MAX_FLOW_ACTIONS, MissAction, Trace, TraceStep};
use table::{FlowState, Hot, Pipeline, Resolved};

/// The OpenFlow app's configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenFlowConfig {
    /// Number of tables (1..=255).
    pub tables: u8,
    /// Number of ports (flood goes to all but the ingress).
    pub ports: u16,
    /// What a table miss does.
    pub miss: MissAction,
    /// Flow entries per table.
    pub flows_per_table: usize,
    /// Slots of the exact-match cache.
    pub cache_entries: usize,
    /// The cache inserts one miss in this many (0: no cache).
    pub cache_insert_one_in: u32,
    /// Megaflows (and stored results) at most (0: every packet takes the slow path).
    pub megaflows: usize,
    /// TSC ticks per second; `None` measures the CPU's rate at construction.
    pub tsc_hz: Option<u64>,
    /// Groups at most ([`group`]).
    pub groups: usize,
}

impl Default for OpenFlowConfig {
    fn default() -> Self {
        Self {
            tables: 4,
            ports: 2,
            miss: MissAction::Drop,
            flows_per_table: 65_536,
            cache_entries: 8192,
            cache_insert_one_in: 100,
            megaflows: 16_384,
            tsc_hz: None,
            groups: 1024,
        }
    }
}

/// Counters of the OpenFlow app. Cache hits, classifier hits and slow-path packets never
/// overlap: each forwarded packet adds to exactly one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenFlowCounters {
    pub cache_hits: u64,
    pub classifier_hits: u64,
    /// Packets the tables decided (megaflow misses).
    pub slow_path: u64,
    /// Packets that missed a table.
    pub table_misses: u64,
    /// Megaflows that did not fit (their packets took the slow path).
    pub megaflows_refused: u64,
    /// Times a full megaflow table was emptied to make room (between batches).
    pub megaflow_flushes: u64,
    pub flows_expired: u64,
    /// Copies sent (flood, multiple outputs).
    pub copies: u64,
    /// Copies lost because the app's extra batch was full.
    pub emit_overflow: u64,
    /// Copies lost because the pool had no free frame.
    pub pool_empty: u64,
    /// Frames handed to the OpenFlow agent for the controller (PACKET_IN).
    pub packet_in: u64,
    /// Frames for the controller lost because the ring to the agent was full or no agent took
    /// it, by reason: a table-miss flow entry's, another flow's CONTROLLER action's.
    pub packet_in_dropped_no_match: u64,
    pub packet_in_dropped_action: u64,
    /// Timeouts of flows with SEND_FLOW_REM not reported because the ring to the agent was
    /// full.
    pub flow_removed_dropped: u64,
}

/// The OpenFlow match-action pipeline.
pub struct OpenFlow {
    config: OpenFlowConfig,
    parse: Parse,
    lookup: FlowLookup<u32>,
    pipeline: Pipeline,
    /// Stored results, megaflow value -> slot; the first `stored` are in use. Their lists here,
    /// their plans and counts in `hot` (the same slot), which is all a hit reads of them unless
    /// its plan is `Plan::Actions`.
    results: Vec<Resolved>,
    hot: Vec<Hot>,
    stored: usize,
    scratch: Resolved,
    scratch_hot: Hot,
    /// The lookup stage's groups of the batch being processed.
    batch_groups: Box<[FlowGroup<u32>]>,
    /// The stored result of each packet of a batch the cache answered whole
    /// ([`FlowLookup::process_cached`]).
    batch_slots: Box<[u32]>,
    /// Whether a batch the cache answers whole is decided packet by packet without groups
    /// (see [`OpenFlow::set_whole_batch_hits`]).
    whole_batch_hits: bool,
    /// Whether the last batch came in trains of one flow: then the next takes the groups.
    trains: bool,
    /// Whether the cache missed a packet of the last batch: then the next takes the groups
    /// without trying the cache alone first (a storm of new flows, a cache turned off).
    cache_missed: bool,
    copy: Box<[u8]>,
    ticks_per_second: u64,
    next_sweep: u64,
    /// Flows added since the last batch, stamped with its time at its start: only these, not
    /// the whole table (a scan of every flow after each add made installing 100 000 flows
    /// quadratic, 76 s, and stalled the worker's batches).
    unstamped: Vec<(u8, RuleId)>,
    /// What undoes the parts of the transaction under way ([`AppCommand::FlowTransaction`]),
    /// in the order they were applied.
    transaction: Vec<commands::Undo>,
    /// Flows with an idle or hard timeout: without any, nothing is swept.
    timed_flows: usize,
    /// A megaflow was refused in the last batch.
    megaflows_full: bool,
    expired: Vec<(u8, RuleId, removed::Timeout)>,
    counters: OpenFlowCounters,
    trace: TraceRing<OpenFlowTrace>,
    /// The kernel's copy of the exact-match cache, with the XDP fast path.
    kernel: Option<KernelCopy>,
    /// The worker's end of its ring to the OpenFlow agent (`None`: no agent, every frame for
    /// the controller is dropped and counted).
    packet_in: Option<packet_in::Sender>,
    /// The worker's end of its ring of flows removed by timeout for the agent (`None`: no
    /// agent, nothing is reported).
    removed: Option<removed::Sender>,
    groups: GroupTable,
}

/// Bytes of the copy buffer: the largest frame a pool has.
const COPY_BUFFER: usize = 4096;

impl OpenFlow {
    pub fn new(config: OpenFlowConfig) -> Self {
        let tables = config.tables.max(1);
        let ticks_per_second = config.tsc_hz.unwrap_or_else(tsc_hz).max(1);
        Self {
            // The lookup stage hashes the keys itself, once per run of equal keys.
            parse: Parse::without_flow_hash(),
            lookup: FlowLookup::new(
                config.cache_entries,
                config.cache_insert_one_in,
                config.megaflows,
            ),
            pipeline: Pipeline {
                tables: (0..tables)
                    .map(|_| Classifier::new(config.flows_per_table))
                    .collect(),
                miss: config.miss,
            },
            results: Vec::new(),
            hot: Vec::new(),
            stored: 0,
            scratch: Resolved::default(),
            scratch_hot: Hot::default(),
            batch_groups: vec![FlowGroup::default(); MAX_BATCH].into_boxed_slice(),
            batch_slots: vec![0; MAX_BATCH].into_boxed_slice(),
            whole_batch_hits: true,
            trains: false,
            cache_missed: false,
            copy: vec![0; COPY_BUFFER].into_boxed_slice(),
            ticks_per_second,
            next_sweep: 0,
            unstamped: Vec::new(),
            transaction: Vec::new(),
            timed_flows: 0,
            megaflows_full: false,
            expired: Vec::new(),
            counters: OpenFlowCounters::default(),
            trace: TraceRing::default(),
            kernel: None,
            packet_in: None,
            removed: None,
            groups: GroupTable::new(config.groups),
            config: OpenFlowConfig { tables, ..config },
        }
    }

    fn check(&self, table: u8, entry: &FlowEntry) -> Result<(), FlowError> {
        let tables = self.config.tables;
        if table >= tables {
            return Err(FlowError::NoSuchTable { table, tables });
        }
        if let Some(goto) = entry.goto
            && (goto <= table || goto >= tables)
        {
            return Err(FlowError::BadGoto { table, goto });
        }
        if entry.actions.len() > MAX_FLOW_ACTIONS {
            return Err(FlowError::TooManyActions {
                count: entry.actions.len(),
            });
        }
        if entry.write_actions.len() > MAX_FLOW_ACTIONS {
            return Err(FlowError::TooManyActions {
                count: entry.write_actions.len(),
            });
        }
        for (at, action) in entry.write_actions.iter().enumerate() {
            if table::ActionSet::same_kind_before(&entry.write_actions[..at], action) {
                return Err(FlowError::DuplicateInSet { action: *action });
            }
        }
        for action in entry.actions.iter().chain(&entry.write_actions) {
            match *action {
                Action::Output(port) if port >= self.config.ports => {
                    return Err(FlowError::BadPort {
                        port,
                        ports: self.config.ports,
                    });
                }
                Action::Group(group) if self.groups.get(group).is_none() => {
                    return Err(FlowError::NoSuchGroup { group });
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Sends the frames for the controller into `ring` (one end of [`packet_in::ring`]; the
    /// agent holds the other).
    pub fn set_packet_in(&mut self, ring: packet_in::Sender) {
        self.packet_in = Some(ring);
    }

    /// Reports the flows with SEND_FLOW_REM that time out into `ring` (one end of
    /// [`removed::ring`]; the agent holds the other).
    pub fn set_flow_removed(&mut self, ring: removed::Sender) {
        self.removed = Some(ring);
    }

    /// Adds a flow to `table`; a flow with the same priority and match is replaced (its
    /// counters restart). Between batches.
    pub fn add_flow(&mut self, table: u8, entry: FlowEntry) -> Result<(), FlowError> {
        self.fold_all();
        let (changed, result) = self.insert_flow(table, entry);
        if changed {
            self.flush_fast_path();
        }
        result.map(drop)
    }

    /// [`OpenFlow::add_flow`] without folding the counts first or invalidating the fast path
    /// after (the caller does both, once for a run of changes): whether the tables changed,
    /// and the flow the new one replaced, if any (what undoes the add).
    fn insert_flow(
        &mut self,
        table: u8,
        entry: FlowEntry,
    ) -> (bool, Result<Option<FlowState>, FlowError>) {
        if let Err(error) = self.check(table, &entry) {
            return (false, Err(error));
        }
        let priority = entry.priority;
        let replaced = self.take_flow(table, priority, &entry.matcher);
        let classifier = &mut self.pipeline.tables[usize::from(table)];
        let timed = entry.has_timeout();
        let matcher = entry.matcher;
        let state = FlowState {
            entry,
            packets: 0,
            bytes: 0,
            installed: 0,
            last_used: 0,
            stamped: false,
        };
        match classifier.insert(u32::from(priority), matcher, state) {
            Ok(id) => {
                self.unstamped.push((table, id));
                self.timed_flows += usize::from(timed);
                (true, Ok(replaced))
            }
            Err(_) => {
                // Only a full table refuses, and a replaced flow made room: unreachable with
                // one, but the table is left as it was all the same.
                if let Some(old) = replaced {
                    self.restore_flow(table, old);
                }
                (
                    false,
                    Err(FlowError::TableFull {
                        table,
                        capacity: self.config.flows_per_table,
                    }),
                )
            }
        }
    }

    /// Puts back a flow taken out of `table` (its counters and age kept): what undoes a
    /// removal or a replacement. It fits: it held its slot until the change it undoes.
    fn restore_flow(&mut self, table: u8, flow: FlowState) {
        let priority = u32::from(flow.entry.priority);
        let timed = flow.entry.has_timeout();
        let matcher = flow.entry.matcher;
        if let Some(classifier) = self.pipeline.tables.get_mut(usize::from(table))
            && classifier.insert(priority, matcher, flow).is_ok()
        {
            self.timed_flows += usize::from(timed);
        }
    }

    /// Removes, from every table, the flows `matcher` covers (OpenFlow's non-strict delete:
    /// `FlowMatch::any()` removes everything). Returns how many. Between batches.
    pub fn remove_flows(&mut self, matcher: &FlowMatch) -> usize {
        self.remove_where(|m, _| matcher.covers(m))
    }

    /// Removes, from every table, the flows `select` takes (by match and entry); how many.
    fn remove_where(&mut self, select: impl Fn(&FlowMatch, &FlowEntry) -> bool) -> usize {
        self.fold_all();
        let mut removed = 0;
        for classifier in &mut self.pipeline.tables {
            let ids: Vec<RuleId> = classifier
                .iter()
                .filter(|(_, _, m, flow)| select(m, &flow.entry))
                .map(|(id, ..)| id)
                .collect();
            for id in ids {
                if let Some(flow) = classifier.remove(id) {
                    removed += 1;
                    self.timed_flows -= usize::from(flow.entry.has_timeout());
                }
            }
        }
        if removed > 0 {
            self.flush_fast_path();
        }
        removed
    }

    /// Removes the flow of exactly this priority and match from `table` (OpenFlow's strict
    /// delete); whether there was one. Between batches.
    pub fn remove_flow(&mut self, table: u8, priority: u16, matcher: &FlowMatch) -> bool {
        self.fold_all();
        let removed = self.take_flow(table, priority, matcher).is_some();
        if removed {
            self.flush_fast_path();
        }
        removed
    }

    /// [`OpenFlow::remove_flow`] without the fold before and the invalidation after: the flow
    /// removed, if there was one.
    fn take_flow(&mut self, table: u8, priority: u16, matcher: &FlowMatch) -> Option<FlowState> {
        let classifier = self.pipeline.tables.get_mut(usize::from(table))?;
        let id = classifier.find(u32::from(priority), matcher)?;
        let flow = classifier.remove(id)?;
        self.timed_flows -= usize::from(flow.entry.has_timeout());
        Some(flow)
    }

    /// Every flow with its counters, table by table (`&mut`: the fast path's pending counts are
    /// folded in first). Between batches.
    pub fn flows(&mut self) -> Vec<FlowInfo> {
        self.fold_all();
        let mut out = Vec::new();
        for (table, classifier) in self.pipeline.tables.iter().enumerate() {
            for (_, _, _, flow) in classifier.iter() {
                out.push(FlowInfo {
                    table: table as u8,
                    entry: flow.entry.clone(),
                    packets: flow.packets,
                    bytes: flow.bytes,
                });
            }
        }
        out.sort_by_key(|f| (f.table, std::cmp::Reverse(f.entry.priority)));
        out
    }

    pub fn counters(&self) -> OpenFlowCounters {
        let lookup = self.lookup.counters();
        OpenFlowCounters {
            cache_hits: lookup.cache_hits,
            classifier_hits: lookup.classifier_hits,
            ..self.counters
        }
    }

    /// How the tables decide a flow key, table by table (the slow path's walk; a trace counts
    /// as a classifier lookup). Between batches.
    pub fn trace(&mut self, key: &wirespeed_packet::FlowKey) -> Trace {
        self.pipeline.trace(key)
    }

    /// Megaflows installed now.
    pub fn megaflows(&self) -> usize {
        self.lookup.classifier().len()
    }

    /// Keeps `sync` (the XDP fast path's copy) equal to the flows of the exact-match cache
    /// whose answer the kernel can carry out, and counts what the kernel forwarded (see
    /// [`kernel`]). Before the first batch.
    pub fn mirror_flows(&mut self, sync: Box<dyn FlowSync>) {
        self.fold_all();
        self.flush_fast_path();
        self.lookup.note_cached();
        self.kernel = Some(KernelCopy::new(sync, self.config.megaflows));
    }

    /// Hands the keys the cache took in this batch to the kernel's copy.
    fn mirror_cached(&mut self) {
        let Some(kernel) = &mut self.kernel else {
            return;
        };
        for (key, slot) in self.lookup.take_cached() {
            let at = slot as usize;
            if let (Some(hot), Some(resolved)) = (self.hot.get(at), self.results.get(at)) {
                kernel.cached(&key, slot, hot, resolved);
            }
        }
    }

    /// Folds the counts the fast path kept per megaflow (and the kernel's, with the XDP fast
    /// path) into the flow entries. Called before anything reads or removes flow entries.
    fn fold_all(&mut self) {
        if let Some(kernel) = &mut self.kernel {
            let stored = self.stored.min(self.hot.len());
            kernel.pull(&mut self.hot[..stored]);
        }
        for (resolved, hot) in self.results.iter().zip(&mut self.hot).take(self.stored) {
            hot.fold_into(&resolved.flows, &mut self.pipeline.tables);
        }
    }

    /// Drops every megaflow and cached entry (the tables changed; counts already folded).
    fn flush_fast_path(&mut self) {
        self.lookup.clear();
        self.stored = 0;
        if let Some(kernel) = &mut self.kernel {
            kernel.invalidate();
        }
    }

    /// Removes the flows whose idle or hard timeout has passed at TSC `now`; returns how many.
    /// The app calls it at the start of a batch; the control plane may call it between batches.
    pub fn expire(&mut self, now: u64) -> usize {
        self.fold_all();
        let hz = self.ticks_per_second;
        self.expired.clear();
        for (table, classifier) in self.pipeline.tables.iter().enumerate() {
            for (id, _, _, flow) in classifier.iter() {
                if !flow.stamped {
                    continue;
                }
                let hard = u64::from(flow.entry.hard_timeout).saturating_mul(hz);
                let idle = u64::from(flow.entry.idle_timeout).saturating_mul(hz);
                let hard_over = hard > 0 && now.wrapping_sub(flow.installed) >= hard;
                let idle_over = idle > 0 && now.wrapping_sub(flow.last_used) >= idle;
                if hard_over || idle_over {
                    let timeout = if hard_over {
                        removed::Timeout::Hard
                    } else {
                        removed::Timeout::Idle
                    };
                    self.expired.push((table as u8, id, timeout));
                }
            }
        }
        for &(table, id, timeout) in &self.expired {
            let Some(flow) = self.pipeline.tables[usize::from(table)].remove(id) else {
                continue;
            };
            self.timed_flows -= usize::from(flow.entry.has_timeout());
            if !flow.entry.send_flow_removed {
                continue;
            }
            let Some(ring) = &mut self.removed else {
                continue;
            };
            let ticks = now.wrapping_sub(flow.installed);
            let nanos = u128::from(ticks) * 1_000_000_000 / u128::from(hz);
            let report = removed::Expired {
                table,
                timeout,
                packets: flow.packets,
                bytes: flow.bytes,
                age: Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX)),
                entry: flow.entry,
            };
            if ring.push(report).is_err() {
                self.counters.flow_removed_dropped += 1;
            }
        }
        let count = self.expired.len();
        if count > 0 {
            self.counters.flows_expired += count as u64;
            self.flush_fast_path();
        }
        count
    }

    /// Between batches: starts the clocks of new flows, expires old ones now and then, empties
    /// a full megaflow table.
    fn housekeeping(&mut self, now: u64) {
        if self.megaflows_full {
            // A storm of distinct flows filled it; the flows that matter come back after a
            // packet each, the storm's do not crowd them out for good.
            self.fold_all();
            self.flush_fast_path();
            self.megaflows_full = false;
            self.counters.megaflow_flushes += 1;
        }
        // A flow removed since its add is gone (its id names nothing, or a later flow that
        // is in the list itself).
        for (table, id) in self.unstamped.drain(..) {
            if let Some(flow) = self
                .pipeline
                .tables
                .get_mut(usize::from(table))
                .and_then(|classifier| classifier.data_mut(id))
                && !flow.stamped
            {
                flow.installed = now;
                flow.last_used = now;
                flow.stamped = true;
            }
        }
        if self.timed_flows > 0 && now.wrapping_sub(self.next_sweep) < u64::MAX / 2 {
            self.expire(now);
            self.next_sweep = now.wrapping_add(self.ticks_per_second / 10);
        }
    }

    /// The slow path for one packet: walks the tables, stores the result and installs its
    /// megaflow when there is room. Returns the stored result's slot, or `None` when there
    /// was no room and the result is in `scratch`.
    fn upcall(&mut self, key: &wirespeed_packet::FlowKey) -> Option<usize> {
        self.counters.slow_path += 1;
        let capacity = self.config.megaflows;
        if self.stored < capacity {
            if self.results.len() <= self.stored {
                self.results.push(Resolved::default());
                self.hot.push(Hot::default());
            }
            let slot = self.stored;
            let consulted =
                self.pipeline
                    .resolve(key, &mut self.results[slot], &mut self.hot[slot]);
            let matcher = FlowMatch::new(*key, consulted);
            if self.lookup.install(matcher, slot as u32).is_ok() {
                self.stored += 1;
                if let Some(kernel) = &mut self.kernel {
                    kernel.stored(slot);
                }
                return Some(slot);
            }
            self.counters.megaflows_refused += 1;
            self.megaflows_full = true;
            std::mem::swap(&mut self.results[slot], &mut self.scratch);
            std::mem::swap(&mut self.hot[slot], &mut self.scratch_hot);
            return None;
        }
        self.counters.megaflows_refused += 1;
        self.megaflows_full = capacity > 0;
        self.pipeline
            .resolve(key, &mut self.scratch, &mut self.scratch_hot);
        None
    }
}

/// Whether a batch of `len` packets that made `runs` runs (or groups) came in trains of one
/// flow, two packets a run on average or more. The groups of [`OpenFlow::run`] then save more
/// (one stored result read and counted per train) than they cost; for a batch of distinct
/// neighbours they are pure cost, and a batch the cache answers whole is better decided packet
/// by packet (`OpenFlow::apply_cached`). Measured with `benches/openflow.rs`'s interleaved
/// ratios (docs/benchmarks.md, "Apps"): every all-hit batch packet by packet, 1024 shuffled
/// flows read 1.54x the cross-connect instead of 1.88x, but one flow 1.30x instead of 1.14x;
/// with this test, one flow stays at 1.13x.
fn has_trains(runs: usize, len: usize) -> bool {
    runs * 2 <= len
}

impl App for OpenFlow {
    fn name(&self) -> &'static str {
        "openflow"
    }

    fn process(&mut self, ctx: &mut Context<'_>, batch: &mut Batch) {
        if self.trace.is_on() {
            self.run::<true>(ctx, batch);
        } else {
            self.run::<false>(ctx, batch);
        }
    }

    fn tables(&self, out: &mut Vec<crate::app::TableFill>) {
        self.append_tables(out);
    }

    fn caches(&self, out: &mut Vec<crate::app::CacheLookups>) {
        self.append_caches(out);
    }

    fn counters(&self, out: &mut Vec<(&'static str, u64)>) {
        let parse = self.parse.counters();
        out.push(("parse.parsed", parse.parsed));
        out.push(("parse.malformed", parse.malformed));
        let c = self.counters();
        out.push(("openflow.cache_hits", c.cache_hits));
        out.push(("openflow.classifier_hits", c.classifier_hits));
        out.push(("openflow.slow_path", c.slow_path));
        out.push(("openflow.table_misses", c.table_misses));
        out.push(("openflow.megaflows", self.megaflows() as u64));
        out.push(("openflow.megaflows_refused", c.megaflows_refused));
        out.push(("openflow.megaflow_flushes", c.megaflow_flushes));
        out.push(("openflow.flows_expired", c.flows_expired));
        out.push(("openflow.copies", c.copies));
        out.push(("openflow.emit_overflow", c.emit_overflow));
        out.push(("openflow.pool_empty", c.pool_empty));
        if let Some(kernel) = &self.kernel {
            out.push(("openflow.fast_path_refused", kernel.refused()));
        }
        out.push(("openflow.packet_in", c.packet_in));
        out.push((
            "openflow.packet_in_dropped_no_match",
            c.packet_in_dropped_no_match,
        ));
        out.push((
            "openflow.packet_in_dropped_action",
            c.packet_in_dropped_action,
        ));
        out.push(("openflow.flow_removed_dropped", c.flow_removed_dropped));
    }

    fn command(&mut self, command: AppCommand, ctx: &CommandContext<'_>) -> AppReply {
        match command {
            AppCommand::FlowAdd(rule) => self.one_edit(&FlowEdit::Add(rule), ctx),
            AppCommand::FlowRemove(rule) => self.one_edit(&FlowEdit::Remove(rule), ctx),
            AppCommand::FlowEdits(edits) => AppReply::Edits(self.apply_edits(&edits, ctx)),
            AppCommand::FlowTransaction { edits, step } => {
                AppReply::Edits(self.apply_transaction(&edits, step, ctx))
            }
            AppCommand::FlowPage { table, start } => {
                AppReply::Table(self.flow_page(table, start, ctx))
            }
            AppCommand::FlowFind {
                table,
                priority,
                matcher,
            } => AppReply::Table(self.flow_find(table, priority, &matcher, ctx)),
            AppCommand::ShowFlows => AppReply::Table(self.flow_table(ctx)),
            AppCommand::GroupEdit(edit) => self.group_edit(edit, ctx),
            AppCommand::ShowGroups => AppReply::Table(self.group_table(ctx)),
            _ => AppReply::Unsupported,
        }
    }
}

/// The pipeline with and without tracing.
impl OpenFlow {
    /// The fast path over one batch, the slow path for what it misses; with `TRACE`, a record
    /// per packet.
    fn run<const TRACE: bool>(&mut self, ctx: &mut Context<'_>, batch: &mut Batch) {
        self.housekeeping(ctx.now);
        self.parse.process(ctx.pool, batch, ctx.keys);
        if !TRACE
            && self.whole_batch_hits
            && !self.trains
            && !self.cache_missed
            && let Some(runs) = self
                .lookup
                .process_cached(batch, ctx.keys, &mut self.batch_slots)
        {
            self.trains = has_trains(runs, batch.len());
            self.apply_cached(ctx, batch);
            return;
        }
        let before = self.lookup.counters();
        let made = self
            .lookup
            .process::<TRACE>(batch, ctx.keys, &mut self.batch_groups);
        let after = self.lookup.counters();
        self.trains = has_trains(made, batch.len());
        self.cache_missed =
            after.classifier_hits + after.misses != before.classifier_hits + before.misses;
        let (descs, metas) = batch.split_mut();
        for g in 0..made {
            let Some(&group) = self.batch_groups.get(g) else {
                break;
            };
            let (Some(descs), Some(metas)) = (
                descs.get_mut(group.packets()),
                metas.get_mut(group.packets()),
            ) else {
                break;
            };
            let (slot, path) = match group.value {
                Some(slot) => (slot as usize, SlowPath::Skipped),
                None => {
                    // One packet: dropped before, or missed by the fast path.
                    let (Some(desc), Some(meta)) = (descs.first_mut(), metas.first_mut()) else {
                        continue;
                    };
                    let arrival = if TRACE {
                        ctx.keys.get(group.start).map(|key| Arrival::new(desc, key))
                    } else {
                        None
                    };
                    let found = if meta.drop.is_some() {
                        Err(SlowPath::Skipped)
                    } else {
                        self.resolve_miss(ctx, group.start, desc, meta)
                    };
                    match found {
                        Ok(found) => found,
                        Err(path) => {
                            if TRACE {
                                let table_miss = path == SlowPath::Refused && self.scratch_hot.miss;
                                let at = group.start;
                                let looked = self.lookup.trace(at + 1).get(at).copied();
                                push_record(
                                    &mut self.trace,
                                    ctx.now,
                                    arrival,
                                    looked,
                                    path,
                                    table_miss,
                                    meta,
                                );
                            }
                            continue;
                        }
                    }
                }
            };
            let (Some(resolved), Some(hot)) = (self.results.get(slot), self.hot.get_mut(slot))
            else {
                for meta in metas.iter_mut() {
                    meta.drop = Some(DropReason::NoOutput);
                }
                continue;
            };
            let mut effects = Effects {
                counters: &mut self.counters,
                copy: &mut self.copy,
                ports: self.config.ports,
                packet_in: &mut self.packet_in,
                groups: &self.groups,
                at: 0,
            };
            let bytes = if TRACE {
                // Packet by packet, each recorded as it arrived and as it was decided.
                let mut bytes = 0;
                for (i, (desc, meta)) in descs.iter_mut().zip(metas.iter_mut()).enumerate() {
                    let at = group.start + i;
                    let arrival = ctx.keys.get(at).map(|key| Arrival::new(desc, key));
                    bytes += effects.apply(
                        hot.plan,
                        resolved,
                        ctx,
                        (std::slice::from_mut(desc), std::slice::from_mut(meta)),
                        at,
                    );
                    let record = self.lookup.trace(at + 1).get(at).copied();
                    push_record(
                        &mut self.trace,
                        ctx.now,
                        arrival,
                        record,
                        path,
                        hot.miss,
                        meta,
                    );
                }
                bytes
            } else {
                effects.apply(hot.plan, resolved, ctx, (descs, metas), group.start)
            };
            // Once per group: a train of one flow writes its counters once.
            effects.count(hot, group.len as u64, bytes, ctx.now);
        }
        self.mirror_cached();
    }

    /// Decides a batch the cache answered whole (`batch_slots`), packet by packet: what the
    /// groups of [`OpenFlow::run`] do, without them.
    fn apply_cached(&mut self, ctx: &mut Context<'_>, batch: &mut Batch) {
        let (descs, metas) = batch.split_mut();
        let mut effects = Effects {
            counters: &mut self.counters,
            copy: &mut self.copy,
            ports: self.config.ports,
            packet_in: &mut self.packet_in,
            groups: &self.groups,
            at: 0,
        };
        for (at, ((desc, meta), &slot)) in descs
            .iter_mut()
            .zip(metas.iter_mut())
            .zip(&*self.batch_slots)
            .enumerate()
        {
            if meta.drop.is_some() {
                continue;
            }
            let slot = slot as usize;
            let (Some(resolved), Some(hot)) = (self.results.get(slot), self.hot.get_mut(slot))
            else {
                meta.drop = Some(DropReason::NoOutput);
                continue;
            };
            let bytes = effects.apply(
                hot.plan,
                resolved,
                ctx,
                (std::slice::from_mut(desc), std::slice::from_mut(meta)),
                at,
            );
            effects.count(hot, 1, bytes, ctx.now);
        }
    }

    /// The slow part for packet `i`, which the fast path missed: its stored result's slot and
    /// how it was found (a megaflow an earlier packet of the batch installed, or one installed
    /// now). `Err(SlowPath::Refused)` when no megaflow could be stored: the packet has then
    /// been decided from the scratch result, and its counts folded into its flows, already.
    fn resolve_miss(
        &mut self,
        ctx: &mut Context<'_>,
        i: usize,
        desc: &mut Desc,
        meta: &mut Meta,
    ) -> Result<(usize, SlowPath), SlowPath> {
        let Some(key) = ctx.keys.get(i) else {
            meta.drop = Some(DropReason::NoOutput);
            return Err(SlowPath::Skipped);
        };
        // A miss may have been resolved by an earlier packet of the same batch: look again
        // before walking the tables (only misses pay this).
        if let Some(slot) = self.lookup.lookup(meta.flow_hash, key) {
            return Ok((slot as usize, SlowPath::Relooked));
        }
        if let Some(slot) = self.upcall(key) {
            return Ok((slot, SlowPath::Installed));
        }
        self.counters.table_misses += u64::from(self.scratch_hot.miss);
        let bytes = Effects {
            counters: &mut self.counters,
            copy: &mut self.copy,
            ports: self.config.ports,
            packet_in: &mut self.packet_in,
            groups: &self.groups,
            at: i,
        }
        .apply(
            self.scratch_hot.plan,
            &self.scratch,
            ctx,
            (std::slice::from_mut(desc), std::slice::from_mut(meta)),
            i,
        );
        self.scratch_hot.count(1, bytes, ctx.now);
        self.scratch_hot
            .fold_into(&self.scratch.flows, &mut self.pipeline.tables);
        Err(SlowPath::Refused)
    }
}
