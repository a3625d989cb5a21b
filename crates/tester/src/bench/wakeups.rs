//! How late the DuT's core wakes a real-time thread, measured before the searches
//! (`cyclictest`'s measurement, on one core, for a second): the machine's own limit on zero-loss
//! rates, reported beside them.
//!
//! A DuT that polls or is woken per batch (wirespeed's worker, a kernel DuT's ingress NAPI
//! thread, both SCHED_FIFO 1 in the lab's placement) stops whenever its core does not run it:
//! while the hypervisor runs another guest's vCPU, or while a kernel without preemption finishes
//! another thread's system call. Its ingress ring keeps filling meanwhile: a veth's holds 256
//! frames, so a 1-ms stop loses frames above 0.26 Mpps whatever the DuT can do, and a trial in
//! which such a stop falls fails a zero-loss search. Neither the DuT nor the tester sees the stop;
//! a thread that asks to be woken every 200 µs on that core does, as lateness. On the
//! development VM (session nineteen, `cyclictest -m -p 1 -a 1 -i 200` for 60 s on the idle DuT
//! core) 3.5 wake-ups a second came 0.3 ms late or more and 0.8 a second 1 ms or more, the
//! worst 3.96 ms: the spread of the XDP DuTs' zero-loss rates between repeats.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// A veth's ingress ring (`VETH_RING_SIZE`), in frames: what a DuT behind one can absorb while
/// its core stops.
pub const VETH_RING_FRAMES: f64 = 256.0;

/// What a [`probe`] of one core found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Wakeups {
    /// The core measured.
    pub core: usize,
    /// Whether the probe ran at SCHED_FIFO 1 (as the DuT does); otherwise at normal priority,
    /// where the scheduler and the 50-µs timer slack add their own lateness.
    pub realtime: bool,
    /// How long, and how often the probe asked to be woken.
    pub seconds: f64,
    pub interval_us: f64,
    /// Wake-ups measured.
    pub samples: u64,
    /// Lateness percentiles and maximum, microseconds.
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    /// Wake-ups at least 0.3 ms and at least 1 ms late, per second.
    pub late_300us_per_second: f64,
    pub late_1ms_per_second: f64,
}

impl Wakeups {
    /// The rate, frames per second, above which the worst stop seen overflows a ring of `ring`
    /// frames: no zero-loss rate above it is the DuT's to claim on this machine.
    pub fn ring_bound(&self, ring: f64) -> f64 {
        ring / (self.max_us * 1e-6).max(1e-9)
    }

    /// One line for a report: the percentiles, the late wake-ups and the bound they put on a
    /// veth DuT's zero-loss rate.
    pub fn summary(&self) -> String {
        format!(
            "core {} woken every {:.0} µs for {:.1} s{}: late p50 {:.1} µs, p99 {:.1} µs, max \
             {:.2} ms; {:.1}/s at least 0.3 ms late, {:.1}/s at least 1 ms; the worst stop \
             overflows a veth's 256-frame ring above {:.3} Mpps",
            self.core,
            self.interval_us,
            self.seconds,
            if self.realtime {
                " at SCHED_FIFO 1"
            } else {
                " (normal priority: not allowed SCHED_FIFO)"
            },
            self.p50_us,
            self.p99_us,
            self.max_us / 1000.0,
            self.late_300us_per_second,
            self.late_1ms_per_second,
            self.ring_bound(VETH_RING_FRAMES) / 1e6,
        )
    }
}

/// Measures for `duration` how late `core` wakes a thread that sleeps until the next multiple
/// of `interval`, pinned there at SCHED_FIFO 1 where allowed. The thread sleeps nearly all the
/// time (a few µs of work per wake-up), so a DuT on that core loses almost nothing to it.
pub fn probe(core: usize, duration: Duration, interval: Duration) -> std::io::Result<Wakeups> {
    let interval = interval.max(Duration::from_micros(10));
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                wirespeed_io::thread::pin_to_core(core)?;
                let realtime = wirespeed_io::thread::set_fifo_priority(1).is_ok();
                let wanted = (duration.as_nanos() / interval.as_nanos()).max(1) as usize;
                let mut late_ns: Vec<u64> = Vec::with_capacity(wanted);
                let start = Instant::now();
                for tick in 1..=wanted as u32 {
                    let deadline = start + interval * tick;
                    if let Some(left) = deadline.checked_duration_since(Instant::now()) {
                        std::thread::sleep(left);
                    }
                    late_ns.push(deadline.elapsed().as_nanos() as u64);
                }
                Ok(summarise(
                    core,
                    realtime,
                    start.elapsed(),
                    interval,
                    late_ns,
                ))
            })
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the wake-up probe thread panicked")))
    })
}

fn summarise(
    core: usize,
    realtime: bool,
    took: Duration,
    interval: Duration,
    mut late_ns: Vec<u64>,
) -> Wakeups {
    late_ns.sort_unstable();
    let seconds = took.as_secs_f64();
    let at = |q: f64| {
        let index = ((late_ns.len() as f64 - 1.0) * q).round() as usize;
        late_ns.get(index).map_or(0.0, |&ns| ns as f64 / 1000.0)
    };
    let per_second = |from_ns: u64| {
        let late = late_ns.len() - late_ns.partition_point(|&ns| ns < from_ns);
        late as f64 / seconds.max(1e-9)
    };
    Wakeups {
        core,
        realtime,
        seconds,
        interval_us: interval.as_secs_f64() * 1e6,
        samples: late_ns.len() as u64,
        p50_us: at(0.5),
        p99_us: at(0.99),
        max_us: late_ns.last().map_or(0.0, |&ns| ns as f64 / 1000.0),
        late_300us_per_second: per_second(300_000),
        late_1ms_per_second: per_second(1_000_000),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_late_counts_and_the_ring_bound_come_from_the_samples() {
        // 1000 wake-ups in 0.5 s: 985 at 10 µs, 13 at 0.5 ms, 2 at 2 ms.
        let mut late = vec![10_000u64; 985];
        late.extend([500_000; 13]);
        late.extend([2_000_000; 2]);
        let w = summarise(
            1,
            true,
            Duration::from_millis(500),
            Duration::from_micros(200),
            late,
        );
        assert_eq!(w.samples, 1000);
        assert_eq!((w.p50_us, w.p99_us, w.max_us), (10.0, 500.0, 2000.0));
        assert_eq!(w.late_300us_per_second, 30.0);
        assert_eq!(w.late_1ms_per_second, 4.0);
        assert_eq!(w.ring_bound(256.0), 128_000.0, "256 frames in 2 ms");
        assert!(w.summary().contains("0.128 Mpps"), "{}", w.summary());
    }

    #[test]
    fn a_probe_of_this_core_counts_every_wake_up() {
        let w = probe(0, Duration::from_millis(100), Duration::from_micros(500)).unwrap();
        assert_eq!(w.samples, 200);
        assert_eq!(w.core, 0);
        assert!(w.seconds >= 0.1, "{w:?}");
        assert!(w.p50_us <= w.p99_us && w.p99_us <= w.max_us, "{w:?}");
    }
}
