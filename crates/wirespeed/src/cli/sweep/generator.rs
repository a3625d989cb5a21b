//! `wirespeed bench generator`: traffic generators side by side on the same veth — DPDK testpmd
//! `txonly` against wirespeed's own generator over AF_XDP and AF_PACKET — measured the same way
//! ([`wirespeed_tester::bench::generators`]: the kernel's receive counter of `d0` over a window,
//! interleaved runs, medians).
//!
//! ```sh
//! wirespeed bench generator --generators testpmd-txonly,afxdp,afpacket --runs 3 --trial-seconds 5 --out gen
//! ```
//!
//! Prints a table, the ratio of every generator to `testpmd-txonly`, the generators' own counts
//! against the kernel's, the placement and what each generator was; writes `generators.json`
//! into `--out`. A generator that cannot run (testpmd not installed) fails its trials with the
//! reason and the others are measured anyway. The generator names are
//! [`wirespeed_tester::generator::BACKEND_NAMES`].

use std::fmt::Write as _;

use anyhow::{Result, ensure};
use clap::Args;
use serde_json::{Value, json};
use wirespeed_tester::bench::generators::{
    GeneratorConfig, GeneratorRecord, GeneratorSummary, run_generators, summarize_generators,
};
use wirespeed_tester::generator::{Backend, TestpmdTxonly, backend};

use super::{Session, SweepCommon, finish, header};
use crate::cli::bench::placed;
use crate::cli::numbers;

#[derive(Args)]
pub struct GeneratorArgs {
    /// Generators to compare, in this order within each run.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "testpmd-txonly,afxdp,afpacket"
    )]
    generators: Vec<String>,
    /// Seconds each generator sends before the measured window opens (0..=86400).
    #[arg(long, default_value_t = 1.0, value_parser = numbers::real(0.0, numbers::SECONDS.1))]
    warm_up: f64,
    /// Name prefix of the lab (at most 6 characters).
    #[arg(long, default_value = "wsgen")]
    prefix: String,
    #[command(flatten)]
    common: SweepCommon,
}

/// `wirespeed bench generator`.
pub fn run(args: GeneratorArgs) -> Result<()> {
    ensure!(!args.generators.is_empty(), "give at least one generator");
    let mut generators = args
        .generators
        .iter()
        .map(|name| backend(name.trim()).map_err(anyhow::Error::msg))
        .collect::<Result<Vec<Box<dyn Backend>>>>()?;
    let mut session = Session::open(&args.prefix, &args.common)?;
    let config = GeneratorConfig {
        runs: session.config.runs,
        seconds: session.config.seconds,
        warm_up: std::time::Duration::from_secs_f64(args.warm_up),
        frame_size: session.config.frame_size,
        plan: session.config.plan,
    };
    let total = config.runs * generators.len();
    let mut done = 0;
    let records = run_generators(
        &session.wiring,
        &mut generators,
        &config,
        &session.stop,
        &mut |record| {
            done += 1;
            eprintln!("[{done}/{total}] {}", trial_line(record));
        },
    );
    let descriptions: Vec<(String, String)> = generators
        .iter()
        .map(|g| (g.name(), g.description()))
        .collect();
    drop(generators);
    let lab_commands = session.close()?;
    let summaries = summarize_generators(&records);
    println!("{}", report(&summaries, &records, &descriptions, &config));
    let mut value = header("wirespeed.bench.generator/1", &session, &lab_commands);
    value["config"]["warm_up"] = json!(args.warm_up);
    value["descriptions"] = json!(
        descriptions
            .iter()
            .map(|(name, text)| (name.clone(), json!(text)))
            .collect::<serde_json::Map<_, _>>()
    );
    value["summaries"] = summaries.iter().map(summary_json).collect();
    value["trials"] = records.iter().map(record_json).collect();
    let path = session.write_json("generators.json", &value)?;
    println!("\nwrote {}", path.display());
    finish(&session)
}

fn trial_line(record: &GeneratorRecord) -> String {
    let head = format!("run {} {:<16}", record.run + 1, record.generator);
    match &record.outcome {
        Ok(m) => format!(
            "{head} {:.3} Mpps into d0 over {:.2} s (generator core {:.0} % in softirq, d0's \
             NAPI thread {:.0} % busy); sent {} by its own count, {} by t0's and {} dropped there \
             (outside by {:.3} %)",
            m.pps() / 1e6,
            m.seconds,
            100.0 * m.generator_softirq,
            100.0 * m.napi_busy,
            m.generator_sent,
            m.kernel_sent,
            m.kernel_dropped,
            100.0 * m.count_error()
        ),
        Err(error) => format!("{head} FAILED: {error}"),
    }
}

/// The markdown table, the ratios to testpmd, what ran and where, and the failures.
fn report(
    summaries: &[GeneratorSummary],
    records: &[GeneratorRecord],
    descriptions: &[(String, String)],
    config: &GeneratorConfig,
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} B frames, one flow, {} s window after {:.1} s of warm-up, {} run(s), median of the \
         runs; rate = frames d0's kernel counted during the window; generator on CPU {}, d0's \
         NAPI thread on CPU {} (veth bypasses it for these frames: d0's receive runs in softirq \
         on the generator core)\n",
        config.frame_size,
        config.seconds,
        config.warm_up.as_secs_f64(),
        config.runs,
        config.plan.generator_cpu,
        config.plan.dut_cpu
    );
    let _ = writeln!(
        out,
        "| generator | median Mpps | min..max Mpps | trials | generator core in softirq | \
         d0's NAPI thread busy | own count vs kernel's (worst) |"
    );
    let _ = writeln!(out, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for s in summaries {
        if s.trials == 0 {
            let reason = s.errors.first().map_or("", String::as_str);
            let _ = writeln!(
                out,
                "| {} | - | - | 0 | - | - | failed: {} |",
                s.generator,
                reason.replace('\n', " ")
            );
            continue;
        }
        let _ = writeln!(
            out,
            "| {} | {:.3} | {:.3}..{:.3} | {} | {:.0} % | {:.0} % | {:.3} % |",
            s.generator,
            s.median_pps / 1e6,
            s.min_pps / 1e6,
            s.max_pps / 1e6,
            s.trials,
            100.0 * s.generator_softirq_median,
            100.0 * s.napi_busy_median,
            100.0 * s.worst_count_error
        );
    }
    let reference = summaries
        .iter()
        .find(|s| s.generator == TestpmdTxonly::NAME && s.trials > 0 && s.median_pps > 0.0);
    if let Some(reference) = reference {
        let _ = writeln!(
            out,
            "\nRelative to {} (median / median):",
            reference.generator
        );
        for s in summaries
            .iter()
            .filter(|s| s.generator != reference.generator && s.trials > 0)
        {
            let _ = writeln!(
                out,
                "- {}: {:.2} x",
                s.generator,
                s.median_pps / reference.median_pps
            );
        }
    }
    let _ = writeln!(out, "\nGenerators as run:");
    for (name, description) in descriptions {
        let _ = writeln!(out, "- {name}: {description}");
    }
    let _ = writeln!(out, "\nPlacement as read back (first trial of each):");
    let mut seen: Vec<&str> = Vec::new();
    for record in records {
        if seen.contains(&record.generator.as_str()) || record.placement.is_empty() {
            continue;
        }
        seen.push(&record.generator);
        let placed: Vec<String> = record.placement.iter().map(placed).collect();
        let _ = writeln!(out, "- {}: {}", record.generator, placed.join("; "));
    }
    let failures: Vec<&GeneratorRecord> = records.iter().filter(|r| r.outcome.is_err()).collect();
    if !failures.is_empty() {
        let _ = writeln!(out, "\nFailed trials:");
        for record in failures {
            let _ = writeln!(out, "- {}", trial_line(record).replace('\n', " "));
        }
    }
    out
}

fn summary_json(s: &GeneratorSummary) -> Value {
    json!({
        "generator": s.generator,
        "trials": s.trials,
        "median_pps": s.median_pps,
        "min_pps": s.min_pps,
        "max_pps": s.max_pps,
        "worst_count_error": s.worst_count_error,
        "napi_busy_median": s.napi_busy_median,
        "generator_softirq_median": s.generator_softirq_median,
        "errors": s.errors,
    })
}

fn record_json(record: &GeneratorRecord) -> Value {
    let mut value = json!({
        "generator": record.generator,
        "run": record.run,
        "placement": record.placement.iter().map(placed).collect::<Vec<_>>(),
        "commands": record.commands,
    });
    match &record.outcome {
        Ok(m) => {
            value["received"] = json!(m.received);
            value["seconds"] = json!(m.seconds);
            value["napi_busy"] = json!(m.napi_busy);
            value["generator_softirq"] = json!(m.generator_softirq);
            value["pps"] = json!(m.pps());
            value["generator_sent"] = json!(m.generator_sent);
            value["kernel_sent"] = json!(m.kernel_sent);
            value["kernel_dropped"] = json!(m.kernel_dropped);
        }
        Err(error) => value["error"] = json!(error),
    }
    value
}
