//! The flow lookup stage: exact-match [`FlowCache`] first, wildcard [`Classifier`] on a miss,
//! for a whole batch (the first two tiers of Open vSwitch's datapath lookup).
//!
//! Anatomy:
//! * counters: `cache_hits`, `classifier_hits`, `misses` (they never overlap: each looked-up
//!   packet adds to exactly one);
//! * dispositions: none of its own — it cuts the batch into [`FlowGroup`]s, each with the
//!   value of the rule that decides its packets (`None`: no rule, the caller's slow path
//!   decides; or dropped by an earlier stage, left alone). A train of packets with equal keys
//!   that the cache answered is one group, so that the caller updates its counters and runs
//!   its actions once per group (Open vSwitch's `packet_batch_per_flow`);
//! * one batch function, [`FlowLookup::process`], in two passes. The first cuts the batch
//!   into runs of consecutive packets with equal keys, hashes each run's key once into its
//!   packets' `Meta::flow_hash` (which is why the parse before need not:
//!   `Parse::without_flow_hash`) and prefetches its cache slot; the second looks the runs up,
//!   so the memory reads of a batch overlap. Within a run, once the cache answered a packet
//!   the rest takes that answer without a probe: a train of one flow costs one hash and one
//!   probe per batch. [`FlowLookup::process_cached`] is the same two passes without the
//!   groups, for a batch the cache answers whole (an answer per packet, or `None` and nothing
//!   counted), which a caller whose neighbours seldom share a flow decides packet by packet;
//! * trace format ([`Looked`], kept by `process::<true>` for [`FlowLookup::trace`]): `cache
//!   hit`, `cache miss -> classifier hit, cached`, `cache miss -> classifier hit`, `cache miss
//!   -> classifier miss`.
//!
//! A classifier hit is offered to the cache (with the cache's insertion probability). Every
//! change of the rules through [`FlowLookup::insert`] / [`FlowLookup::remove`] /
//! [`FlowLookup::clear`] invalidates the cache by generation. [`FlowLookup::install`] is the
//! exception for rules that cannot change a cached answer (megaflows derived from the slow
//! path, which agree with every decision already made).

use std::fmt;

use wirespeed_packet::flow_key::FlowKey;
use wirespeed_packet::{Batch, MAX_BATCH, Meta};

use crate::table::classifier::{Classifier, ClassifierError, FlowMatch, RuleId};
use crate::table::flow_cache::{FlowCache, same_key};

/// Counters of the flow lookup stage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowLookupCounters {
    /// Packets the cache answered (with a probe, or as a repeat of the packet before).
    pub cache_hits: u64,
    pub classifier_hits: u64,
    pub misses: u64,
}

/// Which tier answered one packet's lookup; its `Display` is the stage's trace line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Looked {
    /// Dropped by an earlier stage: not looked up.
    Skipped,
    CacheHit,
    /// The classifier answered; `cached`: the answer was written into the cache.
    ClassifierHit {
        cached: bool,
    },
    /// Neither tier knew the packet: the caller's slow path decides.
    Miss,
}

impl fmt::Display for Looked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Looked::Skipped => "-",
            Looked::CacheHit => "cache hit",
            Looked::ClassifierHit { cached: true } => "cache miss -> classifier hit, cached",
            Looked::ClassifierHit { cached: false } => "cache miss -> classifier hit",
            Looked::Miss => "cache miss -> classifier miss",
        })
    }
}

/// Packets `start..start + len` of a batch, decided alike: either one packet (dropped before:
/// `value` is `None`; or looked up: `value` is its answer, `None` when no tier knew it), or a
/// train of live packets with equal keys whose first the cache answered (`value`), the others
/// taking that answer without a probe. The batch's groups are its packets in order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowGroup<V> {
    pub start: usize,
    pub len: usize,
    pub value: Option<V>,
}

impl<V> FlowGroup<V> {
    /// The packets of the group.
    pub fn packets(&self) -> std::ops::Range<usize> {
        self.start..self.start + self.len
    }
}

/// Cache plus classifier; the value of a rule (`V`) is what a lookup returns.
pub struct FlowLookup<V: Copy + Default> {
    cache: FlowCache<V>,
    classifier: Classifier<V>,
    counters: FlowLookupCounters,
    batches: u32,
    /// What `process::<true>` found for each packet of the last batch.
    trace: [Looked; MAX_BATCH],
    /// The runs of the batch being looked up (see `cut_runs`).
    runs: [Run; MAX_BATCH],
    /// Per packet of the batch [`FlowLookup::process_cached`] is deciding: whether it opens a
    /// run (and is probed) or repeats the packet before it.
    opens_run: [bool; MAX_BATCH],
    /// Whether the keys the cache takes are noted in `noted` (see [`FlowLookup::note_cached`]).
    noting: bool,
    noted: Vec<(FlowKey, V)>,
}

/// Batches between two re-rankings of the classifier's subtables.
const RANK_EVERY: u32 = 64;

impl<V: Copy + Default> FlowLookup<V> {
    /// A cache of `cache_entries` inserting one miss in `insert_one_in`, in front of a
    /// classifier of `rules` rules.
    pub fn new(cache_entries: usize, insert_one_in: u32, rules: usize) -> Self {
        Self {
            cache: FlowCache::new(cache_entries, insert_one_in),
            classifier: Classifier::new(rules),
            counters: FlowLookupCounters::default(),
            batches: 0,
            trace: [Looked::Skipped; MAX_BATCH],
            runs: [Run::default(); MAX_BATCH],
            opens_run: [false; MAX_BATCH],
            noting: false,
            noted: Vec::new(),
        }
    }

    /// From now on, notes every key the cache takes with its value, until
    /// [`FlowLookup::take_cached`] hands them over: how a copy of the cache elsewhere (the
    /// kernel's fast path) is filled with the flows that earned a place in it. Room for a
    /// batch is reserved now; the caller takes the notes after every batch.
    pub fn note_cached(&mut self) {
        self.noting = true;
        self.noted.reserve_exact(MAX_BATCH);
    }

    /// The keys the cache took since the last call, with their values.
    pub fn take_cached(&mut self) -> std::vec::Drain<'_, (FlowKey, V)> {
        self.noted.drain(..)
    }

    /// The outcomes of the last batch processed with tracing on, packet by packet.
    pub fn trace(&self, len: usize) -> &[Looked] {
        self.trace.get(..len).unwrap_or(&self.trace)
    }

    /// Adds a rule and invalidates the cache. Between batches.
    pub fn insert(
        &mut self,
        priority: u32,
        matcher: FlowMatch,
        value: V,
    ) -> Result<RuleId, ClassifierError> {
        let id = self.classifier.insert(priority, matcher, value)?;
        self.cache.invalidate();
        Ok(id)
    }

    /// Adds a rule that agrees with every answer already given (a megaflow): the cache stays
    /// valid. Between batches or from the slow path of the same worker.
    pub fn install(&mut self, matcher: FlowMatch, value: V) -> Result<RuleId, ClassifierError> {
        self.classifier.insert(0, matcher, value)
    }

    /// Removes a rule and invalidates the cache. Between batches.
    pub fn remove(&mut self, id: RuleId) -> Option<V> {
        let value = self.classifier.remove(id)?;
        self.cache.invalidate();
        Some(value)
    }

    /// Removes every rule and invalidates the cache. Between batches.
    pub fn clear(&mut self) {
        self.classifier.clear();
        self.cache.invalidate();
        self.noted.clear();
    }

    pub fn classifier(&self) -> &Classifier<V> {
        &self.classifier
    }

    pub fn cache(&self) -> &FlowCache<V> {
        &self.cache
    }

    pub fn counters(&self) -> FlowLookupCounters {
        self.counters
    }

    /// Looks up one key (hash: its CRC32C).
    #[inline]
    pub fn lookup(&mut self, hash: u32, key: &FlowKey) -> Option<V> {
        self.lookup_traced::<false>(hash, key).0
    }

    /// As [`FlowLookup::lookup`], and which tier answered (whether a classifier hit was cached
    /// is found out only with `TRACE`).
    #[inline(always)]
    pub fn lookup_traced<const TRACE: bool>(
        &mut self,
        hash: u32,
        key: &FlowKey,
    ) -> (Option<V>, Looked) {
        if let Some(value) = self.cache.lookup(hash, key) {
            self.counters.cache_hits += 1;
            return (Some(value), Looked::CacheHit);
        }
        self.lookup_uncached::<TRACE>(hash, key)
    }

    /// The classifier's part of a lookup the cache missed; out of line, so that only the
    /// cache's part is inlined into the batch loop.
    #[inline(never)]
    fn lookup_uncached<const TRACE: bool>(
        &mut self,
        hash: u32,
        key: &FlowKey,
    ) -> (Option<V>, Looked) {
        match self.classifier.classify(key) {
            Some(id) => {
                let Some(value) = self.classifier.data(id).copied() else {
                    return (None, Looked::Miss);
                };
                self.counters.classifier_hits += 1;
                let noting = TRACE || self.noting;
                let before = if noting {
                    self.cache.counters().inserted
                } else {
                    0
                };
                self.cache.insert(hash, key, value);
                let cached = noting && self.cache.counters().inserted != before;
                // Within the room reserved once: a batch inserts at most a batch of keys.
                if self.noting && cached && self.noted.len() < self.noted.capacity() {
                    self.noted.push((*key, value));
                }
                (
                    Some(value),
                    Looked::ClassifierHit {
                        cached: TRACE && cached,
                    },
                )
            }
            None => {
                self.counters.misses += 1;
                (None, Looked::Miss)
            }
        }
    }

    /// Looks up every packet of `batch` not dropped yet (`keys[i]` its flow key) and writes the
    /// batch, in order, as [`FlowGroup`]s into `groups` (which must hold a batch: `MAX_BATCH`);
    /// returns how many. Sets every live packet's `meta.flow_hash` (the parse before need not:
    /// see the module's doc). With `TRACE`, which tier answered each packet is kept for
    /// [`FlowLookup::trace`].
    pub fn process<const TRACE: bool>(
        &mut self,
        batch: &mut Batch,
        keys: &[FlowKey],
        groups: &mut [FlowGroup<V>],
    ) -> usize {
        self.count_batch();
        let metas = batch.meta_mut();
        let count = metas.len().min(keys.len()).min(groups.len());
        let (metas, keys) = (&mut metas[..count], &keys[..count]);
        let runs = self.cut_runs(metas, keys);
        let mut made = 0;
        for r in 0..runs {
            let Some(&run) = self.runs.get(r) else {
                break;
            };
            let (Some(first), Some(key)) = (metas.get(run.start), keys.get(run.start)) else {
                break;
            };
            if !run.live {
                made += push(groups, made, run.start, None);
                if TRACE && let Some(slot) = self.trace.get_mut(run.start) {
                    *slot = Looked::Skipped;
                }
                continue;
            }
            // Every packet of the run has this key. Each is looked up until the cache answers
            // one; the rest of the run then joins that packet's group without a probe.
            let hash = first.flow_hash;
            let end = run.start + run.len;
            for i in run.start..end {
                let (value, looked) = self.lookup_traced::<TRACE>(hash, key);
                made += push(groups, made, i, value);
                if TRACE && let Some(slot) = self.trace.get_mut(i) {
                    *slot = looked;
                }
                if looked == Looked::CacheHit && i + 1 < end {
                    let rest = end - i - 1;
                    self.counters.cache_hits += rest as u64;
                    if let Some(last) = made.checked_sub(1).and_then(|last| groups.get_mut(last)) {
                        last.len += rest;
                    }
                    if TRACE && let Some(slots) = self.trace.get_mut(i + 1..end) {
                        slots.fill(Looked::CacheHit);
                    }
                }
                if looked == Looked::CacheHit {
                    break;
                }
            }
        }
        made
    }

    /// The batch decided by the cache alone, when the cache knows every live packet's key
    /// (nearly every batch of established flows): writes each live packet's answer into
    /// `values[i]` (a dropped packet's is left alone), and counts, and sets the packets'
    /// `meta.flow_hash`, exactly as [`FlowLookup::process`] would for that batch; returns how
    /// many runs the batch made. Otherwise returns `None` with no answer given and nothing
    /// counted (hashes written are those `process` writes too), and the caller runs `process`.
    ///
    /// The same runs as `process` (a repeated key takes the answer of the packet before
    /// without a probe), but no groups: the caller decides packet by packet from `values`,
    /// which for many flows, where every group is one packet, saves the groups' building and
    /// reading (docs/benchmarks.md, "Apps").
    pub fn process_cached(
        &mut self,
        batch: &mut Batch,
        keys: &[FlowKey],
        values: &mut [V],
    ) -> Option<usize> {
        let metas = batch.meta_mut();
        if keys.len() < metas.len() || values.len() < metas.len() {
            return None;
        }
        // Pass one: hash each run's key once and start loading its cache slot.
        let mut open: Option<(&FlowKey, u32)> = None;
        for ((meta, key), opens) in metas.iter_mut().zip(keys).zip(&mut self.opens_run) {
            if !is_live(meta) {
                open = None;
                continue;
            }
            *opens = join_run(&mut open, meta, key, &self.cache);
        }
        // Pass two: probe each run, give its answer to every packet of it.
        let (mut runs, mut live) = (0u64, 0u64);
        let mut answer = None;
        for (((meta, key), &opens), value) in metas
            .iter()
            .zip(keys)
            .zip(&self.opens_run)
            .zip(values.iter_mut())
        {
            if !is_live(meta) {
                continue;
            }
            if opens {
                answer = self.cache.peek(meta.flow_hash, key);
                runs += 1;
            }
            let found = answer?;
            *value = found;
            live += 1;
        }
        self.count_batch();
        self.cache.count_hits(runs);
        self.counters.cache_hits += live;
        Some(runs as usize)
    }

    /// Counts a batch looked up, and re-ranks the classifier's subtables every
    /// [`RANK_EVERY`] batches.
    fn count_batch(&mut self) {
        self.batches = self.batches.wrapping_add(1);
        if self.batches.is_multiple_of(RANK_EVERY) {
            self.classifier.rank();
        }
    }

    /// Cuts the batch into runs in `self.runs` (a dropped packet alone, or consecutive live
    /// packets with equal keys) and returns how many. Each run's key is hashed once, into the
    /// `meta.flow_hash` of all its packets, and its first cache slot prefetched, so that the
    /// probes that follow overlap their memory reads.
    fn cut_runs(&mut self, metas: &mut [Meta], keys: &[FlowKey]) -> usize {
        let mut made = 0;
        // The key and hash of the run still open.
        let mut open: Option<(&FlowKey, u32)> = None;
        for (i, (meta, key)) in metas.iter_mut().zip(keys).enumerate() {
            if !is_live(meta) {
                open = None;
                made += push_run(&mut self.runs, made, i, false);
                continue;
            }
            if join_run(&mut open, meta, key, &self.cache) {
                made += push_run(&mut self.runs, made, i, true);
            } else if let Some(run) = made.checked_sub(1).and_then(|last| self.runs.get_mut(last)) {
                run.len += 1;
            }
        }
        made
    }
}

/// Consecutive packets of a batch that share one lookup: a dropped packet alone, or live
/// packets with equal keys.
#[derive(Clone, Copy, Debug, Default)]
struct Run {
    start: usize,
    len: usize,
    live: bool,
}

/// Puts a live packet into the run still `open` (its key and hash) or opens a new one with it;
/// returns whether it opened one. Either way the packet's `meta.flow_hash` is its key's hash:
/// the run's, for a key equal to the run's, or computed now, and then its first cache slot is
/// prefetched so that the probes after overlap their memory reads.
#[inline(always)]
fn join_run<'k, V: Copy>(
    open: &mut Option<(&'k FlowKey, u32)>,
    meta: &mut Meta,
    key: &'k FlowKey,
    cache: &FlowCache<V>,
) -> bool {
    if let Some((before, hash)) = *open
        && same_key(before, key)
    {
        meta.flow_hash = hash;
        return false;
    }
    let hash = key.hash();
    meta.flow_hash = hash;
    cache.prefetch(hash);
    *open = Some((key, hash));
    true
}

/// Opens a run of packet `start` at `runs[at]`; returns how many runs it added.
#[inline]
fn push_run(runs: &mut [Run], at: usize, start: usize, live: bool) -> usize {
    match runs.get_mut(at) {
        Some(run) => {
            *run = Run {
                start,
                len: 1,
                live,
            };
            1
        }
        None => 0,
    }
}

/// Writes a group of packet `start` alone at `groups[at]`; returns how many groups it added.
#[inline]
fn push<V>(groups: &mut [FlowGroup<V>], at: usize, start: usize, value: Option<V>) -> usize {
    match groups.get_mut(at) {
        Some(group) => {
            *group = FlowGroup {
                start,
                len: 1,
                value,
            };
            1
        }
        None => 0,
    }
}

#[inline]
fn is_live(meta: &Meta) -> bool {
    meta.drop.is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_traced_batch_says_which_tier_answered() {
        let mut lookup = FlowLookup::<u32>::new(64, 1, 16);
        let key = FlowKey {
            in_port: 1,
            ..FlowKey::default()
        };
        lookup.insert(1, FlowMatch::any().in_port(1), 7).unwrap();
        let mut batch = Batch::new(4);
        for _ in 0..2 {
            batch.push_with_meta(wirespeed_packet::Desc::default(), Meta::EMPTY);
        }
        batch.push_with_meta(
            wirespeed_packet::Desc::default(),
            Meta {
                drop: Some(wirespeed_packet::DropReason::Truncated),
                ..Meta::EMPTY
            },
        );
        let keys = [key; 3];
        let mut groups = [FlowGroup::default(); MAX_BATCH];
        let made = lookup.process::<true>(&mut batch, &keys, &mut groups);
        assert!(batch.meta()[..2].iter().all(|m| m.flow_hash == key.hash()));
        // The first packet is a classifier hit, so the second (a cache hit) starts a group.
        let group = |start, value| FlowGroup {
            start,
            len: 1,
            value,
        };
        assert_eq!(
            groups[..made],
            [group(0, Some(7)), group(1, Some(7)), group(2, None)]
        );
        let lines: Vec<String> = lookup.trace(3).iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            ["cache miss -> classifier hit, cached", "cache hit", "-"]
        );
        let other = FlowKey {
            in_port: 2,
            ..FlowKey::default()
        };
        assert_eq!(
            lookup.lookup_traced::<true>(other.hash(), &other),
            (None, Looked::Miss)
        );
        assert_eq!(Looked::Miss.to_string(), "cache miss -> classifier miss");
    }
}
