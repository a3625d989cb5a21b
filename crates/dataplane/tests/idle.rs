//! When an adaptive worker sleeps: after its empty polls, not while a port still has frames for
//! the kernel to take (unless the kernel keeps refusing them), and at the first empty poll when
//! it runs at SCHED_FIFO.

use std::io::PipeReader;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use wirespeed_dataplane::app::Xconnect;
use wirespeed_dataplane::worker::{Idle, Worker, WorkerConfig, WorkerPort};
use wirespeed_io::memory::{LinkConfig, MemoryPort, link};
use wirespeed_io::{Port, PortInfo, PortStats, QueueId};
use wirespeed_packet::{Batch, FramePool};

/// The idle timeout of the tests that do not wait for one.
const MS: Duration = Duration::from_millis(1);

/// A memory port with a receive descriptor that never turns readable (the read end of a pipe
/// nobody writes), which reports a TX backlog for its first `backlog_polls` questions.
struct Backlogged {
    inner: MemoryPort,
    never_readable: PipeReader,
    backlog_polls: u32,
}

impl Port for Backlogged {
    fn info(&self) -> &PortInfo {
        self.inner.info()
    }
    fn rx(&mut self, queue: QueueId, pool: &mut FramePool, batch: &mut Batch) -> usize {
        self.inner.rx(queue, pool, batch)
    }
    fn tx(&mut self, queue: QueueId, pool: &mut FramePool, batch: &mut Batch) -> usize {
        self.inner.tx(queue, pool, batch)
    }
    fn tx_backlog(&mut self) -> bool {
        let backlog = self.backlog_polls > 0;
        self.backlog_polls = self.backlog_polls.saturating_sub(1);
        backlog
    }
    fn rx_fd(&self, _queue: QueueId) -> Option<RawFd> {
        Some(self.never_readable.as_raw_fd())
    }
    fn frames_held(&self) -> usize {
        self.inner.frames_held()
    }
    fn release_all(&mut self, pool: &mut FramePool) {
        self.inner.release_all(pool)
    }
    fn stats(&self) -> PortStats {
        self.inner.stats()
    }
}

/// A cross-connect between a backlogged port and a plain one, idle with `spins` and a sleep of
/// at most `timeout`, plus the harness ends of both links (kept so the links stay up).
fn worker(
    spins: u32,
    timeout: Duration,
    backlog_polls: u32,
) -> (Worker, MemoryPort, MemoryPort, std::io::PipeWriter) {
    let (g0, p0) = link("g0", "p0", &LinkConfig::default());
    let (p1, g1) = link("p1", "g1", &LinkConfig::default());
    let (reader, writer) = std::io::pipe().unwrap();
    let p0 = Backlogged {
        inner: p0,
        never_readable: reader,
        backlog_polls,
    };
    let ports = vec![
        WorkerPort {
            port: Box::new(p0),
            rx_queues: vec![0],
            tx_queue: 0,
        },
        WorkerPort {
            port: Box::new(p1),
            rx_queues: vec![0],
            tx_queue: 0,
        },
    ];
    let config = WorkerConfig {
        batch_size: 32,
        drain_cycles: 0,
        idle: Idle::Adaptive { spins, timeout },
    };
    let worker = Worker::new(
        config,
        FramePool::new(256, 2048).unwrap(),
        ports,
        Box::new(Xconnect::new(&[(0, 1)], None)),
    );
    (worker, g0, g1, writer)
}

#[test]
fn an_adaptive_worker_spins_its_empty_polls_first_then_sleeps() {
    let (mut worker, _g0, _g1, _writer) = worker(4, MS, 0);
    for _ in 0..3 {
        worker.poll_once();
    }
    assert_eq!(worker.counters().sleeps, 0, "slept within its 4 spins");
    worker.poll_once();
    assert_eq!(worker.counters().sleeps, 1);
    assert_eq!(
        worker.counters().empty_polls,
        4 * 2,
        "two ports polled per iteration"
    );
}

#[test]
fn a_worker_keeps_kicking_while_a_port_has_frames_for_the_kernel() {
    let (mut worker, _g0, _g1, _writer) = worker(1, MS, 5);
    for _ in 0..5 {
        worker.poll_once();
    }
    assert_eq!(worker.counters().sleeps, 0, "slept with a TX backlog");
    worker.poll_once();
    assert_eq!(worker.counters().sleeps, 1, "the backlog is gone: sleep");
}

#[test]
fn a_backlog_the_kernel_keeps_refusing_does_not_keep_the_worker_awake() {
    // A worker at SCHED_FIFO that kicked forever would starve the thread that drains the peer.
    let idle_timeout = Duration::from_secs(10);
    let (mut worker, _g0, _g1, _writer) = worker(1, idle_timeout, u32::MAX);
    for _ in 0..64 {
        worker.poll_once();
    }
    assert_eq!(
        worker.counters().sleeps,
        0,
        "64 more kicks before giving up"
    );
    let started = std::time::Instant::now();
    for _ in 0..3 {
        worker.poll_once();
    }
    assert_eq!(worker.counters().sleeps, 3, "then a sleep per empty poll");
    assert!(
        started.elapsed() < idle_timeout,
        "the backlog is kicked again after a short sleep, not after the idle timeout"
    );
}

#[test]
fn a_realtime_worker_sleeps_at_its_first_empty_poll() {
    let (mut worker, _g0, _g1, _writer) = worker(64, MS, 0);
    worker.sleep_at_first_empty_poll();
    worker.poll_once();
    assert_eq!(worker.counters().sleeps, 1);
}
