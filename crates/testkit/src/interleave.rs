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
    mut a: impl FnMut(),
    mut b: impl FnMut(),
) -> (f64, f64) {
    let (mut a_time, mut b_time) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..rounds {
        let start = Instant::now();
        for _ in 0..steps {
            a();
        }
        let middle = Instant::now();
        for _ in 0..steps {
            b();
        }
        b_time += middle.elapsed();
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

    #[test]
    fn each_side_is_charged_its_own_time() {
        let spin = |micros: u64| {
            move || {
                let until = Instant::now() + Duration::from_micros(micros);
                while Instant::now() < until {}
            }
        };
        let (a, b) = interleaved(10, 4, 2.0, spin(300), spin(100));
        // 300 µs and 100 µs per call, two units per call; spinning never ends early.
        assert!(a >= 150_000.0 && b >= 50_000.0, "{a} {b}");
        assert!(a / b > 2.0 && a / b < 4.0, "{a} {b}");
    }
}
