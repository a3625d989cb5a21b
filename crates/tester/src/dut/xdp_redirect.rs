//! An in-kernel XDP redirect as a DuT: a native XDP program on `d0` sends every frame out of
//! `d1` without it ever reaching a socket or the stack, the reference for what the kernel's
//! fastest path does with these veths on one core.
//!
//! The program is attached through a BPF link, which lives as long as its handle
//! ([`XdpRedirect`]). The driver keeps the handle in a thread of its own that entered the DuT
//! namespace to attach it and waits there until teardown, then drops it (detaching the program)
//! and ends; if the process dies instead, the kernel closes the link and the program goes with
//! it. The redirect into veth `d1` lands on `t1`'s receive ring, which exists only while `t1`
//! runs NAPI: the tester's AF_XDP program on `t1` (and the benchmark's placement, GRO on)
//! provide it.

use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use wirespeed_io::afxdp::{XdpMode, XdpRedirect};

use super::{Dut, DutError, Steps, Wiring};

/// The XDP redirect driver.
#[derive(Debug)]
pub struct XdpRedirectDut {
    steps: Steps,
    stop: Option<mpsc::Sender<()>>,
    holder: Option<JoinHandle<()>>,
}

impl XdpRedirectDut {
    pub const NAME: &'static str = "xdp-redirect";

    pub fn new() -> Self {
        Self {
            steps: Steps::new(Self::NAME),
            stop: None,
            holder: None,
        }
    }

    fn error(step: &str, detail: String) -> DutError {
        DutError::Start {
            dut: Self::NAME.into(),
            step: step.into(),
            detail,
        }
    }
}

impl Default for XdpRedirectDut {
    fn default() -> Self {
        Self::new()
    }
}

impl Dut for XdpRedirectDut {
    fn name(&self) -> String {
        Self::NAME.into()
    }

    fn setup(&mut self, wiring: &Wiring) -> Result<(), DutError> {
        let step = format!(
            "attach the XDP redirect {} -> {}",
            wiring.ingress.dut_if, wiring.egress.dut_if
        );
        if self.holder.is_some() {
            return Err(Self::error(&step, "already attached".into()));
        }
        let (ns, from, to) = (
            wiring.dut_ns.clone(),
            wiring.ingress.dut_if.clone(),
            wiring.egress.dut_if.clone(),
        );
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let (done_tx, done_rx) = mpsc::channel::<Result<String, String>>();
        let holder = std::thread::Builder::new()
            .name("xdp-redirect".into())
            .spawn(move || {
                let attached = wirespeed_lab::enter(&ns)
                    .map_err(|error| format!("entering {ns}: {error}"))
                    .and_then(|inside| {
                        let redirect = XdpRedirect::attach(&from, &to, XdpMode::Native)
                            .map_err(|error| error.to_string());
                        drop(inside);
                        redirect
                    });
                match attached {
                    Ok(redirect) => {
                        let _ = done_tx.send(Ok(redirect.mode().to_string()));
                        // Holds the link until teardown drops the sender.
                        let _ = stop_rx.recv();
                        drop(redirect);
                    }
                    Err(error) => {
                        let _ = done_tx.send(Err(error));
                    }
                }
            })
            .map_err(|error| Self::error(&step, format!("starting its thread: {error}")))?;
        self.stop = Some(stop_tx);
        self.holder = Some(holder);
        let mode = done_rx
            .recv_timeout(Duration::from_secs(10))
            .map_err(|_| Self::error(&step, "the attaching thread did not answer".into()))?
            .map_err(|error| Self::error(&step, error))?;
        self.steps.record(format!(
            "# in {}: XdpRedirect::attach(\"{}\", \"{}\", Native) -> {mode} XDP on {} \
             (bpf_redirect to {})",
            wiring.dut_ns,
            wiring.ingress.dut_if,
            wiring.egress.dut_if,
            wiring.ingress.dut_if,
            wiring.egress.dut_if
        ));
        Ok(())
    }

    fn teardown(&mut self) -> Result<(), DutError> {
        // Dropping the sender wakes the holder, which drops the handle and detaches.
        self.stop = None;
        if let Some(holder) = self.holder.take() {
            self.steps
                .record("# detach: drop the XdpRedirect handle".into());
            holder.join().map_err(|_| DutError::Teardown {
                dut: Self::NAME.into(),
                detail: "the thread holding the XDP program panicked".into(),
            })?;
        }
        self.steps.undo_all()
    }

    fn commands(&self) -> &[String] {
        self.steps.log()
    }
}

impl Drop for XdpRedirectDut {
    fn drop(&mut self) {
        if let Err(error) = self.teardown() {
            eprintln!("{error}");
        }
    }
}
