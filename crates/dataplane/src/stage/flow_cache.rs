//! The flow lookup stage: exact-match [`FlowCache`] first, wildcard [`Classifier`] on a miss,
//! for a whole batch (the first two tiers of Open vSwitch's datapath lookup).
//!
//! Anatomy:
//! * counters: `cache_hits`, `classifier_hits`, `misses` (they never overlap: each looked-up
//!   packet adds to exactly one);
//! * dispositions: none of its own — it fills `results[i]` with the value of the rule that
//!   decides packet *i* (`None`: no rule; the caller's slow path decides), and leaves packets
//!   that an earlier stage dropped alone;
//! * one batch function, [`FlowLookup::process`]: first a pass that prefetches every packet's
//!   cache slot, then the lookups, so the memory reads of a batch overlap;
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
use crate::table::flow_cache::FlowCache;

/// Counters of the flow lookup stage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowLookupCounters {
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

/// Cache plus classifier; the value of a rule (`V`) is what a lookup returns.
pub struct FlowLookup<V: Copy + Default> {
    cache: FlowCache<V>,
    classifier: Classifier<V>,
    counters: FlowLookupCounters,
    batches: u32,
    /// What `process::<true>` found for each packet of the last batch.
    trace: [Looked; MAX_BATCH],
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
        }
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
    #[inline]
    pub fn lookup_traced<const TRACE: bool>(
        &mut self,
        hash: u32,
        key: &FlowKey,
    ) -> (Option<V>, Looked) {
        if let Some(value) = self.cache.lookup(hash, key) {
            self.counters.cache_hits += 1;
            return (Some(value), Looked::CacheHit);
        }
        match self.classifier.classify(key) {
            Some(id) => {
                let Some(value) = self.classifier.data(id).copied() else {
                    return (None, Looked::Miss);
                };
                self.counters.classifier_hits += 1;
                let before = if TRACE {
                    self.cache.counters().inserted
                } else {
                    0
                };
                self.cache.insert(hash, key, value);
                let cached = TRACE && self.cache.counters().inserted != before;
                (Some(value), Looked::ClassifierHit { cached })
            }
            None => {
                self.counters.misses += 1;
                (None, Looked::Miss)
            }
        }
    }

    /// Fills `results[i]` for every packet of `batch` not dropped yet (`keys[i]` its flow key,
    /// `meta.flow_hash` its hash); dropped packets get `None`. With `TRACE`, which tier
    /// answered each is kept for [`FlowLookup::trace`].
    pub fn process<const TRACE: bool>(
        &mut self,
        batch: &Batch,
        keys: &[FlowKey],
        results: &mut [Option<V>],
    ) {
        self.batches = self.batches.wrapping_add(1);
        if self.batches.is_multiple_of(RANK_EVERY) {
            self.classifier.rank();
        }
        let metas = batch.meta();
        for meta in metas {
            self.cache.prefetch(meta.flow_hash);
        }
        for (i, ((meta, key), result)) in metas.iter().zip(keys).zip(results.iter_mut()).enumerate()
        {
            let (found, looked) = if is_live(meta) {
                self.lookup_traced::<TRACE>(meta.flow_hash, key)
            } else {
                (None, Looked::Skipped)
            };
            *result = found;
            if TRACE && let Some(slot) = self.trace.get_mut(i) {
                *slot = looked;
            }
        }
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
            batch.push_with_meta(
                wirespeed_packet::Desc::default(),
                Meta {
                    flow_hash: key.hash(),
                    ..Meta::EMPTY
                },
            );
        }
        batch.push_with_meta(
            wirespeed_packet::Desc::default(),
            Meta {
                drop: Some(wirespeed_packet::DropReason::Truncated),
                ..Meta::EMPTY
            },
        );
        let keys = [key; 3];
        let mut results = [None; 3];
        lookup.process::<true>(&batch, &keys, &mut results);
        assert_eq!(results, [Some(7), Some(7), None]);
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
