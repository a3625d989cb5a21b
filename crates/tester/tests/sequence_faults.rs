//! Sequence tracking against the fault injector: frames carrying probes (flow, sequence number)
//! go through a memory link whose receiving end is `wirespeed_io::wrap::Faulty`; the sink's
//! counts of loss, duplicates and reordering must match the injector's own `fault_stats()`.

use wirespeed_io::Port;
use wirespeed_io::memory::{LinkConfig, link};
use wirespeed_io::wrap::{FaultConfig, FaultStats, Faulty};
use wirespeed_packet::{Batch, FramePool, MAX_BATCH};
use wirespeed_tester::generator::probe::{self, Probe, ProbeWriter};
use wirespeed_tester::generator::{Template, TemplateConfig};
use wirespeed_tester::stats::{SequenceCounts, SequenceTable};
use wirespeed_testkit::ports::send;

/// Sends `per_flow` frames for each of `flows` flows (interleaved) through a faulty link and
/// returns the sink's counts, the injector's, and frames the sink could not read.
fn run(flows: u32, per_flow: u64, faults: FaultConfig) -> (SequenceCounts, FaultStats, u64) {
    let template = Template::new(&TemplateConfig {
        frame_size: 128,
        flows,
        ..TemplateConfig::default()
    })
    .unwrap();
    let writer = ProbeWriter::new(&template).unwrap();
    let mut pool = FramePool::new(4096, 2048).unwrap();
    let (mut tx, rx) = link("wst-a", "wst-b", &LinkConfig::default());
    let mut rx = Faulty::new(rx, faults);
    let mut table = SequenceTable::new(flows);
    let mut unreadable = 0;
    let mut batch = Batch::new(MAX_BATCH);
    let mut frame = template.bytes().to_vec();
    let mut chunk = Vec::new();
    let total = per_flow * flows as u64;
    for index in 0..total {
        let flow = (index % flows as u64) as u32;
        template.stamp(&mut frame, flow);
        writer.write(
            &mut frame,
            &Probe {
                flow: flow as u16,
                sequence: (index / flows as u64) as u32,
                timestamp: index,
            },
        );
        chunk.push(frame.clone());
        if chunk.len() == 256 || index + 1 == total {
            assert_eq!(send(&mut tx, &mut pool, &chunk), chunk.len());
            chunk.clear();
            while rx.rx(0, &mut pool, &mut batch) > 0 {
                for desc in batch.descs() {
                    let start = desc.offset as usize;
                    let bytes = &pool.frame(desc.frame)[start..start + desc.len as usize];
                    match probe::read(bytes) {
                        Ok(probe) => {
                            table.record(probe.flow.into(), probe.sequence.into());
                        }
                        Err(_) => unreadable += 1,
                    }
                    pool.release(desc.frame);
                }
                batch.clear();
            }
        }
    }
    assert_eq!(rx.frames_held(), 0);
    assert_eq!(
        pool.free_count(),
        pool.total(),
        "every frame back in the pool"
    );
    let sent = vec![per_flow; flows as usize];
    (table.total(&sent), rx.fault_stats(), unreadable)
}

#[test]
fn drops_and_duplicates_match_the_injector() {
    let faults = FaultConfig {
        seed: 5,
        drop: 0.02,
        duplicate: 0.02,
        ..FaultConfig::default()
    };
    let (counts, injected, unreadable) = run(4, 10_000, faults);
    assert!(injected.dropped > 600 && injected.duplicated > 600);
    assert_eq!(unreadable, 0);
    assert_eq!(counts.lost, injected.dropped);
    assert_eq!(counts.duplicates, injected.duplicated);
    assert_eq!(counts.received, 40_000 - injected.dropped);
    assert_eq!(counts.reordered, 0);
    assert_eq!(counts.late, 0);
}

#[test]
fn drops_and_reorders_match_the_injector() {
    // One flow, so every swapped pair is a swap within the flow.
    let faults = FaultConfig {
        seed: 6,
        drop: 0.02,
        reorder: 0.1,
        ..FaultConfig::default()
    };
    let (counts, injected, _) = run(1, 40_000, faults);
    assert!(injected.reordered > 2_000);
    assert_eq!(counts.lost, injected.dropped);
    // The injector counts two frames per swapped pair; the sink sees the second one late.
    assert_eq!(counts.reordered, injected.reordered / 2);
    assert_eq!(counts.duplicates, 0);
}

#[test]
fn all_faults_at_once_still_count_loss_and_duplicates_exactly() {
    let faults = FaultConfig {
        seed: 7,
        drop: 0.01,
        duplicate: 0.01,
        reorder: 0.05,
        ..FaultConfig::default()
    };
    let (counts, injected, _) = run(1, 40_000, faults);
    assert_eq!(counts.lost, injected.dropped);
    assert_eq!(counts.duplicates, injected.duplicated);
    // A swap of a frame with its own duplicate changes nothing the sink can see.
    assert!(counts.reordered <= injected.reordered / 2);
    assert!(counts.reordered >= injected.reordered / 2 - injected.duplicated);
    assert_eq!(counts.received + counts.lost, 40_000);
}
