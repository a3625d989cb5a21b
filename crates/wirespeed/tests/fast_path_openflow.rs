//! The openflow app on the XDP fast path against the openflow app in user space, over AF_XDP in
//! a lab: the same frames through a flow that rewrites the destination MAC, decrements the TTL
//! and outputs, once with `fast_path = "off"` and once with `fast_path = "xdp"`.
//!
//! * Each tester port must receive exactly the frames an independent rewrite of the input
//!   predicts (header checksums recomputed from scratch), byte for byte, both times: IPv4 UDP
//!   and TCP and IPv6 UDP flows, which the kernel forwards once the app's cache took them, and
//!   what stays in user space: ICMP, a tagged frame, a TTL of 1 (dropped, also when its flow is
//!   in the kernel).
//! * With the fast path the kernel forwarded a good share, and the flow's packet count in
//!   `flow show` still counts every frame: the kernel's counts reach the flows.
//! * After `flow del` returns, no frame is forwarded by the deleted flow, by either path.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use wirespeed_packet::FramePool;
use wirespeed_packet::wire::EthernetAddress;
use wirespeed_testkit::frames::{FrameBuilder, L3, L4};
use wirespeed_testkit::ports::{receive, send};

mod common;
use common::*;

/// Rounds of the mix: every flow sends this many frames, enough for the app's cache (which
/// takes one miss in 100) to take nearly every flow early on.
const ROUNDS: usize = 300;

/// The distinct frames of one round, all from t0's MAC to the DuT's d0.
fn mix(src_mac: [u8; 6], dst_mac: [u8; 6]) -> Vec<Vec<u8>> {
    let macs = |b: FrameBuilder| b.macs(EthernetAddress(src_mac), EthernetAddress(dst_mac));
    let v4 = L3::Ipv4 {
        src: Ipv4Addr::new(198, 18, 0, 2),
        dst: Ipv4Addr::new(198, 19, 0, 9),
    };
    let v6 = L3::Ipv6 {
        src: Ipv6Addr::new(0x2001, 0xdb8, 0, 1, 0, 0, 0, 2),
        dst: Ipv6Addr::new(0x2001, 0xdb8, 0x19, 0, 0, 0, 0, 9),
    };
    let mut frames = Vec::new();
    for src_port in 1000..1006 {
        let udp = L4::Udp {
            src_port,
            dst_port: TEST_PORT,
        };
        frames.push(macs(FrameBuilder::ipv4_udp().with_l3(v4).with_l4(udp)).build());
        frames.push(macs(FrameBuilder::ipv6_udp().with_l3(v6).with_l4(udp)).build());
    }
    for src_port in 2000..2002 {
        let tcp = L4::Tcp {
            src_port,
            dst_port: TEST_PORT,
        };
        frames.push(macs(FrameBuilder::ipv4_udp().with_l3(v4).with_l4(tcp)).build());
    }
    // The user-space cases: the first UDP flow with TTL 1 (its key is that flow's: the kernel
    // has its entry and must still hand it over), ICMP, a tagged frame.
    let udp = L4::Udp {
        src_port: 1000,
        dst_port: TEST_PORT,
    };
    frames.push(
        macs(FrameBuilder::ipv4_udp().with_l3(v4).with_l4(udp))
            .ttl(1)
            .build(),
    );
    let echo = L4::Echo {
        ident: 7,
        seq_no: 1,
    };
    frames.push(macs(FrameBuilder::ipv4_udp().with_l3(v4).with_l4(echo)).build());
    frames.push(
        macs(FrameBuilder::ipv4_udp().with_l3(v4).with_l4(udp))
            .vlan(10)
            .build(),
    );
    frames
}

/// What the flow makes of `frame`, computed apart from either path: the new destination MAC,
/// the TTL or hop limit one lower with the IPv4 header checksum summed again; `None` for a
/// frame that would leave with 0.
fn expected(frame: &[u8], dst_mac: [u8; 6]) -> Option<Vec<u8>> {
    let mut out = frame.to_vec();
    out[0..6].copy_from_slice(&dst_mac);
    let l3 = if out[12..14] == [0x81, 0x00] { 18 } else { 14 };
    match out[l3] >> 4 {
        4 => {
            if out[l3 + 8] <= 1 {
                return None;
            }
            out[l3 + 8] -= 1;
            out[l3 + 10..l3 + 12].fill(0);
            let sum = out[l3..l3 + 20]
                .chunks(2)
                .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
                .sum::<u32>();
            let sum = (sum & 0xffff) + (sum >> 16);
            let sum = (sum & 0xffff) + (sum >> 16);
            out[l3 + 10..l3 + 12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        }
        _ => {
            if out[l3 + 7] <= 1 {
                return None;
            }
            out[l3 + 7] -= 1;
        }
    }
    Some(out)
}

/// Whether `frame` is one of the mix's (not the lab kernels' own neighbour discovery).
fn is_test_frame(frame: &[u8]) -> bool {
    let l3 = if frame.len() > 18 && frame[12..14] == [0x81, 0x00] {
        18
    } else {
        14
    };
    match frame.get(l3 - 2..l3) {
        Some([0x08, 0x00]) => frame.get(l3 + 16..l3 + 20) == Some(&[198, 19, 0, 9]),
        Some([0x86, 0xdd]) => frame.get(l3 + 24..l3 + 27) == Some(&[0x20, 0x01, 0x0d]),
        _ => false,
    }
}

/// What one run saw.
struct Run {
    /// Frames t1 received, sorted.
    received: Vec<Vec<u8>>,
    /// Frames t1 should have received, sorted.
    expected: Vec<Vec<u8>>,
    /// The flow's packet count in `flow show`, and the frames sent that matched it.
    flow_packets: u64,
    sent: u64,
    /// Frames t1 received after `flow del` returned.
    after_delete: usize,
    /// The switch's output.
    out: String,
}

fn run(prefix: &str, fast_path: &str) -> Option<Run> {
    let (lab, dir) = lab_with(prefix, 2, 1)?;
    for pair in 0..2 {
        receive_with_napi(&lab, pair);
    }
    let socket = dir.join("ctl.sock");
    let config = format!(
        "[switch]\napp = \"openflow\"\nfast_path = \"{fast_path}\"\ncontrol_socket = \"{}\"\n\n\
         [[port]]\nname = \"p0\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n\
         [[port]]\nname = \"p1\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n\
         [openflow]\ntables = 1\nmiss = \"drop\"\ncache_entries = 1024\n",
        socket.display(),
        lab.pairs[0].dut_if,
        lab.pairs[1].dut_if,
    );
    let mut switch = Switch::start(&lab, &config, &dir);
    wait_for_control(&socket);
    let t1_mac = lab.pairs[1].tester_mac;
    let actions = format!(
        "actions=set_field:eth_dst={},dec_ttl,output:p1",
        mac_text(t1_mac)
    );
    // To d0's MAC: the lab kernels' own frames (neighbour discovery) go elsewhere.
    let to_dut = format!("eth_dst={}", mac_text(lab.pairs[0].dut_mac));
    let flow = [
        "flow",
        "add",
        "priority=10",
        "in_port=p0",
        to_dut.as_str(),
        actions.as_str(),
    ];
    let (ok, text) = ctl_at(&socket, &flow);
    assert!(ok, "{text}");

    let mut pool = FramePool::new(8192, 2048).unwrap();
    let (mut t0, mut t1) = (tester_port(&lab, 0), tester_port(&lab, 1));
    let mix = mix(lab.pairs[0].tester_mac, lab.pairs[0].dut_mac);
    let mut received = Vec::new();
    for _ in 0..ROUNDS {
        send(&mut t0, &mut pool, &mix);
        std::thread::sleep(Duration::from_millis(1));
        received.extend(
            receive(&mut t1, &mut pool)
                .into_iter()
                .filter(|f| is_test_frame(f)),
        );
    }
    received.extend(receive_during(
        &mut t1,
        &mut pool,
        Duration::from_millis(300),
        is_test_frame,
    ));
    received.sort();
    let mut expected: Vec<Vec<u8>> = mix
        .iter()
        .filter_map(|frame| expected(frame, t1_mac))
        .flat_map(|frame| std::iter::repeat_n(frame, ROUNDS))
        .collect();
    expected.sort();

    let (ok, flows) = ctl_at(&socket, &["flow", "show"]);
    assert!(ok, "{flows}");
    let row = flows
        .lines()
        .find(|line| line.contains("in_port=p0"))
        .unwrap_or_else(|| panic!("no flow row:\n{flows}"));
    // Columns: worker, table, priority, match, actions, goto, idle, hard, packets, ...
    let flow_packets = row.split_whitespace().nth(8).unwrap().parse().unwrap();

    let del = ["flow", "del", "priority=10", "in_port=p0", to_dut.as_str()];
    let (ok, text) = ctl_at(&socket, &del);
    assert!(ok, "{text}");
    send(&mut t0, &mut pool, &mix);
    let after_delete = receive_during(
        &mut t1,
        &mut pool,
        Duration::from_millis(300),
        is_test_frame,
    )
    .len();

    let (success, out) = switch.interrupt();
    assert!(success && out.contains("conservation holds"), "{out}");
    Some(Run {
        received,
        expected,
        flow_packets,
        sent: (mix.len() * ROUNDS) as u64,
        after_delete,
        out,
    })
}

#[test]
fn the_kernel_forwards_cached_flows_as_the_pipeline_does_and_their_counts_reach_the_flows() {
    for (prefix, fast_path) in [("wsofu", "off"), ("wsofx", "xdp")] {
        let Some(run) = run(prefix, fast_path) else {
            return;
        };
        let out = &run.out;
        assert_eq!(
            run.received.len(),
            run.expected.len(),
            "fast_path = {fast_path}: frames received\n{out}"
        );
        if let Some(i) = (0..run.received.len()).find(|&i| run.received[i] != run.expected[i]) {
            panic!(
                "fast_path = {fast_path}, frame {i} differs:\n got  {:02x?}\n want {:02x?}",
                run.received[i], run.expected[i]
            );
        }
        assert_eq!(
            run.flow_packets, run.sent,
            "fast_path = {fast_path}: the flow's packets\n{out}"
        );
        assert_eq!(run.after_delete, 0, "fast_path = {fast_path}\n{out}");
        if fast_path == "xdp" {
            assert!(out.contains("UDP and TCP flows of the flow cache"), "{out}");
            let forwarded = fast_path_row(out, "p0")[0];
            eprintln!(
                "{} frames sent, {forwarded} forwarded by the kernel",
                run.sent
            );
            // 14 flows the kernel can take, 300 frames each: most after the cache took them.
            assert!(forwarded >= 1000, "{out}");
        }
    }
}
