//! The learning bridge over memory ports: known-unicast traffic to random learned
//! destinations, with 1k and 100k MACs in the table, beside the cross-connect measured in the
//! same run (the ratio between them is the figure to quote, not the absolute times).
//!
//! Setup: two access ports in one VLAN. The destinations are learned on port 1 first (a
//! broadcast from each); then 1024 frames of 64 bytes from one source on port 0, each to a
//! random learned destination, circulate: the worker forwards a batch of 32 from p0 to p1, and
//! the harness moves what arrived on g1 back into g0, writing a new random learned destination
//! into each frame on the way (so the lookups spread over the whole table, not over the 1024
//! frames in flight; access to access needs no tag rewrite, so the frames stay valid). The
//! xconnect case circulates the same frames through the same rig with the same rewriting, so
//! the harness costs the same in every case.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use wirespeed_dataplane::app::Xconnect;
use wirespeed_dataplane::app::bridge::{Bridge, BridgeConfig, BridgePort};
use wirespeed_dataplane::stage::vlan::VlanMode;
use wirespeed_io::Port;
use wirespeed_packet::wire::EthernetAddress;
use wirespeed_packet::{Batch, MAX_BATCH};
use wirespeed_testkit::frames::FrameBuilder;
use wirespeed_testkit::rig::Rig;

const BATCH: usize = 32;
const FRAMES: usize = 1024;

fn host(n: u32) -> EthernetAddress {
    let b = n.to_be_bytes();
    EthernetAddress([0x02, 0x10, b[0], b[1], b[2], b[3]])
}

/// A 64-byte frame on the wire (60 without FCS).
fn frame(src: EthernetAddress, dst: EthernetAddress) -> Vec<u8> {
    FrameBuilder::ipv4_udp()
        .macs(src, dst)
        .frame_len(60)
        .build()
}

fn xconnect_rig() -> Rig {
    let mut rig = Rig::new(Box::new(Xconnect::new(&[(0, 1)], None)), 2, BATCH);
    let frames: Vec<Vec<u8>> = (0..FRAMES as u32)
        .map(|i| frame(host(0), host(i)))
        .collect();
    rig.send(0, &frames);
    rig
}

fn bridge_rig(macs: u32) -> Rig {
    let bridge = Bridge::new(BridgeConfig {
        ports: (0..2)
            .map(|port| BridgePort {
                port,
                mode: VlanMode::Access(1),
            })
            .collect(),
        mac_capacity: macs as usize + 16,
        age_seconds: 3600.0,
    })
    .expect("bridge");
    let mut rig = Rig::new(Box::new(bridge), 2, BATCH);
    // Learn the destinations on port 1 and the source on port 0.
    let learn: Vec<Vec<u8>> = (1..=macs)
        .map(|i| frame(host(i), EthernetAddress::BROADCAST))
        .collect();
    for chunk in learn.chunks(2000) {
        rig.exchange(1, chunk);
    }
    rig.exchange(0, &[frame(host(0), EthernetAddress::BROADCAST)]);
    let learned = rig
        .app_counters()
        .iter()
        .find(|(name, _)| *name == "learn.learned")
        .map_or(0, |(_, value)| *value);
    assert_eq!(
        learned,
        u64::from(macs) + 1,
        "every host learned: {:?} {:?}",
        rig.app_counters(),
        rig.worker.counters()
    );
    let mut destinations = Destinations::new(macs);
    let frames: Vec<Vec<u8>> = (0..FRAMES)
        .map(|_| frame(host(0), destinations.next()))
        .collect();
    rig.send(0, &frames);
    rig
}

/// Random learned destinations.
struct Destinations {
    state: u64,
    macs: u32,
}

impl Destinations {
    fn new(macs: u32) -> Self {
        Destinations {
            state: 0x2545_f491_4f6c_dd1d,
            macs,
        }
    }

    fn next(&mut self) -> EthernetAddress {
        let x = &mut self.state;
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        host(1 + (*x % u64::from(self.macs)) as u32)
    }
}

/// Moves what arrived on g1 back into g0, giving each frame a new destination.
fn circulate(rig: &mut Rig, carry: &mut Batch, destinations: &mut Destinations) {
    let pool = rig.worker.pool_mut();
    rig.ends[1].rx(0, pool, carry);
    for desc in carry.descs() {
        let start = usize::from(desc.offset);
        if let Some(dst) = pool.frame_mut(desc.frame).get_mut(start..start + 6) {
            dst.copy_from_slice(&destinations.next().0);
        }
    }
    rig.ends[0].tx(0, pool, carry);
    for desc in carry.descs() {
        pool.release(desc.frame);
    }
    carry.clear();
}

fn bridge(c: &mut Criterion) {
    let mut group = c.benchmark_group("bridge_64B");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.bench_function(BenchmarkId::new("xconnect", BATCH), |b| {
        let mut rig = xconnect_rig();
        let (mut carry, mut destinations) = (Batch::new(MAX_BATCH), Destinations::new(100_000));
        b.iter(|| {
            rig.worker.poll_once();
            circulate(&mut rig, &mut carry, &mut destinations);
        });
    });
    for (name, macs) in [("unicast_1k", 1_000u32), ("unicast_100k", 100_000)] {
        group.bench_function(BenchmarkId::new(name, BATCH), |b| {
            let mut rig = bridge_rig(macs);
            let (mut carry, mut destinations) = (Batch::new(MAX_BATCH), Destinations::new(macs));
            b.iter(|| {
                rig.worker.poll_once();
                circulate(&mut rig, &mut carry, &mut destinations);
            });
            // What was measured was known unicast: nothing flooded after the learning.
            let counters = rig.app_counters();
            let value = |name: &str| counters.iter().find(|(n, _)| *n == name).map_or(0, |c| c.1);
            assert_eq!(value("forward.flooded"), u64::from(macs) + 1);
            assert_eq!(rig.worker.counters().dropped(), 0);
        });
    }
    group.finish();
}

criterion_group!(benches, bridge);
criterion_main!(benches);
