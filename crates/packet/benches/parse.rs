//! Parser and flow-key hash cost per packet.
//!
//! `parse/*` times [`wirespeed_packet::parse`] over a batch of 32 frames (the batch size DPDK
//! and the papers found sufficient) and reports per-batch time with a throughput of 32 elements,
//! so criterion prints packets/s; divide the batch time by 32 for ns/packet. Frames are 60 bytes
//! (64 on the wire with FCS) except the IPv6 one, which needs 62 for its headers.
//! `flow_key/hash` times one CRC32C hash of a 56-byte key.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use wirespeed_packet::{FlowKey, Meta, parse};
use wirespeed_testkit::frames::{FrameBuilder, L4};

const BATCH: usize = 32;

/// 32 frames of one kind, with distinct source ports so that keys and hashes differ.
fn batch(builder: impl Fn(u16) -> FrameBuilder) -> Vec<Vec<u8>> {
    (0..BATCH as u16).map(|i| builder(i).build()).collect()
}

fn udp(i: u16) -> L4 {
    L4::Udp {
        src_port: 1024 + i,
        dst_port: 5000,
    }
}

fn bench_parse(c: &mut Criterion) {
    let cases = [
        (
            "ipv4_udp",
            batch(|i| FrameBuilder::ipv4_udp().with_l4(udp(i)).frame_len(60)),
        ),
        (
            "ipv6_udp",
            batch(|i| FrameBuilder::ipv6_udp().with_l4(udp(i)).frame_len(62)),
        ),
        (
            "vlan_ipv4_udp",
            batch(|i| {
                FrameBuilder::ipv4_udp()
                    .with_l4(udp(i))
                    .vlan(100)
                    .frame_len(60)
            }),
        ),
    ];
    let mut group = c.benchmark_group("parse");
    group.throughput(Throughput::Elements(BATCH as u64));
    for (name, frames) in &cases {
        let mut meta = [Meta::EMPTY; BATCH];
        let mut keys = [FlowKey::EMPTY; BATCH];
        group.bench_function(*name, |b| {
            b.iter(|| {
                for ((frame, meta), key) in frames.iter().zip(&mut meta).zip(&mut keys) {
                    let _ = black_box(parse(black_box(frame), 0, meta, key));
                }
            })
        });
    }
    group.finish();

    let mut meta = Meta::EMPTY;
    let mut key = FlowKey::EMPTY;
    let frame = FrameBuilder::ipv4_udp().frame_len(60).build();
    let _ = parse(&frame, 0, &mut meta, &mut key);
    c.bench_function("flow_key/hash", |b| b.iter(|| black_box(&key).hash()));
}

criterion_group!(benches, bench_parse);
criterion_main!(benches);
