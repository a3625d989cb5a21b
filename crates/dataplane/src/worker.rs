//! The worker: one thread, one core, one loop, run to completion.
//!
//! Each iteration, for every RX queue the worker owns: receive a batch, let the app decide every
//! packet, hand the packets to per-port TX batches in bulk (drops are counted per reason and the
//! frames recycled at once), and send a TX batch as soon as it is full. TX batches that are not
//! full are sent when the drain interval has passed or when an iteration received nothing, so a
//! packet waits at most `drain_cycles` under load and not at all when the load stops (DPDK
//! l3fwd's drain timer). What a port's TX ring will not take is dropped and counted ("otherwise
//! we accumulate latency", ixy).
//!
//! Cycle accounting (seed 000 Table II, seed 001's c_IO / c_task / c_busy) costs four TSC reads
//! per received batch: cycles in `rx`, in the app, in TX, and cycles of polls that found nothing
//! (`idle`). Counters are published for other threads every [`PUBLISH_EVERY`] iterations (and
//! after every sleep) through a `try_lock` that the worker never waits on.
//!
//! When its queues are empty the worker either spins (`Idle::Busy`) or, after a few empty polls,
//! sleeps in `poll(2)` on the ports' descriptors (`Idle::Adaptive`): on a machine where the
//! kernel's NAPI work for the same queues runs on the worker's core, spinning steals exactly the
//! time the kernel needs to deliver the next packets.
//!
//! Run-time commands ([`crate::command`]) are taken between batches: every
//! [`COMMAND_EVERY`] iterations, and just before and after a sleep, so an idle worker answers
//! as soon as it wakes (a command's doorbell wakes it) and a busy one within 64 iterations.

use std::os::fd::RawFd;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wirespeed_io::{Port, PortInfo, PortStats, QueueId};
use wirespeed_packet::cpu::rdtsc;
use wirespeed_packet::flow_key::FlowKey;
use wirespeed_packet::{Batch, Desc, DropReason, FramePool, MAX_BATCH, Meta};

use crate::app::{App, CacheLookups, CommandContext, Context, TableFill};
use crate::command::{COMMAND_EVERY, Command, Injection, Output, ReplyBody, WorkerEnd};

/// Empty iterations an adaptive worker adds to its spins while a port still has frames the kernel
/// has not taken ([`Port::tx_backlog`]): each one kicks the kernel again.
const BACKLOG_SPINS: u32 = 64;

/// How long a worker sleeps when a backlog outlasts [`BACKLOG_SPINS`]: the kernel keeps refusing
/// the frames (the peer's queue is full), and a worker at SCHED_FIFO that kept kicking would
/// starve the very thread that drains that queue when it runs on the same core.
const BACKLOG_SLEEP: Duration = Duration::from_millis(1);
/// The owner of the command channel's doorbell among the descriptors a worker sleeps on.
const DOORBELL: usize = usize::MAX;

/// Iterations between two publications of the counters.
pub const PUBLISH_EVERY: u64 = 4096;

/// What a worker does when its queues are empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Idle {
    /// Keep polling.
    Busy,
    /// After `spins` empty iterations in a row, sleep in poll(2) for at most `timeout`.
    Adaptive { spins: u32, timeout: Duration },
}

/// How a worker runs.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    /// Packets per RX and TX batch (1..=256).
    pub batch_size: usize,
    /// Longest a packet may wait in a partly filled TX batch, in TSC cycles.
    pub drain_cycles: u64,
    pub idle: Idle,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self {
            batch_size: 32,
            drain_cycles: 100_000,
            idle: Idle::Adaptive {
                spins: 64,
                timeout: Duration::from_millis(10),
            },
        }
    }
}

/// Upper bounds of the receive batch-size histogram's buckets (`WorkerCounters::batch_sizes`):
/// powers of two up to the largest batch, so a batch finds its bucket with one count of
/// leading zeros, once per batch.
pub const BATCH_BUCKETS: [usize; 9] = [1, 2, 4, 8, 16, 32, 64, 128, 256];

const _: () = assert!(BATCH_BUCKETS[BATCH_BUCKETS.len() - 1] >= MAX_BATCH);

/// The bucket of [`BATCH_BUCKETS`] a non-empty batch of `count` packets falls in.
fn batch_bucket(count: usize) -> usize {
    ((usize::BITS - (count - 1).leading_zeros()) as usize).min(BATCH_BUCKETS.len() - 1)
}

/// TSC cycles spent per part of the loop.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cycles {
    /// In `Port::rx` calls that returned packets.
    pub rx: u64,
    /// In the app (parse + decide + rewrite).
    pub process: u64,
    /// Handing packets to TX batches, `Port::tx`, completions.
    pub tx: u64,
    /// In polls that returned nothing, and sleeping.
    pub idle: u64,
}

/// A worker's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerCounters {
    pub iterations: u64,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub drops: [u64; DropReason::COUNT],
    pub cycles: Cycles,
    /// RX polls that found nothing.
    pub empty_polls: u64,
    /// Times the worker slept in poll(2).
    pub sleeps: u64,
    /// Run-time commands answered.
    pub commands: u64,
    /// Receive polls that returned packets, by batch size: bucket *i* counts the batches of
    /// more than `BATCH_BUCKETS[i - 1]` and at most `BATCH_BUCKETS[i]` packets. Their sizes
    /// sum to `rx_packets`.
    pub batch_sizes: [u64; BATCH_BUCKETS.len()],
}

impl WorkerCounters {
    /// Packets dropped for any reason.
    pub fn dropped(&self) -> u64 {
        self.drops.iter().sum()
    }
}

/// What other threads see of a worker.
#[derive(Clone, Debug, Default)]
pub struct WorkerSnapshot {
    pub counters: WorkerCounters,
    pub ports: Vec<(PortInfo, PortStats)>,
    pub app: Vec<(&'static str, u64)>,
    /// How full the app's tables are.
    pub tables: Vec<TableFill>,
    /// How the app's caches answer.
    pub caches: Vec<CacheLookups>,
    /// Frames of the worker's pool that are free, of how many.
    pub pool_free: u32,
    pub pool_total: u32,
    /// What stopped a port, as [`Worker::faults`] says it, for a caller that reports it while
    /// the worker runs (an interface deleted under a switch).
    pub faults: Vec<String>,
}

/// Where a worker publishes its snapshot.
pub type StatsCell = Mutex<WorkerSnapshot>;

/// Frames of the pool accounted for at shutdown: conservation holds when `free == total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conservation {
    pub total: u32,
    pub free: u32,
    /// Frames no one returned (a leak if not zero).
    pub missing: u32,
    /// Frames released twice or out of range (a bug if not zero).
    pub double_releases: u64,
}

impl Conservation {
    pub fn holds(&self) -> bool {
        self.missing == 0 && self.double_releases == 0
    }
}

/// One port as the worker holds it.
pub struct WorkerPort {
    pub port: Box<dyn Port>,
    /// The queues of this port the worker receives from.
    pub rx_queues: Vec<QueueId>,
    /// The queue the worker transmits on.
    pub tx_queue: QueueId,
}

/// A worker and everything it owns.
pub struct Worker {
    config: WorkerConfig,
    /// Declared before `pool` so that ports (AF_XDP sockets registered on the pool's region)
    /// are dropped before the region is unmapped.
    ports: Vec<Box<dyn Port>>,
    pool: FramePool,
    tx_queue: Vec<QueueId>,
    /// (port index, queue) pairs to receive from, in polling order.
    rx_queues: Vec<(u16, QueueId)>,
    app: Box<dyn App>,
    rx: Batch,
    /// Packets the app created during the current batch.
    extra: Batch,
    tx: Vec<Batch>,
    keys: Box<[FlowKey]>,
    /// The descriptors an idle worker sleeps on, and the (port, queue) each belongs to.
    fds: Vec<RawFd>,
    fd_owners: Vec<(usize, QueueId)>,
    counters: WorkerCounters,
    last_drain: u64,
    empty_streak: u32,
    commands: Option<WorkerEnd>,
}

impl Worker {
    /// A worker over `ports` (indexed as the app expects) with `pool` and `app`.
    pub fn new(
        config: WorkerConfig,
        pool: FramePool,
        ports: Vec<WorkerPort>,
        app: Box<dyn App>,
    ) -> Self {
        let batch_size = config.batch_size.clamp(1, MAX_BATCH);
        let mut rx_queues = Vec::new();
        let mut fds = Vec::new();
        let mut fd_owners = Vec::new();
        for (index, port) in ports.iter().enumerate() {
            for &queue in &port.rx_queues {
                rx_queues.push((index as u16, queue));
                if let Some(fd) = port.port.rx_fd(queue) {
                    fds.push(fd);
                    fd_owners.push((index, queue));
                }
            }
        }
        let tx_queue = ports.iter().map(|p| p.tx_queue).collect();
        let tx = ports.iter().map(|_| Batch::new(batch_size)).collect();
        Self {
            config,
            ports: ports.into_iter().map(|p| p.port).collect(),
            pool,
            tx_queue,
            rx_queues,
            app,
            rx: Batch::new(batch_size),
            extra: Batch::new(MAX_BATCH),
            tx,
            keys: vec![FlowKey::default(); batch_size].into_boxed_slice(),
            fds,
            fd_owners,
            counters: WorkerCounters::default(),
            last_drain: rdtsc(),
            empty_streak: 0,
            commands: None,
        }
    }

    /// Makes an adaptive worker sleep after its first empty poll instead of spinning first
    /// (a busy one keeps spinning: it was asked to). For a worker at SCHED_FIFO: while it
    /// spins nothing else on its core runs, not even the NAPI thread that would give it its next
    /// packets, so every spin is lost time (measured: 64 spins per sleep, 129 empty polls of
    /// two ports, for about 52 packets per wake at 0.45 Mpps).
    pub fn sleep_at_first_empty_poll(&mut self) {
        if let Idle::Adaptive { timeout, .. } = self.config.idle {
            self.config.idle = Idle::Adaptive { spins: 1, timeout };
        }
    }

    /// Gives the worker its end of a command channel (see [`crate::command::channel`]).
    pub fn attach_commands(&mut self, end: WorkerEnd) {
        // Slept on first (poll(2) watches at most 64 descriptors), owned by no port.
        if let Some(fd) = end.doorbell() {
            self.fds.insert(0, fd);
            self.fd_owners.insert(0, (DOORBELL, 0));
        }
        self.commands = Some(end);
    }

    /// One iteration over every owned RX queue; returns the packets received.
    ///
    /// The cycle accounting reads the TSC once per boundary between two parts of the loop and
    /// no more: each reading closes one interval and opens the next (`mark`). On this machine's
    /// CPUs `rdtsc` costs about 36 cycles of throughput, so the seven readings of a naive
    /// "start and stop per part" cost 8 cycles per packet at batch 32; chained, the common
    /// iteration with one queue takes four.
    pub fn poll_once(&mut self) -> usize {
        let now = rdtsc();
        // Start of the interval not yet accounted; `open_tx`: that interval is a distribute,
        // closed by the next reading (the last queue's runs on into the flush and polls below,
        // which count as TX too when packets arrived).
        let mut mark = now;
        let mut open_tx = false;
        let mut received = 0;
        for index in 0..self.rx_queues.len() {
            let (port, queue) = self.rx_queues[index];
            if open_tx {
                let t = rdtsc();
                self.counters.cycles.tx += t.wrapping_sub(mark);
                mark = t;
                open_tx = false;
            }
            let count = self.ports[port as usize].rx(queue, &mut self.pool, &mut self.rx);
            let t1 = rdtsc();
            if count == 0 {
                self.counters.cycles.idle += t1.wrapping_sub(mark);
                self.counters.empty_polls += 1;
                mark = t1;
                continue;
            }
            self.counters.cycles.rx += t1.wrapping_sub(mark);
            self.counters.batch_sizes[batch_bucket(count)] += 1;
            for desc in self.rx.descs_mut() {
                desc.port = port;
            }
            let batch_len = self.rx.len();
            self.app.process(
                &mut Context {
                    pool: &mut self.pool,
                    keys: &mut self.keys[..batch_len],
                    now,
                    extra: &mut self.extra,
                },
                &mut self.rx,
            );
            let t2 = rdtsc();
            self.counters.cycles.process += t2.wrapping_sub(t1);
            self.distribute();
            self.distribute_extra();
            mark = t2;
            open_tx = true;
            received += count;
        }
        self.counters.rx_packets += received as u64;
        self.counters.iterations += 1;

        if received == 0 || mark.wrapping_sub(self.last_drain) >= self.config.drain_cycles {
            self.flush_all();
            self.last_drain = mark;
        }
        for port in &mut self.ports {
            port.poll(&mut self.pool);
        }
        let spent = rdtsc().wrapping_sub(mark);
        if received == 0 {
            self.counters.cycles.idle += spent;
            self.idle();
        } else {
            self.counters.cycles.tx += spent;
            self.empty_streak = 0;
        }
        if self.counters.iterations & (COMMAND_EVERY - 1) == 0 {
            self.serve_commands();
        }
        received
    }

    /// Sends the packets the app created (or the control plane injected) the way the batch
    /// went, after it.
    fn distribute_extra(&mut self) {
        if !self.extra.is_empty() {
            std::mem::swap(&mut self.rx, &mut self.extra);
            self.distribute();
            std::mem::swap(&mut self.rx, &mut self.extra);
        }
    }

    /// Answers the commands waiting in the request ring, if any. Frames injected for the
    /// pipeline wait in the (then empty) RX batch and go through the app as a batch of their
    /// own after the commands; frames injected for ports go out with the created packets.
    fn serve_commands(&mut self) {
        let Some(end) = &mut self.commands else {
            return;
        };
        if !end.pending() {
            return;
        }
        let Self {
            app,
            ports,
            counters,
            pool,
            rx,
            extra,
            ..
        } = self;
        let served = end.serve(|command| match command {
            Command::Ping => ReplyBody::Pong {
                iterations: counters.iterations,
            },
            Command::Snapshot => {
                let mut snapshot = WorkerSnapshot::default();
                fill_snapshot(&mut snapshot, counters, ports, app.as_ref(), pool);
                ReplyBody::Snapshot(Box::new(snapshot))
            }
            Command::App(command) => {
                let ctx = CommandContext {
                    ports,
                    now: rdtsc(),
                };
                ReplyBody::App {
                    app: app.name(),
                    reply: app.command(command, &ctx),
                }
            }
            Command::Inject(injection) => {
                let sent = inject(&injection, ports.len(), pool, rx, extra);
                ReplyBody::Injected { injection, sent }
            }
        });
        self.counters.commands += served as u64;
        if self.rx.is_empty() && self.extra.is_empty() {
            return;
        }
        if !self.rx.is_empty() {
            let count = self.rx.len().min(self.keys.len());
            self.app.process(
                &mut Context {
                    pool: &mut self.pool,
                    keys: &mut self.keys[..count],
                    now: rdtsc(),
                    extra: &mut self.extra,
                },
                &mut self.rx,
            );
            self.distribute();
        }
        self.distribute_extra();
        self.flush_all();
    }

    /// Hands every packet of the RX batch to its TX batch, or drops it; empties the RX batch.
    ///
    /// The common case of a cross-connect or of a single flow, where every packet of the batch
    /// leaves by the same port and that port's TX batch is empty, moves no packet at all: the
    /// two batches trade places (VPP hands whole frames of vectors to the next node the same
    /// way). Otherwise each packet's descriptor and metadata are copied to its TX batch.
    fn distribute(&mut self) {
        // Only batches of one capacity trade places: the batch of created packets (`extra`) is
        // larger than the RX and TX batches and must keep its own place, or the RX batch would
        // outgrow the key array.
        if let Some(out) = self.single_output()
            && self.tx[out].is_empty()
            && self.tx[out].capacity() == self.rx.capacity()
        {
            std::mem::swap(&mut self.rx, &mut self.tx[out]);
            if self.tx[out].is_full() {
                self.flush(out);
            }
            return;
        }
        for index in 0..self.rx.len() {
            let desc = self.rx.descs()[index];
            let meta = self.rx.meta()[index];
            let out = meta.out_port as usize;
            let reason = match meta.drop {
                Some(reason) => Some(reason),
                None if out >= self.tx.len() => Some(DropReason::NoOutput),
                None => None,
            };
            if let Some(reason) = reason {
                self.counters.drops[reason as usize] += 1;
                self.pool.release(desc.frame);
                continue;
            }
            self.tx[out].push_with_meta(desc, meta);
            if self.tx[out].is_full() {
                self.flush(out);
            }
        }
        self.rx.clear();
    }

    /// The port every packet of the RX batch leaves by, if there is one: none dropped, all with
    /// the same valid `out_port`.
    fn single_output(&self) -> Option<usize> {
        let meta = self.rx.meta();
        let out = meta.first()?.out_port;
        let same = meta.iter().fold(true, |same, m| {
            same & (m.drop.is_none() & (m.out_port == out))
        });
        (same && usize::from(out) < self.tx.len()).then_some(usize::from(out))
    }

    fn flush(&mut self, port: usize) {
        let batch = &mut self.tx[port];
        let sent = self.ports[port].tx(self.tx_queue[port], &mut self.pool, batch);
        self.counters.tx_packets += sent as u64;
        for desc in batch.descs() {
            self.pool.release(desc.frame);
        }
        self.counters.drops[DropReason::TxFull as usize] += batch.len() as u64;
        batch.clear();
    }

    fn flush_all(&mut self) {
        for port in 0..self.tx.len() {
            if !self.tx[port].is_empty() {
                self.flush(port);
            }
        }
    }

    fn idle(&mut self) {
        self.empty_streak = self.empty_streak.saturating_add(1);
        let Idle::Adaptive { spins, timeout } = self.config.idle else {
            return;
        };
        // Ports without a descriptor (capture files, memory cables) are slept on too: poll(2)
        // on no descriptor is a plain sleep of `timeout`, and a switch whose capture has been
        // read to its end must not spin a core for ever.
        if self.empty_streak < spins {
            return;
        }
        let backlog = self.ports.iter_mut().any(|port| port.tx_backlog());
        if backlog && self.empty_streak < spins.saturating_add(BACKLOG_SPINS) {
            return;
        }
        let timeout = if backlog {
            timeout.min(BACKLOG_SLEEP)
        } else {
            timeout
        };
        // Commands are answered before a sleep and right after it, not up to `timeout` late.
        self.serve_commands();
        let t0 = rdtsc();
        self.app.idle(t0);
        // A failed poll(2) only means the worker spins instead of sleeping this time.
        if let Ok(readiness) = wirespeed_io::wait::wait(&self.fds, timeout)
            && readiness.failed != 0
        {
            self.descriptors_failed(readiness.failed);
        }
        self.counters.sleeps += 1;
        self.counters.cycles.idle += rdtsc().wrapping_sub(t0);
        if let Some(commands) = &self.commands {
            commands.answer_doorbell();
        }
        self.serve_commands();
    }

    /// Tells the ports whose descriptors poll(2) found in error (bit i: `fds[i]`), and stops
    /// watching the descriptors of ports that then have a fault (their interface is gone): each
    /// would end every later sleep at once, and the worker would spin.
    fn descriptors_failed(&mut self, failed: u64) {
        for index in (0..self.fds.len().min(64)).rev() {
            if failed & (1 << index) == 0 {
                continue;
            }
            let (port, queue) = self.fd_owners[index];
            if port == DOORBELL {
                continue;
            }
            self.ports[port].descriptor_failed(queue);
            if self.ports[port].fault().is_some() {
                self.fds.remove(index);
                self.fd_owners.remove(index);
            }
        }
    }

    /// Runs until `stop` is set, publishing counters to `stats` every [`PUBLISH_EVERY`]
    /// iterations and after every sleep, then flushes and publishes once more. An idle worker
    /// sleeps for most of each iteration, so the count alone would leave its snapshot minutes
    /// old for a reader (a scrape, a rate line); after a sleep, publishing costs forwarding
    /// nothing.
    pub fn run(&mut self, stop: &AtomicBool, stats: &StatsCell) {
        let mut sleeps = self.counters.sleeps;
        while !stop.load(Ordering::Relaxed) {
            self.poll_once();
            if self.counters.iterations.is_multiple_of(PUBLISH_EVERY)
                || self.counters.sleeps != sleeps
            {
                sleeps = self.counters.sleeps;
                self.publish(stats, false);
            }
        }
        self.flush_all();
        self.publish(stats, true);
    }

    /// Runs until every port says its input is exhausted (capture files read to the end) or
    /// stopped by a fault (a corrupt or truncated record: nothing more will come from it) and
    /// an iteration moves nothing, or until `stop` is set. The caller reports the faults.
    pub fn run_to_end(&mut self, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            let received = self.poll_once();
            if received == 0 && self.ports.iter().all(|p| p.at_end() || p.fault().is_some()) {
                break;
            }
        }
        self.flush_all();
    }

    /// Copies the counters into `stats`; with `wait`, even if a reader holds the lock.
    pub fn publish(&self, stats: &StatsCell, wait: bool) {
        let guard = if wait {
            stats.lock().ok()
        } else {
            stats.try_lock().ok()
        };
        let Some(mut snapshot) = guard else { return };
        fill_snapshot(
            &mut snapshot,
            &self.counters,
            &self.ports,
            self.app.as_ref(),
            &self.pool,
        );
    }

    pub fn counters(&self) -> &WorkerCounters {
        &self.counters
    }

    pub fn ports(&self) -> &[Box<dyn Port>] {
        &self.ports
    }

    /// The worker's pool, e.g. for a test harness that injects frames through a memory link.
    pub fn pool_mut(&mut self) -> &mut FramePool {
        &mut self.pool
    }

    /// Stops: sends what is queued, takes back every frame the ports hold, and says whether
    /// every frame of the pool came back. Frames in flight in memory links that a test harness
    /// holds are counted as missing unless the harness released them first.
    /// What stopped a port before its end, one line per port that has a fault ("port NAME:
    /// why"): a capture that could not be written or read to its end.
    pub fn faults(&self) -> Vec<String> {
        port_faults(&self.ports).collect()
    }

    pub fn shutdown(&mut self) -> Conservation {
        self.flush_all();
        for port in &mut self.ports {
            port.release_all(&mut self.pool);
        }
        self.app.release_all(&mut self.pool);
        Conservation {
            total: self.pool.total(),
            free: self.pool.free_count(),
            missing: self.pool.total() - self.pool.free_count(),
            double_releases: self.pool.double_releases(),
        }
    }
}

/// Copies `injection`'s frame into frames of `pool`: one in `rx` (as received on its
/// `in_port`) for the pipeline, one in `extra` for each port it goes out of. Returns how many
/// copies were queued. Runs between batches, when `rx` is empty.
fn inject(
    injection: &Injection,
    ports: usize,
    pool: &mut FramePool,
    rx: &mut Batch,
    extra: &mut Batch,
) -> usize {
    // A frame from the controller has no port: an index past the last one, which no match on
    // `in_port` takes and every flood includes.
    let in_port = injection.in_port.unwrap_or(u16::MAX);
    let mut sent = 0;
    let mut copy = |out: Option<u16>, pool: &mut FramePool| {
        let Some(desc) = pool.alloc_copy(&injection.frame, 0) else {
            return;
        };
        let desc = Desc {
            port: in_port,
            ..desc
        };
        let queued = match out {
            Some(port) => extra.push_with_meta(
                desc,
                Meta {
                    out_port: port,
                    ..Meta::EMPTY
                },
            ),
            None => rx.push(desc),
        };
        if queued {
            sent += 1;
        } else {
            pool.release(desc.frame);
        }
    };
    let every = (0..ports).filter_map(|p| u16::try_from(p).ok());
    for output in &injection.outputs {
        match *output {
            Output::Port(port) if usize::from(port) < ports => copy(Some(port), pool),
            Output::InPort if usize::from(in_port) < ports => copy(Some(in_port), pool),
            Output::Port(_) | Output::InPort => {}
            Output::Flood => {
                for port in every.clone().filter(|&p| p != in_port) {
                    copy(Some(port), pool);
                }
            }
            Output::All => {
                for port in every.clone() {
                    copy(Some(port), pool);
                }
            }
            Output::Pipeline => copy(None, pool),
        }
    }
    sent
}

/// Copies a worker's counters, port statistics and app counters into `snapshot`, reusing its
/// allocations.
fn fill_snapshot(
    snapshot: &mut WorkerSnapshot,
    counters: &WorkerCounters,
    ports: &[Box<dyn Port>],
    app: &dyn App,
    pool: &FramePool,
) {
    snapshot.counters.clone_from(counters);
    snapshot.pool_free = pool.free_count();
    snapshot.pool_total = pool.total();
    snapshot.ports.clear();
    for port in ports {
        snapshot.ports.push((port.info().clone(), port.stats()));
    }
    snapshot.app.clear();
    app.counters(&mut snapshot.app);
    snapshot.tables.clear();
    app.tables(&mut snapshot.tables);
    snapshot.caches.clear();
    app.caches(&mut snapshot.caches);
    snapshot.faults.clear();
    snapshot.faults.extend(port_faults(ports));
}

/// "port NAME: why" for every port that has a fault.
fn port_faults(ports: &[Box<dyn Port>]) -> impl Iterator<Item = String> + '_ {
    ports.iter().filter_map(|port| {
        let fault = port.fault()?;
        Some(format!("port {}: {fault}", port.info().name))
    })
}

#[cfg(test)]
mod tests {
    use super::{BATCH_BUCKETS, batch_bucket};

    #[test]
    fn a_batch_falls_in_the_first_bucket_that_holds_it() {
        for count in 1..=wirespeed_packet::MAX_BATCH {
            let bucket = batch_bucket(count);
            assert!(count <= BATCH_BUCKETS[bucket], "{count} in {bucket}");
            assert!(
                bucket == 0 || count > BATCH_BUCKETS[bucket - 1],
                "{count} in {bucket}"
            );
        }
    }
}
