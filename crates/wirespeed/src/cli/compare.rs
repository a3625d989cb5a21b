//! `wirespeed bench compare`: the same RFC 2544 throughput search, and latency at the NDR, on
//! several DuTs one after another in one lab and one run, repeats interleaved (A B C A B C ...),
//! written as one side-by-side report.
//!
//! ```sh
//! wirespeed bench compare --duts linux-bridge,linux-router,linux-router-nft,ovs,wirespeed-xconnect-afxdp \
//!     --frame-sizes 64 --flows 1,random --runs 3 --trial-seconds 1 --out reports/compare
//! ```
//!
//! Each (repeat, flow count, DuT) is one run of [`wirespeed_tester::suite`], the code behind
//! `bench rfc2544`: calibration on the lab's looped-back pair, DuT setup, probe, placement,
//! search, latency at the NDR, teardown, in the same lab (veths that push back) with the same
//! placement. Interleaving spreads a slow drift of a shared machine
//! over every DuT instead of biasing the one measured last. A DuT that cannot be set up (its
//! package missing, a step failing) or forwards nothing is torn down and recorded with the
//! reason, and the run moves on to the next DuT. Ctrl-C ends the running trial, takes the DuT
//! and the lab down, and still writes the partial report. Output: compare.json and
//! compare.html in `--out`, the table on stdout, progress on stderr.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::Args;
use wirespeed_lab::Testbed;
use wirespeed_tester::bench::placement::{Plan, SessionShield};
use wirespeed_tester::bench::shield::CoreShield;
use wirespeed_tester::dut::{Dut, Wiring};
use wirespeed_tester::generator::pacing::Pattern;
use wirespeed_tester::report::compare::{
    CompareRun, ComparedDut, Comparison, summary_table, to_html, to_json,
};
use wirespeed_tester::suite::{Progress, SearchKind, SuiteConfig, receivers};
use wirespeed_tester::trial::FlowOrder;

use super::bench::dut;
use super::numbers;
use super::rfc2544::{LinkArgs, RateTrialArgs, parse_resolution, setup, suite_lab};
use super::site::SiteArgs;

/// Flows that `--flows random` stands for.
pub const RANDOM_FLOWS: u32 = 4096;

#[derive(Args)]
pub struct CompareArgs {
    /// DuTs to compare, in this order within each repeat (`linux-router-nft:N` for N rules,
    /// `linux-router-tbf:MBIT` for the router shaped to MBIT Mbit/s).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "linux-bridge,linux-router,linux-router-nft,ovs,wirespeed-xconnect-afxdp,wirespeed-xconnect-afpacket"
    )]
    duts: Vec<String>,
    /// Where the DuTs are: the lab, external (`--duts external`, alone), or a host over ssh.
    #[command(flatten)]
    site: Box<SiteArgs>,
    /// Frame sizes with FCS, bytes (64..=9018; the lab's MTU is raised for frames above 1518).
    #[arg(long, value_delimiter = ',', default_value = "64", value_parser = numbers::frame_size())]
    frame_sizes: Vec<u16>,
    /// Flow counts: a number of UDP source ports, or `random` for 4096 of them.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    flows: Vec<String>,
    /// IP version of the frames: 4 or 6 (every router DuT is set up for both).
    #[arg(long, default_value = "4")]
    ip: super::bench::IpArg,
    /// Runs of every DuT, interleaved (the median and the spread are reported), 1..=1000.
    #[arg(long, default_value_t = 3, value_parser = numbers::repeats::<u32>())]
    runs: u32,
    /// Old spelling of `--runs`.
    #[arg(long, hide = true, value_parser = numbers::repeats::<u32>())]
    repeats: Option<u32>,
    /// Seconds per search trial (0.001..=86400).
    #[arg(long, default_value_t = 1.0, value_parser = numbers::seconds())]
    trial_seconds: f64,
    /// Seconds per calibration trial (each run calibrates the tester first), 0.001..=86400.
    #[arg(long, default_value_t = 0.5, value_parser = numbers::seconds())]
    calibration_seconds: f64,
    /// The links to the DuTs, as in `bench rfc2544`.
    #[command(flatten)]
    link: LinkArgs,
    /// Search resolution: frames/s, or a percentage of the NDR (`5%`: the search stops when
    /// the lowest rate that failed is within 5% above the highest that passed).
    #[arg(long, default_value = "5%")]
    resolution: String,
    /// Largest loss ratio that still counts as no drop (0 for RFC 2544).
    #[arg(long, default_value_t = 0.0)]
    loss_tolerance: f64,
    /// Directory for compare.json and compare.html.
    #[arg(long, default_value = "reports/compare")]
    out: PathBuf,
    /// Name prefix of the lab (at most 6 characters).
    #[arg(long, default_value = "wsc")]
    prefix: String,
    /// Core of the generator thread.
    #[arg(long, default_value_t = 0)]
    generator_cpu: usize,
    /// Core of the DuT.
    #[arg(long, default_value_t = 1)]
    dut_cpu: usize,
    /// Core of the tester's receive NAPI thread (default: the generator's core, as in `bench
    /// rfc2544`: the veths push back, so a DuT worker at SCHED_FIFO on the same core would
    /// starve the very thread its transmissions wait for).
    #[arg(long)]
    receiver_cpu: Option<usize>,
    /// Nice value of the generator thread and the NAPI threads of the DuT's ingress and the
    /// tester's receive (`off`: leave them alone), as in `bench rfc2544`.
    #[arg(long, default_value = "-20", allow_hyphen_values = true, value_parser = numbers::nice_or_off())]
    nice: numbers::Nice,
    /// Keep the DuT core for the DuT while the run lasts, as `cset shield` does: other
    /// processes, this one's unpinned threads, the kernel threads that may move and the unbound
    /// workqueues leave it, and get it back after (the report's commands say what moved).
    /// Without kernel preemption a real-time NAPI thread waits behind whatever is inside the
    /// kernel on its core, and `d0`'s 256-frame ring overflows: for zero-loss rates on a machine
    /// that runs other work. Not for two benchmarks at once: each would narrow the other.
    #[arg(long)]
    shield_dut_core: bool,
    /// How a rate's trials decide whether it passes, and how they receive, as in `bench
    /// rfc2544`.
    #[command(flatten)]
    rate_trials: RateTrialArgs,
}

/// `1,random` -> `[(1, round robin), (4096, random)]`.
fn parse_flows(items: &[String]) -> Result<Vec<(u32, FlowOrder)>> {
    let flows = items
        .iter()
        .map(|item| match item.trim() {
            "random" => Ok((RANDOM_FLOWS, FlowOrder::Random { seed: 1 })),
            text => text
                .parse::<u32>()
                .ok()
                .filter(|n| (1..=65_536).contains(n))
                .map(|n| (n, FlowOrder::RoundRobin))
                .with_context(|| format!("flows {text:?}: give a count in 1..=65536 or `random`")),
        })
        .collect::<Result<Vec<_>>>()?;
    anyhow::ensure!(!flows.is_empty(), "give at least one flow count");
    Ok(flows)
}

impl CompareArgs {
    fn suite(&self) -> Result<SuiteConfig> {
        anyhow::ensure!(
            (0.0..1.0).contains(&self.loss_tolerance),
            "the loss tolerance is a ratio in 0..1 (0.005 for 0.5 %)"
        );
        anyhow::ensure!(!self.frame_sizes.is_empty(), "give at least one frame size");
        self.ip.check_frame_sizes(&self.frame_sizes)?;
        anyhow::ensure!(!self.duts.is_empty(), "give at least one DuT");
        Ok(SuiteConfig {
            frame_sizes: self.frame_sizes.clone(),
            link_bits_per_second: self.link.bits_per_second(),
            search: SearchKind::Binary,
            trial_seconds: self.trial_seconds,
            calibration_seconds: self.calibration_seconds,
            loss_tolerance: self.loss_tolerance,
            resolution: parse_resolution(&self.resolution)?,
            pattern: Pattern::Cbr,
            flows: 1,
            // Latency at the NDR only (the suite always measures it there).
            latency_loads: Vec::new(),
            repeats: 0,
            plan: Plan {
                generator_cpu: self.generator_cpu,
                dut_cpu: self.dut_cpu,
                receiver_cpu: self.receiver_cpu.unwrap_or(self.generator_cpu),
                nice: self.nice.0,
            },
            shield_dut_core: self.shield_dut_core,
            receiver: self.rate_trials.receiver,
            sender: self.rate_trials.generator,
            ip: self.ip.into(),
            latency_receiver: self.rate_trials.latency_receiver()?,
            vote: self.rate_trials.vote(self.trial_seconds)?,
            ..SuiteConfig::default()
        })
    }
}

pub fn run(mut args: CompareArgs) -> Result<()> {
    if let Some(runs) = args.repeats {
        numbers::deprecated("--repeats", "--runs");
        args.runs = runs;
    }
    let suite = args.suite()?;
    let flows = parse_flows(&args.flows)?;
    let names = super::bench::dut_names(&args.duts);
    let site = args.site.site(&names)?;
    if args.prefix.len() > 6 {
        bail!(
            "prefix {:?} is longer than 6 characters: NAPI thread names (napi/<prefix>-d0-<id>) \
             must stay distinct within the kernel's 15 bytes",
            args.prefix
        );
    }
    let plan = suite.plan;
    if suite.shield_dut_core {
        CoreShield::check(&plan).map_err(|why| anyhow::anyhow!("--shield-dut-core: {why}"))?;
    }
    let _shield = SessionShield::new(plan.nice);
    let cores = wirespeed_io::thread::available_cores();
    if plan.generator_cpu.max(plan.dut_cpu).max(plan.receiver_cpu) >= cores {
        bail!("this machine has {cores} core(s); the placement {plan:?} needs more");
    }
    let binary =
        std::env::current_exe().context("finding this executable for the wirespeed DuTs")?;
    let (mut duts, external_wiring) = match site.external() {
        Some(external) => {
            let (device, wiring) = external?;
            (vec![device], Some(wiring))
        }
        None => (
            names
                .iter()
                .map(|name| site.place(dut(name, &binary, plan.dut_cpu)?))
                .collect::<Result<Vec<_>>>()?,
            None,
        ),
    };
    // Every argument was checked before the rights to build a lab are.
    if let Some(reason) = wirespeed_lab::unavailable_reason() {
        bail!("a comparison builds a lab, but {reason}");
    }
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .context("installing the signal handler")?;
    }
    let config_text = format!("{suite:#?}\nflows: {flows:?}\nruns: {}", args.runs);
    let mut comparison = Comparison::new(
        format!("RFC 2544 throughput, {} side by side", names.join(", ")),
        setup(&config_text, None),
    );
    comparison.setup.traffic = format!(
        "CBR, UDP/IPv{}, flows {:?} (UDP source ports cycling frame by frame; `random` = \
         {RANDOM_FLOWS} of them, each frame's drawn at random), {} run(s) interleaved",
        args.ip.number(),
        args.flows,
        args.runs
    );
    comparison.setup.receiver = receivers(&suite);
    comparison.setup.search = suite.search_summary();
    let mut lab = match external_wiring {
        Some(_) => None,
        None => Some(suite_lab(&args.prefix, &args.frame_sizes)?),
    };
    let wiring = match (&external_wiring, &lab) {
        (Some(wiring), _) => wiring.clone(),
        (None, Some(lab)) => site.wiring(lab)?,
        (None, None) => bail!("neither a lab nor an external DuT"),
    };
    let total = args.runs as usize * flows.len() * duts.len();
    let started = Instant::now();
    let mut done = 0;
    'runs: for repeat in 0..args.runs {
        for &(flow_count, flow_order) in &flows {
            for device in duts.iter_mut() {
                if stop.load(Ordering::Relaxed) {
                    break 'runs;
                }
                done += 1;
                // A DuT may leave the lab's veths changed: Open vSwitch deletes the root qdisc
                // of every port it manages, and a veth without one drops what its peer cannot
                // take instead of pushing back, so every DuT after it lost frames past its own
                // TX (bridge, router and afxdp NDRs 0.02-0.04 Mpps). Each run starts with the
                // qdiscs in place again.
                if let Some(lab) = &mut lab {
                    lab.backpressure()
                        .context("restoring the lab's qdiscs before the next DuT")?;
                }
                let run = compare_one(
                    &wiring,
                    lab.as_ref(),
                    device.as_mut(),
                    &suite,
                    &config_text,
                    flow_count,
                    flow_order,
                    repeat,
                    &stop,
                    &format!("{done}/{total}"),
                    started,
                );
                comparison.runs.push(run);
            }
        }
    }
    comparison.duts = duts
        .iter()
        .map(|d| ComparedDut {
            name: d.name(),
            description: d.description(),
        })
        .collect();
    drop(duts);
    if let Some(lab) = lab {
        lab.teardown().context("taking the lab down")?;
    }
    if stop.load(Ordering::Relaxed) {
        comparison
            .notes
            .push("interrupted (Ctrl-C): the runs are incomplete".into());
    }
    println!("{}", summary_table(&comparison));
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    for (name, text) in [
        ("compare.json", to_json(&comparison)),
        ("compare.html", to_html(&comparison)),
    ] {
        let path = args.out.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// One suite run of `device` at `flows`, wired as `wiring` says (in `lab`, when there is one),
/// with progress lines naming it.
#[allow(clippy::too_many_arguments)]
fn compare_one(
    wiring: &Wiring,
    lab: Option<&Testbed>,
    device: &mut dyn Dut,
    suite: &SuiteConfig,
    config_text: &str,
    flows: u32,
    flow_order: FlowOrder,
    repeat: u32,
    stop: &AtomicBool,
    position: &str,
    started: Instant,
) -> CompareRun {
    let name = device.name();
    let head = format!(
        "[run {position}, {} elapsed] {name}, {flows} flow(s), repeat {}",
        clock(started.elapsed().as_secs()),
        repeat + 1
    );
    eprintln!("{head}: starting");
    let config = SuiteConfig {
        flows,
        flow_order,
        ..suite.clone()
    };
    let mut progress = |p: &Progress| eprintln!("  [{}/~{}] {}", p.done, p.total, p.line);
    let setup = setup(config_text, Some(&*device));
    let report =
        wirespeed_tester::suite::run(wiring, lab, device, &config, setup, stop, &mut progress);
    let found: Vec<String> = report
        .results
        .iter()
        .map(|r| match r.ndr() {
            Some(ndr) => format!("{} B NDR {:.3} Mpps", r.frame_size, ndr / 1e6),
            None => format!("{} B no NDR", r.frame_size),
        })
        .collect();
    if found.is_empty() {
        eprintln!("{head}: FAILED: {}", report.notes.join("; "));
    } else {
        eprintln!("{head}: {}", found.join(", "));
    }
    CompareRun::new(name, flows, repeat, report)
}

fn clock(seconds: u64) -> String {
    format!("{}:{:02}", seconds / 60, seconds % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_are_counts_or_random() {
        let items = |s: &str| s.split(',').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            parse_flows(&items("1,random,256")).unwrap(),
            [
                (1, FlowOrder::RoundRobin),
                (4096, FlowOrder::Random { seed: 1 }),
                (256, FlowOrder::RoundRobin)
            ]
        );
        assert!(parse_flows(&items("0")).is_err());
        assert!(parse_flows(&items("many")).is_err());
        assert!(parse_flows(&items("65537")).is_err());
    }
}
