//! DPDK testpmd as a DuT: Debian's `dpdk-testpmd` in `--forward-mode=io` between two
//! `net_af_xdp` ports on `d0` and `d1`, every thread on the DuT core (see [`crate::testpmd`] for
//! the invocation and why each option is there).
//!
//! This is the "DPDK over AF_XDP" peer of the kernel-bypass issue, run as a user would: the
//! poll-mode driver's defaults (copy mode on veth, libxdp's default program, busy-poll budget
//! 64), the forwarding lcore busy-polling at normal priority. `io` mode moves frames from port 0
//! to port 1 and back untouched, so a probe arrives on `t1` byte for byte.
//!
//! Setup waits until testpmd says it forwards, so a testpmd that cannot start (a package
//! missing, an interface that is not there, EAL's refusal) fails the setup with its own words
//! instead of a probe timeout. Teardown (also on drop, also after a failed setup) stops it and
//! leaves no process, no XDP program, no promiscuous flag and no `/var/run/dpdk` directory.

use super::{Dut, DutError, Wiring};
use crate::testpmd::{Launch, Testpmd, WORKER_PREFIX};

/// The testpmd DuT driver.
#[derive(Debug)]
pub struct TestpmdDut {
    core: usize,
    testpmd: Testpmd,
}

impl TestpmdDut {
    pub const NAME: &'static str = "dpdk-testpmd";

    /// A driver whose testpmd runs on `core`.
    pub fn new(core: usize) -> Self {
        Self {
            core,
            testpmd: Testpmd::new(Self::NAME),
        }
    }
}

impl Dut for TestpmdDut {
    fn name(&self) -> String {
        Self::NAME.into()
    }

    fn description(&self) -> String {
        format!(
            "{} dpdk-testpmd --forward-mode=io between net_af_xdp ports on d0 and d1 \
             (AF_XDP copy mode, libxdp's default XDP program), main and forwarding lcore \
             and every EAL thread on CPU {}, forwarding lcore busy-polling at normal priority",
            self.testpmd.version(),
            self.core
        )
    }

    fn setup(&mut self, wiring: &Wiring) -> Result<(), DutError> {
        // testpmd's mbufs hold 2048 bytes and DPDK's AF_XDP driver takes one buffer per frame:
        // a larger frame would be dropped, not forwarded, and counted against the DuT.
        if wiring.mtu > wirespeed_lab::DEFAULT_MTU {
            return Err(DutError::Start {
                dut: self.name(),
                step: "setup".into(),
                detail: format!(
                    "the lab's MTU is {} but testpmd here forwards frames of up to 1518 bytes \
                     (2048-byte mbufs, one per frame); measure it at 1518 bytes or less",
                    wiring.mtu
                ),
            });
        }
        let interfaces = [wiring.ingress.dut_if.clone(), wiring.egress.dut_if.clone()];
        let application = ["--forward-mode=io".to_string()];
        self.testpmd.start(&Launch {
            lab: wiring.prefix(),
            namespace: &wiring.dut_ns,
            interfaces: &interfaces,
            core: self.core,
            application: &application,
        })
    }

    fn teardown(&mut self) -> Result<(), DutError> {
        self.testpmd.stop()
    }

    fn commands(&self) -> &[String] {
        self.testpmd.commands()
    }

    fn check(&mut self) -> Result<(), DutError> {
        self.testpmd.check()
    }

    fn pid(&self) -> Option<u32> {
        self.testpmd.pid()
    }

    fn worker_prefix(&self) -> &str {
        WORKER_PREFIX
    }

    fn output(&self) -> Option<&str> {
        Some(self.testpmd.output())
    }
}
