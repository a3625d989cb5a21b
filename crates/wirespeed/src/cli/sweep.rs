//! `wirespeed bench fib|model|batch`: the seeds' sweeps as commands, each writing a JSON file and
//! SVG plots into `--out` and printing a table.
//!
//! ```sh
//! wirespeed bench fib --duts wirespeed-router,linux-router --routes 1,10,100,1k,10k,100k,1M --out fib
//! wirespeed bench model --backends afxdp,afpacket --batch 32 --out model
//! wirespeed bench batch --sizes 8,16,32,64,128,256 --out batch
//! ```
//!
//! * **fib** (seed 002 Figure 4): a router DuT's throughput against its routing-table size. The
//!   routes follow the testkit's BGP-like prefix-length mix, all via the tester's `t1`, and the
//!   frames go to destinations spread over every installed route, so the lookups are as spread
//!   as the table.
//! * **model** (seed 001 §4, Figures 2 and 3): wirespeed's xconnect with the emulated task at
//!   increasing cycles per packet, the cost model `T = min(r_max, f_CPU / (c_IO + c_task))` fitted
//!   to the curve ([`wirespeed_tester::bench::sweep::model`]), busy-poll cycles below the knee;
//!   then the random linked-list walk over growing working sets with the cycles per access the
//!   fit implies; and beside both the worker's own per-stage cycle accounting read from the
//!   control socket around every blast.
//! * **batch** (seed 001 §5.5–5.6): wirespeed's batch size against throughput and latency
//!   percentiles (a paced trial at `--latency-rate` after each blast).
//!
//! Every point is one DuT set up, verified, placed and blasted at full rate like `bench
//! forwarding`'s trials ([`wirespeed_tester::bench::sweep::point`]); with `--runs` above 1 the
//! points are repeated in interleaved order and the median is reported. The lab and every DuT
//! are taken down whatever happens, also on Ctrl-C.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result, bail, ensure};
use clap::Args;
use serde_json::{Value, json};
use wirespeed_lab::{Testbed, TestbedConfig};
use wirespeed_packet::cpu::tsc_hz;
use wirespeed_tester::bench::placement::Plan;
use wirespeed_tester::bench::sweep::model::{self, ModelFit};
use wirespeed_tester::bench::sweep::{LatencyConfig, PointRecord, point};
use wirespeed_tester::bench::{ForwardingConfig, median};
use wirespeed_tester::dut::routes::RouteTable;
use wirespeed_tester::dut::{
    Dut, LinuxRouter, WirespeedBackend, WirespeedDut, WirespeedOptions, Wiring,
};
use wirespeed_tester::generator::{Template, TemplateConfig};
use wirespeed_tester::report::svg::{Plot, Series, Style};

/// Options every sweep shares.
#[derive(Args, Clone, Debug)]
pub struct SweepCommon {
    /// Directory for the JSON results and the SVG plots (created if missing).
    #[arg(long, default_value = ".")]
    out: PathBuf,
    /// Seconds per blast.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Repeats of every point, interleaved (the median is reported).
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// Core of the generator thread.
    #[arg(long, default_value_t = 0)]
    generator_cpu: usize,
    /// Core of the DuT (its ingress NAPI thread and its worker).
    #[arg(long, default_value_t = 1)]
    dut_cpu: usize,
    /// Nice value for every benchmark thread.
    #[arg(long, default_value_t = -20, allow_hyphen_values = true)]
    nice: i32,
    /// Leave thread priorities alone (no renice).
    #[arg(long)]
    keep_priorities: bool,
}

#[derive(Args)]
pub struct FibArgs {
    /// Router DuTs: wirespeed-router (AF_XDP), wirespeed-router-afpacket, linux-router.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "wirespeed-router,linux-router"
    )]
    duts: Vec<String>,
    /// Routing-table sizes (k = 1000, M = 1000000).
    #[arg(long, value_delimiter = ',', default_value = "1,10,100,1k,10k,100k,1M")]
    routes: Vec<String>,
    /// Seed of the route and destination generators.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Name prefix of the lab (at most 6 characters).
    #[arg(long, default_value = "wsfib")]
    prefix: String,
    #[command(flatten)]
    common: SweepCommon,
}

#[derive(Args)]
pub struct ModelArgs {
    /// wirespeed backends to model: afxdp, afpacket.
    #[arg(long, value_delimiter = ',', default_value = "afxdp,afpacket")]
    backends: Vec<String>,
    /// The switch's batch sizes.
    #[arg(long, value_delimiter = ',', default_value = "32")]
    batch: Vec<usize>,
    /// Cycles of emulated work per packet (k = 1000).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0,500,1k,2k,4k,8k,16k,32k,64k"
    )]
    spin: Vec<String>,
    /// Working sets of the linked-list walk (KiB, MiB, GiB); `none` skips the walk.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "16KiB,64KiB,256KiB,1MiB,4MiB,16MiB,64MiB,256MiB"
    )]
    walk: Vec<String>,
    /// Name prefix of the lab (at most 6 characters).
    #[arg(long, default_value = "wsmdl")]
    prefix: String,
    #[command(flatten)]
    common: SweepCommon,
}

#[derive(Args)]
pub struct BatchArgs {
    /// The switch's batch sizes (1..=256).
    #[arg(long, value_delimiter = ',', default_value = "8,16,32,64,128,256")]
    sizes: Vec<usize>,
    /// wirespeed backend: afxdp or afpacket.
    #[arg(long, default_value = "afxdp")]
    backend: String,
    /// Offered rate of the latency trial after each blast, frames per second (k, M allowed).
    #[arg(long, default_value = "100k")]
    latency_rate: String,
    /// Seconds of the latency trial.
    #[arg(long, default_value_t = 2.0)]
    latency_seconds: f64,
    /// Name prefix of the lab (at most 6 characters).
    #[arg(long, default_value = "wszb")]
    prefix: String,
    #[command(flatten)]
    common: SweepCommon,
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
    wiring: Wiring,
    stop: Arc<AtomicBool>,
    config: ForwardingConfig,
    binary: PathBuf,
    out: PathBuf,
}

impl Session {
    fn open(prefix: &str, common: &SweepCommon) -> Result<Session> {
        if let Some(reason) = wirespeed_lab::unavailable_reason() {
            bail!("the sweep builds a lab, but {reason}");
        }
        ensure!(
            !prefix.is_empty() && prefix.len() <= 6,
            "--prefix {prefix:?} must be 1 to 6 characters (the kernel cuts thread names at 15 \
             bytes and the NAPI threads of the two pairs must stay distinct)"
        );
        ensure!(
            common.seconds > 0.0 && common.runs >= 1,
            "give a positive --seconds and at least one run"
        );
        ensure!(
            (-20..=19).contains(&common.nice),
            "--nice {} is outside -20..=19",
            common.nice
        );
        let cores = wirespeed_io::thread::available_cores();
        ensure!(
            common.generator_cpu.max(common.dut_cpu) < cores,
            "this machine has {cores} core(s); --generator-cpu {} and --dut-cpu {} need more",
            common.generator_cpu,
            common.dut_cpu
        );
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
            nice: (!common.keep_priorities).then_some(common.nice),
        };
        let config = ForwardingConfig {
            flows: vec![1],
            runs: common.runs,
            seconds: common.seconds,
            plan,
            ceiling: false,
            ..ForwardingConfig::default()
        };
        let lab = Testbed::up(&TestbedConfig {
            prefix: prefix.into(),
            pairs: 2,
            queues: 1,
            calibration: false,
        })?;
        let wiring = Wiring::of(&lab).context("the lab has two pairs")?;
        Ok(Session {
            lab: Some(lab),
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

    /// The one-destination, one-flow template for `dut`.
    fn template(&self, dut: &dyn Dut) -> Result<Template> {
        Ok(Template::new(&TemplateConfig {
            frame_size: self.config.frame_size,
            src_mac: self.wiring.ingress.tester_mac,
            dst_mac: dut.destination_mac(&self.wiring),
            src_ip: self.wiring.ingress.tester_ipv4.into(),
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
        "afpacket" => Ok(WirespeedBackend::AfPacket),
        other => bail!("unknown backend {other:?}; choose afxdp or afpacket"),
    }
}

fn no_counters(
    _: &(dyn Dut + 'static),
) -> Option<Result<wirespeed_tester::dut::SwitchCounters, String>> {
    None
}

/// `wirespeed bench fib`.
pub fn fib(args: FibArgs) -> Result<()> {
    let mut counts = args
        .routes
        .iter()
        .map(|r| parse_count(r).map(|c| c as usize))
        .collect::<Result<Vec<_>>>()?;
    ensure!(!counts.is_empty(), "give at least one routing-table size");
    ensure!(
        counts.iter().all(|&c| (1..=4_000_000).contains(&c)),
        "routing-table sizes must be 1 to 4M"
    );
    counts.dedup();
    for name in &args.duts {
        fib_dut(name, Path::new("."), 0, None)?;
    }
    let largest = counts.iter().copied().max().unwrap_or(1);
    eprintln!("generating {largest} routes (seed {})", args.seed);
    // A few generated prefixes fall in the lab's range and are left out: draw a little more.
    let generated =
        wirespeed_testkit::routes::ipv4_prefixes(largest + largest / 50 + 64, args.seed);
    let mut session = Session::open(&args.prefix, &args.common)?;
    let total = counts.len() * args.common.runs * args.duts.len();
    let mut records = Vec::new();
    let mut tables = Vec::new();
    'sweep: for &count in &counts {
        let table = Arc::new(RouteTable::new(&generated, count));
        let destinations: Vec<std::net::Ipv4Addr> = wirespeed_testkit::routes::ipv4_destinations(
            table.prefixes(),
            table.len().clamp(1024, 1 << 20),
            args.seed ^ count as u64,
        )
        .into_iter()
        .map(std::net::Ipv4Addr::from)
        .collect();
        tables.push(
            json!({"asked": count, "routes": table.len(), "destinations": destinations.len()}),
        );
        for _ in 0..args.common.runs {
            for name in &args.duts {
                if session.stopped() {
                    break 'sweep;
                }
                let mut dut = fib_dut(
                    name,
                    &session.binary,
                    session.config.plan.dut_cpu,
                    Some(Arc::clone(&table)),
                )?;
                let template = session
                    .template(dut.as_ref())?
                    .with_destinations(destinations.clone())?;
                let mut record = point(
                    dut.as_mut(),
                    table.len() as f64,
                    &session.wiring,
                    &session.config,
                    &template,
                    None,
                    &session.stop,
                    &mut no_counters,
                );
                settle(&mut record, &session);
                progress(
                    records.len() + 1,
                    total,
                    &record,
                    &format!("{} routes", table.len()),
                );
                records.push(record);
            }
        }
    }
    let lab_commands = session.close()?;
    let medians = medians(&records);
    let mut table =
        String::from("| DuT | routes | median Mpps | runs |\n| --- | ---: | ---: | ---: |\n");
    for (dut, routes, pps, ok) in &medians {
        let rate = match first_error(&records, dut, *routes) {
            Some(error) if *ok == 0 => format!("failed: {}", error.replace('\n', " ")),
            _ => format!("{:.3}", pps / 1e6),
        };
        table.push_str(&format!("| {dut} | {routes} | {rate} | {ok} |\n"));
    }
    println!("{table}");
    let mut result = header("wirespeed.bench.fib/1", &session, &lab_commands);
    result["seed"] = json!(args.seed);
    result["tables"] = json!(tables);
    result["summary"] = json!(medians
        .iter()
        .map(|(dut, routes, pps, ok)| json!({"dut": dut, "routes": routes, "median_pps": pps, "runs": ok}))
        .collect::<Vec<_>>());
    result["points"] = json!(records.iter().map(point_json).collect::<Vec<_>>());
    let json_path = session.write_json("fib.json", &result)?;
    let plot = Plot {
        title: "Throughput vs routing-table size (64 B, destinations over all routes)".into(),
        x_label: "routes, log10 (0 = 1, 6 = 1M)".into(),
        y_label: "Mpps".into(),
        series: series_by_dut(&medians, f64::log10, 1e6),
        log_y: false,
        y_from_zero: true,
    };
    let svg_path = session.write_svg("fib.svg", &plot)?;
    println!("wrote {} and {}", json_path.display(), svg_path.display());
    finish(&session)
}

fn finish(session: &Session) -> Result<()> {
    if session.stopped() {
        println!("interrupted: the sweep is incomplete");
    }
    Ok(())
}

/// The router DuT called `name` with `routes` (checked only when `routes` is `None`).
fn fib_dut(
    name: &str,
    binary: &Path,
    core: usize,
    routes: Option<Arc<RouteTable>>,
) -> Result<Box<dyn Dut>> {
    let wirespeed = |backend| -> Box<dyn Dut> {
        Box::new(
            WirespeedDut::new(backend, binary.into(), core).with_options(WirespeedOptions {
                routes: routes.clone(),
                ..WirespeedOptions::default()
            }),
        )
    };
    Ok(match name {
        "wirespeed-router" | "wirespeed-router-afxdp" => wirespeed(WirespeedBackend::AfXdp),
        "wirespeed-router-afpacket" => wirespeed(WirespeedBackend::AfPacket),
        "linux-router" => match &routes {
            Some(routes) => Box::new(LinuxRouter::new().with_routes(Arc::clone(routes))),
            None => Box::new(LinuxRouter::new()),
        },
        other => bail!(
            "unknown router DuT {other:?}; choose from wirespeed-router, \
             wirespeed-router-afpacket, linux-router"
        ),
    })
}

/// One sweep of the model: a backend at a batch size.
struct ModelCurve {
    name: String,
    spin: Vec<PointRecord>,
    walk: Vec<PointRecord>,
    fit: Option<ModelFit>,
}

/// `wirespeed bench model`.
pub fn model(args: ModelArgs) -> Result<()> {
    let spins = args
        .spin
        .iter()
        .map(|s| parse_count(s))
        .collect::<Result<Vec<_>>>()?;
    let walks = if args.walk.iter().any(|w| w == "none") {
        Vec::new()
    } else {
        args.walk
            .iter()
            .map(|w| parse_bytes(w))
            .collect::<Result<Vec<_>>>()?
    };
    ensure!(
        spins.len() >= 2,
        "the model needs at least two --spin values, the largest past the knee"
    );
    ensure!(
        spins.iter().all(|&s| s <= u64::from(u32::MAX)),
        "--spin values must fit 32 bits"
    );
    ensure!(
        args.batch.iter().all(|b| (1..=256).contains(b)),
        "--batch values must be 1..=256"
    );
    let backends = args
        .backends
        .iter()
        .map(|b| backend(b))
        .collect::<Result<Vec<_>>>()?;
    let mut session = Session::open(&args.prefix, &args.common)?;
    let f_cpu = tsc_hz() as f64;
    let total = backends.len() * args.batch.len() * (spins.len() + walks.len()) * args.common.runs;
    let mut done = 0;
    let mut curves = Vec::new();
    let mut sample = |dut: &WirespeedDut| Some(dut.counters().map_err(|e| e.to_string()));
    'sweep: for &backend in &backends {
        for &batch in &args.batch {
            let name = format!("{} batch {batch}", backend.config_name());
            let mut curve = ModelCurve {
                name: name.clone(),
                spin: Vec::new(),
                walk: Vec::new(),
                fit: None,
            };
            let points = spins
                .iter()
                .map(|&s| (false, s))
                .chain(walks.iter().map(|&w| (true, w)));
            for (walk, value) in points {
                for _ in 0..args.common.runs {
                    if session.stopped() {
                        curves.push(curve);
                        break 'sweep;
                    }
                    let options = WirespeedOptions {
                        batch: Some(batch),
                        spin_cycles: if walk { 0 } else { value },
                        walk_bytes: if walk { value } else { 0 },
                        routes: None,
                    };
                    let mut dut = WirespeedDut::new(
                        backend,
                        session.binary.clone(),
                        session.config.plan.dut_cpu,
                    )
                    .with_options(options);
                    let template = session.template(&dut)?;
                    let mut record = point(
                        &mut dut,
                        value as f64,
                        &session.wiring,
                        &session.config,
                        &template,
                        None,
                        &session.stop,
                        &mut sample,
                    );
                    record.dut = name.clone();
                    done += 1;
                    let label = if walk {
                        bytes_label(value)
                    } else {
                        format!("{value} cyc")
                    };
                    settle(&mut record, &session);
                    progress(done, total, &record, &label);
                    if walk {
                        curve.walk.push(record);
                    } else {
                        curve.spin.push(record);
                    }
                }
            }
            let measured: Vec<(f64, f64)> = medians(&curve.spin)
                .iter()
                .filter(|m| m.3 > 0)
                .map(|m| (m.1, m.2))
                .collect();
            curve.fit = model::fit(&measured, f_cpu);
            curves.push(curve);
        }
    }
    let lab_commands = session.close()?;
    let mut result = header("wirespeed.bench.model/1", &session, &lab_commands);
    result["f_cpu"] = json!(f_cpu);
    let mut report = String::new();
    let mut spin_series = Vec::new();
    let mut walk_series = Vec::new();
    let mut access_series = Vec::new();
    let mut curves_json = Vec::new();
    for curve in &curves {
        let spin = medians(&curve.spin);
        let walk = medians(&curve.walk);
        let live = live_cycles(&curve.spin);
        report.push_str(&format!("\n{}:\n", curve.name));
        match &curve.fit {
            Some(fit) => report.push_str(&format!(
                "  model: r_max {:.3} Mpps, c_IO {:.0} cycles/packet, knee at c_task {:.0} cycles \
                 ({} plateau points)\n",
                fit.r_max / 1e6,
                fit.c_io,
                fit.knee,
                fit.plateau_points
            )),
            None => report.push_str("  model: no fit (too few successful points)\n"),
        }
        report.push_str(
            "  | c_task | measured Mpps | model Mpps | c_busy | live rx+tx | live process | live idle |\n  \
             | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
        );
        let mut rows = Vec::new();
        for (_, c_task, pps, _) in &spin {
            let predicted = curve.fit.map(|f| f.predict(f_cpu, *c_task));
            let busy = curve.fit.map(|f| f.busy_cycles(f_cpu, *c_task, *pps));
            let accounted = live.iter().find(|l| l.0 == *c_task).map(|l| l.1);
            report.push_str(&format!(
                "  | {c_task} | {:.3} | {} | {} | {} | {} | {} |\n",
                pps / 1e6,
                predicted.map_or("-".into(), |p| format!("{:.3}", p / 1e6)),
                busy.map_or("-".into(), |b| format!("{b:.0}")),
                accounted.map_or("-".into(), |a| format!("{:.0}", a.io)),
                accounted.map_or("-".into(), |a| format!("{:.0}", a.process)),
                accounted.map_or("-".into(), |a| format!("{:.0}", a.idle)),
            ));
            rows.push(json!({
                "c_task": c_task,
                "median_pps": pps,
                "model_pps": predicted,
                "c_busy": busy,
                "live_cycles_per_packet": accounted.map(|a| json!({"io": a.io, "process": a.process, "idle": a.idle})),
            }));
        }
        let mut walk_rows = Vec::new();
        if !walk.is_empty() {
            report.push_str(
                "  | working set | measured Mpps | cycles per access (model) | live process |\n  \
                 | ---: | ---: | ---: | ---: |\n",
            );
        }
        let walk_live = live_cycles(&curve.walk);
        for (_, bytes, pps, _) in &walk {
            let access = curve.fit.map(|f| f.task_cycles(f_cpu, *pps));
            let accounted = walk_live.iter().find(|l| l.0 == *bytes).map(|l| l.1);
            report.push_str(&format!(
                "  | {} | {:.3} | {} | {} |\n",
                bytes_label(*bytes as u64),
                pps / 1e6,
                access.map_or("-".into(), |a| format!("{a:.0}")),
                accounted.map_or("-".into(), |a| format!("{:.0}", a.process)),
            ));
            walk_rows.push(json!({
                "walk_bytes": bytes,
                "median_pps": pps,
                "cycles_per_access": access,
                "live_cycles_per_packet": accounted.map(|a| json!({"io": a.io, "process": a.process, "idle": a.idle})),
            }));
        }
        let live_io: Vec<f64> = live.iter().map(|l| l.1.io).collect();
        if !live_io.is_empty() {
            report.push_str(&format!(
                "  live accounting: rx+tx {:.0} cycles/packet (median over the spin points) \
                 beside the model's c_IO {}\n",
                median(&live_io),
                curve.fit.map_or("-".into(), |f| format!("{:.0}", f.c_io))
            ));
        }
        curves_json.push(json!({
            "name": curve.name,
            "fit": curve.fit.map(|f| json!({"r_max": f.r_max, "c_io": f.c_io, "knee": f.knee, "plateau_points": f.plateau_points})),
            "live_io_median": (!live_io.is_empty()).then(|| median(&live_io)),
            "spin": rows,
            "walk": walk_rows,
            "points": curve.spin.iter().chain(&curve.walk).map(point_json).collect::<Vec<_>>(),
        }));
        spin_series.extend(series_by_dut(&spin, |c| c, 1e6));
        if let Some(fit) = curve.fit {
            let highest = spin.iter().map(|m| m.1).fold(0.0, f64::max);
            let points = (0..=100)
                .map(|i| {
                    let c = highest * f64::from(i) / 100.0;
                    (c, fit.predict(f_cpu, c) / 1e6)
                })
                .collect();
            spin_series.push(Series {
                name: format!("{} model", curve.name),
                points,
                style: Style::Dashed,
            });
            let access: Vec<(f64, f64)> = walk
                .iter()
                .filter(|m| m.3 > 0)
                .map(|m| (m.1.log2(), fit.task_cycles(f_cpu, m.2)))
                .collect();
            if !access.is_empty() {
                access_series.push(Series {
                    name: curve.name.clone(),
                    points: access,
                    style: Style::Line,
                });
            }
        }
        if !walk_live.is_empty() {
            access_series.push(Series {
                name: format!("{} live process", curve.name),
                points: walk_live
                    .iter()
                    .map(|(bytes, live)| (bytes.log2(), live.process))
                    .collect(),
                style: Style::Dashed,
            });
        }
        walk_series.extend(series_by_dut(&walk, f64::log2, 1e6));
    }
    println!("{report}");
    result["curves"] = json!(curves_json);
    let json_path = session.write_json("model.json", &result)?;
    let mut written = vec![json_path];
    written.push(session.write_svg(
        "model-spin.svg",
        &Plot {
            title: "Throughput vs emulated work (measured, and the fitted model)".into(),
            x_label: "c_task, cycles per packet".into(),
            y_label: "Mpps".into(),
            series: spin_series,
            log_y: false,
            y_from_zero: true,
        },
    )?);
    if !walks.is_empty() {
        written.push(session.write_svg(
            "model-walk.svg",
            &Plot {
                title: "Throughput vs working set of the random walk".into(),
                x_label: "working set, log2 bytes (14 = 16 KiB, 28 = 256 MiB)".into(),
                y_label: "Mpps".into(),
                series: walk_series,
                log_y: false,
                y_from_zero: true,
            },
        )?);
        written.push(session.write_svg(
            "model-walk-cycles.svg",
            &Plot {
                title: "Cycles per packet of the random walk (model; worker's accounting)".into(),
                x_label: "working set, log2 bytes (14 = 16 KiB, 28 = 256 MiB)".into(),
                y_label: "cycles".into(),
                series: access_series,
                log_y: false,
                y_from_zero: true,
            },
        )?);
    }
    println!(
        "wrote {}",
        written
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    finish(&session)
}

/// Cycles per forwarded packet from the worker's accounting.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LiveCycles {
    /// Receiving plus transmitting (the worker's share of c_IO).
    pub io: f64,
    /// Parsing, deciding and the task.
    pub process: f64,
    /// Polling empty rings (c_busy).
    pub idle: f64,
}

/// The median live cycles per packet at each value of `records`.
fn live_cycles(records: &[PointRecord]) -> Vec<(f64, LiveCycles)> {
    let mut values: Vec<f64> = records.iter().map(|r| r.value).collect();
    values.dedup();
    values
        .into_iter()
        .filter_map(|value| {
            let per_run: Vec<LiveCycles> = records
                .iter()
                .filter(|r| r.value == value)
                .filter_map(|r| r.outcome.as_ref().ok()?.counters)
                .filter(|c| c.tx_packets > 0)
                .map(|c| {
                    let packets = c.tx_packets as f64;
                    LiveCycles {
                        io: (c.cycles_rx + c.cycles_tx) as f64 / packets,
                        process: c.cycles_process as f64 / packets,
                        idle: c.cycles_idle as f64 / packets,
                    }
                })
                .collect();
            if per_run.is_empty() {
                return None;
            }
            let pick =
                |f: fn(&LiveCycles) -> f64| median(&per_run.iter().map(f).collect::<Vec<_>>());
            Some((
                value,
                LiveCycles {
                    io: pick(|l| l.io),
                    process: pick(|l| l.process),
                    idle: pick(|l| l.idle),
                },
            ))
        })
        .collect()
}

/// `wirespeed bench batch`.
pub fn batch(args: BatchArgs) -> Result<()> {
    ensure!(!args.sizes.is_empty(), "give at least one batch size");
    ensure!(
        args.sizes.iter().all(|b| (1..=256).contains(b)),
        "batch sizes must be 1..=256"
    );
    let rate = parse_count(&args.latency_rate)? as f64;
    ensure!(
        rate > 0.0 && args.latency_seconds > 0.0,
        "the latency trial needs a positive rate and length"
    );
    let backend = backend(&args.backend)?;
    let mut session = Session::open(&args.prefix, &args.common)?;
    let total = args.sizes.len() * args.common.runs;
    let mut records = Vec::new();
    let latency = LatencyConfig {
        rate,
        seconds: args.latency_seconds,
    };
    'sweep: for _ in 0..args.common.runs {
        for &size in &args.sizes {
            if session.stopped() {
                break 'sweep;
            }
            let mut dut =
                WirespeedDut::new(backend, session.binary.clone(), session.config.plan.dut_cpu)
                    .with_options(WirespeedOptions {
                        batch: Some(size),
                        ..WirespeedOptions::default()
                    });
            let template = session.template(&dut)?;
            let mut record = point(
                &mut dut,
                size as f64,
                &session.wiring,
                &session.config,
                &template,
                Some(latency),
                &session.stop,
                &mut |_: &WirespeedDut| None,
            );
            settle(&mut record, &session);
            progress(records.len() + 1, total, &record, &format!("batch {size}"));
            records.push(record);
        }
    }
    let lab_commands = session.close()?;
    let throughput = medians(&records);
    let mut table = String::from(
        "| batch | median Mpps | latency at | loss | p50 us | p99 us | p99.9 us | max us |\n\
         | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    let mut rows = Vec::new();
    let mut percentiles: [Vec<(f64, f64)>; 4] = Default::default();
    for (dut, size, pps, ok) in &throughput {
        // The latency trial of the first successful run at this size.
        let latency = records
            .iter()
            .filter(|r| r.value == *size)
            .filter_map(|r| r.outcome.as_ref().ok()?.latency.clone())
            .next();
        let us = |ns: u64| ns as f64 / 1e3;
        match &latency {
            Some(l) => {
                let s = &l.latency;
                table.push_str(&format!(
                    "| {size} | {:.3} | {:.3} Mpps | {:.2} % | {:.1} | {:.1} | {:.1} | {:.1} |\n",
                    pps / 1e6,
                    l.rate / 1e6,
                    100.0 * l.loss,
                    us(s.p50_ns),
                    us(s.p99_ns),
                    us(s.p999_ns),
                    us(s.max_ns)
                ));
                for (i, ns) in [s.p50_ns, s.p95_ns, s.p99_ns, s.p999_ns]
                    .into_iter()
                    .enumerate()
                {
                    if s.count > 0
                        && let Some(series) = percentiles.get_mut(i)
                    {
                        series.push((*size, us(ns)));
                    }
                }
            }
            None => {
                let rate = match first_error(&records, dut, *size) {
                    Some(error) if *ok == 0 => format!("failed: {}", error.replace('\n', " ")),
                    _ => format!("{:.3}", pps / 1e6),
                };
                table.push_str(&format!("| {size} | {rate} | - | - | - | - | - | - |\n"))
            }
        }
        rows.push(json!({
            "batch": size,
            "median_pps": pps,
            "latency": latency.map(|l| json!({"rate": l.rate, "loss": l.loss, "summary": l.latency})),
        }));
    }
    println!("{table}");
    let mut result = header("wirespeed.bench.batch/1", &session, &lab_commands);
    result["backend"] = json!(backend.config_name());
    result["latency_rate"] = json!(rate);
    result["latency_seconds"] = json!(args.latency_seconds);
    result["summary"] = json!(rows);
    result["points"] = json!(records.iter().map(point_json).collect::<Vec<_>>());
    let json_path = session.write_json("batch.json", &result)?;
    let throughput_svg = session.write_svg(
        "batch-throughput.svg",
        &Plot {
            title: format!(
                "Throughput vs batch size (wirespeed {})",
                backend.config_name()
            ),
            x_label: "batch size, log2 (3 = 8, 8 = 256)".into(),
            y_label: "Mpps".into(),
            series: series_by_dut(&throughput, f64::log2, 1e6),
            log_y: false,
            y_from_zero: true,
        },
    )?;
    let names = ["p50", "p95", "p99", "p99.9"];
    let latency_svg = session.write_svg(
        "batch-latency.svg",
        &Plot {
            title: format!("Latency vs batch size at {:.3} Mpps", rate / 1e6),
            x_label: "batch size, log2 (3 = 8, 8 = 256)".into(),
            y_label: "microseconds".into(),
            series: names
                .iter()
                .zip(percentiles)
                .filter(|(_, points)| !points.is_empty())
                .map(|(name, points)| Series {
                    name: (*name).into(),
                    points: points.into_iter().map(|(b, us)| (b.log2(), us)).collect(),
                    style: Style::Line,
                })
                .collect(),
            log_y: true,
            y_from_zero: false,
        },
    )?;
    println!(
        "wrote {}, {} and {}",
        json_path.display(),
        throughput_svg.display(),
        latency_svg.display()
    );
    finish(&session)
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

    fn record(dut: &str, value: f64, received: u64) -> PointRecord {
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

    #[test]
    fn live_cycles_are_per_forwarded_packet() {
        let live = live_cycles(&[record("a", 0.0, 1000), record("a", 0.0, 3000)]);
        assert_eq!(
            live,
            vec![(
                0.0,
                LiveCycles {
                    io: 150.0,
                    process: 10.0,
                    idle: 5.0
                }
            )]
        );
    }
}
