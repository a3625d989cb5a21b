//! The Linux bridge as a DuT: a kernel bridge in the DuT namespace with `d0` and `d1` as ports.
//!
//! STP is off and the forward delay zero, so the ports forward as soon as they are enslaved. The
//! tester's frames are addressed to `t1`'s MAC: the bridge learns it from `t1`'s own frames or
//! floods to its only other port, `d1`; either way every frame leaves there unchanged.

use super::{Dut, DutError, Host, INGRESS_FLAP, Steps, Wiring, flap_ingress};

/// The Linux bridge driver.
#[derive(Debug)]
pub struct LinuxBridge {
    steps: Steps,
}

impl LinuxBridge {
    pub const NAME: &'static str = "linux-bridge";

    pub fn new() -> Self {
        Self {
            steps: Steps::new(Self::NAME),
        }
    }

    /// The bridge's name in a lab with DuT namespace `wiring.dut_ns`.
    pub fn bridge_name(wiring: &Wiring) -> String {
        format!("{}-br", wiring.prefix())
    }
}

impl Default for LinuxBridge {
    fn default() -> Self {
        Self::new()
    }
}

impl Dut for LinuxBridge {
    fn name(&self) -> String {
        Self::NAME.into()
    }

    fn setup(&mut self, wiring: &Wiring) -> Result<(), DutError> {
        let ns = wiring.dut_ns.as_str();
        let bridge = Self::bridge_name(wiring);
        self.steps.run(
            "create the bridge",
            &[
                "ip",
                "-n",
                ns,
                "link",
                "add",
                "name",
                &bridge,
                "type",
                "bridge",
                "stp_state",
                "0",
                "forward_delay",
                "0",
            ],
            Some(&["ip", "-n", ns, "link", "delete", &bridge]),
        )?;
        for port in [&wiring.ingress.dut_if, &wiring.egress.dut_if] {
            self.steps.run(
                &format!("attach {port} to bridge {bridge}"),
                &["ip", "-n", ns, "link", "set", port, "master", &bridge],
                Some(&["ip", "-n", ns, "link", "set", port, "nomaster"]),
            )?;
        }
        self.steps.run(
            "bring the bridge up",
            &["ip", "-n", ns, "link", "set", &bridge, "up"],
            None,
        )?;
        Ok(())
    }

    fn teardown(&mut self) -> Result<(), DutError> {
        self.steps.undo_all()
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

    fn set_host(&mut self, host: Host) -> Result<(), DutError> {
        self.steps.set_host(host);
        Ok(())
    }

    fn host(&self) -> Host {
        self.steps.host().clone()
    }
}

impl Drop for LinuxBridge {
    fn drop(&mut self) {
        if let Err(error) = self.teardown() {
            eprintln!("{error}");
        }
    }
}
