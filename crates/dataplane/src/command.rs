//! The command channel between the control thread and one worker: run-time changes and queries
//! that reach the worker between batches, without a lock.
//!
//! Each worker has two bounded single-producer single-consumer rings: requests (control ->
//! worker) and replies (worker -> control). The worker looks at the request ring between batches
//! (every [`COMMAND_EVERY`] iterations, and before and after it sleeps), so a command never
//! interrupts a batch and a worker never waits for the control thread. Sending a request rings
//! the channel's doorbell (an eventfd among the descriptors a sleeping worker polls), so an
//! idle worker answers at once rather than when its sleep times out.
//!
//! Heavy payloads are built by the control thread before they are sent: a route load arrives as
//! finished FIBs ([`Routes`]), one copy per worker, so the worker only swaps them in (and adds
//! the handful of routes of its own interfaces). Whatever the worker replaces travels back in
//! the reply ([`Retired`]) and is dropped on the control thread: freeing a 64 MiB table is not
//! the worker's job either.
//!
//! The worker takes a request only when the reply ring has room for its answer, so it never
//! blocks and never has to drop a reply; requests wait in their ring instead, and the control
//! thread times out. [`AppCommand`] lists every change an app may accept (routes, neighbours,
//! MAC table, flows, ACL); an app implements the ones it understands in
//! [`App::command`](crate::app::App::command) and answers [`AppReply::Unsupported`] to the rest.

use core::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rtrb::{Consumer, Producer, RingBuffer};
use wirespeed_io::wait::Doorbell;

use crate::app::router::StaticRoute;
use crate::table::classifier::FlowMatch;
use crate::table::fib::{Fib4, Fib6, Ipv4Prefix, Ipv6Prefix};
use crate::worker::WorkerSnapshot;

/// Iterations between two looks at the request ring while packets flow (a power of two).
pub const COMMAND_EVERY: u64 = 64;

/// Requests (and replies) one worker's rings hold.
pub const RING_CAPACITY: usize = 64;
/// How long [`ControlEnd::wait`] yields before it sleeps between looks at the reply ring.
const QUICK_REPLY: Duration = Duration::from_micros(100);

/// What the control thread asks a worker.
#[derive(Debug)]
pub enum Command {
    /// Answer at once: proves the path to the worker and measures its latency.
    Ping,
    /// Answer with a fresh copy of the worker's counters and port statistics.
    Snapshot,
    /// Hand this to the app.
    App(AppCommand),
    /// Send a frame the control plane made (an OpenFlow PACKET_OUT).
    Inject(Injection),
}

/// A frame the control plane sends through a worker, as OpenFlow's PACKET_OUT asks: out of
/// ports, or through the app's pipeline as if it had arrived on `in_port`. The worker copies
/// it into a frame of its pool between two batches and sends it with the packets it created
/// (or, through the pipeline, as a batch of one); the injection travels back in the reply
/// ([`ReplyBody::Injected`]) so that its buffers are freed on the control thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Injection {
    /// The port index it counts as having arrived on (`None`: from the controller, no port).
    pub in_port: Option<u16>,
    pub frame: Vec<u8>,
    /// Where copies go, in order.
    pub outputs: Vec<Output>,
}

/// One destination of an [`Injection`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// The port of this index.
    Port(u16),
    /// The port it arrived on.
    InPort,
    /// Every port but the one it arrived on.
    Flood,
    /// Every port.
    All,
    /// Through the app's pipeline, as a received packet.
    Pipeline,
}

/// Changes and queries an app may implement. Payloads are plain data or finished tables;
/// next hops are gateway addresses, which the app resolves with its neighbour table.
#[derive(Clone, Debug)]
pub enum AppCommand {
    /// Add or replace one IPv4 route.
    RouteAddV4 { prefix: Ipv4Prefix, via: Ipv4Addr },
    /// Remove the IPv4 route of exactly this prefix.
    RouteRemoveV4(Ipv4Prefix),
    /// Add or replace one IPv6 route.
    RouteAddV6 { prefix: Ipv6Prefix, via: Ipv6Addr },
    /// Remove the IPv6 route of exactly this prefix.
    RouteRemoveV6(Ipv6Prefix),
    /// Add or replace one route of either family, with one gateway or several (ECMP): a
    /// reloaded configuration's route.
    RouteSet(StaticRoute),
    /// Replace every static route (both families) with FIBs built on the control thread.
    ReplaceFib(Routes),
    /// Add or replace a neighbour (ARP/NDP) entry.
    NeighbourAdd(Neighbour),
    /// Remove the neighbour entry of this address.
    NeighbourRemove(IpAddr),
    /// Forget every learned MAC address.
    MacFlush,
    /// Forget a MAC address not seen for this many seconds from now on (a reloaded
    /// configuration's `[bridge] age_seconds`).
    SetMacAge(f64),
    /// The MAC table as a [`Table`].
    ShowMacs,
    /// The neighbour table as a [`Table`].
    ShowNeighbours,
    /// The routes as a [`Table`].
    ShowRoutes,
    /// The flow table (rules and cache) as a [`Table`].
    ShowFlows,
    /// Add a flow rule.
    FlowAdd(FlowRule),
    /// Remove the flow rule with the same priority and match fields.
    FlowRemove(FlowRule),
    /// Apply these flow changes in order, each on its own (one refused, the others still
    /// apply), with one invalidation of the fast path for all of them: the OpenFlow agent's
    /// FLOW_MODs between two barriers. Shared by every worker's command; the sender keeps
    /// its reference until every worker answered, so the edits are freed on its thread.
    FlowEdits(Arc<[FlowEdit]>),
    /// One part of a transaction: these edits apply in order, all of them or, when one is
    /// refused, none of this part's, and the sender then aborts the transaction (undoing the
    /// earlier parts): the OpenFlow agent's bundle commits. A commit comes in parts of a
    /// bounded size so that a worker is never held for long; between parts, packets may see
    /// part of it.
    FlowTransaction {
        edits: Arc<[FlowEdit]>,
        step: TransactionStep,
    },
    /// The flows of `table` whose slots are in `start..start + FLOW_PAGE_SLOTS`, in slot
    /// order, as [`AppCommand::ShowFlows`] shows them: flow statistics and selections over
    /// any number of flows, one bounded page at a time.
    FlowPage { table: u8, start: u32 },
    /// The flow of `table` with exactly this priority and match, as a page of one row (or
    /// none): a strict delete or modify names one flow, and reads it without reading the
    /// table.
    FlowFind {
        table: u8,
        priority: u16,
        matcher: FlowMatch,
    },
    /// Add, change or remove a group of the openflow app (`group add/del`, OpenFlow's
    /// GROUP_MOD).
    GroupEdit(GroupEdit),
    /// The groups (buckets, counters, age) as a [`Table`].
    ShowGroups,
    /// Replace the whole ACL with these rules, first match wins.
    ReplaceAcl(Arc<[AclRule]>),
}

impl AppCommand {
    /// The command's words in the control protocol, for messages.
    pub fn name(&self) -> &'static str {
        match self {
            AppCommand::RouteAddV4 { .. }
            | AppCommand::RouteAddV6 { .. }
            | AppCommand::RouteSet(_) => "route add",
            AppCommand::RouteRemoveV4(_) | AppCommand::RouteRemoveV6(_) => "route del",
            AppCommand::ReplaceFib(_) => "route load",
            AppCommand::NeighbourAdd(_) => "neighbour add",
            AppCommand::NeighbourRemove(_) => "neighbour del",
            AppCommand::MacFlush => "mac flush",
            AppCommand::SetMacAge(_) => "mac age",
            AppCommand::ShowMacs => "show macs",
            AppCommand::ShowNeighbours => "show neighbours",
            AppCommand::ShowRoutes => "show routes",
            AppCommand::ShowFlows => "show flows",
            AppCommand::FlowAdd(_) => "flow add",
            AppCommand::FlowRemove(_) => "flow del",
            AppCommand::FlowEdits(_) => "flow edits",
            AppCommand::FlowTransaction { .. } => "flow transaction",
            AppCommand::FlowPage { .. } => "flow page",
            AppCommand::FlowFind { .. } => "flow find",
            AppCommand::GroupEdit(GroupEdit::Add(_) | GroupEdit::Modify(_)) => "group add",
            AppCommand::GroupEdit(_) => "group del",
            AppCommand::ShowGroups => "show groups",
            AppCommand::ReplaceAcl(_) => "acl load",
        }
    }
}

/// Finished FIBs of both families sharing one next-hop space: next hop *i* of either FIB is
/// gateway `gateways[i]` (so an app can map both with one table). The FIBs are behind an `Arc`
/// only to travel; the sender gives each worker its own copy, which the worker takes over with
/// `Arc::try_unwrap` and completes in place.
#[derive(Clone)]
pub struct Routes {
    pub v4: Arc<Fib4>,
    pub v6: Arc<Fib6>,
    pub gateways: Arc<[IpAddr]>,
}

impl fmt::Debug for Routes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Routes {{ v4: {}, v6: {}, gateways: {} }}",
            self.v4.len(),
            self.v6.len(),
            self.gateways.len()
        )
    }
}

/// A neighbour entry: `addr` is reached at `mac` through the port named `port`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Neighbour {
    pub addr: IpAddr,
    pub mac: [u8; 6],
    pub port: String,
}

/// A flow rule as the operator wrote it: match fields (`name=value`, e.g. `in_port=p0`,
/// `ip_dst=10.0.0.0/8`) and actions (e.g. `output:p1`, `drop`). The app checks the names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowRule {
    pub priority: u16,
    pub fields: Vec<(String, String)>,
    pub actions: Vec<String>,
}

/// One change of an [`AppCommand::FlowEdits`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FlowEdit {
    /// As [`AppCommand::FlowAdd`].
    Add(FlowRule),
    /// As an add, but a flow it replaces (same table, priority and match) hands on its
    /// counters and age: OpenFlow's modify without RESET_COUNTS (§6.4).
    Modify(FlowRule),
    /// As [`AppCommand::FlowRemove`].
    Remove(FlowRule),
}

/// A group as the operator wrote it: its number, its type (`all`, `select`, `indirect`) and
/// its buckets, each an optional `weight:N` and actions in the form of [`FlowRule::actions`]
/// (`group:N` chains to another group).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupRule {
    pub id: u32,
    pub kind: String,
    pub buckets: Vec<Vec<String>>,
}

/// One change of the group table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupEdit {
    /// Refused when the group exists.
    Add(GroupRule),
    /// Replaces the buckets (and type) of an existing group; its counts and age stay.
    Modify(GroupRule),
    /// Removes the group and every flow that sends to it (OpenFlow 1.3 §6.5).
    Remove(u32),
    /// Removes every group and every flow that sends to one.
    RemoveAll,
}

/// Where an [`AppCommand::FlowTransaction`] part stands in its transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransactionStep {
    /// More parts follow: the worker keeps what undoes this one.
    Part,
    /// The last part: applied whole, the transaction is done and cannot be undone.
    Last,
    /// Undo the parts applied so far, newest first, at most [`UNDO_PER_COMMAND`] edits a
    /// command (the sender repeats it while the answer says [`UNDO_MORE`]); its edits are
    /// ignored. Sent after a refusal, and when the sender gives up.
    Abort,
}

/// Edits one [`TransactionStep::Abort`] undoes at most: a worker is never held long.
pub const UNDO_PER_COMMAND: usize = 1024;

/// The one answer of a [`TransactionStep::Abort`] that left edits to undo: send it again.
pub const UNDO_MORE: &str = "more to undo";

/// Classifier slots one [`AppCommand::FlowPage`] covers: a page's rows stay bounded (and its
/// worker's pause short) whatever the number of flows.
pub const FLOW_PAGE_SLOTS: u32 = 4096;

/// The first cell of the row that ends an [`AppCommand::FlowPage`] reply when the table has
/// slots beyond the page.
pub const FLOW_PAGE_MORE: &str = "more";

/// What an ACL rule does with a matching packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AclAction {
    Permit,
    Deny,
}

/// One ACL rule: an action and match fields in the same form as [`FlowRule::fields`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclRule {
    pub action: AclAction,
    pub fields: Vec<(String, String)>,
}

/// Rows for a `show` command.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Table {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// What an app answers to an [`AppCommand`].
#[derive(Debug)]
pub enum AppReply {
    /// This app has no such table or operation.
    Unsupported,
    /// Applied.
    Done,
    /// Not applied, and why (e.g. "no port named p9").
    Refused(String),
    /// The answer to a `show` command.
    Table(Table),
    /// Applied; this is what it replaced, to be dropped by the receiver.
    Retired(Retired),
    /// To [`AppCommand::FlowEdits`] and [`AppCommand::FlowTransaction`]: per edit, in order,
    /// `None` when applied (or not refused, in a transaction undone), else why not.
    Edits(Vec<Option<String>>),
}

/// A payload a worker replaced and hands back so that it is freed off the worker.
#[derive(Debug)]
pub enum Retired {
    Fib(Routes),
    Acl(Arc<[AclRule]>),
}

/// A worker's answer.
#[derive(Debug)]
pub enum ReplyBody {
    /// To [`Command::Ping`]: the worker's iteration count when it answered.
    Pong { iterations: u64 },
    /// To [`Command::Snapshot`].
    Snapshot(Box<WorkerSnapshot>),
    /// To [`Command::App`], with the name of the app that answered.
    App { app: &'static str, reply: AppReply },
    /// To [`Command::Inject`]: the injection back (to be freed by the receiver) and how many
    /// copies of its frame went on their way (fewer than asked when the pool had no free frame,
    /// the batch for them was full, or an output named no port).
    Injected { injection: Injection, sent: usize },
}

/// A request with its sequence number.
#[derive(Debug)]
pub struct Request {
    pub id: u64,
    pub command: Command,
}

/// A reply to the request with the same `id`.
#[derive(Debug)]
pub struct Reply {
    pub id: u64,
    pub body: ReplyBody,
}

/// Why a command got no answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// The request ring is full: the worker has not been taking requests.
    #[error("its command ring is full (it has not taken requests for a while)")]
    Full,
    /// The worker has ended.
    #[error("it has stopped")]
    Stopped,
    /// No reply in time.
    #[error("it did not answer within {0:?}")]
    Timeout(Duration),
}

/// Creates the rings of one worker, each of `capacity` entries.
/// The worker's sleep ends when a request is sent (its [`Doorbell`]; without one, should the
/// eventfd not open, it ends at its timeout as before), and the control thread's wait for a
/// reply ends when the worker has answered (a second doorbell, rung once per turn that
/// answered anything).
pub fn channel(capacity: usize) -> (ControlEnd, WorkerEnd) {
    let (request_tx, request_rx) = RingBuffer::new(capacity.max(1));
    let (reply_tx, reply_rx) = RingBuffer::new(capacity.max(1));
    let doorbell = Doorbell::new().ok().map(Arc::new);
    let answered = Doorbell::new().ok().map(Arc::new);
    (
        ControlEnd {
            requests: request_tx,
            replies: reply_rx,
            next_id: 0,
            doorbell: doorbell.clone(),
            answered: answered.clone(),
        },
        WorkerEnd {
            requests: request_rx,
            replies: reply_tx,
            served: 0,
            dropped_replies: 0,
            doorbell,
            answered,
        },
    )
}

/// The control thread's end of a worker's command channel.
pub struct ControlEnd {
    requests: Producer<Request>,
    replies: Consumer<Reply>,
    next_id: u64,
    doorbell: Option<Arc<Doorbell>>,
    answered: Option<Arc<Doorbell>>,
}

impl ControlEnd {
    /// Queues `command`; returns the id its reply will carry. Never blocks.
    pub fn send(&mut self, command: Command) -> Result<u64, CommandError> {
        if self.requests.is_abandoned() {
            return Err(CommandError::Stopped);
        }
        self.next_id += 1;
        let id = self.next_id;
        self.requests
            .push(Request { id, command })
            .map_err(|_| CommandError::Full)?;
        if let Some(doorbell) = &self.doorbell {
            doorbell.ring();
        }
        Ok(id)
    }

    /// Waits until the reply to request `id` arrives or `deadline` passes. Replies to earlier
    /// requests (whose callers gave up) are dropped here, on the control thread.
    pub fn wait(&mut self, id: u64, deadline: Instant) -> Result<ReplyBody, CommandError> {
        let started = Instant::now();
        loop {
            match self.replies.pop() {
                Ok(reply) if reply.id == id => return Ok(reply.body),
                Ok(_stale) => continue,
                Err(_) => {}
            }
            if self.replies.is_abandoned() {
                return Err(CommandError::Stopped);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(CommandError::Timeout(deadline.duration_since(started)));
            }
            // A woken worker answers within tens of microseconds: yield the core that long,
            // then sleep until the worker rings that it answered (sleeps of 200 us in steps
            // capped a controller's FLOW_MOD and BARRIER round trips at a few thousand a
            // second). The bell is quieted before the ring is looked at again, so a reply
            // pushed after that look rings it anew.
            if now.duration_since(started) < QUICK_REPLY {
                std::thread::yield_now();
            } else if let Some(answered) = &self.answered {
                let step = (deadline - now).min(Duration::from_millis(1));
                let _ = wirespeed_io::wait::wait_readable(&[answered.fd()], step);
                answered.answer();
            } else {
                std::thread::sleep((deadline - now).min(Duration::from_micros(200)));
            }
        }
    }

    /// Sends `command` and waits at most `timeout` for its reply.
    pub fn call(&mut self, command: Command, timeout: Duration) -> Result<ReplyBody, CommandError> {
        let id = self.send(command)?;
        self.wait(id, Instant::now() + timeout)
    }
}

/// The worker's end of its command channel.
pub struct WorkerEnd {
    requests: Consumer<Request>,
    replies: Producer<Reply>,
    served: u64,
    dropped_replies: u64,
    doorbell: Option<Arc<Doorbell>>,
    answered: Option<Arc<Doorbell>>,
}

impl WorkerEnd {
    /// The descriptor a request makes readable, for the worker to sleep on.
    pub fn doorbell(&self) -> Option<RawFd> {
        self.doorbell.as_ref().map(|d| d.fd())
    }

    /// Quiets the doorbell after a sleep, before the requests are served: one read.
    pub fn answer_doorbell(&self) {
        if let Some(doorbell) = &self.doorbell {
            doorbell.answer();
        }
    }

    /// Answers the waiting requests with `handle`, as many as the reply ring has room for and at
    /// most one ring's worth; returns how many. Never blocks.
    pub fn serve(&mut self, mut handle: impl FnMut(Command) -> ReplyBody) -> usize {
        let mut served = 0;
        while served < self.requests.buffer().capacity() && self.replies.slots() > 0 {
            let Ok(request) = self.requests.pop() else {
                break;
            };
            let body = handle(request.command);
            // This end is the only producer and a slot was free: the push cannot fail. Should it
            // anyway, the reply is dropped and counted rather than waited for.
            if self
                .replies
                .push(Reply {
                    id: request.id,
                    body,
                })
                .is_err()
            {
                self.dropped_replies += 1;
            }
            served += 1;
        }
        if served > 0
            && let Some(answered) = &self.answered
        {
            answered.ring();
        }
        self.served += served as u64;
        served
    }

    /// Whether a request is waiting (one atomic load).
    pub fn pending(&self) -> bool {
        !self.requests.is_empty()
    }

    /// Requests answered so far.
    pub fn served(&self) -> u64 {
        self.served
    }

    /// Replies dropped because the reply ring was full.
    pub fn dropped_replies(&self) -> u64 {
        self.dropped_replies
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_answered_with_its_id() {
        let (mut control, mut worker) = channel(4);
        let first = control.send(Command::Ping).unwrap();
        let second = control.send(Command::Snapshot).unwrap();
        assert_ne!(first, second);
        let mut seen = Vec::new();
        assert_eq!(
            worker.serve(|command| {
                seen.push(matches!(command, Command::Ping));
                ReplyBody::Pong { iterations: 7 }
            }),
            2
        );
        assert_eq!(seen, [true, false]);
        // The reply to the first request is stale once the caller waits for the second.
        let body = control
            .wait(second, Instant::now() + Duration::from_secs(1))
            .unwrap();
        assert!(matches!(body, ReplyBody::Pong { iterations: 7 }));
        assert_eq!(worker.served(), 2);
    }

    #[test]
    fn the_worker_takes_no_request_it_could_not_answer() {
        let (mut control, mut worker) = channel(2);
        for _ in 0..2 {
            control.send(Command::Ping).unwrap();
        }
        assert_eq!(control.send(Command::Ping), Err(CommandError::Full));
        assert_eq!(worker.serve(|_| ReplyBody::Pong { iterations: 0 }), 2);
        // Both replies unread: the reply ring is full, so a new request stays in its ring.
        let third = control.send(Command::Ping).unwrap();
        assert_eq!(worker.serve(|_| ReplyBody::Pong { iterations: 0 }), 0);
        assert!(worker.pending());
        assert_eq!(worker.dropped_replies(), 0);
        // Once the control side reads (dropping the stale replies), the request is served.
        let deadline = Instant::now() + Duration::from_millis(20);
        assert!(matches!(
            control.wait(third, deadline),
            Err(CommandError::Timeout(_))
        ));
        assert_eq!(worker.serve(|_| ReplyBody::Pong { iterations: 3 }), 1);
        assert!(matches!(
            control.wait(third, Instant::now() + Duration::from_secs(1)),
            Ok(ReplyBody::Pong { iterations: 3 })
        ));
    }

    #[test]
    fn a_stopped_worker_is_reported_at_once() {
        let (mut control, worker) = channel(2);
        drop(worker);
        assert_eq!(control.send(Command::Ping), Err(CommandError::Stopped));
    }
}
