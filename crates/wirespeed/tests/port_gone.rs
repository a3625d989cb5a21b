//! An interface deleted under a running switch (issue 19): the port says it is gone (a line on
//! stderr when it happens, GONE in `ctl show ports`, the reason in the run's failure) instead of
//! showing only as `tx_full` drops, and its socket in error does not keep the worker awake.

mod common;
use common::*;

use std::time::{Duration, Instant};

use wirespeed_packet::FramePool;
use wirespeed_testkit::ports::send;

/// Seconds of CPU time process `pid` has used (user + system), from /proc.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name in parentheses; utime and stime are the 14th and 15th.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0
}

#[test]
fn a_deleted_afpacket_interface_is_reported_gone_and_the_worker_sleeps() {
    deleted_interface("wstgo", "afpacket");
}

/// An AF_XDP socket whose interface is deleted is unbound and polls quiet; the port finds out
/// at its next kick (ENXIO), so frames are sent its way.
#[test]
fn a_deleted_afxdp_interface_is_reported_gone_and_the_worker_sleeps() {
    deleted_interface("wstgx", "afxdp");
}

/// Runs an xconnect of `backend` ports p0 (d0) and p1 (d1), deletes d1 (with its peer t1)
/// while frames arrive on t0 for p1, and checks that p1 is reported gone and the switch idles.
fn deleted_interface(prefix: &str, backend: &str) {
    let _cores = shared();
    let Some((lab, dir)) = lab(prefix, 1) else {
        return;
    };
    let socket = dir.join("gone.sock");
    let _ = std::fs::remove_file(&socket);
    let gone_if = lab.pairs[1].dut_if.clone();
    let config = format!(
        "[switch]\napp = \"xconnect\"\ncontrol_socket = \"{}\"\n\n\
         [[port]]\nname = \"p0\"\nbackend = \"{backend}\"\ninterface = \"{}\"\n\n\
         [[port]]\nname = \"p1\"\nbackend = \"{backend}\"\ninterface = \"{gone_if}\"\n\n\
         [xconnect]\npairs = [[\"p0\", \"p1\"]]\n",
        socket.display(),
        lab.pairs[0].dut_if,
    );
    let mut switch = Switch::start(&lab, &config, &dir);
    wait_for_control(&socket);
    // Deleting the tester's end of a veth deletes the DuT's end with it.
    wirespeed_lab::run(
        "ip",
        &["-n", &lab.tester_ns, "link", "del", &lab.pairs[1].tester_if],
    )
    .unwrap();
    let mut t0 = tester_port(&lab, 0);
    let mut pool = FramePool::new(1024, 2048).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let ports = loop {
        // Frames for p1, so that a port that learns of it only by sending does.
        send(&mut t0, &mut pool, &frames(8));
        let (ok, ports) = ctl_at(&socket, &["show", "ports"]);
        assert!(ok, "{ports}");
        if ports.contains(&format!("GONE (interface {gone_if} deleted)")) {
            break ports;
        }
        assert!(
            Instant::now() < deadline,
            "ctl never showed p1 gone: {ports}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        ports
            .lines()
            .any(|line| line.contains(" p1 ") && line.contains("GONE")),
        "{ports}"
    );
    // Neither the socket in error nor frames stuck for the kernel keep the idle switch awake
    // (it spun a whole core before).
    let pid = switch.0.as_ref().unwrap().id();
    let before = cpu_seconds(pid);
    std::thread::sleep(Duration::from_secs(1));
    let used = cpu_seconds(pid) - before;
    assert!(used < 0.3, "the idle switch used {used} s of CPU in 1 s");
    let (ok, out) = switch.interrupt();
    assert!(!ok, "a run that lost a port fails: {out}");
    let said = format!("port p1: interface {gone_if} went away");
    // Once when it happened, once in the run's failure.
    assert_eq!(out.matches(&said).count(), 2, "{out}");
    drop(lab);
    wirespeed_lab::assert_gone_for_test(prefix);
}
