//! GROUP_MOD and the group statistics: OpenFlow's groups on the openflow app's group table.
//!
//! A GROUP_MOD becomes a [`GroupEdit`] of the rules `wirespeed ctl group add/mod/del` sends
//! (the buckets' actions through [`translate::action_texts`], as a FLOW_MOD's are), and the
//! app's refusal becomes the specification's error. GROUP, GROUP_DESC and GROUP_FEATURES are
//! answered from `show groups`, its rows summed over the workers.

use std::collections::BTreeMap;

use serde_json::Value;
use wirespeed_dataplane::app::fields;
use wirespeed_dataplane::app::openflow::group::{GroupSpec, MAX_BUCKETS, MAX_GROUP_ID};
use wirespeed_dataplane::app::openflow::{Action as AppAction, FlowEntry};
use wirespeed_dataplane::command::{GroupEdit, GroupRule};
use wirespeed_dataplane::table::classifier::FlowMatch;
use wirespeed_openflow::action::{group, port};
use wirespeed_openflow::message::{ALL_TABLES, Bucket, GroupMod, GroupModCommand, GroupType};
use wirespeed_openflow::multipart::{GroupDesc, GroupFeatures, GroupStats, group_capability};
use wirespeed_openflow::{Instruction, Match, OfError};

use super::switch::{Flow, Switch, ask};
use super::translate;
use crate::protocol::{Request, Show};

/// FLOW_REMOVED's reason for a flow removed with its group (OFPRR_GROUP_DELETE).
pub const REMOVED_GROUP_DELETE: u8 = 3;

/// Groups of each type the app holds (its default group table).
const MAX_GROUPS: u32 = 1024;

/// The OpenFlow error of a group change the app refused for `why` (see
/// [`GroupError`](wirespeed_dataplane::app::openflow::group::GroupError)'s texts).
fn refusal(why: &str) -> OfError {
    let has = |word: &str| why.contains(word);
    if has("exists") {
        OfError::GROUP_MOD_EXISTS
    } else if has("bucket") && has("no group") {
        OfError::BAD_ACTION_OUT_GROUP
    } else if has("no group") {
        OfError::GROUP_MOD_UNKNOWN_GROUP
    } else if has("reserved") {
        OfError::GROUP_MOD_INVALID
    } else if has("table is full") {
        OfError::GROUP_MOD_OUT_OF_GROUPS
    } else if has("indirect") {
        OfError::GROUP_MOD_BAD_BUCKET
    } else if has("buckets:") {
        OfError::GROUP_MOD_OUT_OF_BUCKETS
    } else if has("loop") {
        OfError::GROUP_MOD_LOOP
    } else if has("chain of groups") {
        OfError::GROUP_MOD_CHAINING_UNSUPPORTED
    } else if has("in use") {
        OfError::GROUP_MOD_CHAINED_GROUP
    } else if has("bucket") {
        OfError::GROUP_MOD_BAD_BUCKET
    } else {
        OfError::GROUP_MOD_EPERM
    }
}

/// A group as `show groups` shows it on one worker.
struct GroupRow {
    rule: GroupRule,
    packets: u64,
    bytes: u64,
    seconds: f64,
    buckets: Vec<(u64, u64)>,
}

/// A row of `show groups` (columns: worker, group, type, buckets, packets, bytes, duration,
/// bucket_counts).
fn group_row(row: &[Value]) -> Option<GroupRow> {
    let text = |i: usize| row.get(i).and_then(Value::as_str);
    let rule = GroupRule {
        id: text(1)?.parse().ok()?,
        kind: text(2)?.to_string(),
        buckets: text(3)?
            .split(' ')
            .filter(|b| !b.is_empty())
            .map(|b| b.split(',').map(str::to_string).collect())
            .collect(),
    };
    let buckets = text(7)?
        .split(' ')
        .filter(|b| !b.is_empty())
        .map(|b| {
            let (packets, bytes) = b.split_once('/')?;
            Some((packets.parse().ok()?, bytes.parse().ok()?))
        })
        .collect::<Option<Vec<_>>>()?;
    Some(GroupRow {
        rule,
        packets: text(4)?.parse().ok()?,
        bytes: text(5)?.parse().ok()?,
        seconds: text(6)?.parse().ok()?,
        buckets,
    })
}

impl Switch<'_> {
    /// Carries out a GROUP_MOD; returns the flows a delete removed with its groups that asked
    /// for a FLOW_REMOVED (OpenFlow 1.3 §6.5).
    pub fn group_mod(&self, request: &GroupMod) -> Result<Vec<Flow>, OfError> {
        let id = request.group_id;
        let edit = match request.command {
            GroupModCommand::Delete => {
                if id > MAX_GROUP_ID && id != group::ALL {
                    return Err(OfError::GROUP_MOD_INVALID);
                }
                let selection = self
                    .selection(ALL_TABLES, &Match::default(), port::ANY, None, (0, 0))?
                    .out_group(id);
                let mut removed = Vec::new();
                self.select_each(&selection, |flows| {
                    removed.extend(flows.into_iter().filter(|f| f.entry.send_flow_removed));
                    Ok(())
                })?;
                let edit = if id == group::ALL {
                    GroupEdit::RemoveAll
                } else {
                    GroupEdit::Remove(id)
                };
                return match ask(self.handler, Request::GroupEdit(edit)) {
                    Ok(_) => Ok(removed),
                    // Deleting a group that is not there changes nothing and is no error.
                    Err(why) if why.starts_with("no group") => Ok(Vec::new()),
                    Err(why) => Err(refusal(&why)),
                };
            }
            GroupModCommand::Add => GroupEdit::Add(self.group_rule(request)?),
            GroupModCommand::Modify => GroupEdit::Modify(self.group_rule(request)?),
        };
        ask(self.handler, Request::GroupEdit(edit))
            .map(|_| Vec::new())
            .map_err(|why| refusal(&why))
    }

    /// An add's or modify's group as the app's rule: what the app cannot do refused first.
    fn group_rule(&self, request: &GroupMod) -> Result<GroupRule, OfError> {
        let kind = match request.group_type {
            GroupType::All => "all",
            GroupType::Select => "select",
            GroupType::Indirect => "indirect",
            GroupType::FastFailover => return Err(OfError::GROUP_MOD_BAD_TYPE),
        };
        if request.group_id > MAX_GROUP_ID {
            return Err(OfError::GROUP_MOD_INVALID);
        }
        if request.buckets.len() > MAX_BUCKETS {
            return Err(OfError::GROUP_MOD_OUT_OF_BUCKETS);
        }
        let buckets = request
            .buckets
            .iter()
            .map(|bucket| {
                // Only fast-failover groups watch ports and groups.
                if bucket.watch_port != port::ANY || bucket.watch_group != group::ANY {
                    return Err(OfError::GROUP_MOD_BAD_WATCH);
                }
                let mut words = Vec::new();
                if request.group_type == GroupType::Select {
                    words.push(format!("weight:{}", bucket.weight));
                }
                words.extend(
                    translate::action_texts(&bucket.actions, self.ports)?
                        .into_iter()
                        .filter(|a| a != "drop"),
                );
                Ok(words)
            })
            .collect::<Result<Vec<_>, OfError>>()?;
        Ok(GroupRule {
            id: request.group_id,
            kind: kind.into(),
            buckets,
        })
    }

    /// Every group's rule and counts, summed over the workers, by number.
    fn groups(&self) -> Result<BTreeMap<u32, GroupRow>, OfError> {
        let value = ask(self.handler, Request::Show(Show::Groups))
            .map_err(|_| OfError::BAD_REQUEST_EPERM)?;
        let mut merged: BTreeMap<u32, GroupRow> = BTreeMap::new();
        for row in value["rows"].as_array().into_iter().flatten() {
            let Some(row) = row.as_array().and_then(|row| group_row(row)) else {
                continue;
            };
            match merged.get_mut(&row.rule.id) {
                Some(sum) => {
                    sum.packets += row.packets;
                    sum.bytes += row.bytes;
                    sum.seconds = sum.seconds.max(row.seconds);
                    for (sum, (packets, bytes)) in sum.buckets.iter_mut().zip(row.buckets) {
                        sum.0 += packets;
                        sum.1 += bytes;
                    }
                }
                None => {
                    merged.insert(row.rule.id, row);
                }
            }
        }
        Ok(merged)
    }

    /// GROUP statistics of group `id` (or every group for `group::ALL`); the reference count
    /// is the number of flows that send to the group.
    pub fn group_stats(&self, id: u32) -> Result<Vec<GroupStats>, OfError> {
        let groups = self.groups()?;
        let mut references: BTreeMap<u32, u32> = BTreeMap::new();
        let all = self.selection(ALL_TABLES, &Match::default(), port::ANY, None, (0, 0))?;
        self.select_each(&all, |flows| {
            for flow in flows {
                for action in flow.entry.actions.iter().chain(&flow.entry.write_actions) {
                    if let AppAction::Group(to) = *action {
                        *references.entry(to).or_default() += 1;
                    }
                }
            }
            Ok(())
        })?;
        Ok(groups
            .into_iter()
            .filter(|&(at, _)| id == group::ALL || at == id)
            .map(|(at, row)| GroupStats {
                group_id: at,
                ref_count: references.get(&at).copied().unwrap_or(0),
                packet_count: row.packets,
                byte_count: row.bytes,
                duration_sec: row.seconds as u32,
                duration_nsec: (row.seconds.fract() * 1e9) as u32,
                buckets: row.buckets,
            })
            .collect())
    }

    /// GROUP_DESC: every group's type and buckets, its actions as OpenFlow's.
    pub fn group_descs(&self) -> Result<Vec<GroupDesc>, OfError> {
        let port = |name: &str| self.ports.index(name);
        Ok(self
            .groups()?
            .into_values()
            .filter_map(|row| fields::group_rule(&row.rule, &port).ok())
            .map(|spec| group_desc(&spec))
            .collect())
    }
}

/// A group's description: its buckets' actions as a flow's would be shown.
fn group_desc(spec: &GroupSpec) -> GroupDesc {
    let group_type = match spec.kind.name() {
        "select" => GroupType::Select,
        "indirect" => GroupType::Indirect,
        _ => GroupType::All,
    };
    let buckets = spec
        .buckets
        .iter()
        .map(|bucket| {
            let entry = FlowEntry::new(0, FlowMatch::any(), bucket.actions.clone());
            let actions = translate::entry_instructions(&entry)
                .into_iter()
                .find_map(|i| match i {
                    Instruction::ApplyActions(actions) => Some(actions),
                    _ => None,
                })
                .unwrap_or_default();
            Bucket {
                weight: if group_type == GroupType::Select {
                    bucket.weight
                } else {
                    0
                },
                watch_port: port::ANY,
                watch_group: group::ANY,
                actions,
            }
        })
        .collect();
    GroupDesc {
        group_type,
        group_id: spec.id,
        buckets,
    }
}

/// GROUP_FEATURES: all, select and indirect groups with weights and checked chains, and the
/// actions a bucket takes (OUTPUT, PUSH_VLAN, POP_VLAN, GROUP, DEC_NW_TTL, SET_FIELD).
pub fn group_features() -> GroupFeatures {
    let actions = [0u32, 17, 18, 22, 24, 25]
        .iter()
        .fold(0, |bits, action| bits | 1 << action);
    GroupFeatures {
        types: 0b111,
        capabilities: group_capability::SELECT_WEIGHT
            | group_capability::CHAINING
            | group_capability::CHAINING_CHECKS,
        max_groups: [MAX_GROUPS, MAX_GROUPS, MAX_GROUPS, 0],
        actions: [actions, actions, actions, 0],
    }
}
