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
//! The program (21 instructions, see `sink_program`) is attached by a link like the AF_XDP
//! program, so it detaches when the sink is dropped or the process dies, and it never replaces
//! a program someone else attached. On a veth, attaching any XDP program also turns the
//! interface's NAPI on, which a sender redirecting frames into its peer needs (see
//! [`XdpRedirect`](super::XdpRedirect)).
//!
//! The counting itself ([`count_and_return`]) is shared with the probe counter
//! ([`XdpProbeCounter`](super::XdpProbeCounter)), which sorts frames into classes first and
//! counts each class in its own entry of the same kind of map.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use super::attachment::XdpAttachment;
use super::bpf::{
    ALU64_ADD_K, ALU64_ADD_X, ALU64_MOV_K, ALU64_MOV_X, BPF_FUNC_XDP_GET_BUFF_LEN,
    BPF_MAP_TYPE_PERCPU_ARRAY, Insn, JMP_CALL, JMP_EXIT, JMP_JEQ_K, LDX_MEM_DW, STX_MEM_DW,
    STX_MEM_W, XDP_DROP, create_map, insn, lookup_map, map_lookup, possible_cpus,
};
use super::config::{AfXdpError, XdpMode};
use super::port::{program_error, query_interface};
use super::program::AttachedProgram;

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
        Self::attach_program(interface, mode, 1, sink_program)
    }

    /// Attaches the program `build` makes for a per-CPU counter map of `classes` entries (its
    /// descriptor is `build`'s argument); the program counts with [`count_and_return`].
    pub(super) fn attach_program(
        interface: &str,
        mode: XdpMode,
        classes: u32,
        build: impl FnOnce(RawFd) -> Vec<Insn>,
    ) -> Result<XdpSink, AfXdpError> {
        Self::attach_counting(interface, classes, |counters| {
            let target = query_interface(interface)?;
            AttachedProgram::attach(&build(counters), target.ifindex, mode)
                .map(Holder::Alone)
                .map_err(|error| program_error(interface, error))
        })
    }

    /// [`XdpSink::attach_program`] for a program that also redirects some frames to AF_XDP
    /// sockets: `build` gets the counter map's descriptor and an XSKMAP's, and
    /// [`XdpSink::sockets`] is the attachment to open those sockets on.
    pub(super) fn attach_with_sockets(
        interface: &str,
        mode: XdpMode,
        classes: u32,
        build: impl FnOnce(RawFd, RawFd) -> Vec<Insn>,
    ) -> Result<XdpSink, AfXdpError> {
        Self::attach_counting(interface, classes, |counters| {
            XdpAttachment::attach_built(interface, mode, |xskmap| build(counters, xskmap))
                .map(|attachment| Holder::WithSockets(Arc::new(attachment)))
        })
    }

    /// Makes the per-CPU counter map of `classes` entries and lets `attach` attach the program
    /// that counts into it (the map's descriptor is its argument).
    fn attach_counting(
        interface: &str,
        classes: u32,
        attach: impl FnOnce(RawFd) -> Result<Holder, AfXdpError>,
    ) -> Result<XdpSink, AfXdpError> {
        let cpus = possible_cpus().map_err(|source| AfXdpError::Sysfs {
            port: interface.to_string(),
            path: "/sys/devices/system/cpu/possible".into(),
            source,
        })?;
        let counters = create_map(BPF_MAP_TYPE_PERCPU_ARRAY, COUNTERS_LEN as u32, classes)
            .map_err(|error| program_error(interface, error))?;
        let program = attach(counters.as_raw_fd())?;
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

/// `counters[0].packets += 1; counters[0].bytes += bpf_xdp_get_buff_len(ctx); return XDP_DROP`,
/// with `counters` the per-CPU array `map`.
fn sink_program(map: RawFd) -> Vec<Insn> {
    // r6 = ctx, kept across the calls; count in entry 0, then drop
    let mut program = vec![
        insn(ALU64_MOV_X, 6, 1, 0, 0),
        insn(ALU64_MOV_K, 8, 0, 0, 0),
        insn(ALU64_MOV_K, 9, 0, 0, XDP_DROP),
    ];
    program.extend(count_and_return(map));
    program
}

/// The end of a counting program: `counters[r8].packets += 1; counters[r8].bytes +=
/// bpf_xdp_get_buff_len(r6); return r9`, with r6 the program's context, r8 the entry (class) and
/// r9 the XDP action, all set by the instructions before, and `counters` the per-CPU array
/// `map` (no atomics needed: a CPU's entry is only written by that CPU, with preemption off).
pub(super) fn count_and_return(map: RawFd) -> [Insn; 18] {
    let lookup = map_lookup(map, -4);
    [
        // key = r8 on the stack; r0 = bpf_map_lookup_elem(map, &key)
        insn(STX_MEM_W, 10, 8, -4, 0),
        lookup[0],
        lookup[1],
        lookup[2],
        lookup[3],
        lookup[4],
        // A lookup of an entry the map has cannot fail; the verifier wants the check all the
        // same.
        insn(JMP_JEQ_K, 0, 0, 9, 0),
        // r7 = this CPU's counters; r0 = the frame's length
        insn(ALU64_MOV_X, 7, 0, 0, 0),
        insn(ALU64_MOV_X, 1, 6, 0, 0),
        insn(JMP_CALL, 0, 0, 0, BPF_FUNC_XDP_GET_BUFF_LEN),
        // packets += 1
        insn(LDX_MEM_DW, 1, 7, 0, 0),
        insn(ALU64_ADD_K, 1, 0, 0, 1),
        insn(STX_MEM_DW, 7, 1, 0, 0),
        // bytes += length
        insn(LDX_MEM_DW, 1, 7, 8, 0),
        insn(ALU64_ADD_X, 1, 0, 0, 0),
        insn(STX_MEM_DW, 7, 1, 8, 0),
        // return r9 (the lookup's failure branch lands here)
        insn(ALU64_MOV_X, 0, 9, 0, 0),
        insn(JMP_EXIT, 0, 0, 0, 0),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::afxdp::bpf::load;

    #[test]
    fn the_lookup_failure_branch_lands_on_the_return() {
        let tail = count_and_return(3);
        let branch = 6;
        assert_eq!(tail[branch].code, JMP_JEQ_K);
        let target = branch + 1 + tail[branch].off as usize;
        assert_eq!(tail[target], insn(ALU64_MOV_X, 0, 9, 0, 0));
        assert_eq!(tail[target + 1].code, JMP_EXIT);
        assert_eq!(target + 2, tail.len());
    }

    #[test]
    fn the_program_passes_the_verifier_when_root() {
        if !crate::afxdp::bpf::may_load_for_test() {
            return;
        }
        let map = create_map(BPF_MAP_TYPE_PERCPU_ARRAY, COUNTERS_LEN as u32, 1).expect("map");
        if let Err(error) = load(&sink_program(map.as_raw_fd())) {
            panic!("{error:?}");
        }
    }
}
