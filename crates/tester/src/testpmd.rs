//! DPDK's `dpdk-testpmd` as a process the tester starts, watches and always stops: the engine of
//! the `dpdk-testpmd` DuT ([`crate::dut::TestpmdDut`], `--forward-mode=io` between `d0` and
//! `d1`) and of the `testpmd-txonly` generator ([`crate::generator::TestpmdTxonly`], on `t0`).
//!
//! **The invocation that works here** (Debian 12's DPDK 22.11, kernel 6.18, veth, no hugepages),
//! found by trying it in the lab:
//!
//! ```text
//! ip netns exec NS taskset -c C stdbuf -oL dpdk-testpmd -v --lcores 0@C,1@C --no-huge -m 256 --no-pci \
//!     --no-shconf --no-telemetry --file-prefix PREFIX \
//!     --vdev net_af_xdp0,iface=IF0,start_queue=0,queue_count=1 [--vdev net_af_xdp1,...] \
//!     -- --forward-mode=MODE --auto-start --total-num-mbufs=16384 ...
//! ```
//!
//! * `--no-huge` needs `-m` and a smaller mbuf pool than testpmd's default (155,456 mbufs do not
//!   fit in 512 MiB); `--in-memory` is refused with `--no-huge` (it implies legacy memory), so
//!   `--no-shconf` keeps the shared files away, but EAL still creates `/var/run/dpdk/PREFIX`:
//!   the stop removes it. The prefix names the lab and this process, so two runs never share it.
//! * The AF_XDP poll-mode driver binds in copy mode by itself on veth (zero-copy is refused);
//!   libxdp finds no bpffs, says "Falling back to loading single prog without dispatcher" and
//!   attaches its `xsk_def_prog` in native mode. A clean exit detaches it; after a kill it stays,
//!   so the stop detaches what is left (no interface may carry an XDP program before the start,
//!   so only testpmd's can be there). testpmd also sets every port promiscuous and leaves it so;
//!   the stop turns that off again where it was off.
//! * `--lcores 0@C,1@C` puts the main lcore (idle: it waits on standard input) and the
//!   forwarding lcore (`rte-worker-1`, which busy-polls) on core C, and `taskset` keeps EAL's
//!   own threads (interrupts, multi-process) there too.
//! * Without `--interactive`, testpmd starts forwarding, prints "Press enter to exit" and reads
//!   standard input. The process gets a pipe it never writes: closing it is the clean stop
//!   (testpmd then stops forwarding, prints its statistics and closes its ports); SIGKILL after
//!   10 s if it does not exit. Should the tester itself die, the pipe closes with it and
//!   testpmd stops the same way. Its standard output goes to a file, where the C library would
//!   hold "Press enter to exit" in a 4 KiB buffer until the exit: `stdbuf -oL` makes it
//!   line-buffered, so the start can wait for that line. (`ip netns exec`, `taskset` and
//!   `stdbuf` each exec the next program: the child's pid is testpmd's.)
//!
//! Every command is recorded through [`Steps`], whose undo stack removes what the run created
//! (runtime directory, output file, promiscuous mode, XDP program), also after a start that
//! failed halfway.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use crate::dut::{DutError, Steps};

/// The program, and the Debian package that has it.
pub const PROGRAM: &str = "dpdk-testpmd";
pub const PACKAGE: &str = "dpdk-dev";
/// The Debian package of DPDK's AF_XDP poll-mode driver (`net_af_xdp`).
pub const AF_XDP_PACKAGE: &str = "librte-net-af-xdp23";
/// The name testpmd gives its forwarding lcore's thread.
pub const WORKER_PREFIX: &str = "rte-worker";
/// testpmd prints this once forwarding runs (non-interactive mode).
const STARTED: &str = "Press enter to exit";
/// mbufs in testpmd's pool: the fill and TX rings of two AF_XDP ports take 2048 each.
const MBUFS: u32 = 16384;
/// Longest wait for testpmd to start forwarding.
pub const START_TIMEOUT: Duration = Duration::from_secs(20);
/// Longest wait for a clean exit after standard input closes.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Most bytes of testpmd's output kept for reports (its own log lines, the final statistics).
const OUTPUT_LIMIT: u64 = 1 << 20;

/// What one testpmd run does.
#[derive(Clone, Debug)]
pub struct Launch<'a> {
    /// The lab's name prefix ([`crate::dut::Wiring::prefix`]): with the handle's name and this
    /// process's id it makes EAL's file prefix, unique per lab and run.
    pub lab: &'a str,
    /// The namespace it runs in.
    pub namespace: &'a str,
    /// One `net_af_xdp` port per interface, port *i* on `interfaces[i]`.
    pub interfaces: &'a [String],
    /// The core of every testpmd thread (main lcore, forwarding lcore, EAL's threads).
    pub core: usize,
    /// testpmd's own arguments after `--`, besides `--auto-start` and the pool size.
    pub application: &'a [String],
}

/// One testpmd process and what it left behind until it is stopped.
#[derive(Debug)]
pub struct Testpmd {
    /// The DuT's or generator's name, for errors.
    name: String,
    steps: Steps,
    child: Option<Child>,
    /// The write end of testpmd's standard input; dropping it asks testpmd to exit.
    stdin: Option<ChildStdin>,
    output_path: Option<PathBuf>,
    output: String,
    /// DPDK's version as the first run printed it (kept after the stop, for reports).
    version: String,
}

impl Testpmd {
    /// A handle that has started nothing; `name` names it in errors (the DuT or generator).
    pub fn new(name: &str) -> Self {
        Self {
            name: name.into(),
            steps: Steps::new(name),
            child: None,
            stdin: None,
            output_path: None,
            output: String::new(),
            version: String::new(),
        }
    }

    /// Starts testpmd as `launch` says and waits until it forwards (EAL and the AF_XDP ports
    /// take about a second; at most [`START_TIMEOUT`]). On error whatever was done stays on the
    /// undo stack for [`Testpmd::stop`].
    pub fn start(&mut self, launch: &Launch) -> Result<(), DutError> {
        let started = self.launch(launch);
        if self.version.is_empty() {
            self.version = printed_version(&self.output).to_string();
        }
        started
    }

    fn launch(&mut self, launch: &Launch) -> Result<(), DutError> {
        self.steps.require(PROGRAM, PACKAGE)?;
        self.steps.require("taskset", "util-linux")?;
        if !af_xdp_driver_installed(Path::new("/usr/lib")) {
            return Err(self.error(
                "find DPDK's AF_XDP driver",
                format!(
                    "no librte_net_af_xdp.so under /usr/lib/*/dpdk/pmds-*; install the Debian \
                     package {AF_XDP_PACKAGE} (scripts/setup-debian.sh does)"
                ),
            ));
        }
        for interface in launch.interfaces {
            self.prepare_interface(launch.namespace, interface)?;
        }
        let file_prefix = format!(
            "wirespeed-{}-{}-{}",
            launch.lab,
            self.name,
            std::process::id()
        );
        let runtime_dir = format!("/var/run/dpdk/{file_prefix}");
        self.steps.push_undo(&["rm", "-rf", &runtime_dir]);
        let output_path = std::env::temp_dir().join(format!("{file_prefix}.out"));
        let output = std::fs::File::create(&output_path).map_err(|error| {
            self.error(
                "create testpmd's output file",
                format!("{}: {error}", output_path.display()),
            )
        })?;
        self.steps
            .push_undo(&["rm", "-f", &output_path.to_string_lossy()]);
        self.output_path = Some(output_path.clone());
        let stderr = output
            .try_clone()
            .map_err(|error| self.error("duplicate the output file", error.to_string()))?;
        let args = arguments(launch, &file_prefix);
        self.steps.record(format!(
            "{} > {} 2>&1 < (a pipe held open until the stop) &",
            args.join(" "),
            output_path.display()
        ));
        let Some((program, rest)) = args.split_first() else {
            return Err(self.error("start dpdk-testpmd", "empty command line".into()));
        };
        let mut child = Command::new(program)
            .args(rest)
            .stdin(Stdio::piped())
            .stdout(output)
            .stderr(stderr)
            .spawn()
            .map_err(|error| self.error("start dpdk-testpmd", format!("{program}: {error}")))?;
        self.stdin = child.stdin.take();
        self.child = Some(child);
        self.wait_started(START_TIMEOUT)
    }

    /// Refuses an interface that is missing or already carries an XDP program (whose removal
    /// at the stop would then not be ours), and pushes the undo of what testpmd will change.
    fn prepare_interface(&mut self, namespace: &str, interface: &str) -> Result<(), DutError> {
        let shown = self.steps.run(
            &format!("find {interface} in {namespace}"),
            &["ip", "-n", namespace, "link", "show", "dev", interface],
            None,
        )?;
        if shown.contains("prog/xdp") {
            return Err(self.error(
                &format!("check {interface}"),
                format!("{interface} already has an XDP program:\n{}", shown.trim()),
            ));
        }
        // Last undone first: the XDP program (only testpmd's can be there), then promiscuous
        // mode where it was off.
        if !promiscuous(&shown) {
            self.steps.push_undo(&[
                "ip", "-n", namespace, "link", "set", "dev", interface, "promisc", "off",
            ]);
        }
        self.steps.push_undo(&[
            "ip", "-n", namespace, "link", "set", "dev", interface, "xdp", "off",
        ]);
        Ok(())
    }

    /// Waits until testpmd says it forwards; an error with its output if it exits first or
    /// does not get there within `timeout`.
    fn wait_started(&mut self, timeout: Duration) -> Result<(), DutError> {
        let deadline = Instant::now() + timeout;
        loop {
            self.check()?;
            if self.read_output().contains(STARTED) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(self.error(
                    "wait for testpmd to forward",
                    format!(
                        "no \"{STARTED}\" within {} s; its output:\n{}",
                        timeout.as_secs(),
                        tail(&self.output)
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Reads the output file (at most [`OUTPUT_LIMIT`] bytes) into `self.output`.
    fn read_output(&mut self) -> &str {
        if let Some(path) = &self.output_path
            && let Ok(file) = std::fs::File::open(path)
        {
            let mut text = Vec::new();
            if file.take(OUTPUT_LIMIT).read_to_end(&mut text).is_ok() {
                self.output = String::from_utf8_lossy(&text).into_owned();
            }
        }
        &self.output
    }

    /// An error if testpmd exited (with the end of its output).
    pub fn check(&mut self) -> Result<(), DutError> {
        let exited = match &mut self.child {
            Some(child) => matches!(child.try_wait(), Ok(Some(_))),
            None => return Ok(()),
        };
        if exited {
            self.child = None;
            self.stdin = None;
            let output = tail(self.read_output()).to_string();
            return Err(self.error("run dpdk-testpmd", format!("it exited:\n{output}")));
        }
        Ok(())
    }

    /// Stops testpmd (closes its standard input; SIGKILL after 10 s), keeps its output and
    /// undoes everything the start did. Running it twice is harmless.
    pub fn stop(&mut self) -> Result<(), DutError> {
        let stopped = self.stop_process();
        self.read_output();
        let undone = self.steps.undo_all();
        stopped.and(undone)
    }

    fn stop_process(&mut self) -> Result<(), DutError> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let pid = child.id();
        self.steps.record(format!(
            "exec {{stdin}}>&-  # close testpmd's input (pid {pid})"
        ));
        drop(self.stdin.take());
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => return Ok(()),
                Ok(Some(status)) => {
                    return Err(self.teardown_error(format!("testpmd exited with {status}")));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(_) => break,
            }
        }
        self.steps.record(format!("kill -KILL {pid}"));
        let _ = child.kill();
        let _ = child.wait();
        Err(self.teardown_error(format!(
            "testpmd did not exit within {} s of its input closing; killed",
            STOP_TIMEOUT.as_secs()
        )))
    }

    fn teardown_error(&mut self, detail: String) -> DutError {
        DutError::Teardown {
            dut: self.name.clone(),
            detail: format!("{detail}; its output:\n{}", tail(self.read_output())),
        }
    }

    fn error(&self, step: &str, detail: String) -> DutError {
        DutError::Start {
            dut: self.name.clone(),
            step: step.into(),
            detail,
        }
    }

    /// The running process (`ip netns exec` and `taskset` exec into testpmd: the same pid).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// What testpmd printed, as last read (all of it after the stop).
    pub fn output(&self) -> &str {
        &self.output
    }

    /// Every command run, in order.
    pub fn commands(&self) -> &[String] {
        self.steps.log()
    }

    /// DPDK's version as testpmd printed it (`-v`), e.g. `DPDK 22.11.11`; `DPDK` before a
    /// start got that far.
    pub fn version(&self) -> &str {
        if self.version.is_empty() {
            "DPDK"
        } else {
            &self.version
        }
    }
}

impl Drop for Testpmd {
    fn drop(&mut self) {
        if let Err(error) = self.stop() {
            eprintln!("{error}");
        }
    }
}

/// The whole command line for `launch` with EAL file prefix `file_prefix`.
fn arguments(launch: &Launch, file_prefix: &str) -> Vec<String> {
    let core = launch.core.to_string();
    let mut args: Vec<String> = [
        "ip",
        "netns",
        "exec",
        launch.namespace,
        "taskset",
        "-c",
        &core,
        "stdbuf",
        "-oL",
        PROGRAM,
        "-v",
        "--lcores",
        &format!("0@{core},1@{core}"),
        "--no-huge",
        "-m",
        "256",
        "--no-pci",
        "--no-shconf",
        "--no-telemetry",
        "--file-prefix",
        file_prefix,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for (port, interface) in launch.interfaces.iter().enumerate() {
        args.push("--vdev".into());
        args.push(format!(
            "net_af_xdp{port},iface={interface},start_queue=0,queue_count=1"
        ));
    }
    args.push("--".into());
    args.extend(launch.application.iter().cloned());
    args.push("--auto-start".into());
    args.push(format!("--total-num-mbufs={MBUFS}"));
    args
}

/// The version in EAL's `RTE Version: 'DPDK 22.11.11'` line of `output`; empty without one.
fn printed_version(output: &str) -> &str {
    output
        .lines()
        .find_map(|line| line.split_once("RTE Version: '"))
        .and_then(|(_, rest)| rest.split_once('\''))
        .map_or("", |(version, _)| version)
}

/// Whether `ip link show` output lists the PROMISC flag.
fn promiscuous(shown: &str) -> bool {
    shown
        .split(['<', '>'])
        .nth(1)
        .is_some_and(|flags| flags.split(',').any(|flag| flag == "PROMISC"))
}

/// Whether `lib` (`/usr/lib`) has DPDK's AF_XDP driver in some `*/dpdk/pmds-*` directory, where
/// Debian's EAL loads drivers from.
fn af_xdp_driver_installed(lib: &Path) -> bool {
    let entries = |dir: &Path| {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| entry.path())
            .collect::<Vec<_>>()
    };
    entries(lib).iter().any(|arch| {
        entries(&arch.join("dpdk")).iter().any(|pmds| {
            entries(pmds).iter().any(|file| {
                file.file_name()
                    .is_some_and(|name| name.to_string_lossy().starts_with("librte_net_af_xdp.so"))
            })
        })
    })
}

/// Packet totals of all ports from testpmd's final "Accumulated forward statistics" block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ForwardTotals {
    pub rx_packets: u64,
    pub tx_packets: u64,
    /// Packets the forwarding loop could not hand to a TX queue.
    pub tx_dropped: u64,
}

impl ForwardTotals {
    /// Reads the last accumulated block of `output`; `None` if there is none.
    pub fn parse(output: &str) -> Option<ForwardTotals> {
        let (_, block) = output.rsplit_once("Accumulated forward statistics for all ports")?;
        let value = |line_start: &str, key: &str| -> Option<u64> {
            let line = block
                .lines()
                .find(|line| line.trim_start().starts_with(line_start))?;
            let (_, after) = line.split_once(key)?;
            after.split_whitespace().next()?.parse().ok()
        };
        Some(ForwardTotals {
            rx_packets: value("RX-packets:", "RX-packets:")?,
            tx_packets: value("TX-packets:", "TX-packets:")?,
            tx_dropped: value("TX-packets:", "TX-dropped:")?,
        })
    }
}

/// The last 40 lines of `text`.
fn tail(text: &str) -> &str {
    let start = text
        .rmatch_indices('\n')
        .nth(40)
        .map_or(0, |(index, _)| index + 1);
    &text[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_pins_every_lcore_and_names_its_ports() {
        let interfaces = vec!["ws-d0".to_string(), "ws-d1".to_string()];
        let application = vec!["--forward-mode=io".to_string()];
        let launch = Launch {
            lab: "ws",
            namespace: "ws-dut",
            interfaces: &interfaces,
            core: 1,
            application: &application,
        };
        let args = arguments(&launch, "wirespeed-ws-dpdk-testpmd-42").join(" ");
        assert_eq!(
            args,
            "ip netns exec ws-dut taskset -c 1 stdbuf -oL dpdk-testpmd -v --lcores 0@1,1@1 --no-huge -m 256 \
             --no-pci --no-shconf --no-telemetry --file-prefix wirespeed-ws-dpdk-testpmd-42 \
             --vdev net_af_xdp0,iface=ws-d0,start_queue=0,queue_count=1 \
             --vdev net_af_xdp1,iface=ws-d1,start_queue=0,queue_count=1 \
             -- --forward-mode=io --auto-start --total-num-mbufs=16384"
        );
    }

    #[test]
    fn the_final_statistics_and_the_version_are_read_from_the_output() {
        let output = "EAL: RTE Version: 'DPDK 22.11.11'\n\
            Press enter to exit\n\
            \n  ---------------------- Forward statistics for port 0  ----------------------\n\
            \x20 RX-packets: 0              RX-dropped: 0             RX-total: 0\n\
            \x20 TX-packets: 7              TX-dropped: 1             TX-total: 8\n\
            \n  +++++++++++++++ Accumulated forward statistics for all ports+++++++++++++++\n\
            \x20 RX-packets: 5              RX-dropped: 0             RX-total: 5\n\
            \x20 TX-packets: 12345678       TX-dropped: 90            TX-total: 12345768\n\
            \x20 ++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++\n\
            Bye...\n";
        assert_eq!(
            ForwardTotals::parse(output),
            Some(ForwardTotals {
                rx_packets: 5,
                tx_packets: 12_345_678,
                tx_dropped: 90,
            })
        );
        assert_eq!(ForwardTotals::parse("Press enter to exit\n"), None);
        assert_eq!(
            ForwardTotals::parse(&output.replace("12345678", "many")),
            None
        );
        assert_eq!(printed_version(output), "DPDK 22.11.11");
        assert_eq!(printed_version("EAL: RTE Version: 'DPDK"), "");
        let mut testpmd = Testpmd::new("demo");
        assert_eq!(testpmd.version(), "DPDK");
        // Never started: stopping does nothing and succeeds.
        testpmd.stop().unwrap();
    }

    #[test]
    fn promiscuous_mode_is_read_from_the_link_flags() {
        assert!(promiscuous(
            "2: d0@if2: <BROADCAST,MULTICAST,PROMISC,UP,LOWER_UP> mtu 1500"
        ));
        assert!(!promiscuous(
            "2: d0@if2: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue"
        ));
        assert!(!promiscuous("garbage"));
    }

    #[test]
    fn the_af_xdp_driver_is_looked_for_where_debians_eal_loads_drivers() {
        let lib = std::env::temp_dir().join(format!("wirespeed-pmds-{}", std::process::id()));
        let pmds = lib.join("x86_64-linux-gnu/dpdk/pmds-23.0");
        std::fs::create_dir_all(&pmds).unwrap();
        std::fs::write(pmds.join("librte_net_null.so.23.0"), b"").unwrap();
        assert!(!af_xdp_driver_installed(&lib), "another driver is not it");
        std::fs::write(pmds.join("librte_net_af_xdp.so.23.0"), b"").unwrap();
        assert!(af_xdp_driver_installed(&lib));
        std::fs::remove_dir_all(&lib).unwrap();
        assert!(
            !af_xdp_driver_installed(&lib),
            "a missing directory has no driver"
        );
    }

    #[test]
    fn output_tails_keep_the_last_forty_lines() {
        let text: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let kept = tail(&text);
        assert_eq!(kept.lines().count(), 40);
        assert!(kept.starts_with("line 60\n"));
        assert_eq!(tail("short"), "short");
    }
}
