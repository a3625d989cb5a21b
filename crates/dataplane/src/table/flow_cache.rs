//! The exact-match flow cache: flow key -> a small value (an action or result index), the first
//! tier of every flow lookup (Open vSwitch's EMC, `lib/dpif-netdev-dfc.h`).
//!
//! * **Fixed size.** A power-of-two array of entries allocated once; nothing ever grows, so a
//!   storm of distinct flows costs misses, never memory.
//! * **Two probes.** Each key may live in two slots chosen by different bits of its CRC32C
//!   (`Meta::flow_hash`, computed by the parse stage): one cache line read per probe, and two
//!   flows that collide on one slot can still both stay.
//! * **Insertion with a probability.** A miss inserts only one time in `insert_one_in` (drawn
//!   from a xorshift generator, deterministic per cache). A long-lived flow gets in after a few
//!   dozen packets; a storm of one-packet flows replaces only a small fraction of the entries,
//!   so the flows that matter keep hitting. Open vSwitch defaults to 1 in 100 for the same
//!   reason.
//! * **Invalidation by generation.** Every entry records the generation it was filled in; a
//!   change of the tables behind the cache bumps the generation ([`FlowCache::invalidate`]) and
//!   every older entry stops matching at once. No sweep, nothing per packet.

use wirespeed_packet::cpu::prefetch;
use wirespeed_packet::flow_key::FlowKey;

/// Counters of a flow cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowCacheCounters {
    /// Probes that found their key (a caller may answer a repeated key without probing).
    pub hits: u64,
    pub misses: u64,
    /// Entries written.
    pub inserted: u64,
    /// Insertions skipped by the insertion probability.
    pub skipped: u64,
    /// Valid entries overwritten by another flow.
    pub evicted: u64,
    /// Times the whole cache was invalidated.
    pub invalidations: u64,
}

/// A flow key as seven 64-bit words ([`FlowKey::words`]): compared with six XORs and ORs and
/// one branch, where a field-by-field comparison takes eleven branches (measured: 10 ns per
/// lookup -> 3 ns).
pub type Words = [u64; 7];

/// Whether two keys' words are equal (branch-free over the words).
#[inline]
pub fn same_words(a: &Words, b: &Words) -> bool {
    a.iter().zip(b).fold(0, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether two keys are equal: first the word of EtherType, ports, protocol and flags, where
/// distinct flows most often differ (so most unequal keys are told apart by one comparison),
/// then all seven words at once.
#[inline]
pub fn same_key(a: &FlowKey, b: &FlowKey) -> bool {
    let (a, b) = (a.stored_words(), b.stored_words());
    a[6] == b[6] && same_words(&a, &b)
}

/// One slot: a cache line for a `V` of four bytes (a probe reads one line, where an entry
/// that also kept its key's hash took 72 bytes and spanned two). Without the hash a probe
/// compares the generation first and then all seven words, which costs a few instructions
/// more than comparing the hash but no memory read more.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Entry<V> {
    key: Words,
    /// 0: empty; otherwise the cache generation the entry was written in.
    generation: u32,
    value: V,
}

/// A fixed-size exact-match cache from [`FlowKey`] to `V`.
pub struct FlowCache<V: Copy> {
    entries: Box<[Entry<V>]>,
    mask: usize,
    generation: u32,
    /// An insertion happens when the next random number is at most this.
    threshold: u32,
    enabled: bool,
    rng: u32,
    /// Valid entries: counted as they are written, so that [`FlowCache::len`] is no scan (the
    /// worker reports it after every sleep; a scan of 8192 slots was 512 KiB read per wake-up).
    filled: usize,
    counters: FlowCacheCounters,
}

impl<V: Copy + Default> FlowCache<V> {
    /// A cache of `entries` slots (rounded up to a power of two, at least 2) that inserts one
    /// miss in `insert_one_in` (1: every miss; 0: never, which turns the cache off).
    pub fn new(entries: usize, insert_one_in: u32) -> Self {
        let size = entries.clamp(2, 1 << 24).next_power_of_two();
        let empty = Entry {
            key: [0; 7],
            generation: 0,
            value: V::default(),
        };
        Self {
            entries: vec![empty; size].into_boxed_slice(),
            mask: size - 1,
            generation: 1,
            threshold: u32::MAX / insert_one_in.max(1),
            enabled: insert_one_in > 0,
            rng: 0x2545_f491,
            filled: 0,
            counters: FlowCacheCounters::default(),
        }
    }
}

impl<V: Copy> FlowCache<V> {
    #[inline]
    fn slots(&self, hash: u32) -> (usize, usize) {
        let first = hash as usize & self.mask;
        let second = hash.rotate_right(16) as usize & self.mask;
        (first, second)
    }

    /// Brings the first slot of `hash` towards the CPU; call for a whole batch before looking up.
    #[inline]
    pub fn prefetch(&self, hash: u32) {
        let (first, _) = self.slots(hash);
        if let Some(entry) = self.entries.get(first) {
            prefetch(entry);
        }
    }

    #[inline]
    fn valid(&self, entry: &Entry<V>) -> bool {
        entry.generation == self.generation
    }

    /// The value cached for `key` (whose CRC32C is `hash`). Always inlined: it runs once per
    /// packet, and as a call it spent as many instructions saving and restoring registers as
    /// comparing the key (callgrind, openflow cache-hit bench).
    #[inline(always)]
    pub fn lookup(&mut self, hash: u32, key: &FlowKey) -> Option<V> {
        let found = self.peek(hash, key);
        if found.is_some() {
            self.counters.hits += 1;
        } else {
            self.counters.misses += 1;
        }
        found
    }

    /// [`FlowCache::lookup`] without counting: for a caller that may take back its probes
    /// (and then counts the hits it kept with [`FlowCache::count_hits`]).
    #[inline(always)]
    pub fn peek(&self, hash: u32, key: &FlowKey) -> Option<V> {
        let (first, second) = self.slots(hash);
        for slot in [first, second] {
            let entry = &self.entries[slot];
            // The key's words are read here, after the generation matched, not held across
            // both probes (which spilled them to the stack in the batch loop).
            if self.valid(entry) && same_words(&entry.key, &key.stored_words()) {
                return Some(entry.value);
            }
        }
        None
    }

    /// Counts `probes` probes that found their key, made with [`FlowCache::peek`].
    pub fn count_hits(&mut self, probes: u64) {
        self.counters.hits += probes;
    }

    /// Offers `key -> value` after a miss; written with the insertion probability.
    #[inline]
    pub fn insert(&mut self, hash: u32, key: &FlowKey, value: V) {
        if !self.enabled {
            return;
        }
        // xorshift32: cheap, deterministic, good enough to spread insertions.
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.rng = x;
        if x > self.threshold {
            self.counters.skipped += 1;
            return;
        }
        self.insert_always(hash, key, value);
    }

    /// Writes `key -> value` regardless of the insertion probability.
    pub fn insert_always(&mut self, hash: u32, key: &FlowKey, value: V) {
        let (first, second) = self.slots(hash);
        let key = key.words();
        let same = |e: &Entry<V>| same_words(&e.key, &key);
        let slot = if same(&self.entries[first]) || !self.valid(&self.entries[first]) {
            first
        } else if same(&self.entries[second]) || !self.valid(&self.entries[second]) {
            second
        } else {
            self.counters.evicted += 1;
            if self.rng & 1 == 0 { first } else { second }
        };
        self.filled += usize::from(!self.valid(&self.entries[slot]));
        self.entries[slot] = Entry {
            key,
            generation: self.generation,
            value,
        };
        self.counters.inserted += 1;
    }

    /// Makes every entry stale at once (the tables behind the cache changed).
    pub fn invalidate(&mut self) {
        self.counters.invalidations += 1;
        self.filled = 0;
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            // After 2^32 invalidations old generations would come back: empty the slots once.
            for entry in self.entries.iter_mut() {
                entry.generation = 0;
            }
            self.generation = 1;
        }
    }

    /// Slots in the cache.
    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    /// Valid entries.
    pub fn len(&self) -> usize {
        self.filled
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the cache occupies; fixed at construction.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.entries)
    }

    pub fn counters(&self) -> FlowCacheCounters {
        self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u16) -> FlowKey {
        FlowKey {
            l4_src: n,
            ..FlowKey::EMPTY
        }
    }

    #[test]
    fn hits_after_insert_and_not_after_invalidate() {
        let mut cache = FlowCache::<u32>::new(16, 1);
        let k = key(7);
        assert_eq!(cache.lookup(k.hash(), &k), None);
        cache.insert(k.hash(), &k, 42);
        assert_eq!(cache.lookup(k.hash(), &k), Some(42));
        cache.invalidate();
        assert_eq!(cache.lookup(k.hash(), &k), None);
        assert!(cache.is_empty());
    }

    /// The count kept as entries are written is the number a scan of the slots finds, through
    /// overwrites, evictions and invalidations.
    #[test]
    fn the_count_of_entries_is_what_a_scan_finds() {
        let mut cache = FlowCache::<u32>::new(64, 1);
        let scan = |cache: &FlowCache<u32>| cache.entries.iter().filter(|e| cache.valid(e)).count();
        for round in 0..3u16 {
            for n in 0..200u16 {
                let k = key(n % (50 + 40 * round));
                cache.insert_always(k.hash(), &k, u32::from(n));
                assert_eq!(cache.len(), scan(&cache));
            }
            cache.invalidate();
            assert_eq!((cache.len(), scan(&cache)), (0, 0));
        }
    }

    #[test]
    fn insert_one_in_n_inserts_about_one_in_n() {
        let mut cache = FlowCache::<u32>::new(1024, 10);
        for n in 0..10_000u16 {
            let k = key(n);
            cache.insert(k.hash(), &k, 1);
        }
        let inserted = cache.counters().inserted;
        assert!((700..1300).contains(&inserted), "{inserted}");
    }

    #[test]
    fn an_entry_of_the_apps_values_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<Entry<u32>>(), 64);
        let cache = FlowCache::<u32>::new(8, 1);
        assert_eq!(cache.entries.as_ptr() as usize % 64, 0);
        assert_eq!(cache.memory_bytes(), 8 * 64);
    }

    #[test]
    fn zero_turns_the_cache_off() {
        let mut cache = FlowCache::<u32>::new(16, 0);
        let k = key(1);
        cache.insert(k.hash(), &k, 1);
        assert_eq!(cache.lookup(k.hash(), &k), None);
    }
}
