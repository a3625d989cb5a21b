//! Devices under test: one driver per DuT that sets it up, verifies it and tears it down the same
//! way every time (DESIGN.md §6).
//!
//! Every driver works on the same [`Wiring`]: frames enter the DuT namespace on the ingress pair's
//! DuT interface (`d0`) and must leave on the egress pair's (`d1`), towards the tester's `t1`.
//! A driver changes the DuT namespace only through [`Steps`], which records every command for the
//! report and pushes the command that undoes it; [`Dut::teardown`] (and the driver's `Drop`, also
//! after a setup that failed halfway) pops and runs that stack, so a benchmark leaves nothing
//! behind however it ends.
//!
//! The drivers:
//! * [`LinuxBridge`]: a kernel bridge with `d0` and `d1` as its ports;
//! * [`LinuxRouter`]: kernel IPv4 and IPv6 forwarding with a route and a static neighbour
//!   towards `t1` for each;
//! * [`LinuxRouterNft`]: the same router behind an nftables forward chain of N rules;
//! * [`LinuxRouterTbf`]: the same router shaped to a known rate, a reference DuT for checking
//!   the tester's accuracy and repeatability;
//! * [`OvsDut`]: Open vSwitch's user-space datapath with its own daemons, one flow `d0 -> d1`
//!   (or `NORMAL`), over AF_XDP ports or AF_PACKET;
//! * [`XdpRedirectDut`]: an in-kernel XDP program on `d0` that redirects every frame to `d1`;
//! * [`TestpmdDut`]: DPDK's testpmd forwarding `d0 <-> d1` over its AF_XDP poll-mode driver;
//! * [`WirespeedDut`]: the real `wirespeed switch` binary as an xconnect, bridge, router or
//!   openflow switch, over AF_XDP (with or without the XDP fast path) or AF_PACKET.
//!
//! * [`ExternalDut`]: a device the tester does not configure, wired to two interfaces of the
//!   tester's own namespace ([`Wiring::external`]).
//!
//! **Remote DuTs.** A driver whose whole setup is [`Steps`] (the Linux bridge and routers) can
//! run it on another host over ssh ([`Dut::set_host`]): the same commands, on the host's own
//! namespace and the interfaces the wiring names, so the tester's ports must be wired to those.
//! In the lab the "remote host" is an ssh server in the DuT namespace, which makes the wiring
//! the same as local. Drivers that start a program or load one from this process (wirespeed,
//! Open vSwitch, testpmd, the XDP redirect) refuse.
//!
//! [`probe::verify`] proves a DuT forwards before it is measured: probe frames sent on `t0` must
//! arrive on `t1` exactly as [`Dut::forwarded`] predicts.

mod external;
mod linux_bridge;
mod linux_router;
mod linux_router_nft;
mod linux_router_tbf;
mod ovs;
pub mod probe;
pub mod routes;
pub mod scraper;
mod steps;
mod testpmd;
mod wirespeed;
mod xdp_redirect;

pub use external::{ExternalConfig, ExternalDut, ExternalError};
pub use linux_bridge::LinuxBridge;
pub use linux_router::LinuxRouter;
pub use linux_router_nft::LinuxRouterNft;
pub use linux_router_tbf::LinuxRouterTbf;
pub use ovs::{OvsAction, OvsDut};
pub use steps::{Host, Steps};
pub use testpmd::TestpmdDut;
pub use wirespeed::{FlowSource, METRICS, OPENFLOW_LISTEN, SwitchCounters};
pub use wirespeed::{WirespeedApp, WirespeedOptions};
pub use wirespeed::{WirespeedBackend, WirespeedDut};
pub use xdp_redirect::XdpRedirectDut;

use std::net::{IpAddr, Ipv6Addr};

use wirespeed_lab::{CommandError, PortPair, Testbed};

/// Which IP version a benchmark's frames carry. The routers are set up for both (each routes
/// the generator's prefix of either version via `t1`); the frames say which one is measured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IpVersion {
    #[default]
    V4,
    V6,
}

/// The IPv6 prefix the generator's frames go to and the routers route via `t1` (in RFC 5180's
/// benchmarking range, beside the lab's own `2001:2:0:N::/64` links).
pub const GENERATOR_PREFIX6: &str = "2001:2:0:ff::/64";

impl IpVersion {
    /// 4 or 6.
    pub fn number(self) -> u8 {
        match self {
            IpVersion::V4 => 4,
            IpVersion::V6 => 6,
        }
    }

    /// The generator's source and destination addresses in `wiring`: `t0`'s address, and one
    /// in the generator's prefix ([`linux_router::GENERATOR_PREFIX`] or [`GENERATOR_PREFIX6`]).
    pub fn addresses(self, wiring: &Wiring) -> (IpAddr, IpAddr) {
        match self {
            IpVersion::V4 => (
                wiring.ingress.tester_ipv4.into(),
                IpAddr::from([198, 19, 0, 1]),
            ),
            IpVersion::V6 => (
                wiring.ingress.tester_ipv6.into(),
                Ipv6Addr::new(0x2001, 2, 0, 0xff, 0, 0, 0, 1).into(),
            ),
        }
    }
}

/// Where a DuT sits: the two namespaces and the two links frames cross.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wiring {
    pub tester_ns: String,
    pub dut_ns: String,
    /// Frames go tester -> DuT on this pair (`t0` -> `d0`).
    pub ingress: PortPair,
    /// Frames go DuT -> tester on this pair (`d1` -> `t1`).
    pub egress: PortPair,
    /// MTU of the lab's veths: a DuT that sizes its buffers sizes them for it.
    pub mtu: u32,
    /// Where the DuT's interfaces are, for placing their NAPI threads as the tester places its
    /// own: in `dut_ns` here ([`Host::Local`]), on a host reached over ssh, or `None` for an
    /// external DuT, which the tester does not touch (its owner places them).
    pub dut_host: Option<Host>,
}

impl Wiring {
    /// Pairs 0 and 1 of `lab`; `None` when the lab has fewer than two pairs.
    pub fn of(lab: &Testbed) -> Option<Wiring> {
        Some(Wiring {
            tester_ns: lab.tester_ns.clone(),
            dut_ns: lab.dut_ns.clone(),
            ingress: lab.pairs.first()?.clone(),
            egress: lab.pairs.get(1)?.clone(),
            mtu: lab.mtu,
            dut_host: Some(Host::Local),
        })
    }

    /// The lab's name prefix (the DuT namespace is `{prefix}-dut`), used to name what drivers
    /// create so that `wirespeed lab down` removes it with the namespace.
    pub fn prefix(&self) -> &str {
        self.dut_ns.strip_suffix("-dut").unwrap_or(&self.dut_ns)
    }
}

/// RFC 2544 §26.6's reset of a kernel DuT, [`INGRESS_FLAP`]: its ingress interface `d0` taken
/// down and up again through `steps` (so also on a remote host). Down, the interface drops
/// what arrives and its queues and NAPI context are torn down; up, they are rebuilt.
fn flap_ingress(steps: &mut Steps, wiring: &Wiring) -> Result<(), DutError> {
    let (ns, d0) = (wiring.dut_ns.as_str(), wiring.ingress.dut_if.as_str());
    let up = ["ip", "-n", ns, "link", "set", d0, "up"];
    // Should the second step fail, teardown brings the link up.
    steps.run(
        &format!("reset: take {d0} down"),
        &["ip", "-n", ns, "link", "set", d0, "down"],
        Some(&up),
    )?;
    steps.run(&format!("reset: bring {d0} up"), &up, None)?;
    Ok(())
}

/// How [`flap_ingress`] resets.
pub const INGRESS_FLAP: &str = "link down and up of the DuT's ingress interface";

/// Where the DuT behind `wiring` runs, set up on `host`, as reports say it.
pub fn location(wiring: &Wiring, host: &Host) -> String {
    let (d0, d1) = (&wiring.ingress.dut_if, &wiring.egress.dut_if);
    match host {
        Host::Ssh { .. } => format!(
            "{}, set up over ssh; its interfaces {d0} (in) and {d1} (out)",
            host.label().trim_start_matches("ssh ")
        ),
        Host::Local if wiring.dut_host.is_none() => format!(
            "external, not set up by the tester; the tester sends on {} and receives on {}",
            wiring.ingress.tester_if, wiring.egress.tester_if
        ),
        Host::Local => format!("this machine, namespace {}", wiring.dut_ns),
    }
}

/// Why a DuT could not be set up, verified or torn down; always names the DuT.
#[derive(Debug, thiserror::Error)]
pub enum DutError {
    #[error("DuT {dut}: {step} failed: {source}")]
    Step {
        dut: String,
        step: String,
        source: CommandError,
    },
    #[error("DuT {dut}: {step} failed: {detail}")]
    Start {
        dut: String,
        step: String,
        detail: String,
    },
    #[error("DuT {dut} did not forward: {detail}")]
    Verify { dut: String, detail: String },
    #[error("DuT {dut}: teardown left something behind: {detail}")]
    Teardown { dut: String, detail: String },
}

/// A device under test.
pub trait Dut: Send {
    /// The name used in reports and on the command line (e.g. `linux-bridge`).
    fn name(&self) -> String;

    /// What exactly runs, for reports: software, version where known, and the choices the
    /// driver made (port types, rule counts). The name alone by default.
    fn description(&self) -> String {
        self.name()
    }

    /// Configures the DuT namespace to forward from `wiring.ingress` to `wiring.egress`. On
    /// failure what was already done stays on the undo stack, which `teardown` (or dropping the
    /// driver) runs.
    fn setup(&mut self, wiring: &Wiring) -> Result<(), DutError>;

    /// Undoes everything `setup` did, last first. Running it twice is harmless.
    fn teardown(&mut self) -> Result<(), DutError>;

    /// Every command setup and teardown ran, in order (for reports).
    fn commands(&self) -> &[String];

    /// The destination MAC the tester's frames must carry for this DuT to forward them.
    fn destination_mac(&self, wiring: &Wiring) -> [u8; 6] {
        // A switch forwards frames addressed to the host behind its other port.
        wiring.egress.tester_mac
    }

    /// What `frame`, sent on `t0`, looks like when it arrives on `t1`. Switches leave it alone.
    fn forwarded(&self, _wiring: &Wiring, frame: &[u8]) -> Vec<u8> {
        frame.to_vec()
    }

    /// An error if the DuT stopped working since setup (a process that exited); checked while
    /// verifying so that a dead DuT is reported at once rather than after a timeout.
    fn check(&mut self) -> Result<(), DutError> {
        Ok(())
    }

    /// The process forwarding frames, when the DuT is a user-space program (its worker threads'
    /// placement is checked).
    fn pid(&self) -> Option<u32> {
        None
    }

    /// Whether the DuT's forwarding runs in `d0`'s ingress NAPI thread: a DuT in the kernel
    /// (bridge, router, XDP redirect), or a program whose fast path is an XDP program there
    /// (the worker then only sees the exceptions). That thread is then the DuT's worker, and
    /// the RFC 2544 placement runs it real-time ([`crate::bench::placement::make_kernel_dut_realtime`]).
    fn forwards_in_ingress_napi(&self) -> bool {
        self.pid().is_none()
    }

    /// The name prefix of the threads of [`Dut::pid`] that forward frames, whose placement the
    /// benchmark reads back (and renices).
    fn worker_prefix(&self) -> &str {
        "worker"
    }

    /// What the DuT printed, when it is a program (for the report).
    fn output(&self) -> Option<&str> {
        None
    }

    /// Makes setup, teardown and version queries run on `host` (before setup). An error for a
    /// driver that does more than run commands (starts a program, loads one from this
    /// process), which can only run here.
    fn set_host(&mut self, host: Host) -> Result<(), DutError> {
        if host.is_remote() {
            return Err(DutError::Start {
                dut: self.name(),
                step: format!("run on {}", host.label()),
                detail: "this DuT starts or loads a program from this machine, so it runs \
                         only here; the DuTs set up by commands alone (linux-bridge, \
                         linux-router and its variants) run on a remote host"
                    .into(),
            });
        }
        Ok(())
    }

    /// Where setup and teardown run.
    fn host(&self) -> Host {
        Host::Local
    }

    /// How [`Dut::reset`] resets this DuT, for the report (RFC 2544 §26.6 asks for the kind of
    /// reset); `None` for a DuT the tester cannot reset.
    fn reset_method(&self) -> Option<&'static str> {
        None
    }

    /// Resets the DuT while traffic flows (RFC 2544 §26.6) and returns once it was told to come
    /// back (a restarted program runs again, a link is up again); when it forwards again is for
    /// the trial to see. An error for a DuT without a [`Dut::reset_method`].
    fn reset(&mut self, _wiring: &Wiring) -> Result<(), DutError> {
        Err(DutError::Start {
            dut: self.name(),
            step: "reset".into(),
            detail: "the tester cannot reset this DuT".into(),
        })
    }

    /// The DuT's software and version, asked where it runs (`uname -r` for the kernel's
    /// DuTs), for the report; `None` where the caller knows better (a program it started).
    fn version(&self) -> Option<String> {
        self.host()
            .run(&["uname", "-r"], None)
            .ok()
            .map(|release| format!("Linux {}", release.trim()))
    }
}
