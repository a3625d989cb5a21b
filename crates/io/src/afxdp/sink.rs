//! [`XdpSink`]: the cheapest receiver there is. An XDP program counts every frame arriving on
//! an interface (packets and bytes, in a per-CPU array) and drops it, before any socket, skb or
//! copy; user space only reads the counts when it wants them.
//!
//! A rate measurement needs a receiver that is never the bottleneck. An AF_XDP or AF_PACKET
//! receiver copies each frame into user-space memory and needs a thread polling it; the sink
//! costs one map lookup and two additions per frame in the interface's NAPI poll, so what it
//! counts is what the sender and the path in between delivered.
//!
//! Bytes are the frame's length in the XDP buffer: without the 4-byte FCS that RFC 2544 frame
//! sizes include (a "64-byte frame" counts 60).
//!
//! The program (`bpf/sink.c`) is attached by a link like the AF_XDP program, so it detaches
//! when the sink is dropped or the process dies, and it never replaces a program someone else
//! attached. On a veth, attaching any XDP program also turns the interface's NAPI on, which a
//! sender redirecting frames into its peer needs (see [`XdpRedirect`](super::XdpRedirect)).
//!
//! The counting itself (`bpf/counting.h`) is shared with the probe counter
//! ([`XdpProbeCounter`](super::XdpProbeCounter)), which sorts frames into classes first and
//! counts each class in its own entry of the same kind of map; both are attached here
//! ([`XdpSink::attach_loaded`]).

use std::os::fd::OwnedFd;
use std::sync::Arc;

use aya::EbpfLoader;

use super::attachment::XdpAttachment;
use super::bpf::{lookup_map, possible_cpus};
use super::config::{AfXdpError, XdpMode};
use super::object::{Loaded, load, object};
use super::port::{program_error, query_interface};
use super::program::AttachedProgram;

/// The compiled `bpf/sink.c`.
static OBJECT: &[u8] = object!("sink");

/// Bytes of one CPU's counters in the map: packets, then bytes (u64 each).
const COUNTERS_LEN: usize = 16;

/// What the sink has counted since it was attached, over all CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SinkCounts {
    pub packets: u64,
    /// Frame bytes without FCS.
    pub bytes: u64,
}

/// An XDP program on one interface that counts and drops every frame. Dropping it detaches the
/// program.
#[derive(Debug)]
pub struct XdpSink {
    program: Holder,
    counters: OwnedFd,
    cpus: usize,
    interface: String,
}

/// What keeps a counting program attached.
#[derive(Debug)]
enum Holder {
    /// Its own link.
    Alone(AttachedProgram),
    /// An attachment whose XSKMAP the program redirects some frames into, shared with the
    /// AF_XDP sockets that receive them (the probe counter's samples).
    WithSockets(Arc<XdpAttachment>),
}

impl XdpSink {
    /// Attaches the counting sink to `interface` (of the calling thread's network namespace)
    /// in `mode`.
    pub fn attach(interface: &str, mode: XdpMode) -> Result<XdpSink, AfXdpError> {
        let loaded = load(&mut EbpfLoader::new(), OBJECT, "sink")
            .map_err(|error| program_error(interface, error))?;
        Self::attach_loaded(interface, mode, loaded, false)
    }

    /// Attaches `loaded`, a program that counts with `bpf/counting.h` into its per-CPU map
    /// `counters`. With `sockets`, the program also redirects some frames (the probe counter's
    /// samples) into its XSKMAP `xsks`, which has a slot per queue of the interface, and
    /// [`XdpSink::sockets`] is the attachment to open those sockets on.
    pub(super) fn attach_loaded(
        interface: &str,
        mode: XdpMode,
        loaded: Loaded,
        sockets: bool,
    ) -> Result<XdpSink, AfXdpError> {
        let cpus = possible_cpus().map_err(|source| AfXdpError::Sysfs {
            port: interface.to_string(),
            path: "/sys/devices/system/cpu/possible".into(),
            source,
        })?;
        let error = |error| program_error(interface, error);
        let counters = loaded.map("counters").map_err(error)?;
        let program = if sockets {
            let xsks = loaded.map("xsks").map_err(error)?;
            let attachment =
                XdpAttachment::attach_owned(interface, loaded.into_program(), xsks, 0, mode)?;
            Holder::WithSockets(Arc::new(attachment))
        } else {
            let target = query_interface(interface)?;
            let program = AttachedProgram::link(loaded.into_program(), target.ifindex, mode)
                .map_err(error)?;
            Holder::Alone(program)
        };
        Ok(XdpSink {
            program,
            counters,
            cpus,
            interface: interface.to_string(),
        })
    }

    /// The attachment whose sockets receive the frames the program redirects, for a program
    /// attached with [`XdpSink::attach_with_sockets`].
    pub(super) fn sockets(&self) -> Option<&Arc<XdpAttachment>> {
        match &self.program {
            Holder::Alone(_) => None,
            Holder::WithSockets(attachment) => Some(attachment),
        }
    }

    /// The counts so far, summed over CPUs (one system call).
    pub fn counts(&self) -> std::io::Result<SinkCounts> {
        self.class_counts(0)
    }

    /// The counts of entry `class` of the counter map so far, summed over CPUs (one system
    /// call).
    pub(super) fn class_counts(&self, class: u32) -> std::io::Result<SinkCounts> {
        let mut values = vec![0u8; self.cpus * COUNTERS_LEN];
        lookup_map(&self.counters, class, &mut values)?;
        let word = |bytes: &[u8]| u64::from_ne_bytes(bytes.try_into().unwrap_or([0; 8]));
        Ok(values
            .chunks_exact(COUNTERS_LEN)
            .fold(SinkCounts::default(), |sum, cpu| SinkCounts {
                packets: sum.packets + word(&cpu[..8]),
                bytes: sum.bytes + word(&cpu[8..]),
            }))
    }

    /// The interface it counts on.
    pub fn interface(&self) -> &str {
        &self.interface
    }

    /// How the program is attached: "native" or "generic".
    pub fn mode(&self) -> &str {
        match &self.program {
            Holder::Alone(program) => program.mode(),
            Holder::WithSockets(attachment) => attachment.mode(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_passes_the_verifier_when_root() {
        if !crate::afxdp::bpf::may_load_for_test() {
            return;
        }
        let loaded = load(&mut EbpfLoader::new(), OBJECT, "sink").expect("the sink loads");
        loaded.map("counters").expect("its counters");
    }
}
