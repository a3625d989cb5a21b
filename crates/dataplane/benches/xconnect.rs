//! The I/O-free ceiling: the cross-connect over memory ports, parse included.
//!
//! Frames circulate: the worker receives a batch on p0, parses it, and sends it out of p1; the
//! harness moves the descriptors that arrive on g1 back into g0 (no frame is rewritten, so the
//! parse stage keeps seeing valid frames). `rings_only` moves the same descriptors through the
//! same kind of rings with no worker, so `worker - rings_only` is the worker's own cost per packet.
//!
//! `loop` is the cross-connect with nothing else in the measurement: the worker's two ports are
//! the two ends of one memory cable, so what it transmits on p1 it receives again on p0. Each
//! packet crosses one RX ring and one TX ring per iteration, as in `worker`, but no harness
//! moves it back (in `worker` the recirculation costs another RX and TX, about half of
//! `rings_only`). This is the I/O-free ceiling the foundation's goal is stated for.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use wirespeed_dataplane::app::Xconnect;
use wirespeed_dataplane::worker::{Idle, Worker, WorkerConfig, WorkerPort};
use wirespeed_io::Port;
use wirespeed_io::memory::{LinkConfig, MemoryPort, link};
use wirespeed_packet::{Batch, FramePool, MAX_BATCH};
use wirespeed_tester::generator::{Template, TemplateConfig};
use wirespeed_testkit::ports::send;

struct Rig {
    worker: Worker,
    g0: MemoryPort,
    g1: MemoryPort,
    carry: Batch,
}

/// A busy-polling xconnect worker from p0 to p1 (p1 only transmits).
fn xconnect_worker(batch: usize, pool: FramePool, p0: MemoryPort, p1: MemoryPort) -> Worker {
    let ports = vec![
        WorkerPort {
            port: Box::new(p0),
            rx_queues: vec![0],
            tx_queue: 0,
        },
        WorkerPort {
            port: Box::new(p1),
            rx_queues: vec![],
            tx_queue: 0,
        },
    ];
    let worker_config = WorkerConfig {
        batch_size: batch,
        drain_cycles: u64::MAX,
        idle: Idle::Busy,
    };
    Worker::new(
        worker_config,
        pool,
        ports,
        Box::new(Xconnect::new(&[(0, 1)], None)),
    )
}

const RING_SIZE: LinkConfig = LinkConfig {
    queues: 1,
    ring_size: 4096,
    mtu: 1500,
};

fn rig(batch: usize, flows: u32) -> Rig {
    let (mut g0, p0) = link("g0", "p0", &RING_SIZE);
    let (p1, g1) = link("p1", "g1", &RING_SIZE);
    let mut pool = FramePool::new(8192, 2048).expect("pool");
    send(&mut g0, &mut pool, &frames(flows));
    Rig {
        worker: xconnect_worker(batch, pool, p0, p1),
        g0,
        g1,
        carry: Batch::new(MAX_BATCH),
    }
}

/// 1024 frames of 64 bytes over `flows` flows.
fn frames(flows: u32) -> Vec<Vec<u8>> {
    let template = Template::new(&TemplateConfig {
        flows,
        ..TemplateConfig::default()
    })
    .expect("template");
    (0..1024).map(|i| template.frame(i)).collect()
}

/// A worker whose p1 is cabled back to its p0, with 1024 frames in flight.
fn looped(batch: usize, flows: u32) -> Worker {
    let (p0, mut p1) = link("p0", "p1", &RING_SIZE);
    let mut pool = FramePool::new(8192, 2048).expect("pool");
    send(&mut p1, &mut pool, &frames(flows));
    xconnect_worker(batch, pool, p0, p1)
}

impl Rig {
    /// Moves what reached g1 back into g0.
    fn recirculate(&mut self) {
        let pool = self.worker.pool_mut();
        self.g1.rx(0, pool, &mut self.carry);
        self.g0.tx(0, pool, &mut self.carry);
    }
}

fn xconnect(c: &mut Criterion) {
    let mut group = c.benchmark_group("xconnect_64B");
    for batch in [8usize, 32, 64, 256] {
        group.throughput(Throughput::Elements(batch as u64));
        group.bench_with_input(BenchmarkId::new("worker", batch), &batch, |b, &batch| {
            let mut rig = rig(batch, 1);
            b.iter(|| {
                rig.worker.poll_once();
                rig.recirculate();
            });
        });
        group.bench_with_input(BenchmarkId::new("loop", batch), &batch, |b, &batch| {
            let mut worker = looped(batch, 1);
            b.iter(|| worker.poll_once());
        });
        group.bench_with_input(
            BenchmarkId::new("rings_only", batch),
            &batch,
            |b, &batch| {
                // The same ring traffic as the worker's rx and tx plus the recirculation, with no
                // worker: what the memory ports themselves cost.
                let (mut h0, mut q0) = link("h0", "q0", &RING_SIZE);
                let (mut q1, mut h1) = link("q1", "h1", &RING_SIZE);
                let pool = &mut FramePool::new(8192, 2048).expect("pool");
                send(&mut h0, pool, &frames(1));
                let mut carry = Batch::new(MAX_BATCH);
                let mut moved = Batch::new(batch);
                b.iter(|| {
                    q0.rx(0, pool, &mut moved);
                    q1.tx(0, pool, &mut moved);
                    h1.rx(0, pool, &mut carry);
                    h0.tx(0, pool, &mut carry);
                });
            },
        );
    }
    group.finish();
}

criterion_group!(benches, xconnect);
criterion_main!(benches);
