//! When a trial's frames left the tester's port against their schedule (issue 16): the
//! departure tolerance and the tracker of the frames still in the port (see the module
//! documentation of [`crate::trial`], "Departures").

use std::time::Duration;

use wirespeed_io::Port;
use wirespeed_packet::cpu::rdtsc;

use crate::rfc2544::Departure;

/// How late a frame may leave the tester's port and still count as offered at the trial's
/// rate ([`Departure`]): this share of the trial's length, between [`TOLERANCE_MIN`] and
/// [`TOLERANCE_MAX`]. At 0.2 % a trial whose every frame left at the limit still departed
/// within 0.2 % of its rate; the floor keeps a short trial from failing on the microseconds a
/// kick takes, the ceiling keeps a long one from hiding a DuT's pushback in the tester's queue.
pub const TOLERANCE_SHARE: f64 = 0.002;
/// See [`TOLERANCE_SHARE`].
pub const TOLERANCE_MIN: Duration = Duration::from_micros(100);
/// See [`TOLERANCE_SHARE`].
pub const TOLERANCE_MAX: Duration = Duration::from_millis(1);

/// The departure tolerance of a trial `seconds` long ([`TOLERANCE_SHARE`]).
pub fn departure_tolerance(seconds: f64) -> Duration {
    Duration::from_secs_f64((seconds * TOLERANCE_SHARE).max(0.0))
        .clamp(TOLERANCE_MIN, TOLERANCE_MAX)
}

/// The frames a trial handed to its TX port and has not yet seen leave it, with the times
/// they were due and ready (due, or handed out when that was later): how late the trial's
/// frames left the tester ([`Departure`]).
///
/// A frame has left when the port says so ([`Port::tx_departed`]): for copy-mode AF_XDP, when
/// the kernel has consumed its TX descriptor, which it does only once it has handed the frame
/// to the veth. Completions would come too late: the kernel completes a frame when its last
/// holder frees it, after the DuT's own queues (a shaper's 4 ms). The count is read with the
/// TSC read just before, so a frame seen waiting was still in the port at that time: every
/// lag here is a lower bound, and a generator kept off its core while frames leave is never
/// blamed for it.
///
/// Why frames wait there at all: veth stops the sender's queue while its peer's ring is full,
/// and a copy-mode frame is an skb charged to the sending socket (and holding a completion
/// slot) until it is freed; with the default send buffer a DuT that queued a few hundred (a
/// shaper's queue) made the kernel refuse the next frame (the tester's sender now has a
/// buffer that only the completion ring bounds, [`crate::dut::probe`]). A refused frame stays
/// in the TX ring and leaves at the DuT's pace.
///
/// The tracker also bounds the frames in the port to what may wait there within the
/// tolerance ([`InFlight::room`]): a deeper queue would only hold what the DuT pushes back.
pub(super) struct InFlight {
    /// Due and ready times of the frames in the port, by frame index modulo the capacity.
    pub(super) due: Box<[u64]>,
    pub(super) ready: Box<[u64]>,
    pub(super) mask: u64,
    /// Frames handed to the port (taken by `tx`).
    pub(super) handed: u64,
    /// Of them, frames seen to have left.
    pub(super) departed: u64,
    /// The port's departure count before the trial.
    pub(super) base: u64,
    /// Cycles a frame may leave after it was due (or ready) and still count.
    pub(super) tolerance: u64,
    /// Frames allowed in the port at once.
    pub(super) limit: u64,
    pub(super) sent_late: u64,
    /// Frames handed out late since the last one handed out in time.
    pub(super) late_streak: u64,
    pub(super) held_back: u64,
    /// Frames before this index were already counted as held back.
    pub(super) held_until: u64,
    /// Longest wait past a due time seen, cycles.
    pub(super) lag: u64,
    /// Lower bound of the last frame's departure: its hand-out, or the latest time a frame
    /// was seen still in the port.
    pub(super) last_departure: u64,
}

impl InFlight {
    /// A tracker for a trial at up to `rate` frames/s with `tolerance_cycles` of tolerance,
    /// handing out batches of up to `batch` frames to `port`.
    pub(super) fn new(
        port: &dyn Port,
        rate: f64,
        tolerance_cycles: u64,
        hz: u64,
        batch: usize,
    ) -> Self {
        let within = (rate * tolerance_cycles as f64 / hz as f64).ceil();
        let limit = (within as u64).clamp(2 * batch as u64, 1 << 20);
        let capacity = limit.next_power_of_two();
        InFlight {
            due: vec![0; capacity as usize].into_boxed_slice(),
            ready: vec![0; capacity as usize].into_boxed_slice(),
            mask: capacity - 1,
            handed: 0,
            departed: 0,
            base: port.tx_departed(),
            tolerance: tolerance_cycles,
            limit,
            sent_late: 0,
            late_streak: 0,
            held_back: 0,
            held_until: 0,
            lag: 0,
            last_departure: 0,
        }
    }

    /// Frames the port may take now without more than [`InFlight::limit`] in it.
    pub(super) fn room(&self) -> usize {
        self.limit.saturating_sub(self.handed - self.departed) as usize
    }

    /// Records frames the port took at `stamped`, due at `due`.
    pub(super) fn handed(&mut self, due: &[u64], stamped: u64) {
        for &due in due {
            let slot = (self.handed & self.mask) as usize;
            self.due[slot] = due;
            self.ready[slot] = due.max(stamped);
            self.handed += 1;
            if stamped.saturating_sub(due) > self.tolerance {
                self.sent_late += 1;
                self.late_streak += 1;
            } else {
                self.late_streak = 0;
            }
        }
        if let Some(&first) = due.first() {
            self.lag = self.lag.max(stamped.saturating_sub(first));
            self.last_departure = self.last_departure.max(stamped);
        }
    }

    /// Reads the port's departures and counts the frames seen waiting too long.
    pub(super) fn observe(&mut self, port: &dyn Port) {
        let now = rdtsc();
        let departed = port.tx_departed().saturating_sub(self.base);
        self.departed = self.departed.max(departed.min(self.handed));
        if self.departed == self.handed {
            return;
        }
        self.last_departure = self.last_departure.max(now);
        let oldest = self.departed;
        self.lag = self
            .lag
            .max(now.saturating_sub(self.due[(oldest & self.mask) as usize]));
        let waited_too_long = |index: u64| {
            self.ready[(index & self.mask) as usize].saturating_add(self.tolerance) < now
        };
        if !waited_too_long(oldest) {
            return;
        }
        // Ready times only grow with the index: the frames that waited too long are a prefix.
        let (mut low, mut high) = (oldest + 1, self.handed);
        while low < high {
            let middle = low + (high - low) / 2;
            if waited_too_long(middle) {
                low = middle + 1;
            } else {
                high = middle;
            }
        }
        let from = oldest.max(self.held_until);
        self.held_back += low.saturating_sub(from);
        self.held_until = self.held_until.max(low);
    }

    /// The trial's departure figures, for a trial at `rate` that started at `start`.
    pub(super) fn departure(&self, rate: f64, start: u64, hz: u64) -> Departure {
        let seconds =
            self.last_departure.saturating_sub(start) as f64 / hz as f64 + 1.0 / rate.max(1e-9);
        Departure {
            scheduled_rate: rate,
            departed_rate: if self.departed > 0 {
                self.departed as f64 / seconds
            } else {
                0.0
            },
            lag_seconds: self.lag as f64 / hz as f64,
            tolerance_seconds: self.tolerance as f64 / hz as f64,
            sent_late: self.sent_late,
            held_back: self.held_back,
            behind: self.late_streak,
            not_sent: None,
        }
    }
}
