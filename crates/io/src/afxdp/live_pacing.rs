//! Pacing inside the kernel for [`XdpLiveGenerator`](super::XdpLiveGenerator): the generator
//! program waits, frame by frame, until the frame is due, so that one system call sends a whole
//! trial at a set rate (constant, or with the gaps of a Poisson process) instead of in bursts.
//!
//! Why in the kernel: a live-frames call costs about 27 ms of fixed set-up and tear-down on
//! this kernel (see the live module), so pacing by call sends bursts of `rate × call length`
//! frames at the generator's full speed, and a DuT with a ring of 256 frames loses the burst at
//! any mean rate: no zero-loss search can run on that. Paced per frame, a trial is one call.
//!
//! How: before choosing the frame's flow, the program reads the next due time from a state map,
//! and while `bpf_ktime_get_ns()` is below it, spins in `bpf_loop` (a callback that returns 1
//! once the clock reached the due time; the verifier inlines the loop). A frame handed out more
//! than a tolerance after its due time counts as late, and the schedule starts again from it:
//! the frames after it keep their gaps instead of catching up in a burst at the generator's full
//! speed (measured: after stalls of 1–7 ms of the generator, the catch-up bursts overflowed an
//! XDP DuT's 256-frame ring, and the DuT was blamed). The time lost shows in the departed rate
//! and in the frames the deadline leaves unsent. The current run of late frames is kept, and so
//! is the largest lateness. A frame whose turn comes after the send's deadline is not sent (the program drops
//! it and counts it), so a rate beyond the generator ends on time rather than sending every
//! frame late. Due times are kept in nanoseconds × 2^16 from the start, so a gap need not be a
//! whole number of nanoseconds and the mean rate does not drift; a frame that is late does not
//! move the schedule (the next ones catch up, as the user-space trial sender does).
//!
//! Frames still leave in bulk: the kernel queues redirected frames (up to 16) and flushes them at
//! the end of each batch of `batch_size` runs, so a small batch keeps the traffic smooth. The
//! clock is `bpf_ktime_get_ns`, i.e. `CLOCK_MONOTONIC`.

use std::os::fd::{OwnedFd, RawFd};

use super::bpf::{
    ALU64_ADD_K, ALU64_ADD_X, ALU64_AND_K, ALU64_LSH_K, ALU64_MOV_K, ALU64_MOV_X, ALU64_RSH_K,
    ALU64_SUB_X, Assembler, BPF_FUNC_KTIME_GET_NS, BPF_FUNC_LOOP, BPF_PSEUDO_FUNC, Insn, JMP_CALL,
    JMP_EXIT, JMP_JA, JMP_JEQ_K, JMP_JGE_X, JMP_JLE_X, JMP_JNE_K, LD_IMM_DW, LDX_MEM_DW, ST_MEM_W,
    STX_MEM_DW, STX_MEM_W, XDP_DROP, insn, lookup_map, map_lookup, update_map,
};

/// Fraction bits of a gap and of the schedule (nanoseconds × 2^16).
pub const GAP_FRACTION_BITS: u32 = 16;
/// The most gaps a pacing cycles through (a power of two).
pub const MAX_PACING_GAPS: usize = 1 << 16;
/// The longest a frame waits in one `bpf_loop`: its limit of 2^23 iterations, each a helper call
/// that reads the clock (measured: gaps of 0.5 s kept).
const SPIN_ITERATIONS: i32 = 1 << 23;
/// The longest gap the program is given, well inside what one spin waits (a longer one would
/// send its frame early).
pub const MAX_PACING_GAP: std::time::Duration = std::time::Duration::from_millis(100);

/// When the generator sends each frame.
#[derive(Clone, Debug, PartialEq)]
pub struct LivePacing {
    /// Gaps between consecutive frames, nanoseconds × 2^[`GAP_FRACTION_BITS`], used in turn
    /// and cycled: one for a constant rate; a power-of-two count up to [`MAX_PACING_GAPS`].
    pub gaps: Vec<u64>,
    /// A frame handed out more than this many nanoseconds after its due time counts as late,
    /// and the schedule starts again from it (no catch-up burst longer than this).
    pub tolerance_ns: u64,
}

impl LivePacing {
    /// `rate_pps` frames per second, evenly spaced.
    pub fn constant(rate_pps: f64, tolerance_ns: u64) -> LivePacing {
        LivePacing {
            gaps: vec![fixed_point(1.0 / rate_pps)],
            tolerance_ns,
        }
    }

    /// The given gaps, seconds (cycled; their count must be a power of two).
    pub fn from_gaps(gaps: impl IntoIterator<Item = f64>, tolerance_ns: u64) -> LivePacing {
        LivePacing {
            gaps: gaps.into_iter().map(fixed_point).collect(),
            tolerance_ns,
        }
    }

    /// Whether the program can use these gaps: a power-of-two count up to the maximum, each
    /// at most [`MAX_PACING_GAP`].
    pub(super) fn is_valid(&self) -> bool {
        self.gaps.len().is_power_of_two()
            && self.gaps.len() <= MAX_PACING_GAPS
            && self
                .gaps
                .iter()
                .all(|&gap| gap <= fixed_point(MAX_PACING_GAP.as_secs_f64()))
    }
}

/// `seconds` as nanoseconds × 2^16 (saturating; NaN gives 0).
fn fixed_point(seconds: f64) -> u64 {
    (seconds * 1e9 * f64::from(1u32 << GAP_FRACTION_BITS)) as u64
}

/// What a paced send recorded, read back after the call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LivePaceCounts {
    /// When the first frame was due (`CLOCK_MONOTONIC`, ns; when it ran, for a send started
    /// at 0).
    pub start_ns: u64,
    /// When the last frame was handed out (its due time, or later if it was late).
    pub last_ns: u64,
    /// Frames handed out more than the tolerance after their due time.
    pub late: u64,
    /// The late frames at the end of the send with no frame on time after them: the send
    /// ended behind its schedule by that many frames.
    pub behind: u64,
    /// The largest lateness of any frame, ns.
    pub max_lateness_ns: u64,
    /// Frames not sent because their turn came after the deadline (the generator could not
    /// keep up with the rate): the call dropped them at once.
    pub unsent: u64,
}

// The state map's one value, in u64 words.
const START: i16 = 0;
const NEXT: i16 = 8;
const INDEX: i16 = 16;
const TOLERANCE: i16 = 24;
const LATE: i16 = 32;
const STREAK: i16 = 40;
const LAST: i16 = 48;
const MAX_LATENESS: i16 = 56;
const DEADLINE: i16 = 64;
const UNSENT: i16 = 72;
/// Size of the state map's value.
pub(super) const STATE_SIZE: u32 = 80;

/// The maps of a paced generator: its state and its gaps.
#[derive(Debug)]
pub(super) struct PacingMaps {
    pub(super) state: OwnedFd,
    pub(super) gaps: OwnedFd,
    pub(super) gap_count: usize,
    pub(super) tolerance_ns: u64,
}

impl PacingMaps {
    /// Resets the schedule: the first frame is due at `start_ns`, or when the program first
    /// runs for 0.
    pub(super) fn start(&self, start_ns: u64, deadline_ns: u64) -> std::io::Result<()> {
        let mut value = [0u8; STATE_SIZE as usize];
        value[START as usize..][..8].copy_from_slice(&start_ns.to_ne_bytes());
        value[TOLERANCE as usize..][..8].copy_from_slice(&self.tolerance_ns.to_ne_bytes());
        value[DEADLINE as usize..][..8].copy_from_slice(&deadline_ns.to_ne_bytes());
        update_map(&self.state, 0, &value)
    }

    pub(super) fn counts(&self) -> std::io::Result<LivePaceCounts> {
        let mut value = [0u8; STATE_SIZE as usize];
        lookup_map(&self.state, 0, &mut value)?;
        let word = |at: i16| {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(&value[at as usize..][..8]);
            u64::from_ne_bytes(bytes)
        };
        Ok(LivePaceCounts {
            start_ns: word(START),
            last_ns: word(LAST),
            late: word(LATE),
            behind: word(STREAK),
            max_lateness_ns: word(MAX_LATENESS),
            unsent: word(UNSENT),
        })
    }
}

/// Appends the pacing to the generator program (`r6` holds the context and stays; `r7` (free
/// until the flow is chosen), `r8`, `r9`
/// and the stack from -12 to -28 are used): wait until the frame is due, count it late or on
/// time, and move the schedule on by the next gap. A failed lookup (never: both maps are
/// arrays with the key in range) jumps to the tail and sends unpaced. Returns where the load of
/// the spin callback's address is, for [`append_spin_callback`].
pub(super) fn pace(asm: &mut Assembler, state: RawFd, gaps: RawFd, gap_count: usize) -> usize {
    let mask = gap_count as i32 - 1;
    asm.push(&[insn(ST_MEM_W, 10, 0, -12, 0)]);
    asm.push(&map_lookup(state, -12));
    asm.jump_to_tail(insn(JMP_JEQ_K, 0, 0, 0, 0));
    asm.push(&[
        insn(ALU64_MOV_X, 8, 0, 0, 0),
        // A start of 0: the schedule starts with this frame (the kernel's set-up of the call
        // before the first run takes milliseconds, which would make the first frames late).
        insn(LDX_MEM_DW, 7, 8, START, 0),
        insn(JMP_JNE_K, 7, 0, 2, 0),
        insn(JMP_CALL, 0, 0, 0, BPF_FUNC_KTIME_GET_NS),
        insn(STX_MEM_DW, 8, 0, START, 0),
        // r9 = due = start + (next >> 16)
        insn(LDX_MEM_DW, 9, 8, NEXT, 0),
        insn(ALU64_RSH_K, 9, 0, 0, GAP_FRACTION_BITS as i32),
        insn(LDX_MEM_DW, 1, 8, START, 0),
        insn(ALU64_ADD_X, 9, 1, 0, 0),
        insn(JMP_CALL, 0, 0, 0, BPF_FUNC_KTIME_GET_NS),
        // Past the deadline: not sent, counted, and the run ends at once (XDP_DROP).
        insn(ALU64_MOV_X, 1, 0, 0, 0),
        insn(LDX_MEM_DW, 2, 8, START, 0),
        insn(ALU64_SUB_X, 1, 2, 0, 0),
        insn(LDX_MEM_DW, 2, 8, DEADLINE, 0),
        insn(JMP_JLE_X, 1, 2, 5, 0),
        insn(LDX_MEM_DW, 1, 8, UNSENT, 0),
        insn(ALU64_ADD_K, 1, 0, 0, 1),
        insn(STX_MEM_DW, 8, 1, UNSENT, 0),
        insn(ALU64_MOV_K, 0, 0, 0, XDP_DROP),
        insn(JMP_EXIT, 0, 0, 0, 0),
    ]);
    let to_on_time = asm.here();
    asm.push(&[
        insn(JMP_JGE_X, 0, 9, 0, 0),
        // Early: spin until due; the frame leaves at its due time, on time.
        insn(STX_MEM_DW, 8, 9, LAST, 0),
        insn(STX_MEM_DW, 10, 9, -24, 0),
        insn(ALU64_MOV_K, 1, 0, 0, SPIN_ITERATIONS),
    ]);
    let callback_at = asm.here();
    asm.push(&[
        insn(LD_IMM_DW, 2, BPF_PSEUDO_FUNC, 0, 0),
        insn(0, 0, 0, 0, 0),
        insn(ALU64_MOV_X, 3, 10, 0, 0),
        insn(ALU64_ADD_K, 3, 0, 0, -24),
        insn(ALU64_MOV_K, 4, 0, 0, 0),
        insn(JMP_CALL, 0, 0, 0, BPF_FUNC_LOOP),
        insn(ALU64_MOV_K, 2, 0, 0, 0),
    ]);
    let early_to_streak = asm.here();
    asm.push(&[insn(JMP_JA, 0, 0, 0, 0)]);
    asm.jump_here(to_on_time);
    asm.push(&[
        // Due or late: r0 = lateness; the largest kept.
        insn(STX_MEM_DW, 8, 0, LAST, 0),
        insn(ALU64_SUB_X, 0, 9, 0, 0),
        insn(LDX_MEM_DW, 1, 8, MAX_LATENESS, 0),
        insn(JMP_JLE_X, 0, 1, 1, 0),
        insn(STX_MEM_DW, 8, 0, MAX_LATENESS, 0),
        insn(LDX_MEM_DW, 1, 8, TOLERANCE, 0),
        insn(ALU64_MOV_K, 2, 0, 0, 0),
    ]);
    let on_time_to_streak = asm.here();
    asm.push(&[
        insn(JMP_JLE_X, 0, 1, 0, 0),
        // Late: counted, the run of late frames grows, and the schedule starts again from
        // now (next = (now - start) << 16), so the frames after it keep their gaps.
        insn(LDX_MEM_DW, 2, 8, LATE, 0),
        insn(ALU64_ADD_K, 2, 0, 0, 1),
        insn(STX_MEM_DW, 8, 2, LATE, 0),
        insn(LDX_MEM_DW, 1, 8, LAST, 0),
        insn(LDX_MEM_DW, 3, 8, START, 0),
        insn(ALU64_SUB_X, 1, 3, 0, 0),
        insn(ALU64_LSH_K, 1, 0, 0, GAP_FRACTION_BITS as i32),
        insn(STX_MEM_DW, 8, 1, NEXT, 0),
        insn(LDX_MEM_DW, 2, 8, STREAK, 0),
        insn(ALU64_ADD_K, 2, 0, 0, 1),
    ]);
    asm.jump_here(early_to_streak);
    asm.jump_here(on_time_to_streak);
    asm.push(&[
        insn(STX_MEM_DW, 8, 2, STREAK, 0),
        // next += gaps[index]; index = (index + 1) & mask
        insn(LDX_MEM_DW, 1, 8, INDEX, 0),
        insn(ALU64_MOV_X, 2, 1, 0, 0),
        insn(ALU64_ADD_K, 2, 0, 0, 1),
        insn(ALU64_AND_K, 2, 0, 0, mask),
        insn(STX_MEM_DW, 8, 2, INDEX, 0),
        insn(STX_MEM_W, 10, 1, -28, 0),
    ]);
    asm.push(&map_lookup(gaps, -28));
    asm.jump_to_tail(insn(JMP_JEQ_K, 0, 0, 0, 0));
    asm.push(&[
        insn(LDX_MEM_DW, 1, 0, 0, 0),
        insn(LDX_MEM_DW, 2, 8, NEXT, 0),
        insn(ALU64_ADD_X, 2, 1, 0, 0),
        insn(STX_MEM_DW, 8, 2, NEXT, 0),
    ]);
    callback_at
}

/// Appends the spin callback after the finished program and points the load at `load_at` (see
/// [`pace`]) at it. `bpf_loop` calls it with the iteration in `r1` and the caller's stack
/// address of the due time in `r2`; it returns 1 (stop) once the clock has reached it.
pub(super) fn append_spin_callback(code: &mut Vec<Insn>, load_at: usize) {
    code[load_at].imm = (code.len() - load_at - 1) as i32;
    code.extend_from_slice(&[
        insn(ALU64_MOV_X, 6, 2, 0, 0),
        insn(JMP_CALL, 0, 0, 0, BPF_FUNC_KTIME_GET_NS),
        insn(LDX_MEM_DW, 1, 6, 0, 0),
        insn(JMP_JGE_X, 0, 1, 2, 0),
        insn(ALU64_MOV_K, 0, 0, 0, 0),
        insn(JMP_EXIT, 0, 0, 0, 0),
        insn(ALU64_MOV_K, 0, 0, 0, 1),
        insn(JMP_EXIT, 0, 0, 0, 0),
    ]);
}

/// Where the spin callback of a paced program starts (after [`append_spin_callback`]), or
/// `None` for an unpaced one: the first instruction after the main function's last exit that
/// is not the second half of a 64-bit load.
pub(super) fn callback_start(code: &[Insn]) -> Option<u32> {
    let load = code
        .iter()
        .position(|i| i.code == LD_IMM_DW && i.regs >> 4 == BPF_PSEUDO_FUNC)?;
    Some((load as i64 + 1 + i64::from(code[load].imm)) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_are_fixed_point_nanoseconds_and_must_cycle_in_a_power_of_two() {
        let cbr = LivePacing::constant(1e6, 5000);
        assert_eq!(cbr.gaps, [1000 << GAP_FRACTION_BITS]);
        assert!(cbr.is_valid());
        // A third of a microsecond keeps its fraction: no drift over a long trial.
        let third = LivePacing::constant(3e6, 0).gaps[0];
        assert!((third as f64 / 65536.0 - 333.333).abs() < 0.01, "{third}");
        assert!(!LivePacing::from_gaps([1e-6; 3], 0).is_valid());
        assert!(!LivePacing::from_gaps([2.0], 0).is_valid());
        assert!(LivePacing::from_gaps([1e-6, 2e-6, 3e-6, 4e-6], 0).is_valid());
    }

    #[test]
    fn every_jump_of_the_pacing_lands_inside_it_or_on_the_tail() {
        let mut asm = Assembler::with_capacity(128);
        let load = pace(&mut asm, 3, 4, 8);
        let body = asm.here();
        let code = asm.finish_with(&[insn(JMP_EXIT, 0, 0, 0, 0)]);
        for (at, instruction) in code[..body].iter().enumerate() {
            if matches!(instruction.code, JMP_JEQ_K | JMP_JGE_X | JMP_JLE_X | JMP_JA) {
                let target = at as i64 + 1 + i64::from(instruction.off);
                assert!((0..=body as i64).contains(&target), "jump at {at}");
                assert!(target > at as i64, "jump at {at} goes back");
            }
        }
        assert_eq!((code[load].code, code[load].regs >> 4), (LD_IMM_DW, 4));
        assert!(code.iter().any(|i| i.code == ALU64_AND_K && i.imm == 7));
    }
}
