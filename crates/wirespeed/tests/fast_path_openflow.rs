//! The openflow app on the XDP fast path against the openflow app in user space, over AF_XDP in
//! a lab: the same frames through the same flows, once with `fast_path = "off"` and once with
//! `fast_path = "xdp"`.
//!
//! The first test's flow rewrites the destination MAC, decrements the TTL and outputs:
//! * Each tester port must receive exactly the frames an independent rewrite of the input
//!   predicts (header checksums recomputed from scratch), byte for byte, both times: IPv4 UDP
//!   and TCP and IPv6 UDP flows, which the kernel forwards once the app's cache took them, and
//!   what stays in user space: ICMP, a tagged frame, a TTL of 1 (dropped, also when its flow is
//!   in the kernel).
//! * With the fast path the kernel forwarded a good share, and the flow's packet count in
//!   `flow show` still counts every frame: the kernel's counts reach the flows.
//! * After `flow del` returns, no frame is forwarded by the deleted flow, by either path.
//!
//! The second test's flows use every other action the kernel applies (new IPv4 and IPv6
//! addresses and TCP/UDP ports with their checksums, UDP checksums of 0 kept, a VLAN tag pushed
//! with a new id or pushed and popped, a tag popped off a tagged frame, given a new id or
//! replaced, a drop) and one it leaves to user space (a port set twice); one flow matches the
//! tag's priority (PCP) and one writes its actions into the action set, which the pipeline
//! runs at its end as one list the kernel can take. User space's rewrite is the reference: both runs must give the same frames out,
//! byte for byte, with valid checksums; every flow counts every frame it was sent; the kernel
//! forwarded and dropped a good share.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::time::Duration;

use wirespeed_lab::Testbed;
use wirespeed_packet::FramePool;
use wirespeed_packet::wire::EthernetAddress;
use wirespeed_testkit::frames::{FrameBuilder, L3, L4};
use wirespeed_testkit::ports::{receive, send};

mod common;
use common::*;

/// Rounds of the mix: every flow sends this many frames, enough for the app's cache (which
/// takes one miss in 100) to take nearly every flow early on.
const ROUNDS: usize = 300;

/// The test frames' IPv4 and IPv6 addresses (the destinations in 198.19/16 and
/// 2001:db8:19::/48, which the tests' filters know).
fn addresses() -> (L3, L3) {
    let v4 = L3::Ipv4 {
        src: Ipv4Addr::new(198, 18, 0, 2),
        dst: Ipv4Addr::new(198, 19, 0, 9),
    };
    let v6 = L3::Ipv6 {
        src: Ipv6Addr::new(0x2001, 0xdb8, 0, 1, 0, 0, 0, 2),
        dst: Ipv6Addr::new(0x2001, 0xdb8, 0x19, 0, 0, 0, 0, 9),
    };
    (v4, v6)
}

/// The distinct frames of one round, all from t0's MAC to the DuT's d0.
fn mix(src_mac: [u8; 6], dst_mac: [u8; 6]) -> Vec<Vec<u8>> {
    let macs = |b: FrameBuilder| b.macs(EthernetAddress(src_mac), EthernetAddress(dst_mac));
    let (v4, v6) = addresses();
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
    let l3 = l3_offset(&out);
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

/// Where `frame`'s IP header starts (after a tag, if it has one).
fn l3_offset(frame: &[u8]) -> usize {
    if frame.len() > 18 && frame[12..14] == [0x81, 0x00] {
        18
    } else {
        14
    }
}

/// Whether `frame` is one of the tests' (not the lab kernels' own neighbour discovery; on its
/// way out, with addresses rewritten within 198.19/16 and 2001:db8::/32).
fn is_test_frame(frame: &[u8]) -> bool {
    let l3 = l3_offset(frame);
    match frame.get(l3 - 2..l3) {
        Some([0x08, 0x00]) => frame.get(l3 + 16..l3 + 18) == Some(&[198, 19]),
        Some([0x86, 0xdd]) => frame.get(l3 + 24..l3 + 28) == Some(&[0x20, 0x01, 0x0d, 0xb8]),
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

/// A switch running the openflow app (one table, misses dropped) on the lab's d0 as p0 and d1
/// as p1, with `fast_path`.
struct OpenFlowSwitch {
    /// Before the lab: dropped (stopped) first.
    switch: Switch,
    lab: Testbed,
    socket: PathBuf,
}

impl OpenFlowSwitch {
    fn start(prefix: &str, fast_path: &str) -> Option<OpenFlowSwitch> {
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
        let switch = Switch::start(&lab, &config, &dir);
        wait_for_control(&socket);
        Some(OpenFlowSwitch {
            switch,
            lab,
            socket,
        })
    }

    /// `ctl flow add priority=10 in_port=p0 eth_dst=D0 MATCH... actions=ACTIONS`: frames from
    /// t0 to d0's MAC (the lab kernels' own frames, neighbour discovery, go elsewhere).
    fn add_flow(&self, matches: &[&str], actions: &str) {
        let to_dut = format!("eth_dst={}", mac_text(self.lab.pairs[0].dut_mac));
        let actions = format!("actions={actions}");
        let mut words = vec!["flow", "add", "priority=10", "in_port=p0", to_dut.as_str()];
        words.extend(matches);
        words.push(actions.as_str());
        let (ok, text) = ctl_at(&self.socket, &words);
        assert!(ok, "{text}");
    }

    /// Sends `mix` from t0 `rounds` times; returns what t1 received that `keep` accepts,
    /// sorted.
    fn send_rounds(&self, mix: &[Vec<u8>], rounds: usize, keep: fn(&[u8]) -> bool) -> Vec<Vec<u8>> {
        let mut pool = FramePool::new(8192, 2048).unwrap();
        let (mut t0, mut t1) = (tester_port(&self.lab, 0), tester_port(&self.lab, 1));
        let mut received = Vec::new();
        for _ in 0..rounds {
            send(&mut t0, &mut pool, mix);
            std::thread::sleep(Duration::from_millis(1));
            received.extend(receive(&mut t1, &mut pool).into_iter().filter(|f| keep(f)));
        }
        received.extend(receive_during(
            &mut t1,
            &mut pool,
            Duration::from_millis(300),
            keep,
        ));
        received.sort();
        received
    }

    /// The packet count `flow show` gives the flow whose match includes `matching`.
    fn flow_packets(&self, matching: &str) -> u64 {
        let (ok, flows) = ctl_at(&self.socket, &["flow", "show"]);
        assert!(ok, "{flows}");
        let row = flows
            .lines()
            .find(|line| line.contains(matching))
            .unwrap_or_else(|| panic!("no flow row with {matching}:\n{flows}"));
        // Columns: worker, table, priority, match, actions, goto, idle, hard, packets, ...
        row.split_whitespace().nth(8).unwrap().parse().unwrap()
    }
}

fn run(prefix: &str, fast_path: &str) -> Option<Run> {
    let mut dut = OpenFlowSwitch::start(prefix, fast_path)?;
    let lab = &dut.lab;
    let t1_mac = lab.pairs[1].tester_mac;
    dut.add_flow(
        &[],
        &format!("set_field:eth_dst={},dec_ttl,output:p1", mac_text(t1_mac)),
    );
    let mix = mix(lab.pairs[0].tester_mac, lab.pairs[0].dut_mac);
    let received = dut.send_rounds(&mix, ROUNDS, is_test_frame);
    let mut expected: Vec<Vec<u8>> = mix
        .iter()
        .filter_map(|frame| expected(frame, t1_mac))
        .flat_map(|frame| std::iter::repeat_n(frame, ROUNDS))
        .collect();
    expected.sort();
    let flow_packets = dut.flow_packets("in_port=p0");

    let to_dut = format!("eth_dst={}", mac_text(lab.pairs[0].dut_mac));
    let del = ["flow", "del", "priority=10", "in_port=p0", to_dut.as_str()];
    let (ok, text) = ctl_at(&dut.socket, &del);
    assert!(ok, "{text}");
    let after_delete = dut.send_rounds(&mix, 1, is_test_frame).len();

    let (success, out) = dut.switch.interrupt();
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

/// The second test's flows, by UDP or TCP destination port: (match, actions), `T1` standing
/// for t1's MAC. All but the one setting a port twice can be applied by the kernel.
const ACTION_FLOWS: [(u16, &str, &str); 11] = [
    (
        100,
        "eth_type=0x0800 ip_proto=17",
        "set_field:ip_src=198.18.5.5,set_field:ip_dst=198.19.7.7,set_field:l4_src=4000,\
         set_field:l4_dst=5000,set_field:eth_dst=T1,output:p1",
    ),
    (
        101,
        "eth_type=0x0800 ip_proto=6",
        "set_field:l4_src=4001,set_field:ip_dst=198.19.8.8,dec_ttl,set_field:eth_dst=T1,\
         output:p1",
    ),
    (
        102,
        "eth_type=0x86dd ip_proto=17",
        "set_field:ip_src=2001:db8::55,set_field:ip_dst=2001:db8:19::77,set_field:l4_dst=5002,\
         dec_ttl,set_field:eth_dst=T1,output:p1",
    ),
    (
        103,
        "eth_type=0x0800 ip_proto=17",
        "push_vlan:10,set_field:vlan_vid=20,set_field:eth_dst=T1,output:p1",
    ),
    (104, "eth_type=0x0800 ip_proto=17", "drop"),
    (
        105,
        "eth_type=0x86dd ip_proto=6",
        "push_vlan:30,set_field:l4_src=7,pop_vlan,set_field:eth_src=T1,set_field:eth_dst=T1,\
         output:p1",
    ),
    // A port set twice: user space's.
    (
        106,
        "eth_type=0x0800 ip_proto=17",
        "set_field:l4_src=1,set_field:l4_src=2,set_field:eth_dst=T1,output:p1",
    ),
    // Tagged frames: the tag popped, given a new id (its PCP kept), replaced.
    (
        107,
        "eth_type=0x0800 ip_proto=17 vlan=10",
        "pop_vlan,set_field:ip_dst=198.19.9.9,set_field:eth_dst=T1,output:p1",
    ),
    // Matched by the tag's priority too (in the key beside the id, made alike by both).
    (
        108,
        "eth_type=0x86dd ip_proto=6 vlan_pcp=5 vlan=11",
        "set_field:vlan_vid=21,dec_ttl,set_field:eth_dst=T1,output:p1",
    ),
    (
        109,
        "eth_type=0x0800 ip_proto=17 vlan=12",
        "pop_vlan,push_vlan:22,set_field:l4_dst=6000,set_field:eth_dst=T1,output:p1",
    ),
    // Written into the action set out of order: it runs dec_ttl, the set-fields, the output.
    (
        110,
        "eth_type=0x0800 ip_proto=17",
        "write:output:p1,write:set_field:eth_dst=T1,write:dec_ttl,write:set_field:l4_src=9",
    ),
];

/// The second test's frames: four flows (source ports) to each of [`ACTION_FLOWS`]' ports, of
/// the family, protocol and VLAN its match names (tags with PCP 5); IPv4 UDP also with a
/// checksum of 0 (none), IPv6 UDP too (which user space keeps as it is); the TCP flow with
/// TTL 1 (dropped by dec_ttl).
fn action_mix(src_mac: [u8; 6], dst_mac: [u8; 6]) -> Vec<Vec<u8>> {
    let macs = |b: FrameBuilder| b.macs(EthernetAddress(src_mac), EthernetAddress(dst_mac));
    let (v4, v6) = addresses();
    let mut frames = Vec::new();
    for (dst_port, matches, _) in ACTION_FLOWS {
        let ipv6 = matches.contains("0x86dd");
        let tcp = matches.contains("ip_proto=6");
        for src_port in 1000..1004 {
            let l4 = if tcp {
                L4::Tcp { src_port, dst_port }
            } else {
                L4::Udp { src_port, dst_port }
            };
            let builder = if ipv6 {
                FrameBuilder::ipv6_udp().with_l3(v6)
            } else {
                FrameBuilder::ipv4_udp().with_l3(v4)
            };
            let vlan = matches
                .split_once("vlan=")
                .map(|(_, vid)| vid.parse().unwrap());
            let mut builder = macs(builder.with_l4(l4));
            if let Some(vid) = vlan {
                builder = builder.vlan(vid);
            }
            let mut frame = builder.build();
            if vlan.is_some() {
                frame[14] |= 0xa0;
            }
            if src_port == 1003 && !tcp {
                let at = l3_offset(&frame) + if ipv6 { 46 } else { 26 };
                frame[at..at + 2].fill(0);
            }
            frames.push(frame);
        }
    }
    let ttl_one = L4::Tcp {
        src_port: 1000,
        dst_port: 101,
    };
    frames.push(
        macs(FrameBuilder::ipv4_udp().with_l3(v4).with_l4(ttl_one))
            .ttl(1)
            .build(),
    );
    frames
}

/// Whether `frame` carries valid checksums: the IPv4 header's, and the TCP or UDP one unless
/// it is a UDP checksum of 0.
fn checksums_valid(frame: &[u8]) -> bool {
    use wirespeed_packet::checksum::{is_valid, verify_transport_v4, verify_transport_v6};
    let l3 = l3_offset(frame);
    let address = |at: usize| -> [u8; 16] { frame[at..at + 16].try_into().unwrap() };
    let (l4, protocol) = if frame[l3] >> 4 == 4 {
        (l3 + 20, frame[l3 + 9])
    } else {
        (l3 + 40, frame[l3 + 6])
    };
    let udp_none = protocol == 17 && frame[l4 + 6..l4 + 8] == [0, 0];
    if frame[l3] >> 4 == 4 {
        let v4 = |at: usize| Ipv4Addr::from(<[u8; 4]>::try_from(&frame[at..at + 4]).unwrap());
        let total = usize::from(u16::from_be_bytes([frame[l3 + 2], frame[l3 + 3]]));
        let segment = &frame[l4..l3 + total];
        is_valid(&frame[l3..l4])
            && (udp_none || verify_transport_v4(v4(l3 + 12), v4(l3 + 16), protocol, segment))
    } else {
        let payload = usize::from(u16::from_be_bytes([frame[l3 + 4], frame[l3 + 5]]));
        let segment = &frame[l4..l4 + payload];
        let (src, dst) = (address(l3 + 8).into(), address(l3 + 24).into());
        udp_none || verify_transport_v6(src, dst, protocol, segment)
    }
}

/// What one run of the second test saw.
struct ActionRun {
    /// Frames t1 received, sorted.
    received: Vec<Vec<u8>>,
    /// Each flow's packet count in `flow show`, in [`ACTION_FLOWS`]' order.
    flow_packets: Vec<u64>,
    /// `ctl show counters`' total of frames dropped for having no output (both paths).
    no_output: u64,
    out: String,
}

fn action_run(prefix: &str, fast_path: &str) -> Option<ActionRun> {
    let mut dut = OpenFlowSwitch::start(prefix, fast_path)?;
    let lab = &dut.lab;
    let t1_mac = mac_text(lab.pairs[1].tester_mac);
    for (dst_port, matches, actions) in ACTION_FLOWS {
        let l4_dst = format!("l4_dst={dst_port}");
        let mut words: Vec<&str> = matches.split(' ').collect();
        words.push(&l4_dst);
        dut.add_flow(&words, &actions.replace("T1", &t1_mac));
    }
    let mix = action_mix(lab.pairs[0].tester_mac, lab.pairs[0].dut_mac);
    let received = dut.send_rounds(&mix, ROUNDS, is_test_frame);
    let flow_packets = ACTION_FLOWS
        .iter()
        .map(|(dst_port, _, _)| dut.flow_packets(&format!("l4_dst={dst_port} ")))
        .collect();
    let no_output = counter_total(&dut.socket, "drop.no_output");
    let (success, out) = dut.switch.interrupt();
    assert!(success && out.contains("conservation holds"), "{out}");
    Some(ActionRun {
        received,
        flow_packets,
        no_output,
        out,
    })
}

#[test]
fn the_kernel_rewrites_addresses_ports_and_tags_and_drops_as_the_pipeline_does() {
    let Some(pipeline) = action_run("wsofau", "off") else {
        return;
    };
    let Some(fast) = action_run("wsofax", "xdp") else {
        return;
    };
    let out = &fast.out;
    // Every frame of every flow but the drop's, less the one with TTL 1.
    let forwardable = (ACTION_FLOWS.len() - 1) * 4 * ROUNDS;
    assert_eq!(pipeline.received.len(), forwardable, "{}", pipeline.out);
    assert_eq!(fast.received.len(), forwardable, "{out}");
    if let Some(i) = (0..forwardable).find(|&i| fast.received[i] != pipeline.received[i]) {
        panic!(
            "frame {i} differs:\n kernel    {:02x?}\n user space {:02x?}",
            fast.received[i], pipeline.received[i]
        );
    }
    for frame in &fast.received {
        assert!(checksums_valid(frame), "bad checksum: {frame:02x?}");
    }
    // The tags the flows push or rewrite (PCP kept by a new id, not by a new tag), and the
    // UDP checksums of 0 stay 0.
    for tag in [[0x81, 0, 0, 20], [0x81, 0, 0xa0, 21], [0x81, 0, 0, 22]] {
        let tagged = fast.received.iter().filter(|f| f[12..16] == tag).count();
        assert_eq!(tagged, 4 * ROUNDS, "{tag:02x?}");
    }
    let zero_sums = |ipv6: bool| {
        let zero = |f: &&Vec<u8>| {
            let l3 = l3_offset(f);
            let (ethertype, protocol, at) = if ipv6 { (0x86, 6, 46) } else { (0x08, 9, 26) };
            let udp = f[l3 - 2] == ethertype && f[l3 + protocol] == 17;
            udp && f[l3 + at..l3 + at + 2] == [0, 0]
        };
        fast.received.iter().filter(zero).count()
    };
    assert!(zero_sums(false) >= 4 * ROUNDS && zero_sums(true) >= ROUNDS);
    for (run, path) in [(&pipeline, "off"), (&fast, "xdp")] {
        assert_eq!(run.no_output, 4 * ROUNDS as u64, "fast_path = {path}");
        for ((dst_port, _, _), packets) in ACTION_FLOWS.iter().zip(&run.flow_packets) {
            // The TTL-1 frame matches its flow before dec_ttl drops it.
            let sent = 4 * ROUNDS + if *dst_port == 101 { ROUNDS } else { 0 };
            assert_eq!(
                *packets, sent as u64,
                "fast_path = {path}: flow to port {dst_port}\n{}",
                run.out
            );
        }
    }
    let row = fast_path_row(out, "p0");
    let (forwarded, dropped) = (row[0], row[row.len() - 1]);
    let sent = (ACTION_FLOWS.len() * 4 + 1) * ROUNDS;
    eprintln!(
        "{sent} frames sent, {forwarded} forwarded and {dropped} dropped by the kernel; p0: {row:?}"
    );
    // 36 flows the kernel forwards and 4 it drops, 300 frames each: most after the cache took
    // them.
    assert!(forwarded >= 1000 && dropped >= 100, "{out}");
}
