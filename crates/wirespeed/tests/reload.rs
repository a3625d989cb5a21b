//! Reloading a running router's configuration file, end to end: `wirespeed switch` over AF_XDP
//! in a lab's DuT namespace under steady traffic from the tester, the file edited, SIGHUP (or
//! `ctl reload`) sent, and every frame counted by the sequence number it carries.
//!
//! * a route added, a route removed and an ACL rule changed: not one frame of the traffic
//!   whose route and rules did not change is lost, and the changed traffic follows the old
//!   file before the signal and the new one once the reload is applied;
//! * a file with an error changes nothing (the log names its place) and the router forwards
//!   on; a changed `cores` or port is refused by its key as needing a restart, while the
//!   route beside it in the same file is applied.
//!
//! Each test skips with a printed reason where namespaces cannot be made (not root), and runs
//! in CI, which is root.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use wirespeed_io::afpacket::AfPacketPort;
use wirespeed_lab::Testbed;
use wirespeed_packet::FramePool;
use wirespeed_packet::wire::ipv4;
use wirespeed_testkit::ports::{receive, send};

mod common;
use common::*;

/// The traffic of the test, by what the reload does to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// To 198.19.0.1, UDP port 9: its route and the ACL's verdict never change.
    Unchanged,
    /// To 198.20.0.1: its route is removed by the reload.
    RouteRemoved,
    /// To 198.21.0.1: its route is added by the reload.
    RouteAdded,
    /// To 198.19.0.1, UDP port 53: denied before, permitted after.
    Permitted,
    /// To 198.19.0.1, UDP port 54: permitted before, denied after.
    Denied,
}

impl Kind {
    const ALL: [Kind; 5] = [
        Kind::Unchanged,
        Kind::RouteRemoved,
        Kind::RouteAdded,
        Kind::Permitted,
        Kind::Denied,
    ];

    fn destination(self) -> (Ipv4Addr, u16) {
        match self {
            Kind::Unchanged => (Ipv4Addr::new(198, 19, 0, 1), TEST_PORT),
            Kind::RouteRemoved => (Ipv4Addr::new(198, 20, 0, 1), TEST_PORT),
            Kind::RouteAdded => (Ipv4Addr::new(198, 21, 0, 1), TEST_PORT),
            Kind::Permitted => (Ipv4Addr::new(198, 19, 0, 1), 53),
            Kind::Denied => (Ipv4Addr::new(198, 19, 0, 1), 54),
        }
    }

    /// Whether the router forwards it under the old file (`false`) or the new one.
    fn forwarded(self, new: bool) -> bool {
        match self {
            Kind::Unchanged => true,
            Kind::RouteRemoved | Kind::Denied => !new,
            Kind::RouteAdded | Kind::Permitted => new,
        }
    }
}

/// Where a frame was sent: before the signal, while the reload ran, or once it was applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Old,
    Reloading,
    New,
}

/// Byte offset of the sequence number in the UDP payload of a test frame.
const SEQUENCE_AT: usize = 14 + 20 + 8;

/// A test frame of `kind` carrying `sequence` (UDP checksum 0: none, which IPv4 allows).
fn frame(kind: Kind, sequence: u32) -> Vec<u8> {
    let (dst, port) = kind.destination();
    let mut frame = frames_to(1, port).remove(0);
    frame[30..34].copy_from_slice(&dst.octets());
    frame[40..42].copy_from_slice(&[0, 0]);
    frame[SEQUENCE_AT..SEQUENCE_AT + 4].copy_from_slice(&sequence.to_be_bytes());
    ipv4::Packet::new_checked(&mut frame[14..])
        .unwrap()
        .fill_checksum();
    frame
}

/// The sequence number of a frame the router forwarded, if it is a test frame.
fn sequence(frame: &[u8]) -> Option<u32> {
    let ours = [TEST_PORT, 53, 54].iter().any(|&p| is_udp_to(frame, p));
    (ours && frame.len() >= SEQUENCE_AT + 4)
        .then(|| u32::from_be_bytes(frame[SEQUENCE_AT..SEQUENCE_AT + 4].try_into().unwrap()))
}

/// A router over AF_XDP on the lab's first two pairs with a static neighbour for the tester's
/// side of p1, `cores`, `routes` (to gateways) and ACL rules (`[[acl.rule]]` tables).
fn router_config(lab: &Testbed, socket: &Path, cores: &str, routes: &[&str], acl: &str) -> String {
    let (p0, p1) = (&lab.pairs[0], &lab.pairs[1]);
    let mut text = format!(
        "[switch]\napp = \"router\"\ncontrol_socket = \"{}\"\n{cores}\n\n\
         [[port]]\nname = \"p0\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n\
         [[port]]\nname = \"p1\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n\
         [[router.interface]]\nport = \"p0\"\naddresses = [\"{}/24\"]\n\n\
         [[router.interface]]\nport = \"p1\"\naddresses = [\"{}/24\"]\n\n\
         [[router.neighbour]]\nport = \"p1\"\naddress = \"{}\"\nmac = \"{}\"\n",
        socket.display(),
        p0.dut_if,
        p1.dut_if,
        p0.dut_ipv4,
        p1.dut_ipv4,
        p1.tester_ipv4,
        mac_text(p1.tester_mac),
    );
    for prefix in routes {
        text.push_str(&format!(
            "\n[[router.route]]\nprefix = \"{prefix}\"\nvia = [\"{}\"]\n",
            p1.tester_ipv4
        ));
    }
    text.push_str(&format!("\n[acl]\n{acl}"));
    text
}

fn deny(port: u16) -> String {
    format!("[[acl.rule]]\naction = \"deny\"\nproto = \"udp\"\ndst_port = {port}\n")
}

/// A running router and the tester's ports. Fields drop in order: the switch before the lab.
struct Run {
    switch: Switch,
    socket: PathBuf,
    file: PathBuf,
    pool: FramePool,
    t0: AfPacketPort,
    t1: AfPacketPort,
    _dir: PathBuf,
    lab: Testbed,
}

/// `None` (after printing why) where a lab cannot be built.
fn start(prefix: &str, config: impl Fn(&Testbed, &Path) -> String) -> Option<Run> {
    let (lab, dir) = lab(prefix, 1)?;
    let socket = dir.join("ctl.sock");
    let switch = Switch::start(&lab, &config(&lab, &socket), &dir);
    // Where `Switch::start` wrote the file, which the tests edit.
    let file = dir.join(format!("{}.toml", lab.dut_ns));
    wait_for_control(&socket);
    let mut run = Run {
        switch,
        socket,
        file,
        pool: FramePool::new(4096, 2048).unwrap(),
        t0: tester_port(&lab, 0),
        t1: tester_port(&lab, 1),
        _dir: dir,
        lab,
    };
    wait_until_forwarding(&mut run.t0, &mut run.t1, &mut run.pool);
    Some(run)
}

fn hang_up(switch: &Switch) {
    let pid = switch.0.as_ref().unwrap().id().to_string();
    assert!(
        Command::new("kill")
            .args(["-HUP", &pid])
            .status()
            .unwrap()
            .success()
    );
}

/// Whether `show routes` lists `prefix`.
fn routes_show(socket: &Path, prefix: &str) -> bool {
    let (ok, out) = ctl_at(socket, &["show", "routes"]);
    assert!(ok, "{out}");
    out.contains(prefix)
}

#[test]
fn sighup_applies_routes_and_acl_without_losing_unchanged_traffic() {
    let _cores = shared();
    let Some(mut run) = start("wsrld", |lab, socket| {
        router_config(
            lab,
            socket,
            "",
            &["198.19.0.0/16", "198.20.0.0/16"],
            &deny(53),
        )
    }) else {
        return;
    };
    let new = router_config(
        &run.lab,
        &run.socket,
        "",
        &["198.19.0.0/16", "198.21.0.0/16"],
        &deny(54),
    );

    // Every millisecond one frame of each kind; the phase of each sequence number is kept.
    let mut sent: Vec<(Kind, Phase)> = Vec::new();
    let mut arrived: Vec<u32> = Vec::new();
    let mut phase = Phase::Old;
    let started = Instant::now();
    let mut signalled: Option<Instant> = None;
    let mut applied: Option<Instant> = None;
    while applied.is_none_or(|at| at.elapsed() < Duration::from_millis(1500)) {
        let burst: Vec<Vec<u8>> = Kind::ALL
            .iter()
            .map(|&kind| {
                sent.push((kind, phase));
                frame(kind, sent.len() as u32 - 1)
            })
            .collect();
        assert_eq!(send(&mut run.t0, &mut run.pool, &burst), burst.len());
        std::thread::sleep(Duration::from_millis(1));
        arrived.extend(
            receive(&mut run.t1, &mut run.pool)
                .iter()
                .filter_map(|f| sequence(f)),
        );
        if signalled.is_none() && started.elapsed() > Duration::from_millis(1500) {
            std::fs::write(&run.file, &new).unwrap();
            hang_up(&run.switch);
            (signalled, phase) = (Some(Instant::now()), Phase::Reloading);
        }
        // Applied once the last change (the ACL, after the routes) shows.
        if signalled.is_some()
            && applied.is_none()
            && sent.len().is_multiple_of(50)
            && routes_show(&run.socket, "198.21.0.0/16")
            && !routes_show(&run.socket, "198.20.0.0/16")
        {
            // The ACL follows the routes in the same reload: let it land.
            std::thread::sleep(Duration::from_millis(50));
            (applied, phase) = (Some(Instant::now()), Phase::New);
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the reload never showed in `show routes`"
        );
    }
    // The last frames in flight.
    let deadline = Instant::now() + Duration::from_millis(500);
    while Instant::now() < deadline {
        arrived.extend(
            receive(&mut run.t1, &mut run.pool)
                .iter()
                .filter_map(|f| sequence(f)),
        );
        std::thread::sleep(Duration::from_millis(5));
    }

    let mut count = vec![0u32; sent.len()];
    for &seq in &arrived {
        count[seq as usize] += 1;
    }
    let tally = |kind: Kind, phase: Phase| {
        let of: Vec<u32> = (0..sent.len())
            .filter(|&i| sent[i] == (kind, phase))
            .map(|i| count[i])
            .collect();
        (of.len(), of.iter().filter(|&&c| c > 0).count())
    };
    for kind in Kind::ALL {
        for phase in [Phase::Old, Phase::Reloading, Phase::New] {
            let (frames, got) = tally(kind, phase);
            println!("{kind:?} sent {phase:?}: {frames}, forwarded {got}");
        }
    }
    assert!(count.iter().all(|&c| c <= 1), "a frame arrived twice");
    // Not one frame of the unchanged traffic lost, through the whole run.
    // (The reload may be applied before a frame is sent between the signal and the check.)
    for phase in [Phase::Old, Phase::Reloading, Phase::New] {
        let (frames, got) = tally(Kind::Unchanged, phase);
        assert!(
            (frames > 0 || phase == Phase::Reloading) && got == frames,
            "{Kind:?}: {got} of {frames} unchanged frames sent {phase:?} forwarded",
            Kind = Kind::Unchanged
        );
    }
    // The changed traffic follows the old file before the signal, the new one after.
    for kind in Kind::ALL {
        for (phase, new) in [(Phase::Old, false), (Phase::New, true)] {
            let (frames, got) = tally(kind, phase);
            let want = if kind.forwarded(new) { frames } else { 0 };
            assert_eq!(
                got, want,
                "{kind:?} frames sent {phase:?}: {got} of {frames} forwarded"
            );
        }
    }

    let (success, out) = run.switch.interrupt();
    assert!(success && out.contains("conservation holds"), "{out}");
    let via = run.lab.pairs[1].tester_ipv4;
    for line in [
        format!("reload: route 198.21.0.0/16 via {via} added"),
        format!("reload: route 198.20.0.0/16 removed (was via {via})"),
        "reload: acl replaced: 1 rule(s), was 1".to_string(),
        "3 change(s) applied, 0 failed, 0 key(s) need a restart".to_string(),
    ] {
        assert!(out.contains(&line), "no `{line}` in:\n{out}");
    }
    assert!(
        !out.contains("198.19.0.0/16 via"),
        "an unchanged route was touched:\n{out}"
    );
}

#[test]
fn a_bad_file_changes_nothing_and_restart_keys_are_refused_by_name() {
    let _cores = shared();
    let Some(mut run) = start("wsrlb", |lab, socket| {
        router_config(lab, socket, "", &["198.19.0.0/16"], &deny(53))
    }) else {
        return;
    };
    let unchanged = frames(20);
    let expect_forwarding = |run: &mut Run| {
        send(&mut run.t0, &mut run.pool, &unchanged);
        let got = receive_all(&mut run.t1, &mut run.pool, unchanged.len(), TEST_PORT);
        assert_eq!(got.len(), unchanged.len(), "the router stopped forwarding");
    };

    // A file with an error (a prefix with host bits set, and a route removed beside it):
    // nothing of it is applied.
    let bad = router_config(&run.lab, &run.socket, "", &["198.21.0.1/16"], "");
    std::fs::write(&run.file, &bad).unwrap();
    hang_up(&run.switch);
    std::thread::sleep(Duration::from_millis(300));
    assert!(routes_show(&run.socket, "198.19.0.0/16"));
    expect_forwarding(&mut run);
    // `ctl reload` answers with the same refusal.
    let (ok, out) = ctl_at(&run.socket, &["reload"]);
    assert!(
        !ok && out.contains("reload refused, the running configuration stays")
            && out.contains("router.route[0].prefix"),
        "{out}"
    );

    // Cores and a port changed beside a new route: the route is applied, the rest refused by
    // key.
    let mut restart = router_config(
        &run.lab,
        &run.socket,
        "cores = [0]",
        &["198.19.0.0/16", "198.21.0.0/16"],
        &deny(53),
    );
    restart = restart.replacen(
        "backend = \"afxdp\"\n",
        "backend = \"afxdp\"\nxdp_mode = \"generic\"\n",
        1,
    );
    std::fs::write(&run.file, &restart).unwrap();
    hang_up(&run.switch);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !routes_show(&run.socket, "198.21.0.0/16") {
        assert!(Instant::now() < deadline, "the new route never showed");
        std::thread::sleep(Duration::from_millis(20));
    }
    expect_forwarding(&mut run);

    let (success, out) = run.switch.interrupt();
    assert!(success && out.contains("conservation holds"), "{out}");
    for line in [
        "error: reload refused, the running configuration stays: ",
        "`router.route[0].prefix`",
        "fix: ",
        "warning: reload: `switch.cores` changed in ",
        "warning: reload: `port[0]` changed in ",
        "it needs a restart",
        "1 change(s) applied, 0 failed, 2 key(s) need a restart",
    ] {
        assert!(out.contains(line), "no `{line}` in:\n{out}");
    }
}
