//! The agent's way to the app's tables: the control socket's own requests, through the same
//! [`Handler`] that serves `wirespeed ctl`. FLOW_MODs become runs of flow edits (the rules of
//! `flow add` / `flow del`, so they are checked by the same reader, reach every worker the same
//! way and invalidate the flow cache the same way, once per run), and the flow table is read in
//! pages of its slots, as `show flows` shows its rows, however many flows there are.
//!
//! The app deletes strictly (one priority and match); OpenFlow's non-strict delete and modify
//! select flows by covering match, so the agent reads the table page by page, selects with
//! `FlowMatch::covers` and sends each page's strict edits as one run.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use wirespeed_dataplane::app::fields;
use wirespeed_dataplane::app::openflow::{Action as AppAction, FlowEntry};
use wirespeed_dataplane::command::{
    FLOW_PAGE_MORE, FLOW_PAGE_SLOTS, FlowEdit, FlowRule, TransactionStep,
};
use wirespeed_dataplane::table::classifier::FlowMatch;
use wirespeed_openflow::OfError;
use wirespeed_openflow::action::{group, port};
use wirespeed_openflow::message::PortDesc;
use wirespeed_openflow::message::{
    ALL_TABLES, FlowMod, FlowModCommand, NO_BUFFER, PacketOut, flow_flags,
};
use wirespeed_openflow::multipart::{FlowStatsRequest, PortStats};

use super::links::Link;
use super::packet_out;
use super::translate::{self, Ports};
use crate::dispatch::Handler;
use crate::protocol::{Request, Response, Show};

/// One flow entry of the app, its counters summed over the workers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flow {
    pub table: u8,
    pub entry: FlowEntry,
    pub packets: u64,
    pub bytes: u64,
    /// Since the flow started to count (the oldest of the workers' copies).
    pub age: Duration,
}

/// What the agent needs of the switch: its requests' handler, ports and tables.
pub struct Switch<'a> {
    pub handler: &'a dyn Handler,
    pub ports: &'a Ports,
    /// Each port's link, as the agent last read it.
    pub links: &'a [Cell<Link>],
    pub tables: u8,
    pub flows_per_table: u32,
    pub datapath_id: u64,
}

pub(super) fn ask(handler: &dyn Handler, request: Request) -> Result<Value, String> {
    match handler.handle(request, &mut std::io::empty()) {
        Response::Ok(value) => Ok(value),
        Response::Error { error, fix } => Err(format!("{error} ({fix})")),
    }
}

/// The rule a row of `show flows` shows (columns: worker, table, priority, match, actions,
/// goto, idle, hard, packets, bytes, cookie, age, flags), its counts and age; `None` for the rows
/// that are no flow (the cache's).
fn row_rule(row: &[Value]) -> Option<(FlowRule, u64, u64, Duration)> {
    let text = |i: usize| row.get(i).and_then(Value::as_str);
    let table: u8 = text(1)?.parse().ok()?;
    let priority: u16 = text(2)?.parse().ok()?;
    let mut fields: Vec<(String, String)> = match text(3)? {
        "*" => Vec::new(),
        matcher => matcher
            .split(',')
            .filter_map(|f| f.split_once('='))
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
    };
    fields.push(("table".into(), table.to_string()));
    if let Some(goto) = text(5).filter(|g| *g != "-") {
        fields.push(("goto".into(), goto.to_string()));
    }
    fields.push(("idle_timeout".into(), text(6)?.to_string()));
    fields.push(("hard_timeout".into(), text(7)?.to_string()));
    fields.push(("cookie".into(), text(10)?.to_string()));
    fields.push(("flags".into(), text(12)?.to_string()));
    let age = Duration::try_from_secs_f64(text(11)?.parse().ok()?).ok()?;
    let actions = text(4)?.split(',').map(str::to_string).collect();
    let packets = text(8)?.parse().ok()?;
    let bytes = text(9)?.parse().ok()?;
    Some((
        FlowRule {
            priority,
            fields,
            actions,
        },
        packets,
        bytes,
        age,
    ))
}

impl Switch<'_> {
    fn port_index(&self) -> impl Fn(&str) -> Option<u16> + '_ {
        |name| self.ports.index(name)
    }

    /// The flows in one page of `table`'s slots ([`FLOW_PAGE_SLOTS`] from `start`), counters
    /// summed over the workers, and whether the table has slots beyond. Every worker makes
    /// the same changes in the same order, so a flow has the same slot in each; only a copy
    /// re-added after a worker alone timed it out may sit elsewhere and be counted apart.
    fn page(&self, table: u8, start: u32) -> Result<(Vec<Flow>, bool), OfError> {
        self.flows(Request::FlowPage { table, start })
    }

    /// The flows the workers answer `request` with (a [`Request::FlowPage`] or
    /// [`Request::FlowFind`]), counters summed over the workers, and whether the table has
    /// slots beyond.
    fn flows(&self, request: Request) -> Result<(Vec<Flow>, bool), OfError> {
        let value = ask(self.handler, request).map_err(|_| OfError::BAD_REQUEST_EPERM)?;
        let rows = value["rows"].as_array().cloned().unwrap_or_default();
        let mut more = false;
        let mut merged: BTreeMap<(std::cmp::Reverse<u16>, String, String), Flow> = BTreeMap::new();
        for row in rows {
            let Some(row) = row.as_array() else { continue };
            if row.get(1).and_then(Value::as_str) == Some(FLOW_PAGE_MORE) {
                more = true;
                continue;
            }
            let Some((rule, packets, bytes, age)) = row_rule(row) else {
                continue;
            };
            let Ok(parsed) = fields::flow_rule(&rule, &self.port_index()) else {
                continue;
            };
            let key = (
                std::cmp::Reverse(rule.priority),
                format!("{:?}", rule.fields),
                rule.actions.join(","),
            );
            let flow = merged.entry(key).or_insert(Flow {
                table: parsed.table,
                entry: parsed.entry,
                packets: 0,
                bytes: 0,
                age,
            });
            flow.packets += packets;
            flow.bytes += bytes;
            flow.age = flow.age.max(age);
        }
        Ok((merged.into_values().collect(), more))
    }

    /// The flows of the page at `cursor` that `selection` selects, and the next page's cursor
    /// (`None` after the last): a selection over any number of flows, one bounded page at a
    /// time.
    pub fn select_page(
        &self,
        selection: &Selection,
        cursor: Cursor,
    ) -> Result<(Vec<Flow>, Option<Cursor>), OfError> {
        let (flows, more) = self.page(cursor.table, cursor.start)?;
        let selected = flows
            .into_iter()
            .filter(|flow| selection.selects(flow))
            .collect();
        let next = if more {
            Some(Cursor {
                start: cursor.start.saturating_add(FLOW_PAGE_SLOTS),
                ..cursor
            })
        } else if selection.table == ALL_TABLES && cursor.table + 1 < self.tables {
            Some(Cursor {
                table: cursor.table + 1,
                start: 0,
            })
        } else {
            None
        };
        Ok((selected, next))
    }

    /// Calls `each` with every page's selected flows, in order.
    pub fn select_each(
        &self,
        selection: &Selection,
        mut each: impl FnMut(Vec<Flow>) -> Result<(), OfError>,
    ) -> Result<(), OfError> {
        if let Some(priority) = selection.strict
            && selection.table != ALL_TABLES
        {
            // A strict selection names one flow of one table: found, not read page by page.
            let (flows, _) = self.flows(Request::FlowFind {
                table: selection.table,
                priority,
                matcher: selection.matcher,
            })?;
            return each(flows.into_iter().filter(|f| selection.selects(f)).collect());
        }
        let mut cursor = Some(selection.first());
        while let Some(at) = cursor {
            let (flows, next) = self.select_page(selection, at)?;
            each(flows)?;
            cursor = next;
        }
        Ok(())
    }

    /// The description of the port at `index`: number, name, and its link's state.
    pub fn port_desc(&self, index: usize) -> PortDesc {
        let link = self.links.get(index).map(Cell::get).unwrap_or_default();
        PortDesc {
            port_no: Ports::number(index as u16),
            name: self.ports.names.get(index).cloned().unwrap_or_default(),
            config: link.config(),
            state: link.state(),
            // 10 Gb/s full duplex, copper (OFPPF_10GB_FD | OFPPF_COPPER).
            curr: 0x40 | 0x800,
            curr_speed: 10_000_000,
            max_speed: 10_000_000,
            ..PortDesc::default()
        }
    }

    /// Every port's description.
    pub fn port_descs(&self) -> Vec<PortDesc> {
        (0..self.ports.names.len())
            .map(|index| self.port_desc(index))
            .collect()
    }

    /// Every port's counters, summed over the workers (`show ports`).
    pub fn port_stats(&self) -> Vec<PortStats> {
        let mut stats: Vec<PortStats> = (0..self.ports.names.len())
            .map(|index| PortStats {
                port_no: Ports::number(index as u16),
                ..PortStats::default()
            })
            .collect();
        let Ok(value) = ask(self.handler, Request::Show(Show::Ports)) else {
            return stats;
        };
        // Columns: worker, port, backend, mode, rx packets, tx packets, rx drop, tx refused,
        // rx error, path.
        for row in value["rows"].as_array().into_iter().flatten() {
            let cell = |i: usize| -> u64 {
                row.get(i)
                    .and_then(Value::as_str)
                    .and_then(|t| t.parse().ok())
                    .unwrap_or(0)
            };
            let Some(index) = row
                .get(1)
                .and_then(Value::as_str)
                .and_then(|n| self.ports.index(n))
            else {
                continue;
            };
            let port = &mut stats[usize::from(index)];
            port.rx_packets += cell(4);
            port.tx_packets += cell(5);
            port.rx_dropped += cell(6);
            port.tx_dropped += cell(7);
            port.rx_errors += cell(8);
        }
        stats
    }

    /// The request's match as the app's, refused as BAD_MATCH when the app cannot express it.
    fn matcher(&self, matcher: &wirespeed_openflow::Match) -> Result<FlowMatch, OfError> {
        let fields = translate::match_fields(matcher, self.ports)?;
        let rule = FlowRule {
            priority: 0,
            fields,
            actions: vec!["drop".into()],
        };
        fields::flow_rule(&rule, &self.port_index())
            .map(|parsed| parsed.entry.matcher)
            .map_err(|_| OfError::BAD_MATCH_PREREQ)
    }

    /// What a delete, modify or statistics request selects: by table, match (strict or
    /// covering), output port and cookie (`(cookie, mask)`: the masked bits equal).
    pub fn selection(
        &self,
        table: u8,
        matcher: &wirespeed_openflow::Match,
        out_port: u32,
        strict: Option<u16>,
        cookie: (u64, u64),
    ) -> Result<Selection, OfError> {
        Ok(Selection {
            table,
            matcher: self.matcher(matcher)?,
            out_port,
            out_group: group::ANY,
            strict,
            cookie,
        })
    }

    /// What a FLOW or AGGREGATE request selects.
    pub fn stats_selection(&self, request: &FlowStatsRequest) -> Result<Selection, OfError> {
        self.selection(
            request.table_id,
            &request.matcher,
            request.out_port,
            None,
            (request.cookie, request.cookie_mask),
        )
        .map(|selection| selection.out_group(request.out_group))
    }

    /// Applies `edits` in order, as one command to every worker: per edit, whether it
    /// applied, refused with `refusal` (the reason's text) or, when the workers could not
    /// be asked, `fallback`.
    pub fn apply(
        &self,
        edits: Vec<FlowEdit>,
        refusal: impl Fn(&FlowEdit, &str) -> OfError,
    ) -> Vec<Result<(), OfError>> {
        self.edit(edits, refusal, Request::FlowEdits)
    }

    /// Applies one part of a transaction (a bundle's commit, see
    /// [`AppCommand::FlowTransaction`](wirespeed_dataplane::command::AppCommand)): per edit as
    /// [`Switch::apply`]; when one is refused, the worker undid every part.
    pub fn apply_part(
        &self,
        edits: Vec<FlowEdit>,
        step: TransactionStep,
        refusal: impl Fn(&FlowEdit, &str) -> OfError,
    ) -> Vec<Result<(), OfError>> {
        self.edit(edits, refusal, |edits| Request::FlowTransaction {
            edits,
            step,
        })
    }

    /// Undoes the parts of the transaction under way in every worker, one bounded command
    /// after another ([`TransactionStep::Abort`]) until none is left; why not, when the workers
    /// could not be asked.
    pub fn abort_transaction(&self) -> Result<(), String> {
        loop {
            let request = Request::FlowTransaction {
                edits: Arc::from(Vec::new()),
                step: TransactionStep::Abort,
            };
            let value = ask(self.handler, request)?;
            if value["refused"].as_array().is_none_or(Vec::is_empty) {
                return Ok(());
            }
        }
    }

    fn edit(
        &self,
        edits: Vec<FlowEdit>,
        refusal: impl Fn(&FlowEdit, &str) -> OfError,
        request: impl FnOnce(Arc<[FlowEdit]>) -> Request,
    ) -> Vec<Result<(), OfError>> {
        let edits: Arc<[FlowEdit]> = edits.into();
        let mut results = vec![Ok(()); edits.len()];
        match ask(self.handler, request(Arc::clone(&edits))) {
            Ok(value) => {
                for refused in value["refused"].as_array().into_iter().flatten() {
                    let at = refused[0].as_u64().and_then(|at| usize::try_from(at).ok());
                    if let Some((result, edit)) =
                        at.and_then(|at| results.get_mut(at).zip(edits.get(at)))
                    {
                        *result = Err(refusal(edit, refused[1].as_str().unwrap_or("")));
                    }
                }
            }
            Err(why) => {
                for (result, edit) in results.iter_mut().zip(edits.iter()) {
                    *result = Err(refusal(edit, &why));
                }
            }
        }
        results
    }

    /// The rule of a FLOW_MOD add, checked and translated, ready for [`Switch::apply`].
    pub fn add_rule(&self, request: &FlowMod) -> Result<FlowRule, OfError> {
        if request.buffer_id != NO_BUFFER {
            return Err(OfError::BAD_REQUEST_BUFFER_UNKNOWN);
        }
        if request.table_id >= self.tables {
            return Err(OfError::FLOW_MOD_BAD_TABLE_ID);
        }
        let fields = translate::match_fields(&request.matcher, self.ports)?;
        let instructions = translate::instructions(
            &request.instructions,
            request.table_id,
            self.tables,
            self.ports,
        )?;
        Ok(translate::flow_rule(
            request.table_id,
            request.priority,
            fields,
            instructions,
            (request.idle_timeout, request.hard_timeout),
            request.cookie,
            request.flags,
        ))
    }

    /// The strict delete of `flow`: its table, priority and match.
    fn delete_rule(&self, flow: &Flow) -> FlowRule {
        let name = |index: u16| {
            self.ports
                .names
                .get(usize::from(index))
                .cloned()
                .unwrap_or_default()
        };
        let matcher = fields::match_text(&flow.entry.matcher, &name);
        let mut fields: Vec<(String, String)> = if matcher == "*" {
            Vec::new()
        } else {
            matcher
                .split(',')
                .filter_map(|f| f.split_once('='))
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect()
        };
        fields.push(("table".into(), flow.table.to_string()));
        FlowRule {
            priority: flow.entry.priority,
            fields,
            actions: Vec::new(),
        }
    }

    /// Carries out a PACKET_OUT: the frame, rewritten as its actions say, goes out through a
    /// worker, one injection per run of outputs ([`packet_out::injections`]).
    pub fn packet_out(&self, request: &PacketOut) -> Result<(), OfError> {
        for injection in packet_out::injections(request, self.ports)? {
            ask(self.handler, Request::PacketOut(injection))
                .map_err(|_| OfError::BAD_REQUEST_EPERM)?;
        }
        Ok(())
    }

    /// Carries out a FLOW_MOD; returns the flows it deleted that asked for a FLOW_REMOVED
    /// (SEND_FLOW_REM). A delete or modify changes the flows it selects one page at a time,
    /// each page's changes as one command.
    pub fn flow_mod(&self, request: &FlowMod) -> Result<Vec<Flow>, OfError> {
        if request.command == FlowModCommand::Add {
            let rule = self.add_rule(request)?;
            return self
                .apply(vec![FlowEdit::Add(rule)], refusal)
                .pop()
                .unwrap_or(Ok(()))
                .map(|()| Vec::new());
        }
        let change = self.change(request)?;
        self.carry_out(&change, |edits| {
            self.apply(edits, refusal)
                .into_iter()
                .collect::<Result<(), OfError>>()
        })
    }

    /// A FLOW_MOD delete or modify, checked: what it selects, and how it changes what it
    /// selects. Refused as the FLOW_MOD itself would be.
    pub fn change<'r>(&self, request: &'r FlowMod) -> Result<Change<'r>, OfError> {
        if request.buffer_id != NO_BUFFER {
            return Err(OfError::BAD_REQUEST_BUFFER_UNKNOWN);
        }
        let deletes = matches!(
            request.command,
            FlowModCommand::Delete | FlowModCommand::DeleteStrict
        );
        if request.table_id >= self.tables && !(deletes && request.table_id == ALL_TABLES) {
            return Err(OfError::FLOW_MOD_BAD_TABLE_ID);
        }
        if !deletes {
            // The instructions every selected flow gets: refused now, not per flow later.
            translate::instructions(
                &request.instructions,
                request.table_id,
                self.tables,
                self.ports,
            )?;
        }
        let strict = matches!(
            request.command,
            FlowModCommand::DeleteStrict | FlowModCommand::ModifyStrict
        )
        .then_some(request.priority);
        let (out_port, out_group) = if deletes {
            (request.out_port, request.out_group)
        } else {
            (port::ANY, group::ANY)
        };
        let selection = self
            .selection(
                request.table_id,
                &request.matcher,
                out_port,
                strict,
                (request.cookie, request.cookie_mask),
            )?
            .out_group(out_group);
        Ok(Change {
            request,
            selection,
            deletes,
        })
    }

    /// Changes the flows `change` selects, a page at a time, each page's edits handed to
    /// `apply`; returns the flows deleted that asked for a FLOW_REMOVED (SEND_FLOW_REM).
    pub fn carry_out(
        &self,
        change: &Change<'_>,
        mut apply: impl FnMut(Vec<FlowEdit>) -> Result<(), OfError>,
    ) -> Result<Vec<Flow>, OfError> {
        // A modify keeps each flow's counters unless asked to reset them (§6.4).
        let modify = if change.request.flags & flow_flags::RESET_COUNTS != 0 {
            FlowEdit::Add
        } else {
            FlowEdit::Modify
        };
        let mut removed = Vec::new();
        self.select_each(&change.selection, |flows| {
            let edits = if change.deletes {
                flows
                    .iter()
                    .map(|flow| FlowEdit::Remove(self.delete_rule(flow)))
                    .collect()
            } else {
                flows
                    .iter()
                    .map(|flow| self.modified(flow, change.request).map(modify))
                    .collect::<Result<Vec<_>, _>>()?
            };
            if !edits.is_empty() {
                apply(edits)?;
            }
            if change.deletes {
                removed.extend(flows.into_iter().filter(|f| f.entry.send_flow_removed));
            }
            Ok(())
        })?;
        Ok(removed)
    }

    /// `flow` with the instructions of the modify `request` (its match, priority, timeouts,
    /// cookie and flags kept).
    fn modified(&self, flow: &Flow, request: &FlowMod) -> Result<FlowRule, OfError> {
        let instructions =
            translate::instructions(&request.instructions, flow.table, self.tables, self.ports)?;
        let fields = translate::match_fields(&translate::entry_match(&flow.entry), self.ports)?;
        Ok(translate::flow_rule(
            flow.table,
            flow.entry.priority,
            fields,
            instructions,
            (flow.entry.idle_timeout, flow.entry.hard_timeout),
            flow.entry.cookie,
            if flow.entry.send_flow_removed {
                flow_flags::SEND_FLOW_REM
            } else {
                0
            },
        ))
    }
}

/// The OpenFlow error of an edit the app refused for `why`.
pub fn refusal(edit: &FlowEdit, why: &str) -> OfError {
    match edit {
        FlowEdit::Add(_) | FlowEdit::Modify(_) if why.contains("full") => {
            OfError::FLOW_MOD_TABLE_FULL
        }
        FlowEdit::Add(_) if why.contains("check_overlap") => OfError::FLOW_MOD_OVERLAP,
        FlowEdit::Add(_) | FlowEdit::Modify(_) if why.contains("no group") => {
            OfError::BAD_ACTION_OUT_GROUP
        }
        FlowEdit::Add(_) | FlowEdit::Modify(_) => OfError::FLOW_MOD_EPERM,
        FlowEdit::Remove(_) => OfError::FLOW_MOD_UNKNOWN,
    }
}

/// Where a page of the flow table starts: a table and a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cursor {
    pub table: u8,
    pub start: u32,
}

/// A FLOW_MOD delete or modify, checked ([`Switch::change`]), to be carried out
/// ([`Switch::carry_out`]).
pub struct Change<'r> {
    request: &'r FlowMod,
    selection: Selection,
    deletes: bool,
}

/// The flows a request selects (see [`Switch::selection`]).
#[derive(Clone, Debug)]
pub struct Selection {
    table: u8,
    matcher: FlowMatch,
    out_port: u32,
    /// A group the flows send to, or `group::ANY`.
    out_group: u32,
    strict: Option<u16>,
    cookie: (u64, u64),
}

impl Selection {
    /// Only the flows that send to group `out_group` (`group::ANY`: whatever they send to).
    pub fn out_group(self, out_group: u32) -> Selection {
        Selection { out_group, ..self }
    }

    /// The first page to read: of the table asked for, or of table 0 for all of them.
    pub fn first(&self) -> Cursor {
        Cursor {
            table: if self.table == ALL_TABLES {
                0
            } else {
                self.table
            },
            start: 0,
        }
    }

    fn selects(&self, flow: &Flow) -> bool {
        let table = self.table == ALL_TABLES || flow.table == self.table;
        let matches = match self.strict {
            Some(priority) => flow.entry.priority == priority && flow.entry.matcher == self.matcher,
            None => self.matcher.covers(&flow.entry.matcher),
        };
        let outputs = self.out_port == port::ANY
            || flow
                .entry
                .actions
                .iter()
                .chain(&flow.entry.write_actions)
                .any(|a| match *a {
                    AppAction::Output(index) => Ports::number(index) == self.out_port,
                    AppAction::Flood => self.out_port == port::FLOOD,
                    AppAction::Controller(_) => self.out_port == port::CONTROLLER,
                    _ => false,
                });
        let sends = |to: &dyn Fn(u32) -> bool| {
            flow.entry
                .actions
                .iter()
                .chain(&flow.entry.write_actions)
                .any(|a| matches!(*a, AppAction::Group(id) if to(id)))
        };
        let groups = self.out_group == group::ANY
            || (self.out_group == group::ALL && sends(&|_| true))
            || sends(&|id| id == self.out_group);
        let (cookie, mask) = self.cookie;
        table && matches && outputs && groups && flow.entry.cookie & mask == cookie & mask
    }
}
