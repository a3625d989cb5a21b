//! The control socket's flow commands on the openflow app: `flow add` / `flow del`, the
//! OpenFlow agent's runs of changes ([`AppCommand::FlowEdits`](crate::command::AppCommand)),
//! `show flows`, and the bounded pages of the flow table the agent reads its statistics and
//! selections from. Every change goes through [`OpenFlow::apply_edits`], one at a time or a
//! run at once.

use crate::app::fields::{self, ParsedFlow};
use crate::app::{CommandContext, MAX_SHOW_ROWS};
use crate::command::{
    AppReply, FLOW_PAGE_MORE, FLOW_PAGE_SLOTS, FlowEdit, Table, TransactionStep, UNDO_MORE,
    UNDO_PER_COMMAND,
};
use crate::table::classifier::FlowMatch;

use super::OpenFlow;
use super::table::FlowState;

/// The columns of `show flows` and of a flow page.
const COLUMNS: [&str; 12] = [
    "table", "priority", "match", "actions", "goto", "idle", "hard", "packets", "bytes", "cookie",
    "age", "flags",
];

impl OpenFlow {
    /// Applies `edits` in order, each read and checked on its own, so one refused leaves
    /// the others applied; the counts are folded once before and the fast path invalidated
    /// once after, not per edit (installing 100 000 flows is then a few hundred commands
    /// with one flush each, not 100 000). Per edit `None` when applied, else why not.
    /// Between batches.
    pub(super) fn apply_edits(
        &mut self,
        edits: &[FlowEdit],
        ctx: &CommandContext<'_>,
    ) -> Vec<Option<String>> {
        self.fold_all();
        let mut changed = false;
        let results = edits
            .iter()
            .map(|edit| match self.apply_edit(edit, ctx) {
                Ok(undo) => {
                    changed |= undo.is_some();
                    None
                }
                Err(why) => Some(why),
            })
            .collect();
        if changed {
            self.flush_fast_path();
        }
        results
    }

    /// One part of a transaction ([`crate::command::AppCommand::FlowTransaction`]): `edits`
    /// in order, stopping at the first refused, whose answer says why; then this part is
    /// undone, and the earlier ones wait for the sender's abort. An abort undoes at most
    /// [`UNDO_PER_COMMAND`] edits, newest first, and answers [`UNDO_MORE`] while some are left:
    /// undoing a commit of 100 000 flows in one command would hold the worker for as long as
    /// applying it did. Per edit `None` unless refused.
    pub(super) fn apply_transaction(
        &mut self,
        edits: &[FlowEdit],
        step: TransactionStep,
        ctx: &CommandContext<'_>,
    ) -> Vec<Option<String>> {
        self.fold_all();
        let before = self.transaction.len();
        let (mut results, undo_from) = match step {
            TransactionStep::Abort => (Vec::new(), before.saturating_sub(UNDO_PER_COMMAND)),
            TransactionStep::Part | TransactionStep::Last => {
                let mut results = vec![None; edits.len()];
                let mut refused = false;
                for (edit, result) in edits.iter().zip(&mut results) {
                    match self.apply_edit(edit, ctx) {
                        Ok(undo) => self.transaction.extend(undo),
                        Err(why) => {
                            *result = Some(why);
                            refused = true;
                            break;
                        }
                    }
                }
                let kept = if refused {
                    before
                } else {
                    self.transaction.len()
                };
                (results, kept)
            }
        };
        let changed = self.transaction.len() != undo_from || self.transaction.len() != before;
        for undo in self.transaction.split_off(undo_from).into_iter().rev() {
            self.undo(undo);
        }
        if step == TransactionStep::Abort && !self.transaction.is_empty() {
            results.push(Some(UNDO_MORE.into()));
        }
        if step == TransactionStep::Last && results.iter().all(Option::is_none) {
            self.transaction.clear();
        }
        if changed {
            self.flush_fast_path();
        }
        results
    }

    /// Applies one edit (no fold, no invalidation): what undoes it (`None`: nothing
    /// changed), or why it was refused.
    fn apply_edit(
        &mut self,
        edit: &FlowEdit,
        ctx: &CommandContext<'_>,
    ) -> Result<Option<Undo>, String> {
        let port = |name: &str| ctx.port_index(name);
        match edit {
            FlowEdit::Add(rule) | FlowEdit::Modify(rule) => match fields::flow_rule(rule, &port) {
                Ok(ParsedFlow {
                    table,
                    entry,
                    check_overlap,
                }) => {
                    let (priority, matcher) = (entry.priority, entry.matcher);
                    if check_overlap && self.overlaps(table, priority, &matcher) {
                        return Err(format!(
                            "a flow of priority {priority} in table {table} overlaps it \
                             (check_overlap); `show flows` lists them"
                        ));
                    }
                    match self.insert_flow(table, entry) {
                        (_, Ok(replaced)) => {
                            if let (FlowEdit::Modify(_), Some(old)) = (edit, &replaced) {
                                self.hand_on_counts(table, old);
                            }
                            Ok(Some(Undo::Added {
                                table,
                                priority,
                                matcher,
                                replaced,
                            }))
                        }
                        (_, Err(error)) => Err(error.to_string()),
                    }
                }
                Err(error) => Err(format!("{error} (ports: {})", ctx.port_names())),
            },
            FlowEdit::Remove(rule) => match fields::flow_rule(rule, &port) {
                Ok(ParsedFlow { table, entry, .. }) => {
                    match self.take_flow(table, entry.priority, &entry.matcher) {
                        Some(flow) => Ok(Some(Undo::Removed { table, flow })),
                        None => Err(format!(
                            "no flow in table {table} with priority {} and exactly this \
                             match; `show flows` lists them",
                            entry.priority
                        )),
                    }
                }
                Err(error) => Err(error.to_string()),
            },
        }
    }

    /// Whether a flow of `priority` in `table` matches a packet `matcher` matches too:
    /// OpenFlow's overlap (§6.4), an identical match included. A scan of the table, for the
    /// adds that ask for it only.
    fn overlaps(&self, table: u8, priority: u16, matcher: &FlowMatch) -> bool {
        let Some(classifier) = self.pipeline.tables.get(usize::from(table)) else {
            return false;
        };
        classifier
            .iter()
            .any(|(_, at, other, _)| at == u32::from(priority) && other.overlaps(matcher))
    }

    /// Gives the flow that just replaced `old` (same priority and match) `old`'s counters
    /// and age.
    fn hand_on_counts(&mut self, table: u8, old: &FlowState) {
        let entry = &old.entry;
        if let Some(classifier) = self.pipeline.tables.get_mut(usize::from(table))
            && let Some(id) = classifier.find(u32::from(entry.priority), &entry.matcher)
            && let Some(flow) = classifier.data_mut(id)
        {
            flow.packets = old.packets;
            flow.bytes = old.bytes;
            flow.installed = old.installed;
            flow.last_used = old.last_used;
            flow.stamped = old.stamped;
        }
    }

    /// Reverts one applied edit: an added flow goes and the one it replaced comes back; a
    /// removed flow comes back, its counters and age kept.
    fn undo(&mut self, undo: Undo) {
        match undo {
            Undo::Added {
                table,
                priority,
                matcher,
                replaced,
            } => {
                self.take_flow(table, priority, &matcher);
                if let Some(flow) = replaced {
                    self.restore_flow(table, flow);
                }
            }
            Undo::Removed { table, flow } => self.restore_flow(table, flow),
        }
    }

    /// `flow add` or `flow del`: a run of one.
    pub(super) fn one_edit(&mut self, edit: &FlowEdit, ctx: &CommandContext<'_>) -> AppReply {
        match self.apply_edits(std::slice::from_ref(edit), ctx).pop() {
            Some(Some(why)) => AppReply::Refused(why),
            _ => AppReply::Done,
        }
    }

    /// The row of `flow` (in `table`) as `show flows` shows it.
    fn flow_row(&self, table: usize, flow: &FlowState, ctx: &CommandContext<'_>) -> Vec<String> {
        let name = |port: u16| ctx.port_name(port);
        let e = &flow.entry;
        vec![
            table.to_string(),
            e.priority.to_string(),
            fields::match_text(&e.matcher, &name),
            fields::entry_actions_text(e, &name),
            e.goto.map_or_else(|| "-".into(), |g| g.to_string()),
            e.idle_timeout.to_string(),
            e.hard_timeout.to_string(),
            flow.packets.to_string(),
            flow.bytes.to_string(),
            format!("{:#x}", e.cookie),
            age_text(flow, ctx.now, self.ticks_per_second),
            if e.send_flow_removed {
                "send_flow_rem"
            } else {
                "-"
            }
            .into(),
        ]
    }

    /// "show flows": every flow with its instructions, counters, cookie and age (seconds since
    /// it started to count, to the millisecond: OpenFlow's flow duration), at most
    /// [`MAX_SHOW_ROWS`] of them, then one row with the fast path's statistics.
    pub(super) fn flow_table(&mut self, ctx: &CommandContext<'_>) -> Table {
        self.fold_all();
        // References, not copies: only the rows shown are rendered.
        let mut flows: Vec<(usize, &FlowState)> = self
            .pipeline
            .tables
            .iter()
            .enumerate()
            .flat_map(|(table, classifier)| classifier.iter().map(move |(.., f)| (table, f)))
            .collect();
        flows.sort_by_key(|(table, f)| (*table, std::cmp::Reverse(f.entry.priority)));
        let mut rows: Vec<Vec<String>> = flows
            .iter()
            .take(MAX_SHOW_ROWS)
            .map(|&(table, f)| self.flow_row(table, f, ctx))
            .collect();
        if flows.len() > rows.len() {
            let mut more = vec![String::new(); COLUMNS.len()];
            more[0] = format!("... {} more", flows.len() - rows.len());
            rows.push(more);
        }
        let c = self.counters();
        let mut cache = vec![String::new(); COLUMNS.len()];
        cache[0] = "cache".into();
        cache[2] = format!(
            "cache_hits={} classifier_hits={} slow_path={} megaflows={} table_misses={}",
            c.cache_hits,
            c.classifier_hits,
            c.slow_path,
            self.megaflows(),
            c.table_misses
        );
        rows.push(cache);
        Table {
            columns: COLUMNS.map(String::from).to_vec(),
            rows,
        }
    }

    /// The flows of `table` in slots `start..start + FLOW_PAGE_SLOTS`, in slot order, as
    /// `show flows` shows them, then a [`FLOW_PAGE_MORE`] row when the table has slots
    /// beyond: at most a page's rows rendered per command, whatever the number of flows.
    pub(super) fn flow_page(&mut self, table: u8, start: u32, ctx: &CommandContext<'_>) -> Table {
        self.fold_all();
        let mut rows = Vec::new();
        if let Some(classifier) = self.pipeline.tables.get(usize::from(table)) {
            let start = start as usize;
            let end = start.saturating_add(FLOW_PAGE_SLOTS as usize);
            rows.extend(
                classifier
                    .iter_slots(start..end)
                    .map(|(.., flow)| self.flow_row(usize::from(table), flow, ctx)),
            );
            if classifier.slots() > end {
                let mut more = vec![String::new(); COLUMNS.len()];
                more[0] = FLOW_PAGE_MORE.into();
                rows.push(more);
            }
        }
        Table {
            columns: COLUMNS.map(String::from).to_vec(),
            rows,
        }
    }

    /// The flow of `table` with this priority and match, as a page of one row, or none.
    pub(super) fn flow_find(
        &mut self,
        table: u8,
        priority: u16,
        matcher: &FlowMatch,
        ctx: &CommandContext<'_>,
    ) -> Table {
        self.fold_all();
        let rows = self
            .pipeline
            .tables
            .get(usize::from(table))
            .and_then(|classifier| {
                let id = classifier.find(u32::from(priority), matcher)?;
                classifier.data(id)
            })
            .map(|flow| self.flow_row(usize::from(table), flow, ctx))
            .into_iter()
            .collect();
        Table {
            columns: COLUMNS.map(String::from).to_vec(),
            rows,
        }
    }
}

/// What undoes one edit of a transaction.
#[derive(Debug)]
pub(super) enum Undo {
    /// A flow was added to `table`, replacing `replaced` if there was one.
    Added {
        table: u8,
        priority: u16,
        matcher: FlowMatch,
        replaced: Option<FlowState>,
    },
    /// `flow` was removed from `table`.
    Removed { table: u8, flow: FlowState },
}

/// Seconds since `flow` started to count at TSC `now` (`hz` ticks a second), to the
/// millisecond; 0 before its first batch.
fn age_text(flow: &FlowState, now: u64, hz: u64) -> String {
    let ticks = if flow.stamped {
        now.saturating_sub(flow.installed)
    } else {
        0
    };
    seconds_text(ticks, hz)
}

/// `ticks` TSC ticks (`hz` a second) as seconds to the millisecond.
pub(super) fn seconds_text(ticks: u64, hz: u64) -> String {
    let millis = u128::from(ticks) * 1000 / u128::from(hz.max(1));
    format!("{}.{:03}", millis / 1000, millis % 1000)
}
