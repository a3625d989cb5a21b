//! The OpenFlow agent's goals (issue 20), measured in the lab rather than asserted: a
//! `wirespeed switch` running the openflow app over AF_XDP in the DuT namespace, its agent on
//! the namespace's loopback, and, per run, on a fresh switch:
//!
//! - PACKET_IN per second to a controller that only counts them (the table-miss flow entry
//!   sends every frame to the controller; the tester sends as fast as it can);
//! - FLOW_MOD + BARRIER round trips per second (one add, then its barrier, then the next; a
//!   thousand flows in turn);
//! - the time `ovs-ofctl -O OpenFlow13 add-flows` takes for a file of 100 000 flows, with frames
//!   forwarded by another flow all the while (counted per 100 ms); ovs-ofctl waits for a
//!   barrier after every flow, so this is 100 000 round trips;
//! - the time `ovs-ofctl -O OpenFlow13 --bundle add-flows` takes for the same file (one bundle:
//!   no barrier per flow, one commit), forwarding counted the same way;
//! - the time the same 100 000 flows take from a controller that pipelines them (every
//!   FLOW_MOD written at once, then one barrier, until its reply).
//!
//! Ignored in `make test` (a few minutes); run it with
//! `cargo test --release -p wirespeed --test openflow_bench -- --ignored --nocapture`. It
//! prints each run and the medians; docs/benchmarks/journal.md ("Session sixteen") has the
//! figures.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use wirespeed_io::afpacket::AfPacketPort;
use wirespeed_lab::Testbed;
use wirespeed_openflow::action::port;
use wirespeed_openflow::message::{FlowMod, FlowModCommand, NO_BUFFER};
use wirespeed_openflow::oxm::ETH_TYPE_IPV4;
use wirespeed_openflow::{Action, Header, Instruction, Match, Message, Oxm};
use wirespeed_packet::FramePool;
use wirespeed_testkit::ports::{receive, send};

mod common;
use common::*;

const FLOWS: usize = 100_000;
const RUNS: usize = 3;
/// How long each rate is measured (after a warm-up as long).
const WINDOW: Duration = Duration::from_secs(2);
/// The forwarding figures' interval.
const BUCKET: Duration = Duration::from_millis(100);

fn config(lab: &Testbed, socket: &Path) -> String {
    format!(
        "[switch]\napp = \"openflow\"\ncontrol_socket = \"{}\"\n\n\
         [[port]]\nname = \"p0\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n\
         [[port]]\nname = \"p1\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n\
         [openflow]\ntables = 1\nmiss = \"drop\"\nflows_per_table = 131072\n\
         listen = \"ptcp:6653\"\n",
        socket.display(),
        lab.pairs[0].dut_if,
        lab.pairs[1].dut_if,
    )
}

/// ovs-ofctl against the switch (an add-flows of 100 000 flows may take a while); its output,
/// after asserting success.
fn ofctl(lab: &Testbed, command: &str, args: &[&str]) -> String {
    let (success, text) = ofctl_within(lab, 300, command, args);
    assert!(success, "ovs-ofctl {command}: {text}");
    text
}

/// A controller's end of a connection to the agent, with the codec.
struct Controller {
    stream: TcpStream,
    xid: u32,
    input: Vec<u8>,
}

impl Controller {
    fn connect(lab: &Testbed) -> Controller {
        let stream = {
            let _inside = wirespeed_lab::enter(&lab.dut_ns).unwrap();
            TcpStream::connect("127.0.0.1:6653").unwrap()
        };
        stream.set_nodelay(true).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let mut controller = Controller {
            stream,
            xid: 0,
            input: Vec::new(),
        };
        controller.send(&Message::Hello {
            bitmap: Some(vec![1 << 4]),
        });
        let (_, hello) = controller.receive();
        assert!(matches!(hello, Message::Hello { .. }), "{hello:?}");
        controller
    }

    fn send(&mut self, message: &Message) -> u32 {
        self.xid += 1;
        self.stream
            .write_all(&message.encode(self.xid).unwrap())
            .unwrap();
        self.xid
    }

    /// Reads what the socket has (up to its timeout); false when nothing came.
    fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 256 * 1024];
        match self.stream.read(&mut chunk) {
            Ok(0) => panic!("the agent closed the connection"),
            Ok(n) => {
                self.input.extend_from_slice(&chunk[..n]);
                true
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => false,
            Err(e) => panic!("{e}"),
        }
    }

    /// The next whole message's bytes, if one is in.
    fn take(&mut self) -> Option<Vec<u8>> {
        let header = Header::peek(&self.input)?;
        let len = usize::from(header.length);
        (self.input.len() >= len).then(|| self.input.drain(..len).collect())
    }

    fn receive(&mut self) -> (Header, Message) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(bytes) = self.take() {
                return Message::decode(&bytes).unwrap();
            }
            assert!(Instant::now() < deadline, "no message from the agent");
            self.fill();
        }
    }

    /// Counts the PACKET_INs that arrive within `window`, by their headers alone (a
    /// controller that only counts).
    fn count_packet_ins(&mut self, window: Duration) -> u64 {
        let end = Instant::now() + window;
        let mut count = 0;
        while Instant::now() < end {
            self.fill();
            let mut at = 0;
            while let Some(header) = Header::peek(&self.input[at..]) {
                let len = usize::from(header.length).max(8);
                if self.input.len() - at < len {
                    break;
                }
                count += u64::from(header.kind == 10);
                at += len;
            }
            self.input.drain(..at);
        }
        count
    }
}

fn flow_mod(priority: u16, fields: Vec<Oxm>, actions: Vec<Action>) -> Message {
    Message::FlowMod(FlowMod {
        cookie: 0,
        cookie_mask: 0,
        table_id: 0,
        command: FlowModCommand::Add,
        idle_timeout: 0,
        hard_timeout: 0,
        priority,
        buffer_id: NO_BUFFER,
        out_port: port::ANY,
        out_group: wirespeed_openflow::action::group::ANY,
        flags: 0,
        matcher: Match::new(fields),
        instructions: vec![Instruction::ApplyActions(actions)],
    })
}

/// Frames sent from t0 and counted on t1 until `stop`, by [`BUCKET`], in a thread: 64 every
/// half millisecond (`steady` false: about 128 000 a second, more than the goal of PACKET_INs
/// without taking the core the agent shares with the tester) or 64 every millisecond, counted.
struct Traffic {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<(u64, Vec<u64>)>,
}

impl Traffic {
    fn start(mut t0: AfPacketPort, mut t1: AfPacketPort, steady: bool) -> Traffic {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut pool = FramePool::new(4096, 2048).unwrap();
                let batch = frames(64);
                let (mut sent, mut buckets) = (0u64, vec![0u64]);
                let mut next_bucket = Instant::now() + BUCKET;
                while !stop.load(Ordering::Relaxed) {
                    sent += send(&mut t0, &mut pool, &batch) as u64;
                    if !steady {
                        std::thread::sleep(Duration::from_micros(500));
                    } else {
                        std::thread::sleep(Duration::from_millis(1));
                        let got = receive(&mut t1, &mut pool).len();
                        *buckets.last_mut().unwrap() += got as u64;
                        if Instant::now() >= next_bucket {
                            buckets.push(0);
                            next_bucket += BUCKET;
                        }
                    }
                }
                (sent, buckets)
            })
        };
        Traffic { stop, thread }
    }

    fn stop(self) -> (u64, Vec<u64>) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// A test frame to IPv4 address `dst`, its header checksum made right.
fn to_address(dst: [u8; 4]) -> Vec<u8> {
    let mut frame = frames(1).remove(0);
    frame[30..34].copy_from_slice(&dst);
    frame[24..26].fill(0);
    let sum: u32 = frame[14..34]
        .chunks(2)
        .map(|pair| u32::from(u16::from_be_bytes([pair[0], pair[1]])))
        .sum();
    let folded = (sum & 0xffff) + (sum >> 16);
    let checksum = !(((folded & 0xffff) + (folded >> 16)) as u16);
    frame[24..26].copy_from_slice(&checksum.to_be_bytes());
    frame
}

/// One run's figures.
struct Run {
    packet_ins: f64,
    round_trips: f64,
    install: Duration,
    bundled: Duration,
    pipelined: Duration,
}

/// Runs `install` while the flow of priority 20 forwards the tester's frames: how long it
/// took, and the frames forwarded in each [`BUCKET`] wholly inside it.
fn forwarding_during(lab: &Testbed, install: impl FnOnce()) -> (Duration, Vec<u64>, u64) {
    let traffic = Traffic::start(tester_port(lab, 0), tester_port(lab, 1), true);
    std::thread::sleep(Duration::from_millis(500));
    let began = Instant::now();
    install();
    let took = began.elapsed();
    std::thread::sleep(Duration::from_millis(500));
    let (sent, buckets) = traffic.stop();
    // The first 5 buckets are before it.
    let during = buckets
        .iter()
        .skip(5)
        .take((took.as_millis() / BUCKET.as_millis()) as usize)
        .copied()
        .collect();
    (took, during, sent)
}

/// "min M max X (N intervals)" of the frames forwarded per bucket.
fn intervals(during: &[u64]) -> String {
    format!(
        "min {} max {} ({} intervals)",
        during.iter().min().unwrap_or(&0),
        during.iter().max().unwrap_or(&0),
        during.len()
    )
}

/// Installs `flows` (the add-flows file's) from `controller` as a controller that pipelines
/// does: every FLOW_MOD at once, then one barrier; how long until the barrier's reply, which
/// no ERROR precedes.
fn pipelined_install(controller: &mut Controller, flows: usize) -> Duration {
    let began = Instant::now();
    let mut bytes = Vec::new();
    for i in 0..flows {
        let dst = [10, (i >> 16) as u8, (i >> 8) as u8, i as u8];
        let fields = vec![Oxm::EthType(ETH_TYPE_IPV4), Oxm::Ipv4Dst(dst.into(), None)];
        let message = flow_mod(10, fields, vec![Action::output(2)]);
        bytes.extend(message.encode(i as u32).unwrap());
    }
    controller.stream.write_all(&bytes).unwrap();
    let barrier = controller.send(&Message::BarrierRequest);
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        if let Some(reply) = controller.take() {
            let (header, message) = Message::decode(&reply).unwrap();
            assert_eq!(message, Message::BarrierReply, "{header:?}");
            assert_eq!(header.xid, barrier);
            return began.elapsed();
        }
        assert!(Instant::now() < deadline, "no barrier reply");
        controller.fill();
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn one_run(lab: &Testbed, dir: &Path, run: usize) -> Run {
    let socket = dir.join("ctl.sock");
    let mut switch = Switch::start(lab, &config(lab, &socket), dir);
    wait_for_control(&socket);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ofctl_within(lab, 5, "show", &[]).0 {
        assert!(Instant::now() < deadline, "the agent never answered");
        std::thread::sleep(Duration::from_millis(100));
    }

    // PACKET_IN: every frame a table miss for the controller.
    let mut controller = Controller::connect(lab);
    let to_controller = vec![Action::Output {
        port: port::CONTROLLER,
        max_len: 0xffff,
    }];
    controller.send(&flow_mod(0, vec![], to_controller));
    let traffic = Traffic::start(tester_port(lab, 0), tester_port(lab, 1), false);
    controller.count_packet_ins(WINDOW);
    let counted = controller.count_packet_ins(WINDOW);
    let (sent, _) = traffic.stop();
    let packet_ins = counted as f64 / WINDOW.as_secs_f64();
    drop(controller);
    ofctl(lab, "del-flows", &[]);
    let (_, counters) = ctl_at(&socket, &["show", "counters"]);
    let dropped: Vec<&str> = counters
        .lines()
        .filter(|l| l.contains("packet_in"))
        .collect();
    println!(
        "run {run}: PACKET_IN {packet_ins:.0}/s ({counted} in {WINDOW:?}; tester sent {sent} \
         frames in all; {dropped:?})"
    );

    // FLOW_MOD + BARRIER round trips, a thousand flows in turn (adds that replace, after the
    // first thousand).
    let mut controller = Controller::connect(lab);
    let mut trip = |i: usize| {
        let dst = [11, 0, (i / 256) as u8, (i % 256) as u8];
        let fields = vec![Oxm::EthType(ETH_TYPE_IPV4), Oxm::Ipv4Dst(dst.into(), None)];
        controller.send(&flow_mod(30, fields, vec![Action::output(2)]));
        let barrier = controller.send(&Message::BarrierRequest);
        let (header, reply) = controller.receive();
        assert_eq!((header.xid, reply), (barrier, Message::BarrierReply));
    };
    let warm_up = Instant::now() + WINDOW / 2;
    let mut i = 0;
    while Instant::now() < warm_up {
        trip(i % 1000);
        i += 1;
    }
    let (start, mut trips) = (Instant::now(), 0usize);
    while start.elapsed() < WINDOW {
        trip((i + trips) % 1000);
        trips += 1;
    }
    let round_trips = trips as f64 / start.elapsed().as_secs_f64();
    drop(controller);
    println!("run {run}: FLOW_MOD + BARRIER {round_trips:.0} round trips/s ({trips})");
    ofctl(lab, "del-flows", &[]);

    // 100k flows from one add-flows file, while another flow forwards.
    ofctl(lab, "add-flow", &["priority=20,in_port=1,actions=output:2"]);
    let file = dir.join("flows.txt");
    let lines: Vec<String> = (0..FLOWS)
        .map(|i| {
            format!(
                "priority=10,ip,nw_dst=10.{}.{}.{},actions=output:2",
                i >> 16,
                (i >> 8) & 255,
                i & 255
            )
        })
        .collect();
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let (install, during, sent) = forwarding_during(lab, || {
        ofctl(lab, "add-flows", &[file.to_str().unwrap()]);
    });
    println!(
        "run {run}: {FLOWS} flows installed in {:.2} s; frames forwarded per {BUCKET:?} during \
         it: {}; tester sent {sent}",
        install.as_secs_f64(),
        intervals(&during),
    );
    // Every flow is in, the last one too (statistics list only the first 10 000 flows): with
    // the forwarding flow gone, a frame to the last flow's address goes out, one to an address
    // of none is dropped.
    ofctl(lab, "del-flows", &["--strict", "priority=20,in_port=1"]);
    let (mut t0, mut t1) = (tester_port(lab, 0), tester_port(lab, 1));
    let mut pool = FramePool::new(4096, 2048).unwrap();
    let last = FLOWS - 1;
    let to_last = to_address([10, (last >> 16) as u8, (last >> 8) as u8, last as u8]);
    send(
        &mut t0,
        &mut pool,
        &[to_address([10, 250, 0, 1]), to_last.clone()],
    );
    assert_eq!(
        receive_all(&mut t1, &mut pool, 2, TEST_PORT),
        vec![to_last],
        "the last of the {FLOWS} flows forwards"
    );

    // The same flows again as one bundle (`--bundle`: no barrier per flow, one commit),
    // while the flow of priority 20 forwards.
    ofctl(lab, "del-flows", &[]);
    ofctl(lab, "add-flow", &["priority=20,in_port=1,actions=output:2"]);
    let (bundled, during, sent) = forwarding_during(lab, || {
        ofctl(lab, "add-flows", &[file.to_str().unwrap(), "--bundle"]);
    });
    let aggregate = ofctl(lab, "dump-aggregate", &[]);
    assert!(
        aggregate.contains(&format!("flow_count={}", FLOWS + 1)),
        "{aggregate}"
    );
    println!(
        "run {run}: {FLOWS} flows in one bundle in {:.2} s; frames forwarded per {BUCKET:?} \
         during it: {}; tester sent {sent}",
        bundled.as_secs_f64(),
        intervals(&during),
    );

    // The same flows again, from a controller that pipelines them, forwarding meanwhile.
    ofctl(lab, "del-flows", &[]);
    ofctl(lab, "add-flow", &["priority=20,in_port=1,actions=output:2"]);
    let mut controller = Controller::connect(lab);
    let mut pipelined = Duration::ZERO;
    let (_, during, sent) = forwarding_during(lab, || {
        pipelined = pipelined_install(&mut controller, FLOWS);
    });
    drop(controller);
    let aggregate = ofctl(lab, "dump-aggregate", &[]);
    assert!(
        aggregate.contains(&format!("flow_count={}", FLOWS + 1)),
        "{aggregate}"
    );
    println!(
        "run {run}: {FLOWS} flows pipelined by a controller in {:.2} s; frames forwarded per \
         {BUCKET:?} during it: {}; tester sent {sent}",
        pipelined.as_secs_f64(),
        intervals(&during),
    );

    let (success, out) = switch.interrupt();
    assert!(success && out.contains("conservation holds"), "{out}");
    Run {
        packet_ins,
        round_trips,
        install,
        bundled,
        pipelined,
    }
}

#[test]
#[ignore = "a benchmark: cargo test --release -p wirespeed --test openflow_bench -- --ignored"]
fn openflow_agent_goals() {
    if Command::new("ovs-ofctl").arg("--version").output().is_err() {
        println!("skipped: ovs-ofctl is not installed (scripts/setup-debian.sh installs it)");
        return;
    }
    let _alone = alone();
    let Some((lab, dir)) = lab("wsofb", 1) else {
        return;
    };
    dut_loopback_up(&lab);
    let runs: Vec<Run> = (0..RUNS).map(|run| one_run(&lab, &dir, run)).collect();
    println!(
        "medians of {RUNS}: PACKET_IN {:.0}/s, FLOW_MOD + BARRIER {:.0}/s, {FLOWS} flows in {:.2} s \
         (ovs-ofctl), {:.2} s (ovs-ofctl --bundle), {:.2} s (pipelined)",
        median(runs.iter().map(|r| r.packet_ins).collect()),
        median(runs.iter().map(|r| r.round_trips).collect()),
        median(runs.iter().map(|r| r.install.as_secs_f64()).collect()),
        median(runs.iter().map(|r| r.bundled.as_secs_f64()).collect()),
        median(runs.iter().map(|r| r.pipelined.as_secs_f64()).collect()),
    );
}
