//! The cross-connect over memory ports: packets in, packets out, byte for byte, and every frame
//! of the pool accounted for after every scenario.

use wirespeed_dataplane::app::Xconnect;
use wirespeed_dataplane::stage::Task;
use wirespeed_dataplane::worker::{Idle, StatsCell, Worker, WorkerConfig, WorkerPort};
use wirespeed_io::memory::{LinkConfig, MemoryPort, link};
use wirespeed_io::wrap::{FaultConfig, Faulty};
use wirespeed_io::{Port, PortStats};
use wirespeed_packet::{DropReason, FramePool, MAX_VLAN_TAGS};
use wirespeed_tester::generator::{Template, TemplateConfig};
use wirespeed_testkit::ports::{receive, send};

/// A worker cross-connecting p0 and p1, and the harness ends g0 (wired to p0) and g1 (to p1).
struct Rig {
    worker: Worker,
    g0: MemoryPort,
    g1: MemoryPort,
}

fn rig_with(p0: Box<dyn Port>, g0: MemoryPort, out: &LinkConfig, task: Option<Task>) -> Rig {
    rig_draining(p0, g0, out, task, 0)
}

/// As [`rig_with`], with partly filled TX batches sent after `drain_cycles` (or when an
/// iteration receives nothing).
fn rig_draining(
    p0: Box<dyn Port>,
    g0: MemoryPort,
    out: &LinkConfig,
    task: Option<Task>,
    drain_cycles: u64,
) -> Rig {
    let (p1, g1) = link("p1", "g1", out);
    let ports = vec![
        WorkerPort {
            port: p0,
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
        drain_cycles,
        idle: Idle::Busy,
    };
    let pool = FramePool::new(4096, 2048).unwrap();
    let worker = Worker::new(
        config,
        pool,
        ports,
        Box::new(Xconnect::new(&[(0, 1)], task)),
    );
    Rig { worker, g0, g1 }
}

fn rig() -> Rig {
    let (g0, p0) = link("g0", "p0", &LinkConfig::default());
    rig_with(Box::new(p0), g0, &LinkConfig::default(), None)
}

impl Rig {
    /// Runs the worker until it has nothing left to do.
    fn settle(&mut self) {
        for _ in 0..1000 {
            if self.worker.poll_once() == 0 && self.worker.poll_once() == 0 {
                return;
            }
        }
    }

    /// Releases what the harness ends hold, shuts the worker down, asserts conservation.
    fn finish(mut self) {
        let pool = self.worker.pool_mut();
        self.g0.release_all(pool);
        self.g1.release_all(pool);
        let conservation = self.worker.shutdown();
        assert!(conservation.holds(), "{conservation:?}");
        assert_eq!(conservation.free, conservation.total);
    }
}

fn frames(count: u32, size: u16, flows: u32) -> Vec<Vec<u8>> {
    let template = Template::new(&TemplateConfig {
        frame_size: size,
        flows,
        ..TemplateConfig::default()
    })
    .unwrap();
    (0..count).map(|i| template.frame(i)).collect()
}

#[test]
fn every_frame_crosses_unchanged_both_ways() {
    let mut rig = rig();
    let forward = frames(500, 64, 7);
    let backward = frames(300, 1518, 3);
    for chunk in forward.chunks(100) {
        assert_eq!(send(&mut rig.g0, rig.worker.pool_mut(), chunk), chunk.len());
        rig.settle();
    }
    assert_eq!(
        send(&mut rig.g1, rig.worker.pool_mut(), &backward),
        backward.len()
    );
    rig.settle();
    assert_eq!(receive(&mut rig.g1, rig.worker.pool_mut()), forward);
    assert_eq!(receive(&mut rig.g0, rig.worker.pool_mut()), backward);
    let counters = rig.worker.counters().clone();
    assert_eq!(counters.rx_packets, 800);
    assert_eq!(counters.tx_packets, 800);
    assert_eq!(counters.dropped(), 0);
    rig.finish();
}

#[test]
fn malformed_frames_are_dropped_with_their_reason_and_the_rest_pass() {
    let mut rig = rig();
    let good = frames(3, 64, 1);
    let mut bad_ihl = good[0].clone();
    bad_ihl[14] = 0x44;
    let runt = good[0][..10].to_vec();
    let mut too_many_tags = good[0][..12].to_vec();
    for _ in 0..=MAX_VLAN_TAGS {
        too_many_tags.extend_from_slice(&[0x81, 0x00, 0x00, 0x01]);
    }
    too_many_tags.extend_from_slice(&good[0][12..]);
    let input = vec![
        good[0].clone(),
        bad_ihl,
        good[1].clone(),
        runt,
        too_many_tags,
        good[2].clone(),
    ];
    send(&mut rig.g0, rig.worker.pool_mut(), &input);
    rig.settle();
    assert_eq!(receive(&mut rig.g1, rig.worker.pool_mut()), good);
    let drops = rig.worker.counters().drops;
    assert_eq!(drops[DropReason::BadIpv4Header as usize], 1);
    assert_eq!(drops[DropReason::Truncated as usize], 1);
    assert_eq!(drops[DropReason::VlanTooDeep as usize], 1);
    assert_eq!(rig.worker.counters().dropped(), 3);
    rig.finish();
}

/// A partly filled RX batch may become the TX batch whole (no TX batch waiting), the next one
/// is appended behind it, and a batch with a drop in it goes packet by packet: the order on
/// the wire is the order of arrival in every case.
#[test]
fn partial_batches_leave_in_arrival_order() {
    let (g0, p0) = link("g0", "p0", &LinkConfig::default());
    let mut rig = rig_draining(Box::new(p0), g0, &LinkConfig::default(), None, u64::MAX);
    let input = frames(70, 64, 5);
    send(&mut rig.g0, rig.worker.pool_mut(), &input[..10]);
    assert_eq!(rig.worker.poll_once(), 10);
    // Not full and not drained yet: nothing has left.
    assert!(receive(&mut rig.g1, rig.worker.pool_mut()).is_empty());
    send(&mut rig.g0, rig.worker.pool_mut(), &input[10..40]);
    assert_eq!(rig.worker.poll_once(), 30);
    let mut runt = input[40].clone();
    runt.truncate(12);
    send(&mut rig.g0, rig.worker.pool_mut(), &[runt]);
    send(&mut rig.g0, rig.worker.pool_mut(), &input[41..]);
    rig.settle();
    let mut expected = input[..40].to_vec();
    expected.extend_from_slice(&input[41..]);
    assert_eq!(receive(&mut rig.g1, rig.worker.pool_mut()), expected);
    let counters = rig.worker.counters().clone();
    assert_eq!(counters.tx_packets, 69);
    assert_eq!(counters.drops[DropReason::Truncated as usize], 1);
    rig.finish();
}

#[test]
fn a_full_output_ring_drops_and_counts_instead_of_blocking() {
    let (g0, p0) = link("g0", "p0", &LinkConfig::default());
    let small = LinkConfig {
        ring_size: 16,
        ..LinkConfig::default()
    };
    let mut rig = rig_with(Box::new(p0), g0, &small, None);
    let input = frames(100, 64, 1);
    send(&mut rig.g0, rig.worker.pool_mut(), &input);
    rig.settle();
    let out = receive(&mut rig.g1, rig.worker.pool_mut());
    assert_eq!(out.len(), 16);
    assert_eq!(out[..], input[..16]);
    let counters = rig.worker.counters().clone();
    assert_eq!(counters.drops[DropReason::TxFull as usize], 84);
    assert_eq!(counters.tx_packets, 16);
    let stats: PortStats = rig.worker.ports()[1].stats();
    assert_eq!(stats.tx_refused, 84);
    rig.finish();
}

#[test]
fn fault_injection_keeps_the_pool_whole() {
    for (name, faults) in [
        (
            "drop",
            FaultConfig {
                drop: 0.3,
                ..FaultConfig::default()
            },
        ),
        (
            "truncate",
            FaultConfig {
                truncate: 0.3,
                ..FaultConfig::default()
            },
        ),
        (
            "corrupt",
            FaultConfig {
                corrupt: 0.3,
                ..FaultConfig::default()
            },
        ),
        (
            "duplicate",
            FaultConfig {
                duplicate: 0.3,
                ..FaultConfig::default()
            },
        ),
        (
            "reorder",
            FaultConfig {
                reorder: 0.3,
                ..FaultConfig::default()
            },
        ),
        (
            "everything",
            FaultConfig {
                drop: 0.1,
                truncate: 0.1,
                corrupt: 0.1,
                duplicate: 0.1,
                reorder: 0.1,
                ..FaultConfig::default()
            },
        ),
    ] {
        let (g0, p0) = link("g0", "p0", &LinkConfig::default());
        let faulty = Faulty::new(p0, FaultConfig { seed: 7, ..faults });
        let mut rig = rig_with(Box::new(faulty), g0, &LinkConfig::default(), None);
        let input = frames(600, 128, 5);
        for chunk in input.chunks(200) {
            send(&mut rig.g0, rig.worker.pool_mut(), chunk);
            rig.settle();
        }
        let out = receive(&mut rig.g1, rig.worker.pool_mut());
        let counters = rig.worker.counters().clone();
        assert_eq!(
            counters.rx_packets,
            counters.tx_packets + counters.dropped(),
            "{name}"
        );
        assert_eq!(out.len() as u64, counters.tx_packets, "{name}");
        match name {
            "drop" => assert!(out.len() < 600 && out.len() > 300, "{name}: {}", out.len()),
            "duplicate" => assert!(out.len() > 600, "{name}: {}", out.len()),
            "reorder" => {
                assert_eq!(out.len(), 600);
                assert_ne!(out, input, "reorder changed nothing");
                let mut sorted_out = out.clone();
                let mut sorted_in = input.clone();
                sorted_out.sort();
                sorted_in.sort();
                assert_eq!(sorted_out, sorted_in, "reorder must only reorder");
            }
            _ => {}
        }
        rig.finish();
    }
}

#[test]
fn the_emulated_task_runs_once_per_forwarded_packet() {
    let (g0, p0) = link("g0", "p0", &LinkConfig::default());
    let mut rig = rig_with(
        Box::new(p0),
        g0,
        &LinkConfig::default(),
        Some(Task::new(100, 64 * 1024, 3)),
    );
    let input = frames(200, 64, 1);
    send(&mut rig.g0, rig.worker.pool_mut(), &input);
    rig.settle();
    assert_eq!(receive(&mut rig.g1, rig.worker.pool_mut()), input);
    let cell = StatsCell::default();
    rig.worker.publish(&cell, true);
    let app = cell.into_inner().unwrap().app;
    assert!(app.contains(&("task.packets", 200)), "{app:?}");
    rig.finish();
}

#[test]
fn the_shared_rig_cross_connects_too() {
    let mut rig = wirespeed_testkit::rig::Rig::new(Box::new(Xconnect::new(&[(0, 1)], None)), 2, 32);
    let input = frames(100, 64, 4);
    let out = rig.exchange(0, &input);
    assert_eq!(out[1], input);
    assert!(out[0].is_empty());
    assert!(rig.finish().holds());
}
