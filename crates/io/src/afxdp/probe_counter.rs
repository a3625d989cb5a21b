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
//! latency. A trial that needs those for every frame receives with a socket.
//!
//! **Sampling** ([`XdpProbeCounter::attach_sampling`]), the way MoonGen counts every frame in
//! the NIC and timestamps only some: the program still counts every probe of the trial, and
//! redirects one in [`ProbeSampling::every`] of them (those whose sequence number is a multiple
//! of it, a power of two: a mask and a compare, the same choice every run) into an XSKMAP, so an
//! AF_XDP socket on the same interface and queue receives them
//! ([`XdpProbeCounter::sample_sockets`] is the attachment to open it on); the rest are dropped
//! as before. Stale and foreign frames are never sampled. A sample the socket has no room for
//! is still counted: the count stays exact, and only the latency has one sample less.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use super::attachment::XdpAttachment;
use super::bpf::{
    ALU_END_TO_BE, ALU64_ADD_K, ALU64_AND_K, ALU64_MOV_K, ALU64_MOV_X, Assembler,
    BPF_FUNC_REDIRECT_MAP, BPF_MAP_TYPE_ARRAY, Insn, JMP_CALL, JMP_JEQ_K, JMP_JGT_X, JMP_JLT_X,
    JMP32_JNE_K, LDX_MEM_DW, LDX_MEM_W, ST_MEM_W, STX_MEM_W, XDP_DROP, XDP_MD_DATA,
    XDP_MD_DATA_END, XDP_MD_RX_QUEUE_INDEX, XDP_PASS, create_map, insn, load_map, map_lookup,
    update_map,
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

/// Which of this trial's probes the counter also hands to an AF_XDP socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeSampling {
    /// Offset of the probe's sequence number (a big-endian u32) from the start of the
    /// Ethernet header.
    pub sequence_at: u16,
    /// One probe in this many, a power of two (1 samples all): those whose sequence number is
    /// a multiple of it.
    pub every: u32,
}

/// Largest offset a filter may name: every probe lies inside a 1518-byte frame.
pub const MAX_PROBE_END: u16 = 1518;

impl ProbeFilter {
    /// Bytes a frame needs for the signature, the timestamp and (when sampling) the sequence
    /// number, or `None` when that is beyond [`MAX_PROBE_END`].
    fn end(&self, sampling: Option<&ProbeSampling>) -> Option<u16> {
        let end = (self.signature_at as u32 + 4)
            .max(self.timestamp_at as u32 + 8)
            .max(sampling.map_or(0, |s| s.sequence_at as u32 + 4));
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
    sampling: Option<ProbeSampling>,
}

impl XdpProbeCounter {
    /// Attaches the counter for probes placed as `filter` says to `interface` (of the calling
    /// thread's network namespace) in `mode`. The floor starts at 0: every probe counts.
    pub fn attach(
        interface: &str,
        mode: XdpMode,
        filter: &ProbeFilter,
    ) -> Result<XdpProbeCounter, AfXdpError> {
        Self::attach_as(interface, mode, filter, None)
    }

    /// [`XdpProbeCounter::attach`], and the probes `sampling` chooses are also redirected to
    /// the AF_XDP socket of their queue, opened on [`XdpProbeCounter::sample_sockets`] (until
    /// one is, they are dropped like the others).
    pub fn attach_sampling(
        interface: &str,
        mode: XdpMode,
        filter: &ProbeFilter,
        sampling: &ProbeSampling,
    ) -> Result<XdpProbeCounter, AfXdpError> {
        if !sampling.every.is_power_of_two() || sampling.every > 1 << 31 {
            return Err(AfXdpError::ProbeFilter {
                port: interface.to_string(),
                detail: format!(
                    "sampling one probe in {} needs a power of two up to 2^31",
                    sampling.every
                ),
            });
        }
        Self::attach_as(interface, mode, filter, Some(*sampling))
    }

    fn attach_as(
        interface: &str,
        mode: XdpMode,
        filter: &ProbeFilter,
        sampling: Option<ProbeSampling>,
    ) -> Result<XdpProbeCounter, AfXdpError> {
        let end = filter
            .end(sampling.as_ref())
            .ok_or_else(|| AfXdpError::ProbeFilter {
                port: interface.to_string(),
                detail: format!(
                    "the probe at {} (timestamp at {}{}) ends past byte {MAX_PROBE_END}",
                    filter.signature_at,
                    filter.timestamp_at,
                    sampling.map_or(String::new(), |s| format!(
                        ", sequence number at {}",
                        s.sequence_at
                    )),
                ),
            })?;
        let floor = create_map(BPF_MAP_TYPE_ARRAY, 8, 1)
            .map_err(|error| program_error(interface, error))?;
        let floor_fd = floor.as_raw_fd();
        let sink = match sampling {
            None => XdpSink::attach_program(interface, mode, CLASSES, |counters| {
                filter_program(counters, floor_fd, filter, end, None)
            })?,
            Some(sampling) => {
                XdpSink::attach_with_sockets(interface, mode, CLASSES, |counters, sockets| {
                    let samples = Samples { sockets, sampling };
                    filter_program(counters, floor_fd, filter, end, Some(samples))
                })?
            }
        };
        Ok(XdpProbeCounter {
            sink,
            floor,
            sampling,
        })
    }

    /// From now on, probes with a timestamp below `floor` count as stale (one system call; set
    /// it before the trial's first frame leaves).
    pub fn set_floor(&self, floor: u64) -> std::io::Result<()> {
        update_map(&self.floor, 0, &floor.to_ne_bytes())
    }

    /// The probes of this trial counted so far, sampled ones included (one system call).
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

    /// Which probes it samples, when attached with [`XdpProbeCounter::attach_sampling`].
    pub fn sampling(&self) -> Option<ProbeSampling> {
        self.sampling
    }

    /// The attachment to open the AF_XDP socket that receives the samples on
    /// ([`AfXdpPort::open_shared`](super::AfXdpPort::open_shared), queue by queue), when
    /// attached with [`XdpProbeCounter::attach_sampling`].
    pub fn sample_sockets(&self) -> Option<&Arc<XdpAttachment>> {
        self.sink.sockets()
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

/// The sampling part of a counter's program: the XSKMAP of the sockets and which probes go
/// there.
#[derive(Clone, Copy)]
struct Samples {
    sockets: RawFd,
    sampling: ProbeSampling,
}

/// Stack slots of the program: the floor lookup's key, and a probe's sequence number masked
/// for sampling (kept across the lookup, a call, which clobbers r1-r5). The counting tail uses
/// -4 for its key.
const FLOOR_KEY_AT: i16 = -8;
const SAMPLE_BITS_AT: i16 = -12;

/// Sorts the frame into a class (r8) and an action (r9), then counts it with
/// [`count_and_return`]. `end` is the filter's end (checked against `data_end` before any load
/// from the frame); `floor` the one-entry array holding the lowest timestamp that counts. With
/// `samples`, a probe of this trial whose sequence number is a multiple of `every` is
/// redirected to its queue's socket (r9 = what `bpf_redirect_map` returns: `XDP_REDIRECT`, or
/// `XDP_DROP` when the queue has no socket).
fn filter_program(
    counters: RawFd,
    floor: RawFd,
    filter: &ProbeFilter,
    end: u16,
    samples: Option<Samples>,
) -> Vec<Insn> {
    let signature = i32::from_ne_bytes(filter.signature);
    let mut emit = Assembler::with_capacity(64);
    emit.push(&[
        // r6 = ctx; until shown otherwise the frame is foreign and passes
        insn(ALU64_MOV_X, 6, 1, 0, 0),
        insn(ALU64_MOV_K, 8, 0, 0, FOREIGN),
        insn(ALU64_MOV_K, 9, 0, 0, XDP_PASS),
        // r2 = data, r3 = data_end; too short for the probe -> foreign
        insn(LDX_MEM_W, 2, 6, XDP_MD_DATA, 0),
        insn(LDX_MEM_W, 3, 6, XDP_MD_DATA_END, 0),
        insn(ALU64_MOV_X, 4, 2, 0, 0),
        insn(ALU64_ADD_K, 4, 0, 0, end as i32),
    ]);
    emit.jump_to_tail(insn(JMP_JGT_X, 4, 3, 0, 0));
    // another signature -> foreign
    emit.push(&[insn(LDX_MEM_W, 5, 2, filter.signature_at as i16, 0)]);
    emit.jump_to_tail(insn(JMP32_JNE_K, 5, 0, 0, signature));
    emit.push(&[
        // r7 = the probe's timestamp; a probe, stale until shown otherwise, and dropped
        insn(LDX_MEM_DW, 7, 2, filter.timestamp_at as i16, 0),
        insn(ALU_END_TO_BE, 7, 0, 0, 64),
        insn(ALU64_MOV_K, 8, 0, 0, STALE),
        insn(ALU64_MOV_K, 9, 0, 0, XDP_DROP),
    ]);
    if let Some(Samples { sampling, .. }) = samples {
        // the sequence number's low bits, kept on the stack across the floor's lookup
        emit.push(&[
            insn(LDX_MEM_W, 5, 2, sampling.sequence_at as i16, 0),
            insn(ALU_END_TO_BE, 5, 0, 0, 32),
            insn(ALU64_AND_K, 5, 0, 0, (sampling.every - 1) as i32),
            insn(STX_MEM_W, 10, 5, SAMPLE_BITS_AT, 0),
        ]);
    }
    // r0 = &floor (key 0 on the stack)
    emit.push(&[insn(ST_MEM_W, 10, 0, FLOOR_KEY_AT, 0)]);
    emit.push(&map_lookup(floor, FLOOR_KEY_AT));
    // timestamp < floor -> stale; else this trial's probe
    emit.jump_to_tail(insn(JMP_JEQ_K, 0, 0, 0, 0));
    emit.push(&[insn(LDX_MEM_DW, 1, 0, 0, 0)]);
    emit.jump_to_tail(insn(JMP_JLT_X, 7, 1, 0, 0));
    emit.push(&[insn(ALU64_MOV_K, 8, 0, 0, PROBES)]);
    if let Some(Samples { sockets, .. }) = samples {
        // not a multiple of `every` -> counted and dropped
        emit.push(&[insn(LDX_MEM_W, 5, 10, SAMPLE_BITS_AT, 0)]);
        emit.jump_to_tail(insn(JMP32_JNE_K, 5, 0, 0, 0));
        // r9 = bpf_redirect_map(sockets, ctx->rx_queue_index, XDP_DROP)
        emit.push(&load_map(1, sockets));
        emit.push(&[
            insn(LDX_MEM_W, 2, 6, XDP_MD_RX_QUEUE_INDEX, 0),
            insn(ALU64_MOV_K, 3, 0, 0, XDP_DROP),
            insn(JMP_CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
            insn(ALU64_MOV_X, 9, 0, 0, 0),
        ]);
    }
    emit.finish_with(&count_and_return(counters))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::afxdp::bpf::{BPF_MAP_TYPE_PERCPU_ARRAY, BPF_MAP_TYPE_XSKMAP, JMP_EXIT, load};

    const FILTER: ProbeFilter = ProbeFilter {
        signature: *b"wsP2",
        signature_at: 42,
        timestamp_at: 52,
    };

    const SAMPLING: ProbeSampling = ProbeSampling {
        sequence_at: 48,
        every: 64,
    };

    fn samples() -> Samples {
        Samples {
            sockets: 5,
            sampling: SAMPLING,
        }
    }

    /// The instructions before the counting tail, after checking that every conditional jump
    /// of them lands on the tail and that the tail is [`count_and_return`].
    fn classification(program: &[Insn]) -> &[Insn] {
        let tail = program.len() - count_and_return(3).len();
        assert_eq!(program[tail..], count_and_return(3));
        for (at, jump) in program[..tail].iter().enumerate() {
            let class = jump.code & 0x07;
            let is_jump =
                (class == 0x05 || class == 0x06) && jump.code != JMP_CALL && jump.code != JMP_EXIT;
            if is_jump {
                assert_eq!(at as i16 + 1 + jump.off, tail as i16, "jump at {at}");
            }
        }
        &program[..tail]
    }

    #[test]
    fn every_branch_lands_on_the_counting_tail() {
        let end = FILTER.end(None).unwrap();
        let plain = filter_program(3, 4, &FILTER, end, None);
        assert_eq!(classification(&plain).len(), 24);
        let end = FILTER.end(Some(&SAMPLING)).unwrap();
        let sampled = filter_program(3, 4, &FILTER, end, Some(samples()));
        let sampled = classification(&sampled);
        // Four instructions keep the sequence's low bits, eight redirect the chosen probes.
        assert_eq!(sampled.len(), 24 + 4 + 8);
    }

    #[test]
    fn a_sampled_probe_is_chosen_by_a_mask_of_its_sequence_number_after_the_floor() {
        let end = FILTER.end(Some(&SAMPLING)).unwrap();
        let program = filter_program(3, 4, &FILTER, end, Some(samples()));
        let program = classification(&program);
        // The low bits of the big-endian sequence number, masked by every - 1 and kept on the
        // stack before the floor's lookup (a call) clobbers r5.
        let keep = program
            .iter()
            .position(|i| *i == insn(LDX_MEM_W, 5, 2, 48, 0))
            .expect("the sequence number's load");
        assert_eq!(program[keep + 1], insn(ALU_END_TO_BE, 5, 0, 0, 32));
        assert_eq!(program[keep + 2], insn(ALU64_AND_K, 5, 0, 0, 63));
        assert_eq!(program[keep + 3], insn(STX_MEM_W, 10, 5, SAMPLE_BITS_AT, 0));
        // Only once the frame is this trial's probe (class PROBES set) is the choice read,
        // and only a zero remainder reaches the redirect, whose result is the action.
        let probes = program
            .iter()
            .position(|i| *i == insn(ALU64_MOV_K, 8, 0, 0, PROBES))
            .expect("the probe class");
        assert!(keep < probes);
        assert_eq!(
            program[probes + 1],
            insn(LDX_MEM_W, 5, 10, SAMPLE_BITS_AT, 0)
        );
        assert_eq!(program[probes + 2].code, JMP32_JNE_K);
        assert_eq!(program[probes + 2].imm, 0);
        assert_eq!(program[probes + 3..probes + 5], load_map(1, 5));
        assert_eq!(
            program[probes + 5],
            insn(LDX_MEM_W, 2, 6, XDP_MD_RX_QUEUE_INDEX, 0)
        );
        assert_eq!(program[probes + 6], insn(ALU64_MOV_K, 3, 0, 0, XDP_DROP));
        assert_eq!(program[probes + 7].imm, BPF_FUNC_REDIRECT_MAP);
        assert_eq!(program[probes + 8], insn(ALU64_MOV_X, 9, 0, 0, 0));
        assert_eq!(program.len(), probes + 9);
        // Without sampling the probe class is the last step before the tail.
        let plain = filter_program(3, 4, &FILTER, FILTER.end(None).unwrap(), None);
        assert_eq!(
            classification(&plain).last(),
            Some(&insn(ALU64_MOV_K, 8, 0, 0, PROBES))
        );
    }

    #[test]
    fn a_filter_ends_after_its_last_field_and_inside_a_frame() {
        assert_eq!(FILTER.end(None), Some(60));
        let signature_last = ProbeFilter {
            signature_at: 100,
            ..FILTER
        };
        assert_eq!(signature_last.end(None), Some(104));
        let sequence_last = ProbeSampling {
            sequence_at: 200,
            ..SAMPLING
        };
        assert_eq!(FILTER.end(Some(&SAMPLING)), Some(60));
        assert_eq!(FILTER.end(Some(&sequence_last)), Some(204));
        let beyond = ProbeFilter {
            timestamp_at: 1511,
            ..FILTER
        };
        assert_eq!(beyond.end(None), None);
        let sequence_beyond = ProbeSampling {
            sequence_at: 1515,
            ..SAMPLING
        };
        assert_eq!(FILTER.end(Some(&sequence_beyond)), None);
        let far_beyond = ProbeFilter {
            signature_at: u16::MAX,
            ..FILTER
        };
        assert_eq!(far_beyond.end(None), None);
    }

    #[test]
    fn sampling_needs_a_power_of_two() {
        for every in [0, 3, 48, u32::MAX] {
            let sampling = ProbeSampling { every, ..SAMPLING };
            let refused =
                XdpProbeCounter::attach_sampling("nonexistent0", XdpMode::Auto, &FILTER, &sampling);
            assert!(
                matches!(refused, Err(AfXdpError::ProbeFilter { .. })),
                "{every}: {refused:?}"
            );
        }
    }

    #[test]
    fn both_programs_pass_the_verifier_when_root() {
        if !crate::afxdp::bpf::may_load_for_test() {
            return;
        }
        let counters = create_map(BPF_MAP_TYPE_PERCPU_ARRAY, 16, CLASSES).expect("map");
        let floor = create_map(BPF_MAP_TYPE_ARRAY, 8, 1).expect("map");
        let sockets = create_map(BPF_MAP_TYPE_XSKMAP, 4, 1).expect("XSKMAP");
        let plain = filter_program(
            counters.as_raw_fd(),
            floor.as_raw_fd(),
            &FILTER,
            FILTER.end(None).unwrap(),
            None,
        );
        let sampled = filter_program(
            counters.as_raw_fd(),
            floor.as_raw_fd(),
            &FILTER,
            FILTER.end(Some(&SAMPLING)).unwrap(),
            Some(Samples {
                sockets: sockets.as_raw_fd(),
                sampling: SAMPLING,
            }),
        );
        for program in [plain, sampled] {
            if let Err(error) = load(&program) {
                panic!("{error:?}");
            }
        }
    }
}
