//! Every app changed at run time through `wirespeed ctl`, end to end: a `wirespeed switch` over
//! AF_XDP in a lab's DuT namespace, frames sent and checked byte for byte on the tester side.
//!
//! * router: `route add` makes an unroutable destination forward (MACs rewritten, TTL
//!   decremented), an ACL loaded with `acl load` drops only the flow it denies, `route del`
//!   stops the rest;
//! * router: a million routes loaded with `route load` while traffic flows, showing how many
//!   packets the worker forwarded during the load and the longest gap between two of them;
//! * router: IPv6 forwarded by a route added with `route add` (MACs rewritten, hop limit
//!   decremented), through the fused forwarding loop;
//! * bridge: flooding stays inside a VLAN, learning turns flooding into unicast, `mac flush`
//!   floods again;
//! * openflow: a table that drops everything forwards once `flow add` installs a flow, and
//!   `flow del` takes it away again.
//!
//! Each test skips with a printed reason where namespaces cannot be made (not root), and runs
//! in CI, which is root.

use std::io::Write;
use std::net::Ipv6Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use wirespeed_io::afpacket::AfPacketPort;
use wirespeed_lab::Testbed;
use wirespeed_packet::FramePool;
use wirespeed_packet::wire::{EthernetAddress, ipv4};
use wirespeed_testkit::frames::{FrameBuilder, L3, L4};
use wirespeed_testkit::ports::send;

mod common;
use common::*;

/// UDP port of the frames an ACL denies in the router test; the others go to [`TEST_PORT`].
const DENIED_PORT: u16 = 53;

/// How long a test waits to be sure that frames do not arrive.
const QUIET: Duration = Duration::from_millis(300);

fn router_config(lab: &Testbed, socket: &Path, routes: &str) -> String {
    let (p0, p1) = (&lab.pairs[0], &lab.pairs[1]);
    format!(
        "[switch]\napp = \"router\"\ncontrol_socket = \"{}\"\n\n\
         [[port]]\nname = \"p0\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n\
         [[port]]\nname = \"p1\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n\
         [[router.interface]]\nport = \"p0\"\naddresses = [\"{}/24\", \"{}/64\"]\n\n\
         [[router.interface]]\nport = \"p1\"\naddresses = [\"{}/24\", \"{}/64\"]\n\n\
         [[router.neighbour]]\nport = \"p1\"\naddress = \"{}\"\nmac = \"{}\"\n\n\
         [[router.neighbour]]\nport = \"p1\"\naddress = \"{}\"\nmac = \"{}\"\n{routes}",
        socket.display(),
        p0.dut_if,
        p1.dut_if,
        p0.dut_ipv4,
        p0.dut_ipv6,
        p1.dut_ipv4,
        p1.dut_ipv6,
        p1.tester_ipv4,
        mac_text(p1.tester_mac),
        p1.tester_ipv6,
        mac_text(p1.tester_mac)
    )
}

/// The generator's frame as the router sends it to the tester's t1.
fn routed(lab: &Testbed, frame: &[u8]) -> Vec<u8> {
    let p1 = &lab.pairs[1];
    let mut out = frame.to_vec();
    out[0..6].copy_from_slice(&p1.tester_mac);
    out[6..12].copy_from_slice(&p1.dut_mac);
    let mut ip = ipv4::Packet::new_checked(&mut out[14..]).unwrap();
    let ttl = ip.ttl();
    ip.set_ttl(ttl - 1);
    ip.fill_checksum();
    out
}

/// The IPv6 frame `frame` as the router sends it to the tester's t1.
fn routed6(lab: &Testbed, frame: &[u8]) -> Vec<u8> {
    let p1 = &lab.pairs[1];
    let mut out = frame.to_vec();
    out[0..6].copy_from_slice(&p1.tester_mac);
    out[6..12].copy_from_slice(&p1.dut_mac);
    out[14 + 7] -= 1;
    out
}

/// A router from [`router_config`] over AF_XDP in a fresh lab named `prefix`, its control
/// socket up, and the tester's two ports. Fields drop in order: the switch before the lab.
struct RouterRun {
    switch: Switch,
    socket: PathBuf,
    pool: FramePool,
    t0: AfPacketPort,
    t1: AfPacketPort,
    dir: PathBuf,
    lab: Testbed,
}

/// `None` (after printing why) where a lab cannot be built.
fn start_router(prefix: &str) -> Option<RouterRun> {
    let (lab, dir) = lab(prefix, 1)?;
    let socket = dir.join("ctl.sock");
    let switch = Switch::start(&lab, &router_config(&lab, &socket, ""), &dir);
    wait_for_control(&socket);
    Some(RouterRun {
        switch,
        socket,
        pool: FramePool::new(4096, 2048).unwrap(),
        t0: tester_port(&lab, 0),
        t1: tester_port(&lab, 1),
        dir,
        lab,
    })
}

fn expect_ok(result: (bool, String)) -> String {
    assert!(result.0, "ctl failed: {}", result.1);
    result.1
}

fn stop(mut switch: Switch) {
    let (success, out) = switch.interrupt();
    assert!(success && out.contains("conservation holds"), "{out}");
}

#[test]
fn router_routes_and_acl_change_at_run_time() {
    let Some(RouterRun {
        switch,
        socket,
        mut pool,
        mut t0,
        mut t1,
        dir,
        lab,
    }) = start_router("wsapr")
    else {
        return;
    };
    let input = frames(50);
    let denied = frames_to(50, DENIED_PORT);

    // No route to the generator's destinations (198.19.0.0/16) yet.
    send(&mut t0, &mut pool, &input);
    let got = receive_during(&mut t1, &mut pool, QUIET, |f| is_udp_to(f, TEST_PORT));
    assert!(
        got.is_empty(),
        "{} frames crossed without a route",
        got.len()
    );

    let via = lab.pairs[1].tester_ipv4.to_string();
    expect_ok(ctl_at(
        &socket,
        &["route", "add", "198.19.0.0/16", "via", &via],
    ));
    let routes = expect_ok(ctl_at(&socket, &["route", "show"]));
    assert!(
        routes.contains("198.19.0.0/16") && routes.contains(&via),
        "{routes}"
    );
    send(&mut t0, &mut pool, &input);
    let expected: Vec<Vec<u8>> = input.iter().map(|f| routed(&lab, f)).collect();
    assert_same(
        &receive_all(&mut t1, &mut pool, expected.len(), TEST_PORT),
        &expected,
    );

    // An ACL loaded at run time drops exactly the flow it denies.
    let acl = dir.join("deny-dns.acl");
    std::fs::write(&acl, "# the test's ACL\ndeny proto=udp dst_port=53\n").unwrap();
    let loaded = expect_ok(ctl_at(&socket, &["acl", "load", acl.to_str().unwrap()]));
    assert!(loaded.contains("rules"), "{loaded}");
    send(&mut t0, &mut pool, &denied);
    send(&mut t0, &mut pool, &input);
    assert_same(
        &receive_all(&mut t1, &mut pool, expected.len(), TEST_PORT),
        &expected,
    );
    let leaked = receive_during(&mut t1, &mut pool, QUIET, |f| is_udp_to(f, DENIED_PORT));
    assert!(leaked.is_empty(), "{} denied frames crossed", leaked.len());
    let counters = expect_ok(ctl_at(&socket, &["show", "counters"]));
    let denied_line = counters
        .lines()
        .find(|l| l.contains("drop.acl"))
        .unwrap_or_else(|| panic!("no ACL drops counted:\n{counters}"));
    assert!(denied_line.trim_end().ends_with("50"), "{denied_line}");

    // A bad ACL is refused with the rule's line; the one in use stays.
    std::fs::write(&acl, "permit\ndeny dst_port=lots\n").unwrap();
    let (ok, out) = ctl_at(&socket, &["acl", "load", acl.to_str().unwrap()]);
    assert!(
        !ok && out.contains("deny-dns.acl:2: field dst_port"),
        "{out}"
    );
    send(&mut t0, &mut pool, &denied);
    let leaked = receive_during(&mut t1, &mut pool, QUIET, |f| is_udp_to(f, DENIED_PORT));
    assert!(leaked.is_empty(), "{} denied frames crossed", leaked.len());

    // A route file means what it says: each refusal names the file's line, and the routes in
    // use stay (198.19.0.0/16 still routes below).
    let file = dir.join("routes.txt");
    let own = lab.pairs[1].dut_ipv4.to_string();
    for (text, error) in [
        (
            format!("10.0.0.0/8 via {via}\n10.0.0.1/8 via {via}\n"),
            "routes.txt:2: `10.0.0.1/8` has host bits set".to_string(),
        ),
        (
            format!("10.0.0.0/8 via {via}\n\n10.0.0.0/8 via {via}\n"),
            "routes.txt:3: 10.0.0.0/8 is routed twice: line 1 routes it already".to_string(),
        ),
        (
            format!("# via the router itself\n10.0.0.0/8 via {own}\n"),
            format!("routes.txt:2: gateway {own} is an address of the router itself"),
        ),
    ] {
        std::fs::write(&file, text).unwrap();
        let (ok, out) = ctl_at(&socket, &["route", "load", file.to_str().unwrap()]);
        assert!(!ok && out.contains(&error) && out.contains("fix:"), "{out}");
    }
    send(&mut t0, &mut pool, &input);
    assert_same(
        &receive_all(&mut t1, &mut pool, expected.len(), TEST_PORT),
        &expected,
    );

    expect_ok(ctl_at(&socket, &["route", "del", "198.19.0.0/16"]));
    send(&mut t0, &mut pool, &input);
    let got = receive_during(&mut t1, &mut pool, QUIET, |f| is_udp_to(f, TEST_PORT));
    assert!(
        got.is_empty(),
        "{} frames crossed after route del",
        got.len()
    );
    let (ok, out) = ctl_at(
        &socket,
        &["route", "add", "198.20.0.0/16", "via", "192.0.2.1"],
    );
    assert!(
        !ok && out.contains("192.0.2.1") && out.contains("subnet"),
        "{out}"
    );
    stop(switch);
}

#[test]
fn router_forwards_ipv6_through_the_fused_loop() {
    let Some(RouterRun {
        switch,
        socket,
        mut pool,
        mut t0,
        mut t1,
        lab,
        ..
    }) = start_router("wsap6")
    else {
        return;
    };
    let (p0, p1) = (&lab.pairs[0], &lab.pairs[1]);
    let input: Vec<Vec<u8>> = (0..50u16)
        .map(|i| {
            FrameBuilder::ipv6_udp()
                .with_l3(L3::Ipv6 {
                    src: Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1),
                    dst: Ipv6Addr::new(0x2001, 0xdb8, 0x100, i, 0, 0, 0, 1),
                })
                .with_l4(L4::Udp {
                    src_port: 1000 + i,
                    dst_port: TEST_PORT,
                })
                .macs(EthernetAddress(p0.tester_mac), EthernetAddress(p0.dut_mac))
                .ttl(64)
                .payload_len(64)
                .build()
        })
        .collect();
    let via = p1.tester_ipv6.to_string();
    expect_ok(ctl_at(
        &socket,
        &["route", "add", "2001:db8:100::/48", "via", &via],
    ));
    // Twice: the first packets for the gateway build its adjacency in the stage passes.
    let expected: Vec<Vec<u8>> = input.iter().map(|f| routed6(&lab, f)).collect();
    for _ in 0..2 {
        send(&mut t0, &mut pool, &input);
        let got = receive_kept(&mut t1, &mut pool, input.len(), |f| {
            is_udp6_to(f, TEST_PORT)
        });
        assert_same(&got, &expected);
    }
    let counters = expect_ok(ctl_at(&socket, &["show", "counters"]));
    let fused = counters
        .lines()
        .find(|l| l.contains("fast_path.forwarded_ipv6"))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no fast_path.forwarded_ipv6 counter:\n{counters}"));
    assert!(
        fused >= 50,
        "the fused loop forwarded {fused} of 100 IPv6 packets:\n{counters}"
    );
    stop(switch);
}

#[test]
fn router_keeps_forwarding_while_a_million_routes_load() {
    let Some((lab, dir)) = lab("wsapl", 1) else {
        return;
    };
    let socket = dir.join("ctl.sock");
    let via = lab.pairs[1].tester_ipv4;
    let routes = format!("[[router.route]]\nprefix = \"198.19.0.0/16\"\nvia = [\"{via}\"]\n");
    let switch = Switch::start(&lab, &router_config(&lab, &socket, &routes), &dir);

    // A million /24s from 11.0.0.0 up, and the route the traffic needs.
    const ROUTES: u32 = 1_000_000;
    let file = dir.join("million.routes");
    let mut text = String::with_capacity(ROUTES as usize * 32);
    for i in 0..ROUTES {
        let [a, b, c, _] = (0x0b00_0000u32 + (i << 8)).to_be_bytes();
        text.push_str(&format!("{a}.{b}.{c}.0/24 via {via}\n"));
    }
    text.push_str(&format!("198.19.0.0/16 via {via}\n"));
    std::fs::File::create(&file)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .unwrap();
    drop(text);

    wait_for_control(&socket);
    let mut pool = FramePool::new(4096, 2048).unwrap();
    let (mut t0, mut t1) = (tester_port(&lab, 0), tester_port(&lab, 1));
    let input = frames(8);
    send(&mut t0, &mut pool, &input);
    assert_eq!(receive_all(&mut t1, &mut pool, 8, TEST_PORT).len(), 8);

    // Traffic every millisecond while `ctl route load` runs; arrivals are timed.
    let mut load = Command::new(env!("CARGO_BIN_EXE_wirespeed"))
        .args(["ctl", "--socket"])
        .arg(&socket)
        .args(["route", "load"])
        .arg(&file)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let mut last = started;
    let mut longest_gap = Duration::ZERO;
    let mut during = 0usize;
    let status = loop {
        if let Some(status) = load.try_wait().unwrap() {
            break status;
        }
        send(&mut t0, &mut pool, &input);
        std::thread::sleep(Duration::from_millis(1));
        let arrived = wirespeed_testkit::ports::receive(&mut t1, &mut pool)
            .into_iter()
            .filter(|f| is_udp_to(f, TEST_PORT))
            .count();
        if arrived > 0 {
            let now = Instant::now();
            longest_gap = longest_gap.max(now - last);
            last = now;
            during += arrived;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the load never ended"
        );
    };
    let load_time = started.elapsed();
    longest_gap = longest_gap.max(Instant::now() - last);
    let output = load.wait_with_output().unwrap();
    let reply = String::from_utf8_lossy(&output.stdout);
    assert!(
        status.success(),
        "{reply}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        reply.contains("routes_v4") && reply.contains("1000001"),
        "{reply}"
    );
    println!(
        "route load of {ROUTES} routes took {load_time:?}; {during} packets forwarded during it, \
         longest gap between arrivals {longest_gap:?}"
    );
    // The worker kept forwarding: packets crossed throughout, never a pause near the load's
    // length (the build runs on the control thread; the worker only swaps tables).
    assert!(during > 0, "nothing was forwarded during the load");
    assert!(
        longest_gap < Duration::from_millis(500).max(load_time / 4),
        "forwarding paused for {longest_gap:?} during a {load_time:?} load"
    );
    // The loaded table is in use, beside the interfaces' connected and local routes.
    let shown = expect_ok(ctl_at(&socket, &["show", "routes"]));
    let more = shown
        .lines()
        .find(|l| l.contains("more"))
        .unwrap_or_default();
    assert!(
        more.contains("... 990009 more"),
        "1000001 loaded + 4 connected + 4 local routes (IPv4 and IPv6), 10000 shown: {more}"
    );
    // The frames the loop sent last may still be on their way (a loaded machine): they are
    // taken first, so that the check counts only its own.
    receive_during(&mut t1, &mut pool, QUIET, |f| is_udp_to(f, TEST_PORT));
    send(&mut t0, &mut pool, &input);
    assert_eq!(receive_all(&mut t1, &mut pool, 8, TEST_PORT).len(), 8);
    stop(switch);
}

/// Whether `frame` carries VLAN tag `vid` over an IPv4/UDP frame to `dst_port`.
fn is_tagged_udp_to(frame: &[u8], vid: u16, dst_port: u16) -> bool {
    frame.len() >= 42
        && frame[12..14] == [0x81, 0x00]
        && u16::from_be_bytes([frame[14], frame[15]]) & 0x0fff == vid
        && frame[16..18] == [0x08, 0x00]
        && frame[27] == 17
        && frame[40..42] == dst_port.to_be_bytes()
}

/// An untagged frame from `src` to `dst` (UDP to [`TEST_PORT`]).
fn between(src: [u8; 6], dst: [u8; 6]) -> Vec<u8> {
    let mut frame = frames(1).remove(0);
    frame[0..6].copy_from_slice(&dst);
    frame[6..12].copy_from_slice(&src);
    frame
}

/// `frame` with an 802.1Q tag of `vid` after the MACs.
fn tagged(frame: &[u8], vid: u16) -> Vec<u8> {
    let mut out = frame[..12].to_vec();
    out.extend_from_slice(&[0x81, 0x00]);
    out.extend_from_slice(&vid.to_be_bytes());
    out.extend_from_slice(&frame[12..]);
    out
}

#[test]
fn bridge_floods_per_vlan_learns_and_floods_again_after_mac_flush() {
    // On veth under the default fast_path = "auto": the user-space path (the peers' NAPI
    // cannot be checked).
    let out = bridge_learns_floods_and_forgets("wsapb", false);
    assert!(out.is_none_or(|out| !out.contains("fast path (XDP")));
}

#[test]
fn bridge_on_the_xdp_fast_path_forwards_known_unicast_in_the_kernel_and_nothing_stale() {
    // The same frames and the same answers with fast_path = "xdp" (the tester's interfaces
    // receive with GRO, so a veth takes redirected frames): known unicast, with the trunk's
    // tag pushed and popped, is forwarded by the kernel, and after `mac flush` nothing is
    // forwarded by an entry user space no longer has.
    let Some(out) = bridge_learns_floods_and_forgets("wsapx", true) else {
        return;
    };
    assert!(out.contains("port p0: fast path xdp (native)"), "{out}");
    // A to B after learning (p0), A to C tagged (p0), C to A popped (p2).
    assert!(fast_path_row(&out, "p0")[0] >= 2, "{out}");
    assert!(fast_path_row(&out, "p2")[0] >= 1, "{out}");
}

/// Runs a three-port bridge (p0 and p1 access ports of VLAN 10, p2 a trunk of 10 and 20) with
/// or without the fast path through flooding, learning, VLAN tagging and `mac flush`, asserting
/// every frame out byte for byte; returns the switch's output (`None` without a lab).
fn bridge_learns_floods_and_forgets(prefix: &str, fast_path: bool) -> Option<String> {
    let (lab, dir) = lab_with(prefix, 3, 1)?;
    let socket = dir.join("ctl.sock");
    let fast_path_line = if fast_path {
        for pair in 0..3 {
            receive_with_napi(&lab, pair);
        }
        "fast_path = \"xdp\"\n"
    } else {
        ""
    };
    let config = format!(
        "[switch]\napp = \"bridge\"\ncontrol_socket = \"{}\"\n{fast_path_line}\n\
         [[port]]\nname = \"p0\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n\
         [[port]]\nname = \"p1\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n\
         [[port]]\nname = \"p2\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n\
         [[bridge.port]]\nname = \"p0\"\naccess = 10\n\n\
         [[bridge.port]]\nname = \"p1\"\naccess = 10\n\n\
         [[bridge.port]]\nname = \"p2\"\ntrunk = [10, 20]\n",
        socket.display(),
        lab.pairs[0].dut_if,
        lab.pairs[1].dut_if,
        lab.pairs[2].dut_if,
    );
    let mut switch = Switch::start(&lab, &config, &dir);
    wait_for_control(&socket);
    let mut pool = FramePool::new(4096, 2048).unwrap();
    let mut t = [0, 1, 2].map(|pair| tester_port(&lab, pair));
    let (a, b, c) = (
        [2, 0x57, 0x53, 0xaa, 0, 1],
        [2, 0x57, 0x53, 0xaa, 0, 2],
        [2, 0x57, 0x53, 0xaa, 0, 3],
    );
    let untagged = |f: &[u8]| is_udp_to(f, TEST_PORT);
    let in_vlan = |vid: u16| move |f: &[u8]| is_tagged_udp_to(f, vid, TEST_PORT);

    // VLAN 20 has one port: a frame from the trunk in VLAN 20 goes nowhere.
    send(&mut t[2], &mut pool, &[tagged(&between(c, a), 20)]);
    for port in &mut t[..2] {
        assert!(receive_during(port, &mut pool, QUIET, untagged).is_empty());
    }
    // A to unknown B in VLAN 10: flooded to p1 (untagged) and the trunk (tagged 10).
    let a_to_b = between(a, b);
    send(&mut t[0], &mut pool, std::slice::from_ref(&a_to_b));
    assert_same(
        &receive_during(&mut t[1], &mut pool, QUIET, untagged),
        std::slice::from_ref(&a_to_b),
    );
    assert_same(
        &receive_during(&mut t[2], &mut pool, QUIET, in_vlan(10)),
        &[tagged(&a_to_b, 10)],
    );
    // B answers from p1: learned; A to B is now unicast to p1 only.
    let b_to_a = between(b, a);
    send(&mut t[1], &mut pool, std::slice::from_ref(&b_to_a));
    assert_same(
        &receive_during(&mut t[0], &mut pool, QUIET, untagged),
        std::slice::from_ref(&b_to_a),
    );
    send(&mut t[0], &mut pool, std::slice::from_ref(&a_to_b));
    assert_same(
        &receive_during(&mut t[1], &mut pool, QUIET, untagged),
        std::slice::from_ref(&a_to_b),
    );
    assert!(receive_during(&mut t[2], &mut pool, QUIET, in_vlan(10)).is_empty());
    let macs = expect_ok(ctl_at(&socket, &["mac", "show"]));
    for (mac, port) in [(a, "p0"), (b, "p1"), (c, "p2")] {
        let line = macs.lines().find(|l| l.contains(&mac_text(mac)));
        assert!(line.is_some_and(|l| l.contains(port)), "{macs}");
    }
    // C on the trunk in VLAN 10 to A: learned; then both ways are known unicast, the tag
    // popped towards p0 and pushed towards p2.
    let c_to_a = between(c, a);
    send(&mut t[2], &mut pool, &[tagged(&c_to_a, 10)]);
    assert_same(
        &receive_during(&mut t[0], &mut pool, QUIET, untagged),
        std::slice::from_ref(&c_to_a),
    );
    send(&mut t[2], &mut pool, &[tagged(&c_to_a, 10)]);
    assert_same(
        &receive_during(&mut t[0], &mut pool, QUIET, untagged),
        std::slice::from_ref(&c_to_a),
    );
    assert!(receive_during(&mut t[1], &mut pool, QUIET, untagged).is_empty());
    let a_to_c = between(a, c);
    send(&mut t[0], &mut pool, std::slice::from_ref(&a_to_c));
    assert_same(
        &receive_during(&mut t[2], &mut pool, QUIET, in_vlan(10)),
        &[tagged(&a_to_c, 10)],
    );
    assert!(receive_during(&mut t[1], &mut pool, QUIET, untagged).is_empty());
    if fast_path {
        // One set of counters: the kernel's column beside the worker's, and each port's path.
        let counters = expect_ok(ctl_at(&socket, &["show", "counters"]));
        assert!(
            counters.contains("fast path") && counters.contains("fast_path.to_user.learn"),
            "{counters}"
        );
    }
    // Each port's path, and why.
    let ports = expect_ok(ctl_at(&socket, &["show", "ports"]));
    let path = if fast_path {
        "fast path xdp (native): known unicast"
    } else {
        "user-space path (no XDP fast path: port p0 is a veth"
    };
    assert!(ports.contains(path), "{ports}");
    // Flushed: A to B floods again.
    expect_ok(ctl_at(&socket, &["mac", "flush"]));
    send(&mut t[0], &mut pool, std::slice::from_ref(&a_to_b));
    assert_same(
        &receive_during(&mut t[1], &mut pool, QUIET, untagged),
        std::slice::from_ref(&a_to_b),
    );
    assert_same(
        &receive_during(&mut t[2], &mut pool, QUIET, in_vlan(10)),
        &[tagged(&a_to_b, 10)],
    );
    let (success, out) = switch.interrupt();
    assert!(success && out.contains("conservation holds"), "{out}");
    Some(out)
}

#[test]
fn openflow_forwards_what_a_flow_added_by_ctl_allows() {
    let Some((lab, dir)) = lab("wsapo", 1) else {
        return;
    };
    let socket = dir.join("ctl.sock");
    let config = format!(
        "[switch]\napp = \"openflow\"\ncontrol_socket = \"{}\"\n\n\
         [[port]]\nname = \"p0\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n\
         [[port]]\nname = \"p1\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n\
         [openflow]\ntables = 2\nmiss = \"drop\"\ncache_entries = 1024\n",
        socket.display(),
        lab.pairs[0].dut_if,
        lab.pairs[1].dut_if,
    );
    let switch = Switch::start(&lab, &config, &dir);
    wait_for_control(&socket);
    let mut pool = FramePool::new(4096, 2048).unwrap();
    let (mut t0, mut t1) = (tester_port(&lab, 0), tester_port(&lab, 1));
    let input = frames(40);
    send(&mut t0, &mut pool, &input);
    let untagged = |f: &[u8]| is_udp_to(f, TEST_PORT);
    assert!(receive_during(&mut t1, &mut pool, QUIET, untagged).is_empty());

    let to = mac_text(lab.pairs[1].tester_mac);
    let actions = format!("actions=set_field:eth_dst={to},output:p1");
    let flow = [
        "flow",
        "add",
        "priority=10",
        "in_port=p0",
        "ip_dst=198.19.0.0/16",
        "ip_proto=udp",
        actions.as_str(),
    ];
    expect_ok(ctl_at(&socket, &flow));
    send(&mut t0, &mut pool, &input);
    let expected: Vec<Vec<u8>> = input
        .iter()
        .map(|f| {
            let mut out = f.clone();
            out[0..6].copy_from_slice(&lab.pairs[1].tester_mac);
            out
        })
        .collect();
    assert_same(
        &receive_all(&mut t1, &mut pool, expected.len(), TEST_PORT),
        &expected,
    );
    let flows = expect_ok(ctl_at(&socket, &["flow", "show"]));
    assert!(
        flows.contains("in_port=p0") && flows.contains("output:p1") && flows.contains("40"),
        "{flows}"
    );
    let (ok, out) = ctl_at(&socket, &["flow", "add", "ip_dts=1.2.3.4", "actions=drop"]);
    assert!(
        !ok && out.contains("ip_dts") && out.contains("ip_dst"),
        "{out}"
    );

    let del = [
        "flow",
        "del",
        "priority=10",
        "in_port=p0",
        "ip_dst=198.19.0.0/16",
        "ip_proto=udp",
    ];
    expect_ok(ctl_at(&socket, &del));
    send(&mut t0, &mut pool, &input);
    assert!(receive_during(&mut t1, &mut pool, QUIET, untagged).is_empty());
    stop(switch);
}
