//! DPDK testpmd's `txonly` mode as a [`Backend`]: the generator the issue compares wirespeed's
//! with ("DPDK testpmd txonly on the same veth"), one `net_af_xdp` port on `t0`, every thread on
//! the generator core (see [`crate::testpmd`] for the invocation).
//!
//! testpmd's defaults stay (burst of 32, its own IPv4/UDP header 198.18.0.1 -> 198.18.0.2, port
//! 9 -> 9, one flow) except what the comparison fixes for every generator: the length
//! (`--txpkts`: the buffer without FCS, 60 bytes for 64-byte frames, as wirespeed sends) and the
//! destination MAC (`--eth-peer`). Its count is the `TX-packets` total testpmd prints when it
//! stops: what its AF_XDP TX ring took.

use wirespeed_packet::wire::EthernetAddress;

use super::backend::{Backend, Spec};
use crate::bench::placement::{Placed, place_process};
use crate::dut::Wiring;
use crate::testpmd::{ForwardTotals, Launch, Testpmd, WORKER_PREFIX};

/// The testpmd txonly backend.
#[derive(Debug)]
pub struct TestpmdTxonly {
    testpmd: Testpmd,
    /// Placement commands of the last start.
    placement_commands: Vec<String>,
}

impl TestpmdTxonly {
    pub const NAME: &'static str = "testpmd-txonly";

    pub fn new() -> Self {
        Self {
            testpmd: Testpmd::new(Self::NAME),
            placement_commands: Vec::new(),
        }
    }
}

impl Default for TestpmdTxonly {
    fn default() -> Self {
        Self::new()
    }
}

impl Backend for TestpmdTxonly {
    fn name(&self) -> String {
        Self::NAME.into()
    }

    fn description(&self) -> String {
        format!(
            "{} dpdk-testpmd --forward-mode=txonly on a net_af_xdp port (AF_XDP copy mode), \
             burst 32, one flow; main and forwarding lcore on the generator core",
            self.testpmd.version()
        )
    }

    fn start(&mut self, wiring: &Wiring, spec: &Spec) -> Result<Vec<Placed>, String> {
        self.stop()?;
        let interfaces = [wiring.ingress.tester_if.clone()];
        let application = [
            "--forward-mode=txonly".to_string(),
            format!("--txpkts={}", spec.frame_size.saturating_sub(4)),
            format!("--eth-peer=0,{}", EthernetAddress(spec.dst_mac)),
        ];
        self.testpmd
            .start(&Launch {
                lab: wiring.prefix(),
                namespace: &wiring.tester_ns,
                interfaces: &interfaces,
                core: spec.core,
                application: &application,
            })
            .map_err(|error| error.to_string())?;
        let pid = self
            .testpmd
            .pid()
            .ok_or_else(|| "testpmd is not running".to_string())?;
        self.placement_commands.clear();
        place_process(
            pid,
            WORKER_PREFIX,
            spec.core,
            spec.nice,
            &mut self.placement_commands,
        )
        .map_err(|error| error.to_string())
    }

    fn stop(&mut self) -> Result<u64, String> {
        let running = self.testpmd.pid().is_some();
        self.testpmd.stop().map_err(|error| error.to_string())?;
        if !running {
            return Ok(0);
        }
        ForwardTotals::parse(self.testpmd.output())
            .map(|totals| totals.tx_packets)
            .ok_or_else(|| {
                format!(
                    "testpmd printed no final statistics; its output ends:\n{}",
                    self.testpmd.output()
                )
            })
    }

    fn commands(&self) -> Vec<String> {
        let mut all = self.testpmd.commands().to_vec();
        all.extend(self.placement_commands.iter().cloned());
        all
    }
}
