//! OpenFlow flow tables and the slow path that walks them.
//!
//! A table is a [`Classifier`] of flow entries (priority, match, instructions, timeouts) with
//! their counters. `Pipeline::resolve` walks the tables for one flow key the way OpenFlow 1.3
//! §5.1 and §5.9 describe: look up table 0, apply the matching entry's apply-actions (rewriting
//! the key the next table sees), clear and write its action set, write its metadata, follow
//! goto-table (always to a higher table, so the walk ends); where the walk stops without a
//! miss, the action set runs, in the specification's order. On a miss the configured miss
//! action is done (the action set is discarded). The result is one list of actions for the
//! whole pipeline, the flow entries to credit, and the fields the walk consulted: the megaflow
//! the fast path caches. The action set and the metadata exist only during the walk: they
//! follow from the consulted fields, so a packet never carries them and the fast path runs
//! one list as before.

use wirespeed_packet::DropReason;
use wirespeed_packet::flow_key::FlowKey;

use crate::app::openflow::action::{Action, SetField};
use crate::app::openflow::packet_in::{Origin, Reason};
use crate::table::classifier::{Classifier, FlowMatch, RuleId};

/// Actions one flow entry may carry.
pub const MAX_FLOW_ACTIONS: usize = 16;

/// A flow entry as the control plane writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowEntry {
    /// Higher wins; equal priorities go to the entry added first.
    pub priority: u16,
    pub matcher: FlowMatch,
    /// The apply-actions instruction, in order.
    pub actions: Vec<Action>,
    /// The clear-actions instruction: the action set is emptied (before `write_actions`).
    pub clear_actions: bool,
    /// The write-actions instruction: merged into the action set, which runs when the
    /// pipeline ends (OpenFlow 1.3 §5.10); at most one action of each kind.
    pub write_actions: Vec<Action>,
    /// The write-metadata instruction: (value, mask); the bits of the mask take the value's.
    pub write_metadata: Option<(u64, u64)>,
    /// The goto-table instruction (a table after this one).
    pub goto: Option<u8>,
    /// Seconds without a packet after which the entry is removed (0: never).
    pub idle_timeout: u16,
    /// Seconds after insertion after which the entry is removed (0: never).
    pub hard_timeout: u16,
    /// Opaque to the data plane.
    pub cookie: u64,
    /// The controller wants a FLOW_REMOVED when the entry goes (OpenFlow's SEND_FLOW_REM
    /// flag); kept for the agent, opaque to the data plane.
    pub send_flow_removed: bool,
}

impl FlowEntry {
    /// An entry applying `actions` to packets matching `matcher`, without timeouts or goto.
    pub fn new(priority: u16, matcher: FlowMatch, actions: Vec<Action>) -> Self {
        Self {
            priority,
            matcher,
            actions,
            clear_actions: false,
            write_actions: Vec::new(),
            write_metadata: None,
            goto: None,
            idle_timeout: 0,
            hard_timeout: 0,
            cookie: 0,
            send_flow_removed: false,
        }
    }

    pub fn goto(mut self, table: u8) -> Self {
        self.goto = Some(table);
        self
    }

    pub fn idle_timeout(mut self, seconds: u16) -> Self {
        self.idle_timeout = seconds;
        self
    }

    pub fn hard_timeout(mut self, seconds: u16) -> Self {
        self.hard_timeout = seconds;
        self
    }

    /// Whether the entry can expire.
    pub fn has_timeout(&self) -> bool {
        self.idle_timeout > 0 || self.hard_timeout > 0
    }
}

/// Why a flow entry was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FlowError {
    #[error("table {table} does not exist: the app has {tables} tables (OpenFlowConfig::tables)")]
    NoSuchTable { table: u8, tables: u8 },
    #[error("goto-table {goto} from table {table}: a flow may only go to a later, existing table")]
    BadGoto { table: u8, goto: u8 },
    #[error("output to port {port}: the app has {ports} ports (OpenFlowConfig::ports)")]
    BadPort { port: u16, ports: u16 },
    #[error("action group:{group}: no group {group}; add the group first (`show groups`)")]
    NoSuchGroup { group: u32 },
    #[error("{count} actions in one flow: at most {MAX_FLOW_ACTIONS}")]
    TooManyActions { count: usize },
    #[error(
        "write-actions with two actions of one kind ({action:?}): the action set holds one of \
         each kind (one output, one set_field per field, ...); write one"
    )]
    DuplicateInSet { action: Action },
    #[error(
        "table {table} is full ({capacity} flows): remove flows or raise OpenFlowConfig::flows_per_table"
    )]
    TableFull { table: u8, capacity: usize },
}

/// A flow entry in a table, with its counters.
#[derive(Clone, Debug)]
pub(crate) struct FlowState {
    pub entry: FlowEntry,
    pub packets: u64,
    pub bytes: u64,
    /// TSC when the entry started to count (the first batch after it was added).
    pub installed: u64,
    pub last_used: u64,
    /// Whether `installed` and `last_used` have been set.
    pub stamped: bool,
}

/// A flow entry as `flows()` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowInfo {
    pub table: u8,
    pub entry: FlowEntry,
    pub packets: u64,
    pub bytes: u64,
}

/// What to do with a packet no flow of a table matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MissAction {
    /// Drop it ([`DropReason::TableMiss`](wirespeed_packet::DropReason::TableMiss)).
    Drop,
    Flood,
    Output(u16),
}

/// How the fast path carries out a [`Resolved`], decided once when the slow path stores it, so
/// that the common answers cost a store per packet instead of a walk over the action list.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Plan {
    /// One output and nothing to rewrite: only the packet's out port is set.
    Output(u16),
    /// No output at all: the packet is dropped for this reason.
    Discard(DropReason),
    /// Anything else (rewrites, copies, flood): the actions run one by one.
    #[default]
    Actions,
}

impl Plan {
    fn of(actions: &[Action], miss: bool) -> Self {
        match actions {
            [Action::Output(port)] => Plan::Output(*port),
            [] if miss => Plan::Discard(DropReason::TableMiss),
            [] => Plan::Discard(DropReason::NoOutput),
            _ => Plan::Actions,
        }
    }
}

/// The whole pipeline's answer for one flow: the lists, which a packet reads only when its
/// plan is [`Plan::Actions`]; the rest of the answer is its [`Hot`] part.
#[derive(Clone, Debug, Default)]
pub(crate) struct Resolved {
    /// Rewrites and outputs, ending with the last output (nothing after it could matter).
    pub actions: Vec<Action>,
    /// Flow entries that matched: (table, rule).
    pub flows: Vec<(u8, RuleId)>,
    /// Where each [`Action::Controller`] of `actions` came from, in their order: what its
    /// PACKET_IN says.
    pub origins: Vec<Origin>,
}

/// The part of a flow's answer every packet reads and writes: its plan and its counts. Stored
/// results keep it in an array of its own, apart from their lists, in 32-byte records (two to
/// a cache line, never across two), so that a flow-cache hit touches one line of it: a whole
/// answer took 88 bytes, often over two lines, and 1024 flows spread theirs over 88 KiB where
/// this part takes 32 KiB.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(32))]
pub(crate) struct Hot {
    /// Packets, bytes and the last use since the counts were last folded into the flows
    /// (per-packet work touches this record only, not every flow entry behind it).
    pub packets: u64,
    pub bytes: u64,
    pub last_used: u64,
    /// The answer's actions as the fast path runs them.
    pub plan: Plan,
    /// A table missed.
    pub miss: bool,
}

const _: () = assert!(size_of::<Hot>() == 32);

impl Hot {
    /// Counts `packets` packets of `bytes` bytes in all, the last of them at TSC `now`.
    #[inline]
    pub fn count(&mut self, packets: u64, bytes: u64, now: u64) {
        self.packets += packets;
        self.bytes += bytes;
        self.last_used = now;
    }

    /// Adds the pending counts to the flow entries that matched (`flows`, its answer's) and
    /// starts again from zero.
    pub fn fold_into(&mut self, flows: &[(u8, RuleId)], tables: &mut [Classifier<FlowState>]) {
        if self.packets == 0 {
            return;
        }
        for &(table, id) in flows {
            if let Some(flow) = tables
                .get_mut(usize::from(table))
                .and_then(|t| t.data_mut(id))
            {
                flow.packets += self.packets;
                flow.bytes += self.bytes;
                flow.last_used = flow.last_used.max(self.last_used);
            }
        }
        self.packets = 0;
        self.bytes = 0;
    }
}

/// One table's part in a trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceStep {
    /// `table` matched a flow: its priority, match, instructions (boxed: an entry is a few
    /// hundred bytes, a miss a few).
    Matched { table: u8, entry: Box<FlowEntry> },
    /// `table` matched nothing; the miss action follows.
    Missed { table: u8, miss: MissAction },
}

/// The slow path's walk for one flow key, as `ofproto/trace` shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    pub steps: Vec<TraceStep>,
    /// The whole pipeline's actions, as the fast path runs them.
    pub actions: Vec<Action>,
}

impl std::fmt::Display for Trace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for step in &self.steps {
            match step {
                TraceStep::Matched { table, entry } => {
                    write!(
                        f,
                        "table {table}: priority {} -> {:?}",
                        entry.priority, entry.actions
                    )?;
                    if let Some(goto) = entry.goto {
                        write!(f, ", goto {goto}")?;
                    }
                    writeln!(f)?;
                }
                TraceStep::Missed { table, miss } => {
                    writeln!(f, "table {table}: miss -> {miss:?}")?
                }
            }
        }
        if self.actions.is_empty() {
            write!(f, "result: drop")
        } else {
            write!(f, "result: {:?}", self.actions)
        }
    }
}

/// The tables.
pub(crate) struct Pipeline {
    pub tables: Vec<Classifier<FlowState>>,
    pub miss: MissAction,
}

impl Pipeline {
    /// Walks the tables for `key` like `Pipeline::resolve`, recording each table's part.
    pub fn trace(&mut self, key: &FlowKey) -> Trace {
        let mut resolved = Resolved::default();
        let mut hot = Hot::default();
        self.resolve(key, &mut resolved, &mut hot);
        let mut steps: Vec<TraceStep> = resolved
            .flows
            .iter()
            .filter_map(|&(table, id)| {
                let flow = self.tables.get(usize::from(table))?.data(id)?;
                Some(TraceStep::Matched {
                    table,
                    entry: Box::new(flow.entry.clone()),
                })
            })
            .collect();
        if hot.miss {
            let table = steps.last().map_or(Some(0), |step| match step {
                TraceStep::Matched { entry, .. } => entry.goto,
                TraceStep::Missed { .. } => None,
            });
            if let Some(table) = table {
                steps.push(TraceStep::Missed {
                    table,
                    miss: self.miss,
                });
            }
        }
        Trace {
            steps,
            actions: resolved.actions,
        }
    }

    /// Walks the tables for `key` into `out` and `hot` (its counts start from zero); returns
    /// the consulted fields (the megaflow mask).
    pub fn resolve(&mut self, key: &FlowKey, out: &mut Resolved, hot: &mut Hot) -> FlowKey {
        let consulted = self.walk(key, out, hot);
        hot.plan = Plan::of(&out.actions, hot.miss);
        consulted
    }

    /// The walk of [`Pipeline::resolve`], without the plan.
    fn walk(&mut self, key: &FlowKey, out: &mut Resolved, hot: &mut Hot) -> FlowKey {
        out.actions.clear();
        out.flows.clear();
        out.origins.clear();
        hot.miss = false;
        hot.packets = 0;
        hot.bytes = 0;
        let mut key = *key;
        let mut consulted = FlowKey::EMPTY;
        let mut metadata = 0u64;
        let mut set = ActionSet::default();
        let mut table = 0u8;
        while let Some(classifier) = self.tables.get_mut(usize::from(table)) {
            let Some(id) = classifier.lookup(&key, metadata, &mut consulted) else {
                hot.miss = true;
                match self.miss {
                    MissAction::Drop => {}
                    MissAction::Flood => out.actions.push(Action::Flood),
                    MissAction::Output(port) => out.actions.push(Action::Output(port)),
                }
                break;
            };
            out.flows.push((table, id));
            let Some(flow) = classifier.data(id) else {
                break;
            };
            // OpenFlow 1.3 §5.4: the table-miss flow entry matches everything at priority 0; a
            // packet it sends to the controller goes as a table miss.
            let reason = if flow.entry.priority == 0 && flow.entry.matcher == FlowMatch::any() {
                Reason::NoMatch
            } else {
                Reason::Action
            };
            let origin = Origin {
                reason,
                table,
                cookie: flow.entry.cookie,
                metadata,
            };
            for action in &flow.entry.actions {
                if *action == Action::Drop {
                    out.actions.clear();
                    out.origins.clear();
                    return consulted;
                }
                if let Action::Controller(_) = action {
                    out.origins.push(origin);
                }
                action.apply_to_key(&mut key, &mut consulted);
                out.actions.push(*action);
            }
            // §5.9: clear-actions, then write-actions, then write-metadata, then goto.
            if flow.entry.clear_actions {
                set = ActionSet::default();
            }
            for action in &flow.entry.write_actions {
                set.write(*action, origin);
            }
            if let Some((value, mask)) = flow.entry.write_metadata {
                metadata = (metadata & !mask) | (value & mask);
            }
            match flow.entry.goto {
                Some(next) if next > table => table = next,
                _ => {
                    set.execute(&mut key, &mut consulted, out);
                    break;
                }
            }
        }
        let end = out
            .actions
            .iter()
            .rposition(Action::is_output)
            .map_or(0, |last| last + 1);
        out.actions.truncate(end);
        consulted
    }
}

/// The kinds of action an action set holds one of each, in the order they run (OpenFlow 1.3
/// §5.10: copy TTL in, pop, push MPLS, push PBB, push VLAN, copy TTL out, decrement TTL, set
/// fields, QoS, group, output; the app has pop, push VLAN, decrement TTL, its nine set-fields,
/// group and the outputs).
const SET_SLOTS: usize = 14;
/// The set's slot of a group, and of an output, which a group in the set replaces (§5.10).
const GROUP_SLOT: usize = 12;
const OUTPUT_SLOT: usize = 13;

/// An action set: one slot per kind, a small fixed array (no allocation in the walk).
#[derive(Clone, Copy, Default)]
pub(crate) struct ActionSet {
    slots: [Option<(Action, Origin)>; SET_SLOTS],
}

impl ActionSet {
    /// The slot of `action`'s kind, in the order the set runs; `None` for what no set holds
    /// (a drop: the set stays as it is).
    fn slot(action: &Action) -> Option<usize> {
        Some(match action {
            Action::PopVlan => 0,
            Action::PushVlan(_) => 1,
            Action::DecTtl => 2,
            Action::SetField(field) => {
                3 + match field {
                    SetField::EthSrc(_) => 0,
                    SetField::EthDst(_) => 1,
                    SetField::Ipv4Src(_) => 2,
                    SetField::Ipv4Dst(_) => 3,
                    SetField::Ipv6Src(_) => 4,
                    SetField::Ipv6Dst(_) => 5,
                    SetField::L4Src(_) => 6,
                    SetField::L4Dst(_) => 7,
                    SetField::VlanVid(_) => 8,
                }
            }
            Action::Group(_) => GROUP_SLOT,
            Action::Output(_)
            | Action::Flood
            | Action::All
            | Action::InPort
            | Action::Controller(_) => OUTPUT_SLOT,
            Action::Drop => return None,
        })
    }

    /// Whether `earlier` has an action of `action`'s kind: a write-actions instruction
    /// holding two would lose one (OpenFlow 1.3 §5.10 leaves that to the switch; Open vSwitch
    /// refuses it too).
    pub(crate) fn same_kind_before(earlier: &[Action], action: &Action) -> bool {
        let kind = Self::slot(action);
        kind.is_some() && earlier.iter().any(|a| Self::slot(a) == kind)
    }

    /// Merges `action` in (write-actions): it replaces the set's action of its kind.
    fn write(&mut self, action: Action, origin: Origin) {
        if let Some(slot) = Self::slot(&action).and_then(|at| self.slots.get_mut(at)) {
            *slot = Some((action, origin));
        }
    }

    /// Runs the set at the pipeline's end: its actions go after the apply-actions, in order;
    /// with a group in the set, its output is left out (the group forwards instead).
    fn execute(&self, key: &mut FlowKey, consulted: &mut FlowKey, out: &mut Resolved) {
        let grouped = self.slots[GROUP_SLOT].is_some();
        let slots = if grouped {
            &self.slots[..OUTPUT_SLOT]
        } else {
            &self.slots[..]
        };
        for (action, origin) in slots.iter().flatten() {
            if let Action::Controller(_) = action {
                out.origins.push(*origin);
            }
            action.apply_to_key(key, consulted);
            out.actions.push(*action);
        }
    }
}
