//! wirespeed itself as a DuT: the real `wirespeed switch` binary, run in the DuT namespace as an
//! xconnect between `d0` and `d1` over AF_XDP or AF_PACKET, its one worker pinned to the DuT core.
//!
//! [`WirespeedOptions`] change what the switch runs for the sweeps: its batch size, the emulated
//! per-packet task (seed 001), or the router app with a routing table. The router gets `d0` and
//! `d1`'s addresses, a static neighbour for `t1` and up to [`CONFIG_ROUTES`] routes in its
//! configuration; a larger table is written as a route file and loaded through the control
//! socket (`wirespeed ctl route load`) before the DuT is verified, the way an operator loads a
//! full table. The same socket gives the worker's per-stage cycle counters
//! ([`WirespeedDut::counters`]), which the cost-model sweep compares with its fit.
//!
//! The binary is the caller's (the CLI passes its own executable), so the benchmark measures
//! exactly the program that is shipped. Its output goes to a file rather than a pipe, so a chatty
//! switch can never block on a full pipe; at teardown it is stopped with SIGINT (the clean path
//! that prints the final counters and the pool check), killed if it does not stop within 10 s,
//! and its output is kept for the report.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wirespeed_lab::DUT_EGRESS_FRAMES;
use wirespeed_packet::pool::{MIN_FRAME_SIZE, frame_size_for_mtu};
use wirespeed_packet::wire::EthernetAddress;

use super::linux_router::routed;
use super::routes::RouteTable;
use super::scraper::Scraper;
use super::{Dut, DutError, Steps, Wiring};

/// Frames in the switch's pool: each of its two AF_XDP ports may hold a fill and an RX ring of
/// 2048 and TX and completion rings of [`DUT_EGRESS_FRAMES`] (40960 in all), with room to spare.
const POOL_FRAMES: u32 = 65536;

/// Most routes written into the configuration file (about 50 bytes each, well under the file's
/// 1 MiB limit); larger tables are loaded with `route load`.
pub const CONFIG_ROUTES: usize = 10_000;

/// The app the switch runs between its two ports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum WirespeedApp {
    /// `p0` and `p1` cross-connected.
    #[default]
    Xconnect,
    /// The learning bridge, taught where `t1` is before the measurement.
    Bridge,
    /// The router with this table (all via `t1`).
    Router(Arc<RouteTable>),
    /// The openflow app with one flow each way (`in_port=p0` to `p1` and back), the flow the
    /// Open vSwitch DuT gets, installed as the source says.
    OpenFlow(FlowSource),
}

/// How the openflow app's flows are installed: the same flows either way, so that a benchmark
/// of both shows what (if anything) the way costs the forwarding.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FlowSource {
    /// `[[openflow.flow]]` tables in the configuration file.
    #[default]
    Config,
    /// `ovs-ofctl -O OpenFlow13 add-flows` through the switch's OpenFlow agent once it runs
    /// (listening on [`OPENFLOW_LISTEN`] in the DuT's namespace), as a controller would.
    OvsOfctl,
}

/// Where the agent of a DuT whose flows come by OpenFlow listens, inside its namespace.
pub const OPENFLOW_LISTEN: &str = "127.0.0.1:6653";

/// The openflow DuT's flows, as (ingress port, egress port) indices: one each way.
const OPENFLOW_FLOWS: [(usize, usize); 2] = [(0, 1), (1, 0)];

/// What the switch runs besides its two ports; the default is the plain xconnect with the
/// configuration file's defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WirespeedOptions {
    /// Packets per batch (`[switch] batch`); `None` keeps the switch's default.
    pub batch: Option<usize>,
    /// TSC cycles of emulated work per packet (`[task] spin_cycles`).
    pub spin_cycles: u64,
    /// Working set of the emulated random linked-list walk (`[task] walk_bytes`).
    pub walk_bytes: u64,
    pub app: WirespeedApp,
    /// Serve metrics (`[metrics] listen` on [`METRICS`]) and scrape them at this interval
    /// while the switch runs, as Prometheus would.
    pub scrape_every: Option<Duration>,
}

/// Where a DuT that is scraped serves its metrics, inside its namespace.
pub const METRICS: &str = "127.0.0.1:9417";

/// Cumulative counters of the switch's workers (`show counters`, summed over workers).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwitchCounters {
    pub rx_packets: u64,
    pub tx_packets: u64,
    /// TSC cycles spent receiving, processing (parse, decide, task), transmitting and polling
    /// empty rings.
    pub cycles_rx: u64,
    pub cycles_process: u64,
    pub cycles_tx: u64,
    pub cycles_idle: u64,
}

impl SwitchCounters {
    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &SwitchCounters) -> SwitchCounters {
        SwitchCounters {
            rx_packets: self.rx_packets.saturating_sub(earlier.rx_packets),
            tx_packets: self.tx_packets.saturating_sub(earlier.tx_packets),
            cycles_rx: self.cycles_rx.saturating_sub(earlier.cycles_rx),
            cycles_process: self.cycles_process.saturating_sub(earlier.cycles_process),
            cycles_tx: self.cycles_tx.saturating_sub(earlier.cycles_tx),
            cycles_idle: self.cycles_idle.saturating_sub(earlier.cycles_idle),
        }
    }

    /// Reads the `total` column of a `show counters` reply (`{"ok":true,"result":{"columns":
    /// [...,"total"],"rows":[["rx_packets",...,"123"],...]}}`); `None` when it is not one.
    pub fn parse(reply: &str) -> Option<SwitchCounters> {
        let value: serde_json::Value = serde_json::from_str(reply).ok()?;
        let total = |name: &str| -> Option<u64> { total_column(&value, name)?.parse().ok() };
        Some(SwitchCounters {
            rx_packets: total("rx_packets")?,
            tx_packets: total("tx_packets")?,
            cycles_rx: total("cycles.rx")?,
            cycles_process: total("cycles.process")?,
            cycles_tx: total("cycles.tx")?,
            cycles_idle: total("cycles.idle")?,
        })
    }
}

/// The `total` column of the row called `name` in a successful `show counters` reply (see
/// [`SwitchCounters::parse`] for its form).
fn total_column<'a>(reply: &'a serde_json::Value, name: &str) -> Option<&'a str> {
    if reply["ok"] != serde_json::Value::Bool(true) {
        return None;
    }
    let row = reply["result"]["rows"]
        .as_array()?
        .iter()
        .filter_map(serde_json::Value::as_array)
        .find(|row| row.first().and_then(serde_json::Value::as_str) == Some(name))?;
    row.last()?.as_str()
}

/// The `fast_path.routes_ready` gauge of a `show counters` reply: `None` when the reply has
/// no such row (a switch without the fast path's route tables).
fn routes_ready(reply: &str) -> Option<bool> {
    let value: serde_json::Value = serde_json::from_str(reply).ok()?;
    Some(total_column(&value, "fast_path.routes_ready")? == "1")
}

/// Which kernel interface the switch's ports use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WirespeedBackend {
    /// AF_XDP with every frame through user space (`fast_path = "off"`).
    AfXdp,
    /// AF_XDP behind the XDP fast path (`fast_path = "xdp"`): the kernel forwards what the
    /// app decided; the rest goes through user space.
    Xdp,
    /// AF_PACKET with the default `TPACKET_V3` RX ring (blocks).
    AfPacket,
    /// AF_PACKET with a `TPACKET_V2` RX ring (`rx_tpacket = "v2"`: slots, no block timeout).
    AfPacketV2,
}

impl WirespeedBackend {
    /// The name in DuT names (`wirespeed-<name>`) and reports.
    pub fn name(self) -> &'static str {
        match self {
            WirespeedBackend::AfXdp => "afxdp",
            WirespeedBackend::Xdp => "xdp",
            WirespeedBackend::AfPacket => "afpacket",
            WirespeedBackend::AfPacketV2 => "afpacket-v2",
        }
    }

    /// The backend's name in a configuration file.
    pub fn config_name(self) -> &'static str {
        match self {
            WirespeedBackend::AfXdp | WirespeedBackend::Xdp => "afxdp",
            WirespeedBackend::AfPacket | WirespeedBackend::AfPacketV2 => "afpacket",
        }
    }

    /// Port keys beyond `backend` and `interface` this variant sets, one per line. Its TX ring
    /// (and AF_XDP's completion ring) holds [`DUT_EGRESS_FRAMES`], what the kernel's DuTs may
    /// queue in the lab's qdisc: both socket backends transmit past it, and with the 1024-slot
    /// default the AF_PACKET DuT lost 66 000-209 000 frames per compare run as `tx_full`.
    fn port_keys(self) -> String {
        let tx_ring = format!("tx_ring = {DUT_EGRESS_FRAMES}\n");
        match self {
            WirespeedBackend::AfXdp | WirespeedBackend::Xdp => {
                format!("{tx_ring}completion_ring = {DUT_EGRESS_FRAMES}\n")
            }
            WirespeedBackend::AfPacketV2 => format!("rx_tpacket = \"v2\"\n{tx_ring}"),
            WirespeedBackend::AfPacket => tx_ring,
        }
    }
}

/// The wirespeed driver.
#[derive(Debug)]
pub struct WirespeedDut {
    backend: WirespeedBackend,
    binary: PathBuf,
    core: usize,
    steps: Steps,
    child: Option<Child>,
    output_path: Option<PathBuf>,
    output: String,
    options: WirespeedOptions,
    /// The control socket of the running switch.
    socket: Option<PathBuf>,
    /// Scraping the switch's metrics, with `scrape_every`.
    scraper: Option<Scraper>,
}

impl WirespeedDut {
    /// A driver that runs `binary` with its worker on `core`.
    pub fn new(backend: WirespeedBackend, binary: PathBuf, core: usize) -> Self {
        let name = format!("wirespeed-{}", backend.name());
        Self {
            backend,
            binary,
            core,
            steps: Steps::new(&name),
            child: None,
            output_path: None,
            output: String::new(),
            options: WirespeedOptions::default(),
            socket: None,
            scraper: None,
        }
    }

    /// The same driver running the switch with `options`.
    pub fn with_options(mut self, options: WirespeedOptions) -> Self {
        self.options = options;
        self.steps = Steps::new(&self.name());
        self
    }

    /// The switch's counters now, read through its control socket.
    pub fn counters(&self) -> Result<SwitchCounters, DutError> {
        let reply = self.ctl(&["--json", "show", "counters"])?;
        SwitchCounters::parse(&reply).ok_or_else(|| {
            self.start_error(
                "read the switch's counters",
                format!("`show counters` answered {:?}", reply.trim()),
            )
        })
    }

    /// Runs `wirespeed ctl --socket SOCKET ARGS...` and returns what it printed.
    fn ctl(&self, args: &[&str]) -> Result<String, DutError> {
        let socket = self.socket.as_ref().ok_or_else(|| {
            self.start_error(
                "reach the control socket",
                "the switch is not running".into(),
            )
        })?;
        let mut all = vec!["ctl".to_string(), "--socket".into()];
        all.push(socket.to_string_lossy().to_string());
        all.extend(args.iter().map(|a| a.to_string()));
        let step = format!("wirespeed ctl {}", args.join(" "));
        // No backtrace in the error a failed request prints: the message and the fix are the
        // part a report needs.
        let output = Command::new(&self.binary)
            .args(&all)
            .env("RUST_BACKTRACE", "0")
            .env("RUST_LIB_BACKTRACE", "0")
            .stdin(Stdio::null())
            .output()
            .map_err(|error| {
                self.start_error(&step, format!("{}: {error}", self.binary.display()))
            })?;
        if !output.status.success() {
            return Err(self.start_error(
                &step,
                String::from_utf8_lossy(&output.stderr).trim().to_string(),
            ));
        }
        Ok(String::from_utf8_lossy(&output.stdout).to_string())
    }

    /// Waits up to `timeout` for the control socket to answer `ping`.
    /// Makes the bridge learn where `t1` is, as a real host would by speaking first: one ARP
    /// request from `t1` (a ping of `d1`'s address), so the tester's frames, addressed to
    /// `t1`'s MAC, are known unicast rather than flooded. The Linux bridge DuT floods them to
    /// its only other port until then, which costs it the same; wirespeed's bridge would send
    /// every flooded frame through user space.
    fn teach_bridge(&mut self, wiring: &Wiring) -> Result<(), DutError> {
        if self.options.app != WirespeedApp::Bridge {
            return Ok(());
        }
        let target = wiring.egress.dut_ipv4.to_string();
        let args = [
            "netns",
            "exec",
            &wiring.tester_ns,
            "ping",
            "-c",
            "1",
            "-W",
            "1",
            "-I",
            &wiring.egress.tester_if,
            &target,
        ];
        self.steps.record(format!("ip {}", args.join(" ")));
        // The ping itself may go unanswered (the switch owns d1's traffic): the ARP request
        // it sends first is what counts.
        let _ = Command::new("ip")
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        Ok(())
    }

    /// Waits until the switch says its workers run ("forwarding with"). With the XDP fast
    /// path the kernel forwards as soon as the program is attached, before any worker exists,
    /// so a frame that crossed proves nothing about the workers' placement.
    fn wait_until_started(&mut self, timeout: Duration) -> Result<(), DutError> {
        let deadline = Instant::now() + timeout;
        loop {
            self.check()?;
            let output = self
                .output_path
                .as_ref()
                .and_then(|path| std::fs::read_to_string(path).ok())
                .unwrap_or_default();
            if output.contains("forwarding with") {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(self.start_error(
                    "start the switch",
                    format!("no \"forwarding with\" line within {timeout:?}:\n{output}"),
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn wait_for_socket(&mut self, timeout: Duration) -> Result<(), DutError> {
        let deadline = Instant::now() + timeout;
        loop {
            self.check()?;
            match self.ctl(&["ping"]) {
                Ok(_) => return Ok(()),
                Err(error) if Instant::now() >= deadline => return Err(error),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// The `[switch]` keys and app tables the options add.
    fn app_config(&self, wiring: &Wiring) -> String {
        let mut text = String::new();
        if let WirespeedApp::Router(routes) = &self.options.app {
            let gateway = wiring.egress.tester_ipv4;
            let gateway6 = wiring.egress.tester_ipv6;
            let mac = EthernetAddress(wiring.egress.tester_mac);
            // Both IP versions, as the Linux router: the frames say which one is measured.
            text.push_str(&format!(
                "[[router.interface]]\nport = \"p0\"\naddresses = [\"{}/24\", \"{}/64\"]\n\n\
                 [[router.interface]]\nport = \"p1\"\naddresses = [\"{}/24\", \"{}/64\"]\n\n\
                 [[router.neighbour]]\nport = \"p1\"\naddress = \"{gateway}\"\nmac = \"{mac}\"\n\n\
                 [[router.neighbour]]\nport = \"p1\"\naddress = \"{gateway6}\"\nmac = \"{mac}\"\n",
                wiring.ingress.dut_ipv4,
                wiring.ingress.dut_ipv6,
                wiring.egress.dut_ipv4,
                wiring.egress.dut_ipv6,
            ));
            // A table that fits the configuration file goes in it; a larger one is loaded
            // through the control socket once the switch runs (see `load_routes`), with the
            // lab's destinations of both versions (the first two routes) configured meanwhile
            // so that the switch starts as a router.
            let all = routes.routes(&wiring.egress);
            let configured = if routes.len() <= CONFIG_ROUTES {
                &all[..]
            } else {
                all.get(..2).unwrap_or_default()
            };
            for (prefix, via) in configured {
                text.push_str(&format!(
                    "\n[[router.route]]\nprefix = \"{prefix}\"\nvia = [\"{via}\"]\n"
                ));
            }
        } else if self.options.app == WirespeedApp::Bridge {
            // Entries live for a day: `t1` speaks once, when `teach_bridge` makes it, and a
            // benchmark must not see the bridge forget it and flood halfway through.
            text.push_str("[bridge]\nage_seconds = 86400\n");
        } else if let WirespeedApp::OpenFlow(source) = self.options.app {
            text.push_str("[openflow]\ntables = 1\n");
            match source {
                FlowSource::Config => {
                    for (from, to) in OPENFLOW_FLOWS {
                        text.push_str(&format!(
                            "\n[[openflow.flow]]\nmatch = \"in_port=p{from}\"\n\
                             actions = \"output:p{to}\"\n"
                        ));
                    }
                }
                FlowSource::OvsOfctl => {
                    let (addr, port) = OPENFLOW_LISTEN.split_once(':').expect("a literal");
                    text.push_str(&format!("listen = \"ptcp:{port}:{addr}\"\n"));
                }
            }
        } else {
            text.push_str("[xconnect]\npairs = [[\"p0\", \"p1\"]]\n");
        }
        let options = &self.options;
        if options.spin_cycles > 0 || options.walk_bytes > 0 {
            text.push_str(&format!(
                "\n[task]\nspin_cycles = {}\nwalk_bytes = {}\n",
                options.spin_cycles, options.walk_bytes
            ));
        }
        text
    }

    /// Loads a table of more than the one configured route through the control socket.
    fn load_routes(&mut self, wiring: &Wiring, stem: &str) -> Result<(), DutError> {
        let WirespeedApp::Router(routes) = self.options.app.clone() else {
            return Ok(());
        };
        self.wait_for_socket(Duration::from_secs(10))?;
        if routes.len() <= CONFIG_ROUTES {
            return Ok(());
        }
        let path = std::env::temp_dir().join(format!("{stem}.routes"));
        let path_text = path.to_string_lossy().to_string();
        std::fs::write(&path, routes.route_file(&wiring.egress)).map_err(|error| {
            self.start_error("write the route file", format!("{path_text}: {error}"))
        })?;
        self.steps.record(format!(
            "# {path_text}: {} IPv{} routes and the other version's lab destinations, \
             `PREFIX via {}` per line",
            routes.len(),
            routes.ip().number(),
            wiring.egress.tester_ipv4
        ));
        self.steps.push_undo(&["rm", "-f", &path_text]);
        let socket = self
            .socket
            .as_ref()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_default();
        self.steps.record(format!(
            "{} ctl --socket {socket} --timeout 120 route load {path_text}",
            self.binary.display()
        ));
        self.ctl(&["--timeout", "120", "route", "load", &path_text])?;
        if self.backend == WirespeedBackend::Xdp {
            self.wait_for_kernel_routes(Duration::from_secs(120))?;
        }
        Ok(())
    }

    /// Installs the openflow app's flows through its OpenFlow agent with `ovs-ofctl`, when
    /// they come that way ([`FlowSource::OvsOfctl`]). The agent's listener is bound before
    /// the switch says it forwards, so the connection is taken at once.
    fn install_flows(&mut self, wiring: &Wiring, stem: &str) -> Result<(), DutError> {
        if self.options.app != WirespeedApp::OpenFlow(FlowSource::OvsOfctl) {
            return Ok(());
        }
        self.steps.require("ovs-ofctl", "openvswitch-common")?;
        // OpenFlow port numbers are the app's port indices plus one.
        let flows: String = OPENFLOW_FLOWS
            .iter()
            .map(|(from, to)| format!("in_port={},actions=output:{}\n", from + 1, to + 1))
            .collect();
        let path = std::env::temp_dir().join(format!("{stem}.flows"));
        let path_text = path.to_string_lossy().to_string();
        self.steps.write(
            "write the flow file",
            &path_text,
            &flows,
            (OPENFLOW_FLOWS.len(), ""),
        )?;
        let target = format!("tcp:{OPENFLOW_LISTEN}");
        self.steps.run(
            "add the flows by OpenFlow",
            &[
                "ip",
                "netns",
                "exec",
                &wiring.dut_ns,
                "ovs-ofctl",
                "-O",
                "OpenFlow13",
                "add-flows",
                &target,
                &path_text,
            ],
            None,
        )?;
        Ok(())
    }

    /// Waits until the fast path forwards by the loaded routes: the reply of `route load`
    /// comes when the router has them, and the kernel's copy is written after it, off the
    /// worker (seconds for a million), with every routed frame on the user-space path
    /// meanwhile; a trial started then would measure that path, not the fast one.
    fn wait_for_kernel_routes(&mut self, timeout: Duration) -> Result<(), DutError> {
        self.steps.record(format!(
            "# wait until `{} ctl show counters` says fast_path.routes_ready 1",
            self.binary.display()
        ));
        let started = Instant::now();
        loop {
            let reply = self.ctl(&["--json", "show", "counters"])?;
            match routes_ready(&reply) {
                // No such row: the switch routes without the fast path's tables.
                None | Some(true) => return Ok(()),
                Some(false) if started.elapsed() > timeout => {
                    return Err(self.start_error(
                        "wait for the fast path to take the routes in",
                        format!(
                            "fast_path.routes_ready still 0 after {} s (a table larger than the \
                             kernel's maps, or routes it refused: see fast_path counters)",
                            timeout.as_secs()
                        ),
                    ));
                }
                Some(false) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    /// The configuration file the driver writes for `wiring`.
    ///
    /// The worker runs at SCHED_FIFO priority 1 whatever the backend, from the lab's
    /// measurements (docs/benchmarks.md): with the ingress NAPI thread on the worker's core, a
    /// worker at normal priority loses the core to the thread that fills its ring and collapses
    /// under overload: AF_XDP 0.007 Mpps against 0.33–0.45 at FIFO, AF_PACKET (V3 RX) 0.012
    /// against 0.20–0.23 (2026-11-23, once the placement really put AF_PACKET's receive on the
    /// DuT core; before, it ran on the generator's core and FIFO looked worse for AF_PACKET).
    pub fn config(&self, wiring: &Wiring) -> String {
        let backend = self.backend.config_name();
        let port_keys = self.backend.port_keys();
        let app = match self.options.app {
            WirespeedApp::Xconnect => "xconnect",
            WirespeedApp::Bridge => "bridge",
            WirespeedApp::Router(_) => "router",
            WirespeedApp::OpenFlow(_) => "openflow",
        };
        let batch = self
            .options
            .batch
            .map_or(String::new(), |batch| format!("batch = {batch}\n"));
        let socket = self.socket.as_ref().map_or(String::new(), |socket| {
            format!("control_socket = \"{}\"\n", socket.display())
        });
        // Frames that hold the lab's largest packet (jumbo frames need 16 KiB ones).
        let frame_size = match frame_size_for_mtu(wiring.mtu) {
            Some(size) if size > MIN_FRAME_SIZE => format!("frame_size = {size}\n"),
            _ => String::new(),
        };
        let metrics = if self.options.scrape_every.is_some() {
            format!("\n[metrics]\nlisten = \"{METRICS}\"\n")
        } else {
            String::new()
        };
        let fast_path = match self.backend {
            WirespeedBackend::Xdp => "fast_path = \"xdp\"\n",
            WirespeedBackend::AfXdp => "fast_path = \"off\"\n",
            WirespeedBackend::AfPacket | WirespeedBackend::AfPacketV2 => "",
        };
        format!(
            "[switch]\napp = \"{app}\"\nworkers = 1\ncores = [{core}]\nrealtime = true\nframes = {POOL_FRAMES}\n{frame_size}{batch}{socket}{fast_path}\n\
             [[port]]\nname = \"p0\"\nbackend = \"{backend}\"\ninterface = \"{d0}\"\n{port_keys}\n\
             [[port]]\nname = \"p1\"\nbackend = \"{backend}\"\ninterface = \"{d1}\"\n{port_keys}\n{app_config}{metrics}",
            core = self.core,
            d0 = wiring.ingress.dut_if,
            d1 = wiring.egress.dut_if,
            app_config = self.app_config(wiring),
        )
    }

    fn start_error(&self, step: &str, detail: String) -> DutError {
        DutError::Start {
            dut: self.name(),
            step: step.into(),
            detail,
        }
    }

    /// Stops the switch (SIGINT, then SIGKILL after 10 s) and collects its output.
    fn stop(&mut self) -> Result<(), DutError> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let pid = child.id().to_string();
        self.steps.record(format!("kill -INT {pid}"));
        let _ = Command::new("kill").args(["-INT", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut clean = false;
        while Instant::now() < deadline {
            match child.try_wait() {
                Ok(Some(status)) => {
                    clean = status.success();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(_) => break,
            }
        }
        if !matches!(child.try_wait(), Ok(Some(_))) {
            self.steps.record(format!("kill -KILL {pid}"));
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(path) = &self.output_path {
            self.output = std::fs::read_to_string(path).unwrap_or_default();
        }
        if clean {
            Ok(())
        } else {
            Err(DutError::Teardown {
                dut: self.name(),
                detail: format!("the switch did not exit cleanly:\n{}", self.output),
            })
        }
    }
}

impl Dut for WirespeedDut {
    fn name(&self) -> String {
        let app = match self.options.app {
            WirespeedApp::Xconnect => "xconnect-",
            WirespeedApp::Bridge => "bridge-",
            WirespeedApp::Router(_) => "router-",
            WirespeedApp::OpenFlow(FlowSource::Config) => "openflow-",
            WirespeedApp::OpenFlow(FlowSource::OvsOfctl) => "openflow-ofctl-",
        };
        let scraped = if self.options.scrape_every.is_some() {
            "+scrape"
        } else {
            ""
        };
        format!("wirespeed-{app}{}{scraped}", self.backend.name())
    }

    fn setup(&mut self, wiring: &Wiring) -> Result<(), DutError> {
        let dir = std::env::temp_dir();
        let stem = format!(
            "wirespeed-{}-{}-{}",
            wiring.prefix(),
            self.backend.name(),
            std::process::id()
        );
        let config_path = dir.join(format!("{stem}.toml"));
        let output_path = dir.join(format!("{stem}.out"));
        self.socket = Some(dir.join(format!("{stem}.sock")));
        let config = self.config(wiring);
        std::fs::write(&config_path, &config).map_err(|error| {
            self.start_error(
                "write the switch configuration",
                format!("{}: {error}", config_path.display()),
            )
        })?;
        let config_text = config_path.to_string_lossy().to_string();
        self.steps
            .record(format!("cat > {config_text} <<EOF\n{config}EOF"));
        self.steps.push_undo(&["rm", "-f", &config_text]);
        let output = std::fs::File::create(&output_path).map_err(|error| {
            self.start_error(
                "create the switch's output file",
                format!("{}: {error}", output_path.display()),
            )
        })?;
        let output_text = output_path.to_string_lossy().to_string();
        self.steps.push_undo(&["rm", "-f", &output_text]);
        self.output_path = Some(output_path);
        let stderr = output
            .try_clone()
            .map_err(|error| self.start_error("duplicate the output file", error.to_string()))?;
        let binary = self.binary.to_string_lossy().to_string();
        self.steps.record(format!(
            "ip netns exec {} {binary} switch --config {config_text} > {output_text} 2>&1 &",
            wiring.dut_ns
        ));
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                &wiring.dut_ns,
                &binary,
                "switch",
                "--config",
            ])
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(output)
            .stderr(stderr)
            .spawn()
            .map_err(|error| self.start_error("start the switch", format!("{binary}: {error}")))?;
        self.child = Some(child);
        self.wait_until_started(Duration::from_secs(10))?;
        self.teach_bridge(wiring)?;
        self.load_routes(wiring, &stem)?;
        self.install_flows(wiring, &stem)?;
        if let Some(every) = self.options.scrape_every {
            let addr = METRICS.parse().expect("a literal address");
            self.steps.record(format!(
                "while sleep {}; do ip netns exec {} curl -s http://{METRICS}/metrics; done &",
                every.as_secs_f64(),
                wiring.dut_ns
            ));
            self.scraper = Some(
                Scraper::start(&wiring.dut_ns, addr, every)
                    .map_err(|detail| self.start_error("scrape the metrics", detail))?,
            );
        }
        Ok(())
    }

    fn teardown(&mut self) -> Result<(), DutError> {
        if let Some(scraper) = self.scraper.take() {
            let (answered, failed) = scraper.counts();
            self.steps
                .record(format!("# {answered} scrapes answered, {failed} failed"));
        }
        let stopped = self.stop();
        let undone = self.steps.undo_all();
        stopped.and(undone)
    }

    fn commands(&self) -> &[String] {
        self.steps.log()
    }

    fn reset_method(&self) -> Option<&'static str> {
        Some(
            "restart of the wirespeed process (stopped with SIGINT, started again with its configuration)",
        )
    }

    /// Stops the switch and starts it again: what an operator's restart does, the
    /// configuration (and a large table's route load) included.
    fn reset(&mut self, wiring: &Wiring) -> Result<(), DutError> {
        self.teardown()?;
        self.setup(wiring)
    }

    fn destination_mac(&self, wiring: &Wiring) -> [u8; 6] {
        if matches!(self.options.app, WirespeedApp::Router(_)) {
            wiring.ingress.dut_mac
        } else {
            wiring.egress.tester_mac
        }
    }

    fn forwarded(&self, wiring: &Wiring, frame: &[u8]) -> Vec<u8> {
        if matches!(self.options.app, WirespeedApp::Router(_)) {
            routed(frame, wiring.egress.dut_mac, wiring.egress.tester_mac)
        } else {
            frame.to_vec()
        }
    }

    fn check(&mut self) -> Result<(), DutError> {
        let exited = match &mut self.child {
            Some(child) => matches!(child.try_wait(), Ok(Some(_))),
            None => return Ok(()),
        };
        if exited {
            self.child = None;
            if let Some(path) = &self.output_path {
                self.output = std::fs::read_to_string(path).unwrap_or_default();
            }
            return Err(self.start_error(
                "run the switch",
                format!("it exited:\n{}", self.output.trim()),
            ));
        }
        Ok(())
    }

    fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn forwards_in_ingress_napi(&self) -> bool {
        self.backend == WirespeedBackend::Xdp
    }

    fn output(&self) -> Option<&str> {
        Some(&self.output)
    }
}

impl Drop for WirespeedDut {
    fn drop(&mut self) {
        if let Err(error) = self.teardown() {
            eprintln!("{error}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fast_paths_route_readiness_is_read_from_show_counters() {
        let reply = |ready: &str| {
            format!(
                r#"{{"ok":true,"result":{{"columns":["counter","worker 0","fast path","total"],"rows":[["rx_packets","10","0","10"],["fast_path.routes_ready","0","{ready}","{ready}"]]}}}}"#
            )
        };
        assert_eq!(routes_ready(&reply("0")), Some(false));
        assert_eq!(routes_ready(&reply("1")), Some(true));
        let without =
            r#"{"ok":true,"result":{"columns":["counter","total"],"rows":[["rx_packets","10"]]}}"#;
        assert_eq!(routes_ready(without), None);
        assert_eq!(routes_ready(r#"{"ok":false}"#), None);
    }

    #[test]
    fn counters_are_read_from_the_total_column_of_show_counters() {
        let reply = r#"{"ok":true,"result":{"columns":["counter","worker 0","worker 1","total"],"rows":[["rx_packets","10","20","30"],["tx_packets","9","19","28"],["dropped","1","1","2"],["cycles.rx","100","200","300"],["cycles.process","5","5","10"],["cycles.tx","7","8","15"],["cycles.idle","1000","0","1000"]]}}"#;
        let counters = SwitchCounters::parse(reply).unwrap();
        assert_eq!(
            counters,
            SwitchCounters {
                rx_packets: 30,
                tx_packets: 28,
                cycles_rx: 300,
                cycles_process: 10,
                cycles_tx: 15,
                cycles_idle: 1000,
            }
        );
        let earlier = SwitchCounters {
            rx_packets: 10,
            cycles_idle: 2000,
            ..SwitchCounters::default()
        };
        let since = counters.since(&earlier);
        assert_eq!((since.rx_packets, since.cycles_idle), (20, 0));
        // An error reply, a missing counter or a number that is not one give nothing.
        assert_eq!(
            SwitchCounters::parse(r#"{"ok":false,"error":"x","fix":"y"}"#),
            None
        );
        assert_eq!(
            SwitchCounters::parse(&reply.replace(r#"["cycles.idle","1000","0","1000"]"#, "[]")),
            None
        );
        assert_eq!(
            SwitchCounters::parse(&reply.replace("\"28\"", "\"-\"")),
            None
        );
        assert_eq!(SwitchCounters::parse("not json"), None);
    }
}
