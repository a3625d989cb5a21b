//! The memory's ceiling beside the tables: an array the size of a table's lookup arrays, read
//! one random 64-byte line per address, single and batched as the tables are.
//!
//! A table that reads one line per lookup, where its arrays are larger than the core's caches,
//! cannot look up faster than the memory hands out random lines; and how fast it does that
//! depends on the array's size (which share of it stays in L2, how far the rest is). So each
//! table's rate is printed beside this ceiling at its own size, measured in the same rounds:
//! a table near its ceiling is bound by the memory (only a smaller table, or fewer lines per
//! lookup, is faster); one far below it is bound by its own work. The batched read prefetches a
//! call's lines before it reads them, as the tables' batched lookups do.

use wirespeed_dataplane::table::fib::LOOKUP_STEP;
use wirespeed_packet::cpu::prefetch;
use wirespeed_packet::memory::ReservedTable;

use super::tables::LpmTable;

/// One cache line; its first word is its index, so that reads return something to fold.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u32; 16]);

/// `bytes` of lines in huge pages (as wirespeed's tables are), read at random.
pub struct LineReads {
    lines: ReservedTable<Line>,
}

/// An address as a well-mixed 64-bit number, which picks its line.
pub trait Spread {
    /// The address multiplied by an odd constant (Fibonacci hashing): the high bits depend on
    /// every bit of it.
    fn spread(&self) -> u64;
}

const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

impl Spread for u32 {
    fn spread(&self) -> u64 {
        u64::from(*self).wrapping_mul(GOLDEN)
    }
}

impl Spread for [u8; 16] {
    fn spread(&self) -> u64 {
        let addr = u128::from_ne_bytes(*self);
        (addr as u64 ^ (addr >> 64) as u64).wrapping_mul(GOLDEN)
    }
}

impl LineReads {
    /// Lines covering `bytes` (at least one); `None` when the memory cannot be reserved.
    pub fn new(bytes: usize) -> Option<Self> {
        let count = bytes.div_ceil(size_of::<Line>()).max(1);
        let mut lines = ReservedTable::new(count)?;
        if !lines.grow(count, Line([0; 16])) {
            return None;
        }
        for (i, line) in lines.iter_mut().enumerate() {
            line.0[0] = i as u32;
        }
        Some(LineReads { lines })
    }

    /// Bytes of the array.
    pub fn bytes(&self) -> usize {
        size_of_val(&*self.lines)
    }

    /// The line of `addr`: its spread's high half scaled to the number of lines (no division).
    #[inline(always)]
    fn line<A: Spread>(&self, addr: &A) -> &Line {
        let index = ((addr.spread() >> 32) * self.lines.len() as u64) >> 32;
        self.lines.get(index as usize).unwrap_or(&Line([0; 16]))
    }
}

impl<A: Spread> LpmTable<A> for LineReads {
    fn lookup_each(&self, addrs: &[A], hops: &mut [u32]) {
        for (hop, addr) in hops.iter_mut().zip(addrs) {
            *hop = self.line(addr).0[0];
        }
    }

    fn lookup_bulk(&self, addrs: &[A], hops: &mut [u32]) {
        for (addrs, hops) in addrs.chunks(LOOKUP_STEP).zip(hops.chunks_mut(LOOKUP_STEP)) {
            for addr in addrs {
                prefetch(self.line(addr));
            }
            for (hop, addr) in hops.iter_mut().zip(addrs) {
                *hop = self.line(addr).0[0];
            }
        }
    }

    fn memory_bytes(&self) -> usize {
        self.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_address_reads_a_line_of_the_array_and_both_ways_read_the_same() {
        let reads = LineReads::new(1 << 20).unwrap();
        assert_eq!(reads.bytes(), 1 << 20);
        let addrs: Vec<u32> = (0..10_000u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let (mut each, mut bulk) = (vec![0; addrs.len()], vec![0; addrs.len()]);
        reads.lookup_each(&addrs, &mut each);
        reads.lookup_bulk(&addrs, &mut bulk);
        assert_eq!(each, bulk);
        let lines = (1 << 20) / 64;
        assert!(each.iter().all(|&line| line < lines));
        let mut seen = each.clone();
        seen.sort_unstable();
        seen.dedup();
        // 10 000 random picks of 16 384 lines hit about 7 500 distinct ones.
        assert!(seen.len() > 5000, "spread over the lines: {}", seen.len());
        let v6: Vec<[u8; 16]> = (0..100u128).map(|i| (i << 80).to_be_bytes()).collect();
        let mut found = vec![0; v6.len()];
        reads.lookup_each(&v6, &mut found);
        assert!(
            found.iter().any(|&line| line != found[0]),
            "high bits count"
        );
    }
}
