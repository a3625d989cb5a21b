//! `wirespeed bench batch` (seed 001 §5.5–5.6): wirespeed's batch size against throughput and
//! latency percentiles.
//!
//! ```sh
//! wirespeed bench batch --sizes 8,16,32,64,128,256 --out batch
//! ```
//!
//! Each size gets a full-rate blast (throughput) and then a paced CBR trial at one fixed
//! `--latency-rate` for every size, so that the latencies are compared at the same load; the
//! trial timestamps every frame (TX and RX from the same TSC) into an HDR histogram.

use anyhow::{Result, ensure};
use clap::Args;
use serde_json::json;
use wirespeed_tester::bench::sweep::{LatencyConfig, point};
use wirespeed_tester::dut::{WirespeedDut, WirespeedOptions};
use wirespeed_tester::report::svg::{Plot, Series, Style};

use crate::cli::numbers;

use super::{
    Session, SweepCommon, backend, finish, first_error, header, medians, parse_count, point_json,
    progress, series_by_dut, settle,
};

#[derive(Args)]
pub struct BatchArgs {
    /// The switch's batch sizes (1..=256).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "8,16,32,64,128,256",
        value_parser = numbers::batch()
    )]
    sizes: Vec<usize>,
    /// wirespeed backend: afxdp or afpacket.
    #[arg(long, default_value = "afxdp")]
    backend: String,
    /// Offered rate of the latency trial after each blast, frames per second (k, M allowed).
    #[arg(long, default_value = "100k")]
    latency_rate: String,
    /// Seconds of the latency trial (0.001..=86400).
    #[arg(long, default_value_t = 2.0, value_parser = numbers::seconds())]
    latency_seconds: f64,
    /// Name prefix of the lab (at most 6 characters).
    #[arg(long, default_value = "wszb")]
    prefix: String,
    #[command(flatten)]
    common: SweepCommon,
}

/// `wirespeed bench batch`.
pub fn run(args: BatchArgs) -> Result<()> {
    ensure!(!args.sizes.is_empty(), "give at least one batch size");
    let rate = parse_count(&args.latency_rate)? as f64;
    ensure!(rate > 0.0, "--latency-rate must be positive");
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
    result["backend"] = json!(backend.name());
    result["latency_rate"] = json!(rate);
    result["latency_seconds"] = json!(args.latency_seconds);
    result["summary"] = json!(rows);
    result["points"] = json!(records.iter().map(point_json).collect::<Vec<_>>());
    let json_path = session.write_json("batch.json", &result)?;
    let throughput_svg = session.write_svg(
        "batch-throughput.svg",
        &Plot {
            title: format!("Throughput vs batch size (wirespeed {})", backend.name()),
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
