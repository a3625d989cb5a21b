//! Turns a parsed request into commands for every worker and their replies into one response.
//!
//! The dispatcher holds the control end of each worker's command channel (see
//! `wirespeed_dataplane::command`). A request for the workers is sent to all of them first and
//! then their replies are awaited together, so one slow worker costs one timeout, not one per
//! worker; a worker that does not answer in time turns the response into an error naming it.
//! Work that is heavy (parsing a route file as the client sends it and building the FIBs) is
//! done here, on the client's thread, before anything is sent; replaced tables come back in the
//! replies and are dropped here too. The lock around the channels serializes clients on the control side only:
//! workers never see it.

use std::collections::BTreeSet;
use std::io::Read;
use std::net::IpAddr;
use std::sync::{Mutex, OnceLock, TryLockError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wirespeed_dataplane::command::{
    AppCommand, AppReply, Command, CommandError, ControlEnd, Injection, ReplyBody,
};
use wirespeed_dataplane::worker::WorkerSnapshot;
use wirespeed_packet::DropReason;

use crate::config::{AppConfig, FibKind};
use crate::protocol::{self, Request, Response, Show, Upload, table};
use crate::reload::{Event, Level, Reloader};
use crate::tables;

/// How long a worker has to answer a command.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(2);

/// Something that answers requests: the [`Dispatcher`], or a stand-in in tests.
pub trait Handler: Send + Sync + 'static {
    /// Answers `request`; `body` yields the content that followed its line
    /// ([`Request::body_len`] bytes, none for most requests), read as it arrives.
    fn handle(&self, request: Request, body: &mut dyn Read) -> Response;
}

/// What the XDP fast path shows on the control socket: each port's path and why, and, where
/// the kernel forwards, its figures, which `show counters` adds to the workers' (the frames it
/// forwards are never a worker's).
pub trait FastPathView: Send + Sync {
    /// Frames the kernel kept from user space, summed over ports; `None` where the switch
    /// has no fast path.
    fn frames(&self) -> Option<KernelFrames>;
    /// Counters of their own (name without prefix, value): frames handed to user space, by
    /// reason.
    fn counters(&self) -> Vec<(String, u64)>;
    /// The path in force for the port called `port`, and why.
    fn path(&self, port: &str) -> String;
}

/// What the kernel did with the frames it kept from user space, summed over ports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelFrames {
    /// Frames it forwarded.
    pub forwarded: u64,
    /// Frames it sent (forwarded out of a port).
    pub sent: u64,
    /// Frames it dropped: OpenFlow flows without an output, which user space counts as
    /// `no_output` drops.
    pub dropped: u64,
}

/// Answers requests by asking the workers.
pub struct Dispatcher {
    workers: Mutex<Vec<ControlEnd>>,
    timeout: Duration,
    fast_path: Option<Box<dyn FastPathView>>,
    /// The router's own interface addresses, which no loaded route may use as its gateway.
    own: Vec<IpAddr>,
    /// The router's FIB structures (`[router] fib`), which a route load builds.
    fib: FibKind,
    /// Held while a file is loaded: one load at a time, so the switch holds one file's
    /// parsed table (up to `tables::MAX_ROUTES` routes), not one per client.
    loading: Mutex<()>,
    /// The configuration file and what runs of it, for `reload` (and SIGHUP).
    reloader: Option<Reloader>,
    /// The OpenFlow agent's connections, once it runs (it is started with this dispatcher).
    openflow: OnceLock<Box<dyn OpenFlowView>>,
}

/// What `show openflow` shows of the OpenFlow agent: one row per connection, in the columns of
/// [`OPENFLOW_COLUMNS`].
pub trait OpenFlowView: Send + Sync {
    fn rows(&self) -> Vec<Vec<String>>;
}

/// The columns of `show openflow`.
pub const OPENFLOW_COLUMNS: [&str; 9] = [
    "peer",
    "kind",
    "state",
    "role",
    "received",
    "sent",
    "refused",
    "flow mods",
    "async dropped",
];

/// What to do about a worker that gave no answer.
const UNANSWERED: &str = "a worker that does not answer is stuck or has stopped; check the \
                          switch's output and `show workers`";

/// One worker's answer and how long it took.
type Answer = (Result<ReplyBody, CommandError>, Duration);

impl Dispatcher {
    /// A dispatcher over the control ends of the workers, in worker order.
    pub fn new(workers: Vec<ControlEnd>, timeout: Duration) -> Dispatcher {
        Dispatcher {
            workers: Mutex::new(workers),
            timeout,
            fast_path: None,
            own: Vec::new(),
            fib: FibKind::default(),
            loading: Mutex::new(()),
            reloader: None,
            openflow: OnceLock::new(),
        }
    }

    /// The dispatcher of a switch running `app`: a router's interface addresses are checked
    /// against the gateway of `route add` and of every route file loaded (a route via the
    /// router itself would loop), before anything reaches a worker, so the error can name the
    /// file's line.
    pub fn with_app(mut self, app: &AppConfig) -> Dispatcher {
        if let AppConfig::Router(router) = app {
            self.own = router
                .interfaces
                .iter()
                .flat_map(|interface| interface.addresses.iter().map(|&(addr, _)| addr))
                .collect();
            self.fib = router.fib;
        }
        self
    }

    /// Shows `view` on `show openflow` (set once, when the agent starts).
    pub fn set_openflow(&self, view: Box<dyn OpenFlowView>) {
        let _ = self.openflow.set(view);
    }

    fn show_openflow(&self) -> Result<Value, Response> {
        match self.openflow.get() {
            Some(view) => Ok(table(&OPENFLOW_COLUMNS, view.rows())),
            None => Err(Response::error(
                "this switch runs no OpenFlow agent",
                "give [openflow] a listen, controllers or datapath_id key (docs/openflow.md)",
            )),
        }
    }

    /// The dispatcher of a switch started from `reloader`'s file, which `reload` reads again.
    pub fn with_reloader(mut self, reloader: Reloader) -> Dispatcher {
        self.reloader = Some(reloader);
        self
    }

    /// Reads the configuration file again and applies what changed (see [`crate::reload`]):
    /// one event per change, refusal or error.
    pub fn reload(&self) -> Vec<Event> {
        match &self.reloader {
            Some(reloader) => reloader.reload(self),
            None => vec![Event {
                level: Level::Error,
                text: "reload: this switch was not started from a configuration file".into(),
            }],
        }
    }

    /// Sends one app command to every worker, as `ctl` would; the error says why not.
    pub(crate) fn app_command(&self, command: AppCommand) -> Result<(), String> {
        match self.app(command) {
            Ok(_) => Ok(()),
            Err(Response::Error { error, .. }) => Err(error),
            Err(Response::Ok(_)) => Ok(()),
        }
    }

    /// The dispatcher of a switch with the XDP fast path, whose figures `show` adds.
    pub fn with_fast_path(mut self, view: Box<dyn FastPathView>) -> Dispatcher {
        self.fast_path = Some(view);
        self
    }

    /// Sends `make()` to every worker, then waits for every reply until one common deadline.
    fn broadcast(&self, mut make: impl FnMut() -> Command) -> Vec<Answer> {
        let mut workers = self
            .workers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let started = Instant::now();
        let sent: Vec<Result<u64, CommandError>> =
            workers.iter_mut().map(|end| end.send(make())).collect();
        let deadline = started + self.timeout;
        workers
            .iter_mut()
            .zip(sent)
            .map(|(end, id)| {
                let body = id.and_then(|id| end.wait(id, deadline));
                (body, started.elapsed())
            })
            .collect()
    }

    /// Every worker's reply, or an error naming each worker that gave none.
    fn ask(&self, make: impl FnMut() -> Command) -> Result<Vec<(ReplyBody, Duration)>, Response> {
        let answers = self.broadcast(make);
        if answers.is_empty() {
            return Err(Response::error(
                "no workers are running",
                "start the switch with at least one worker",
            ));
        }
        let mut failed = Vec::new();
        let mut replies = Vec::new();
        for (index, (body, elapsed)) in answers.into_iter().enumerate() {
            match body {
                Ok(body) => replies.push((body, elapsed)),
                Err(error) => failed.push(format!("worker {index}: {error}")),
            }
        }
        if failed.is_empty() {
            Ok(replies)
        } else {
            Err(Response::error(failed.join("; "), UNANSWERED))
        }
    }

    fn snapshots(&self) -> Result<Vec<(WorkerSnapshot, Duration)>, Response> {
        self.ask(|| Command::Snapshot)?
            .into_iter()
            .map(|(body, elapsed)| match body {
                ReplyBody::Snapshot(snapshot) => Ok((*snapshot, elapsed)),
                other => Err(unexpected(&other)),
            })
            .collect()
    }

    fn ping(&self) -> Result<Value, Response> {
        let mut rows = Vec::new();
        for (index, (body, elapsed)) in self.ask(|| Command::Ping)?.into_iter().enumerate() {
            let ReplyBody::Pong { iterations } = body else {
                return Err(unexpected(&body));
            };
            rows.push(vec![
                index.to_string(),
                iterations.to_string(),
                elapsed.as_micros().to_string(),
            ]);
        }
        Ok(table(&["worker", "iterations", "reply us"], rows))
    }

    fn show_ports(&self) -> Result<Value, Response> {
        let mut rows = Vec::new();
        for (index, (snapshot, _)) in self.snapshots()?.iter().enumerate() {
            for (info, stats) in &snapshot.ports {
                rows.push(vec![
                    index.to_string(),
                    info.name.clone(),
                    info.backend.name().to_string(),
                    info.mode.to_string(),
                    stats.rx_packets.to_string(),
                    stats.tx_packets.to_string(),
                    stats.rx_dropped.to_string(),
                    stats.tx_refused.to_string(),
                    stats.rx_errors.to_string(),
                    self.fast_path
                        .as_ref()
                        .map_or("user space".to_string(), |view| view.path(&info.name)),
                ]);
            }
        }
        Ok(table(
            &[
                "worker",
                "port",
                "backend",
                "mode",
                "rx packets",
                "tx packets",
                "rx drop",
                "tx refused",
                "rx error",
                "path",
            ],
            rows,
        ))
    }

    fn show_workers(&self) -> Result<Value, Response> {
        let mut rows = Vec::new();
        for (index, (snapshot, elapsed)) in self.snapshots()?.iter().enumerate() {
            let c = &snapshot.counters;
            rows.push(vec![
                index.to_string(),
                c.iterations.to_string(),
                c.rx_packets.to_string(),
                c.tx_packets.to_string(),
                c.dropped().to_string(),
                c.empty_polls.to_string(),
                c.sleeps.to_string(),
                c.commands.to_string(),
                elapsed.as_micros().to_string(),
            ]);
        }
        Ok(table(
            &[
                "worker",
                "iterations",
                "rx packets",
                "tx packets",
                "dropped",
                "empty polls",
                "sleeps",
                "commands",
                "reply us",
            ],
            rows,
        ))
    }

    fn show_counters(&self) -> Result<Value, Response> {
        let snapshots: Vec<WorkerSnapshot> =
            self.snapshots()?.into_iter().map(|(s, _)| s).collect();
        let mut named: Vec<(String, Vec<u64>)> = Vec::new();
        let column = |f: &dyn Fn(&WorkerSnapshot) -> u64| snapshots.iter().map(f).collect();
        named.push(("rx_packets".into(), column(&|s| s.counters.rx_packets)));
        named.push(("tx_packets".into(), column(&|s| s.counters.tx_packets)));
        named.push(("dropped".into(), column(&|s| s.counters.dropped())));
        let kernel = self
            .fast_path
            .as_ref()
            .and_then(|view| Some((view, view.frames()?)));
        let kernel_dropped = kernel.map_or(0, |(_, frames)| frames.dropped);
        for reason in DropReason::ALL {
            let values: Vec<u64> = column(&|s| s.counters.drops[reason as usize]);
            let kernel_drops = reason == DropReason::NoOutput && kernel_dropped > 0;
            if kernel_drops || values.iter().any(|&v| v > 0) {
                named.push((format!("drop.{}", reason.name()), values));
            }
        }
        named.push(("iterations".into(), column(&|s| s.counters.iterations)));
        named.push(("empty_polls".into(), column(&|s| s.counters.empty_polls)));
        named.push(("sleeps".into(), column(&|s| s.counters.sleeps)));
        named.push(("commands".into(), column(&|s| s.counters.commands)));
        named.push(("cycles.rx".into(), column(&|s| s.counters.cycles.rx)));
        named.push((
            "cycles.process".into(),
            column(&|s| s.counters.cycles.process),
        ));
        named.push(("cycles.tx".into(), column(&|s| s.counters.cycles.tx)));
        named.push(("cycles.idle".into(), column(&|s| s.counters.cycles.idle)));
        let app_names: BTreeSet<&'static str> = snapshots
            .iter()
            .flat_map(|s| s.app.iter().map(|(name, _)| *name))
            .collect();
        for name in app_names {
            let values = column(&|s| {
                s.app
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map_or(0, |(_, v)| *v)
            });
            named.push((format!("app.{name}"), values));
        }
        let mut columns = vec!["counter".to_string()];
        columns.extend((0..snapshots.len()).map(|i| format!("worker {i}")));
        if let Some((view, frames)) = kernel {
            // One more column, the kernel's: what it forwarded counts as received and sent
            // like the workers' frames, what it dropped as received and dropped for having no
            // output; its own counters get rows of their own.
            for (name, values) in &mut named {
                values.push(match name.as_str() {
                    "rx_packets" => frames.forwarded + frames.dropped,
                    "tx_packets" => frames.sent,
                    "dropped" => frames.dropped,
                    "drop.no_output" => frames.dropped,
                    _ => 0,
                });
            }
            for (name, value) in view.counters() {
                let mut values = vec![0; snapshots.len()];
                values.push(value);
                named.push((format!("fast_path.{name}"), values));
            }
            columns.push("fast path".into());
        }
        columns.push("total".into());
        let rows = named
            .into_iter()
            .map(|(name, values)| {
                let total: u64 = values.iter().fold(0, |a, &v| a.saturating_add(v));
                let mut row = vec![name];
                row.extend(values.iter().map(u64::to_string));
                row.push(total.to_string());
                row
            })
            .collect::<Vec<_>>();
        Ok(json!({ "columns": columns, "rows": rows }))
    }

    /// Sends `injection` through the first worker (every worker has every port); what it
    /// hands back is freed here.
    fn inject(&self, injection: Injection) -> Result<Value, Response> {
        let mut workers = self
            .workers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let Some(end) = workers.first_mut() else {
            return Err(Response::error(
                "no workers are running",
                "start the switch with at least one worker",
            ));
        };
        match end.call(Command::Inject(injection), self.timeout) {
            Ok(ReplyBody::Injected { injection, sent }) => {
                drop(injection);
                Ok(json!({ "sent": sent }))
            }
            Ok(other) => Err(unexpected(&other)),
            Err(error) => Err(Response::error(format!("worker 0: {error}"), UNANSWERED)),
        }
    }

    /// Sends an app command to every worker and merges the answers.
    fn app(&self, command: AppCommand) -> Result<Value, Response> {
        let name = command.name();
        self.app_each(name, || Command::App(command.clone()))
    }

    /// Sends `make()` (an app command named `name`) to every worker, a fresh one each, and
    /// merges the answers.
    fn app_each(&self, name: &str, make: impl FnMut() -> Command) -> Result<Value, Response> {
        let replies = self.ask(make)?;
        let workers = replies.len();
        let mut applied = 0;
        let mut refused = Vec::new();
        let mut columns: Option<Vec<String>> = None;
        let mut rows = Vec::new();
        // Per edit of a run, the workers that refused it and why.
        let mut edits: Option<Vec<Vec<String>>> = None;
        for (index, (body, _)) in replies.into_iter().enumerate() {
            let ReplyBody::App { app, reply } = body else {
                return Err(unexpected(&body));
            };
            match reply {
                AppReply::Unsupported => {
                    return Err(Response::error(
                        format!("the {app} app does not support `{name}`"),
                        "run an app with that table: route and neighbour commands need the \
                         router, mac the bridge, flow the openflow app, acl the bridge or \
                         the router",
                    ));
                }
                AppReply::Done => applied += 1,
                // The replaced table is freed here, on the control thread.
                AppReply::Retired(retired) => {
                    drop(retired);
                    applied += 1;
                }
                AppReply::Refused(why) => refused.push(format!("worker {index}: {why}")),
                AppReply::Edits(results) => {
                    applied += 1;
                    let merged = edits.get_or_insert_with(|| vec![Vec::new(); results.len()]);
                    for (at, why) in results.into_iter().enumerate() {
                        if let (Some(why), Some(each)) = (why, merged.get_mut(at)) {
                            each.push(format!("worker {index}: {why}"));
                        }
                    }
                }
                AppReply::Table(part) => {
                    columns.get_or_insert_with(|| {
                        let mut all = vec!["worker".to_string()];
                        all.extend(part.columns.iter().cloned());
                        all
                    });
                    rows.extend(part.rows.into_iter().map(|row| {
                        let mut all = vec![index.to_string()];
                        all.extend(row);
                        all
                    }));
                }
            }
        }
        if !refused.is_empty() {
            return Err(Response::error(
                format!(
                    "`{name}` refused ({}); applied on {applied} of {workers} workers",
                    refused.join("; ")
                ),
                "correct the request and send it again",
            ));
        }
        if let Some(edits) = edits {
            // `refused`: [index, why] of each edit some worker refused, in order.
            let refused: Vec<Value> = edits
                .into_iter()
                .enumerate()
                .filter(|(_, why)| !why.is_empty())
                .map(|(at, why)| json!([at, why.join("; ")]))
                .collect();
            return Ok(json!({ "applied": applied, "refused": refused }));
        }
        Ok(match columns {
            Some(columns) => json!({ "columns": columns, "rows": rows }),
            None => json!({ "applied": applied }),
        })
    }

    /// Parses the route file as the client sends it and builds every worker's copy here.
    fn route_load(&self, upload: &Upload, body: &mut dyn Read) -> Result<Value, Response> {
        let started = Instant::now();
        let list = tables::parse_routes(&upload.name, body).map_err(file_error)?;
        list.check_gateways(&self.own).map_err(file_error)?;
        // One copy per worker, built here: a worker completes its own in place.
        let workers = self
            .workers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .len();
        let mut copies = (0..workers)
            .map(|_| list.build(self.fib))
            .collect::<Result<Vec<_>, _>>()
            .map_err(file_error)?;
        let built = started.elapsed();
        let (v4, v6) = (list.v4_len(), list.v6_len());
        let gateways = list.gateways().len();
        let publish = Instant::now();
        // `ask` makes one command per worker, in worker order; there is a copy for each.
        let applied = self.app_each("route load", || match copies.pop() {
            Some(routes) => Command::App(AppCommand::ReplaceFib(routes)),
            None => Command::Ping,
        })?;
        Ok(json!({
            "routes_v4": v4,
            "routes_v6": v6,
            "gateways": gateways,
            "build_ms": built.as_millis() as u64,
            "publish_ms": publish.elapsed().as_millis() as u64,
            "applied": applied["applied"],
        }))
    }

    /// Loads a file with `load_file`, one at a time: a second client is told to come back
    /// rather than making the switch hold two parsed tables.
    fn load(
        &self,
        upload: &Upload,
        body: &mut dyn Read,
        load_file: fn(&Self, &Upload, &mut dyn Read) -> Result<Value, Response>,
    ) -> Result<Value, Response> {
        let _one = match self.loading.try_lock() {
            Ok(guard) => guard,
            // A poisoned lock guards nothing: the load that panicked left no state behind.
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => {
                return Err(Response::error(
                    format!(
                        "{}: another client is loading a file; files load one at a time",
                        upload.name
                    ),
                    "send it again when the other load has answered",
                ));
            }
        };
        load_file(self, upload, body)
    }

    fn acl_load(&self, upload: &Upload, body: &mut dyn Read) -> Result<Value, Response> {
        let rules = tables::parse_acl(&upload.name, body).map_err(file_error)?;
        let count = rules.len();
        let applied = self.app(AppCommand::ReplaceAcl(rules))?;
        Ok(json!({ "rules": count, "applied": applied["applied"] }))
    }
}

impl Handler for Dispatcher {
    fn handle(&self, request: Request, body: &mut dyn Read) -> Response {
        let result = match &request {
            Request::Help => Ok(protocol::help()),
            Request::Ping => self.ping(),
            Request::Show(Show::Ports) => self.show_ports(),
            Request::Show(Show::Workers) => self.show_workers(),
            Request::Show(Show::Counters) => self.show_counters(),
            Request::Show(Show::OpenFlow) => self.show_openflow(),
            Request::RouteAdd { via, .. } if self.own.contains(via) => {
                let (message, fix) = tables::own_gateway(*via);
                Err(Response::error(message, fix))
            }
            Request::RouteLoad(upload) => self.load(upload, body, Self::route_load),
            Request::AclLoad(upload) => self.load(upload, body, Self::acl_load),
            Request::Reload => reload_response(self.reload()),
            Request::PacketOut(injection) => self.inject(injection.clone()),
            other => match other.app_command() {
                Some(command) => self.app(command),
                None => Err(Response::error(
                    "this request has no handler",
                    "report this as a bug in wirespeed",
                )),
            },
        };
        match result {
            Ok(value) => Response::Ok(value),
            Err(response) => response,
        }
    }
}

/// The events as a table; an error (with every event) when one is an error.
fn reload_response(events: Vec<Event>) -> Result<Value, Response> {
    if events.iter().any(|event| event.level == Level::Error) {
        let text = events
            .iter()
            .map(|event| event.text.as_str())
            .collect::<Vec<_>>()
            .join("; ");
        return Err(Response::error(
            text,
            "correct the configuration file and reload again; the running configuration stays \
             where the reload could not change it",
        ));
    }
    let rows = events
        .into_iter()
        .map(|event| {
            let level = match event.level {
                Level::Info => "info",
                Level::Warning => "warning",
                Level::Error => "error",
            };
            vec![level.to_string(), event.text]
        })
        .collect();
    Ok(table(&["level", "event"], rows))
}

fn file_error(error: tables::FileError) -> Response {
    Response::error(error.to_string(), error.fix)
}

fn unexpected(body: &ReplyBody) -> Response {
    Response::error(
        format!("a worker answered with an unexpected reply: {body:?}"),
        "report this as a bug in wirespeed",
    )
}
