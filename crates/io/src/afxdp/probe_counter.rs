//! [`XdpProbeCounter`]: a receiver for throughput trials that costs next to nothing. An XDP
//! program counts the frames that carry one trial's probes (packets and bytes, per-CPU) and
//! drops them; user space reads the counts before and after the trial, the way MoonGen reads a
//! NIC's counters for throughput.
//!
//! A tester that receives through an AF_XDP socket copies every frame into its UMEM and parses
//! it; on a small machine that receive takes a large share of the core the generator needs, so
//! fast DuTs all stop at the tester's limit. Counting in the interface's NAPI poll instead costs
//! a bounds check, two loads, a compare and the counting of [`XdpSink`] per frame.
//!
//! Which frames count is the [`ProbeFilter`]'s business: the probe's signature at a fixed
//! offset (known when the trial's template is built) and its TX timestamp, a big-endian u64 at
//! another fixed offset, not below the floor user space sets before each trial
//! ([`XdpProbeCounter::set_floor`]). Each frame falls in one class, counted in its own map entry:
//! * probes of this trial (signature, timestamp >= floor): counted and dropped;
//! * stale probes (signature, timestamp below the floor: late frames of an earlier trial):
//!   counted and dropped;
//! * foreign frames (too short for the probe, or another signature: the lab kernels' neighbour
//!   discovery): counted and passed to the stack, as if no program were there.
//!
//! What it cannot see: sequence numbers (no loss per flow, reordering or duplicates) and
//! latency. A trial that needs those receives with a socket.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use super::bpf::{
    ALU_END_TO_BE, ALU64_ADD_K, ALU64_MOV_K, ALU64_MOV_X, BPF_MAP_TYPE_ARRAY, Insn, JMP_JEQ_K,
    JMP_JGT_X, JMP_JLT_X, JMP32_JNE_K, LDX_MEM_DW, LDX_MEM_W, ST_MEM_W, XDP_DROP, XDP_MD_DATA,
    XDP_MD_DATA_END, XDP_PASS, create_map, insn, map_lookup, update_map,
};
use super::config::{AfXdpError, XdpMode};
use super::port::program_error;
use super::sink::{SinkCounts, XdpSink, count_and_return};

/// Where a probe sits in the frames to count, from the start of the Ethernet header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeFilter {
    /// The 4 bytes every probe starts with.
    pub signature: [u8; 4],
    pub signature_at: u16,
    /// Offset of the probe's TX timestamp, a big-endian u64.
    pub timestamp_at: u16,
}

/// Largest offset a filter may name: every probe lies inside a 1518-byte frame.
pub const MAX_PROBE_END: u16 = 1518;

impl ProbeFilter {
    /// Bytes a frame needs for the signature and the timestamp, or `None` when that is beyond
    /// [`MAX_PROBE_END`].
    fn end(&self) -> Option<u16> {
        let end = (self.signature_at as u32 + 4).max(self.timestamp_at as u32 + 8);
        u16::try_from(end).ok().filter(|&end| end <= MAX_PROBE_END)
    }
}

/// What the counter has counted since it was attached, per class, over all CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProbeCounts {
    /// Probes of this trial (timestamp at or above the floor).
    pub probes: SinkCounts,
    /// Probes stamped before the floor.
    pub stale: SinkCounts,
    /// Everything else (passed to the stack).
    pub foreign: SinkCounts,
}

impl ProbeCounts {
    /// Frames of every class.
    pub fn frames(&self) -> u64 {
        self.probes.packets + self.stale.packets + self.foreign.packets
    }
}

/// The map entries of the classes.
const PROBES: i32 = 0;
const STALE: i32 = 1;
const FOREIGN: i32 = 2;
const CLASSES: u32 = 3;

/// An XDP program on one interface that counts one trial's probes (see the module
/// documentation). Dropping it detaches the program.
#[derive(Debug)]
pub struct XdpProbeCounter {
    sink: XdpSink,
    /// One u64: the lowest timestamp of a probe that counts.
    floor: OwnedFd,
}

impl XdpProbeCounter {
    /// Attaches the counter for probes placed as `filter` says to `interface` (of the calling
    /// thread's network namespace) in `mode`. The floor starts at 0: every probe counts.
    pub fn attach(
        interface: &str,
        mode: XdpMode,
        filter: &ProbeFilter,
    ) -> Result<XdpProbeCounter, AfXdpError> {
        let end = filter.end().ok_or_else(|| AfXdpError::ProbeFilter {
            port: interface.to_string(),
            detail: format!(
                "the probe at {} (timestamp at {}) ends past byte {MAX_PROBE_END}",
                filter.signature_at, filter.timestamp_at
            ),
        })?;
        let floor = create_map(BPF_MAP_TYPE_ARRAY, 8, 1)
            .map_err(|error| program_error(interface, error))?;
        let floor_fd = floor.as_raw_fd();
        let sink = XdpSink::attach_program(interface, mode, CLASSES, |counters| {
            filter_program(counters, floor_fd, filter, end)
        })?;
        Ok(XdpProbeCounter { sink, floor })
    }

    /// From now on, probes with a timestamp below `floor` count as stale (one system call; set
    /// it before the trial's first frame leaves).
    pub fn set_floor(&self, floor: u64) -> std::io::Result<()> {
        update_map(&self.floor, 0, &floor.to_ne_bytes())
    }

    /// The probes of this trial counted so far (one system call).
    pub fn probes(&self) -> std::io::Result<SinkCounts> {
        self.sink.class_counts(PROBES as u32)
    }

    /// All three classes so far (three system calls).
    pub fn counts(&self) -> std::io::Result<ProbeCounts> {
        Ok(ProbeCounts {
            probes: self.probes()?,
            stale: self.sink.class_counts(STALE as u32)?,
            foreign: self.sink.class_counts(FOREIGN as u32)?,
        })
    }

    /// The interface it counts on.
    pub fn interface(&self) -> &str {
        self.sink.interface()
    }

    /// How the program is attached: "native" or "generic".
    pub fn mode(&self) -> &str {
        self.sink.mode()
    }
}

/// Sorts the frame into a class (r8) and an action (r9), then counts it with
/// [`count_and_return`]. `end` is the filter's end (checked against `data_end` before any load
/// from the frame); `floor` the one-entry array holding the lowest timestamp that counts.
fn filter_program(counters: RawFd, floor: RawFd, filter: &ProbeFilter, end: u16) -> Vec<Insn> {
    let signature = i32::from_ne_bytes(filter.signature);
    let lookup = map_lookup(floor, -8);
    // Jumps to the counting tail, which starts right after these 24 instructions.
    let to_tail = |from: i16| 23 - from;
    let mut program = vec![
        // 0: r6 = ctx; until shown otherwise the frame is foreign and passes
        insn(ALU64_MOV_X, 6, 1, 0, 0),
        insn(ALU64_MOV_K, 8, 0, 0, FOREIGN),
        insn(ALU64_MOV_K, 9, 0, 0, XDP_PASS),
        // 3: r2 = data, r3 = data_end; too short for the probe -> foreign
        insn(LDX_MEM_W, 2, 6, XDP_MD_DATA, 0),
        insn(LDX_MEM_W, 3, 6, XDP_MD_DATA_END, 0),
        insn(ALU64_MOV_X, 4, 2, 0, 0),
        insn(ALU64_ADD_K, 4, 0, 0, end as i32),
        insn(JMP_JGT_X, 4, 3, to_tail(7), 0),
        // 8: another signature -> foreign
        insn(LDX_MEM_W, 5, 2, filter.signature_at as i16, 0),
        insn(JMP32_JNE_K, 5, 0, to_tail(9), signature),
        // 10: r7 = the probe's timestamp; a probe, stale until shown otherwise, and dropped
        insn(LDX_MEM_DW, 7, 2, filter.timestamp_at as i16, 0),
        insn(ALU_END_TO_BE, 7, 0, 0, 64),
        insn(ALU64_MOV_K, 8, 0, 0, STALE),
        insn(ALU64_MOV_K, 9, 0, 0, XDP_DROP),
        // 14: r0 = &floor (key 0 on the stack)
        insn(ST_MEM_W, 10, 0, -8, 0),
        lookup[0],
        lookup[1],
        lookup[2],
        lookup[3],
        lookup[4],
        // 20: timestamp < floor -> stale; else this trial's probe
        insn(JMP_JEQ_K, 0, 0, to_tail(20), 0),
        insn(LDX_MEM_DW, 1, 0, 0, 0),
        insn(JMP_JLT_X, 7, 1, to_tail(22), 0),
        insn(ALU64_MOV_K, 8, 0, 0, PROBES),
    ];
    program.extend(count_and_return(counters));
    program
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::afxdp::bpf::{BPF_MAP_TYPE_PERCPU_ARRAY, load};

    const FILTER: ProbeFilter = ProbeFilter {
        signature: *b"wsP2",
        signature_at: 42,
        timestamp_at: 52,
    };

    #[test]
    fn every_branch_lands_on_the_counting_tail() {
        let program = filter_program(3, 4, &FILTER, FILTER.end().unwrap());
        let tail = program.len() - count_and_return(3).len();
        assert_eq!(tail, 24);
        assert_eq!(program[tail..], count_and_return(3));
        for (at, jump) in program[..tail].iter().enumerate() {
            if [JMP_JGT_X, JMP32_JNE_K, JMP_JEQ_K, JMP_JLT_X].contains(&jump.code) {
                assert_eq!(at as i16 + 1 + jump.off, tail as i16, "jump at {at}");
            }
        }
    }

    #[test]
    fn a_filter_ends_after_its_last_field_and_inside_a_frame() {
        assert_eq!(FILTER.end(), Some(60));
        let signature_last = ProbeFilter {
            signature_at: 100,
            ..FILTER
        };
        assert_eq!(signature_last.end(), Some(104));
        let beyond = ProbeFilter {
            timestamp_at: 1511,
            ..FILTER
        };
        assert_eq!(beyond.end(), None);
        let far_beyond = ProbeFilter {
            signature_at: u16::MAX,
            ..FILTER
        };
        assert_eq!(far_beyond.end(), None);
    }

    #[test]
    fn the_program_passes_the_verifier_when_root() {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: loading BPF needs root");
            return;
        }
        let counters = create_map(BPF_MAP_TYPE_PERCPU_ARRAY, 16, CLASSES).expect("map");
        let floor = create_map(BPF_MAP_TYPE_ARRAY, 8, 1).expect("map");
        let program = filter_program(
            counters.as_raw_fd(),
            floor.as_raw_fd(),
            &FILTER,
            FILTER.end().unwrap(),
        );
        if let Err(error) = load(&program) {
            panic!("{error:?}");
        }
    }
}
