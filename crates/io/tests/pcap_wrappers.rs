//! The wrapper ports over in-memory links: `Faulty` with each fault kind at probability 1.0 and
//! 0.0 gives exactly the expected frames (on RX and on TX), is deterministic per seed, and keeps
//! pool conservation; `Traced` writes captures holding exactly the frames that passed.

use std::fs;
use std::io::Cursor;
use std::path::PathBuf;

use proptest::prelude::*;
use wirespeed_io::Port;
use wirespeed_io::memory::{LinkConfig, MemoryPort, link};
use wirespeed_io::pcap::{PcapPort, PcapReader, PcapWriter};
use wirespeed_io::wrap::{FaultConfig, FaultStats, Faulty, Traced};
use wirespeed_packet::{Batch, FramePool};

mod common;

/// Frame `i`: its first byte is `i`, its length varies from 20 to 1500.
fn frame_bytes(i: usize) -> Vec<u8> {
    let len = [60, 1500, 20, 333, 64, 999][i % 6];
    (0..len)
        .map(|b| if b == 0 { i as u8 } else { (b * 3 + i) as u8 })
        .collect()
}

fn frames(count: usize) -> Vec<Vec<u8>> {
    (0..count).map(frame_bytes).collect()
}

/// Sends `frames` from `port` in batches of 32; asserts every frame was taken.
fn send(pool: &mut FramePool, port: &mut impl Port, frames: &[Vec<u8>]) {
    for chunk in frames.chunks(32) {
        let mut batch = Batch::new(32);
        common::fill(pool, &mut batch, chunk, 0);
        assert_eq!(port.tx(0, pool, &mut batch), chunk.len());
    }
}

/// The bytes of the packets of `batch`, releasing their frames.
fn drain_batch(pool: &mut FramePool, batch: &mut Batch) -> Vec<Vec<u8>> {
    let got = batch
        .descs()
        .iter()
        .map(|d| pool.frame(d.frame)[d.offset as usize..(d.offset + d.len) as usize].to_vec())
        .collect();
    for desc in batch.descs() {
        pool.release(desc.frame);
    }
    batch.clear();
    got
}

/// Receives until the port has nothing left, with batches of `batch_size`.
fn receive_all(pool: &mut FramePool, port: &mut impl Port, batch_size: usize) -> Vec<Vec<u8>> {
    let mut batch = Batch::new(batch_size);
    let mut got = Vec::new();
    loop {
        let n = port.rx(0, pool, &mut batch);
        got.extend(drain_batch(pool, &mut batch));
        if n == 0 && port.frames_held() == 0 {
            return got;
        }
    }
}

/// Sends `count` frames from one end of a link and receives them through `Faulty` at the other
/// with `config`; returns what arrived and the fault counts, after checking conservation.
fn through_faulty_rx(
    config: FaultConfig,
    count: usize,
    batch_size: usize,
) -> (Vec<Vec<u8>>, FaultStats) {
    let mut pool = FramePool::new(512, 2048).unwrap();
    let (mut a, b) = link("a", "b", &LinkConfig::default());
    let mut b = Faulty::new(b, config);
    send(&mut pool, &mut a, &frames(count));
    let got = receive_all(&mut pool, &mut b, batch_size);
    a.release_all(&mut pool);
    b.release_all(&mut pool);
    assert_eq!(pool.free_count(), pool.total(), "pool conservation");
    assert_eq!(pool.double_releases(), 0);
    (got, b.fault_stats())
}

fn only(kind: &str, probability: f64) -> FaultConfig {
    let mut config = FaultConfig {
        seed: 42,
        ..FaultConfig::default()
    };
    match kind {
        "drop" => config.drop = probability,
        "truncate" => config.truncate = probability,
        "corrupt" => config.corrupt = probability,
        "duplicate" => config.duplicate = probability,
        "reorder" => config.reorder = probability,
        _ => panic!("unknown fault kind {kind}"),
    }
    config
}

const KINDS: [&str; 5] = ["drop", "truncate", "corrupt", "duplicate", "reorder"];

#[test]
fn probability_zero_changes_nothing() {
    for kind in KINDS {
        let (got, stats) = through_faulty_rx(only(kind, 0.0), 50, 16);
        assert_eq!(got, frames(50), "{kind}");
        assert_eq!(stats, FaultStats::default(), "{kind}");
    }
}

#[test]
fn drop_everything() {
    let (got, stats) = through_faulty_rx(only("drop", 1.0), 50, 16);
    assert!(got.is_empty());
    assert_eq!(stats.dropped, 50);
}

#[test]
fn truncate_everything() {
    let (got, stats) = through_faulty_rx(only("truncate", 1.0), 50, 16);
    let sent = frames(50);
    assert_eq!(got.len(), 50);
    for (got, sent) in got.iter().zip(&sent) {
        assert!(
            !got.is_empty() && got.len() < sent.len(),
            "{} of {}",
            got.len(),
            sent.len()
        );
        assert_eq!(
            got.as_slice(),
            &sent[..got.len()],
            "a truncated frame is a prefix"
        );
    }
    assert_eq!(stats.truncated, 50);
}

#[test]
fn corrupt_everything() {
    let (got, stats) = through_faulty_rx(only("corrupt", 1.0), 50, 16);
    let sent = frames(50);
    assert_eq!(got.len(), 50);
    for (got, sent) in got.iter().zip(&sent) {
        assert_eq!(got.len(), sent.len());
        let differing = got.iter().zip(sent).filter(|(a, b)| a != b).count();
        assert_eq!(differing, 1, "exactly one byte changed");
    }
    assert_eq!(stats.corrupted, 50);
}

#[test]
fn duplicate_everything_even_past_the_batch() {
    // 50 frames doubled through batches of 16: the overflow waits for the next call.
    let (got, stats) = through_faulty_rx(only("duplicate", 1.0), 50, 16);
    let expected: Vec<Vec<u8>> = frames(50)
        .into_iter()
        .flat_map(|f| [f.clone(), f])
        .collect();
    assert_eq!(got, expected);
    assert_eq!(stats.duplicated, 50);
}

#[test]
fn duplicates_are_skipped_when_the_pool_is_empty() {
    let mut pool = FramePool::new(6, 2048).unwrap();
    let (mut a, b) = link("a", "b", &LinkConfig::default());
    let mut b = Faulty::new(b, only("duplicate", 1.0));
    send(&mut pool, &mut a, &frames(4));
    assert_eq!(pool.free_count(), 2);
    let got = {
        let mut batch = Batch::new(16);
        b.rx(0, &mut pool, &mut batch);
        drain_batch(&mut pool, &mut batch)
    };
    let first_bytes: Vec<u8> = got.iter().map(|f| f[0]).collect();
    assert_eq!(first_bytes, [0, 0, 1, 1, 2, 3]);
    assert_eq!(b.fault_stats().duplicated, 2);
    assert_eq!(b.fault_stats().duplicates_skipped, 2);
    assert_eq!(pool.free_count(), pool.total());
}

#[test]
fn reorder_swaps_neighbours() {
    // Nine frames in one call: pairs swapped, the odd one out stays.
    let (got, stats) = through_faulty_rx(only("reorder", 1.0), 9, 16);
    let order: Vec<u8> = got.iter().map(|f| f[0]).collect();
    assert_eq!(order, [1, 0, 3, 2, 5, 4, 7, 6, 8]);
    let sent = frames(9);
    assert!(
        got.iter().all(|f| sent.contains(f)),
        "frames are moved, not changed"
    );
    assert_eq!(stats.reordered, 8);
}

#[test]
fn the_same_seed_gives_the_same_faults() {
    let config = FaultConfig {
        seed: 7,
        drop: 0.2,
        truncate: 0.2,
        corrupt: 0.2,
        duplicate: 0.2,
        reorder: 0.3,
        ..FaultConfig::default()
    };
    let (first, first_stats) = through_faulty_rx(config, 200, 32);
    let (second, second_stats) = through_faulty_rx(config, 200, 32);
    assert_eq!(first, second);
    assert_eq!(first_stats, second_stats);
    // Every kind happened at these probabilities over 200 frames.
    assert!(first_stats.dropped > 0 && first_stats.truncated > 0 && first_stats.corrupted > 0);
    assert!(first_stats.duplicated > 0 && first_stats.reordered > 0);
    assert_eq!(
        first.len() as u64,
        200 - first_stats.dropped + first_stats.duplicated
    );
    let (other, _) = through_faulty_rx(FaultConfig { seed: 8, ..config }, 200, 32);
    assert_ne!(first, other, "another seed, other faults");
}

#[test]
fn faults_on_tx() {
    for (kind, expected) in [
        ("drop", Vec::new()),
        ("duplicate", vec![0, 0, 1, 1, 2, 2]),
        ("reorder", vec![1, 0, 2]),
    ] {
        let mut pool = FramePool::new(64, 2048).unwrap();
        let (a, mut b) = link("a", "b", &LinkConfig::default());
        let config = FaultConfig {
            on_rx: false,
            on_tx: true,
            ..only(kind, 1.0)
        };
        let mut a = Faulty::new(a, config);
        send(&mut pool, &mut a, &frames(3));
        let got = receive_all(&mut pool, &mut b, 16);
        assert_eq!(
            got.iter().map(|f| f[0]).collect::<Vec<_>>(),
            expected,
            "{kind}"
        );
        a.release_all(&mut pool);
        b.release_all(&mut pool);
        assert_eq!(pool.free_count(), pool.total(), "{kind}");
    }
}

#[test]
fn frames_refused_on_tx_go_back_to_the_caller() {
    let mut pool = FramePool::new(64, 2048).unwrap();
    let config = LinkConfig {
        ring_size: 4,
        ..LinkConfig::default()
    };
    let (a, mut b) = link("a", "b", &config);
    let mut a = Faulty::new(
        a,
        FaultConfig {
            on_rx: false,
            on_tx: true,
            ..only("duplicate", 1.0)
        },
    );
    let mut batch = Batch::new(8);
    common::fill(&mut pool, &mut batch, &frames(3), 0);
    // Six frames after duplication; the ring takes four, two come back.
    let taken = a.tx(0, &mut pool, &mut batch);
    assert_eq!(batch.len(), 2);
    assert_eq!(taken, 1);
    assert_eq!(b.frames_held(), 4);
    let back: Vec<u8> = drain_batch(&mut pool, &mut batch)
        .iter()
        .map(|f| f[0])
        .collect();
    assert_eq!(back, [2, 2]);
    b.release_all(&mut pool);
    assert_eq!(pool.free_count(), pool.total());
}

#[test]
fn faults_only_where_configured() {
    // on_rx false: the wrapper is transparent on RX.
    let config = FaultConfig {
        on_rx: false,
        ..only("drop", 1.0)
    };
    let (got, stats) = through_faulty_rx(config, 20, 16);
    assert_eq!(got, frames(20));
    assert_eq!(stats, FaultStats::default());
}

// --- Traced ---

fn temp_path(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("pcap_wrappers");
    fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// The packets of a capture file.
fn capture(path: &PathBuf) -> Vec<Vec<u8>> {
    let bytes = fs::read(path).unwrap();
    let mut reader = PcapReader::new(Cursor::new(bytes), path.display().to_string()).unwrap();
    let mut buf = vec![0u8; 4096];
    let mut packets = Vec::new();
    while let Some(record) = reader.next_record(&mut buf).unwrap() {
        assert!(
            record.time_ns > 1_600_000_000_000_000_000,
            "wall-clock timestamps"
        );
        packets.push(buf[..record.captured_len as usize].to_vec());
    }
    packets
}

#[test]
fn traced_writes_exactly_the_frames_that_passed() {
    let (a_rx, a_tx, b_rx) = (
        temp_path("a_rx.pcap"),
        temp_path("a_tx.pcap"),
        temp_path("b_rx.pcap"),
    );
    let mut pool = FramePool::new(64, 2048).unwrap();
    let config = LinkConfig {
        ring_size: 4,
        ..LinkConfig::default()
    };
    let (a, b) = link("a", "b", &config);
    let mut a = Traced::new(a, Some(&a_rx), Some(&a_tx)).unwrap();
    let mut b = Traced::new(b, Some(&b_rx), None).unwrap();
    let sent = frames(6);
    let mut batch = Batch::new(8);
    common::fill(&mut pool, &mut batch, &sent, 0);
    // The ring takes four of six: only those four are in the TX trace.
    assert_eq!(a.tx(0, &mut pool, &mut batch), 4);
    let refused = drain_batch(&mut pool, &mut batch);
    assert_eq!(refused, sent[4..]);
    // b receives two of them now and two later.
    let mut received = Batch::new(2);
    assert_eq!(b.rx(0, &mut pool, &mut received), 2);
    let mut got = drain_batch(&mut pool, &mut received);
    got.extend(receive_all(&mut pool, &mut b, 2));
    assert_eq!(got, sent[..4]);
    a.release_all(&mut pool);
    b.release_all(&mut pool);
    assert!(a.error().is_none() && b.error().is_none());
    assert_eq!(pool.free_count(), pool.total());

    assert_eq!(capture(&a_tx), sent[..4]);
    assert_eq!(capture(&b_rx), sent[..4]);
    assert!(capture(&a_rx).is_empty());
}

#[test]
fn traced_with_one_file_interleaves_both_directions() {
    let path = temp_path("both.pcap");
    let mut pool = FramePool::new(64, 2048).unwrap();
    let (a, mut b) = link("a", "b", &LinkConfig::default());
    let mut a = Traced::new(a, Some(&path), Some(&path)).unwrap();
    send(&mut pool, &mut a, &frames(2));
    send(&mut pool, &mut b, &frames(5)[2..]);
    let received = receive_all(&mut pool, &mut a, 8);
    assert_eq!(received, frames(5)[2..]);
    send(&mut pool, &mut a, &frames(6)[5..]);
    let _ = receive_all(&mut pool, &mut b, 8);
    a.release_all(&mut pool);
    assert_eq!(pool.free_count(), pool.total());
    assert_eq!(capture(&path), frames(6), "tx 0-1, rx 2-4, tx 5, in order");
}

#[test]
fn traced_faulty_traces_what_the_pipeline_saw() {
    let path = temp_path("faulty_rx.pcap");
    let mut pool = FramePool::new(64, 2048).unwrap();
    let (mut a, b) = link("a", "b", &LinkConfig::default());
    let b = Faulty::new(b, only("reorder", 1.0));
    let mut b: Traced<Faulty<MemoryPort>> = Traced::new(b, Some(&path), None).unwrap();
    send(&mut pool, &mut a, &frames(4));
    let got = receive_all(&mut pool, &mut b, 8);
    b.release_all(&mut pool);
    assert_eq!(pool.free_count(), pool.total());
    assert_eq!(capture(&path), got);
    assert_eq!(got.iter().map(|f| f[0]).collect::<Vec<_>>(), [1, 0, 3, 2]);
    assert_eq!(b.inner().fault_stats().reordered, 4);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Any mix of faults on both sides, any batch size, a small ring and a small pool: every
    /// frame is accounted for and the pool is whole at the end.
    #[test]
    fn any_faults_keep_the_pool_whole(
        seed in any::<u64>(),
        probabilities in proptest::array::uniform5(0.0f64..=1.0),
        count in 0usize..80,
        batch_size in 1usize..40,
        ring_size in 1usize..16,
        frames_in_pool in 8u32..40,
    ) {
        let [drop, truncate, corrupt, duplicate, reorder] = probabilities;
        let config = FaultConfig { seed, drop, truncate, corrupt, duplicate, reorder, on_rx: true, on_tx: true };
        let mut pool = FramePool::new(frames_in_pool, 2048).unwrap();
        let link_config = LinkConfig { ring_size, ..LinkConfig::default() };
        let (a, b) = link("a", "b", &link_config);
        let mut a = Faulty::new(a, config);
        let mut b = Faulty::new(b, FaultConfig { seed: seed ^ 1, ..config });
        let sent = frames(count);
        let mut next = 0;
        let mut batch = Batch::new(batch_size);
        let mut received = Batch::new(batch_size);
        for _ in 0..200 {
            while next < sent.len() && !batch.is_full() && pool.free_count() > 2 {
                common::fill(&mut pool, &mut batch, &sent[next..next + 1], 0);
                next += 1;
            }
            a.tx(0, &mut pool, &mut batch);
            // What the port refused is dropped, as a worker would.
            drain_batch(&mut pool, &mut batch);
            b.rx(0, &mut pool, &mut received);
            drain_batch(&mut pool, &mut received);
            let held = (a.frames_held() + b.frames_held()) as u32;
            prop_assert_eq!(pool.free_count() + held, pool.total());
        }
        a.release_all(&mut pool);
        b.release_all(&mut pool);
        prop_assert_eq!(pool.free_count(), pool.total());
        prop_assert_eq!(pool.double_releases(), 0);
    }
}

#[test]
fn faulty_is_at_its_end_only_when_its_waiting_frames_are_delivered() {
    let path = temp_path("three.pcap");
    let mut writer = PcapWriter::create(&path).unwrap();
    for bytes in frames(3) {
        writer.write_record(1, &bytes, bytes.len() as u32).unwrap();
    }
    drop(writer.into_inner().unwrap());
    let mut pool = FramePool::new(16, 2048).unwrap();
    let port = PcapPort::open("in", Some(&path), None).unwrap();
    let mut port = Faulty::new(port, only("duplicate", 1.0));
    let mut batch = Batch::new(4);
    // Three records (and the file's end), six frames after duplication: four now, two wait.
    assert_eq!(port.rx(0, &mut pool, &mut batch), 4);
    drain_batch(&mut pool, &mut batch);
    assert!(port.inner().at_end());
    assert!(!port.at_end(), "two duplicates still wait");
    assert_eq!(port.frames_held(), 2);
    assert_eq!(port.rx(0, &mut pool, &mut batch), 2);
    assert!(port.at_end() && port.fault().is_none());
    drain_batch(&mut pool, &mut batch);
    assert_eq!(pool.free_count(), pool.total());
}
