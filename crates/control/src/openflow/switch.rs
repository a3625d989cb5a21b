//! The agent's way to the app's tables: the control socket's own requests, through the same
//! [`Handler`] that serves `wirespeed ctl`. A FLOW_MOD becomes `flow add` / `flow del`
//! requests (so the rules are checked by the same reader, reach every worker the same way and
//! invalidate the flow cache the same way), and the flow table is read with `show flows`.
//!
//! The app deletes strictly (one priority and match); OpenFlow's non-strict delete and modify
//! select flows by covering match, so the agent reads the table, selects with
//! `FlowMatch::covers` and sends one strict request per selected flow.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;
use wirespeed_dataplane::app::fields;
use wirespeed_dataplane::app::openflow::{Action as AppAction, FlowEntry};
use wirespeed_dataplane::command::FlowRule;
use wirespeed_dataplane::table::classifier::FlowMatch;
use wirespeed_openflow::OfError;
use wirespeed_openflow::action::port;
use wirespeed_openflow::message::PortDesc;
use wirespeed_openflow::message::{
    ALL_TABLES, FlowMod, FlowModCommand, NO_BUFFER, PacketOut, flow_flags,
};
use wirespeed_openflow::multipart::{FlowStatsRequest, PortStats};

use super::links::Link;
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

fn ask(handler: &dyn Handler, request: Request) -> Result<Value, String> {
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

    /// Every flow of every table, counters summed over the workers, in table then priority
    /// order (highest first).
    pub fn flows(&self) -> Result<Vec<Flow>, OfError> {
        let value = ask(self.handler, Request::Show(Show::Flows))
            .map_err(|_| OfError::BAD_REQUEST_EPERM)?;
        let rows = value["rows"].as_array().cloned().unwrap_or_default();
        let mut merged: BTreeMap<(u8, std::cmp::Reverse<u16>, String, String), Flow> =
            BTreeMap::new();
        for row in rows {
            let Some(row) = row.as_array() else { continue };
            let Some((rule, packets, bytes, age)) = row_rule(row) else {
                continue;
            };
            let Ok(parsed) = fields::flow_rule(&rule, &self.port_index()) else {
                continue;
            };
            let key = (
                parsed.table,
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
        Ok(merged.into_values().collect())
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

    /// The flows a delete, modify or statistics request selects: by table, match (strict or
    /// covering), output port and cookie (`(cookie, mask)`: the masked bits equal).
    pub fn select(
        &self,
        table: u8,
        matcher: &wirespeed_openflow::Match,
        out_port: u32,
        strict: Option<u16>,
        (cookie, mask): (u64, u64),
    ) -> Result<Vec<Flow>, OfError> {
        let wanted = self.matcher(matcher)?;
        let outputs = |flow: &Flow| {
            out_port == port::ANY
                || flow.entry.actions.iter().any(|a| match *a {
                    AppAction::Output(index) => Ports::number(index) == out_port,
                    AppAction::Flood => out_port == port::FLOOD,
                    AppAction::Controller(_) => out_port == port::CONTROLLER,
                    _ => false,
                })
        };
        Ok(self
            .flows()?
            .into_iter()
            .filter(|f| table == ALL_TABLES || f.table == table)
            .filter(|f| match strict {
                Some(priority) => f.entry.priority == priority && f.entry.matcher == wanted,
                None => wanted.covers(&f.entry.matcher),
            })
            .filter(outputs)
            .filter(|f| f.entry.cookie & mask == cookie & mask)
            .collect())
    }

    /// The flows a FLOW or AGGREGATE request selects.
    pub fn stats_select(&self, request: &FlowStatsRequest) -> Result<Vec<Flow>, OfError> {
        self.select(
            request.table_id,
            &request.matcher,
            request.out_port,
            None,
            (request.cookie, request.cookie_mask),
        )
    }

    fn add(&self, rule: FlowRule) -> Result<(), OfError> {
        ask(self.handler, Request::FlowAdd(rule))
            .map(|_| ())
            .map_err(|why| {
                if why.contains("full") {
                    OfError::FLOW_MOD_TABLE_FULL
                } else {
                    OfError::FLOW_MOD_EPERM
                }
            })
    }

    fn delete(&self, flow: &Flow) -> Result<(), OfError> {
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
        let rule = FlowRule {
            priority: flow.entry.priority,
            fields,
            actions: Vec::new(),
        };
        ask(self.handler, Request::FlowDel(rule))
            .map(|_| ())
            .map_err(|_| OfError::FLOW_MOD_UNKNOWN)
    }

    /// Carries out a PACKET_OUT: the frame goes out through a worker.
    pub fn packet_out(&self, request: &PacketOut) -> Result<(), OfError> {
        let injection = translate::packet_out(request, self.ports)?;
        ask(self.handler, Request::PacketOut(injection))
            .map(|_| ())
            .map_err(|_| OfError::BAD_REQUEST_EPERM)
    }

    /// Carries out a FLOW_MOD; returns the flows it deleted that asked for a FLOW_REMOVED
    /// (SEND_FLOW_REM).
    pub fn flow_mod(&self, request: &FlowMod) -> Result<Vec<Flow>, OfError> {
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
        let strict = matches!(
            request.command,
            FlowModCommand::DeleteStrict | FlowModCommand::ModifyStrict
        )
        .then_some(request.priority);
        match request.command {
            FlowModCommand::Add => {
                let fields = translate::match_fields(&request.matcher, self.ports)?;
                let instructions = translate::instructions(
                    &request.instructions,
                    request.table_id,
                    self.tables,
                    self.ports,
                )?;
                self.add(translate::flow_rule(
                    request.table_id,
                    request.priority,
                    fields,
                    instructions,
                    (request.idle_timeout, request.hard_timeout),
                    request.cookie,
                    request.flags & flow_flags::SEND_FLOW_REM != 0,
                ))?;
                Ok(Vec::new())
            }
            FlowModCommand::Delete | FlowModCommand::DeleteStrict => {
                let cookie = (request.cookie, request.cookie_mask);
                let mut removed = Vec::new();
                for flow in self.select(
                    request.table_id,
                    &request.matcher,
                    request.out_port,
                    strict,
                    cookie,
                )? {
                    self.delete(&flow)?;
                    if flow.entry.send_flow_removed {
                        removed.push(flow);
                    }
                }
                Ok(removed)
            }
            FlowModCommand::Modify | FlowModCommand::ModifyStrict => {
                let cookie = (request.cookie, request.cookie_mask);
                for flow in self.select(
                    request.table_id,
                    &request.matcher,
                    port::ANY,
                    strict,
                    cookie,
                )? {
                    let instructions = translate::instructions(
                        &request.instructions,
                        flow.table,
                        self.tables,
                        self.ports,
                    )?;
                    let fields =
                        translate::match_fields(&translate::entry_match(&flow.entry), self.ports)?;
                    self.add(translate::flow_rule(
                        flow.table,
                        flow.entry.priority,
                        fields,
                        instructions,
                        (flow.entry.idle_timeout, flow.entry.hard_timeout),
                        flow.entry.cookie,
                        flow.entry.send_flow_removed,
                    ))?;
                }
                Ok(Vec::new())
            }
        }
    }
}
