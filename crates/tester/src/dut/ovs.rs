//! Open vSwitch as a DuT: Debian's `openvswitch-switch`, its user-space (`netdev`) datapath, a
//! bridge with `d0` and `d1` and one OpenFlow rule `in_port=d0,actions=output:d1` (or `NORMAL`,
//! the learning switch).
//!
//! These kernels have no openvswitch module, so only the user-space datapath works; its ports are
//! `type=afxdp` when this build of OvS has that type (`iface_types`) and otherwise the default
//! netdev ports, which read and write through AF_PACKET sockets. Which one was used is in the
//! DuT's [`Dut::description`], never chosen silently. `ovs-afpacket` asks for the default ports
//! even where `afxdp` exists, so OvS's two I/O paths can be compared like wirespeed's.
//!
//! **Isolation.** The driver runs its own `ovsdb-server` and `ovs-vswitchd`, never the system's
//! service: a fresh database, sockets, pidfiles and logs live in one directory under the temp
//! dir (`OVS_RUNDIR`/`OVS_DBDIR`/`OVS_LOGDIR` point there, for the daemons and for `ovs-ofctl`),
//! and both daemons run inside the DuT namespace. Nothing touches /var/run/openvswitch.
//!
//! **Placement.** `ovs-vswitchd` starts under `taskset -c <DuT core>`, so every thread it makes
//! (the PMD thread that polls the ports, handlers, revalidators, the main thread) may run only on
//! the DuT core, as the other DuTs' work does; `pmd-cpu-mask` names the same core. The thread
//! that forwards (the `pmd*` thread with AF_XDP ports, the main thread otherwise) is what
//! [`Dut::worker_prefix`] names for the benchmark to read back and renice.
//!
//! **Teardown.** The bridge is deleted through the database first (OvS then closes its AF_XDP
//! sockets and detaches its XDP programs), then each daemon is stopped by its pidfile (SIGTERM,
//! SIGKILL after 5 s; the pid is only signalled while `/proc/<pid>/comm` still names the daemon),
//! any XDP program left on the ports is detached, and the directory is removed. This runs on
//! teardown and on drop, also after a setup that failed halfway, so the daemons never outlive
//! the benchmark or test that started them.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use wirespeed_lab::run;

use super::{Dut, DutError, INGRESS_FLAP, Steps, Wiring, flap_ingress};

/// Where the Debian package keeps the database schema.
pub const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

/// What the bridge's one flow does with frames from `d0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OvsAction {
    /// `in_port=d0,actions=output:d1`: a cross-connect, one exact rule.
    Output,
    /// `actions=NORMAL`: the MAC-learning switch.
    Normal,
}

/// One daemon the driver started, known by its pidfile.
#[derive(Clone, Debug)]
struct Daemon {
    /// Program name as `/proc/<pid>/comm` shows it.
    program: &'static str,
    pidfile: PathBuf,
}

/// The Open vSwitch driver.
#[derive(Debug)]
pub struct OvsDut {
    action: OvsAction,
    /// Use the netdev default ports (AF_PACKET) even where OvS has `afxdp`.
    afpacket: bool,
    core: usize,
    steps: Steps,
    /// The directory of the database, sockets, pidfiles and logs, once created.
    dir: Option<PathBuf>,
    /// Daemons started, in start order.
    daemons: Vec<Daemon>,
    /// The ports' `type` (`afxdp` or `system`), once chosen.
    port_type: Option<String>,
    /// Interfaces added to the bridge (for the XDP safety net at teardown).
    ports: Vec<(String, String)>,
    version: String,
    pid: Option<u32>,
    log: String,
}

impl OvsDut {
    pub const NAME: &'static str = "ovs";
    pub const NAME_NORMAL: &'static str = "ovs-normal";
    pub const NAME_AFPACKET: &'static str = "ovs-afpacket";

    /// A driver whose `ovs-vswitchd` runs on `core`, with AF_XDP ports where OvS has them.
    pub fn new(action: OvsAction, core: usize) -> Self {
        Self::build(action, false, core)
    }

    /// The `output:d1` driver with the netdev default ports (AF_PACKET) even where OvS has
    /// AF_XDP ones: OvS's own AF_PACKET vs AF_XDP comparison.
    pub fn afpacket(core: usize) -> Self {
        Self::build(OvsAction::Output, true, core)
    }

    fn build(action: OvsAction, afpacket: bool, core: usize) -> Self {
        Self {
            steps: Steps::new(Self::name_of(action, afpacket)),
            action,
            afpacket,
            core,
            dir: None,
            daemons: Vec::new(),
            port_type: None,
            ports: Vec::new(),
            version: String::new(),
            pid: None,
            log: String::new(),
        }
    }

    fn name_of(action: OvsAction, afpacket: bool) -> &'static str {
        match (action, afpacket) {
            (OvsAction::Normal, _) => Self::NAME_NORMAL,
            (OvsAction::Output, true) => Self::NAME_AFPACKET,
            (OvsAction::Output, false) => Self::NAME,
        }
    }

    /// The bridge's name in a lab with DuT namespace `wiring.dut_ns`.
    pub fn bridge_name(wiring: &Wiring) -> String {
        format!("{}-ovs", wiring.prefix())
    }

    /// The run directory (database, sockets, pidfiles, logs) once setup created it.
    pub fn run_dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The port type chosen (`afxdp` or `system`), once setup chose it.
    pub fn port_type(&self) -> Option<&str> {
        self.port_type.as_deref()
    }

    fn start_error(&self, step: &str, detail: String) -> DutError {
        DutError::Start {
            dut: self.name(),
            step: step.into(),
            detail,
        }
    }

    fn dir_text(&self) -> String {
        self.dir
            .as_deref()
            .map(|d| d.to_string_lossy().to_string())
            .unwrap_or_default()
    }

    /// `ovs-vsctl` against this driver's database, never waiting longer than `timeout` seconds.
    fn vsctl(&self, timeout: u32) -> Vec<String> {
        vec![
            "ovs-vsctl".into(),
            format!("--db=unix:{}/db.sock", self.dir_text()),
            format!("--timeout={timeout}"),
        ]
    }

    fn run_vsctl(
        &mut self,
        step: &str,
        args: &[&str],
        undo: Option<&[&str]>,
    ) -> Result<String, DutError> {
        let mut command = self.vsctl(10);
        command.extend(args.iter().map(|s| s.to_string()));
        let command: Vec<&str> = command.iter().map(String::as_str).collect();
        let undo_command = undo.map(|undo| {
            let mut full = self.vsctl(3);
            full.extend(undo.iter().map(|s| s.to_string()));
            full
        });
        let undo_refs: Option<Vec<&str>> = undo_command
            .as_ref()
            .map(|u| u.iter().map(String::as_str).collect());
        self.steps.run(step, &command, undo_refs.as_deref())
    }

    /// Starts `program` (a daemon that detaches once ready) in the DuT namespace on the DuT
    /// core, with its pidfile, control socket and log in the run directory.
    fn start_daemon(
        &mut self,
        wiring: &Wiring,
        program: &'static str,
        first: &[String],
    ) -> Result<(), DutError> {
        let dir = self.dir_text();
        let core = self.core.to_string();
        let pidfile = format!("{dir}/{program}.pid");
        let args = [
            format!("OVS_RUNDIR={dir}"),
            format!("OVS_DBDIR={dir}"),
            format!("OVS_LOGDIR={dir}"),
            "ip".into(),
            "netns".into(),
            "exec".into(),
            wiring.dut_ns.clone(),
            "taskset".into(),
            "-c".into(),
            core,
            program.into(),
        ]
        .into_iter()
        .chain(first.iter().cloned())
        .chain([
            format!("--pidfile={pidfile}"),
            format!("--unixctl={dir}/{program}.ctl"),
            format!("--log-file={dir}/{program}.log"),
            "--detach".into(),
            "--no-chdir".into(),
            "-vconsole:off".into(),
        ])
        .collect::<Vec<String>>();
        let mut command = vec!["env"];
        command.extend(args.iter().map(String::as_str));
        // Known before it runs: a daemon that detached and then failed the step's check must
        // still be stopped.
        self.daemons.push(Daemon {
            program,
            pidfile: PathBuf::from(&pidfile),
        });
        self.steps
            .run(&format!("start {program}"), &command, None)?;
        Ok(())
    }

    /// Stops every daemon (last started first) and returns the first failure.
    fn stop_daemons(&mut self) -> Result<(), DutError> {
        let mut first = None;
        while let Some(daemon) = self.daemons.pop() {
            if daemon.program == "ovs-vswitchd" {
                self.log = self.log_tail(&daemon);
            }
            if let Err(detail) = stop(&daemon, &mut self.steps) {
                first.get_or_insert(DutError::Teardown {
                    dut: self.name(),
                    detail,
                });
            }
        }
        self.pid = None;
        first.map_or(Ok(()), Err)
    }

    /// The last lines of a daemon's log, for the report.
    fn log_tail(&self, daemon: &Daemon) -> String {
        let path = daemon.pidfile.with_extension("log");
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    fn configure(&mut self, wiring: &Wiring) -> Result<(), DutError> {
        for (program, package) in [
            ("ovsdb-tool", "openvswitch-switch"),
            ("ovsdb-server", "openvswitch-switch"),
            ("ovs-vswitchd", "openvswitch-switch"),
            ("ovs-vsctl", "openvswitch-switch"),
            ("ovs-ofctl", "openvswitch-common"),
            ("taskset", "util-linux"),
        ] {
            self.steps.require(program, package)?;
        }
        if !Path::new(SCHEMA).is_file() {
            return Err(self.start_error(
                "find the database schema",
                format!("{SCHEMA} is missing; reinstall openvswitch-common"),
            ));
        }
        let version = self.steps.run(
            "read the Open vSwitch version",
            &["ovs-vswitchd", "--version"],
            None,
        )?;
        self.version = version
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_string();
        let dir = std::env::temp_dir().join(format!(
            "wirespeed-{}-{}-{}",
            wiring.prefix(),
            self.name(),
            std::process::id()
        ));
        let dir_text = dir.to_string_lossy().to_string();
        // A directory left by a killed earlier run of this process id would hold a stale
        // database; start from nothing.
        self.steps.run(
            "create the run directory",
            &[
                "sh",
                "-c",
                &format!("rm -rf '{dir_text}' && mkdir -p '{dir_text}'"),
            ],
            None,
        )?;
        self.dir = Some(dir);
        let db = format!("{dir_text}/conf.db");
        self.steps.run(
            "create the database",
            &["ovsdb-tool", "create", &db, SCHEMA],
            None,
        )?;
        let remote = format!("--remote=punix:{dir_text}/db.sock");
        self.start_daemon(wiring, "ovsdb-server", &[db.clone(), remote])?;
        self.run_vsctl("initialise the database", &["--no-wait", "init"], None)?;
        let socket = format!("unix:{dir_text}/db.sock");
        self.start_daemon(wiring, "ovs-vswitchd", &[socket])?;
        let pidfile = format!("{dir_text}/ovs-vswitchd.pid");
        self.pid = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|text| text.trim().parse().ok());
        let types = self.run_vsctl(
            "read the port types this build supports",
            &["get", "Open_vSwitch", ".", "iface_types"],
            None,
        )?;
        let afxdp = types
            .trim_matches(|c: char| c == '[' || c == ']' || c.is_whitespace())
            .split(',')
            .any(|t| t.trim() == "afxdp");
        let port_type = if afxdp && !self.afpacket {
            "afxdp"
        } else {
            "system"
        };
        self.port_type = Some(port_type.into());
        self.steps.record(format!(
            "# iface_types: {}; ports will be type={port_type}",
            types.trim()
        ));
        if self.core >= 128 {
            return Err(self.start_error(
                "set pmd-cpu-mask",
                format!("core {} is beyond a 128-bit mask", self.core),
            ));
        }
        let mask = format!("other_config:pmd-cpu-mask=0x{:x}", 1u128 << self.core);
        self.run_vsctl(
            &format!("pin the PMD threads to CPU {}", self.core),
            &["set", "Open_vSwitch", ".", &mask],
            None,
        )?;
        let bridge = Self::bridge_name(wiring);
        self.run_vsctl(
            &format!("create bridge {bridge}"),
            &[
                "add-br",
                &bridge,
                "--",
                "set",
                "bridge",
                &bridge,
                "datapath_type=netdev",
                "fail_mode=secure",
            ],
            Some(&["--if-exists", "del-br", &bridge]),
        )?;
        for (number, port) in [(1, &wiring.ingress.dut_if), (2, &wiring.egress.dut_if)] {
            self.ports.push((wiring.dut_ns.clone(), port.clone()));
            let type_setting = format!("type={port_type}");
            let request = format!("ofport_request={number}");
            // QoS `linux-noop`: OvS leaves the port's qdisc alone. By default it deletes the
            // root qdisc of every port it manages, and on the lab's veths that turns the
            // backpressure of `Testbed::backpressure` into drops, for OvS and every DuT after it.
            self.run_vsctl(
                &format!("add {port} to {bridge} as type {port_type}, its qdisc untouched"),
                &[
                    "add-port",
                    &bridge,
                    port,
                    "--",
                    "set",
                    "interface",
                    port,
                    &type_setting,
                    &request,
                    "--",
                    "set",
                    "port",
                    port,
                    "qos=@noop",
                    "--",
                    "--id=@noop",
                    "create",
                    "qos",
                    "type=linux-noop",
                ],
                None,
            )?;
            let ofport = self.run_vsctl(
                &format!("check that {port} opened"),
                &["get", "interface", port, "ofport"],
                None,
            )?;
            if ofport.trim() != number.to_string() {
                let error = self
                    .run_vsctl(
                        &format!("read {port}'s error"),
                        &["get", "interface", port, "error"],
                        None,
                    )
                    .unwrap_or_default();
                return Err(self.start_error(
                    &format!("open {port} as type {port_type}"),
                    format!(
                        "OvS gave it OpenFlow port {} (wanted {number}): {}",
                        ofport.trim(),
                        error.trim()
                    ),
                ));
            }
        }
        let flow = match self.action {
            OvsAction::Output => "in_port=1,actions=output:2".to_string(),
            OvsAction::Normal => "actions=NORMAL".to_string(),
        };
        let rundir = format!("OVS_RUNDIR={dir_text}");
        self.steps.run(
            &format!("add the flow {flow}"),
            &["env", &rundir, "ovs-ofctl", "add-flow", &bridge, &flow],
            None,
        )?;
        if self.pid.is_none() {
            return Err(self.start_error(
                "read ovs-vswitchd's pid",
                format!("{pidfile} is missing or unreadable"),
            ));
        }
        Ok(())
    }
}

/// Whether process `pid` exists, is not a zombie, and is `program`.
fn alive(pid: u32, program: &str) -> bool {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    if comm.trim() != program {
        return false;
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, after)| after.split_whitespace().next());
    !matches!(state, None | Some("Z") | Some("X"))
}

/// Stops a daemon by its pidfile: SIGTERM, then SIGKILL after 5 s. A missing pidfile or a pid
/// that is no longer the daemon means it is gone already.
fn stop(daemon: &Daemon, steps: &mut Steps) -> Result<(), String> {
    let Some(pid) = std::fs::read_to_string(&daemon.pidfile)
        .ok()
        .and_then(|text| text.trim().parse::<u32>().ok())
    else {
        return Ok(());
    };
    if !alive(pid, daemon.program) {
        return Ok(());
    }
    let pid_text = pid.to_string();
    steps.record(format!(
        "kill -TERM {pid}  # {} from {}",
        daemon.program,
        daemon.pidfile.display()
    ));
    let _ = run("kill", &["-TERM", &pid_text]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if !alive(pid, daemon.program) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    steps.record(format!("kill -KILL {pid}  # {}", daemon.program));
    let _ = run("kill", &["-KILL", &pid_text]);
    std::thread::sleep(Duration::from_millis(100));
    if alive(pid, daemon.program) {
        return Err(format!("{} (pid {pid}) survived SIGKILL", daemon.program));
    }
    Ok(())
}

impl Dut for OvsDut {
    fn name(&self) -> String {
        Self::name_of(self.action, self.afpacket).into()
    }

    fn description(&self) -> String {
        let ports = match self.port_type.as_deref() {
            Some("afxdp") => "ports type=afxdp (AF_XDP), polled by a PMD thread".to_string(),
            Some(other) if self.afpacket => {
                format!("ports type={other} (AF_PACKET, asked for), polled by the main thread")
            }
            Some(other) => format!(
                "ports type={other} (AF_PACKET: this build of OvS has no afxdp port type), \
                 polled by the main thread"
            ),
            None => "ports not set up yet".to_string(),
        };
        let flow = match self.action {
            OvsAction::Output => "flow in_port=d0,actions=output:d1",
            OvsAction::Normal => "flow actions=NORMAL (MAC learning)",
        };
        let version = if self.version.is_empty() {
            "Open vSwitch"
        } else {
            self.version.as_str()
        };
        format!(
            "{version}, user-space datapath (datapath_type=netdev), {ports}, {flow}, \
             every ovs-vswitchd thread on CPU {}",
            self.core
        )
    }

    fn setup(&mut self, wiring: &Wiring) -> Result<(), DutError> {
        self.configure(wiring)
    }

    fn teardown(&mut self) -> Result<(), DutError> {
        let undone = self.steps.undo_all();
        let stopped = self.stop_daemons();
        for (ns, port) in std::mem::take(&mut self.ports) {
            // OvS detaches its XDP programs when it closes a port; this only matters after a
            // daemon was killed. A port without a program is left alone.
            let shown = run("ip", &["-n", &ns, "link", "show", "dev", &port]).unwrap_or_default();
            if shown.contains("xdp") {
                let _ = self.steps.run(
                    &format!("detach XDP from {port}"),
                    &["ip", "-n", &ns, "link", "set", "dev", &port, "xdp", "off"],
                    None,
                );
            }
        }
        if let Some(dir) = self.dir.take() {
            let dir_text = dir.to_string_lossy().to_string();
            let _ = self
                .steps
                .run("remove the run directory", &["rm", "-rf", &dir_text], None);
        }
        undone.and(stopped)
    }

    fn reset_method(&self) -> Option<&'static str> {
        Some(INGRESS_FLAP)
    }

    fn reset(&mut self, wiring: &Wiring) -> Result<(), DutError> {
        flap_ingress(&mut self.steps, wiring)
    }

    fn commands(&self) -> &[String] {
        self.steps.log()
    }

    fn check(&mut self) -> Result<(), DutError> {
        let Some(pid) = self.pid else {
            return Ok(());
        };
        if alive(pid, "ovs-vswitchd") {
            return Ok(());
        }
        let log = self
            .daemons
            .iter()
            .find(|d| d.program == "ovs-vswitchd")
            .map(|d| self.log_tail(d))
            .unwrap_or_default();
        Err(self.start_error(
            "run ovs-vswitchd",
            format!("it exited; the end of its log:\n{log}"),
        ))
    }

    fn pid(&self) -> Option<u32> {
        self.pid
    }

    fn worker_prefix(&self) -> &str {
        match self.port_type.as_deref() {
            Some("afxdp") => "pmd",
            _ => "ovs-vswitchd",
        }
    }

    fn output(&self) -> Option<&str> {
        Some(&self.log)
    }
}

impl Drop for OvsDut {
    fn drop(&mut self) {
        if let Err(error) = self.teardown() {
            eprintln!("{error}");
        }
    }
}
