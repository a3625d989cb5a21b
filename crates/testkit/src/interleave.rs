//! Two workloads timed in alternating short blocks, for benchmarks that report one as a ratio
//! to the other (an app against the cross-connect).
//!
//! On a shared machine the load changes from one second to the next; two figures measured a
//! minute apart (criterion's way, one benchmark after the other) take that change into their
//! ratio. Alternating blocks of a few microseconds put both workloads under the same load, so
//! the ratio of the summed times keeps only what the workloads themselves cost.

use std::time::{Duration, Instant};

/// Runs `a` and `b` alternately, `steps` calls each, `rounds` times, and returns the time per
/// unit of each: nanoseconds per call divided by `units_per_call` (the packets one call
/// forwards, say).
pub fn interleaved(
    rounds: u32,
    steps: u32,
    units_per_call: f64,
    a: impl FnMut(),
    b: impl FnMut(),
) -> (f64, f64) {
    let epoch = Instant::now();
    interleaved_on(|| epoch.elapsed(), rounds, steps, units_per_call, a, b)
}

/// [`interleaved`] on any clock (time since an epoch), so the accounting can be checked with
/// a clock that only the workloads move.
fn interleaved_on(
    mut now: impl FnMut() -> Duration,
    rounds: u32,
    steps: u32,
    units_per_call: f64,
    mut a: impl FnMut(),
    mut b: impl FnMut(),
) -> (f64, f64) {
    let (mut a_time, mut b_time) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..rounds {
        let start = now();
        for _ in 0..steps {
            a();
        }
        let middle = now();
        for _ in 0..steps {
            b();
        }
        b_time += now() - middle;
        a_time += middle - start;
    }
    let units = f64::from(rounds) * f64::from(steps) * units_per_call;
    (
        a_time.as_nanos() as f64 / units,
        b_time.as_nanos() as f64 / units,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::cell::Cell;

    #[test]
    fn each_side_is_charged_its_own_time() {
        // A clock that only the workloads move: a call of `a` takes 300 µs, one of `b` 100 µs,
        // so the figures are exact whatever else the machine is doing.
        let clock = Cell::new(Duration::ZERO);
        let work = |micros: u64| {
            let clock = &clock;
            move || clock.set(clock.get() + Duration::from_micros(micros))
        };
        let (a, b) = interleaved_on(|| clock.get(), 10, 4, 2.0, work(300), work(100));
        assert_eq!((a, b), (150_000.0, 50_000.0));
    }
}
