//! Reloading the configuration file while the switch forwards (`SIGHUP`, `ctl reload`).
//!
//! The file is read and validated as at start-up; a file with any error changes nothing (the
//! error names the place and the fix, as at start-up). A valid file is compared with the
//! configuration running: what the apps can take at run time goes to the workers as the same
//! app commands `wirespeed ctl` sends, one key at a time, between batches; every other
//! difference (ports, cores, the app, pools, ...) is refused by its key with "needs a restart"
//! and the running value stays.
//!
//! Tables are changed by difference, never replaced: a route of the new file that the running
//! table has with the same gateways is not touched, a changed one is replaced in place (an add
//! of the same prefix), a gone one removed, so a packet of unchanged traffic never meets a
//! moment without its route. New neighbours come before the routes that need them, gone ones
//! after the routes that used them. An ACL is one list (first match wins, so a rule means
//! something only in its place): it is swapped whole, between two batches.
//!
//! The running configuration kept here is updated change by change as the workers accept
//! them, so a change a worker refused is tried again by the next reload.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use wirespeed_dataplane::app::router::{Gateway, Prefix, StaticRoute};
use wirespeed_dataplane::command::{AclAction, AppCommand, FlowRule, Neighbour};

use crate::config::{self, AclConfig, AppConfig, Config, RouterNeighbour};
use crate::dispatch::Dispatcher;

/// How much an [`Event`] matters, as a log line's level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// A change applied, or the summary.
    Info,
    /// A change the file asks for that needs a restart: not applied.
    Warning,
    /// The file has an error (nothing applied), or a worker refused a change.
    Error,
}

/// One thing a reload did or refused: one log line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub level: Level,
    pub text: String,
}

impl Event {
    fn new(level: Level, text: impl Into<String>) -> Event {
        Event {
            level,
            text: text.into(),
        }
    }
}

/// The file a switch was started from and the configuration running now.
pub struct Reloader {
    path: PathBuf,
    running: Mutex<Config>,
}

impl Reloader {
    /// A reloader of the file at `path`, from which `running` was loaded.
    pub fn new(path: PathBuf, running: Config) -> Reloader {
        Reloader {
            path,
            running: Mutex::new(running),
        }
    }

    /// Reads the file again and applies what changed through `dispatcher`; one event per
    /// change, refusal or error, and a summary last. One reload at a time.
    pub fn reload(&self, dispatcher: &Dispatcher) -> Vec<Event> {
        let mut running = self
            .running
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let new = match config::load(&self.path) {
            Ok(new) => new,
            Err(error) => {
                // One line: the error's excerpt and fix follow on the same line.
                let text = error
                    .to_string()
                    .lines()
                    .map(str::trim)
                    .collect::<Vec<_>>()
                    .join(" | ");
                return vec![Event::new(
                    Level::Error,
                    format!("reload refused, the running configuration stays: {text}"),
                )];
            }
        };
        let mut events: Vec<Event> = restart_keys(&running, &new)
            .into_iter()
            .map(|key| {
                Event::new(
                    Level::Warning,
                    format!(
                        "reload: `{key}` changed in {}: it needs a restart (systemctl restart); \
                         the running value stays",
                        self.path.display()
                    ),
                )
            })
            .collect();
        let refused = events.len();
        let changes = changes(&running, &new);
        let (mut applied, mut failed) = (0, 0);
        for change in &changes {
            let result = change.commands(&running).and_then(|commands| {
                commands
                    .into_iter()
                    .try_for_each(|command| dispatcher.app_command(command))
            });
            match result {
                Ok(()) => {
                    change.record(&mut running);
                    applied += 1;
                    events.push(Event::new(Level::Info, format!("reload: {}", change.what)));
                }
                Err(why) => {
                    failed += 1;
                    events.push(Event::new(
                        Level::Error,
                        format!("reload: {} failed: {why}", change.what),
                    ));
                }
            }
        }
        let level = if failed > 0 {
            Level::Error
        } else {
            Level::Info
        };
        events.push(Event::new(
            level,
            format!(
                "reload of {}: {applied} change(s) applied, {failed} failed, {refused} key(s) \
                 need a restart",
                self.path.display()
            ),
        ));
        events
    }
}

/// The keys that differ between `old` and `new` and that only a restart can change.
pub fn restart_keys(old: &Config, new: &Config) -> Vec<String> {
    // Destructured whole: a key added to the configuration does not compile here until it is
    // said whether a reload can change it.
    let Config {
        switch,
        ports,
        app,
        task,
        acl,
        metrics,
    } = old;
    let mut keys = Vec::new();
    let mut differs = |key: &str, same: bool| {
        if !same {
            keys.push(key.to_string());
        }
    };
    let s = &new.switch;
    differs("switch.workers", switch.workers == s.workers);
    differs("switch.cores", switch.cores == s.cores);
    differs("switch.batch", switch.batch == s.batch);
    differs("switch.frames", switch.frames == s.frames);
    differs("switch.frame_size", switch.frame_size == s.frame_size);
    differs("switch.idle", switch.idle == s.idle);
    differs("switch.drain_us", switch.drain_us == s.drain_us);
    differs("switch.realtime", switch.realtime == s.realtime);
    differs("switch.fast_path", switch.fast_path == s.fast_path);
    differs(
        "switch.control_socket",
        switch.control_socket == s.control_socket,
    );
    if ports.len() != new.ports.len() {
        differs("port", false);
    } else {
        for (i, (a, b)) in ports.iter().zip(&new.ports).enumerate() {
            differs(&format!("port[{i}]"), a == b);
        }
    }
    differs("task.spin_cycles", task.spin_cycles == new.task.spin_cycles);
    differs("task.walk_bytes", task.walk_bytes == new.task.walk_bytes);
    differs("metrics.listen", *metrics == new.metrics);
    let default = |acl: &Option<AclConfig>| acl.as_ref().map_or(AclAction::Permit, |a| a.default);
    differs("acl.default", default(acl) == default(&new.acl));
    match (app, &new.app) {
        (AppConfig::Xconnect { pairs: a }, AppConfig::Xconnect { pairs: b }) => {
            differs("xconnect.pairs", a == b)
        }
        (
            AppConfig::Bridge {
                ports: a,
                mac_capacity: c,
                age_seconds: _,
            },
            AppConfig::Bridge {
                ports: b,
                mac_capacity: d,
                age_seconds: _,
            },
        ) => {
            differs("bridge.port", a == b);
            differs("bridge.mac_capacity", c == d);
        }
        (AppConfig::Router(a), AppConfig::Router(b)) => {
            differs("router.interface", a.interfaces == b.interfaces);
            differs(
                "router.neighbour_capacity",
                a.neighbour_capacity == b.neighbour_capacity,
            );
            differs("router.icmp_rate", a.icmp_rate == b.icmp_rate);
            differs(
                "router.forward_ipv4_options",
                a.forward_ipv4_options == b.forward_ipv4_options,
            );
        }
        (AppConfig::OpenFlow(a), AppConfig::OpenFlow(b)) => {
            differs("openflow.tables", a.tables == b.tables);
            differs("openflow.miss", a.miss == b.miss);
            differs(
                "openflow.flows_per_table",
                a.flows_per_table == b.flows_per_table,
            );
            differs("openflow.cache_entries", a.cache_entries == b.cache_entries);
            differs("openflow.megaflows", a.megaflows == b.megaflows);
            differs("openflow.group", a.groups == b.groups);
        }
        _ => differs("switch.app", false),
    }
    keys
}

/// One change a running switch can take: what it is (for the log) and how to apply it.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    /// E.g. "route 10.0.0.0/8 via 192.0.2.1 added".
    pub what: String,
    kind: Kind,
}

#[derive(Clone, Debug, PartialEq)]
enum Kind {
    /// The route of `prefix` set to these gateways, or removed (`None`).
    Route {
        prefix: (IpAddr, u8),
        via: Option<Vec<IpAddr>>,
    },
    /// Every entry of `address` replaced by `entries` (none: removed); `clear` removes the
    /// old ones first (an entry gone from a port the address keeps elsewhere).
    Neighbour {
        address: IpAddr,
        entries: Vec<RouterNeighbour>,
        clear: bool,
    },
    /// The ACL's rules swapped whole (the default stays: it is a restart key).
    Acl(Option<AclConfig>),
    /// A flow added or replaced (`true`), or removed.
    Flow { rule: FlowRule, add: bool },
    /// `[bridge] age_seconds`.
    MacAge(f64),
}

impl Change {
    fn new(what: String, kind: Kind) -> Change {
        Change { what, kind }
    }

    /// The app commands that apply it to a switch running `running` (whose ports they name).
    fn commands(&self, running: &Config) -> Result<Vec<AppCommand>, String> {
        Ok(match &self.kind {
            Kind::Route { prefix, via } => {
                let typed = Prefix::new(prefix.0, prefix.1).map_err(|e| e.to_string())?;
                vec![match (via, typed) {
                    (Some(via), prefix) => AppCommand::RouteSet(StaticRoute {
                        prefix,
                        via: via.iter().map(|&gw| Gateway::new(gw)).collect(),
                    }),
                    (None, Prefix::V4(p)) => AppCommand::RouteRemoveV4(p),
                    (None, Prefix::V6(p)) => AppCommand::RouteRemoveV6(p),
                }]
            }
            Kind::Neighbour {
                address,
                entries,
                clear,
            } => {
                let mut commands = Vec::new();
                if *clear {
                    commands.push(AppCommand::NeighbourRemove(*address));
                }
                commands.extend(entries.iter().map(|n| {
                    AppCommand::NeighbourAdd(Neighbour {
                        addr: n.address,
                        mac: n.mac,
                        port: running.ports[n.port].name.clone(),
                    })
                }));
                commands
            }
            Kind::Acl(acl) => vec![AppCommand::ReplaceAcl(Arc::from(
                acl.as_ref().map_or(Vec::new(), |a| a.rules.clone()),
            ))],
            Kind::Flow { rule, add: true } => vec![AppCommand::FlowAdd(rule.clone())],
            Kind::Flow { rule, add: false } => vec![AppCommand::FlowRemove(rule.clone())],
            Kind::MacAge(seconds) => vec![AppCommand::SetMacAge(*seconds)],
        })
    }

    /// Makes `running` say what the switch runs once the change is applied.
    fn record(&self, running: &mut Config) {
        match (&self.kind, &mut running.app) {
            (Kind::Route { prefix, via }, AppConfig::Router(router)) => {
                router.routes.retain(|r| r.prefix != *prefix);
                if let Some(via) = via {
                    router.routes.push(config::RouterRoute {
                        prefix: *prefix,
                        via: via.clone(),
                    });
                }
            }
            (
                Kind::Neighbour {
                    address, entries, ..
                },
                AppConfig::Router(router),
            ) => {
                router.neighbours.retain(|n| n.address != *address);
                router.neighbours.extend(entries.iter().cloned());
            }
            (Kind::Flow { rule, add }, AppConfig::OpenFlow(openflow)) => {
                openflow.flows.retain(|f| flow_key(f) != flow_key(rule));
                if *add {
                    openflow.flows.push(rule.clone());
                }
            }
            (Kind::MacAge(seconds), AppConfig::Bridge { age_seconds, .. }) => {
                *age_seconds = *seconds;
            }
            (Kind::Acl(acl), _) => running.acl = acl.clone(),
            _ => {}
        }
    }
}

/// What the apps can change at run time between `old` and `new`, in the order to apply it.
/// Empty when the app itself changed (a restart key).
pub fn changes(old: &Config, new: &Config) -> Vec<Change> {
    let mut out = Vec::new();
    match (&old.app, &new.app) {
        (AppConfig::Router(a), AppConfig::Router(b)) => {
            let (added, gone) = neighbour_changes(old, &a.neighbours, &b.neighbours);
            out.extend(added);
            out.extend(route_changes(&a.routes, &b.routes));
            out.extend(gone);
        }
        (AppConfig::OpenFlow(a), AppConfig::OpenFlow(b)) => {
            out.extend(flow_changes(&a.flows, &b.flows))
        }
        (AppConfig::Bridge { age_seconds: a, .. }, AppConfig::Bridge { age_seconds: b, .. }) => {
            if a != b {
                out.push(Change::new(
                    format!("bridge.age_seconds {a} -> {b}"),
                    Kind::MacAge(*b),
                ));
            }
        }
        _ => return out,
    }
    let has_acl = matches!(new.app, AppConfig::Bridge { .. } | AppConfig::Router(_));
    let rules = |acl: &Option<AclConfig>| acl.as_ref().map(|a| a.rules.clone()).unwrap_or_default();
    let default = |acl: &Option<AclConfig>| acl.as_ref().map_or(AclAction::Permit, |a| a.default);
    if has_acl && default(&old.acl) == default(&new.acl) && rules(&old.acl) != rules(&new.acl) {
        out.push(Change::new(
            format!(
                "acl replaced: {} rule(s), was {}",
                rules(&new.acl).len(),
                rules(&old.acl).len()
            ),
            Kind::Acl(new.acl.clone()),
        ));
    }
    out
}

fn gateways(via: &[IpAddr]) -> String {
    via.iter()
        .map(IpAddr::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn route_changes(old: &[config::RouterRoute], new: &[config::RouterRoute]) -> Vec<Change> {
    let map = |routes: &[config::RouterRoute]| -> BTreeMap<(IpAddr, u8), Vec<IpAddr>> {
        routes.iter().map(|r| (r.prefix, r.via.clone())).collect()
    };
    let (old, new) = (map(old), map(new));
    let mut out = Vec::new();
    for (prefix, via) in &new {
        let what = match old.get(prefix) {
            Some(was) if was == via => continue,
            Some(was) => format!(
                "route {}/{} via {} changed (was via {})",
                prefix.0,
                prefix.1,
                gateways(via),
                gateways(was)
            ),
            None => format!(
                "route {}/{} via {} added",
                prefix.0,
                prefix.1,
                gateways(via)
            ),
        };
        let kind = Kind::Route {
            prefix: *prefix,
            via: Some(via.clone()),
        };
        out.push(Change::new(what, kind));
    }
    for (prefix, was) in &old {
        if !new.contains_key(prefix) {
            out.push(Change::new(
                format!(
                    "route {}/{} removed (was via {})",
                    prefix.0,
                    prefix.1,
                    gateways(was)
                ),
                Kind::Route {
                    prefix: *prefix,
                    via: None,
                },
            ));
        }
    }
    out
}

/// (changes that add or replace entries, changes that remove addresses), per address.
fn neighbour_changes(
    running: &Config,
    old: &[RouterNeighbour],
    new: &[RouterNeighbour],
) -> (Vec<Change>, Vec<Change>) {
    let by_address = |list: &[RouterNeighbour]| {
        let mut map: BTreeMap<IpAddr, Vec<RouterNeighbour>> = BTreeMap::new();
        for n in list {
            map.entry(n.address).or_default().push(n.clone());
        }
        map
    };
    let (old, new) = (by_address(old), by_address(new));
    let describe = |entries: &[RouterNeighbour]| {
        entries
            .iter()
            .map(|n| {
                let mac = n.mac.map(|b| format!("{b:02x}")).join(":");
                format!("{mac} on {}", running.ports[n.port].name)
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (mut added, mut gone) = (Vec::new(), Vec::new());
    for (address, entries) in &new {
        let (what, clear) = match old.get(address) {
            Some(was) if was == entries => continue,
            Some(was) => {
                let ports: BTreeSet<usize> = entries.iter().map(|n| n.port).collect();
                (
                    format!(
                        "neighbour {address} at {} changed (was at {})",
                        describe(entries),
                        describe(was)
                    ),
                    was.iter().any(|n| !ports.contains(&n.port)),
                )
            }
            None => (
                format!("neighbour {address} at {} added", describe(entries)),
                false,
            ),
        };
        let kind = Kind::Neighbour {
            address: *address,
            entries: entries.clone(),
            clear,
        };
        added.push(Change::new(what, kind));
    }
    for (address, was) in &old {
        if !new.contains_key(address) {
            gone.push(Change::new(
                format!("neighbour {address} removed (was at {})", describe(was)),
                Kind::Neighbour {
                    address: *address,
                    entries: Vec::new(),
                    clear: true,
                },
            ));
        }
    }
    (added, gone)
}

/// What identifies a flow in its table: the table, the priority and the match fields (in any
/// order); not its actions, goto, timeouts or cookie, which an add of the same key replaces.
fn flow_key(rule: &FlowRule) -> (u16, Vec<(String, String)>) {
    let mut fields: Vec<(String, String)> = rule
        .fields
        .iter()
        .filter(|(name, _)| {
            !matches!(
                name.as_str(),
                "goto" | "goto_table" | "idle_timeout" | "hard_timeout" | "cookie"
            )
        })
        .cloned()
        .collect();
    fields.sort();
    (rule.priority, fields)
}

fn flow_changes(old: &[FlowRule], new: &[FlowRule]) -> Vec<Change> {
    let describe = |rule: &FlowRule| {
        let fields = rule
            .fields
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect::<Vec<_>>()
            .join(",");
        format!(
            "flow priority={} {fields} actions={}",
            rule.priority,
            rule.actions.join(",")
        )
    };
    let mut out = Vec::new();
    let old_keys: BTreeMap<_, &FlowRule> = old.iter().map(|f| (flow_key(f), f)).collect();
    let new_keys: BTreeSet<_> = new.iter().map(flow_key).collect();
    for rule in new {
        let what = match old_keys.get(&flow_key(rule)) {
            Some(was) if *was == rule => continue,
            Some(_) => format!("{} changed", describe(rule)),
            None => format!("{} added", describe(rule)),
        };
        out.push(Change::new(
            what,
            Kind::Flow {
                rule: rule.clone(),
                add: true,
            },
        ));
    }
    for rule in old {
        if !new_keys.contains(&flow_key(rule)) {
            out.push(Change::new(
                format!("{} removed", describe(rule)),
                Kind::Flow {
                    rule: rule.clone(),
                    add: false,
                },
            ));
        }
    }
    out
}

#[cfg(test)]
#[path = "reload_tests.rs"]
mod tests;
