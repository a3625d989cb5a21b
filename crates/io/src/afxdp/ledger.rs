//! Which frames of the pool a port has handed to the kernel.
//!
//! The kernel does not give frames back when a socket closes: frames in the fill ring, frames it
//! took from the fill ring but has not filled yet (its own cache in copy mode), frames on the RX
//! ring and frames queued for or done with transmission simply stop being referenced. To return
//! them to the pool the port must know which they are, so it keeps one bit per frame of the pool,
//! set when a frame goes to the kernel (fill or TX ring) and cleared when it comes back (RX or
//! completion ring). The cost is a bit operation per frame on a bitmap of `frames / 8` bytes (2 KiB
//! for 16 Ki frames), no allocation after open.
//!
//! The bitmap also guards against a frame coming back that the port never gave (a kernel bug or
//! a UMEM shared with a port that misbehaves): such a frame is refused rather than handed out
//! twice.

use wirespeed_packet::FrameId;

/// One bit per frame of the pool, set while the kernel holds the frame.
#[derive(Debug)]
pub(crate) struct Ledger {
    bits: Vec<u64>,
    frames: u32,
    held: usize,
}

impl Ledger {
    /// A ledger for a pool of `frames` frames, none held.
    pub(crate) fn new(frames: u32) -> Self {
        Self {
            bits: vec![0; (frames as usize).div_ceil(64)],
            frames,
            held: 0,
        }
    }

    /// Records that `frame` went to the kernel. `false` if it is outside the pool or already
    /// held (the caller then must not give it).
    #[inline]
    pub(crate) fn give(&mut self, frame: FrameId) -> bool {
        if frame >= self.frames {
            return false;
        }
        let Some(word) = self.bits.get_mut(frame as usize / 64) else {
            return false;
        };
        let bit = 1u64 << (frame % 64);
        if *word & bit != 0 {
            return false;
        }
        *word |= bit;
        self.held += 1;
        true
    }

    /// Records that `frame` came back from the kernel. `false` if the port did not hold it.
    #[inline]
    pub(crate) fn take_back(&mut self, frame: FrameId) -> bool {
        let Some(word) = self.bits.get_mut(frame as usize / 64) else {
            return false;
        };
        let bit = 1u64 << (frame % 64);
        if *word & bit == 0 {
            return false;
        }
        *word &= !bit;
        self.held -= 1;
        true
    }

    /// Frames the kernel holds.
    pub(crate) fn held(&self) -> usize {
        self.held
    }

    /// Forgets every frame, calling `release` for each one that was held.
    pub(crate) fn drain(&mut self, mut release: impl FnMut(FrameId)) {
        for (index, word) in self.bits.iter_mut().enumerate() {
            let mut bits = std::mem::take(word);
            while bits != 0 {
                let bit = bits.trailing_zeros();
                release(index as FrameId * 64 + bit);
                bits &= bits - 1;
            }
        }
        self.held = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gives_takes_back_and_drains_exactly() {
        let mut ledger = Ledger::new(130);
        assert!(ledger.give(0));
        assert!(ledger.give(64));
        assert!(ledger.give(129));
        assert!(!ledger.give(64), "a frame cannot be given twice");
        assert!(!ledger.give(130), "outside the pool");
        assert_eq!(ledger.held(), 3);
        assert!(ledger.take_back(64));
        assert!(!ledger.take_back(64), "not held any more");
        assert!(!ledger.take_back(5000));
        let mut drained = Vec::new();
        ledger.drain(|frame| drained.push(frame));
        assert_eq!(drained, [0, 129]);
        assert_eq!(ledger.held(), 0);
    }
}
