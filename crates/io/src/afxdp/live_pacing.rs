//! Pacing inside the kernel for [`XdpLiveGenerator`](super::XdpLiveGenerator): the generator
//! program waits, frame by frame, until the frame is due, so that one system call sends a whole
//! trial at a set rate (constant, or with the gaps of a Poisson process) instead of in bursts.
//!
//! Why in the kernel: a live-frames call costs about 27 ms of fixed set-up and tear-down on
//! this kernel (see the live module), so pacing by call sends bursts of `rate × call length`
//! frames at the generator's full speed, and a DuT with a ring of 256 frames loses the burst at
//! any mean rate: no zero-loss search can run on that. Paced per frame, a trial is one call.
//!
//! How (`pace` in `bpf/live.c`): before choosing the frame's flow, the program reads the next
//! due time from a state map, and while `bpf_ktime_get_ns()` is below it, spins in `bpf_loop` (a
//! callback that returns 1 once the clock reached the due time; the verifier inlines the loop). A frame handed out more
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
//! **Yielding** ([`LivePacing::yielding`]). The kernel here has no preemption, so while the
//! program spins nothing else runs on the generator's core, not even a real-time thread woken
//! there (the tester's receive, whose arrivals the probe counter times). A yielding pacing spins
//! at most `yield_ns` per run: a frame due later ends the run without a frame (a yield, dropped
//! and counted), the kernel may switch between runs, and the next run spins again. The call
//! then needs more runs than frames; [`LivePacing::runs`] says how many, and the runs left over
//! once every frame is handled end at once.
//!
//! Frames still leave in bulk: the kernel queues redirected frames (up to 16) and flushes them at
//! the end of each batch of `batch_size` runs, so a small batch keeps the traffic smooth. The
//! clock is `bpf_ktime_get_ns`, i.e. `CLOCK_MONOTONIC`.

use std::os::fd::OwnedFd;

use super::bpf::{lookup_map, update_map};

/// Fraction bits of a gap and of the schedule (nanoseconds × 2^16).
pub const GAP_FRACTION_BITS: u32 = 16;
/// The most gaps a pacing cycles through (a power of two).
pub const MAX_PACING_GAPS: usize = 1 << 16;
/// The longest gap the program is given, well inside what one spin waits (2^23 iterations of
/// `bpf_loop`, each a helper call that reads the clock: gaps of 0.5 s measured kept; a longer
/// gap would send its frame early).
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
    /// The longest one run spins for its frame, ns (0: the whole gap); see the module
    /// documentation.
    pub yield_ns: u64,
}

impl LivePacing {
    /// `rate_pps` frames per second, evenly spaced.
    pub fn constant(rate_pps: f64, tolerance_ns: u64) -> LivePacing {
        LivePacing {
            gaps: vec![fixed_point(1.0 / rate_pps)],
            tolerance_ns,
            yield_ns: 0,
        }
    }

    /// The given gaps, seconds (cycled; their count must be a power of two).
    pub fn from_gaps(gaps: impl IntoIterator<Item = f64>, tolerance_ns: u64) -> LivePacing {
        LivePacing {
            gaps: gaps.into_iter().map(fixed_point).collect(),
            tolerance_ns,
            yield_ns: 0,
        }
    }

    /// The same pacing, spinning at most `yield_ns` per run (see the module documentation).
    pub fn yielding(self, yield_ns: u64) -> LivePacing {
        LivePacing { yield_ns, ..self }
    }

    /// Runs a call needs to send `frames` frames: one each, and with yielding the yields their
    /// gaps take (each gap's worth of spins, rounded up, on average over the cycle, and one
    /// more per frame), at most `u32::MAX`.
    pub fn runs(&self, frames: u32) -> u32 {
        if self.yield_ns == 0 {
            return frames;
        }
        let spin = (u128::from(self.yield_ns) << GAP_FRACTION_BITS).max(1);
        let yields: u128 = self
            .gaps
            .iter()
            .map(|&gap| u128::from(gap).div_ceil(spin) + 1)
            .sum();
        let per_frame = yields.div_ceil(self.gaps.len().max(1) as u128);
        let runs = u128::from(frames) * (1 + per_frame);
        u32::try_from(runs).unwrap_or(u32::MAX)
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
    /// Frames sent or not sent for the deadline: the send's frames unless the call was
    /// interrupted or ran out of runs.
    pub handled: u64,
    /// Runs that ended without a frame to let the core run other work (yielding pacing).
    pub yields: u64,
}

// The state map's one value, in u64 words (`struct pace_state` of `bpf/live.c`; the words at
// 8 and 16, the next due time and the next gap's index, are the program's alone and start at 0).
const START: usize = 0;
const TOLERANCE: usize = 24;
const LATE: usize = 32;
const STREAK: usize = 40;
const LAST: usize = 48;
const MAX_LATENESS: usize = 56;
const DEADLINE: usize = 64;
const UNSENT: usize = 72;
const FRAMES: usize = 80;
const HANDLED: usize = 88;
const YIELDS: usize = 96;
/// Size of the state map's value.
const STATE_SIZE: usize = 104;

/// The state map of a paced generator, and its pacing.
#[derive(Debug)]
pub(super) struct PacingMaps {
    pub(super) state: OwnedFd,
    /// The pacing loaded: the tolerance each start writes, the runs a send needs.
    pub(super) pacing: LivePacing,
}

impl PacingMaps {
    /// Resets the schedule: the first frame is due at `start_ns`, or when the program first
    /// runs for 0; the send has `frames` frames (0: one per run), its other runs are spare.
    pub(super) fn start(
        &self,
        start_ns: u64,
        deadline_ns: u64,
        frames: u64,
    ) -> std::io::Result<()> {
        let mut value = [0u8; STATE_SIZE];
        value[START..][..8].copy_from_slice(&start_ns.to_ne_bytes());
        value[FRAMES..][..8].copy_from_slice(&frames.to_ne_bytes());
        value[TOLERANCE..][..8].copy_from_slice(&self.pacing.tolerance_ns.to_ne_bytes());
        value[DEADLINE..][..8].copy_from_slice(&deadline_ns.to_ne_bytes());
        update_map(&self.state, 0, &value)
    }

    pub(super) fn counts(&self) -> std::io::Result<LivePaceCounts> {
        let mut value = [0u8; STATE_SIZE];
        lookup_map(&self.state, 0, &mut value)?;
        let word = |at: usize| {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(&value[at..][..8]);
            u64::from_ne_bytes(bytes)
        };
        Ok(LivePaceCounts {
            start_ns: word(START),
            last_ns: word(LAST),
            late: word(LATE),
            behind: word(STREAK),
            max_lateness_ns: word(MAX_LATENESS),
            unsent: word(UNSENT),
            handled: word(HANDLED),
            yields: word(YIELDS),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_yielding_pacing_asks_for_the_runs_its_gaps_take() {
        let plain = LivePacing::constant(1e6, 5000);
        assert_eq!(plain.runs(1000), 1000);
        // 1 µs gaps, spins of 5 µs: at most one yield and one spare per frame.
        assert_eq!(plain.clone().yielding(5000).runs(1000), 3000);
        // 722 µs gaps, spins of 5 µs: 145 spins per gap and one spare.
        let slow = LivePacing::constant(1384.0, 5000).yielding(5000);
        assert_eq!(slow.runs(10), 10 * (1 + 146));
        assert_eq!(slow.runs(u32::MAX), u32::MAX);
    }

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
}
