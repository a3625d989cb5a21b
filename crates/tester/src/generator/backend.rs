//! Generators that can be compared on the same veth: each one sends the same 64-byte frames out
//! of the tester's `t0` from one core until it is stopped, and says how many it sent; what
//! arrived is counted by the kernel on the other side (see [`crate::bench::generators`]), the
//! same way for all of them.
//!
//! A backend is a name in [`BACKEND_NAMES`] and a type behind [`Backend`]; [`backend`] maps
//! one to the other. Adding a generator (an in-kernel one, say) is one more name there and one
//! more implementation.

use crate::bench::placement::Placed;
use crate::dut::Wiring;

use super::in_process::{InProcess, Sender, Socket};
use super::testpmd_txonly::TestpmdTxonly;

/// The names `backend` accepts.
pub const BACKEND_NAMES: [&str; 4] = ["testpmd-txonly", "afxdp", "afpacket", "xdp-live"];

/// What every backend sends, and from where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    /// Frame size including FCS (the buffer handed to the kernel is 4 bytes shorter).
    pub frame_size: u16,
    /// Destination MAC of the frames (the source is `t0`'s own).
    pub dst_mac: [u8; 6],
    /// The core every sending thread runs on.
    pub core: usize,
    /// Nice value of the sending threads, `None` to leave it alone.
    pub nice: Option<i32>,
}

/// One generator.
pub trait Backend: Send {
    /// The name on the command line and in reports.
    fn name(&self) -> String;

    /// What exactly runs (program, version, options), for reports.
    fn description(&self) -> String;

    /// Starts sending `spec`'s frames out of `wiring.ingress.tester_if` (one flow, UDP/IPv4)
    /// in the background; returns once frames flow, with the sending threads as read back.
    /// After an error, [`Backend::stop`] still cleans up.
    fn start(&mut self, wiring: &Wiring, spec: &Spec) -> Result<Vec<Placed>, String>;

    /// Stops sending and returns the frames the generator counts as sent since the start.
    /// Running it without a start, or twice, is harmless.
    fn stop(&mut self) -> Result<u64, String>;

    /// Commands the last start and stop ran, for reports.
    fn commands(&self) -> Vec<String> {
        Vec::new()
    }
}

/// The backend called `name` (one of [`BACKEND_NAMES`]).
pub fn backend(name: &str) -> Result<Box<dyn Backend>, String> {
    match name {
        "testpmd-txonly" => Ok(Box::new(TestpmdTxonly::new())),
        "afxdp" => Ok(Box::new(InProcess::new(Sender::Socket(Socket::AfXdp)))),
        "afpacket" => Ok(Box::new(InProcess::new(Sender::Socket(Socket::AfPacket)))),
        "xdp-live" => Ok(Box::new(InProcess::new(Sender::XdpLive))),
        other => Err(format!(
            "unknown generator {other:?}; choose from {}",
            BACKEND_NAMES.join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_name_makes_its_backend_and_others_are_refused() {
        for name in BACKEND_NAMES {
            assert_eq!(backend(name).unwrap().name(), name);
        }
        let error = backend("pktgen").err().unwrap();
        assert!(
            error.contains("testpmd-txonly, afxdp, afpacket, xdp-live"),
            "{error}"
        );
    }
}
