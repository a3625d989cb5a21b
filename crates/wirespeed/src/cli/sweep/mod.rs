//! `wirespeed bench fib|model|batch`: the seeds' sweeps as commands, each writing a JSON file and
//! SVG plots into `--out` and printing a table. This module holds what the three share (the lab
//! session, the value parsers, medians, the JSON of a point); each sweep is in its own file:
//!
//! * [`fib`] (seed 002 Figure 4): a router DuT's throughput against its routing-table size;
//! * [`model`] (seed 001 §4, Figures 2 and 3): the cost model fitted to wirespeed's own backends;
//! * [`batch`] (seed 001 §5.5–5.6): wirespeed's batch size against throughput and latency;
//! * [`generator`]: not a sweep but the same session: traffic generators side by side (DPDK
//!   testpmd txonly and wirespeed's own) on the same veth.
//!
//! Every point is one DuT set up, verified, placed and blasted at full rate like `bench
//! forwarding`'s trials ([`wirespeed_tester::bench::sweep::point`]); with `--runs` above 1 the
//! points are repeated in interleaved order and the median is reported. The lab and every DuT
//! are taken down whatever happens, also on Ctrl-C (a point cut short is recorded as failed).

pub mod batch;
pub mod fib;
pub mod fib_reference;
pub mod generator;
pub mod model;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result, bail, ensure};
use clap::Args;
use serde_json::{Value, json};
use wirespeed_lab::{Testbed, TestbedConfig};
use wirespeed_packet::cpu::tsc_hz;
use wirespeed_tester::bench::placement::{Plan, SessionShield};
use wirespeed_tester::bench::sweep::PointRecord;
use wirespeed_tester::bench::{ForwardingConfig, median};
use wirespeed_tester::dut::{Dut, WirespeedBackend, Wiring};
use wirespeed_tester::generator::{Template, TemplateConfig};
use wirespeed_tester::report::svg::{Plot, Series, Style};

use crate::cli::numbers;

/// Options every sweep shares.
#[derive(Args, Clone, Debug)]
pub struct SweepCommon {
    /// Directory for the JSON results and the SVG plots (created if missing).
    #[arg(long, default_value = ".")]
    out: PathBuf,
    /// Seconds per blast, one trial of a point (0.001..=86400).
    #[arg(long, default_value_t = 3.0, value_parser = numbers::seconds())]
    trial_seconds: f64,
    /// Old spelling of `--trial-seconds`.
    #[arg(long, hide = true, value_parser = numbers::seconds())]
    seconds: Option<f64>,
    /// Repeats of every point, interleaved (the median is reported), 1..=1000.
    #[arg(long, default_value_t = 1, value_parser = numbers::repeats::<usize>())]
    runs: usize,
    /// Core of the generator thread.
    #[arg(long, default_value_t = 0)]
    generator_cpu: usize,
    /// Core of the DuT (its ingress NAPI thread and its worker).
    #[arg(long, default_value_t = 1)]
    dut_cpu: usize,
    /// Nice value for every benchmark thread (-20..=19), or `off` to leave priorities alone.
    #[arg(long, default_value = "-20", allow_hyphen_values = true, value_parser = numbers::nice_or_off())]
    nice: numbers::Nice,
    /// Old spelling of `--nice off`.
    #[arg(long, hide = true)]
    keep_priorities: bool,
}

impl SweepCommon {
    /// Seconds per trial, by `--trial-seconds` or its old spelling `--seconds`.
    fn trial_seconds(&self) -> f64 {
        numbers::renamed(self.seconds, "--seconds", "--trial-seconds").unwrap_or(self.trial_seconds)
    }
}

/// A count with an optional decimal suffix: `10k` = 10 000, `1M` = 1 000 000.
pub fn parse_count(text: &str) -> Result<u64> {
    let text = text.trim();
    let (digits, scale) = match text.char_indices().last() {
        Some((at, 'k' | 'K')) => (&text[..at], 1_000),
        Some((at, 'M')) => (&text[..at], 1_000_000),
        Some((at, 'G')) => (&text[..at], 1_000_000_000),
        _ => (text, 1),
    };
    let value: u64 = digits
        .parse()
        .with_context(|| format!("{text:?} is not a count; write e.g. 100, 10k or 1M"))?;
    value
        .checked_mul(scale)
        .with_context(|| format!("{text:?} is too large"))
}

/// A size in bytes with an optional binary suffix: `16KiB`, `1MiB`, `2GiB` (`K`, `M`, `G` and
/// `KB`... are binary too, as working sets are).
pub fn parse_bytes(text: &str) -> Result<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let scale: u64 = match unit {
        "" | "B" => 1,
        "K" | "KB" | "KiB" | "k" => 1 << 10,
        "M" | "MB" | "MiB" => 1 << 20,
        "G" | "GB" | "GiB" => 1 << 30,
        _ => bail!("{text:?} is not a size; write e.g. 16KiB, 4MiB or 1GiB"),
    };
    let value: u64 = digits
        .parse()
        .with_context(|| format!("{text:?} is not a size; write e.g. 16KiB, 4MiB or 1GiB"))?;
    value
        .checked_mul(scale)
        .with_context(|| format!("{text:?} is too large"))
}

/// A size for people: `16 KiB`, `256 MiB`.
pub fn bytes_label(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b.is_multiple_of(1 << 30) => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b.is_multiple_of(1 << 20) => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b.is_multiple_of(1 << 10) => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// The lab, the signal flag and the trial settings one sweep runs with.
struct Session {
    lab: Option<Testbed>,
    /// The sweep's session at the plan's nice value while it runs.
    _shield: SessionShield,
    wiring: Wiring,
    stop: Arc<AtomicBool>,
    config: ForwardingConfig,
    binary: PathBuf,
    out: PathBuf,
}

impl Session {
    fn open(prefix: &str, common: &SweepCommon) -> Result<Session> {
        ensure!(
            !prefix.is_empty() && prefix.len() <= 6,
            "--prefix {prefix:?} must be 1 to 6 characters (the kernel cuts thread names at 15 \
             bytes and the NAPI threads of the two pairs must stay distinct)"
        );
        let cores = wirespeed_io::thread::available_cores();
        ensure!(
            common.generator_cpu.max(common.dut_cpu) < cores,
            "this machine has {cores} core(s); --generator-cpu {} and --dut-cpu {} need more",
            common.generator_cpu,
            common.dut_cpu
        );
        if let Some(reason) = wirespeed_lab::unavailable_reason() {
            bail!("the sweep builds a lab, but {reason}");
        }
        std::fs::create_dir_all(&common.out)
            .with_context(|| format!("creating {}", common.out.display()))?;
        let binary =
            std::env::current_exe().context("finding this executable for the wirespeed DuTs")?;
        let stop = Arc::new(AtomicBool::new(false));
        for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(signal, Arc::clone(&stop))
                .context("installing the signal handler")?;
        }
        let plan = Plan {
            generator_cpu: common.generator_cpu,
            dut_cpu: common.dut_cpu,
            receiver_cpu: common.dut_cpu,
            nice: if common.keep_priorities {
                numbers::deprecated("--keep-priorities", "--nice off");
                None
            } else {
                common.nice.0
            },
        };
        let config = ForwardingConfig {
            flows: vec![1],
            runs: common.runs,
            seconds: common.trial_seconds(),
            plan,
            ceiling: false,
            ..ForwardingConfig::default()
        };
        let lab = Testbed::up(&TestbedConfig {
            prefix: prefix.into(),
            pairs: 2,
            queues: 1,
            calibration: false,
            mtu: wirespeed_lab::DEFAULT_MTU,
        })?;
        let wiring = Wiring::of(&lab).context("the lab has two pairs")?;
        Ok(Session {
            lab: Some(lab),
            _shield: SessionShield::new(plan.nice),
            wiring,
            stop,
            config,
            binary,
            out: common.out.clone(),
        })
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// The one-destination, one-flow template for `dut`, of the configuration's IP version.
    fn template(&self, dut: &dyn Dut) -> Result<Template> {
        let (src_ip, dst_ip) = self.config.ip.addresses(&self.wiring);
        Ok(Template::new(&TemplateConfig {
            frame_size: self.config.frame_size,
            src_mac: self.wiring.ingress.tester_mac,
            dst_mac: dut.destination_mac(&self.wiring),
            src_ip,
            dst_ip,
            flows: 1,
            ..TemplateConfig::default()
        })?)
    }

    /// Takes the lab down and returns its commands.
    fn close(&mut self) -> Result<Vec<String>> {
        let Some(lab) = self.lab.take() else {
            return Ok(Vec::new());
        };
        let commands = lab.commands().to_vec();
        lab.teardown().context("taking the lab down")?;
        Ok(commands)
    }

    /// Writes `value` as pretty JSON to `name` in the output directory.
    fn write_json(&self, name: &str, value: &Value) -> Result<PathBuf> {
        let path = self.out.join(name);
        let text = serde_json::to_string_pretty(value).context("rendering the JSON")?;
        std::fs::write(&path, text + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    }

    fn write_svg(&self, name: &str, plot: &Plot) -> Result<PathBuf> {
        let path = self.out.join(name);
        std::fs::write(&path, plot.render())
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Err(error) = self.close() {
            eprintln!("{error:#}");
        }
    }
}

/// The facts every result file starts with.
fn header(schema: &str, session: &Session, lab_commands: &[String]) -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or("unknown".to_string(), |(_, m)| m.trim().to_string());
    let output = |program: &str, args: &[&str]| {
        wirespeed_lab::run(program, args).map_or("unknown".to_string(), |s| s.trim().to_string())
    };
    json!({
        "schema": schema,
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "date": output("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]),
        "machine": {
            "cpus": wirespeed_io::thread::available_cores(),
            "cpu_model": cpu_model,
            "kernel": output("uname", &["-r"]),
            "tsc_hz": tsc_hz(),
            "load": std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim(),
        },
        "config": {
            "frame_size": session.config.frame_size,
            "seconds": session.config.seconds,
            "runs": session.config.runs,
            "generator_batch": session.config.batch,
            "generator_cpu": session.config.plan.generator_cpu,
            "dut_cpu": session.config.plan.dut_cpu,
            "nice": session.config.plan.nice,
        },
        "lab_commands": lab_commands,
    })
}

/// The last 40 lines of what a program DuT printed (its final counters and drop reasons), kept
/// with the point so that a loss can be read back.
fn output_tail(output: &str) -> String {
    let lines: Vec<&str> = output.lines().collect();
    let start = lines.len().saturating_sub(40);
    lines.get(start..).unwrap_or_default().join("\n")
}

/// A point as JSON.
fn point_json(record: &PointRecord) -> Value {
    let mut value = json!({
        "dut": record.dut,
        "value": record.value,
        "placement": record.placement.iter().map(|p| format!("{} on CPU {}", p.thread, p.cpus)).collect::<Vec<_>>(),
        "commands": record.commands,
        "output": record.output.as_deref().map(output_tail),
    });
    match &record.outcome {
        Ok(m) => {
            let f = &m.forwarding;
            value["sent"] = json!(f.sent);
            value["received"] = json!(f.received);
            value["refused"] = json!(f.refused);
            value["tester_dropped"] = json!(f.tester_dropped);
            value["seconds"] = json!(f.seconds);
            value["offered_pps"] = json!(f.offered_pps());
            value["received_pps"] = json!(f.received_pps());
            value["loss"] = json!(f.loss());
            if let Some(latency) = &m.latency {
                value["latency"] = json!({
                    "rate": latency.rate,
                    "sent": latency.sent,
                    "received": latency.received,
                    "loss": latency.loss,
                    "summary": latency.latency,
                });
            }
            if let Some(c) = &m.counters {
                value["counters"] = json!({
                    "rx_packets": c.rx_packets,
                    "tx_packets": c.tx_packets,
                    "cycles_rx": c.cycles_rx,
                    "cycles_process": c.cycles_process,
                    "cycles_tx": c.cycles_tx,
                    "cycles_idle": c.cycles_idle,
                });
            }
        }
        Err(error) => value["error"] = json!(error),
    }
    value
}

/// A point during which Ctrl-C arrived was cut short: its counts are not a result.
fn settle(record: &mut PointRecord, session: &Session) {
    if session.stopped() && record.outcome.is_ok() {
        record.outcome = Err(format!(
            "{}: interrupted before the point ended",
            record.dut
        ));
    }
}

fn progress(done: usize, total: usize, record: &PointRecord, label: &str) {
    match &record.outcome {
        Ok(m) => eprintln!(
            "[{done}/{total}] {:<26} {label:>10}: received {:.3} Mpps of {:.3} offered, loss {:.2} %",
            record.dut,
            m.forwarding.received_pps() / 1e6,
            m.forwarding.offered_pps() / 1e6,
            100.0 * m.forwarding.loss()
        ),
        Err(error) => eprintln!(
            "[{done}/{total}] {:<26} {label:>10}: FAILED: {error}",
            record.dut
        ),
    }
}

/// The median received rate of each (DuT, value) over its successful runs, in first-seen order,
/// with the number of successful runs.
pub fn medians(records: &[PointRecord]) -> Vec<(String, f64, f64, usize)> {
    let mut keys: Vec<(String, f64)> = Vec::new();
    for record in records {
        if !keys
            .iter()
            .any(|(dut, value)| *dut == record.dut && *value == record.value)
        {
            keys.push((record.dut.clone(), record.value));
        }
    }
    keys.into_iter()
        .map(|(dut, value)| {
            let rates: Vec<f64> = records
                .iter()
                .filter(|r| r.dut == dut && r.value == value && r.outcome.is_ok())
                .map(PointRecord::received_pps)
                .collect();
            (dut, value, median(&rates), rates.len())
        })
        .collect()
}

/// Why the first failed run of (`dut`, `value`) failed.
fn first_error<'a>(records: &'a [PointRecord], dut: &str, value: f64) -> Option<&'a str> {
    records
        .iter()
        .filter(|r| r.dut == dut && r.value == value)
        .find_map(|r| r.outcome.as_ref().err())
        .map(String::as_str)
}

/// One line series per DuT from `medians`, with x mapped by `x`.
fn series_by_dut(
    medians: &[(String, f64, f64, usize)],
    x: impl Fn(f64) -> f64,
    scale: f64,
) -> Vec<Series> {
    let mut series: Vec<Series> = Vec::new();
    for (dut, value, pps, ok) in medians {
        if *ok == 0 {
            continue;
        }
        let point = (x(*value), pps / scale);
        match series.iter_mut().find(|s| s.name == *dut) {
            Some(s) => s.points.push(point),
            None => series.push(Series {
                name: dut.clone(),
                points: vec![point],
                style: Style::Line,
            }),
        }
    }
    series
}

fn backend(name: &str) -> Result<WirespeedBackend> {
    match name {
        "afxdp" => Ok(WirespeedBackend::AfXdp),
        "xdp" => Ok(WirespeedBackend::Xdp),
        "afpacket" => Ok(WirespeedBackend::AfPacket),
        "afpacket-v2" => Ok(WirespeedBackend::AfPacketV2),
        other => bail!("unknown backend {other:?}; choose afxdp, xdp, afpacket or afpacket-v2"),
    }
}

fn finish(session: &Session) -> Result<()> {
    if session.stopped() {
        println!("interrupted: the sweep is incomplete");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_take_decimal_suffixes() {
        let counts: Vec<u64> = ["1", "10", "100", "1k", "10k", "100k", "1M"]
            .iter()
            .map(|c| parse_count(c).unwrap())
            .collect();
        assert_eq!(counts, [1, 10, 100, 1000, 10_000, 100_000, 1_000_000]);
        assert_eq!(parse_count("2K").unwrap(), 2000);
        assert!(parse_count("ten").is_err());
        assert!(parse_count("1.5k").is_err());
        assert!(parse_count("99999999999G").is_err());
    }

    #[test]
    fn sizes_are_binary_and_print_back() {
        let sizes: Vec<u64> = ["16KiB", "64KiB", "1MiB", "256MiB", "1GiB", "4096", "2K"]
            .iter()
            .map(|s| parse_bytes(s).unwrap())
            .collect();
        assert_eq!(
            sizes,
            [16 << 10, 64 << 10, 1 << 20, 256 << 20, 1 << 30, 4096, 2048]
        );
        assert!(parse_bytes("16 parsecs").is_err());
        assert!(parse_bytes("KiB").is_err());
        assert_eq!(bytes_label(16 << 10), "16 KiB");
        assert_eq!(bytes_label(256 << 20), "256 MiB");
        assert_eq!(bytes_label(1000), "1000 B");
    }

    pub(crate) fn record(dut: &str, value: f64, received: u64) -> PointRecord {
        PointRecord {
            dut: dut.into(),
            value,
            outcome: Ok(wirespeed_tester::bench::sweep::PointMeasurement {
                forwarding: wirespeed_tester::bench::Measurement {
                    sent: received,
                    received,
                    seconds: 1.0,
                    ..Default::default()
                },
                latency: None,
                counters: Some(wirespeed_tester::dut::SwitchCounters {
                    rx_packets: received,
                    tx_packets: received,
                    cycles_rx: 100 * received,
                    cycles_tx: 50 * received,
                    cycles_process: 10 * received,
                    cycles_idle: 5 * received,
                }),
            }),
            placement: Vec::new(),
            commands: Vec::new(),
            output: None,
        }
    }

    #[test]
    fn medians_group_by_dut_and_value_and_skip_failures() {
        let mut records = vec![
            record("a", 1.0, 100),
            record("b", 1.0, 50),
            record("a", 1.0, 300),
            record("a", 1.0, 200),
            record("a", 10.0, 90),
        ];
        records.push(PointRecord {
            outcome: Err("DuT b did not forward".into()),
            ..record("b", 10.0, 0)
        });
        assert_eq!(
            medians(&records),
            vec![
                ("a".to_string(), 1.0, 200.0, 3),
                ("b".to_string(), 1.0, 50.0, 1),
                ("a".to_string(), 10.0, 90.0, 1),
                ("b".to_string(), 10.0, 0.0, 0),
            ]
        );
        let series = series_by_dut(&medians(&records), f64::log10, 1.0);
        assert_eq!(series.len(), 2);
        assert_eq!(series[0].points, vec![(0.0, 200.0), (1.0, 90.0)]);
        assert_eq!(series[1].points, vec![(0.0, 50.0)]);
    }
}
