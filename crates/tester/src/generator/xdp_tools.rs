//! xdp-tools as the forwarding benchmark's sender and counter: `xdp-trafficgen udp` on `t0`
//! and `xdp-bench drop` on `t1`, an in-kernel generator and an XDP_DROP sink that share no code
//! with the tester, to check its figures against (issue 18: `bench forwarding` within 10 % of
//! what an independent generator and sink measure on the same veths and placement).
//!
//! Both are the upstream programs built from Debian's source package
//! (`scripts/build-xdp-tools.sh`, into [`INSTALL_DIR`]): bookworm's 1.3.1 does not load on this
//! kernel, trixie's binaries need a newer glibc. Everything else of a trial is the benchmark's
//! own: the lab, the DuT's setup and probe, the NAPI placement; only the frames and the counts
//! come from xdp-tools.
//!
//! * **Sender.** `xdp-trafficgen udp` runs its program with `BPF_PROG_RUN` live frames and
//!   redirects every frame into `t0`, as [`super::live`] does, from one thread that pins itself
//!   to CPU 0 (so the plan's generator core must be 0). Its frames are its own: Ethernet, IPv6
//!   and UDP, 66 bytes with FCS at the smallest ([`SMALLEST_FRAME`]), addressed here to the
//!   DuT's MAC and the lab's IPv6 addresses, hop limit 64; flows vary the UDP destination port
//!   (`--dyn-ports`), where the tester's own frames vary the source port.
//! * **Counter.** `xdp-bench drop` attaches its XDP program to `t1` and drops what arrives; its
//!   `rx/s` is the DuT's forwarding rate. The tester's XDP sink is not attached.
//! * **The figures** are what the two programs print each second, read as a person would:
//!   the intervals in which a tool saw traffic throughout, that is the ones between the first
//!   and the last with traffic (those two are partial), averaged ([`steady`]). A trial therefore
//!   needs at least 3 seconds; the `sent` and `received` of its [`BlastResult`] are those
//!   rates times the number of whole intervals, its `seconds` that number.
//! * **What "sent" means here.** xdp-trafficgen's `xmit/s` is the `sent` of the kernel's
//!   `xdp_devmap_xmit` tracepoint: frames veth *took* into `d0`'s ring. Frames it refused at a
//!   full ring are not counted (they would be `drop/s`, which it does not print). The live
//!   generator's `sent` counts every frame run, refused or not. So with a DuT that cannot keep
//!   up, xdp-tools' offered rate is what `d0`'s NAPI drained, and its loss is what was lost
//!   *after* the DuT's ingress ring (in the DuT or at `t1`'s ring): only the received rates of
//!   the two generators compare, not their offered rates, losses or limits.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::BlastResult;

/// Where `scripts/build-xdp-tools.sh` installs the programs.
pub const INSTALL_DIR: &str = "/opt/wirespeed/xdp-tools/sbin";
/// The smallest frame `xdp-trafficgen udp` sends, with FCS (Ethernet, IPv6 and UDP headers).
pub const SMALLEST_FRAME: u16 = 66;
/// The highest flow count: `--dyn-ports` is a 16-bit count of destination ports.
pub const MAX_FLOWS: u32 = 65535;
/// Shortest trial that leaves a whole one-second interval between two partial ones.
pub const MIN_SECONDS: f64 = 3.0;
/// How long a program may take to attach before the trial gives up on it.
const START_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a program may take to detach and exit after SIGINT before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);
/// Lines they print once attached.
const SENDING: &str = "Transmitting on";
const DROPPING: &str = "Dropping packets on";

/// One trial's traffic.
#[derive(Clone, Debug)]
pub struct Run<'a> {
    /// The namespace of both interfaces.
    pub namespace: &'a str,
    /// `t0`.
    pub sender: &'a str,
    /// `t1`.
    pub receiver: &'a str,
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub src_ip: std::net::Ipv6Addr,
    pub dst_ip: std::net::Ipv6Addr,
    /// UDP destination ports the frames vary over, 1..=[`MAX_FLOWS`].
    pub flows: u32,
    /// Frame size with FCS, at least [`SMALLEST_FRAME`].
    pub frame_size: u16,
    /// The CPU the sender runs on; `xdp-trafficgen` sends from CPU 0 only.
    pub cpu: usize,
    pub seconds: f64,
    /// How long the counter keeps counting after the sender stops.
    pub linger: Duration,
}

/// A finished trial.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub result: BlastResult,
    /// The command lines that started and stopped the programs.
    pub commands: Vec<String>,
    /// What both programs printed.
    pub output: String,
}

/// The directory holding `xdp-trafficgen` and `xdp-bench`: [`INSTALL_DIR`], or the one of
/// `xdp-trafficgen` on `PATH`; an error naming the build script when neither has both.
pub fn find() -> Result<PathBuf, String> {
    let has_both =
        |dir: &Path| dir.join("xdp-trafficgen").is_file() && dir.join("xdp-bench").is_file();
    let installed = PathBuf::from(INSTALL_DIR);
    if has_both(&installed) {
        return Ok(installed);
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .find(|dir| has_both(dir))
        .ok_or_else(|| {
            format!(
                "xdp-trafficgen and xdp-bench are neither in {INSTALL_DIR} nor on PATH; \
                 scripts/build-xdp-tools.sh builds xdp-tools from Debian's source package \
                 (bookworm's own 1.3.1 does not load on this kernel)"
            )
        })
}

/// Refuses what the programs cannot do, before a lab is built.
pub fn check(flows: u32, frame_size: u16, seconds: f64, cpu: usize) -> Result<(), String> {
    if !(1..=MAX_FLOWS).contains(&flows) {
        return Err(format!(
            "xdp-trafficgen varies at most {MAX_FLOWS} destination ports, not {flows} flows"
        ));
    }
    if frame_size < SMALLEST_FRAME {
        return Err(format!(
            "xdp-trafficgen sends IPv6 frames of at least {SMALLEST_FRAME} bytes, not {frame_size}"
        ));
    }
    if seconds < MIN_SECONDS {
        return Err(format!(
            "with xdp-tools a trial needs at least {MIN_SECONDS} s (the programs print once a \
             second and the first and last seconds are partial), not {seconds}"
        ));
    }
    if cpu != 0 {
        return Err(format!(
            "xdp-trafficgen's sending thread pins itself to CPU 0; the generator core is {cpu}"
        ));
    }
    Ok(())
}

/// Sends and counts one trial. `on_sending` is called with the sender's process id once it
/// sends (the caller places and reads back its threads); an error from it ends the trial.
/// Both programs are always stopped (SIGINT, which detaches their XDP programs), and killed
/// if they do not exit.
pub fn run(
    dir: &Path,
    run: &Run,
    stop: &AtomicBool,
    on_sending: &mut dyn FnMut(u32) -> Result<(), String>,
) -> Result<Outcome, String> {
    check(run.flows, run.frame_size, run.seconds, run.cpu)?;
    let mut commands = Vec::new();
    let cpu = run.cpu.to_string();
    let drop_args = [
        "drop".to_string(),
        "--interval".into(),
        "1".into(),
        run.receiver.into(),
    ];
    let mut sink = Tool::spawn(
        dir,
        "xdp-bench",
        run.namespace,
        &cpu,
        &drop_args,
        &mut commands,
    )?;
    sink.wait_for(DROPPING)?;
    let mut send_args = vec![
        "udp".to_string(),
        "--dst-mac".into(),
        mac(run.dst_mac),
        "--src-mac".into(),
        mac(run.src_mac),
        "--dst-addr".into(),
        run.dst_ip.to_string(),
        "--src-addr".into(),
        run.src_ip.to_string(),
        "--hop-limit".into(),
        "64".into(),
        "--pkt-size".into(),
        run.frame_size.to_string(),
        "--interval".into(),
        "1".into(),
    ];
    if run.flows > 1 {
        send_args.extend(["--dyn-ports".into(), run.flows.to_string()]);
    }
    send_args.push(run.sender.into());
    let mut sender = Tool::spawn(
        dir,
        "xdp-trafficgen",
        run.namespace,
        &cpu,
        &send_args,
        &mut commands,
    )?;
    sender.wait_for(SENDING)?;
    on_sending(sender.pid())?;
    let deadline = Instant::now() + Duration::from_secs_f64(run.seconds);
    while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
        sender.alive()?;
        std::thread::sleep(Duration::from_millis(20));
    }
    let sent_output = sender.stop(&mut commands)?;
    std::thread::sleep(run.linger);
    let drop_output = sink.stop(&mut commands)?;
    let sent = rates(&sent_output, "xmit/s");
    let received = rates(&drop_output, "rx/s");
    let output = format!("xdp-trafficgen:\n{sent_output}\nxdp-bench drop:\n{drop_output}");
    let (sent_pps, intervals) = steady(&sent);
    if intervals == 0 {
        return Err(format!(
            "xdp-trafficgen printed no whole second of sending; its output:\n{sent_output}"
        ));
    }
    let (received_pps, _) = steady(&received);
    let seconds = intervals as f64;
    Ok(Outcome {
        result: BlastResult {
            sent: (sent_pps * seconds).round() as u64,
            received: (received_pps * seconds).round() as u64,
            seconds,
            ..BlastResult::default()
        },
        commands,
        output,
    })
}

/// `aa:bb:cc:dd:ee:ff`.
fn mac(bytes: [u8; 6]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Every figure in `output` followed by the word `unit` (`rx/s`, `xmit/s`), in order: one per
/// line the programs print each interval (`Summary  5023145 rx/s  0 err/s`).
pub fn rates(output: &str, unit: &str) -> Vec<f64> {
    output
        .lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let at = words.iter().position(|w| *w == unit)?;
            words.get(at.checked_sub(1)?)?.replace(',', "").parse().ok()
        })
        .collect()
}

/// The mean of the intervals strictly between the first and the last with traffic (above 1 %
/// of the highest: those two are partial, the program started or stopped within them), and
/// how many there were; `(0.0, 0)` when there were fewer than three with traffic.
pub fn steady(rates: &[f64]) -> (f64, usize) {
    let highest = rates.iter().copied().fold(0.0, f64::max);
    let busy = |r: &f64| *r > highest * 0.01 && *r > 0.0;
    let (Some(first), Some(last)) = (rates.iter().position(busy), rates.iter().rposition(busy))
    else {
        return (0.0, 0);
    };
    if last < first + 2 {
        return (0.0, 0);
    }
    let whole = &rates[first + 1..last];
    (whole.iter().sum::<f64>() / whole.len() as f64, whole.len())
}

/// One of the programs, running in the lab's namespace on one CPU, its output in a file.
struct Tool {
    name: &'static str,
    child: Option<Child>,
    output: PathBuf,
}

impl Tool {
    fn spawn(
        dir: &Path,
        name: &'static str,
        namespace: &str,
        cpu: &str,
        args: &[String],
        commands: &mut Vec<String>,
    ) -> Result<Tool, String> {
        let program = dir.join(name);
        let output = std::env::temp_dir().join(format!(
            "wirespeed-{namespace}-{name}-{}.out",
            std::process::id()
        ));
        let file = std::fs::File::create(&output)
            .map_err(|error| format!("creating {}: {error}", output.display()))?;
        let errors = file
            .try_clone()
            .map_err(|error| format!("duplicating {}: {error}", output.display()))?;
        let mut line = vec![
            "ip".to_string(),
            "netns".into(),
            "exec".into(),
            namespace.into(),
            "taskset".into(),
            "-c".into(),
            cpu.into(),
            program.to_string_lossy().into_owned(),
        ];
        line.extend_from_slice(args);
        commands.push(format!("{} > {} 2>&1 &", line.join(" "), output.display()));
        // `ip netns exec` and `taskset` exec into the program: the child's pid is the program's.
        let child = Command::new(&line[0])
            .args(&line[1..])
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(errors)
            .spawn()
            .map_err(|error| format!("starting {name}: {error}"))?;
        Ok(Tool {
            name,
            child: Some(child),
            output,
        })
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    fn printed(&self) -> String {
        std::fs::read_to_string(&self.output).unwrap_or_default()
    }

    /// An error with its output if the program has exited.
    fn alive(&mut self) -> Result<(), String> {
        match self.child.as_mut().map(Child::try_wait) {
            Some(Ok(None)) => Ok(()),
            _ => {
                self.child = None;
                Err(format!(
                    "{} exited; its output:\n{}",
                    self.name,
                    self.printed()
                ))
            }
        }
    }

    /// Waits until the program prints `line`.
    fn wait_for(&mut self, line: &str) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        while !self.printed().contains(line) {
            self.alive()?;
            if Instant::now() >= deadline {
                return Err(format!(
                    "{} did not print \"{line}\" within {} s; its output:\n{}",
                    self.name,
                    START_TIMEOUT.as_secs(),
                    self.printed()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// SIGINT (the programs detach and print their last figures), SIGKILL after
    /// [`STOP_TIMEOUT`]; returns what the program printed.
    fn stop(&mut self, commands: &mut Vec<String>) -> Result<String, String> {
        let Some(mut child) = self.child.take() else {
            return Ok(self.printed());
        };
        let pid = child.id().to_string();
        commands.push(format!("kill -INT {pid}  # {}", self.name));
        let _ = Command::new("kill").args(["-INT", &pid]).status();
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return Ok(self.printed());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        Err(format!(
            "{} did not exit within {} s of SIGINT; killed (its XDP program may stay attached \
             until the lab goes); its output:\n{}",
            self.name,
            STOP_TIMEOUT.as_secs(),
            self.printed()
        ))
    }
}

impl Drop for Tool {
    fn drop(&mut self) {
        if let Err(error) = self.stop(&mut Vec::new()) {
            eprintln!("{error}");
        }
        let _ = std::fs::remove_file(&self.output);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What xdp-tools 1.6.3 printed on this lab's veths (trimmed).
    const DROP: &str = " libxdp: No bpffs found at /sys/fs/bpf
Dropping packets on h38y (ifindex 2; driver veth)
Summary                         3 rx/s                  0 err/s
Summary                   3145450 rx/s                  0 err/s
Summary                   6290945 rx/s                  0 err/s
Summary                   6000001 rx/s                  0 err/s
Summary                    542780 rx/s                  0 err/s

Summary                         0 rx/s                  0 err/s
  Duration            : 7.9s
  Packets received    : 19922949
";
    const SEND: &str = "Transmitting on h38x (ifindex 2)
lo->h38x                        0 err/s           8697856 xmit/s
lo->h38x                        0 err/s           9195799 xmit/s

lo->h38x                        0 err/s           2770133 xmit/s
";

    #[test]
    fn the_rates_are_read_from_every_interval_line() {
        assert_eq!(
            rates(DROP, "rx/s"),
            vec![3.0, 3_145_450.0, 6_290_945.0, 6_000_001.0, 542_780.0, 0.0]
        );
        assert_eq!(
            rates(SEND, "xmit/s"),
            vec![8_697_856.0, 9_195_799.0, 2_770_133.0]
        );
        assert_eq!(rates("Summary 1,234 rx/s", "rx/s"), vec![1234.0]);
        assert!(rates("rx/s at the start", "rx/s").is_empty());
    }

    #[test]
    fn only_the_whole_intervals_between_the_first_and_last_with_traffic_count() {
        // 3 rx/s is lab chatter before the sender started (under 1 % of the highest).
        assert_eq!(
            steady(&rates(DROP, "rx/s")),
            ((6_290_945.0 + 6_000_001.0) / 2.0, 2)
        );
        assert_eq!(steady(&rates(SEND, "xmit/s")), (9_195_799.0, 1));
        // A stall inside the run counts as the zero it was.
        assert_eq!(steady(&[5.0, 10.0, 0.0, 10.0, 5.0]).0, 20.0 / 3.0);
        assert_eq!(steady(&[5.0, 10.0]), (0.0, 0));
        assert_eq!(steady(&[0.0, 0.0, 0.0]), (0.0, 0));
        assert_eq!(steady(&[]), (0.0, 0));
    }

    #[test]
    fn what_the_programs_cannot_do_is_refused_up_front() {
        assert!(check(1, 66, 5.0, 0).is_ok());
        assert!(check(65535, 1518, 3.0, 0).is_ok());
        assert!(check(0, 66, 5.0, 0).unwrap_err().contains("65535"));
        assert!(check(65536, 66, 5.0, 0).is_err());
        assert!(check(1, 64, 5.0, 0).unwrap_err().contains("at least 66"));
        assert!(check(1, 66, 2.0, 0).unwrap_err().contains("3 s"));
        assert!(check(1, 66, 5.0, 1).unwrap_err().contains("CPU 0"));
    }

    #[test]
    fn macs_are_written_as_the_programs_read_them() {
        assert_eq!(mac([0x02, 0, 0xab, 1, 2, 0xff]), "02:00:ab:01:02:ff");
    }
}
