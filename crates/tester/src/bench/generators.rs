//! Generators side by side on the same veth: how fast each [`Backend`] puts 64-byte frames
//! through `t0`, measured the same way for all of them.
//!
//! **Method.** The lab's placement is the forwarding benchmark's ([`place_kernel`]): `d0` has
//! threaded NAPI on the DuT core, and the sender `t0` has TSO off so that veth hands every frame
//! to that NAPI thread whatever built it. On `d0` sits the XDP counting sink ([`XdpSink`]): it
//! counts and drops each frame in `d0`'s NAPI poll, before any skb, so the receive side costs
//! as little as a receiver can, runs on the other core, and is the same for every generator. A
//! trial starts one generator pinned to the generator core, lets it run for a warm-up, then
//! reads the sink's count at the start and at the end of a window of N seconds: the rate is
//! frames over the window's measured length. Trials are interleaved (A B C A B C ...), as in the
//! forwarding benchmark, and each generator gets the median and range of its runs. Frames that
//! find `d0`'s ring (256 slots) full are dropped by veth and not counted: the figure is what
//! arrived, not what was attempted.
//!
//! Each trial also reports the share of the window `d0`'s NAPI thread ran and the share of the
//! generator core spent in softirq (/proc/stat), which shows where the kernel's work went.
//!
//! **A check on both sides.** Over the whole trial (start to stop) the generator's own count of
//! frames sent is compared with the kernel's counts for `t0`: it must lie between the frames `t0`
//! transmitted and those plus the ones it dropped at `d0`'s full ring (the lab kernels' own few
//! frames aside), or the figure is not to be trusted.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::median;
use super::placement::{Placed, Plan, napi_threads, place_kernel};
use crate::dut::Wiring;
use crate::generator::{Backend, Spec};
use crate::trial::InterfaceCounters;
use wirespeed_io::afxdp::{XdpMode, XdpSink};

/// What to run.
#[derive(Clone, Debug)]
pub struct GeneratorConfig {
    /// Trials per generator.
    pub runs: usize,
    /// Length of the measured window.
    pub seconds: f64,
    /// Sending before the window opens (sockets and rings settle, testpmd's first bursts).
    pub warm_up: Duration,
    /// Frame size including FCS.
    pub frame_size: u16,
    pub plan: Plan,
}

impl Default for GeneratorConfig {
    fn default() -> Self {
        Self {
            runs: 3,
            seconds: 5.0,
            warm_up: Duration::from_secs(1),
            frame_size: 64,
            plan: Plan::default(),
        }
    }
}

/// Counts of one trial.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GeneratorMeasurement {
    /// Frames the sink on `d0` counted during the window.
    pub received: u64,
    /// The window's measured length.
    pub seconds: f64,
    /// Share of the window `d0`'s NAPI threads ran, 0..=1 per thread summed.
    pub napi_busy: f64,
    /// Share of the window the generator core spent in softirq (where `d0`'s receive would
    /// run if veth bypassed its NAPI).
    pub generator_softirq: f64,
    /// Frames the generator says it sent, start to stop.
    pub generator_sent: u64,
    /// Frames the kernel counted out of `t0` (`tx_packets`), start to stop.
    pub kernel_sent: u64,
    /// Frames `t0` counted as dropped (`tx_dropped`: veth found `d0`'s ring full), start to
    /// stop. Whether a sender sees such a drop, and sends the frame again, depends on the
    /// sender, so the generator's count lies between `kernel_sent` and the sum.
    pub kernel_dropped: u64,
}

impl GeneratorMeasurement {
    /// Frames per second into `d0` during the window.
    pub fn pps(&self) -> f64 {
        if self.seconds > 0.0 {
            self.received as f64 / self.seconds
        } else {
            0.0
        }
    }

    /// How far the generator's count lies outside the kernel's bracket, `kernel_sent` to
    /// `kernel_sent + kernel_dropped`, as a share of `kernel_sent` (0 when both are 0).
    pub fn count_error(&self) -> f64 {
        let most = self.kernel_sent + self.kernel_dropped;
        let difference = if self.generator_sent < self.kernel_sent {
            self.kernel_sent - self.generator_sent
        } else {
            self.generator_sent.saturating_sub(most)
        } as f64;
        if self.kernel_sent == 0 {
            if self.generator_sent == 0 { 0.0 } else { 1.0 }
        } else {
            difference / self.kernel_sent as f64
        }
    }
}

/// One trial as it happened.
#[derive(Clone, Debug)]
pub struct GeneratorRecord {
    pub generator: String,
    /// 0-based run index.
    pub run: usize,
    /// The counts, or why the trial failed.
    pub outcome: Result<GeneratorMeasurement, String>,
    /// The sending threads and the NAPI threads, as read back.
    pub placement: Vec<Placed>,
    /// Commands the trial ran.
    pub commands: Vec<String>,
}

/// Runs every generator `config.runs` times, interleaved; stops early when `stop` is set.
/// `progress` is told about each trial as it ends.
pub fn run_generators(
    wiring: &Wiring,
    generators: &mut [Box<dyn Backend>],
    config: &GeneratorConfig,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&GeneratorRecord),
) -> Vec<GeneratorRecord> {
    let mut records = Vec::new();
    for run in 0..config.runs {
        for generator in generators.iter_mut() {
            if stop.load(Ordering::Relaxed) {
                return records;
            }
            let mut record = trial(generator.as_mut(), wiring, config, run, stop);
            if stop.load(Ordering::Relaxed) && record.outcome.is_ok() {
                record.outcome = Err(format!(
                    "{}: interrupted before the trial ended",
                    record.generator
                ));
            }
            progress(&record);
            records.push(record);
        }
    }
    records
}

/// One trial of one generator: place, start, warm up, window, stop (always).
pub fn trial(
    generator: &mut dyn Backend,
    wiring: &Wiring,
    config: &GeneratorConfig,
    run: usize,
    stop: &AtomicBool,
) -> GeneratorRecord {
    let mut placement = Vec::new();
    let mut commands = Vec::new();
    let windowed = window(
        generator,
        wiring,
        config,
        stop,
        &mut placement,
        &mut commands,
    );
    let stopped = generator.stop();
    let t0 = (&wiring.tester_ns, &wiring.ingress.tester_if);
    let outcome = windowed.and_then(|(mut measurement, t0_before)| {
        measurement.generator_sent = stopped?;
        let t0_after = InterfaceCounters::read(t0.0, t0.1)?;
        measurement.kernel_sent = t0_after.tx_packets.saturating_sub(t0_before.tx_packets);
        measurement.kernel_dropped = t0_after.tx_dropped.saturating_sub(t0_before.tx_dropped);
        Ok(measurement)
    });
    commands.extend(generator.commands());
    GeneratorRecord {
        generator: generator.name(),
        run,
        outcome,
        placement,
        commands,
    }
}

/// Everything up to the stop: returns the window's counts and `t0`'s counters before the start.
fn window(
    generator: &mut dyn Backend,
    wiring: &Wiring,
    config: &GeneratorConfig,
    stop: &AtomicBool,
    placement: &mut Vec<Placed>,
    commands: &mut Vec<String>,
) -> Result<(GeneratorMeasurement, InterfaceCounters), String> {
    let plan = &config.plan;
    placement.extend(place_kernel(wiring, plan, commands).map_err(|e| e.to_string())?);
    let spec = Spec {
        frame_size: config.frame_size,
        dst_mac: wiring.egress.tester_mac,
        core: plan.generator_cpu,
        nice: plan.nice,
    };
    let (ns, t0) = (&wiring.tester_ns, &wiring.ingress.tester_if);
    let (dut_ns, d0) = (&wiring.dut_ns, &wiring.ingress.dut_if);
    let sink = {
        let _inside =
            wirespeed_lab::enter(dut_ns).map_err(|error| format!("entering {dut_ns}: {error}"))?;
        XdpSink::attach(d0, XdpMode::Auto).map_err(|error| error.to_string())?
    };
    commands.push(format!(
        "(in {dut_ns}) XDP counting sink on {d0}, {} mode",
        sink.mode()
    ));
    let t0_before = InterfaceCounters::read(ns, t0)?;
    placement.extend(generator.start(wiring, &spec)?);
    sleep(config.warm_up, stop);
    let napi: Vec<u32> = napi_threads(d0).into_iter().map(|(pid, _)| pid).collect();
    let napi_ticks = || napi.iter().filter_map(|&pid| cpu_ticks(pid)).sum::<u64>();
    let softirq_ticks = || softirq_ticks(plan.generator_cpu).unwrap_or(0);
    let (first, opened) = read_timed(&sink)?;
    let before = (napi_ticks(), softirq_ticks());
    sleep(Duration::from_secs_f64(config.seconds), stop);
    let after = (napi_ticks(), softirq_ticks());
    let (last, closed) = read_timed(&sink)?;
    let seconds = closed.duration_since(opened).as_secs_f64();
    let share = |ticks: u64| ticks as f64 / CLOCK_TICKS_PER_SECOND / seconds.max(f64::EPSILON);
    let measurement = GeneratorMeasurement {
        received: last.saturating_sub(first),
        seconds,
        napi_busy: share(after.0.saturating_sub(before.0)),
        generator_softirq: share(after.1.saturating_sub(before.1)),
        ..GeneratorMeasurement::default()
    };
    Ok((measurement, t0_before))
}

/// The sink's packet count and when it was read (one system call, microseconds).
fn read_timed(sink: &XdpSink) -> Result<(u64, Instant), String> {
    let counts = sink
        .counts()
        .map_err(|error| format!("reading the sink on {}: {error}", sink.interface()))?;
    Ok((counts.packets, Instant::now()))
}

/// The unit of /proc's CPU times (`USER_HZ`, 100 on every Linux architecture's ABI).
const CLOCK_TICKS_PER_SECOND: f64 = 100.0;

/// CPU time task `pid` has used (`utime + stime`, fields 14 and 15 of /proc/PID/stat), in
/// clock ticks; `None` when it is gone.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_cpu_ticks(&stat)
}

/// `utime + stime` of a /proc/PID/stat line (the fields after the `)` closing the name, which
/// may itself hold spaces and parentheses).
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let (_, after_name) = stat.rsplit_once(')')?;
    let mut fields = after_name.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// The column of a `cpuN` line of /proc/stat (after the name), in clock ticks.
#[derive(Clone, Copy, Debug)]
pub(crate) enum CpuTime {
    /// Time in softirq.
    Softirq = 6,
    /// Time the hypervisor ran something else while this virtual CPU wanted to run.
    Steal = 7,
}

/// `what` of CPU `cpu` so far, in clock ticks (USER_HZ, 100 a second).
pub(crate) fn cpu_time(cpu: usize, what: CpuTime) -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    parse_cpu_time(&stat, cpu, what)
}

fn softirq_ticks(cpu: usize) -> Option<u64> {
    cpu_time(cpu, CpuTime::Softirq)
}

fn parse_cpu_time(stat: &str, cpu: usize, what: CpuTime) -> Option<u64> {
    let label = format!("cpu{cpu}");
    let line = stat
        .lines()
        .find(|line| line.split_whitespace().next() == Some(label.as_str()))?;
    line.split_whitespace().nth(1 + what as usize)?.parse().ok()
}

/// Sleeps `duration`, or less once `stop` is set.
fn sleep(duration: Duration, stop: &AtomicBool) {
    let end = Instant::now() + duration;
    while !stop.load(Ordering::Relaxed) {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

/// One generator over all its runs.
#[derive(Clone, Debug, PartialEq)]
pub struct GeneratorSummary {
    pub generator: String,
    /// Successful trials.
    pub trials: usize,
    pub median_pps: f64,
    pub min_pps: f64,
    pub max_pps: f64,
    /// The largest disagreement between the generator's and the kernel's count in any trial.
    pub worst_count_error: f64,
    /// The median share of the window `d0`'s NAPI thread ran.
    pub napi_busy_median: f64,
    /// The median share of the window the generator core spent in softirq.
    pub generator_softirq_median: f64,
    /// Why trials failed.
    pub errors: Vec<String>,
}

/// Summaries per generator, in the order the records first name them.
pub fn summarize_generators(records: &[GeneratorRecord]) -> Vec<GeneratorSummary> {
    let mut names: Vec<&str> = Vec::new();
    for record in records {
        if !names.contains(&record.generator.as_str()) {
            names.push(&record.generator);
        }
    }
    names
        .into_iter()
        .map(|name| {
            let of_name = records.iter().filter(|r| r.generator == name);
            let ok: Vec<GeneratorMeasurement> = of_name
                .clone()
                .filter_map(|r| r.outcome.clone().ok())
                .collect();
            let rates: Vec<f64> = ok.iter().map(GeneratorMeasurement::pps).collect();
            GeneratorSummary {
                generator: name.to_string(),
                trials: ok.len(),
                median_pps: median(&rates),
                min_pps: rates.iter().copied().reduce(f64::min).unwrap_or(0.0),
                max_pps: rates.iter().copied().fold(0.0, f64::max),
                worst_count_error: ok
                    .iter()
                    .map(GeneratorMeasurement::count_error)
                    .fold(0.0, f64::max),
                napi_busy_median: median(&ok.iter().map(|m| m.napi_busy).collect::<Vec<_>>()),
                generator_softirq_median: median(
                    &ok.iter().map(|m| m.generator_softirq).collect::<Vec<_>>(),
                ),
                errors: of_name.filter_map(|r| r.outcome.clone().err()).collect(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(generator: &str, received: u64, generator_sent: u64) -> GeneratorRecord {
        GeneratorRecord {
            generator: generator.into(),
            run: 0,
            outcome: Ok(GeneratorMeasurement {
                received,
                seconds: 2.0,
                napi_busy: received as f64 / 1000.0,
                generator_softirq: 0.5,
                generator_sent,
                kernel_sent: 1000,
                kernel_dropped: 5,
            }),
            placement: Vec::new(),
            commands: Vec::new(),
        }
    }

    #[test]
    fn summaries_take_the_median_range_and_worst_count_error_per_generator() {
        let records = vec![
            record("a", 200, 1000),
            record("b", 100, 990),
            record("a", 600, 1000),
            record("a", 400, 1010),
            GeneratorRecord {
                outcome: Err("b: testpmd exited".into()),
                ..record("b", 0, 0)
            },
        ];
        let summaries = summarize_generators(&records);
        assert_eq!(summaries.len(), 2);
        let a = &summaries[0];
        assert_eq!((a.generator.as_str(), a.trials), ("a", 3));
        assert_eq!((a.median_pps, a.min_pps, a.max_pps), (200.0, 100.0, 300.0));
        // 1010 sent by its own count against 1000 sent and 5 dropped by t0's: 5 outside.
        assert!((a.worst_count_error - 0.005).abs() < 1e-12);
        assert_eq!((a.napi_busy_median, a.generator_softirq_median), (0.4, 0.5));
        let b = &summaries[1];
        assert_eq!((b.trials, b.median_pps), (1, 50.0));
        // 990 against at least 1000: 10 short.
        assert!((b.worst_count_error - 0.01).abs() < 1e-12);
        assert_eq!(b.errors, vec!["b: testpmd exited".to_string()]);
        let nothing = GeneratorMeasurement::default();
        assert_eq!((nothing.pps(), nothing.count_error()), (0.0, 0.0));
        let phantom = GeneratorMeasurement {
            generator_sent: 5,
            ..nothing
        };
        assert_eq!(phantom.count_error(), 1.0);
    }

    #[test]
    fn cpu_ticks_are_read_after_the_name_whatever_it_holds() {
        let stat = "712 (napi/ws-d0 (x) 1) S 2 0 0 0 -1 2129984 0 0 0 0 250 1375 0 0 0 -20 1 0";
        assert_eq!(parse_cpu_ticks(stat), Some(1625));
        assert_eq!(parse_cpu_ticks("712 (short) S 2"), None);
        assert_eq!(parse_cpu_ticks("no parenthesis"), None);
        // This very process has a stat file.
        assert!(cpu_ticks(std::process::id()).is_some());
        let stat =
            "cpu  10 0 20 30 0 0 9 0 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\ncpu1 0 0 0 0 0 0 42 0 0 0\n";
        assert_eq!(parse_cpu_time(stat, 0, CpuTime::Softirq), Some(7));
        assert_eq!(parse_cpu_time(stat, 1, CpuTime::Softirq), Some(42));
        assert_eq!(parse_cpu_time(stat, 2, CpuTime::Softirq), None);
        assert_eq!(parse_cpu_time(stat, 0, CpuTime::Steal), Some(8));
        assert!(softirq_ticks(0).is_some());
    }
}
