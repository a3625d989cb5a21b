//! A reference DuT of known capacity: [`LinuxRouter`](super::LinuxRouter)'s forwarding with a
//! token-bucket shaper (`tc qdisc ... tbf`) on its egress `d1`.
//!
//! Why: on a shared two-core machine a real DuT's zero-loss rate moves by more than the tester's
//! own error between two searches minutes apart (the kernel router read 0.70 and 0.60 Mpps in
//! one invocation, 2026-11-24), so a pair of searches against it cannot tell the tester's
//! repeatability from the DuT's. Shaped well below what the router forwards, this DuT's
//! boundary is the shaper's rate, set in advance and indifferent to the machine's load: the
//! searches must find it (accuracy) and find it twice (repeatability). It plays the part a
//! hardware tester's loop-back through a device of known rate plays in validating a tester.
//!
//! tbf counts bytes of the frame without its FCS, so at `rate` bit/s the capacity for frames of
//! `F` bytes (with FCS) is `rate / ((F - 4) * 8)` frames/s ([`LinuxRouterTbf::capacity`]).
//! Above it frames queue, and are dropped once the queue (`limit`, 4 ms of the rate) and the
//! bucket (`burst`, 2 ms) are used up: a trial of `T` seconds at a rate `r` above the capacity
//! loses frames when `(r - capacity) * T` exceeds those 6 ms of the rate, i.e. 0.6 % above it
//! in a 1-second trial, within a search's resolution. Below it the 6 ms absorb the scheduling
//! stalls of the DuT core.

use super::linux_router::{Router, RouterAddition};
use super::{DutError, Steps, Wiring};

/// The token-bucket shaper on `d1`, what [`LinuxRouterTbf`] adds to the router.
#[derive(Debug)]
pub struct Shaper {
    mbit: u32,
}

/// The shaped-router driver.
pub type LinuxRouterTbf = Router<Shaper>;

impl LinuxRouterTbf {
    pub const NAME: &'static str = "linux-router-tbf";
    /// The rate when none is given: 300,000 frames/s of 64 bytes, under half of what the
    /// kernel router forwards on the lab's DuT core.
    pub const DEFAULT_MBIT: u32 = 144;
    /// The highest rate accepted: 10 Gbit/s, far above anything veth forwards here, so a
    /// higher one would shape nothing.
    pub const MAX_MBIT: u32 = 10_000;

    /// A router shaped to `mbit` Mbit/s (1..=[`Self::MAX_MBIT`]).
    pub fn new(mbit: u32) -> Self {
        Self::with(Shaper {
            mbit: mbit.clamp(1, Self::MAX_MBIT),
        })
    }

    /// `linux-router-tbf` for the default rate, `linux-router-tbf:MBIT` otherwise (the form the
    /// command line accepts).
    pub fn name_for(mbit: u32) -> String {
        if mbit == Self::DEFAULT_MBIT {
            Self::NAME.into()
        } else {
            format!("{}:{mbit}", Self::NAME)
        }
    }

    /// Frames per second of `frame_size` bytes (with FCS) the shaper lets through.
    pub fn capacity(&self, frame_size: u32) -> f64 {
        self.addition().capacity(frame_size)
    }
}

impl Shaper {
    /// Milliseconds of the rate the bucket holds (tbf's `burst`).
    const BURST_MS: u64 = 2;
    /// Milliseconds of the rate the queue holds (tbf's `limit`).
    const QUEUE_MS: u64 = 4;

    fn capacity(&self, frame_size: u32) -> f64 {
        f64::from(self.mbit) * 1e6 / (f64::from(frame_size.saturating_sub(4).max(1)) * 8.0)
    }

    /// `burst` and `limit` in bytes: [`Self::BURST_MS`] and [`Self::QUEUE_MS`] of the rate,
    /// each at least two full frames (tbf refuses a bucket smaller than one).
    fn bucket_and_queue(&self) -> (u64, u64) {
        let bytes_per_ms = u64::from(self.mbit) * 1_000 / 8;
        let at_least = 2 * 1522;
        (
            (bytes_per_ms * Self::BURST_MS).max(at_least),
            (bytes_per_ms * Self::QUEUE_MS).max(at_least),
        )
    }

    /// The arguments after `tc` that install the shaper on `dev`.
    fn qdisc_args(&self, dev: &str) -> Vec<String> {
        let (burst, limit) = self.bucket_and_queue();
        [
            "qdisc",
            "replace",
            "dev",
            dev,
            "root",
            "tbf",
            "rate",
            &format!("{}mbit", self.mbit),
            "burst",
            &burst.to_string(),
            "limit",
            &limit.to_string(),
        ]
        .map(String::from)
        .to_vec()
    }
}

impl RouterAddition for Shaper {
    fn name(&self) -> String {
        LinuxRouterTbf::name_for(self.mbit)
    }

    fn description(&self) -> String {
        let (burst, limit) = self.bucket_and_queue();
        format!(
            "reference DuT: Linux IPv4 router whose egress is shaped by tbf to {} Mbit/s \
             (burst {burst} B, queue {limit} B): capacity {:.0} frames/s at 64 B, {:.0} at \
             1518 B",
            self.mbit,
            self.capacity(64),
            self.capacity(1518)
        )
    }

    fn setup(&self, steps: &mut Steps, wiring: &Wiring) -> Result<(), DutError> {
        steps.require("tc", "iproute2")?;
        let ns = wiring.dut_ns.as_str();
        let egress = wiring.egress.dut_if.as_str();
        let mut install = vec!["ip", "netns", "exec", ns, "tc"];
        let args = self.qdisc_args(egress);
        install.extend(args.iter().map(String::as_str));
        steps.run(
            &format!("shape {egress} to {} Mbit/s", self.mbit),
            &install,
            Some(&[
                "ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", egress, "root",
            ]),
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dut::Dut;

    #[test]
    fn the_capacity_is_the_rate_over_the_frame_without_its_fcs() {
        let dut = LinuxRouterTbf::new(LinuxRouterTbf::DEFAULT_MBIT);
        assert_eq!(dut.name(), "linux-router-tbf");
        assert!((dut.capacity(64) - 300_000.0).abs() < 1e-6);
        assert!((dut.capacity(1518) - 144e6 / (1514.0 * 8.0)).abs() < 1e-6);
        assert_eq!(LinuxRouterTbf::new(100).name(), "linux-router-tbf:100");
        assert_eq!(LinuxRouterTbf::new(0).name(), "linux-router-tbf:1");
        assert!(LinuxRouterTbf::new(u32::MAX).capacity(64) < 30e6);
    }

    #[test]
    fn the_bucket_holds_2_ms_and_the_queue_4_ms_of_the_rate_and_never_less_than_two_frames() {
        let args = LinuxRouterTbf::new(144).addition().qdisc_args("x-d1");
        assert_eq!(
            args.join(" "),
            "qdisc replace dev x-d1 root tbf rate 144mbit burst 36000 limit 72000"
        );
        let slow = LinuxRouterTbf::new(1)
            .addition()
            .qdisc_args("x-d1")
            .join(" ");
        assert!(slow.ends_with("rate 1mbit burst 3044 limit 3044"), "{slow}");
    }
}
