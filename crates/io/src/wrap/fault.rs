//! [`Faulty`]: fault injection for tests — a port that drops, truncates, corrupts, duplicates and
//! reorders frames with given probabilities, deterministically from a seed.
//!
//! Faults apply to received frames (`on_rx`, the default) and optionally to transmitted ones
//! (`on_tx`). For each frame, in this order: drop (the frame goes back to the pool, nothing else
//! happens), truncate (to a uniformly chosen shorter length, at least 1 byte), corrupt (one
//! byte at a random position XORed with a random non-zero value, so it always changes),
//! duplicate (a copy in a frame allocated from the pool, right after the original; skipped and
//! counted when the pool is empty). Then, over the frames of one call, reorder: each neighbour
//! pair (0,1), (2,3), ... is swapped with the reorder probability. A probability of 1.0 applies
//! a fault to every frame and 0.0 to none, exactly; a kind whose probability is 0 draws no
//! random numbers, so enabling one kind never changes which frames another kind hits.
//!
//! Duplicates can make one call's frames outnumber the room in the caller's batch: on RX the
//! overflow waits (counted in `frames_held`) and is delivered first by the next `rx` of that
//! queue, so nothing is lost. On TX the faulted frames go to the inner port; what it refuses
//! goes back into the caller's batch as the contract says (an overflow beyond the batch's
//! capacity, possible only with duplicates, is released and counted in `tx_overflow`).
//! Dropped frames count as taken. Frames are only moved between pool, batch and inner port, so
//! pool conservation holds in every case; a dropped frame is released only at the end of the
//! call, so a duplicate allocated in the same call never reuses it.
//!
//! The random generator is SplitMix64: 64 bits of state, a few multiplications per draw, and the
//! same sequence on every machine.

use std::collections::VecDeque;
use std::os::fd::RawFd;

use wirespeed_packet::{Batch, Desc, FrameId, FramePool, MAX_BATCH, Meta};

use crate::port::{Port, PortInfo, PortStats, QueueId};

/// Which faults to inject, how often, and where.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FaultConfig {
    /// Seed of the random generator: the same seed gives the same faults.
    pub seed: u64,
    /// Probability (0.0..=1.0) that a frame is dropped.
    pub drop: f64,
    /// Probability that a frame is cut to a shorter length.
    pub truncate: f64,
    /// Probability that one byte of a frame is changed.
    pub corrupt: f64,
    /// Probability that a frame is delivered twice.
    pub duplicate: f64,
    /// Probability that a neighbour pair of frames is swapped.
    pub reorder: f64,
    /// Inject into received frames.
    pub on_rx: bool,
    /// Inject into transmitted frames.
    pub on_tx: bool,
}

impl Default for FaultConfig {
    /// No faults, on RX, seed 1.
    fn default() -> Self {
        Self {
            seed: 1,
            drop: 0.0,
            truncate: 0.0,
            corrupt: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            on_rx: true,
            on_tx: false,
        }
    }
}

/// How many faults were injected, per kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultStats {
    pub dropped: u64,
    pub truncated: u64,
    pub corrupted: u64,
    pub duplicated: u64,
    /// Duplicates not made because the pool had no free frame.
    pub duplicates_skipped: u64,
    /// Frames that changed place (two per swapped pair).
    pub reordered: u64,
    /// TX only: refused frames that did not fit back into the caller's batch, released.
    pub tx_overflow: u64,
}

/// SplitMix64 (Steele, Lea and Flood, 2014).
#[derive(Clone, Debug)]
struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// True with probability `p`: exactly never for `p <= 0`, always for `p >= 1`.
    fn chance(&mut self, p: f64) -> bool {
        if p.is_nan() || p <= 0.0 {
            return false;
        }
        // 53 random bits as a float in [0, 1).
        ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    /// A number in `0..n` (0 when `n` is 0).
    fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// The decisions and their bookkeeping, apart from the port so that they can borrow it freely.
struct Injector {
    config: FaultConfig,
    rng: SplitMix64,
    stats: FaultStats,
    /// Frames dropped during one call, released at its end.
    dropped: Vec<FrameId>,
    /// Packet bytes being duplicated.
    copy: Vec<u8>,
}

impl Injector {
    /// Applies the per-frame faults to `input` and the reorder to the result, into `output`.
    fn apply(
        &mut self,
        pool: &mut FramePool,
        input: &[(Desc, Meta)],
        output: &mut Vec<(Desc, Meta)>,
    ) {
        let config = self.config;
        for &(desc, meta) in input {
            if self.rng.chance(config.drop) {
                self.dropped.push(desc.frame);
                self.stats.dropped += 1;
                continue;
            }
            let mut desc = desc;
            if desc.len > 1 && self.rng.chance(config.truncate) {
                desc.len = 1 + self.rng.below(desc.len as u64 - 1) as u16;
                self.stats.truncated += 1;
            }
            if desc.len > 0 && self.rng.chance(config.corrupt) {
                let at = desc.offset as usize + self.rng.below(desc.len as u64) as usize;
                let flip = 1 + self.rng.below(255) as u8;
                if let Some(byte) = pool.frame_mut(desc.frame).get_mut(at) {
                    *byte ^= flip;
                    self.stats.corrupted += 1;
                }
            }
            output.push((desc, meta));
            if self.rng.chance(config.duplicate) {
                match self.duplicate(pool, &desc) {
                    Some(copy) => {
                        output.push((copy, meta));
                        self.stats.duplicated += 1;
                    }
                    None => self.stats.duplicates_skipped += 1,
                }
            }
        }
        if config.reorder > 0.0 {
            for pair in output.chunks_exact_mut(2) {
                if self.rng.chance(config.reorder) {
                    pair.swap(0, 1);
                    self.stats.reordered += 2;
                }
            }
        }
        for frame in self.dropped.drain(..) {
            pool.release(frame);
        }
    }

    /// A copy of the packet `desc` in a new frame, at the same offset.
    fn duplicate(&mut self, pool: &mut FramePool, desc: &Desc) -> Option<Desc> {
        let range = desc.offset as usize..desc.offset as usize + desc.len as usize;
        let source = pool.frame(desc.frame).get(range.clone())?;
        self.copy.clear();
        self.copy.extend_from_slice(source);
        let frame = pool.alloc()?;
        match pool.frame_mut(frame).get_mut(range) {
            Some(target) => target.copy_from_slice(&self.copy),
            None => {
                pool.release(frame);
                return None;
            }
        }
        Some(Desc { frame, ..*desc })
    }
}

/// A port that injects faults into the frames passing through it.
pub struct Faulty<P> {
    inner: P,
    injector: Injector,
    /// Per queue: faulted received frames that did not fit the caller's batch.
    pending: Vec<VecDeque<(Desc, Meta)>>,
    /// One call's frames before the faults.
    before: Vec<(Desc, Meta)>,
    /// One call's frames after the faults.
    after: Vec<(Desc, Meta)>,
    /// The batch handed to the inner port on TX.
    staged: Batch,
}

impl<P: Port> Faulty<P> {
    /// Wraps `inner`, injecting the faults `config` describes.
    pub fn new(inner: P, config: FaultConfig) -> Self {
        let queues = inner.info().queues.max(1) as usize;
        Self {
            inner,
            injector: Injector {
                config,
                rng: SplitMix64 { state: config.seed },
                stats: FaultStats::default(),
                dropped: Vec::with_capacity(MAX_BATCH),
                copy: Vec::new(),
            },
            pending: (0..queues)
                .map(|_| VecDeque::with_capacity(2 * MAX_BATCH))
                .collect(),
            before: Vec::with_capacity(MAX_BATCH),
            after: Vec::with_capacity(2 * MAX_BATCH),
            staged: Batch::new(MAX_BATCH),
        }
    }

    /// Faults injected so far, per kind.
    pub fn fault_stats(&self) -> FaultStats {
        self.injector.stats
    }

    /// The wrapped port.
    pub fn inner(&self) -> &P {
        &self.inner
    }

    /// The wrapped port, mutably.
    pub fn inner_mut(&mut self) -> &mut P {
        &mut self.inner
    }
}

impl<P: Port> Port for Faulty<P> {
    fn info(&self) -> &PortInfo {
        self.inner.info()
    }

    fn rx(&mut self, queue: QueueId, pool: &mut FramePool, batch: &mut Batch) -> usize {
        let start = batch.len();
        let Some(pending) = self.pending.get_mut(queue as usize) else {
            return self.inner.rx(queue, pool, batch);
        };
        if !self.injector.config.on_rx {
            return self.inner.rx(queue, pool, batch);
        }
        // Frames faulted by an earlier call come first.
        while !batch.is_full() {
            let Some((desc, meta)) = pending.pop_front() else {
                break;
            };
            batch.push_with_meta(desc, meta);
        }
        if !pending.is_empty() {
            return batch.len() - start;
        }
        let mid = batch.len();
        if self.inner.rx(queue, pool, batch) == 0 {
            return batch.len() - start;
        }
        // Take the batch apart, keep what was there, fault what arrived, put it back.
        self.before.clear();
        self.before.extend(
            batch
                .descs()
                .iter()
                .copied()
                .zip(batch.meta().iter().copied()),
        );
        batch.clear();
        let (kept, arrived) = self.before.split_at(mid.min(self.before.len()));
        for &(desc, meta) in kept {
            batch.push_with_meta(desc, meta);
        }
        self.after.clear();
        self.injector.apply(pool, arrived, &mut self.after);
        for &(desc, meta) in &self.after {
            if !batch.push_with_meta(desc, meta) {
                pending.push_back((desc, meta));
            }
        }
        batch.len() - start
    }

    fn tx(&mut self, queue: QueueId, pool: &mut FramePool, batch: &mut Batch) -> usize {
        if !self.injector.config.on_tx {
            return self.inner.tx(queue, pool, batch);
        }
        let offered = batch.len();
        self.before.clear();
        self.before.extend(
            batch
                .descs()
                .iter()
                .copied()
                .zip(batch.meta().iter().copied()),
        );
        batch.clear();
        self.after.clear();
        self.injector.apply(pool, &self.before, &mut self.after);
        // Hand the faulted frames on in batches; stop at the first refusal.
        let mut next = 0;
        while next < self.after.len() {
            self.staged.clear();
            for &(desc, meta) in self.after.get(next..).unwrap_or(&[]) {
                if !self.staged.push_with_meta(desc, meta) {
                    break;
                }
            }
            let staged = self.staged.len();
            let taken = self.inner.tx(queue, pool, &mut self.staged);
            next += taken;
            if taken < staged {
                break;
            }
        }
        // What the inner port refused goes back to the caller, as far as the batch holds it.
        for &(desc, meta) in self.after.get(next..).unwrap_or(&[]) {
            if !batch.push_with_meta(desc, meta) {
                pool.release(desc.frame);
                self.injector.stats.tx_overflow += 1;
            }
        }
        self.staged.clear();
        offered.saturating_sub(batch.len())
    }

    /// The inner port's room. With faults on TX it is only an estimate of what `tx` takes (a
    /// dropped frame needs no slot, a duplicate two); what the inner port refuses still comes
    /// back in the batch.
    fn tx_room(&mut self, queue: QueueId, pool: &mut FramePool, want: usize) -> usize {
        self.inner.tx_room(queue, pool, want)
    }

    fn poll(&mut self, pool: &mut FramePool) {
        self.inner.poll(pool);
    }

    fn tx_departed(&self) -> u64 {
        self.inner.tx_departed()
    }

    fn tx_backlog(&mut self) -> bool {
        self.inner.tx_backlog()
    }

    /// None: frames waiting in this wrapper would not make the inner port's descriptor
    /// readable, so a worker must poll a faulty port rather than sleep on it.
    fn rx_fd(&self, _queue: QueueId) -> Option<RawFd> {
        None
    }

    /// At the end only once the frames waiting here are delivered too.
    fn at_end(&self) -> bool {
        self.inner.at_end() && self.pending.iter().all(VecDeque::is_empty)
    }

    fn fault(&self) -> Option<String> {
        self.inner.fault()
    }

    fn descriptor_failed(&mut self, queue: QueueId) {
        self.inner.descriptor_failed(queue)
    }

    fn frames_held(&self) -> usize {
        self.inner.frames_held() + self.pending.iter().map(VecDeque::len).sum::<usize>()
    }

    fn release_all(&mut self, pool: &mut FramePool) {
        for pending in &mut self.pending {
            for (desc, _) in pending.drain(..) {
                pool.release(desc.frame);
            }
        }
        self.inner.release_all(pool);
    }

    fn stats(&self) -> PortStats {
        self.inner.stats()
    }
}
