//! Loss, reordering and duplicates per flow, from the sequence numbers the generator writes
//! into each frame, in memory that never grows.
//!
//! Each flow keeps a sliding window of the last [`WINDOW`] sequence numbers as a ring bitmap
//! (one bit per number: seen or not) and `next`, one past the highest number seen. Flows start
//! at sequence 0.
//!
//! * A number at or above `next` moves the window forward; numbers that fall out of the window
//!   unseen are counted lost. Numbers skipped inside the window stay pending: they may still
//!   arrive, reordered.
//! * A number inside the window that is already marked is a duplicate; unmarked, it arrived
//!   after a higher number: reordered (and received).
//! * A number behind the window is "late/unknown": a frame delayed by more than the window (and
//!   already counted lost) or a duplicate of one; it is counted and otherwise ignored, so no
//!   input can make the tracker allocate. So is `u64::MAX`, which no sender reaches.
//!
//! Per frame this is a few bit operations; a jump far ahead clears the whole window at once
//! (bounded work: at most `WINDOW / 64` words).
//!
//! Each flow also remembers the highest number it has counted lost, so that
//! [`SequenceTracker::last_missing`] can say which was the last frame that did not arrive (the
//! system recovery test maps it back to its departure time).

use serde::{Deserialize, Serialize};

/// Sequence numbers remembered per flow.
pub const WINDOW: u64 = 1024;

const WORDS: usize = (WINDOW / 64) as usize;

/// How one frame was classified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// The next number, or a higher one (numbers in between are missing for now).
    InOrder,
    /// Lower than one already seen, but not seen itself.
    Reordered,
    /// Seen before.
    Duplicate,
    /// Too far behind the window to tell.
    Late,
}

/// Counts for one flow (or the sum of several).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SequenceCounts {
    /// Distinct sequence numbers received (duplicates and late frames not counted).
    pub received: u64,
    /// Sequence numbers never received.
    pub lost: u64,
    /// Frames that arrived after a higher sequence number.
    pub reordered: u64,
    /// Frames whose number had been seen.
    pub duplicates: u64,
    /// Frames too far behind the window to classify.
    pub late: u64,
}

impl SequenceCounts {
    fn add(&mut self, other: &SequenceCounts) {
        self.received += other.received;
        self.lost += other.lost;
        self.reordered += other.reordered;
        self.duplicates += other.duplicates;
        self.late += other.late;
    }
}

/// The window of one flow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SequenceTracker {
    /// Bit `s % WINDOW` says whether `s` was seen, for `s` in `next - WINDOW .. next`.
    seen: [u64; WORDS],
    /// One past the highest sequence number seen.
    next: u64,
    /// Counts so far; `lost` only holds numbers that have left the window.
    counts: SequenceCounts,
    /// The highest number that left the window unseen.
    last_lost: Option<u64>,
}

impl Default for SequenceTracker {
    fn default() -> Self {
        Self::new()
    }
}

impl SequenceTracker {
    pub fn new() -> Self {
        Self {
            seen: [0; WORDS],
            next: 0,
            counts: SequenceCounts::default(),
            last_lost: None,
        }
    }

    #[inline]
    fn bit(sequence: u64) -> (usize, u64) {
        let slot = sequence % WINDOW;
        ((slot / 64) as usize, 1 << (slot % 64))
    }

    #[inline]
    fn is_seen(&self, sequence: u64) -> bool {
        let (word, mask) = Self::bit(sequence);
        self.seen.get(word).is_some_and(|w| w & mask != 0)
    }

    #[inline]
    fn set(&mut self, sequence: u64, on: bool) {
        let (word, mask) = Self::bit(sequence);
        if let Some(w) = self.seen.get_mut(word) {
            if on {
                *w |= mask;
            } else {
                *w &= !mask;
            }
        }
    }

    /// Numbers in the window (`next - WINDOW .. next`, those that exist) not seen.
    fn pending(&self) -> u64 {
        let seen: u64 = self.seen.iter().map(|w| w.count_ones() as u64).sum();
        self.next.min(WINDOW) - seen
    }

    /// Moves `next` forward to `to`, counting what leaves the window unseen as lost.
    fn advance(&mut self, to: u64) {
        let from = self.next;
        if to - from >= WINDOW {
            // The whole window leaves, and numbers from..to-WINDOW never even entered it.
            self.counts.lost += self.pending() + (to - WINDOW - from);
            let skipped = (to - WINDOW > from).then(|| to - WINDOW - 1);
            if let Some(lost) = skipped.or_else(|| self.highest_unseen()) {
                self.last_lost = Some(lost);
            }
            self.seen = [0; WORDS];
        } else {
            for sequence in from..to {
                // `sequence` takes the slot of `sequence - WINDOW`, which leaves.
                if sequence >= WINDOW && !self.is_seen(sequence) {
                    self.counts.lost += 1;
                    self.last_lost = Some(sequence - WINDOW);
                }
                self.set(sequence, false);
            }
        }
        self.next = to;
    }

    /// Classifies one received frame's sequence number.
    #[inline]
    pub fn record(&mut self, sequence: u64) -> Arrival {
        if sequence == u64::MAX {
            // Not a number a sender reaches (584 years at 1 Gpps); keeping it out lets `next`
            // stay a u64.
            self.counts.late += 1;
            Arrival::Late
        } else if sequence >= self.next {
            self.advance(sequence + 1);
            self.set(sequence, true);
            self.counts.received += 1;
            Arrival::InOrder
        } else if self.next - sequence <= WINDOW {
            if self.is_seen(sequence) {
                self.counts.duplicates += 1;
                Arrival::Duplicate
            } else {
                self.set(sequence, true);
                self.counts.received += 1;
                self.counts.reordered += 1;
                Arrival::Reordered
            }
        } else {
            self.counts.late += 1;
            Arrival::Late
        }
    }

    /// The counts if the sender sent sequence numbers `0..sent`: everything still missing
    /// counts as lost (numbers pending in the window, and those after the highest seen).
    pub fn counts(&self, sent: u64) -> SequenceCounts {
        let mut counts = self.counts;
        counts.lost += self.pending() + sent.saturating_sub(self.next);
        counts
    }

    /// One past the highest sequence number seen.
    pub fn next(&self) -> u64 {
        self.next
    }

    /// The highest number in the window (`next - WINDOW .. next`) not seen.
    fn highest_unseen(&self) -> Option<u64> {
        let low = self.next.saturating_sub(WINDOW);
        (low..self.next).rev().find(|&s| !self.is_seen(s))
    }

    /// The highest sequence number of `0..sent` that has not arrived (a frame a reordering
    /// further back than the window brought late still counts as missing); `None` when every
    /// frame arrived. Bounded work: at most one scan of the window.
    pub fn last_missing(&self, sent: u64) -> Option<u64> {
        if sent > self.next {
            return Some(sent - 1);
        }
        let low = self.next.saturating_sub(WINDOW);
        (low..sent.min(self.next))
            .rev()
            .find(|&s| !self.is_seen(s))
            .or(self.last_lost)
    }
}

/// Trackers for a fixed number of flows, chosen at start-up; frames of other flows are counted
/// as unknown.
#[derive(Clone, Debug)]
pub struct SequenceTable {
    flows: Vec<SequenceTracker>,
    unknown_flow: u64,
}

impl SequenceTable {
    /// A table for flows `0..flows`.
    pub fn new(flows: u32) -> Self {
        Self {
            flows: vec![SequenceTracker::new(); flows as usize],
            unknown_flow: 0,
        }
    }

    /// Classifies a frame of `flow`; `None` for a flow outside the table.
    #[inline]
    pub fn record(&mut self, flow: u32, sequence: u64) -> Option<Arrival> {
        match self.flows.get_mut(flow as usize) {
            Some(tracker) => Some(tracker.record(sequence)),
            None => {
                self.unknown_flow += 1;
                None
            }
        }
    }

    /// The tracker of `flow`.
    pub fn flow(&self, flow: u32) -> Option<&SequenceTracker> {
        self.flows.get(flow as usize)
    }

    /// Frames of flows outside the table.
    pub fn unknown_flow(&self) -> u64 {
        self.unknown_flow
    }

    /// Counts over all flows, given how many frames each flow sent (`sent[i]` for flow `i`;
    /// a flow without an entry is taken to have sent what was seen).
    pub fn total(&self, sent: &[u64]) -> SequenceCounts {
        let mut total = SequenceCounts::default();
        for (index, tracker) in self.flows.iter().enumerate() {
            let sent = sent.get(index).copied().unwrap_or(tracker.next);
            total.add(&tracker.counts(sent));
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generator::pacing::Rng;

    fn track(sequences: &[u64], sent: u64) -> SequenceCounts {
        let mut tracker = SequenceTracker::new();
        for &s in sequences {
            tracker.record(s);
        }
        tracker.counts(sent)
    }

    #[test]
    fn in_order_frames_are_just_received() {
        let all: Vec<u64> = (0..5000).collect();
        assert_eq!(
            track(&all, 5000),
            SequenceCounts {
                received: 5000,
                ..SequenceCounts::default()
            }
        );
    }

    #[test]
    fn drops_reorders_and_duplicates_are_counted() {
        // 0 1 3 2 2 5 (4 lost) 6 6 9 (7, 8 lost), and 10, 11 never sent... sent = 12.
        let mut tracker = SequenceTracker::new();
        let arrivals: Vec<Arrival> = [0, 1, 3, 2, 2, 5, 6, 6, 9]
            .iter()
            .map(|&s| tracker.record(s))
            .collect();
        use Arrival::*;
        assert_eq!(
            arrivals,
            [
                InOrder, InOrder, InOrder, Reordered, Duplicate, InOrder, InOrder, Duplicate,
                InOrder
            ]
        );
        assert_eq!(
            tracker.counts(12),
            SequenceCounts {
                received: 7,
                lost: 5,
                reordered: 1,
                duplicates: 2,
                late: 0,
            }
        );
    }

    #[test]
    fn frames_behind_the_window_are_late_and_already_lost() {
        let mut tracker = SequenceTracker::new();
        tracker.record(0);
        tracker.record(WINDOW + 10);
        // 1..=10 left the window unseen; 11..WINDOW+10 are still pending.
        assert_eq!(tracker.counts(0).lost, WINDOW + 9);
        assert_eq!(tracker.record(5), Arrival::Late);
        assert_eq!(tracker.record(0), Arrival::Late);
        assert_eq!(tracker.record(11), Arrival::Reordered);
        let counts = tracker.counts(WINDOW + 11);
        assert_eq!(counts.received, 3);
        assert_eq!(counts.lost, WINDOW + 8);
        assert_eq!(counts.late, 2);
    }

    #[test]
    fn a_huge_jump_costs_no_memory_and_counts_the_gap() {
        let mut tracker = SequenceTracker::new();
        tracker.record(3);
        assert_eq!(tracker.record(u64::MAX - 1), Arrival::InOrder);
        assert_eq!(tracker.record(u64::MAX), Arrival::Late);
        assert_eq!(tracker.record(u64::MAX - 1), Arrival::Duplicate);
        let counts = tracker.counts(0);
        assert_eq!(counts.received, 2);
        // Numbers 0..u64::MAX exist; two arrived.
        assert_eq!(counts.lost, u64::MAX - 2);
        assert_eq!(std::mem::size_of::<SequenceTracker>(), 128 + 8 + 40 + 16);
    }

    #[test]
    fn the_last_missing_number_is_found_in_the_window_behind_it_and_after_it() {
        let mut tracker = SequenceTracker::new();
        for s in (0..5000).filter(|&s| s != 1234 && s != 4990) {
            tracker.record(s);
        }
        // 4990 is still in the window; 1234 left it long ago.
        assert_eq!(tracker.last_missing(5000), Some(4990));
        tracker.record(4990);
        assert_eq!(tracker.last_missing(5000), Some(1234));
        // Frames sent after the highest that arrived are missing too.
        assert_eq!(tracker.last_missing(5007), Some(5006));
        let mut clean = SequenceTracker::new();
        (0..3000).for_each(|s| {
            clean.record(s);
        });
        assert_eq!(clean.last_missing(3000), None);
        assert_eq!(SequenceTracker::new().last_missing(0), None);
        // A jump further than the window: the numbers skipped are the last lost.
        let mut jump = SequenceTracker::new();
        jump.record(0);
        jump.record(3 * WINDOW);
        for s in 2 * WINDOW + 1..3 * WINDOW {
            jump.record(s);
        }
        assert_eq!(jump.last_missing(3 * WINDOW + 1), Some(2 * WINDOW));
    }

    #[test]
    fn random_faults_are_counted_exactly_within_the_window() {
        // Drop 1 %, duplicate 1 %, and swap neighbours 5 % of the time: every fault is seen.
        let mut rng = Rng::new(11);
        // (sequence, is a duplicate)
        let mut stream: Vec<(u64, bool)> = Vec::new();
        let (mut dropped, mut duplicated, mut swapped) = (0, 0, 0);
        for s in 0..100_000u64 {
            if rng.chance(0.01) {
                dropped += 1;
                continue;
            }
            stream.push((s, false));
            if rng.chance(0.01) {
                stream.push((s, true));
                duplicated += 1;
            }
        }
        let mut i = 0;
        while i + 1 < stream.len() {
            // A duplicate moved forward is still a duplicate, not a reordered frame.
            if stream[i].0 != stream[i + 1].0 && !stream[i].1 && rng.chance(0.05) {
                stream.swap(i, i + 1);
                swapped += 1;
                i += 2;
            } else {
                i += 1;
            }
        }
        let stream: Vec<u64> = stream.iter().map(|&(s, _)| s).collect();
        let counts = track(&stream, 100_000);
        assert_eq!(counts.lost, dropped);
        assert_eq!(counts.duplicates, duplicated);
        assert_eq!(counts.reordered, swapped);
        assert_eq!(counts.received, 100_000 - dropped);
        assert_eq!(counts.late, 0);
    }

    #[test]
    fn the_table_keeps_flows_apart_and_refuses_unknown_ones() {
        let mut table = SequenceTable::new(2);
        for s in 0..10 {
            table.record(0, s);
            if s != 4 {
                table.record(1, s);
            }
        }
        assert_eq!(table.record(2, 0), None);
        assert_eq!(table.unknown_flow(), 1);
        assert_eq!(table.flow(1).map(|t| t.counts(10).lost), Some(1));
        let total = table.total(&[10, 12]);
        assert_eq!(total.received, 19);
        assert_eq!(total.lost, 3);
    }
}
