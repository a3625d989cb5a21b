//! What the end-to-end tests of the binary share: running `wirespeed switch` in a lab's DuT
//! namespace, tester-side ports, test frames, and comparing what arrives.
#![allow(dead_code)] // each test file uses its own part of this module

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use wirespeed_io::afpacket::{AfPacketConfig, AfPacketPort};
use wirespeed_lab::{Testbed, TestbedConfig};
use wirespeed_packet::FramePool;
use wirespeed_tester::generator::{Template, TemplateConfig};
use wirespeed_testkit::ports::receive;

/// The machine's cores, as the tests of one binary share them: libtest runs two at a time on
/// CI's two cores, and a neighbouring test's busy-polling wirespeed takes a whole core. A test
/// that holds a search to a boundary known in advance measures [`alone`]; the tests beside it
/// in its binary run [`shared`] (any number together, never with it).
static CORES: RwLock<()> = RwLock::new(());

/// Waits until no other test of this binary holds the cores, then keeps them until dropped.
pub fn alone() -> RwLockWriteGuard<'static, ()> {
    // A test that failed holding the guard poisons it; the cores are free all the same.
    CORES.write().unwrap_or_else(PoisonError::into_inner)
}

/// Shares the cores with the binary's other tests, but not with one that runs [`alone`].
pub fn shared() -> RwLockReadGuard<'static, ()> {
    CORES.read().unwrap_or_else(PoisonError::into_inner)
}

/// Kills the switch if the test fails before stopping it.
pub struct Switch(pub Option<Child>);

impl Drop for Switch {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Switch {
    pub fn start(lab: &Testbed, config: &str, dir: &std::path::Path) -> Switch {
        Switch::start_with(lab, config, dir, &[])
    }

    /// [`Switch::start`] with more arguments for `wirespeed switch`.
    pub fn start_with(lab: &Testbed, config: &str, dir: &std::path::Path, args: &[&str]) -> Switch {
        // Named after the lab: the default control socket is /run/wirespeed/<stem>.sock, and
        // tests run in parallel.
        let path = dir.join(format!("{}.toml", lab.dut_ns));
        std::fs::write(&path, config).unwrap();
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                &lab.dut_ns,
                env!("CARGO_BIN_EXE_wirespeed"),
                "switch",
                "--config",
            ])
            .arg(&path)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start wirespeed switch");
        Switch(Some(child))
    }

    /// Sends SIGINT and returns (exit success, stdout + stderr).
    pub fn interrupt(&mut self) -> (bool, String) {
        let mut child = self.0.take().unwrap();
        let _ = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "switch did not stop after SIGINT"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        (status.success(), out)
    }
}

pub fn tester_port(lab: &Testbed, pair: usize) -> AfPacketPort {
    let _inside = wirespeed_lab::enter(&lab.tester_ns).unwrap();
    AfPacketPort::open(
        &format!("t{pair}"),
        &lab.pairs[pair].tester_if,
        &AfPacketConfig::default(),
    )
    .unwrap()
}

/// Turns GRO on for the tester's end of pair `pair`: a veth takes frames redirected to it in
/// XDP (the fast path's) only while its peer runs NAPI, which GRO (or an XDP program) makes it
/// do; GRO merges nothing of the tests' UDP frames, which no socket asked to be merged.
pub fn receive_with_napi(lab: &Testbed, pair: usize) {
    wirespeed_lab::run_in(
        &lab.tester_ns,
        "ethtool",
        &["-K", &lab.pairs[pair].tester_if, "gro", "on"],
    )
    .expect("ethtool -K gro on");
}

/// The row of `port` in the fast path's table that `wirespeed switch` prints at the end
/// (`out`): rx forwarded, tx forwarded, frames to user space per reason, then frames dropped.
pub fn fast_path_row(out: &str, port: &str) -> Vec<u64> {
    let table = out
        .split("fast path (XDP, in the kernel):")
        .nth(1)
        .unwrap_or_else(|| panic!("no fast path table:\n{out}"));
    let prefix = format!("{port} ");
    table
        .lines()
        .find(|line| line.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no row {port}:\n{table}"))
        .split_whitespace()
        .skip(1)
        .map(|n| n.parse().unwrap())
        .collect()
}

/// UDP destination port of the test frames; probes use another one.
pub const TEST_PORT: u16 = 9;

pub fn frames(count: u32) -> Vec<Vec<u8>> {
    frames_to(count, TEST_PORT)
}

pub fn frames_to(count: u32, dst_port: u16) -> Vec<Vec<u8>> {
    let config = TemplateConfig {
        frame_size: 128,
        flows: 8,
        dst_port,
        ..TemplateConfig::default()
    };
    let template = Template::new(&config).unwrap();
    (0..count).map(|i| template.frame(i)).collect()
}

/// Whether `frame` is an IPv4/UDP frame to `dst_port` (the lab's kernels send their own IPv6
/// neighbour discovery and MLD frames, which are not the test's).
pub fn is_udp_to(frame: &[u8], dst_port: u16) -> bool {
    frame.len() >= 38
        && frame[12..14] == [0x08, 0x00]
        && frame[23] == 17
        && frame[36..38] == dst_port.to_be_bytes()
}

/// Whether `frame` is an IPv6/UDP frame (no extension header) to `dst_port`.
pub fn is_udp6_to(frame: &[u8], dst_port: u16) -> bool {
    frame.len() >= 58
        && frame[12..14] == [0x86, 0xdd]
        && frame[20] == 17
        && frame[56..58] == dst_port.to_be_bytes()
}

/// Receives the IPv4 frames to `dst_port` on `port` until `want` arrived or 3 s passed.
pub fn receive_all(
    port: &mut AfPacketPort,
    pool: &mut FramePool,
    want: usize,
    dst_port: u16,
) -> Vec<Vec<u8>> {
    receive_kept(port, pool, want, |f| is_udp_to(f, dst_port))
}

/// Receives the frames `keep` takes on `port` until `want` arrived or 3 s passed.
pub fn receive_kept(
    port: &mut AfPacketPort,
    pool: &mut FramePool,
    want: usize,
    keep: impl Fn(&[u8]) -> bool,
) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut got = Vec::new();
    while got.len() < want && Instant::now() < deadline {
        got.extend(receive(port, pool).into_iter().filter(|f| keep(f)));
        std::thread::sleep(Duration::from_millis(5));
    }
    got
}

/// Asserts two frame lists are equal, naming the first difference instead of printing both.
pub fn assert_same(got: &[Vec<u8>], want: &[Vec<u8>]) {
    assert_eq!(got.len(), want.len(), "frame count");
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
        panic!(
            "frame {i} differs:\n got  {:02x?}\n want {:02x?}",
            got[i], want[i]
        );
    }
}

/// A fresh testbed of `pairs` port pairs with `queues` queues each, named `prefix` (see
/// [`wirespeed_lab::up_for_test`]: `None`, after printing why, where it cannot be built).
pub fn testbed(prefix: &str, pairs: u16, queues: u16) -> Option<Testbed> {
    wirespeed_lab::up_for_test(&TestbedConfig {
        prefix: prefix.into(),
        pairs,
        queues,
        calibration: false,
        mtu: wirespeed_lab::DEFAULT_MTU,
    })
}

/// A fresh lab of two port pairs with `queues` queues each (see [`lab_with`]).
pub fn lab(prefix: &str, queues: u16) -> Option<(Testbed, PathBuf)> {
    lab_with(prefix, 2, queues)
}

/// A fresh lab of `pairs` port pairs named `prefix` (see [`testbed`]), and a scratch directory
/// for its files.
pub fn lab_with(prefix: &str, pairs: u16, queues: u16) -> Option<(Testbed, PathBuf)> {
    let lab = testbed(prefix, pairs, queues)?;
    let dir = std::env::temp_dir().join(format!("wirespeed-{prefix}"));
    std::fs::create_dir_all(&dir).expect("scratch directory");
    Some((lab, dir))
}

/// For a test of a `wirespeed bench` command that builds its own lab named `prefix`: after
/// [`wirespeed_lab::clear_for_test`], runs `wirespeed bench ARGS --prefix PREFIX --out DIR` into
/// a fresh scratch directory (see [`bench`]) and returns (stdout, stderr, DIR); `None`, after
/// printing why, where no lab can be built here.
pub fn bench_out(prefix: &str, args: &[&str]) -> Option<(String, String, PathBuf)> {
    if !wirespeed_lab::clear_for_test(prefix) {
        return None;
    }
    // Named like `lab`'s scratch directory: the prefix is the test's own, and a rerun replaces
    // what a failed run left.
    let out = std::env::temp_dir().join(format!("wirespeed-{prefix}"));
    let _ = std::fs::remove_dir_all(&out);
    let (stdout, stderr) = bench(args, prefix, "--out", &out);
    Some((stdout, stderr, out))
}

/// Runs `wirespeed bench ARGS --prefix PREFIX OUTPUT_OPTION OUTPUT` (the lab the command builds
/// and where its results go), asserts it succeeded, showing everything it printed otherwise, and
/// returns (stdout, stderr) for the test to check.
pub fn bench(args: &[&str], prefix: &str, output_option: &str, output: &Path) -> (String, String) {
    let run = Command::new(env!("CARGO_BIN_EXE_wirespeed"))
        .arg("bench")
        .args(args)
        .args(["--prefix", prefix, output_option])
        .arg(output)
        .output()
        .expect("run wirespeed bench");
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(run.status.success(), "{stdout}\n{stderr}");
    (stdout, stderr)
}

/// Runs `wirespeed ctl --socket SOCKET WORDS...`; returns (success, stdout + stderr).
pub fn ctl_at(socket: &std::path::Path, words: &[&str]) -> (bool, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_wirespeed"))
        .args(["ctl", "--socket"])
        .arg(socket)
        .args(words)
        .output()
        .expect("run wirespeed ctl");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

/// Frames the switch on `socket` has taken in: received by its workers, or forwarded or
/// dropped by the kernel's fast path (the `rx_packets` row's total in `show counters`).
pub fn frames_taken(socket: &std::path::Path) -> u64 {
    counter_total(socket, "rx_packets")
}

/// The total (the last column: workers and fast path) of `row` in `ctl show counters`.
pub fn counter_total(socket: &std::path::Path, row: &str) -> u64 {
    let (success, text) = ctl_at(socket, &["show", "counters"]);
    assert!(success, "{text}");
    let prefix = format!("{row} ");
    text.lines()
        .find(|line| line.starts_with(&prefix))
        .and_then(|line| line.split_whitespace().last())
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("no {row} row:\n{text}"))
}

/// `ovs-ofctl -O OpenFlow13 --timeout SECONDS COMMAND tcp:127.0.0.1:6653 ARGS...` inside the
/// DuT namespace, where the OpenFlow tests' agent listens; (success, stdout + stderr).
pub fn ofctl_within(lab: &Testbed, seconds: u32, command: &str, args: &[&str]) -> (bool, String) {
    let output = Command::new("ip")
        .args([
            "netns",
            "exec",
            &lab.dut_ns,
            "ovs-ofctl",
            "-O",
            "OpenFlow13",
        ])
        .args([
            "--timeout",
            &seconds.to_string(),
            command,
            "tcp:127.0.0.1:6653",
        ])
        .args(args)
        .output()
        .expect("run ovs-ofctl");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

/// Brings the DuT namespace's loopback up: where the OpenFlow agent listens and its
/// controllers run.
pub fn dut_loopback_up(lab: &Testbed) {
    let status = Command::new("ip")
        .args([
            "netns",
            "exec",
            &lab.dut_ns,
            "ip",
            "link",
            "set",
            "lo",
            "up",
        ])
        .status()
        .expect("ip link set lo up");
    assert!(status.success());
}

/// Waits (at most 10 s) until the switch answers `ping` on `socket`.
pub fn wait_for_control(socket: &std::path::Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if socket.exists() && ctl_at(socket, &["ping"]).0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the switch never answered on {}",
            socket.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn mac_text(mac: [u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Every frame `keep` accepts that arrives on `port` within `duration`.
pub fn receive_during(
    port: &mut AfPacketPort,
    pool: &mut FramePool,
    duration: Duration,
    keep: impl Fn(&[u8]) -> bool,
) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + duration;
    let mut got = Vec::new();
    while Instant::now() < deadline {
        got.extend(receive(port, pool).into_iter().filter(|f| keep(f)));
        std::thread::sleep(Duration::from_millis(5));
    }
    got
}

/// A cross-connect of the lab's DuT interfaces d0 and d1 with the given backend lines.
pub fn xconnect_config(lab: &Testbed, backend_lines: &str) -> String {
    format!(
        "[switch]\napp = \"xconnect\"\n\n[[port]]\nname = \"p0\"\ninterface = \"{}\"\n{backend_lines}\n\n\
         [[port]]\nname = \"p1\"\ninterface = \"{}\"\n{backend_lines}\n\n[xconnect]\npairs = [[\"p0\", \"p1\"]]\n",
        lab.pairs[0].dut_if, lab.pairs[1].dut_if
    )
}

/// Waits until a probe frame (to another UDP port than the test frames) crosses t0 -> t1.
pub fn wait_until_forwarding(t0: &mut AfPacketPort, t1: &mut AfPacketPort, pool: &mut FramePool) {
    const PROBE_PORT: u16 = 7;
    let probe = frames_to(1, PROBE_PORT);
    let deadline = Instant::now() + Duration::from_secs(10);
    while receive_all(t1, pool, 1, PROBE_PORT).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the switch never forwarded a probe"
        );
        wirespeed_testkit::ports::send(t0, pool, &probe);
    }
}

/// A small deterministic generator (xorshift64*), so a failure can be replayed.
pub struct Random(pub u64);

impl Random {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Writes `frames` as a capture at `path`, as `wirespeed pcap` and the switch's capture ports
/// write theirs (frames of any size up to jumbo).
pub fn write_capture(path: &Path, frames: &[Vec<u8>]) {
    use wirespeed_io::Port;
    let mut port = wirespeed_io::pcap::PcapPort::open("gen", None, Some(path)).unwrap();
    let mut pool = FramePool::new(256, wirespeed_packet::pool::MAX_FRAME_SIZE).unwrap();
    let mut batch = wirespeed_packet::Batch::new(32);
    for frame in frames {
        batch.push(pool.alloc_copy(frame, 0).unwrap());
        if batch.is_full() {
            port.tx(0, &mut pool, &mut batch);
        }
    }
    port.tx(0, &mut pool, &mut batch);
    port.release_all(&mut pool);
}
