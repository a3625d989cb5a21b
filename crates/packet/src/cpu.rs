//! The CPU instructions the data plane needs beyond plain Rust: the time-stamp counter, the
//! cache prefetch, and code compiled for the population count instruction ([`Popcnt`]).
//! Wrapped here so every other crate can stay `#![deny(unsafe_code)]`.
//!
//! The TSC is the clock of cycle accounting and pacing (seed 001 measures c_IO / c_task / c_busy
//! in cycles; `perf` counters are not available in these VMs). It is only meaningful on CPUs with
//! an invariant TSC (`constant_tsc` and `nonstop_tsc` in /proc/cpuinfo), which [`tsc_is_invariant`]
//! checks; [`tsc_hz`] measures its rate once against the monotonic clock.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Reads the time-stamp counter (cycles since reset). Not serialising: good for accounting over
/// many packets, not for timing a handful of instructions.
#[inline(always)]
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC exists on every x86_64 CPU and has no memory effects.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        // Nanoseconds of a monotonic clock stand in for cycles elsewhere (tsc_hz is then 1e9).
        static START: OnceLock<Instant> = OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// Asks the CPU to bring the cache line holding `value` into L1 (a hint; never faults).
#[inline(always)]
pub fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: PREFETCHT0 is part of SSE, which every x86_64 CPU has; it is a hint that never
        // faults and the pointer comes from a valid reference.
        unsafe { _mm_prefetch::<_MM_HINT_T0>((value as *const T).cast::<i8>()) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// Asks the CPU to bring the cache line holding `address` into L1: [`prefetch`] for an address
/// computed without a branch, which may lie outside any object (a hint that never faults, so any
/// address is sound; one outside the program's memory only costs a page walk).
#[inline(always)]
pub fn prefetch_address(address: *const u8) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: PREFETCHT0 is part of SSE, which every x86_64 CPU has; it only hints the cache
        // and never faults or reads the address architecturally, whatever the address is.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(address.cast::<i8>()) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

/// Proof that this CPU has the `popcnt` instruction: [`Popcnt::run`] runs code compiled for it.
///
/// The workspace builds for the baseline x86-64, which lacks `popcnt`, so `count_ones` is a
/// dozen instructions there; a binary built for a newer CPU would not start everywhere. A table
/// whose lookups count bits asks for a `Popcnt` once, when it is made, keeps it, and runs its
/// lookups through [`Popcnt::run`], where every `count_ones` inlined into the closure is one
/// instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Popcnt(());

impl Popcnt {
    /// `Some` where this CPU has `popcnt` (asked of the CPU at each call: call it once and keep
    /// the answer).
    pub fn detect() -> Option<Popcnt> {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("popcnt") {
            return Some(Popcnt(()));
        }
        None
    }

    /// Runs `f` in a function compiled with `popcnt` enabled. `f` and what it inlines
    /// (`#[inline(always)]` functions) are compiled with the instruction; a function it calls
    /// out of line is not.
    #[inline(always)]
    pub fn run<R>(self, f: impl FnOnce() -> R) -> R {
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "popcnt")]
            fn with_popcnt<R>(f: impl FnOnce() -> R) -> R {
                f()
            }
            // SAFETY: a `Popcnt` exists only where `detect` found the instruction on this CPU.
            unsafe { with_popcnt(f) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        f()
    }
}

/// TSC ticks per second, measured once (about 20 ms) against the monotonic clock.
pub fn tsc_hz() -> u64 {
    static HZ: OnceLock<u64> = OnceLock::new();
    *HZ.get_or_init(|| {
        let (start, t0) = (Instant::now(), rdtsc());
        while start.elapsed() < Duration::from_millis(20) {
            std::hint::spin_loop();
        }
        let (elapsed, ticks) = (start.elapsed(), rdtsc().wrapping_sub(t0));
        (ticks as f64 / elapsed.as_secs_f64()) as u64
    })
}

/// Whether the TSC ticks at a constant rate through frequency changes and idle states.
pub fn tsc_is_invariant() -> bool {
    let Ok(cpuinfo) = std::fs::read_to_string("/proc/cpuinfo") else {
        return false;
    };
    let flags = cpuinfo
        .lines()
        .find(|line| line.starts_with("flags"))
        .unwrap_or("");
    let has = |flag: &str| flags.split_whitespace().any(|f| f == flag);
    has("constant_tsc") && has("nonstop_tsc")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsc_advances_at_a_plausible_rate() {
        let hz = tsc_hz();
        assert!((100_000_000..10_000_000_000).contains(&hz), "tsc_hz = {hz}");
        let t0 = rdtsc();
        std::thread::sleep(Duration::from_millis(10));
        let elapsed = rdtsc() - t0;
        assert!(
            elapsed >= hz / 200,
            "10 ms took only {elapsed} ticks at {hz} Hz"
        );
    }
}
