//! A deterministic driver for instruction-count profiling of the I/O-free ceiling.
//!
//! The criterion benchmark (`benches/xconnect.rs`) picks its own iteration counts, so under
//! `valgrind --tool=callgrind` its totals vary from run to run. This driver runs the same rig a
//! fixed number of times, so two runs with different counts give the cost per packet exactly:
//!
//! ```text
//! cargo build --release -p wirespeed-dataplane --example xconnect_profile
//! for n in 1000 2000; do valgrind --tool=callgrind --callgrind-out-file=cg.$n \
//!     target/release/examples/xconnect_profile worker 32 $n; done
//! # instructions per packet = (total(2000) - total(1000)) / (1000 * 32)
//! ```
//!
//! Modes: `worker <batch> <iterations>` (one `poll_once` and a recirculation per iteration, as
//! `xconnect_64B/worker`), `loop <batch> <iterations>` (the worker's ports cabled to each other,
//! as `xconnect_64B/loop`), `rings <batch> <iterations>` (as `xconnect_64B/rings_only`) and
//! `parse <iterations>` (the parse stage over a batch of 32 IPv4/UDP frames, as the packet
//! crate's `parse/ipv4_udp`).

use std::hint::black_box;

use wirespeed_dataplane::app::Xconnect;
use wirespeed_dataplane::worker::{Idle, Worker, WorkerConfig, WorkerPort};
use wirespeed_io::Port;
use wirespeed_io::memory::{LinkConfig, MemoryPort, link};
use wirespeed_packet::cpu::rdtsc;
use wirespeed_packet::{Batch, FlowKey, FramePool, MAX_BATCH, Meta, parse};
use wirespeed_tester::generator::{Template, TemplateConfig};
use wirespeed_testkit::ports::send;

/// 1024 frames of 64 bytes (60 without the FCS) of one flow.
fn frames() -> Vec<Vec<u8>> {
    let template = Template::new(&TemplateConfig::default()).expect("template");
    (0..1024).map(|i| template.frame(i)).collect()
}

/// A busy-polling xconnect worker from port 0 to port 1.
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
    let app = Box::new(Xconnect::new(&[(0, 1)], None));
    Worker::new(worker_config, pool, ports, app)
}

fn worker(batch: usize, iterations: u64) {
    let config = LinkConfig {
        ring_size: 4096,
        ..LinkConfig::default()
    };
    let (mut g0, p0) = link("g0", "p0", &config);
    let (p1, mut g1) = link("p1", "g1", &config);
    let mut pool = FramePool::new(8192, 2048).expect("pool");
    send(&mut g0, &mut pool, &frames());
    let mut worker = xconnect_worker(batch, pool, p0, p1);
    let mut carry = Batch::new(MAX_BATCH);
    let t0 = rdtsc();
    for _ in 0..iterations {
        worker.poll_once();
        let pool = worker.pool_mut();
        g1.rx(0, pool, &mut carry);
        g0.tx(0, pool, &mut carry);
    }
    stage_report(&worker, rdtsc().wrapping_sub(t0));
}

/// The worker's p1 cabled back to its p0: no harness in the loop (`xconnect_64B/loop`).
fn looped(batch: usize, iterations: u64) {
    let config = LinkConfig {
        ring_size: 4096,
        ..LinkConfig::default()
    };
    let (p0, mut p1) = link("p0", "p1", &config);
    let mut pool = FramePool::new(8192, 2048).expect("pool");
    send(&mut p1, &mut pool, &frames());
    let mut worker = xconnect_worker(batch, pool, p0, p1);
    let t0 = rdtsc();
    for _ in 0..iterations {
        worker.poll_once();
    }
    stage_report(&worker, rdtsc().wrapping_sub(t0));
}

/// Prints the packets moved, the cycles per packet, and the worker's own split by stage.
fn stage_report(worker: &Worker, cycles: u64) {
    let counters = worker.counters();
    report(cycles, counters.tx_packets);
    let per_packet = |c: u64| c as f64 / counters.rx_packets.max(1) as f64;
    let c = counters.cycles;
    println!(
        "worker cycles per packet: rx {:.1}, process {:.1}, tx {:.1}, idle {:.1}",
        per_packet(c.rx),
        per_packet(c.process),
        per_packet(c.tx),
        per_packet(c.idle)
    );
}

fn rings(batch: usize, iterations: u64) {
    let config = LinkConfig {
        ring_size: 4096,
        ..LinkConfig::default()
    };
    let (mut h0, mut q0) = link("h0", "q0", &config);
    let (mut q1, mut h1) = link("q1", "h1", &config);
    let pool = &mut FramePool::new(8192, 2048).expect("pool");
    send(&mut h0, pool, &frames());
    let mut carry = Batch::new(MAX_BATCH);
    let mut moved = Batch::new(batch);
    let t0 = rdtsc();
    for _ in 0..iterations {
        q0.rx(0, pool, &mut moved);
        q1.tx(0, pool, &mut moved);
        h1.rx(0, pool, &mut carry);
        h0.tx(0, pool, &mut carry);
    }
    report(rdtsc().wrapping_sub(t0), q1.stats().tx_packets);
}

fn parse_batch(iterations: u64) {
    let frames: Vec<Vec<u8>> = frames().into_iter().take(32).collect();
    let mut meta = [Meta::EMPTY; 32];
    let mut keys = [FlowKey::EMPTY; 32];
    let mut parsed = 0u64;
    let t0 = rdtsc();
    for _ in 0..iterations {
        for ((frame, meta), key) in frames.iter().zip(&mut meta).zip(&mut keys) {
            parsed += u64::from(black_box(parse(black_box(frame), 0, meta, key)).is_ok());
        }
    }
    report(rdtsc().wrapping_sub(t0), parsed);
}

/// Prints the packets moved and the TSC cycles per packet (a rough figure on a shared machine:
/// take the lowest of several runs; criterion gives the real one).
fn report(cycles: u64, packets: u64) {
    let per_packet = cycles as f64 / packets.max(1) as f64;
    println!("packets: {packets}, TSC cycles per packet: {per_packet:.1}");
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let number = |i: usize, default: u64| {
        args.get(i)
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(default)
    };
    match args.first().map(String::as_str) {
        Some("worker") => worker(number(1, 32) as usize, number(2, 1000)),
        Some("loop") => looped(number(1, 32) as usize, number(2, 1000)),
        Some("rings") => rings(number(1, 32) as usize, number(2, 1000)),
        Some("parse") => parse_batch(number(1, 1000)),
        _ => eprintln!(
            "usage: xconnect_profile worker|loop|rings <batch> <iterations> | parse <iterations>"
        ),
    }
}
