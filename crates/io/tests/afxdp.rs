//! The AF_XDP backend through real network namespaces and veth pairs.
//!
//! Each test builds its own lab (tester namespace <-> DuT namespace, prefix `wstxdpN`), opens
//! [`AfXdpPort`]s on the DuT side by entering the DuT namespace for the open (sockets stay in the
//! namespace they were created in), and talks to them from the tester side with a plain
//! AF_PACKET socket, independent of the code under test. Test frames carry the local
//! experimental ethertype 0x88b5, a signature and a sequence number, so the IPv6 chatter of the
//! lab's interfaces is told apart. Delivery is never assumed instant (2 vCPUs shared with the
//! kernel's NAPI work): receivers poll with a deadline.
//!
//! Every test ends with the conservation check: after `release_all`, every frame is back in the
//! pool; and with `ip -d link show` showing no XDP program left on the interface.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use wirespeed_io::afxdp::{
    AfXdpConfig, AfXdpError, AfXdpPort, QueueSelection, Umem, XdpAttachment, XdpMode, XdpRedirect,
};
use wirespeed_io::wait::wait_readable;
use wirespeed_io::{Backend, Port, QueueId};
use wirespeed_lab::{enter, run_in};
use wirespeed_packet::batch::HEADROOM;
use wirespeed_packet::{Batch, Desc, FramePool};

mod common;
use common::*;

const POOL_FRAMES: u32 = 16384;

fn frame_len(seq: u32) -> usize {
    60 + (seq as usize * 97) % 1455
}

/// A pool of [`POOL_FRAMES`] 2048-byte frames and the UMEM that registers it for AF_XDP ports.
fn pool_and_umem() -> (FramePool, Umem) {
    let pool = FramePool::new(POOL_FRAMES, 2048).unwrap();
    let umem = Umem::new(&pool);
    (pool, umem)
}

/// Test frames `socket` receives until `count` arrived or [`DEADLINE`] passed, by sequence
/// number (the frames of two queues may interleave).
fn receive_sorted(socket: &RawSocket, count: usize) -> Vec<Vec<u8>> {
    let mut frames = socket.receive(count);
    frames.sort_by_key(|frame| seq_of(frame));
    frames
}

/// Opens an AF_XDP port on `ifname` inside namespace `netns`.
fn open_in(
    netns: &str,
    ifname: &str,
    config: &AfXdpConfig,
    umem: &Umem,
    pool: &mut FramePool,
) -> Result<AfXdpPort, AfXdpError> {
    let _guard = enter(netns).expect("enter namespace");
    AfXdpPort::open(ifname, config, umem, pool)
}

/// Whether the XDP program is gone from the interface within `DEADLINE`. Closing the link's
/// descriptor detaches it at once, unless another thread of this test process forked (to run `ip`)
/// at that moment: the child holds a copy of the descriptor until it execs.
fn xdp_detached(netns: &str, ifname: &str) -> bool {
    let deadline = Instant::now() + DEADLINE;
    while xdp_attached(netns, ifname) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// Receives test frames on the given queues of `port` until `count` arrived or `DEADLINE`
/// passes; other frames go straight back to the pool. Returns the descriptors, in arrival order.
fn receive(
    port: &mut AfXdpPort,
    queues: &[QueueId],
    pool: &mut FramePool,
    count: usize,
) -> Vec<Desc> {
    let deadline = Instant::now() + DEADLINE;
    let mut batch = Batch::new(64);
    let mut got = Vec::new();
    while got.len() < count && Instant::now() < deadline {
        let mut any = 0;
        for &queue in queues {
            any += port.rx(queue, pool, &mut batch);
            for desc in batch.descs() {
                let start = desc.offset as usize;
                let bytes = &pool.frame(desc.frame)[start..start + desc.len as usize];
                if seq_of(bytes).is_some() {
                    got.push(*desc);
                } else {
                    pool.release(desc.frame);
                }
            }
            batch.clear();
        }
        if any == 0 {
            let fds: Vec<_> = queues.iter().filter_map(|&q| port.rx_fd(q)).collect();
            wait_readable(&fds, Duration::from_millis(50)).expect("poll");
        }
    }
    got
}

/// Polls the port until every transmitted frame has completed (the port holds only its fill
/// rings' frames again) or `DEADLINE` passes.
fn drain_completions(port: &mut AfXdpPort, pool: &mut FramePool, resting: usize) {
    let deadline = Instant::now() + DEADLINE;
    while port.frames_held() > resting && Instant::now() < deadline {
        port.poll(pool);
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn close(mut port: AfXdpPort, pool: &mut FramePool) {
    port.release_all(pool);
    assert_eq!(port.frames_held(), 0);
    assert!(!port.is_open());
}

#[test]
fn receives_and_transmits_byte_for_byte() {
    let Some(lab) = lab("wstxdp1", 1, 1) else {
        return;
    };
    let pair = &lab.pairs[0];
    let (mut pool, umem) = pool_and_umem();
    let config = AfXdpConfig::default();
    let mut port = open_in(&lab.dut_ns, &pair.dut_if, &config, &umem, &mut pool).expect("open");
    let fill = config.fill_size as usize;

    let info = port.info().clone();
    assert_eq!(info.backend, Backend::AfXdp);
    assert_eq!(info.name, pair.dut_if);
    assert_eq!(info.mac, pair.dut_mac);
    assert_eq!((info.mtu, info.queues), (1500, 1));
    assert!(info.link_up);
    // veth: native XDP, copy mode only, and the fallback from the zero-copy wish is reported.
    assert!(
        info.mode
            .starts_with("xdp=native bind=copy need_wakeup umem="),
        "{}",
        info.mode
    );
    assert!(info.mode.contains("zero-copy refused"), "{}", info.mode);
    assert_eq!(port.frames_held(), fill);
    assert_eq!(pool.in_use() as usize, fill);
    assert!(xdp_attached(&lab.dut_ns, &pair.dut_if));

    // Tester -> AF_XDP: every frame arrives byte for byte, at HEADROOM in its frame.
    let tester = RawSocket::open(&lab.tester_ns, &pair.tester_if);
    let count = 100;
    let sent: Vec<Vec<u8>> = (0..count)
        .map(|seq| test_frame(pair.dut_mac, pair.tester_mac, seq, frame_len(seq), None))
        .collect();
    for frame in &sent {
        tester.send(frame);
    }
    let mut received = receive(&mut port, &[0], &mut pool, count as usize);
    assert_eq!(received.len(), count as usize, "frames lost on the way in");
    received.sort_by_key(|desc| seq_of(&bytes_of(&pool, desc)));
    for (desc, frame) in received.iter().zip(&sent) {
        assert_eq!(desc.offset, HEADROOM);
        assert_eq!(desc.queue, 0);
        assert_eq!(bytes_of(&pool, desc), *frame);
    }
    // The fill ring was topped up: the port holds a full ring, the batch holds the rest.
    assert_eq!(port.frames_held(), fill);
    assert_eq!(pool.in_use() as usize, fill + received.len());
    for desc in &received {
        pool.release(desc.frame);
    }

    // AF_XDP -> tester: frames built in the pool arrive byte for byte.
    let outgoing: Vec<Vec<u8>> = (1000..1000 + count)
        .map(|seq| test_frame(pair.tester_mac, pair.dut_mac, seq, frame_len(seq), None))
        .collect();
    transmit(&mut port, 0, &mut pool, &outgoing);
    assert_eq!(port.frames_held(), fill);
    let arrived = receive_sorted(&tester, outgoing.len());
    assert_eq!(arrived.len(), outgoing.len(), "frames lost on the way out");
    assert_eq!(arrived, outgoing);

    let stats = port.stats();
    assert!(stats.rx_packets >= count as u64);
    assert_eq!(stats.tx_packets, count as u64);
    assert_eq!(stats.tx_refused, 0);

    close(port, &mut pool);
    assert_eq!(pool.free_count(), pool.total());
    assert_eq!(pool.double_releases(), 0);
    assert!(xdp_detached(&lab.dut_ns, &pair.dut_if));
}

#[test]
fn forwards_between_two_ports_sharing_the_umem() {
    let Some(lab) = lab("wstxdp2", 2, 1) else {
        return;
    };
    let (p0, p1) = (&lab.pairs[0], &lab.pairs[1]);
    let (mut pool, umem) = pool_and_umem();
    let config = AfXdpConfig {
        zero_copy: false,
        ..AfXdpConfig::default()
    };
    let fill = config.fill_size as usize;
    let mut d0 = open_in(&lab.dut_ns, &p0.dut_if, &config, &umem, &mut pool).expect("open d0");
    let mut d1 = open_in(&lab.dut_ns, &p1.dut_if, &config, &umem, &mut pool).expect("open d1");
    // The second port joined the first one's UMEM registration; no fallback was needed.
    assert_eq!(
        d1.info().mode,
        "xdp=native bind=copy need_wakeup umem=shared"
    );

    let t0 = RawSocket::open(&lab.tester_ns, &p0.tester_if);
    let t1 = RawSocket::open(&lab.tester_ns, &p1.tester_if);
    let count = 200u32;
    let sent: Vec<Vec<u8>> = (0..count)
        .map(|seq| test_frame(p1.tester_mac, p0.tester_mac, seq, frame_len(seq), None))
        .collect();
    let mut forwarded = 0;
    let mut batch = Batch::new(64);
    for chunk in sent.chunks(50) {
        for frame in chunk {
            t0.send(frame);
        }
        // d0 -> d1: the very frame received is transmitted, not a copy.
        for desc in receive(&mut d0, &[0], &mut pool, chunk.len()) {
            let before = bytes_of(&pool, &desc);
            assert!(batch.push(desc));
            let frame = desc.frame;
            while !batch.is_empty() {
                d1.tx(0, &mut pool, &mut batch);
                d1.poll(&mut pool);
            }
            assert_eq!(
                pool.frame(frame)[HEADROOM as usize..][..before.len()],
                before[..]
            );
            forwarded += 1;
        }
    }
    assert_eq!(forwarded, count);
    drain_completions(&mut d1, &mut pool, fill);
    let arrived = receive_sorted(&t1, sent.len());
    assert_eq!(arrived.len(), sent.len(), "frames lost in forwarding");
    assert_eq!(arrived, sent);
    assert_eq!(d0.stats().tx_packets, 0);
    assert_eq!(d1.stats().tx_packets, count as u64);

    // Frames received on d0 went out on d1: each port's ledger is exact after the move.
    assert_eq!(d0.frames_held() + d1.frames_held(), 2 * fill);
    close(d0, &mut pool);
    close(d1, &mut pool);
    assert_eq!(pool.free_count(), pool.total());
    assert_eq!(pool.double_releases(), 0);
    assert!(xdp_detached(&lab.dut_ns, &p0.dut_if));
    assert!(xdp_detached(&lab.dut_ns, &p1.dut_if));
}

#[test]
fn opens_one_socket_per_queue() {
    let Some(lab) = lab("wstxdp3", 1, 2) else {
        return;
    };
    let pair = &lab.pairs[0];
    let (mut pool, umem) = pool_and_umem();
    let config = AfXdpConfig {
        queues: QueueSelection::All,
        fill_size: 1024,
        ..AfXdpConfig::default()
    };
    let mut port = open_in(&lab.dut_ns, &pair.dut_if, &config, &umem, &mut pool).expect("open");
    assert_eq!(port.info().queues, 2);
    assert_eq!(port.open_queues().collect::<Vec<_>>(), [0, 1]);
    let (fd0, fd1) = (port.rx_fd(0).unwrap(), port.rx_fd(1).unwrap());
    assert_ne!(fd0, fd1);
    assert_eq!(port.rx_fd(2), None);
    assert_eq!(port.frames_held(), 2 * 1024);
    // The sockets of one port share its UMEM registration too.
    assert!(
        port.info().mode.contains("umem=shared"),
        "{}",
        port.info().mode
    );

    // Frames arrive on whichever queue the veth picks; together, all of them.
    let tester = RawSocket::open(&lab.tester_ns, &pair.tester_if);
    let count = 64u32;
    for seq in 0..count {
        tester.send(&test_frame(
            pair.dut_mac,
            pair.tester_mac,
            seq,
            frame_len(seq),
            None,
        ));
    }
    let received = receive(&mut port, &[0, 1], &mut pool, count as usize);
    assert_eq!(received.len(), count as usize);
    let mut seqs: Vec<u32> = received
        .iter()
        .map(|desc| seq_of(&bytes_of(&pool, desc)).unwrap())
        .collect();
    seqs.sort();
    assert_eq!(seqs, (0..count).collect::<Vec<_>>());
    for desc in &received {
        assert!(desc.queue < 2);
        pool.release(desc.frame);
    }
    close(port, &mut pool);
    assert_eq!(pool.free_count(), pool.total());
    assert!(xdp_detached(&lab.dut_ns, &pair.dut_if));
}

#[test]
fn refuses_bad_input_with_errors_naming_the_port_and_the_fix() {
    let Some(lab) = lab("wstxdp4", 1, 1) else {
        return;
    };
    let ifname = lab.pairs[0].dut_if.clone();
    let ns = lab.dut_ns.clone();
    let (mut pool, umem) = pool_and_umem();
    let config = AfXdpConfig::default();

    let error = open_in(&ns, "wstxdp4-nope", &config, &umem, &mut pool).unwrap_err();
    assert!(
        matches!(error, AfXdpError::NoSuchInterface { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("wstxdp4-nope"));

    let queue_1 = AfXdpConfig {
        queues: QueueSelection::List(vec![1]),
        ..AfXdpConfig::default()
    };
    let error = open_in(&ns, &ifname, &queue_1, &umem, &mut pool).unwrap_err();
    assert!(
        matches!(
            error,
            AfXdpError::QueueOutOfRange {
                queue: 1,
                queues: 1,
                ..
            }
        ),
        "{error}"
    );
    assert!(error.to_string().contains(&ifname));

    let bad_ring = AfXdpConfig {
        rx_size: 1000,
        ..AfXdpConfig::default()
    };
    let error = open_in(&ns, &ifname, &bad_ring, &umem, &mut pool).unwrap_err();
    assert!(
        matches!(error, AfXdpError::RingSize { ring: "RX", .. }),
        "{error}"
    );

    let other_pool = FramePool::new(64, 2048).unwrap();
    let error = open_in(&ns, &ifname, &config, &Umem::new(&other_pool), &mut pool).unwrap_err();
    assert!(matches!(error, AfXdpError::WrongPool { .. }), "{error}");

    let mut small_pool = FramePool::new(1024, 2048).unwrap();
    let small_umem = Umem::new(&small_pool);
    let error = open_in(&ns, &ifname, &config, &small_umem, &mut small_pool).unwrap_err();
    assert!(matches!(error, AfXdpError::PoolTooSmall { .. }), "{error}");

    // Someone else's program (here: another port's) is never replaced.
    let port = open_in(&ns, &ifname, &config, &umem, &mut pool).expect("open");
    let error = open_in(&ns, &ifname, &config, &umem, &mut pool).unwrap_err();
    assert!(
        matches!(error, AfXdpError::XdpAlreadyAttached { .. }),
        "{error}"
    );
    assert!(
        error
            .to_string()
            .contains(&format!("ip link set dev {ifname} xdp off")),
        "{error}"
    );
    assert!(port.is_open());
    close(port, &mut pool);

    // Frames of a 9000-byte MTU do not fit 2048-byte frames.
    set_mtu(&ns, &ifname, 9000);
    let error = open_in(&ns, &ifname, &config, &umem, &mut pool).unwrap_err();
    assert!(
        matches!(
            error,
            AfXdpError::MtuTooLarge {
                mtu: 9000,
                max_mtu: 1770,
                ..
            }
        ),
        "{error}"
    );
    assert!(
        error
            .to_string()
            .contains(&format!("ip link set dev {ifname} mtu 1770"))
    );

    // Loopback has no native XDP.
    set_mtu(&ns, "lo", 1500);
    let native = AfXdpConfig {
        xdp_mode: XdpMode::Native,
        ..AfXdpConfig::default()
    };
    let error = open_in(&ns, "lo", &native, &umem, &mut pool).unwrap_err();
    assert!(
        matches!(error, AfXdpError::XdpAttach { mode: "native", .. }),
        "{error}"
    );
    assert!(error.to_string().contains("port lo"));
    // ... and `auto` falls back to generic mode, saying so.
    let auto = AfXdpConfig {
        fill_size: 256,
        ..AfXdpConfig::default()
    };
    let port = open_in(&ns, "lo", &auto, &umem, &mut pool).expect("generic on lo");
    assert!(
        port.info().mode.starts_with("xdp=generic bind=copy")
            && port.info().mode.contains("native XDP refused"),
        "{}",
        port.info().mode
    );
    close(port, &mut pool);

    assert_eq!(pool.free_count(), pool.total());
    assert!(xdp_detached(&ns, &ifname));
    assert!(xdp_detached(&ns, "lo"));
}

/// This test binary again, running only `test` as a child that opens a port on `ifname` in
/// namespace `ns`; `env` tells the child those two (see [`child_target`]).
fn rerun_as_child(test: &str, env: &str, ns: &str, ifname: &str) -> Command {
    let mut child = Command::new(std::env::current_exe().unwrap());
    child
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(env, format!("{ns} {ifname}"));
    child
}

/// In a child that [`rerun_as_child`] started with `env`: the namespace and interface it was
/// given, with a pool and its UMEM to open a port with; `None` in the test itself.
fn child_target(env: &str) -> Option<(String, String, FramePool, Umem)> {
    let target = std::env::var(env).ok()?;
    let (ns, ifname) = target.split_once(' ').expect("namespace and interface");
    let (pool, umem) = pool_and_umem();
    Some((ns.to_string(), ifname.to_string(), pool, umem))
}

/// Set in the child process of `killed_process_leaves_nothing_attached`: "namespace interface".
const CHILD_ENV: &str = "WIRESPEED_AFXDP_TEST_CHILD";
const CHILD_READY: &str = "wirespeed-afxdp-child-ready";

#[test]
fn killed_process_leaves_nothing_attached() {
    if let Some((ns, ifname, mut pool, umem)) = child_target(CHILD_ENV) {
        // The child: open the port, say so, and wait to be killed.
        let config = AfXdpConfig::default();
        let _port = open_in(&ns, &ifname, &config, &umem, &mut pool).expect("open");
        println!("{CHILD_READY}");
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
    let Some(lab) = lab("wstxdp5", 1, 1) else {
        return;
    };
    let (ns, ifname) = (lab.dut_ns.clone(), lab.pairs[0].dut_if.clone());
    let mut child = rerun_as_child(
        "killed_process_leaves_nothing_attached",
        CHILD_ENV,
        &ns,
        &ifname,
    )
    .stdout(Stdio::piped())
    .spawn()
    .expect("spawn child");
    let stdout = child.stdout.take().unwrap();
    let ready = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .any(|line| line.contains(CHILD_READY));
    if !ready {
        let _ = child.kill();
        panic!("child exited before opening the port: {:?}", child.wait());
    }
    assert!(
        xdp_attached(&ns, &ifname),
        "the child's program is attached"
    );

    child.kill().expect("SIGKILL");
    child.wait().expect("wait");
    assert!(
        xdp_detached(&ns, &ifname),
        "SIGKILL left a program attached"
    );

    // The interface is free for a new open.
    let (mut pool, umem) = pool_and_umem();
    let port = open_in(&ns, &ifname, &AfXdpConfig::default(), &umem, &mut pool).expect("reopen");
    close(port, &mut pool);
    assert_eq!(pool.free_count(), pool.total());
}

/// Transmits `frame` on `ifname` of namespace `netns` through its own AF_XDP port and pool, as
/// fast as the port takes it, until `stop`; returns how many frames were sent.
fn blast(
    netns: &str,
    ifname: &str,
    config: &AfXdpConfig,
    frame: &[u8],
    stop: &std::sync::atomic::AtomicBool,
) -> u64 {
    let (mut pool, umem) = pool_and_umem();
    let mut port = open_in(netns, ifname, config, &umem, &mut pool).expect("open sender");
    let mut batch = Batch::new(64);
    let mut sent = 0u64;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        while !batch.is_full() {
            let Some(id) = pool.alloc() else { break };
            let start = HEADROOM as usize;
            pool.frame_mut(id)[start..start + frame.len()].copy_from_slice(frame);
            batch.push(Desc {
                frame: id,
                offset: HEADROOM,
                len: frame.len() as u16,
                port: 0,
                queue: 0,
            });
        }
        sent += port.tx(0, &mut pool, &mut batch) as u64;
        port.poll(&mut pool);
    }
    for desc in batch.descs() {
        pool.release(desc.frame);
    }
    port.release_all(&mut pool);
    sent
}

/// A measurement, not a test (run explicitly): forwards t0 -> d0 -> d1 -> t1 through two
/// AF_XDP ports sharing one UMEM while a thread in the tester namespace blasts 64-byte frames
/// into t0 through a third AF_XDP port (a raw socket sends too slowly to load the forwarder), once with a busy-polling loop and once sleeping in poll(2) when d0 is empty,
/// and prints the offered and forwarded rates. It informs the worker loop's design (DESIGN §8);
/// figures belong in docs/benchmarks.md with the command:
/// `cargo test --release -p wirespeed-io --test afxdp -- --ignored --nocapture measure_`
#[test]
#[ignore]
fn measure_forwarding_busy_poll_vs_wakeup() {
    let seconds: u64 = std::env::var("WIRESPEED_MEASURE_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let Some(lab) = lab("wstxdpm", 2, 1) else {
        return;
    };
    let (p0, p1) = (lab.pairs[0].clone(), lab.pairs[1].clone());
    let (mut pool, umem) = pool_and_umem();
    let config = AfXdpConfig {
        zero_copy: false,
        ..AfXdpConfig::default()
    };
    let mut d0 = open_in(&lab.dut_ns, &p0.dut_if, &config, &umem, &mut pool).expect("open d0");
    let mut d1 = open_in(&lab.dut_ns, &p1.dut_if, &config, &umem, &mut pool).expect("open d1");
    let fd0 = d0.rx_fd(0).unwrap();
    println!("ports: {}", d0.info().mode);

    for busy in [true, false] {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sender = {
            let stop = stop.clone();
            let (ns, ifname) = (lab.tester_ns.clone(), p0.tester_if.clone());
            let frame = test_frame(p1.tester_mac, p0.tester_mac, 0, 60, None);
            let config = config.clone();
            std::thread::spawn(move || blast(&ns, &ifname, &config, &frame, &stop))
        };
        let (rx_before, tx_before) = (d0.stats(), d1.stats());
        let mut batch = Batch::new(64);
        let start = Instant::now();
        let mut sleeps = 0u64;
        while start.elapsed() < Duration::from_secs(seconds) {
            let got = d0.rx(0, &mut pool, &mut batch);
            if got > 0 {
                d1.tx(0, &mut pool, &mut batch);
                // What TX would not take is dropped, not kept (it would only add latency).
                for desc in batch.descs() {
                    pool.release(desc.frame);
                }
                batch.clear();
            }
            d1.poll(&mut pool);
            if got == 0 && !busy {
                sleeps += 1;
                wait_readable(&[fd0], Duration::from_millis(10)).expect("poll");
            }
        }
        let elapsed = start.elapsed().as_secs_f64();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let sent = sender.join().unwrap();
        let (rx, tx) = (d0.stats(), d1.stats());
        let mpps = |n: u64| n as f64 / elapsed / 1e6;
        println!(
            "{:<22} offered {:.3} Mpps, received {:.3} Mpps, forwarded {:.3} Mpps, \
             d0 kernel drops {:.3} Mpps, tx refused {}, idle sleeps {}",
            if busy {
                "busy polling:"
            } else {
                "need_wakeup + poll(2):"
            },
            mpps(sent),
            mpps(rx.rx_packets - rx_before.rx_packets),
            mpps(tx.tx_packets - tx_before.tx_packets),
            mpps(rx.rx_dropped - rx_before.rx_dropped),
            tx.tx_refused - tx_before.tx_refused,
            sleeps,
        );
    }
    close(d0, &mut pool);
    close(d1, &mut pool);
    assert_eq!(pool.free_count(), pool.total());
}

/// Set in the child process of `unprivileged_open_says_which_capabilities`: "namespace interface".
const UNPRIVILEGED_ENV: &str = "WIRESPEED_AFXDP_TEST_UNPRIVILEGED";
const UNPRIVILEGED_MARK: &str = "wirespeed-afxdp-child-error:";

#[test]
fn unprivileged_open_says_which_capabilities() {
    if let Some((ns, ifname, mut pool, umem)) = child_target(UNPRIVILEGED_ENV) {
        // The child: enter the namespace as root, become nobody, try to open.
        let guard = enter(&ns).expect("enter namespace");
        // SAFETY: setgid/setuid have no memory preconditions; nobody's ids exist everywhere.
        let (gid, uid) = unsafe { (libc::setgid(65534), libc::setuid(65534)) };
        assert_eq!((gid, uid), (0, 0), "{}", std::io::Error::last_os_error());
        let result = AfXdpPort::open(&ifname, &AfXdpConfig::default(), &umem, &mut pool);
        // Without privileges the thread cannot go back to its namespace; it ends here anyway.
        std::mem::forget(guard);
        match result {
            Err(error) => println!("{UNPRIVILEGED_MARK} {error:?} | {error}"),
            Ok(port) => println!("{UNPRIVILEGED_MARK} opened {port:?}"),
        }
        return;
    }
    let Some(lab) = lab("wstxdp6", 1, 1) else {
        return;
    };
    let ifname = lab.pairs[0].dut_if.clone();
    let output = rerun_as_child(
        "unprivileged_open_says_which_capabilities",
        UNPRIVILEGED_ENV,
        &lab.dut_ns,
        &ifname,
    )
    .output()
    .expect("run child");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find_map(|line| line.split_once(UNPRIVILEGED_MARK).map(|(_, said)| said))
        .unwrap_or_else(|| panic!("child said nothing: {stdout} {output:?}"));
    assert!(line.contains("PermissionDenied"), "{line}");
    assert!(line.contains(&format!("port {ifname}")), "{line}");
    assert!(line.contains("CAP_NET_ADMIN"), "{line}");
    assert!(xdp_detached(&lab.dut_ns, &ifname));
}

/// The benchmark's ceiling reference: t0 -> d0 -(in-kernel XDP redirect)-> d1 -> t1, every frame
/// byte for byte, and the program gone when the handle is dropped.
#[test]
fn redirects_in_the_kernel_from_one_interface_to_another() {
    let Some(lab) = lab("wstxdp7", 2, 1) else {
        return;
    };
    let (p0, p1) = (&lab.pairs[0], &lab.pairs[1]);
    // A veth delivers redirected frames only to a peer running NAPI (see XdpRedirect's docs).
    run_in(
        &lab.tester_ns,
        "ethtool",
        &["-K", &p1.tester_if, "gro", "on"],
    )
    .expect("gro on");
    let redirect = {
        let _guard = enter(&lab.dut_ns).expect("enter namespace");
        XdpRedirect::attach(&p0.dut_if, &p1.dut_if, XdpMode::Auto).expect("attach")
    };
    assert_eq!(redirect.mode(), "native");
    assert_eq!(redirect.fallback(), None);
    assert_eq!((redirect.from(), redirect.to()), (&*p0.dut_if, &*p1.dut_if));
    assert!(xdp_attached(&lab.dut_ns, &p0.dut_if));
    assert!(!xdp_attached(&lab.dut_ns, &p1.dut_if));

    let t0 = RawSocket::open(&lab.tester_ns, &p0.tester_if);
    let t1 = RawSocket::open(&lab.tester_ns, &p1.tester_if);
    let count = 200u32;
    let sent: Vec<Vec<u8>> = (0..count)
        .map(|seq| test_frame(p1.tester_mac, p0.tester_mac, seq, frame_len(seq), None))
        .collect();
    for chunk in sent.chunks(50) {
        for frame in chunk {
            t0.send(frame);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let arrived = receive_sorted(&t1, sent.len());
    assert_eq!(arrived.len(), sent.len(), "frames lost in the redirect");
    assert_eq!(arrived, sent);

    drop(redirect);
    assert!(xdp_detached(&lab.dut_ns, &p0.dut_if));
}

/// Transmits `frames` on `queue` of `port` from `pool`, and waits until every one completed.
fn transmit(port: &mut AfXdpPort, queue: QueueId, pool: &mut FramePool, frames: &[Vec<u8>]) {
    let resting = port.frames_held();
    let mut batch = Batch::new(64);
    for chunk in frames.chunks(32) {
        fill(pool, &mut batch, chunk, queue);
        while !batch.is_empty() {
            port.tx(queue, pool, &mut batch);
            port.poll(pool);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    drain_completions(port, pool, resting);
    assert_eq!(
        port.frames_held(),
        resting,
        "transmissions did not complete"
    );
}

/// The sequence numbers of received test frames, sorted; the frames go back to the pool.
fn seqs_of(received: &[Desc], pool: &mut FramePool) -> Vec<u32> {
    let mut seqs: Vec<u32> = received
        .iter()
        .map(|desc| seq_of(&bytes_of(pool, desc)).expect("a test frame"))
        .collect();
    for desc in received {
        pool.release(desc.frame);
    }
    seqs.sort();
    seqs
}

/// Two "workers" (two pools, two UMEMs) share one interface's XDP program: each opens one queue
/// of it, receives exactly the frames the tester sent on that queue, and transmits on it; a
/// queue cannot be taken twice; a released queue can be opened again; the program stays while
/// any user holds it and is gone after the last.
#[test]
fn two_workers_share_one_interface_by_queues() {
    let Some(lab) = lab("wstxdp8", 1, 2) else {
        return;
    };
    let pair = &lab.pairs[0];
    let config = |queue: QueueId| AfXdpConfig {
        queues: QueueSelection::List(vec![queue]),
        fill_size: 512,
        zero_copy: false,
        ..AfXdpConfig::default()
    };
    let fill = 512;
    let attachment = {
        let _guard = enter(&lab.dut_ns).expect("enter namespace");
        std::sync::Arc::new(XdpAttachment::attach(&pair.dut_if, XdpMode::Auto).expect("attach"))
    };
    assert_eq!(attachment.interface(), pair.dut_if);
    assert_eq!((attachment.queues(), attachment.mode()), (2, "native"));
    let open_shared = |queue: QueueId, umem: &Umem, pool: &mut FramePool| {
        let _guard = enter(&lab.dut_ns).expect("enter namespace");
        AfXdpPort::open_shared(&attachment, &config(queue), umem, pool)
    };
    let mut pools = [
        FramePool::new(4096, 2048).unwrap(),
        FramePool::new(4096, 2048).unwrap(),
    ];
    let umems = [Umem::new(&pools[0]), Umem::new(&pools[1])];
    let mut workers = [
        open_shared(0, &umems[0], &mut pools[0]).expect("worker 0 opens queue 0"),
        open_shared(1, &umems[1], &mut pools[1]).expect("worker 1 opens queue 1"),
    ];
    assert_eq!(workers[1].open_queues().collect::<Vec<_>>(), [1]);
    assert!(
        workers[1].info().mode.starts_with("xdp=native bind=copy"),
        "{}",
        workers[1].info().mode
    );

    // A queue is one worker's.
    let mut spare = FramePool::new(4096, 2048).unwrap();
    let spare_umem = Umem::new(&spare);
    let error = open_shared(0, &spare_umem, &mut spare).unwrap_err();
    assert!(
        matches!(error, AfXdpError::QueueTaken { queue: 0, .. }),
        "{error}"
    );
    assert!(error.to_string().contains(&pair.dut_if), "{error}");
    let error = open_shared(2, &spare_umem, &mut spare).unwrap_err();
    assert!(
        matches!(error, AfXdpError::QueueOutOfRange { queue: 2, .. }),
        "{error}"
    );
    // A port of its own cannot attach a second program.
    let error = open_in(
        &lab.dut_ns,
        &pair.dut_if,
        &config(0),
        &spare_umem,
        &mut spare,
    )
    .unwrap_err();
    assert!(
        matches!(error, AfXdpError::XdpAlreadyAttached { .. }),
        "{error}"
    );
    assert_eq!(spare.free_count(), spare.total());

    // The tester sends on each of its queues; a veth delivers on the peer's queue of that number.
    let (mut tester_pool, tester_umem) = pool_and_umem();
    let tester_config = AfXdpConfig {
        zero_copy: false,
        fill_size: 512,
        ..AfXdpConfig::default()
    };
    let mut tester = open_in(
        &lab.tester_ns,
        &pair.tester_if,
        &tester_config,
        &tester_umem,
        &mut tester_pool,
    )
    .expect("tester port");
    let count = 100u32;
    for queue in [0u16, 1] {
        let first = queue as u32 * 1000;
        let frames: Vec<Vec<u8>> = (first..first + count)
            .map(|seq| test_frame(pair.dut_mac, pair.tester_mac, seq, frame_len(seq), None))
            .collect();
        transmit(&mut tester, queue, &mut tester_pool, &frames);
    }
    for (queue, (port, pool)) in workers.iter_mut().zip(pools.iter_mut()).enumerate() {
        let first = queue as u32 * 1000;
        let received = receive(port, &[queue as QueueId], pool, count as usize);
        assert!(received.iter().all(|desc| desc.queue == queue as QueueId));
        assert_eq!(
            seqs_of(&received, pool),
            (first..first + count).collect::<Vec<_>>(),
            "worker {queue} received other frames than those sent on queue {queue}"
        );
    }

    // Each worker transmits on its own queue; everything arrives byte for byte.
    let mut sent = Vec::new();
    for (queue, (port, pool)) in workers.iter_mut().zip(pools.iter_mut()).enumerate() {
        let first = 5000 + queue as u32 * 1000;
        let frames: Vec<Vec<u8>> = (first..first + count)
            .map(|seq| test_frame(pair.tester_mac, pair.dut_mac, seq, frame_len(seq), None))
            .collect();
        transmit(port, queue as QueueId, pool, &frames);
        sent.extend(frames);
    }
    let received = receive(&mut tester, &[0, 1], &mut tester_pool, sent.len());
    let mut arrived: Vec<Vec<u8>> = received
        .iter()
        .map(|desc| bytes_of(&tester_pool, desc))
        .collect();
    for desc in &received {
        tester_pool.release(desc.frame);
    }
    arrived.sort_by_key(|frame| seq_of(frame));
    assert_eq!(arrived.len(), sent.len(), "frames lost on the way out");
    assert!(arrived == sent, "frames changed on the way out");

    // Releasing worker 0 frees queue 0 (another pool may take it) and keeps the program for
    // worker 1.
    let [first, second] = workers;
    close(first, &mut pools[0]);
    assert_eq!(pools[0].free_count(), pools[0].total());
    assert!(xdp_attached(&lab.dut_ns, &pair.dut_if));
    let again = open_shared(0, &spare_umem, &mut spare).expect("queue 0 is free again");
    assert_eq!(again.frames_held(), fill);
    close(again, &mut spare);
    close(second, &mut pools[1]);
    assert_eq!(pools[1].free_count(), pools[1].total());
    assert_eq!(spare.free_count(), spare.total());
    assert!(
        xdp_attached(&lab.dut_ns, &pair.dut_if),
        "the Arc still holds it"
    );
    drop(attachment);
    assert!(xdp_detached(&lab.dut_ns, &pair.dut_if));
    close(tester, &mut tester_pool);
    assert_eq!(tester_pool.free_count(), tester_pool.total());
}

#[test]
fn tx_room_is_the_free_tx_ring_and_completions_give_it_back() {
    let Some(lab) = lab("wstxdpr", 1, 1) else {
        return;
    };
    let pair = &lab.pairs[0];
    let (mut pool, umem) = pool_and_umem();
    let config = AfXdpConfig {
        tx_size: 64,
        completion_size: 64,
        ..AfXdpConfig::default()
    };
    let mut port = open_in(&lab.dut_ns, &pair.dut_if, &config, &umem, &mut pool).expect("open");
    let resting = port.frames_held();
    let tester = RawSocket::open(&lab.tester_ns, &pair.tester_if);
    let sent = check_tx_room_with_the_link_down_then_up(&mut port, &mut pool, &lab.dut_ns, pair);
    drain_completions(&mut port, &mut pool, resting);
    assert_eq!(port.frames_held(), resting, "every completion was reaped");
    assert_eq!(receive_sorted(&tester, 64), sent);
    close(port, &mut pool);
    assert_eq!(pool.free_count(), pool.total());
}
