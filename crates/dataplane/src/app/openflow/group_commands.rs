//! The control socket's group commands on the openflow app: `group add` / `group del`
//! (OpenFlow's GROUP_MOD reaches them the same way) and `show groups`.
//!
//! Flows look their groups up as their packets run, so adding or changing a group leaves the
//! fast path's entries as they are; removing one removes the flows that send to it (OpenFlow
//! 1.3 §6.5), from their apply-actions or their action set, which flushes them.

use crate::app::CommandContext;
use crate::app::fields;
use crate::command::{AppReply, GroupEdit, Table};

use super::commands::seconds_text;
use super::group::{self, GroupError, GroupSpec, GroupTable};
use super::{Action, OpenFlow};

/// The columns of `show groups`: `buckets` as `group add` writes them (one word each, apart
/// by spaces), `bucket_counts` `packets/bytes` per bucket in the same order.
const COLUMNS: [&str; 7] = [
    "group",
    "type",
    "buckets",
    "packets",
    "bytes",
    "duration",
    "bucket_counts",
];

impl OpenFlow {
    /// Adds a group (between batches).
    pub fn add_group(&mut self, spec: GroupSpec) -> Result<(), GroupError> {
        self.insert_group(spec, false, 0)
    }

    /// The groups, with their counts.
    pub fn groups(&self) -> &GroupTable {
        &self.groups
    }

    /// Adds or (`modify`) changes a group at TSC `now`, its outputs checked against the ports.
    fn insert_group(&mut self, spec: GroupSpec, modify: bool, now: u64) -> Result<(), GroupError> {
        let ports = self.config.ports;
        let check = |action: &Action| match *action {
            Action::Output(port) if port >= ports => {
                Err(format!("output to port {port}: the app has {ports} ports"))
            }
            _ => Ok(()),
        };
        self.groups.insert(spec, modify, now, check)
    }

    /// Applies one change of the group table, or says why not.
    pub(super) fn group_edit(&mut self, edit: GroupEdit, ctx: &CommandContext<'_>) -> AppReply {
        let result = match edit {
            GroupEdit::Add(ref rule) | GroupEdit::Modify(ref rule) => {
                let modify = matches!(edit, GroupEdit::Modify(_));
                let port = |name: &str| ctx.port_index(name);
                match fields::group_rule(rule, &port) {
                    Ok(spec) => self
                        .insert_group(spec, modify, ctx.now)
                        .map_err(|e| e.to_string()),
                    Err(error) => Err(format!("{error} (ports: {})", ctx.port_names())),
                }
            }
            GroupEdit::Remove(id) => self
                .groups
                .remove(id)
                .map(|_| {
                    self.remove_where(|_, entry| {
                        group::sends_to(&entry.actions, id)
                            || group::sends_to(&entry.write_actions, id)
                    });
                })
                .map_err(|e: GroupError| e.to_string()),
            GroupEdit::RemoveAll => {
                self.groups.clear();
                // With every group gone, every flow that sends to one goes.
                self.remove_where(|_, entry| {
                    (entry.actions.iter())
                        .chain(&entry.write_actions)
                        .any(|a| matches!(a, Action::Group(_)))
                });
                Ok(())
            }
        };
        match result {
            Ok(()) => AppReply::Done,
            Err(why) => AppReply::Refused(why),
        }
    }

    /// `show groups`: every group with its buckets, counts and duration (seconds since it
    /// was added, to the millisecond).
    pub(super) fn group_table(&self, ctx: &CommandContext<'_>) -> Table {
        let name = |port: u16| ctx.port_name(port);
        let rows = self
            .groups
            .iter()
            .map(|(id, g)| {
                let buckets: Vec<String> = g
                    .buckets
                    .iter()
                    .map(|b| fields::bucket_text(g.kind, b.weight, &b.actions, &name))
                    .collect();
                let counts: Vec<String> = g
                    .buckets
                    .iter()
                    .map(|b| format!("{}/{}", b.packets.get(), b.bytes.get()))
                    .collect();
                vec![
                    id.to_string(),
                    g.kind.name().to_string(),
                    buckets.join(" "),
                    g.packets.get().to_string(),
                    g.bytes.get().to_string(),
                    seconds_text(ctx.now.saturating_sub(g.installed), self.ticks_per_second),
                    counts.join(" "),
                ]
            })
            .collect();
        Table {
            columns: COLUMNS.map(String::from).to_vec(),
            rows,
        }
    }
}
