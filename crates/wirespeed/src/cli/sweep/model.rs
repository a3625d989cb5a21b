//! `wirespeed bench model` (seed 001 §4, Figures 2 and 3): wirespeed's cost model measured on
//! its own backends.
//!
//! ```sh
//! wirespeed bench model --backends afxdp,afpacket --batch 32 --out model
//! ```
//!
//! The xconnect runs with the emulated task at increasing cycles per packet; the cost model
//! `T = min(r_max, f_CPU / (c_IO + c_task))` is fitted to the curve
//! ([`wirespeed_tester::bench::sweep::model`]) and gives c_IO, the knee and the busy-poll cycles
//! below it (c_busy). Then the random linked-list walk runs over growing working sets, and the fit
//! turns each rate into cycles per access. Around every blast the worker's own per-stage cycle
//! accounting is read from the control socket, and printed beside the model: rx + tx is the
//! worker's share of c_IO (the kernel's half of the I/O, on the same core, it cannot see),
//! process is c_task as the worker measured it, idle is c_busy.

use anyhow::{Result, ensure};
use clap::Args;
use serde_json::json;
use wirespeed_packet::cpu::tsc_hz;
use wirespeed_tester::bench::median;
use wirespeed_tester::bench::sweep::model::{ModelFit, fit};
use wirespeed_tester::bench::sweep::{PointRecord, point};
use wirespeed_tester::dut::{WirespeedBackend, WirespeedDut, WirespeedOptions};
use wirespeed_tester::report::svg::{Plot, Series, Style};

use crate::cli::numbers;

use super::{
    Session, SweepCommon, backend, bytes_label, finish, header, medians, parse_bytes, parse_count,
    point_json, progress, series_by_dut, settle,
};

#[derive(Args)]
pub struct ModelArgs {
    /// wirespeed backends to model: afxdp, afpacket.
    #[arg(long, value_delimiter = ',', default_value = "afxdp,afpacket")]
    backends: Vec<String>,
    /// The switch's batch sizes (1..=256).
    #[arg(long, value_delimiter = ',', default_value = "32", value_parser = numbers::batch())]
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

/// One sweep of the model: a backend at a batch size.
struct ModelCurve {
    name: String,
    spin: Vec<PointRecord>,
    walk: Vec<PointRecord>,
    fit: Option<ModelFit>,
}

/// `wirespeed bench model`.
pub fn run(args: ModelArgs) -> Result<()> {
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
    let backends = args
        .backends
        .iter()
        .map(|b| backend(b))
        .collect::<Result<Vec<_>>>()?;
    let mut session = Session::open(&args.prefix, &args.common)?;
    let f_cpu = tsc_hz() as f64;
    let total = backends.len() * args.batch.len() * (spins.len() + walks.len()) * args.common.runs;
    let mut done = 0;
    let mut curves: Vec<(WirespeedBackend, usize, ModelCurve)> = Vec::new();
    for &backend in &backends {
        for &batch in &args.batch {
            curves.push((
                backend,
                batch,
                ModelCurve {
                    name: format!("{} batch {batch}", backend.name()),
                    spin: Vec::new(),
                    walk: Vec::new(),
                    fit: None,
                },
            ));
        }
    }
    let mut sample = |dut: &WirespeedDut| Some(dut.counters().map_err(|e| e.to_string()));
    // Run by run, every curve and every point, so that a drift of a shared machine spreads
    // over the whole sweep instead of bending one curve.
    'sweep: for _ in 0..args.common.runs {
        for (backend, batch, curve) in &mut curves {
            let points = spins
                .iter()
                .map(|&s| (false, s))
                .chain(walks.iter().map(|&w| (true, w)));
            for (walk, value) in points {
                if session.stopped() {
                    break 'sweep;
                }
                let options = WirespeedOptions {
                    batch: Some(*batch),
                    spin_cycles: if walk { 0 } else { value },
                    walk_bytes: if walk { value } else { 0 },
                    ..WirespeedOptions::default()
                };
                let mut dut = WirespeedDut::new(
                    *backend,
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
                record.dut = curve.name.clone();
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
    }
    let curves: Vec<ModelCurve> = curves
        .into_iter()
        .map(|(_, _, mut curve)| {
            let measured: Vec<(f64, f64)> = medians(&curve.spin)
                .iter()
                .filter(|m| m.3 > 0)
                .map(|m| (m.1, m.2))
                .collect();
            curve.fit = fit(&measured, f_cpu);
            curve
        })
        .collect();
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
    let mut values: Vec<f64> = Vec::new();
    for record in records {
        if !values.contains(&record.value) {
            values.push(record.value);
        }
    }
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

#[cfg(test)]
mod tests {
    use super::super::tests::record;
    use super::*;

    #[test]
    fn live_cycles_are_per_forwarded_packet() {
        // Runs interleave the values; each value is one row.
        let live = live_cycles(&[
            record("a", 0.0, 1000),
            record("a", 5.0, 1000),
            record("a", 0.0, 3000),
        ]);
        assert_eq!(live.len(), 2);
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
