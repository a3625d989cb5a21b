//! `wirespeed switch` end to end: the real binary forwards between the lab's DuT interfaces
//! while the test sends and receives from the tester namespace; Ctrl-C stops it cleanly.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use wirespeed_io::afxdp::{AfXdpConfig, AfXdpPort, Umem};
use wirespeed_io::{Port, QueueId};
use wirespeed_lab::Testbed;
use wirespeed_packet::{Batch, FramePool};
use wirespeed_tester::generator::{Template, TemplateConfig};
use wirespeed_testkit::ports::{push_copies, receive, send};

mod common;
use common::*;

/// Writes `config` to `path` and runs `wirespeed switch --config PATH` on it (inside namespace
/// `ns` when given); asserts the switch refused to start and returns what it said on stderr.
fn refused(path: &Path, config: &str, ns: Option<&str>) -> String {
    std::fs::write(path, config).unwrap();
    let mut command = match ns {
        Some(ns) => {
            let mut command = Command::new("ip");
            command.args(["netns", "exec", ns, env!("CARGO_BIN_EXE_wirespeed")]);
            command
        }
        None => Command::new(env!("CARGO_BIN_EXE_wirespeed")),
    };
    let out = command
        .args(["switch", "--config"])
        .arg(path)
        .output()
        .unwrap();
    assert!(!out.status.success(), "the switch started");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Whether an XDP program is attached to `interface` in namespace `ns`.
fn xdp_attached(ns: &str, interface: &str) -> bool {
    let out =
        wirespeed_lab::run("ip", &["-n", ns, "-d", "link", "show", "dev", interface]).unwrap();
    out.contains("prog/xdp") || out.contains("xdpgeneric") || out.contains(" xdp ")
}

/// Runs an xconnect over `backend_lines` both ways; its output must state the worker's
/// scheduling as `priority` (chosen by `realtime = "auto"`).
fn forwards_both_ways(prefix: &str, backend_lines: &str, priority: &str) {
    if let Some(out) = forwards_both_ways_with(prefix, |lab| xconnect_config(lab, backend_lines)) {
        assert!(out.contains(priority), "{out}");
    }
}

/// Runs the switch with the configuration `config` makes for the lab and checks 200 frames
/// t0 -> t1 and 100 frames t1 -> t0 arrive byte for byte; returns the switch's output (`None`
/// when no lab could be built here).
fn forwards_both_ways_with(prefix: &str, config: impl Fn(&Testbed) -> String) -> Option<String> {
    let (lab, dir) = lab(prefix, 1)?;
    let config = config(&lab);
    let mut switch = Switch::start(&lab, &config, &dir);
    let mut pool = FramePool::new(4096, 2048).unwrap();
    let (mut t0, mut t1) = (tester_port(&lab, 0), tester_port(&lab, 1));
    wait_until_forwarding(&mut t0, &mut t1, &mut pool);

    let forward = frames(200);
    for chunk in forward.chunks(50) {
        send(&mut t0, &mut pool, chunk);
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_same(
        &receive_all(&mut t1, &mut pool, forward.len(), TEST_PORT),
        &forward,
    );
    let backward = frames(100);
    send(&mut t1, &mut pool, &backward);
    assert_same(
        &receive_all(&mut t0, &mut pool, backward.len(), TEST_PORT),
        &backward,
    );

    let (success, out) = switch.interrupt();
    assert!(success, "switch failed:\n{out}");
    assert!(out.contains("conservation holds"), "{out}");
    assert!(out.contains("drops by reason"), "{out}");
    drop(lab);
    wirespeed_lab::assert_gone_for_test(prefix);
    Some(out)
}

#[test]
fn switch_forwards_over_afpacket() {
    forwards_both_ways(
        "wstsw1",
        "backend = \"afpacket\"",
        "worker 0: any core, SCHED_FIFO 1 (realtime = \"auto\": socket ports",
    );
}

#[test]
fn switch_forwards_over_afxdp() {
    // Under the default fast_path = "auto" a veth port keeps the user-space path.
    forwards_both_ways(
        "wstsw2",
        "backend = \"afxdp\"",
        "port p0: user-space path (no XDP fast path: port p0 is a veth",
    );
}

#[test]
fn switch_forwards_on_the_xdp_fast_path() {
    let Some(out) = forwards_both_ways_with("wstsw9", |lab| {
        // The tester's ends take redirected frames only while they run NAPI.
        receive_with_napi(lab, 0);
        receive_with_napi(lab, 1);
        // The worker on the last core: the switch's other threads keep off it.
        let last = wirespeed_io::thread::available_cores() - 1;
        xconnect_config(lab, "backend = \"afxdp\"").replace(
            "app = \"xconnect\"",
            &format!("app = \"xconnect\"\nfast_path = \"xdp\"\ncores = [{last}]"),
        )
    }) else {
        return;
    };
    let cores = wirespeed_io::thread::available_cores();
    if cores > 1 {
        let others = wirespeed_io::thread::cpu_list(&(0..cores - 1).collect::<Vec<_>>());
        assert!(
            out.contains(&format!(
                "control threads: core(s) {others}, off the workers'"
            )),
            "{out}"
        );
    }
    assert!(
        out.contains("port p0: fast path xdp (native): every frame to p1"),
        "{out}"
    );
    // Every test frame was forwarded by the kernel: the probes, 200 one way, 100 the other.
    let row = |port: &str| fast_path_row(&out, port);
    assert!(row("p0")[0] >= 200 && row("p1")[0] >= 100, "{out}");
    assert_eq!(row("p0")[0], row("p1")[1], "{out}");
    assert!(out.contains("worker 0: rx 0 tx 0"), "{out}");
}

/// Transmits `frames` on queue `queue` of the tester's AF_XDP port (a veth delivers a frame sent
/// on queue *q* to queue *q* of its peer), 32 at a time, paced for the veth's 256-slot ring.
fn send_on_queue(port: &mut AfXdpPort, pool: &mut FramePool, queue: QueueId, frames: &[Vec<u8>]) {
    let mut batch = Batch::new(32);
    for chunk in frames.chunks(32) {
        push_copies(pool, &mut batch, chunk, queue);
        let deadline = Instant::now() + Duration::from_secs(3);
        while !batch.is_empty() {
            assert!(Instant::now() < deadline, "t0 queue {queue} took no frames");
            port.tx(queue, pool, &mut batch);
            port.poll(pool);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The number after `label` in the switch's output, e.g. `worker 1: rx 123` -> 123.
fn count_after(out: &str, label: &str) -> Option<u64> {
    let rest = &out[out.find(label)? + label.len()..];
    rest.split_whitespace().next()?.parse().ok()
}

/// Two workers on two-queue AF_XDP ports: worker *w* serves queue *w* of d0 and d1, frames the
/// tester sends on t0's queue *w* reach worker *w*, and every frame of 256 flows arrives on t1.
#[test]
fn switch_spreads_a_two_queue_port_over_two_workers() {
    let prefix = "wstsw3";
    let Some((lab, dir)) = lab(prefix, 2) else {
        return;
    };
    let config = format!(
        "[switch]\napp = \"xconnect\"\nworkers = 2\ncores = [0, 1]\n\n\
         [[port]]\nname = \"p0\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n\
         [[port]]\nname = \"p1\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n\
         [xconnect]\npairs = [[\"p0\", \"p1\"]]\n",
        lab.pairs[0].dut_if, lab.pairs[1].dut_if
    );
    let mut switch = Switch::start(&lab, &config, &dir);

    let mut pool = FramePool::new(16384, 2048).unwrap();
    let umem = Umem::new(&pool);
    let mut t0 = {
        let _inside = wirespeed_lab::enter(&lab.tester_ns).unwrap();
        let config = AfXdpConfig {
            fill_size: 512,
            zero_copy: false,
            ..AfXdpConfig::default()
        };
        AfXdpPort::open(&lab.pairs[0].tester_if, &config, &umem, &mut pool).unwrap()
    };
    assert_eq!(t0.open_queues().collect::<Vec<_>>(), [0, 1]);
    let mut t1 = tester_port(&lab, 1);

    // Wait until both workers forward: a probe sent on each queue crosses.
    const PROBE_PORT: u16 = 7;
    let probe = frames_to(1, PROBE_PORT);
    for queue in [0, 1] {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            send_on_queue(&mut t0, &mut pool, queue, &probe);
            if !receive_all(&mut t1, &mut pool, 1, PROBE_PORT).is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the switch never forwarded a probe sent on queue {queue}"
            );
        }
    }

    // 256 flows, flow i sent on queue i % 2.
    let template = Template::new(&TemplateConfig {
        frame_size: 128,
        flows: 256,
        dst_port: TEST_PORT,
        ..TemplateConfig::default()
    })
    .unwrap();
    let mut sent: Vec<Vec<u8>> = (0..256).map(|flow| template.frame(flow)).collect();
    for queue in [0u16, 1] {
        let share: Vec<Vec<u8>> = sent
            .iter()
            .skip(queue as usize)
            .step_by(2)
            .cloned()
            .collect();
        send_on_queue(&mut t0, &mut pool, queue, &share);
    }
    // Order across queues (workers) is not kept: compare as multisets.
    let mut arrived = receive_all(&mut t1, &mut pool, sent.len(), TEST_PORT);
    arrived.sort();
    sent.sort();
    assert_same(&arrived, &sent);

    let (success, out) = switch.interrupt();
    assert!(success, "switch failed:\n{out}");
    for worker in 0..2 {
        let rx = count_after(&out, &format!("worker {worker}: rx"));
        assert!(
            rx.is_some_and(|rx| rx >= 128),
            "worker {worker} received {rx:?} frames, not its queue's 128:\n{out}"
        );
        assert!(
            out.lines()
                .any(|line| line.starts_with(&format!("worker {worker} pool:"))
                    && line.contains("conservation holds")),
            "worker {worker}:\n{out}"
        );
    }
    t0.release_all(&mut pool);
    drop(lab);
    wirespeed_lab::assert_gone_for_test(prefix);
}

/// More workers than an AF_XDP port has queues: refused before anything runs, saying what to do.
#[test]
fn switch_refuses_more_workers_than_afxdp_queues() {
    let prefix = "wstsw4";
    let Some((lab, dir)) = lab(prefix, 1) else {
        return;
    };
    let config = format!(
        "[switch]\napp = \"xconnect\"\nworkers = 2\n\n\
         [[port]]\nname = \"p0\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n\
         [[port]]\nname = \"p1\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n\
         [xconnect]\npairs = [[\"p0\", \"p1\"]]\n",
        lab.pairs[0].dut_if, lab.pairs[1].dut_if
    );
    let text = refused(&dir.join("switch.toml"), &config, Some(&lab.dut_ns));
    assert!(
        text.contains("port p0: 1 AF_XDP queue(s)")
            && text.contains(&format!("ethtool -L {} combined 2", lab.pairs[0].dut_if))
            && text.contains("set workers = 1"),
        "{text}"
    );
    let link =
        wirespeed_lab::run_in(&lab.dut_ns, "ip", &["link", "show", &lab.pairs[0].dut_if]).unwrap();
    assert!(!link.contains("xdp"), "the program stayed attached: {link}");
}

#[test]
fn switch_stops_cleanly_mid_traffic_and_leaves_nothing_after_sigkill() {
    let prefix = "wstsw5";
    let Some((lab, dir)) = lab(prefix, 1) else {
        return;
    };
    let config = xconnect_config(&lab, "backend = \"afxdp\"");
    let mut pool = FramePool::new(4096, 2048).unwrap();
    let (mut t0, mut t1) = (tester_port(&lab, 0), tester_port(&lab, 1));

    // 1. SIGINT while frames are flowing: a clean stop with every frame of the pool back.
    let mut switch = Switch::start(&lab, &config, &dir);
    wait_until_forwarding(&mut t0, &mut t1, &mut pool);
    let burst = frames(64);
    let outcome = std::thread::scope(|scope| {
        let stopper = scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            switch.interrupt()
        });
        while !stopper.is_finished() {
            send(&mut t0, &mut pool, &burst);
            receive(&mut t1, &mut pool);
        }
        stopper.join().unwrap()
    });
    let (success, out) = outcome;
    assert!(success, "switch failed:\n{out}");
    assert!(out.contains("conservation holds"), "{out}");
    let deadline = Instant::now() + Duration::from_secs(3);
    while xdp_attached(&lab.dut_ns, &lab.pairs[0].dut_if) {
        assert!(
            Instant::now() < deadline,
            "XDP program left attached after a clean stop"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // 2. SIGKILL: the kernel detaches the XDP programs (they are bpf_links of the process).
    let switch = Switch::start(&lab, &config, &dir);
    wait_until_forwarding(&mut t0, &mut t1, &mut pool);
    assert!(xdp_attached(&lab.dut_ns, &lab.pairs[0].dut_if));
    drop(switch);
    let deadline = Instant::now() + Duration::from_secs(3);
    while xdp_attached(&lab.dut_ns, &lab.pairs[0].dut_if)
        || xdp_attached(&lab.dut_ns, &lab.pairs[1].dut_if)
    {
        assert!(
            Instant::now() < deadline,
            "XDP program left attached after SIGKILL"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // 3. The next start works.
    let mut switch = Switch::start(&lab, &config, &dir);
    wait_until_forwarding(&mut t0, &mut t1, &mut pool);
    let (success, out) = switch.interrupt();
    assert!(success && out.contains("conservation holds"), "{out}");
    drop(lab);
    wirespeed_lab::assert_gone_for_test(prefix);
}

#[test]
fn switch_bridges_over_afxdp() {
    // The test frames go to 02:57:53:00:00:fe (the DuT side's MAC, unknown to the bridge):
    // flooded at first, then, once t1's frames taught the bridge where the sender is, the
    // replies go by unicast. Either way every frame must arrive byte for byte.
    forwards_both_ways_with("wstsw6", |lab| {
        format!(
            "[switch]\napp = \"bridge\"\n\n[[port]]\nname = \"p0\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n\
             [[port]]\nname = \"p1\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n[bridge]\nmac_capacity = 1024\n",
            lab.pairs[0].dut_if, lab.pairs[1].dut_if
        )
    });
}

#[test]
fn switch_routes_over_afxdp() {
    let prefix = "wstsw7";
    let Some((lab, dir)) = lab(prefix, 1) else {
        return;
    };
    let (p0, p1) = (&lab.pairs[0], &lab.pairs[1]);
    // The generator's frames go from 198.18.0.1 to 198.19.0.1: routed via the tester's t1.
    let config = format!(
        "[switch]\napp = \"router\"\n\n[[port]]\nname = \"p0\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n\
         [[port]]\nname = \"p1\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n\
         [[router.interface]]\nport = \"p0\"\naddresses = [\"{}/24\"]\n\n\
         [[router.interface]]\nport = \"p1\"\naddresses = [\"{}/24\"]\n\n\
         [[router.route]]\nprefix = \"198.19.0.0/16\"\nvia = [\"{}\"]\n\n\
         [[router.neighbour]]\nport = \"p1\"\naddress = \"{}\"\nmac = \"{}\"\n",
        p0.dut_if,
        p1.dut_if,
        p0.dut_ipv4,
        p1.dut_ipv4,
        p1.tester_ipv4,
        p1.tester_ipv4,
        mac_text(p1.tester_mac)
    );
    let mut switch = Switch::start(&lab, &config, &dir);
    let mut pool = FramePool::new(4096, 2048).unwrap();
    let (mut t0, mut t1) = (tester_port(&lab, 0), tester_port(&lab, 1));
    wait_until_forwarding(&mut t0, &mut t1, &mut pool);

    let input = frames(100);
    let expected: Vec<Vec<u8>> = input
        .iter()
        .map(|frame| {
            let mut out = frame.clone();
            out[0..6].copy_from_slice(&p1.tester_mac);
            out[6..12].copy_from_slice(&p1.dut_mac);
            let mut ip = wirespeed_packet::wire::ipv4::Packet::new_checked(&mut out[14..]).unwrap();
            ip.set_ttl(63);
            ip.fill_checksum();
            out
        })
        .collect();
    send(&mut t0, &mut pool, &input);
    assert_same(
        &receive_all(&mut t1, &mut pool, expected.len(), TEST_PORT),
        &expected,
    );
    let (success, out) = switch.interrupt();
    assert!(success && out.contains("conservation holds"), "{out}");
}

#[test]
fn switch_refuses_a_missing_interface_before_starting() {
    let dir = std::env::temp_dir().join("wirespeed-wstsw0");
    std::fs::create_dir_all(&dir).unwrap();
    let text = refused(
        &dir.join("bad.toml"),
        "[switch]\napp = \"xconnect\"\n\n[[port]]\nname = \"p0\"\nbackend = \"afpacket\"\ninterface = \"wst-none0\"\n\n\
         [[port]]\nname = \"p1\"\nbackend = \"afpacket\"\ninterface = \"wst-none1\"\n\n[xconnect]\npairs = [[\"p0\", \"p1\"]]\n",
        None,
    );
    assert!(text.contains("p0") && text.contains("wst-none0"), "{text}");
}

#[test]
fn switch_names_the_line_of_a_config_error() {
    let dir = std::env::temp_dir().join("wirespeed-wstsw0c");
    std::fs::create_dir_all(&dir).unwrap();
    let text = refused(
        &dir.join("bad.toml"),
        "[switch]\napp = \"xconnect\"\nbatch = 9999\n",
        None,
    );
    assert!(
        text.contains("bad.toml:3:9") && text.contains("switch.batch"),
        "{text}"
    );
}

#[test]
fn switch_with_fast_path_xdp_refuses_to_start_where_it_cannot_have_it() {
    let dir = std::env::temp_dir().join("wirespeed-wstsw0f");
    std::fs::create_dir_all(&dir).unwrap();
    // A port that is not on AF_XDP.
    let text = refused(
        &dir.join("pcap.toml"),
        "[switch]\napp = \"xconnect\"\nfast_path = \"xdp\"\ncontrol_socket = \"\"\n\n\
         [[port]]\nname = \"p0\"\nbackend = \"pcap\"\nrx = \"/nonexistent-in.pcap\"\n\n\
         [[port]]\nname = \"p1\"\nbackend = \"pcap\"\ntx = \"/tmp/wirespeed-wstsw0f-out.pcap\"\n\n\
         [xconnect]\npairs = [[\"p0\", \"p1\"]]\n",
        None,
    );
    assert!(
        text.contains("fast_path = \"xdp\" cannot be had")
            && text.contains("port p0 is not on AF_XDP"),
        "{text}"
    );
    // An app the fast path cannot serve as configured (a router on two workers, which learn
    // their neighbours apart): refused before any interface is touched.
    let text = refused(
        &dir.join("router.toml"),
        "[switch]\napp = \"router\"\nfast_path = \"xdp\"\nworkers = 2\ncontrol_socket = \"\"\n\n\
         [[port]]\nname = \"p0\"\nbackend = \"afxdp\"\ninterface = \"lo\"\n\n\
         [[router.interface]]\nport = \"p0\"\naddresses = [\"198.18.0.1/24\"]\n",
        None,
    );
    assert!(
        text.contains("set workers = 1") && text.contains("fast_path = \"auto\""),
        "{text}"
    );
}
