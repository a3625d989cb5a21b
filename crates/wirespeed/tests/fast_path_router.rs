//! The router on the XDP fast path against the router in user space, frame for frame, over
//! AF_XDP in a lab.
//!
//! * The same seeded mix goes through a two-port router once with `fast_path = "off"` and
//!   once with `fast_path = "xdp"`, and each tester port must receive the same frames byte for
//!   byte: forwarded UDP and TCP, and every case the kernel leaves to user space (TTL 1 and 0,
//!   which get Time Exceeded; no route, which gets Unreachable; an unresolved gateway, which
//!   gets ARP requests; a connected destination; pings and UDP to the router; ARP requests
//!   for it; options, fragments, bad checksums, martians, multicast MACs, VLAN tags), and the
//!   same for IPv6 (forwarded UDP and TCP, hop limit 1 and 0, no route, extension headers,
//!   pings). The router's own ARP requests are compared by count only and its neighbour
//!   discovery not at all: it retries on a timer.
//! * Routes added and removed with `ctl` take effect in the kernel before the reply: the
//!   kernel forwards to an added route, and after `route del` the frames get Unreachable from
//!   user space instead.
//! * A million routes loaded with `ctl route load` while frames flow: the kernel's routes are
//!   closed to it meanwhile (every routed frame through user space, none lost, no long gap),
//!   and afterwards a loaded route forwards in the kernel and a route the load dropped is gone;
//!   a switch stopped while the kernel takes the load in exits at once.
//! * A gateway learned by ARP, and then moved to another MAC, is in the kernel as soon as the
//!   batch that taught user space is done.
//! * An ACL loaded at run time, which only user space applies, stops the kernel's forwarding
//!   before the reply.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::time::Duration;

use wirespeed_io::afpacket::AfPacketPort;
use wirespeed_lab::Testbed;
use wirespeed_packet::FramePool;
use wirespeed_packet::wire::EthernetAddress;
use wirespeed_testkit::frames::{FrameBuilder, L3, L4, arp_request};
use wirespeed_testkit::ports::{receive, send};

mod common;
use common::*;

/// The prefix routed through the tester's t1 (a static neighbour).
const ROUTED: [u8; 2] = [198, 19];
/// The prefix routed through a gateway that never answers ARP.
const UNRESOLVED: [u8; 2] = [198, 20];
/// The unresolved gateway's host part in t1's subnet.
const SILENT_GATEWAY: u8 = 77;
/// The IPv6 prefix routed through t1 (a /48 of the documentation prefix).
const ROUTED6: [u16; 3] = [0x2001, 0xdb8, 0x19];

fn router_config(lab: &Testbed, fast_path: &str, socket: &Path) -> String {
    let (p0, p1) = (&lab.pairs[0], &lab.pairs[1]);
    let [a, b] = ROUTED;
    let [c, d] = UNRESOLVED;
    let silent = Ipv4Addr::new(198, 18, 1, SILENT_GATEWAY);
    format!(
        "[switch]\napp = \"router\"\nfast_path = \"{fast_path}\"\ncontrol_socket = \"{}\"\n\n\
         [[port]]\nname = \"p0\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n\
         [[port]]\nname = \"p1\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n\
         [[router.interface]]\nport = \"p0\"\naddresses = [\"{}/24\", \"{}/64\"]\n\n\
         [[router.interface]]\nport = \"p1\"\naddresses = [\"{}/24\", \"{}/64\"]\n\n\
         [[router.neighbour]]\nport = \"p0\"\naddress = \"{}\"\nmac = \"{}\"\n\n\
         [[router.neighbour]]\nport = \"p1\"\naddress = \"{}\"\nmac = \"{}\"\n\n\
         [[router.neighbour]]\nport = \"p0\"\naddress = \"{}\"\nmac = \"{}\"\n\n\
         [[router.neighbour]]\nport = \"p1\"\naddress = \"{}\"\nmac = \"{}\"\n\n\
         [[router.route]]\nprefix = \"{a}.{b}.0.0/16\"\nvia = [\"{}\"]\n\n\
         [[router.route]]\nprefix = \"{c}.{d}.0.0/16\"\nvia = [\"{silent}\"]\n\n\
         [[router.route]]\nprefix = \"{}/48\"\nvia = [\"{}\"]\n",
        socket.display(),
        p0.dut_if,
        p1.dut_if,
        p0.dut_ipv4,
        p0.dut_ipv6,
        p1.dut_ipv4,
        p1.dut_ipv6,
        p0.tester_ipv4,
        mac_text(p0.tester_mac),
        p1.tester_ipv4,
        mac_text(p1.tester_mac),
        p0.tester_ipv6,
        mac_text(p0.tester_mac),
        p1.tester_ipv6,
        mac_text(p1.tester_mac),
        p1.tester_ipv4,
        routed6(0),
        p1.tester_ipv6,
    )
}

/// Host `host` of [`ROUTED6`].
fn routed6(host: u16) -> Ipv6Addr {
    let [a, b, c] = ROUTED6;
    Ipv6Addr::new(a, b, c, 0, 0, 0, 0, host)
}

/// One frame of the mix, sent by t0: its IPv4 identification (or, for IPv6, flow label and
/// for ARP the sender's last byte) carries `seq`, so every frame is distinct.
fn mix_frame(lab: &Testbed, random: &mut Random, seq: u16) -> Vec<u8> {
    let (p0, p1) = (&lab.pairs[0], &lab.pairs[1]);
    let to_router = EthernetAddress(p0.dut_mac);
    let from = EthernetAddress(p0.tester_mac);
    let host = |prefix: [u8; 2]| {
        Ipv4Addr::new(
            prefix[0],
            prefix[1],
            random_byte(seq, 3),
            random_byte(seq, 7),
        )
    };
    let udp = L4::Udp {
        src_port: 1024 + seq % 64,
        dst_port: TEST_PORT,
    };
    let tcp = L4::Tcp {
        src_port: 2048 + seq % 64,
        dst_port: TEST_PORT,
    };
    let ipv4 = |dst: Ipv4Addr| {
        FrameBuilder::ipv4_udp()
            .macs(from, to_router)
            .with_l3(L3::Ipv4 {
                src: p0.tester_ipv4,
                dst,
            })
            .with_l4(udp)
    };
    let ipv6 = |dst: Ipv6Addr| {
        FrameBuilder::ipv6_udp()
            .macs(from, to_router)
            .with_l3(L3::Ipv6 {
                src: p0.tester_ipv6,
                dst,
            })
            .with_l4(udp)
    };
    let size = 60 + random.below(200) as usize;
    let mut builder = match random.below(26) {
        // Forwarded by both paths: the common case, most of the mix.
        0..=6 => ipv4(host(ROUTED)).frame_len(size),
        7 => ipv4(host(ROUTED)).with_l4(tcp).frame_len(size),
        8 => ipv4(host(ROUTED)).ttl(1),
        9 => ipv4(host(ROUTED)).ttl(if seq.is_multiple_of(2) { 0 } else { 2 }),
        10 => ipv4(Ipv4Addr::new(203, 0, 113, 9)),
        11 => ipv4(host(UNRESOLVED)),
        12 => ipv4(p1.tester_ipv4),
        13 => ipv4(p0.dut_ipv4).with_l4(L4::Echo {
            ident: 7,
            seq_no: seq,
        }),
        14 => ipv4(p1.dut_ipv4),
        15 => ipv4(host(ROUTED)).fragment(8 * (seq % 3), seq.is_multiple_of(2)),
        16 => ipv4(host(ROUTED)).macs(from, EthernetAddress([1, 0, 0x5e, 0, 0, 1])),
        17 => ipv4(host(ROUTED)).vlan(10),
        18 | 19 => ipv6(routed6(seq)).frame_len(size + 20),
        20 => ipv6(routed6(seq)).with_l4(tcp).frame_len(size + 20),
        21 => ipv6(routed6(seq)).ttl(if seq.is_multiple_of(2) { 1 } else { 0 }),
        22 => ipv6(Ipv6Addr::new(0x2001, 0xdb8, 0x77, 0, 0, 0, 0, seq)),
        23 => ipv6(routed6(seq)).extension_headers(1 + usize::from(seq % 2)),
        24 => ipv6(p0.dut_ipv6).with_l4(L4::Echo {
            ident: 7,
            seq_no: seq,
        }),
        _ => {
            return arp_request(
                from,
                Ipv4Addr::new(198, 18, 0, 100 + (seq % 100) as u8),
                p0.dut_ipv4,
            );
        }
    };
    if random.below(30) == 0 && matches!(builder.l3, L3::Ipv4 { .. }) {
        builder = builder.with_l3(L3::Ipv4 {
            src: Ipv4Addr::new(127, 0, 0, 1),
            dst: host(ROUTED),
        });
    }
    let mut frame = builder.build();
    if frame[12..14] == [0x08, 0x00] {
        frame[18..20].copy_from_slice(&seq.to_be_bytes());
        fill_ipv4_checksum(&mut frame);
        match random.below(40) {
            // A bad header checksum.
            0 => frame[24] ^= 0x55,
            // An option (IHL 6): the router's policy drops it, on either path.
            1 => frame[14] = 0x46,
            _ => {}
        }
    }
    frame
}

/// A byte of `seq` mixed (destinations spread over the prefix).
fn random_byte(seq: u16, salt: u32) -> u8 {
    (u32::from(seq).wrapping_mul(2_654_435_761).rotate_left(salt) >> 24) as u8
}

/// Rewrites the IPv4 header checksum of an untagged frame.
fn fill_ipv4_checksum(frame: &mut [u8]) {
    frame[24..26].copy_from_slice(&[0, 0]);
    let sum: u32 = frame[14..34]
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    let folded = (sum & 0xffff) + (sum >> 16);
    let folded = (folded & 0xffff) + (folded >> 16);
    frame[24..26].copy_from_slice(&(!(folded as u16)).to_be_bytes());
}

/// Whether `frame` is the router's ARP request (compared by count: it retries on a timer).
fn is_arp_request(frame: &[u8]) -> bool {
    frame.len() >= 22 && frame[12..14] == [0x08, 0x06] && frame[20..22] == [0, 1]
}

/// Whether `frame` is the test's or the router's, not one of the lab kernels' own (IPv6
/// router solicitations, MLD, neighbour discovery) nor the router's neighbour discovery:
/// IPv4 and ARP, and IPv6 to a unicast address from one that is not link-local, other than
/// neighbour discovery (ICMPv6 133 to 137).
fn is_ours(frame: &[u8]) -> bool {
    match frame.get(12..14) {
        Some([0x08, 0x00] | [0x08, 0x06]) => true,
        Some([0x86, 0xdd]) if frame.len() >= 55 => {
            let link_local = frame[22] == 0xfe && frame[23] & 0xc0 == 0x80;
            let discovery = frame[20] == 58 && (133..=137).contains(&frame[54]);
            frame[38] != 0xff && !link_local && !discovery
        }
        _ => false,
    }
}

/// What each tester port received: the frames, sorted, and the ARP requests counted.
struct Received {
    frames: [Vec<Vec<u8>>; 2],
    arp_requests: [usize; 2],
    out: String,
}

/// Sends `mix` from t0 through a router with `fast_path` and `[router] fib = fib`, one frame at
/// a time.
fn run(prefix: &str, fast_path: &str, fib: &str, seed: u64, count: u16) -> Option<Received> {
    let (lab, dir) = lab_with(prefix, 2, 1)?;
    for pair in 0..2 {
        receive_with_napi(&lab, pair);
    }
    let socket = dir.join("ctl.sock");
    let config =
        router_config(&lab, fast_path, &socket) + &format!("\n[router]\nfib = \"{fib}\"\n");
    let mut switch = Switch::start(&lab, &config, &dir);
    wait_for_control(&socket);
    let mut pool = FramePool::new(8192, 2048).unwrap();
    let mut ports: Vec<AfPacketPort> = (0..2).map(|pair| tester_port(&lab, pair)).collect();
    let mut random = Random(seed);
    let mut got: [Vec<Vec<u8>>; 2] = [Vec::new(), Vec::new()];
    let mut collect = |ports: &mut Vec<AfPacketPort>, pool: &mut FramePool| {
        for (index, tester) in ports.iter_mut().enumerate() {
            got[index].extend(receive(tester, pool).into_iter().filter(|f| is_ours(f)));
        }
    };
    for seq in 0..count {
        let frame = mix_frame(&lab, &mut random, seq);
        send(&mut ports[0], &mut pool, std::slice::from_ref(&frame));
        // One frame in the router's hands at a time, as in the bridge's differential test.
        std::thread::sleep(Duration::from_millis(5));
        collect(&mut ports, &mut pool);
    }
    std::thread::sleep(Duration::from_millis(300));
    collect(&mut ports, &mut pool);
    let (success, out) = switch.interrupt();
    assert!(success && out.contains("conservation holds"), "{out}");
    let mut arp_requests = [0; 2];
    for (index, frames) in got.iter_mut().enumerate() {
        arp_requests[index] = frames.iter().filter(|f| is_arp_request(f)).count();
        frames.retain(|f| !is_arp_request(f));
        frames.sort();
    }
    Some(Received {
        frames: got,
        arp_requests,
        out,
    })
}

#[test]
fn the_router_on_the_fast_path_gives_the_same_bytes_and_errors_as_in_user_space() {
    let _alone = alone();
    const SEED: u64 = 0x0005_eed0_f0a7;
    const COUNT: u16 = 400;
    let Some(pipeline) = run("wsfru", "off", "dir24", SEED, COUNT) else {
        return;
    };
    let Some(fast) = run("wsfrx", "xdp", "dir24", SEED, COUNT) else {
        return;
    };
    // With Poptrie in user space ([router] fib = "trie") the kernel keeps its DIR-24-8 copy:
    // the same bytes again.
    let Some(trie) = run("wsfrt", "xdp", "trie", SEED, COUNT) else {
        return;
    };
    for (other, what) in [(&fast, "fast path"), (&trie, "fast path, fib = trie")] {
        for port in 0..2 {
            assert_eq!(
                other.frames[port].len(),
                pipeline.frames[port].len(),
                "t{port}: frames received, {what} against user space\n{}",
                other.out
            );
            if let Some(i) = (0..other.frames[port].len())
                .find(|&i| other.frames[port][i] != pipeline.frames[port][i])
            {
                panic!(
                    "t{port}, frame {i} differs:\n {what}  {:02x?}\n user space {:02x?}",
                    other.frames[port][i], pipeline.frames[port][i]
                );
            }
        }
    }
    // The user-space cases happened on both paths: Time Exceeded and Unreachable (ICMP types
    // 11 and 3) back to t0, echo and ARP replies, the router's ARP requests on t1.
    let icmp_type =
        |frame: &Vec<u8>| (frame[12..14] == [8, 0] && frame[23] == 1).then(|| frame[34]);
    for wanted in [0u8, 3, 11] {
        assert!(
            fast.frames[0].iter().any(|f| icmp_type(f) == Some(wanted)),
            "no ICMP type {wanted} back to t0"
        );
    }
    // And for IPv6: Time Exceeded, Unreachable and echo replies (ICMPv6 3, 1, 129), and
    // forwarded frames.
    let icmp6_type =
        |frame: &Vec<u8>| (frame[12..14] == [0x86, 0xdd] && frame[20] == 58).then(|| frame[54]);
    for wanted in [1u8, 3, 129] {
        assert!(
            fast.frames[0].iter().any(|f| icmp6_type(f) == Some(wanted)),
            "no ICMPv6 type {wanted} back to t0"
        );
    }
    assert!(
        fast.frames[1].iter().any(|f| is_udp6_to(f, TEST_PORT)),
        "no IPv6 forwarded"
    );
    assert!(
        fast.frames[0].iter().any(|f| f[12..14] == [8, 6]),
        "no ARP reply"
    );
    assert!(fast.arp_requests[1] > 0 && pipeline.arp_requests[1] > 0);
    // The kernel forwarded most of the routed frames, and left the rest to user space.
    let row = fast_path_row(&fast.out, "p0");
    let forwarded = row[0];
    let to_user: u64 = row[2..].iter().sum();
    eprintln!(
        "{} and {} frames received; {forwarded} forwarded by the kernel, {to_user} to user space",
        fast.frames[0].len(),
        fast.frames[1].len()
    );
    assert!(forwarded >= u64::from(COUNT) / 4, "{}", fast.out);
    assert!(to_user >= u64::from(COUNT) / 4, "{}", fast.out);
}

#[test]
fn routes_changed_by_ctl_take_effect_in_the_kernel_before_the_reply() {
    let _alone = alone();
    let Some((lab, dir)) = lab_with("wsfrc", 2, 1) else {
        return;
    };
    for pair in 0..2 {
        receive_with_napi(&lab, pair);
    }
    let socket = dir.join("ctl.sock");
    let mut switch = Switch::start(&lab, &router_config(&lab, "xdp", &socket), &dir);
    wait_for_control(&socket);
    let (p0, p1) = (&lab.pairs[0], &lab.pairs[1]);
    let mut pool = FramePool::new(4096, 2048).unwrap();
    let (mut t0, mut t1) = (tester_port(&lab, 0), tester_port(&lab, 1));
    let frames: Vec<Vec<u8>> = (0..8u8)
        .map(|i| {
            let mut frame = FrameBuilder::ipv4_udp()
                .macs(EthernetAddress(p0.tester_mac), EthernetAddress(p0.dut_mac))
                .with_l3(L3::Ipv4 {
                    src: p0.tester_ipv4,
                    dst: Ipv4Addr::new(203, 0, 113, i),
                })
                .with_l4(L4::Udp {
                    src_port: 1024,
                    dst_port: TEST_PORT,
                })
                .build();
            fill_ipv4_checksum(&mut frame);
            frame
        })
        .collect();
    let kernel_forwarded = |out: &str| fast_path_row(out, "p0")[0];
    let ok = |words: &[&str]| {
        let (success, reply) = ctl_at(&socket, words);
        assert!(success, "ctl {words:?}: {reply}");
    };

    // No route: Unreachable from user space, nothing to t1.
    send(&mut t0, &mut pool, &frames);
    let errors = receive_kept(&mut t0, &mut pool, 8, |f| {
        f.len() > 34 && f[23] == 1 && f[34] == 3
    });
    assert_eq!(errors.len(), 8, "Destination Unreachable for every frame");

    // Added: the kernel forwards, byte for byte as the router rewrites.
    let via = p1.tester_ipv4.to_string();
    ok(&["route", "add", "203.0.113.0/24", "via", &via]);
    send(&mut t0, &mut pool, &frames);
    let got = receive_all(&mut t1, &mut pool, 8, TEST_PORT);
    let want: Vec<Vec<u8>> = frames
        .iter()
        .map(|frame| {
            let mut out = frame.clone();
            out[0..6].copy_from_slice(&p1.tester_mac);
            out[6..12].copy_from_slice(&p1.dut_mac);
            out[22] -= 1;
            fill_ipv4_checksum(&mut out);
            out
        })
        .collect();
    assert_same(&got, &want);

    // Removed: Unreachable again at once; the kernel forwards nothing more.
    ok(&["route", "del", "203.0.113.0/24"]);
    send(&mut t0, &mut pool, &frames);
    let errors = receive_kept(&mut t0, &mut pool, 8, |f| {
        f.len() > 34 && f[23] == 1 && f[34] == 3
    });
    assert_eq!(errors.len(), 8, "Destination Unreachable after route del");
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        receive(&mut t1, &mut pool)
            .iter()
            .all(|f| !is_udp_to(f, TEST_PORT)),
        "a frame was forwarded by a removed route"
    );

    // TTL 1 on a route the kernel has: Time Exceeded from user space.
    let mut expiring = FrameBuilder::ipv4_udp()
        .macs(EthernetAddress(p0.tester_mac), EthernetAddress(p0.dut_mac))
        .with_l3(L3::Ipv4 {
            src: p0.tester_ipv4,
            dst: Ipv4Addr::new(ROUTED[0], ROUTED[1], 1, 1),
        })
        .ttl(1)
        .build();
    fill_ipv4_checksum(&mut expiring);
    send(&mut t0, &mut pool, &[expiring]);
    let exceeded = receive_kept(&mut t0, &mut pool, 1, |f| {
        f.len() > 34 && f[23] == 1 && f[34] == 11
    });
    assert_eq!(exceeded.len(), 1, "Time Exceeded for TTL 1");

    let (success, out) = switch.interrupt();
    assert!(success && out.contains("conservation holds"), "{out}");
    assert_eq!(kernel_forwarded(&out), 8, "{out}");
}

#[test]
fn a_million_routes_load_behind_a_closed_gate_while_frames_keep_crossing() {
    let _alone = alone();
    let Some((lab, dir)) = lab_with("wsfrl", 2, 1) else {
        return;
    };
    for pair in 0..2 {
        receive_with_napi(&lab, pair);
    }
    let socket = dir.join("ctl.sock");
    let mut switch = Switch::start(&lab, &router_config(&lab, "xdp", &socket), &dir);
    let (p0, p1) = (&lab.pairs[0], &lab.pairs[1]);
    // A million /24s from 11.0.0.0 up, and the routed prefix; 198.20.0.0/16 (the silent
    // gateway's) is not in the file, so the load removes it.
    let file = million_routes(&dir, p1.tester_ipv4);
    wait_for_control(&socket);

    let mut pool = FramePool::new(4096, 2048).unwrap();
    let (mut t0, mut t1) = (tester_port(&lab, 0), tester_port(&lab, 1));
    let frame_to = |dst: Ipv4Addr| {
        let mut frame = FrameBuilder::ipv4_udp()
            .macs(EthernetAddress(p0.tester_mac), EthernetAddress(p0.dut_mac))
            .with_l3(L3::Ipv4 {
                src: p0.tester_ipv4,
                dst,
            })
            .with_l4(L4::Udp {
                src_port: 1024,
                dst_port: TEST_PORT,
            })
            .build();
        fill_ipv4_checksum(&mut frame);
        frame
    };
    let routed = vec![frame_to(Ipv4Addr::new(ROUTED[0], ROUTED[1], 0, 1)); 4];
    send(&mut t0, &mut pool, &routed);
    assert_eq!(receive_all(&mut t1, &mut pool, 4, TEST_PORT).len(), 4);

    // Frames every millisecond while the load runs; every one must cross.
    let mut load = std::process::Command::new(env!("CARGO_BIN_EXE_wirespeed"))
        .args(["ctl", "--socket"])
        .arg(&socket)
        .args(["route", "load"])
        .arg(&file)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let (mut sent, mut arrived) = (0, 0);
    let mut last = started;
    let mut longest_gap = Duration::ZERO;
    // Until a second after the load answered.
    let mut answered = None;
    while answered.is_none_or(|at: std::time::Instant| at.elapsed() < Duration::from_secs(1)) {
        if answered.is_none() && load.try_wait().unwrap().is_some() {
            answered = Some(std::time::Instant::now());
        }
        send(&mut t0, &mut pool, &routed[..1]);
        sent += 1;
        std::thread::sleep(Duration::from_millis(1));
        let now = receive(&mut t1, &mut pool)
            .into_iter()
            .filter(|f| is_udp_to(f, TEST_PORT))
            .count();
        if now > 0 {
            longest_gap = longest_gap.max(last.elapsed());
            last = std::time::Instant::now();
            arrived += now;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "the load never ended"
        );
    }
    let output = load.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    arrived += receive_all(&mut t1, &mut pool, sent - arrived, TEST_PORT).len();
    println!(
        "{sent} frames sent during the load and after, {arrived} arrived, longest gap \
         {longest_gap:?}"
    );
    assert_eq!(arrived, sent, "frames were lost during the load");
    assert!(
        longest_gap < Duration::from_millis(500),
        "a gap of {longest_gap:?}"
    );

    // The mirror's thread takes the routes in behind the closed gate (seconds in a debug
    // build); once it opens, a loaded /24 forwards in the kernel.
    let loaded = frame_to(Ipv4Addr::new(11, 0, 7, 1));
    let answered = answered.unwrap_or_else(std::time::Instant::now);
    loop {
        let before = kernel_received(&socket);
        send(&mut t0, &mut pool, std::slice::from_ref(&loaded));
        assert_eq!(receive_all(&mut t1, &mut pool, 1, TEST_PORT).len(), 1);
        if kernel_received(&socket) > before {
            break;
        }
        assert!(
            answered.elapsed() < Duration::from_secs(120),
            "the kernel never took the loaded routes"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    println!(
        "the kernel forwards by the loaded routes {:?} after the load's reply",
        answered.elapsed()
    );
    // Its routes are the loaded ones: the loaded /24 forwards in the kernel, the removed
    // prefix gets Unreachable from user space.
    let before = kernel_received(&socket);
    send(&mut t0, &mut pool, &vec![loaded; 8]);
    assert_eq!(receive_all(&mut t1, &mut pool, 8, TEST_PORT).len(), 8);
    assert_eq!(
        kernel_received(&socket) - before,
        8,
        "forwarded by the kernel"
    );
    let removed = frame_to(Ipv4Addr::new(UNRESOLVED[0], UNRESOLVED[1], 0, 1));
    send(&mut t0, &mut pool, &[removed]);
    let errors = receive_kept(&mut t0, &mut pool, 1, |f| {
        f.len() > 34 && f[23] == 1 && f[34] == 3
    });
    assert_eq!(
        errors.len(),
        1,
        "Unreachable for the prefix the load removed"
    );
    let (success, out) = switch.interrupt();
    assert!(success && out.contains("conservation holds"), "{out}");
}

/// Writes a route file of a million /24s from 11.0.0.0 up and [`ROUTED`], all via `via`.
fn million_routes(dir: &Path, via: Ipv4Addr) -> std::path::PathBuf {
    let file = dir.join("million.routes");
    let mut text = String::with_capacity(1_000_000 * 32);
    for i in 0..1_000_000u32 {
        let [a, b, c, _] = (0x0b00_0000u32 + (i << 8)).to_be_bytes();
        text.push_str(&format!("{a}.{b}.{c}.0/24 via {via}\n"));
    }
    text.push_str(&format!("{}.{}.0.0/16 via {via}\n", ROUTED[0], ROUTED[1]));
    std::fs::write(&file, text).unwrap();
    file
}

#[test]
fn a_switch_stopped_while_the_kernel_takes_a_route_load_exits_at_once() {
    let _alone = alone();
    let Some((lab, dir)) = lab_with("wsfrs", 2, 1) else {
        return;
    };
    let socket = dir.join("ctl.sock");
    let mut switch = Switch::start(&lab, &router_config(&lab, "xdp", &socket), &dir);
    let file = million_routes(&dir, lab.pairs[1].tester_ipv4);
    wait_for_control(&socket);
    let (success, reply) = ctl_at(&socket, &["route", "load", &file.display().to_string()]);
    assert!(success, "{reply}");
    // The mirror's thread now writes a million routes into the kernel (seconds in a debug
    // build); the switch must not wait for it to finish.
    let started = std::time::Instant::now();
    let (success, out) = switch.interrupt();
    println!("stopped in {:?}", started.elapsed());
    assert!(success && out.contains("conservation holds"), "{out}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the switch took {:?} to stop",
        started.elapsed()
    );
}

/// The frames the kernel forwarded, as `ctl show counters` has them (the `rx_packets` row's
/// "fast path" column, after the one worker's).
fn kernel_received(socket: &Path) -> u64 {
    let (success, text) = ctl_at(socket, &["show", "counters"]);
    assert!(success, "{text}");
    text.lines()
        .find(|line| line.starts_with("rx_packets "))
        .and_then(|line| line.split_whitespace().nth(2))
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("no rx_packets row with a fast path column:\n{text}"))
}

/// An ARP reply from `sender` at `mac` to the router's port `pair`.
fn arp_reply(lab: &Testbed, pair: usize, sender: Ipv4Addr, mac: [u8; 6]) -> Vec<u8> {
    let port = &lab.pairs[pair];
    let mut frame = arp_request(EthernetAddress(mac), sender, port.dut_ipv4);
    frame[0..6].copy_from_slice(&port.dut_mac);
    frame[20..22].copy_from_slice(&[0, 2]);
    frame[32..38].copy_from_slice(&port.dut_mac);
    frame
}

#[test]
fn a_neighbour_learned_or_changed_reaches_the_kernel_with_its_batch() {
    let _alone = alone();
    let Some((lab, dir)) = lab_with("wsfrn", 2, 1) else {
        return;
    };
    for pair in 0..2 {
        receive_with_napi(&lab, pair);
    }
    let socket = dir.join("ctl.sock");
    let mut switch = Switch::start(&lab, &router_config(&lab, "xdp", &socket), &dir);
    wait_for_control(&socket);
    let p0 = &lab.pairs[0];
    let mut pool = FramePool::new(4096, 2048).unwrap();
    let (mut t0, mut t1) = (tester_port(&lab, 0), tester_port(&lab, 1));
    let frame = |host: u8| {
        let mut frame = FrameBuilder::ipv4_udp()
            .macs(EthernetAddress(p0.tester_mac), EthernetAddress(p0.dut_mac))
            .with_l3(L3::Ipv4 {
                src: p0.tester_ipv4,
                dst: Ipv4Addr::new(UNRESOLVED[0], UNRESOLVED[1], 0, host),
            })
            .with_l4(L4::Udp {
                src_port: 1024,
                dst_port: TEST_PORT,
            })
            .build();
        fill_ipv4_checksum(&mut frame);
        frame
    };
    let gateway = Ipv4Addr::new(198, 18, 1, SILENT_GATEWAY);
    let first_mac = [2, 0x77, 0, 0, 0, 1];
    let second_mac = [2, 0x77, 0, 0, 0, 2];

    // The gateway is unknown: the router holds the frame and asks for it.
    send(&mut t0, &mut pool, &[frame(0)]);
    let asked = receive_kept(&mut t1, &mut pool, 1, |f| {
        is_arp_request(f) && f[38..42] == gateway.octets()
    });
    assert_eq!(asked.len(), 1, "an ARP request for the gateway");
    // Its answer releases the frame and teaches the kernel.
    send(
        &mut t1,
        &mut pool,
        &[arp_reply(&lab, 1, gateway, first_mac)],
    );
    let released = receive_all(&mut t1, &mut pool, 1, TEST_PORT);
    assert_eq!(released.len(), 1, "the held frame");
    assert_eq!(released[0][0..6], first_mac);
    let frames: Vec<Vec<u8>> = (1..=8).map(frame).collect();
    for mac in [first_mac, second_mac] {
        if mac == second_mac {
            // The gateway moves to another MAC: the one reply teaches user space, and the
            // kernel with it, before any other frame reaches user space. The pause is long
            // for the worker (which takes the reply in microseconds) and short enough that
            // the lab kernels' own frames rarely bring user space another batch meanwhile
            // (without the sync after each batch, this failed three runs of three).
            send(&mut t1, &mut pool, &[arp_reply(&lab, 1, gateway, mac)]);
            std::thread::sleep(Duration::from_millis(50));
        }
        let before = kernel_received(&socket);
        send(&mut t0, &mut pool, &frames);
        let got = receive_all(&mut t1, &mut pool, 8, TEST_PORT);
        assert_eq!(got.len(), 8);
        assert!(got.iter().all(|f| f[0..6] == mac), "to {mac:02x?}");
        assert_eq!(
            kernel_received(&socket) - before,
            8,
            "forwarded by the kernel"
        );
    }
    let (success, out) = switch.interrupt();
    assert!(success && out.contains("conservation holds"), "{out}");
}

#[test]
fn an_acl_loaded_at_run_time_takes_the_router_off_the_kernel_path() {
    let _alone = alone();
    let Some((lab, dir)) = lab_with("wsfra", 2, 1) else {
        return;
    };
    for pair in 0..2 {
        receive_with_napi(&lab, pair);
    }
    let socket = dir.join("ctl.sock");
    let mut switch = Switch::start(&lab, &router_config(&lab, "xdp", &socket), &dir);
    wait_for_control(&socket);
    let p0 = &lab.pairs[0];
    let mut pool = FramePool::new(4096, 2048).unwrap();
    let (mut t0, mut t1) = (tester_port(&lab, 0), tester_port(&lab, 1));
    let frames: Vec<Vec<u8>> = (0..8u8)
        .map(|i| {
            let mut frame = FrameBuilder::ipv4_udp()
                .macs(EthernetAddress(p0.tester_mac), EthernetAddress(p0.dut_mac))
                .with_l3(L3::Ipv4 {
                    src: p0.tester_ipv4,
                    dst: Ipv4Addr::new(ROUTED[0], ROUTED[1], 0, i),
                })
                .with_l4(L4::Udp {
                    src_port: 1024,
                    dst_port: TEST_PORT,
                })
                .build();
            fill_ipv4_checksum(&mut frame);
            frame
        })
        .collect();
    let before = kernel_received(&socket);
    send(&mut t0, &mut pool, &frames);
    assert_eq!(receive_all(&mut t1, &mut pool, 8, TEST_PORT).len(), 8);
    assert_eq!(
        kernel_received(&socket) - before,
        8,
        "forwarded by the kernel"
    );

    // The ACL denies the flow; only user space applies it, so the kernel stops forwarding
    // before the reply, and every frame is dropped.
    let acl = dir.join("deny.acl");
    std::fs::write(&acl, format!("deny proto=udp dst_port={TEST_PORT}\n")).unwrap();
    let (success, reply) = ctl_at(&socket, &["acl", "load", acl.to_str().unwrap()]);
    assert!(success, "{reply}");
    let before = kernel_received(&socket);
    send(&mut t0, &mut pool, &frames);
    let leaked = receive_during(&mut t1, &mut pool, Duration::from_millis(300), |f| {
        is_udp_to(f, TEST_PORT)
    });
    assert!(leaked.is_empty(), "{} denied frames crossed", leaked.len());
    assert_eq!(
        kernel_received(&socket),
        before,
        "the kernel forwarded after the ACL"
    );
    let (success, out) = switch.interrupt();
    assert!(success && out.contains("conservation holds"), "{out}");
}
