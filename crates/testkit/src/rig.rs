//! A worker over in-memory ports with the harness holding the other end of every link: the
//! standard setup for byte-for-byte tests and pipeline benchmarks of an app.
//!
//! Port *i* of the worker is wired to harness end *i*: what the harness sends on end *i* the
//! worker receives on port *i*, and what the worker transmits on port *i* arrives on end *i*.

use wirespeed_dataplane::app::App;
use wirespeed_dataplane::command::{self, ControlEnd};
use wirespeed_dataplane::worker::{
    Conservation, Idle, StatsCell, Worker, WorkerConfig, WorkerPort,
};
use wirespeed_io::Port;
use wirespeed_io::memory::{LinkConfig, MemoryPort, link};
use wirespeed_packet::{Batch, FramePool, MAX_BATCH};

/// A worker running `app` over memory ports, and the harness ends of their links.
pub struct Rig {
    pub worker: Worker,
    /// Harness end of port *i*.
    pub ends: Vec<MemoryPort>,
    carry: Batch,
}

impl Rig {
    /// `ports` ports, batches of `batch`, rings of 4096, a pool of 16384 frames.
    pub fn new(app: Box<dyn App>, ports: usize, batch: usize) -> Rig {
        Self::with_link(
            app,
            ports,
            batch,
            &LinkConfig {
                ring_size: 4096,
                ..LinkConfig::default()
            },
        )
    }

    /// As [`Rig::new`] with links of the given geometry.
    pub fn with_link(app: Box<dyn App>, ports: usize, batch: usize, config: &LinkConfig) -> Rig {
        let mut worker_ports = Vec::new();
        let mut ends = Vec::new();
        for i in 0..ports {
            let (end, port) = link(&format!("g{i}"), &format!("p{i}"), config);
            ends.push(end);
            worker_ports.push(WorkerPort {
                port: Box::new(port),
                rx_queues: vec![0],
                tx_queue: 0,
            });
        }
        let worker_config = WorkerConfig {
            batch_size: batch,
            drain_cycles: 0,
            idle: Idle::Busy,
        };
        let pool = FramePool::new(16384, 2048).expect("pool for the rig");
        let worker = Worker::new(worker_config, pool, worker_ports, app);
        Rig {
            worker,
            ends,
            carry: Batch::new(MAX_BATCH),
        }
    }

    /// Sends `frames` into the worker's port `port`; returns how many the link took.
    pub fn send(&mut self, port: usize, frames: &[Vec<u8>]) -> usize {
        crate::ports::send(&mut self.ends[port], self.worker.pool_mut(), frames)
    }

    /// Everything the worker transmitted on port `port` so far.
    pub fn receive(&mut self, port: usize) -> Vec<Vec<u8>> {
        crate::ports::receive(&mut self.ends[port], self.worker.pool_mut())
    }

    /// Gives the worker a command channel and returns the control thread's end of it.
    pub fn commands(&mut self) -> ControlEnd {
        let (control, worker) = command::channel(command::RING_CAPACITY);
        self.worker.attach_commands(worker);
        control
    }

    /// Runs the worker until two iterations in a row receive nothing.
    pub fn settle(&mut self) {
        for _ in 0..10_000 {
            if self.worker.poll_once() == 0 && self.worker.poll_once() == 0 {
                return;
            }
        }
    }

    /// Sends `frames` on `port`, runs the worker, and returns what came out of every port.
    pub fn exchange(&mut self, port: usize, frames: &[Vec<u8>]) -> Vec<Vec<Vec<u8>>> {
        self.send(port, frames);
        self.settle();
        (0..self.ends.len()).map(|p| self.receive(p)).collect()
    }

    /// Moves what arrived on harness end `from` back into harness end `to` without touching the
    /// frames: keeps traffic circulating in a benchmark.
    pub fn recirculate(&mut self, from: usize, to: usize) {
        let pool = self.worker.pool_mut();
        self.ends[from].rx(0, pool, &mut self.carry);
        self.ends[to].tx(0, pool, &mut self.carry);
        for desc in self.carry.descs() {
            pool.release(desc.frame);
        }
        self.carry.clear();
    }

    /// The app's counters as the worker publishes them.
    pub fn app_counters(&self) -> Vec<(&'static str, u64)> {
        let cell = StatsCell::default();
        self.worker.publish(&cell, true);
        cell.into_inner().map(|s| s.app).unwrap_or_default()
    }

    /// Releases what the harness ends hold and shuts the worker down; returns the pool check.
    pub fn finish(mut self) -> Conservation {
        let pool = self.worker.pool_mut();
        for end in &mut self.ends {
            end.release_all(pool);
        }
        self.worker.shutdown()
    }
}
