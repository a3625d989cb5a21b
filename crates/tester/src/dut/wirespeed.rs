//! wirespeed itself as a DuT: the real `wirespeed switch` binary, run in the DuT namespace as an
//! xconnect between `d0` and `d1` over AF_XDP or AF_PACKET, its one worker pinned to the DuT core.
//!
//! The binary is the caller's (the CLI passes its own executable), so the benchmark measures
//! exactly the program that is shipped. Its output goes to a file rather than a pipe, so a chatty
//! switch can never block on a full pipe; at teardown it is stopped with SIGINT (the clean path
//! that prints the final counters and the pool check), killed if it does not stop within 10 s,
//! and its output is kept for the report.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{Dut, DutError, Steps, Wiring};

/// Which kernel interface the switch's ports use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WirespeedBackend {
    AfXdp,
    AfPacket,
}

impl WirespeedBackend {
    /// The backend's name in a configuration file.
    pub fn config_name(self) -> &'static str {
        match self {
            WirespeedBackend::AfXdp => "afxdp",
            WirespeedBackend::AfPacket => "afpacket",
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
}

impl WirespeedDut {
    /// A driver that runs `binary` with its worker on `core`.
    pub fn new(backend: WirespeedBackend, binary: PathBuf, core: usize) -> Self {
        let name = format!("wirespeed-{}", backend.config_name());
        Self {
            backend,
            binary,
            core,
            steps: Steps::new(&name),
            child: None,
            output_path: None,
            output: String::new(),
        }
    }

    /// Whether the worker runs at SCHED_FIFO priority 1. Chosen by backend, from the lab's
    /// measurements (docs/benchmarks.md): with the ingress NAPI thread on the worker's core, an
    /// AF_XDP worker at normal priority loses the core to the thread that fills its ring and
    /// collapses under overload (0.007 Mpps), while at FIFO it drains the ring first (0.33–0.39
    /// Mpps); an AF_PACKET worker needs that kernel work done for it and forwards less at FIFO
    /// (0.52 -> 0.35 Mpps).
    pub fn realtime(&self) -> bool {
        matches!(self.backend, WirespeedBackend::AfXdp)
    }

    /// The configuration file the driver writes for `wiring`.
    pub fn config(&self, wiring: &Wiring) -> String {
        let backend = self.backend.config_name();
        format!(
            "[switch]\napp = \"xconnect\"\nworkers = 1\ncores = [{core}]\nrealtime = {realtime}\n\n\
             [[port]]\nname = \"p0\"\nbackend = \"{backend}\"\ninterface = \"{d0}\"\n\n\
             [[port]]\nname = \"p1\"\nbackend = \"{backend}\"\ninterface = \"{d1}\"\n\n\
             [xconnect]\npairs = [[\"p0\", \"p1\"]]\n",
            core = self.core,
            realtime = self.realtime(),
            d0 = wiring.ingress.dut_if,
            d1 = wiring.egress.dut_if,
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
        format!("wirespeed-{}", self.backend.config_name())
    }

    fn setup(&mut self, wiring: &Wiring) -> Result<(), DutError> {
        let dir = std::env::temp_dir();
        let stem = format!(
            "wirespeed-{}-{}-{}",
            wiring.prefix(),
            self.backend.config_name(),
            std::process::id()
        );
        let config_path = dir.join(format!("{stem}.toml"));
        let output_path = dir.join(format!("{stem}.out"));
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
        Ok(())
    }

    fn teardown(&mut self) -> Result<(), DutError> {
        let stopped = self.stop();
        let undone = self.steps.undo_all();
        stopped.and(undone)
    }

    fn commands(&self) -> &[String] {
        self.steps.log()
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
