//! The in-kernel live-frame generator and the XDP counting sink through a real veth pair.
//!
//! One lab (prefix `wstlive`, one pair). The generator runs in the tester namespace and sends
//! out of `t0`; `d0`, in the DuT namespace, receives with an AF_XDP port (to see every frame's
//! bytes) or with the counting sink. Its frames carry the local experimental ethertype 0x88b5
//! and a signature, so the lab's own IPv6 chatter is told apart; the head of each frame (42 bytes) is its flow's.
//! The counts are checked against the kernel's interface counters
//! (/sys/class/net/*/statistics, read inside each namespace), and after each part no XDP
//! program may be left on `d0`.

use std::time::{Duration, Instant};

use wirespeed_io::Port;
use wirespeed_io::afxdp::{
    AfXdpConfig, AfXdpError, AfXdpPort, LiveError, LiveFlowOrder, LiveFlows, Umem,
    XdpLiveGenerator, XdpMode, XdpSink,
};
use wirespeed_lab::{enter, interface_counter_for_test};
use wirespeed_packet::{Batch, FramePool};

mod common;
use common::xdp_attached;

/// The bytes of the head (the first 42) that differ between flows, not adjacent.
const FLOW_OFFSETS: [usize; 5] = [20, 24, 26, 30, 40];
const HEAD_LEN: usize = 42;
const TIMEOUT: Duration = Duration::from_secs(3);

/// A 60-byte test frame from `src` to `dst`: ethertype 0x88b5, "WSLIVE", a byte pattern.
fn frame(dst: [u8; 6], src: [u8; 6]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(60);
    frame.extend_from_slice(&dst);
    frame.extend_from_slice(&src);
    frame.extend_from_slice(&[0x88, 0xb5]);
    frame.extend_from_slice(b"WSLIVE");
    while frame.len() < 60 {
        frame.push(frame.len() as u8 ^ 0x5a);
    }
    frame
}

fn is_test_frame(bytes: &[u8]) -> bool {
    bytes.len() >= 20 && bytes[12..14] == [0x88, 0xb5] && &bytes[14..20] == b"WSLIVE"
}

/// Flow `i`'s head: `frame`'s, with the two bytes at offset `f` of [`FLOW_OFFSETS`] set to
/// `[i, 0x10 * f | i]` (distinct in every byte for i < 16).
fn flows(frame: &[u8], count: u8, order: LiveFlowOrder) -> LiveFlows {
    LiveFlows {
        heads: (0..count)
            .map(|i| {
                let mut head = frame[..HEAD_LEN].to_vec();
                for (f, &at) in FLOW_OFFSETS.iter().enumerate() {
                    head[at..at + 2].copy_from_slice(&[i, (0x10 * f as u8) | i]);
                }
                head
            })
            .collect(),
        order,
    }
}

/// `frame` as flow `flow` of `flows` sends it.
fn expected(frame: &[u8], flows: &LiveFlows, flow: usize) -> Vec<u8> {
    let mut bytes = frame.to_vec();
    bytes[..HEAD_LEN].copy_from_slice(&flows.heads[flow]);
    bytes
}

/// Test frames `port` receives on queue 0 until `count` arrived or `TIMEOUT` passes, as bytes.
fn receive(port: &mut AfXdpPort, pool: &mut FramePool, count: usize) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + TIMEOUT;
    let mut batch = Batch::new(64);
    let mut got = Vec::new();
    while got.len() < count && Instant::now() < deadline {
        if port.rx(0, pool, &mut batch) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        for desc in batch.descs() {
            let start = desc.offset as usize;
            let bytes = &pool.frame(desc.frame)[start..start + desc.len as usize];
            if is_test_frame(bytes) {
                got.push(bytes.to_vec());
            }
            pool.release(desc.frame);
        }
        batch.clear();
    }
    got
}

#[test]
fn live_frames_arrive_byte_for_byte_and_the_sink_counts_what_the_kernel_counts() {
    let Some(lab) = common::lab("wstlive", 1, 1) else {
        return;
    };
    let pair = &lab.pairs[0];
    let (tester, dut) = (lab.tester_ns.as_str(), lab.dut_ns.as_str());
    // Round robin is per CPU: the sending thread stays on one.
    wirespeed_io::thread::pin_to_core(0).expect("pin");
    let template = frame(pair.dut_mac, pair.tester_mac);

    // Missing interfaces are named in the error.
    {
        let _guard = enter(tester).expect("enter the tester namespace");
        match XdpLiveGenerator::new("wsnosuch0", &template, &LiveFlows::single(&template), 64) {
            Err(LiveError::Setup(AfXdpError::NoSuchInterface { port })) => {
                assert_eq!(port, "wsnosuch0")
            }
            other => panic!("expected NoSuchInterface, got {other:?}"),
        }
        match XdpSink::attach("wsnosuch0", XdpMode::Auto) {
            Err(AfXdpError::NoSuchInterface { port }) => assert_eq!(port, "wsnosuch0"),
            other => panic!("expected NoSuchInterface, got {other:?}"),
        }
    }

    // Byte for byte, flows in turn: an AF_XDP port on d0 sees every frame.
    let round_robin = flows(&template, 5, LiveFlowOrder::RoundRobin);
    let mut pool = FramePool::new(4096, 2048).expect("pool");
    let umem = Umem::new(&pool);
    let mut port = {
        let _guard = enter(dut).expect("enter the DuT namespace");
        AfXdpPort::open(&pair.dut_if, &AfXdpConfig::default(), &umem, &mut pool).expect("open d0")
    };
    let calls = 8;
    {
        let _guard = enter(tester).expect("enter the tester namespace");
        let generator =
            XdpLiveGenerator::new(&pair.tester_if, &template, &round_robin, 64).expect("generator");
        assert_eq!(generator.flows(), 5);
        for _ in 0..calls {
            // Calls of one batch, spaced, stay far below d0's ring of 256.
            generator.send(64).expect("send");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let arrived = receive(&mut port, &mut pool, calls * 64);
    assert_eq!(arrived.len(), calls * 64, "frames lost");
    for (index, bytes) in arrived.iter().enumerate() {
        assert_eq!(
            bytes,
            &expected(&template, &round_robin, index % 5),
            "frame {index}"
        );
    }

    // Random flows: every frame is one of the flows, and every flow occurs.
    let random = flows(&template, 4, LiveFlowOrder::Random);
    {
        let _guard = enter(tester).expect("enter the tester namespace");
        let generator =
            XdpLiveGenerator::new(&pair.tester_if, &template, &random, 64).expect("generator");
        for _ in 0..4 {
            generator.send(64).expect("send");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let arrived = receive(&mut port, &mut pool, 256);
    assert_eq!(arrived.len(), 256, "frames lost");
    let mut per_flow = [0; 4];
    for bytes in &arrived {
        let flow = (0..4)
            .find(|&flow| *bytes == expected(&template, &random, flow))
            .expect("a frame of one of the flows");
        per_flow[flow] += 1;
    }
    assert!(per_flow.iter().all(|&n| n > 20), "{per_flow:?}");
    port.release_all(&mut pool);
    drop(port);
    assert_eq!(pool.free_count(), pool.total());

    // The sink: its counts equal the kernel's on both ends, within 0.1 %.
    let sink = {
        let _guard = enter(dut).expect("enter the DuT namespace");
        XdpSink::attach(&pair.dut_if, XdpMode::Auto).expect("sink")
    };
    assert_eq!(sink.mode(), "native");
    assert!(xdp_attached(dut, &pair.dut_if));
    let before = (
        interface_counter_for_test(tester, &pair.tester_if, "tx_packets"),
        interface_counter_for_test(tester, &pair.tester_if, "tx_dropped"),
        interface_counter_for_test(dut, &pair.dut_if, "rx_packets"),
    );
    let sent = 20 * 10_000u64;
    {
        let _guard = enter(tester).expect("enter the tester namespace");
        let generator =
            XdpLiveGenerator::new(&pair.tester_if, &template, &round_robin, 64).expect("generator");
        for _ in 0..20 {
            generator.send(10_000).expect("send");
        }
    }
    std::thread::sleep(Duration::from_millis(200));
    let counts = sink.counts().expect("counts");
    let tx = interface_counter_for_test(tester, &pair.tester_if, "tx_packets") - before.0;
    let dropped = interface_counter_for_test(tester, &pair.tester_if, "tx_dropped") - before.1;
    let rx = interface_counter_for_test(dut, &pair.dut_if, "rx_packets") - before.2;
    eprintln!(
        "sent {sent}: sink {} packets {} bytes; t0 tx {tx} dropped {dropped}; d0 rx {rx}",
        counts.packets, counts.bytes
    );
    let close = |a: u64, b: u64| a.abs_diff(b) as f64 <= 0.001 * a.max(1) as f64;
    assert!(counts.packets > 0);
    assert!(
        close(counts.packets, tx),
        "sink {} t0 tx {tx}",
        counts.packets
    );
    assert!(
        close(counts.packets, rx),
        "sink {} d0 rx {rx}",
        counts.packets
    );
    // Every frame run was either taken by the peer or counted as dropped by the sender.
    assert!(
        close(sent, tx + dropped),
        "sent {sent}, t0 tx {tx} + dropped {dropped}"
    );
    // The lab's own chatter (IPv6 neighbour discovery, 90 bytes) is counted too.
    assert!(close(counts.bytes, sent * 60), "{} bytes", counts.bytes);
    drop(sink);
    assert!(!xdp_attached(dut, &pair.dut_if), "the sink stayed attached");
}
