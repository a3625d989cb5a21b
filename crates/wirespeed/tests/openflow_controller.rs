//! A real OpenFlow controller drives wirespeed: the os-ken learning switch of
//! `tests/controller/learning_switch.py` runs in the lab's DuT namespace, and `wirespeed
//! switch` (the openflow app over AF_XDP) connects to it as its configured controller. Frames
//! between two hosts (MAC addresses of their own, sent and captured on the tester side) cross
//! byte for byte: the first of each direction through PACKET_IN and PACKET_OUT, the later ones
//! by the flows the controller installed, whose counts `ctl flow show` gives. A switch port's
//! veth peer set down and up again reaches the controller as PORT_STATUS messages (MODIFY,
//! LINK_DOWN then LIVE). Then the controller is killed: the installed flows keep forwarding;
//! with `fail_mode = "secure"` a new host's frames go nowhere, with `"standalone"` the agent
//! switches them as a learning switch.
//!
//! Skips with a printed reason where namespaces cannot be made (not root) or where os-ken is
//! not installed (`scripts/setup-debian.sh` installs it in [`PYTHON`]'s virtual environment);
//! runs in CI, which is root.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use wirespeed_lab::Testbed;
use wirespeed_packet::FramePool;
use wirespeed_testkit::ports::send;

mod common;
use common::*;

/// The Python of the virtual environment the setup installs os-ken into.
const PYTHON: &str = "/opt/wirespeed/os-ken/bin/python";
/// Where the controller listens, on the DuT namespace's loopback.
const CONTROLLER_PORT: u16 = 16653;
/// How long the test waits to be sure that frames do not arrive.
const QUIET: Duration = Duration::from_millis(300);

/// The controller's process, killed when the test ends however it ends.
struct Controller {
    child: Option<Child>,
    log: std::path::PathBuf,
}

impl Controller {
    fn start(lab: &Testbed, dir: &Path) -> Controller {
        let log = dir.join("controller.log");
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/controller/learning_switch.py");
        let child = Command::new("ip")
            .args(["netns", "exec", &lab.dut_ns, PYTHON])
            .arg(script)
            .arg(CONTROLLER_PORT.to_string())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the os-ken controller");
        Controller {
            child: Some(child),
            log,
        }
    }

    fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Waits (at most 20 s) until a line of the log contains `text`.
    fn wait_for(&self, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.lines().iter().any(|l| l.contains(text)) {
            assert!(
                Instant::now() < deadline,
                "the controller never printed {text:?}:\n{}",
                self.lines().join("\n")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Runs `command` in the DuT namespace; whether it succeeded and printed anything.
fn in_dut(lab: &Testbed, command: &[&str]) -> bool {
    Command::new("ip")
        .args(["netns", "exec", &lab.dut_ns])
        .args(command)
        .output()
        .is_ok_and(|out| out.status.success() && !out.stdout.is_empty())
}

/// Sets the tester's end of pair `pair` `up` or `down`: the switch port's carrier follows.
fn tester_link(lab: &Testbed, pair: usize, state: &str) {
    let status = Command::new("ip")
        .args(["-n", &lab.tester_ns, "link", "set", "dev"])
        .args([&lab.pairs[pair].tester_if, state])
        .status()
        .expect("ip link set");
    assert!(status.success());
}

fn config(lab: &Testbed, socket: &Path, fail_mode: &str) -> String {
    format!(
        "[switch]\napp = \"openflow\"\ncontrol_socket = \"{}\"\n\n\
         [[port]]\nname = \"p0\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n\
         [[port]]\nname = \"p1\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n\
         [openflow]\ntables = 1\nmiss = \"drop\"\nlisten = \"none\"\n\
         controllers = [\"tcp:127.0.0.1:{CONTROLLER_PORT}\"]\nfail_mode = \"{fail_mode}\"\n",
        socket.display(),
        lab.pairs[0].dut_if,
        lab.pairs[1].dut_if,
    )
}

/// A test frame from host `src` to host `dst`.
fn frame(src: [u8; 6], dst: [u8; 6]) -> Vec<u8> {
    let mut frame = frames(1).remove(0);
    frame[0..6].copy_from_slice(&dst);
    frame[6..12].copy_from_slice(&src);
    frame
}

/// The packets column of the flow `ctl flow show` lists with `eth_src` and `eth_dst`.
fn flow_packets(socket: &Path, src: &str, dst: &str) -> Option<u64> {
    let (_, table) = ctl_at(socket, &["flow", "show"]);
    let row = table
        .lines()
        .find(|l| l.contains(&format!("eth_src={src}")) && l.contains(&format!("eth_dst={dst}")))?;
    // Columns: worker, table, priority, match, actions, goto, idle, hard, packets, ...
    row.split_whitespace().nth(8)?.parse().ok()
}

#[test]
fn an_os_ken_learning_switch_drives_the_openflow_app_then_it_fails_secure() {
    learning_switch("wsosk", "secure");
}

#[test]
fn without_its_os_ken_controller_a_standalone_switch_learns_by_itself() {
    learning_switch("wsoskst", "standalone");
}

fn learning_switch(prefix: &str, fail_mode: &str) {
    if !Path::new(PYTHON).exists() {
        println!("skipped: os-ken is not installed in {PYTHON} (scripts/setup-debian.sh does it)");
        return;
    }
    let Some((lab, dir)) = lab(prefix, 1) else {
        return;
    };
    dut_loopback_up(&lab);
    let mut controller = Controller::start(&lab, &dir);
    let port = format!("sport = :{CONTROLLER_PORT}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !in_dut(&lab, &["ss", "-Hltn", &port]) {
        assert!(
            Instant::now() < deadline,
            "the controller never listened:\n{}",
            controller.lines().join("\n")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let socket = dir.join("ctl.sock");
    let mut switch = Switch::start(&lab, &config(&lab, &socket, fail_mode), &dir);
    wait_for_control(&socket);
    controller.wait_for("connected datapath");
    // The table-miss flow entry is in once the app shows it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ctl_at(&socket, &["flow", "show"]).1.contains("controller") {
        assert!(Instant::now() < deadline, "no table-miss flow entry");
        std::thread::sleep(Duration::from_millis(50));
    }

    // Port 2's link goes down and comes back (before the tester's sockets are open on it).
    if fail_mode == "secure" {
        tester_link(&lab, 1, "down");
        controller.wait_for("port_status reason=2 port=2 name=p1 config=0 state=1");
        tester_link(&lab, 1, "up");
        controller.wait_for("port_status reason=2 port=2 name=p1 config=0 state=4");
        let statuses: Vec<String> = controller
            .lines()
            .into_iter()
            .filter(|l| l.starts_with("port_status"))
            .collect();
        assert_eq!(statuses.len(), 2, "{statuses:?}");
    }

    let mut pool = FramePool::new(4096, 2048).unwrap();
    let (mut t0, mut t1) = (tester_port(&lab, 0), tester_port(&lab, 1));
    let ours = |f: &[u8]| is_udp_to(f, TEST_PORT);
    let (h1, h2, h3) = (
        [0x02, 0, 0, 0, 0xaa, 1],
        [0x02, 0, 0, 0, 0xaa, 2],
        [0x02, 0, 0, 0, 0xaa, 3],
    );
    let (there, back) = (frame(h1, h2), frame(h2, h1));
    // h1 -> h2: h2 unknown, flooded (to p1 only); h2 -> h1: h1 learned, a flow for it;
    // h1 -> h2 again: h2 learned now, a flow for it too. Each through the controller.
    for (from_t0, sent) in [(true, &there), (false, &back), (true, &there)] {
        let (tx, rx) = if from_t0 {
            (&mut t0, &mut t1)
        } else {
            (&mut t1, &mut t0)
        };
        send(tx, &mut pool, std::slice::from_ref(sent));
        // Through a Python controller on a busy machine: up to receive_all's 3 s.
        let got = receive_all(rx, &mut pool, 1, TEST_PORT);
        assert_same(&got, std::slice::from_ref(sent));
    }
    let ours_in = |lines: &[String]| -> Vec<String> {
        lines
            .iter()
            .filter(|l| l.starts_with("packet_in") && l.contains("02:00:00:00:aa:0"))
            .cloned()
            .collect()
    };
    let packet_ins = ours_in(&controller.lines());
    assert_eq!(packet_ins.len(), 3, "{packet_ins:?}");
    let len = there.len();
    for (line, (in_port, out)) in packet_ins.iter().zip([(1, "flood"), (2, "1"), (1, "2")]) {
        let want =
            format!("packet_in reason=0 table=0 in_port={in_port} len={len} total_len={len}");
        assert!(
            line.starts_with(&want) && line.ends_with(&format!("out={out}")),
            "{line}"
        );
    }

    // The flows the controller installed forward the rest, without it.
    let (h1_text, h2_text) = (mac_text(h1), mac_text(h2));
    let many = 20;
    send(&mut t0, &mut pool, &vec![there.clone(); many]);
    assert_same(
        &receive_all(&mut t1, &mut pool, many, TEST_PORT),
        &vec![there.clone(); many],
    );
    send(&mut t1, &mut pool, &vec![back.clone(); many]);
    assert_same(
        &receive_all(&mut t0, &mut pool, many, TEST_PORT),
        &vec![back.clone(); many],
    );
    assert_eq!(ours_in(&controller.lines()).len(), 3);
    assert_eq!(flow_packets(&socket, &h1_text, &h2_text), Some(many as u64));
    // The flow back was installed by the second PACKET_IN, before the third frame.
    assert_eq!(flow_packets(&socket, &h2_text, &h1_text), Some(many as u64));

    // Without its controller the switch keeps its flows; a new host's frame (a table miss,
    // for no one) goes nowhere when it fails secure, and is switched by the agent when it
    // fails standalone, the first flooded, the answer straight back to where h3 was learned.
    controller.kill();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ctl_at(&socket, &["show", "openflow"]).1.contains("down") {
        assert!(
            Instant::now() < deadline,
            "the controller's connection stayed up"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    send(&mut t0, &mut pool, &vec![there.clone(); 5]);
    assert_same(
        &receive_all(&mut t1, &mut pool, 5, TEST_PORT),
        &vec![there.clone(); 5],
    );
    let (new_there, new_back) = (frame(h3, h2), frame(h2, h3));
    send(&mut t0, &mut pool, std::slice::from_ref(&new_there));
    if fail_mode == "secure" {
        assert!(receive_during(&mut t1, &mut pool, QUIET, ours).is_empty());
    } else {
        assert_same(
            &receive_all(&mut t1, &mut pool, 1, TEST_PORT),
            std::slice::from_ref(&new_there),
        );
        send(&mut t1, &mut pool, std::slice::from_ref(&new_back));
        assert_same(
            &receive_all(&mut t0, &mut pool, 1, TEST_PORT),
            std::slice::from_ref(&new_back),
        );
    }
    assert_eq!(
        flow_packets(&socket, &h1_text, &h2_text),
        Some(many as u64 + 5)
    );

    let (success, out) = switch.interrupt();
    assert!(success && out.contains("conservation holds"), "{out}");
}
