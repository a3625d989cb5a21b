//! The report as one self-contained HTML page: the setup, a summary table and SVG plots, with no
//! script, stylesheet, font or image fetched at view time (everything is inline), so the page
//! reads the same offline and in ten years.
//!
//! Plots, when the data for them is there: throughput against frame size in frames/s and in
//! bit/s with the line-rate curve of the configured link; loss against offered load; latency
//! histograms and percentiles against load; back-to-back burst lengths and recovery times with
//! their spread (min, median, max) against frame size; pacing error. A run with several kinds
//! of traffic gets one series per kind.

use std::fmt::Write;

use super::svg::{Plot, Series, Style, escape, si};
use super::{Report, wire_bits_per_second};

/// The plots of `report`, in page order.
pub fn plots(report: &Report) -> Vec<Plot> {
    let mut plots = Vec::new();
    let sizes: Vec<u32> = report.results.iter().map(|r| r.frame_size).collect();
    if let (Some(&smallest), Some(&largest)) = (sizes.iter().min(), sizes.iter().max()) {
        // The line-rate curve, sampled finely enough to look smooth.
        let curve: Vec<u32> = (0..=40)
            .map(|i| smallest + (largest - smallest) * i / 40)
            .collect();
        let kinds = traffic_kinds(report);
        let named = |name: &str, kind: &str| {
            if kinds.len() > 1 {
                format!("{name} ({kind})")
            } else {
                name.to_string()
            }
        };
        let mut rates: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
        for kind in &kinds {
            let of_kind = || report.results.iter().filter(|r| &r.traffic == kind);
            rates.push((
                named("NDR", kind),
                of_kind()
                    .filter_map(|r| r.ndr().map(|n| (r.frame_size as f64, n)))
                    .collect(),
            ));
            let pdr: Vec<(f64, f64)> = of_kind()
                .filter_map(|r| r.pdr().map(|n| (r.frame_size as f64, n)))
                .collect();
            if !pdr.is_empty() {
                rates.push((named("PDR", kind), pdr));
            }
        }
        let link = si(report.setup.link_bits_per_second);
        for bits in [false, true] {
            let convert = |size: f64, fps: f64| {
                if bits {
                    wire_bits_per_second(fps, size as u32)
                } else {
                    fps
                }
            };
            let mut series: Vec<Series> = rates
                .iter()
                .map(|(name, points)| Series {
                    name: name.clone(),
                    points: points.iter().map(|&(s, f)| (s, convert(s, f))).collect(),
                    style: Style::Line,
                })
                .collect();
            series.push(Series {
                name: format!("line rate {link}bit/s"),
                points: curve
                    .iter()
                    .map(|&s| (s as f64, convert(s as f64, report.line_rate(s))))
                    .collect(),
                style: Style::Dashed,
            });
            plots.push(Plot {
                title: if bits {
                    "Throughput in bit/s (on the wire) vs frame size".into()
                } else {
                    "Throughput in frames/s vs frame size".into()
                },
                x_label: "frame size (bytes)".into(),
                y_label: if bits { "bit/s" } else { "frames/s" }.into(),
                series,
                log_y: false,
                y_from_zero: true,
            });
        }
    }
    let loss: Vec<Series> = report
        .results
        .iter()
        .filter_map(|r| {
            let curve = r.loss_rate.as_ref()?;
            Some(Series {
                name: r.label(),
                points: curve
                    .points
                    .iter()
                    .map(|p| (p.percent, 100.0 * p.loss_ratio))
                    .collect(),
                style: Style::Line,
            })
        })
        .collect();
    if !loss.is_empty() {
        plots.push(Plot {
            title: "Frame loss vs offered load".into(),
            x_label: "offered load (% of the starting rate)".into(),
            y_label: "frames lost (%)".into(),
            series: loss,
            log_y: false,
            y_from_zero: true,
        });
    }
    for result in report.results.iter().filter(|r| !r.latency.is_empty()) {
        let (share, of_what) = load_share(report, result);
        let histograms = result
            .latency
            .iter()
            .map(|at| Series {
                name: load_label(at.rate, share, of_what),
                points: histogram_points(&at.summary),
                style: Style::Step,
            })
            .collect();
        plots.push(Plot {
            title: format!("Latency histogram, {}", result.label()),
            x_label: "latency (µs)".into(),
            y_label: "frames per µs (log)".into(),
            series: histograms,
            log_y: true,
            y_from_zero: false,
        });
        let names = ["p25", "p50", "p75", "p95", "p99", "p99.9"];
        let mut percentiles: Vec<Series> = names
            .iter()
            .map(|name| Series {
                name: (*name).into(),
                points: Vec::new(),
                style: Style::Line,
            })
            .collect();
        for at in &result.latency {
            for (series, value) in percentiles.iter_mut().zip(at.summary.percentiles()) {
                series
                    .points
                    .push((100.0 * at.rate / share, value as f64 / 1000.0));
            }
        }
        plots.push(Plot {
            title: format!("Latency percentiles vs load, {}", result.label()),
            x_label: format!("offered load (% of {of_what})"),
            y_label: "latency (µs, log)".into(),
            series: percentiles,
            log_y: true,
            y_from_zero: false,
        });
    }
    spread_plot(
        report,
        &mut plots,
        "Back-to-back: longest loss-free burst vs frame size",
        "frames",
        |r| r.back_to_back.as_ref().map(|b| b.burst),
    );
    spread_plot(
        report,
        &mut plots,
        "System recovery time vs frame size",
        "seconds",
        |r| {
            r.recovery
                .as_ref()
                .filter(|rec| rec.time.count > 0)
                .map(|rec| rec.time)
        },
    );
    let pacing: Vec<(f64, f64)> = report
        .results
        .iter()
        .filter_map(|r| r.pacing.map(|p| (r.frame_size, p)))
        .filter(|(_, p)| p.asked_rate > 0.0)
        .map(|(size, p)| {
            (
                size as f64,
                100.0 * (p.achieved_rate - p.asked_rate) / p.asked_rate,
            )
        })
        .collect();
    if !pacing.is_empty() {
        plots.push(Plot {
            title: "Pacing error: achieved vs asked rate".into(),
            x_label: "frame size (bytes)".into(),
            y_label: "rate error (%)".into(),
            series: vec![Series {
                name: "achieved - asked".into(),
                points: pacing,
                style: Style::Line,
            }],
            log_y: false,
            y_from_zero: true,
        });
    }
    plots
}

/// The kinds of traffic in `report`, in order of first appearance ("" for a run of one kind).
/// What a result's loads are told as a share of: its NDR where it has one (what a reader
/// compares latency loads with), else the line rate. Returns (that rate, its name).
fn load_share(report: &Report, result: &crate::report::FrameSizeResult) -> (f64, &'static str) {
    match result.ndr().filter(|&ndr| ndr > 0.0) {
        Some(ndr) => (ndr, "the NDR"),
        None => (report.line_rate(result.frame_size), "line rate"),
    }
}

/// A load in Mpps and as a share (`load_share`).
fn load_label(rate: f64, share: f64, of_what: &str) -> String {
    format!(
        "{:.3} Mpps ({:.0} % of {of_what})",
        rate / 1e6,
        100.0 * rate / share
    )
}

fn traffic_kinds(report: &Report) -> Vec<String> {
    let mut kinds: Vec<String> = Vec::new();
    for result in &report.results {
        if !kinds.contains(&result.traffic) {
            kinds.push(result.traffic.clone());
        }
    }
    kinds
}

/// A plot of a repeated measurement's min, median and max against frame size, per kind of
/// traffic; nothing when no result has the measurement.
fn spread_plot(
    report: &Report,
    plots: &mut Vec<Plot>,
    title: &str,
    unit: &str,
    of: impl Fn(&super::FrameSizeResult) -> Option<crate::rfc2544::Spread>,
) {
    let kinds = traffic_kinds(report);
    let mut series = Vec::new();
    for kind in &kinds {
        let spreads: Vec<(f64, crate::rfc2544::Spread)> = report
            .results
            .iter()
            .filter(|r| &r.traffic == kind)
            .filter_map(|r| of(r).map(|s| (r.frame_size as f64, s)))
            .collect();
        if spreads.is_empty() {
            continue;
        }
        let stats = [
            ("max", Style::Dashed),
            ("median", Style::Line),
            ("min", Style::Dashed),
        ];
        for (name, style) in stats {
            let value = |s: &crate::rfc2544::Spread| match name {
                "max" => s.max,
                "min" => s.min,
                _ => s.median,
            };
            series.push(Series {
                name: if kinds.len() > 1 {
                    format!("{name} ({kind})")
                } else {
                    name.to_string()
                },
                points: spreads.iter().map(|(size, s)| (*size, value(s))).collect(),
                style,
            });
        }
    }
    if !series.is_empty() {
        plots.push(Plot {
            title: title.into(),
            x_label: "frame size (bytes)".into(),
            y_label: unit.into(),
            series,
            log_y: false,
            y_from_zero: true,
        });
    }
}

/// A latency histogram as (bucket start in µs, frames per µs): buckets widen with the value,
/// so counts are divided by the width to keep the shape honest; neighbouring buckets are merged
/// into at most ~200 points.
fn histogram_points(summary: &crate::stats::LatencySummary) -> Vec<(f64, f64)> {
    let buckets = &summary.buckets;
    let group = buckets.len().div_ceil(200).max(1);
    buckets
        .chunks(group)
        .filter_map(|chunk| {
            let (first, last) = (chunk.first()?, chunk.last()?);
            let width_us = (last.high_ns + 1 - first.low_ns) as f64 / 1000.0;
            let count: u64 = chunk.iter().map(|b| b.count).sum();
            Some((first.low_ns as f64 / 1000.0, count as f64 / width_us))
        })
        .collect()
}

fn row(out: &mut String, name: &str, value: &str) {
    let _ = write!(
        out,
        "<tr><th>{}</th><td>{}</td></tr>",
        escape(name),
        escape(value)
    );
}

fn number(value: Option<f64>) -> String {
    value.map(si).unwrap_or_else(|| "–".into())
}

fn yes(value: bool) -> &'static str {
    if value { "yes" } else { "no" }
}

/// Every search's trials, one folded table per search: what was scheduled, what left the
/// tester's port and how late ([`crate::rfc2544::Departure`]), what arrived. A trial whose frames
/// did not leave on schedule is marked.
fn search_trials(report: &Report, out: &mut String) {
    if report.results.iter().all(|r| r.searches().next().is_none()) {
        return;
    }
    out.push_str("<h2>Search trials</h2>");
    for result in &report.results {
        for (search, trials) in result.searches().enumerate() {
            let _ = write!(
                out,
                "<details><summary>{}, search {}: {} trials</summary><table><tr><th>trial</th>\
                 <th>scheduled (frames/s)</th><th>departed (frames/s)</th><th>lag (ms)</th>\
                 <th>sent</th><th>received</th><th>lost (held back, behind)</th>\
                 <th>generator late (frames)</th><th>on schedule</th></tr>",
                escape(&result.label()),
                search + 1,
                trials.len()
            );
            for (index, trial) in trials.iter().enumerate() {
                let outcome = &trial.outcome;
                let departure = outcome.departure;
                let _ = write!(
                    out,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
                     <td>{} ({}, {})</td><td>{}</td><td>{}</td></tr>",
                    index + 1,
                    si(trial.spec.load.rate()),
                    number(departure.map(|d| d.departed_rate)),
                    departure.map_or("–".into(), |d| format!("{:.2}", d.lag_seconds * 1e3)),
                    outcome.sent,
                    outcome.received,
                    outcome.lost(),
                    departure.map_or(0, |d| d.held_back),
                    departure.map_or(0, |d| d.behind),
                    departure.map_or(0, |d| d.sent_late),
                    departure.map_or("–", |d| yes(d.on_schedule())),
                );
            }
            out.push_str("</table></details>");
        }
    }
}

/// Tables of the tests beyond throughput and latency: NDR repeatability, frame loss rate,
/// back-to-back, system recovery and reset, each only when measured.
fn other_tests(report: &Report, out: &mut String) {
    let with = |has: &dyn Fn(&super::FrameSizeResult) -> bool| report.results.iter().any(has);
    if with(&|r| r.ndr_difference().is_some()) {
        out.push_str("<h2>NDR repeatability</h2><table><tr><th>result</th><th>NDR of each search in a row (frames/s)</th><th>(max - min) / mean</th></tr>");
        for r in report
            .results
            .iter()
            .filter(|r| r.ndr_difference().is_some())
        {
            let runs: Vec<String> = r.ndr_runs.iter().map(|n| si(*n)).collect();
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{:.2} %</td></tr>",
                escape(&r.label()),
                runs.join(", "),
                100.0 * r.ndr_difference().unwrap_or(0.0)
            );
        }
        out.push_str("</table>");
    }
    if with(&|r| r.loss_rate.is_some()) {
        out.push_str("<h2>Frame loss rate</h2><table><tr><th>result</th><th>offered load (% of starting rate): frames lost</th><th>ended with two loss-free trials</th></tr>");
        for r in &report.results {
            let Some(loss) = &r.loss_rate else { continue };
            let points: Vec<String> = loss
                .points
                .iter()
                .map(|p| {
                    format!(
                        "{:.0} % ({}): {:.4} %",
                        p.percent,
                        si(p.rate),
                        100.0 * p.loss_ratio
                    )
                })
                .collect();
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&r.label()),
                escape(&points.join("; ")),
                yes(loss.reached_clean)
            );
        }
        out.push_str("</table>");
    }
    if with(&|r| r.back_to_back.is_some()) {
        out.push_str("<h2>Back-to-back (RFC 2544 §26.4, RFC 9004)</h2><table><tr><th>result</th><th>longest loss-free burst min / median / max (frames)</th><th>searches</th><th>implied buffer time (µs)</th><th>corrected for the NDR (µs)</th><th>note</th></tr>");
        for r in &report.results {
            let Some(b) = &r.back_to_back else { continue };
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{:.0} / {:.0} / {:.0}</td><td>{}</td><td>{:.1}</td><td>{}</td><td>{}</td></tr>",
                escape(&r.label()),
                b.burst.min,
                b.burst.median,
                b.burst.max,
                b.burst.count,
                b.implied_buffer_seconds * 1e6,
                b.corrected_buffer_seconds
                    .map_or("–".into(), |c| format!("{:.1}", c * 1e6)),
                if b.unbounded {
                    "the longest burst tried passed: no buffer limit at this rate"
                } else {
                    ""
                }
            );
        }
        out.push_str("</table>");
    }
    if with(&|r| r.recovery.is_some()) {
        out.push_str("<h2>System recovery (RFC 2544 §26.5)</h2><table><tr><th>result</th><th>overload / reduced rate (frames/s)</th><th>recovery time min / median / max (s)</th><th>trials</th><th>note</th></tr>");
        for r in &report.results {
            let Some(rec) = &r.recovery else { continue };
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{} / {}</td><td>{:.4} / {:.4} / {:.4}</td><td>{}</td><td>{}</td></tr>",
                escape(&r.label()),
                si(rec.overload_rate),
                si(rec.recovery_rate),
                rec.time.min,
                rec.time.median,
                rec.time.max,
                rec.times.len(),
                if rec.not_overloaded {
                    "a trial lost nothing in the overload: not overloaded"
                } else {
                    ""
                }
            );
        }
        out.push_str("</table>");
    }
    if with(&|r| r.reset.is_some()) {
        out.push_str("<h2>Reset (RFC 2544 §26.6)</h2><p>The throughput offered in one stream while the DuT is reset; the reset time is the frames lost over the offered rate (RFC 6201's frame-loss method).</p><table><tr><th>result</th><th>reset</th><th>offered (frames/s)</th><th>reset after (s)</th><th>reset time min / median / max (s)</th><th>trials</th><th>note</th></tr>");
        for r in &report.results {
            let Some(reset) = &r.reset else { continue };
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.3}</td><td>{:.4} / {:.4} / {:.4}</td><td>{}</td><td>{}</td></tr>",
                escape(&r.label()),
                escape(&reset.method),
                si(reset.rate),
                reset.reset_after,
                reset.time.min,
                reset.time.median,
                reset.time.max,
                reset.times.len(),
                match (reset.unrecovered, reset.generator_behind) {
                    (true, _) =>
                        "lost every frame from the reset to the end of a trial: a lower bound",
                    (false, true) =>
                        "the generator fell behind its schedule in a trial: its time is too long",
                    _ => "",
                }
            );
        }
        out.push_str("</table>");
    }
}

/// The whole page: what was measured first (results, plots, notes, the other tests), then
/// how far the tester itself goes (calibration, timestamps), then every search trial, and the
/// setup last, its commands and configuration folded.
pub fn to_html(report: &Report) -> String {
    let mut out = String::new();
    let title = escape(&report.title);
    let _ = write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title><style>\
body{{font-family:sans-serif;margin:24px;max-width:1180px;color:#222}}\
table{{border-collapse:collapse;margin:8px 0 18px}}th,td{{border:1px solid #ccc;padding:3px 8px;text-align:left;font-size:13px;vertical-align:top}}\
th{{background:#f3f3f3}}pre{{background:#f7f7f7;padding:8px;font-size:12px;white-space:pre-wrap}}\
.plots{{display:flex;flex-wrap:wrap;gap:12px}}.plots svg{{border:1px solid #eee}}\
</style></head><body><h1>{title}</h1><p>wirespeed report, schema version {}.</p>",
        report.schema_version
    );
    results_table(report, &mut out);
    out.push_str("<h2>Plots</h2><div class=\"plots\">");
    for plot in plots(report) {
        out.push_str(&plot.render());
    }
    out.push_str("</div>");
    notes(report, &mut out);
    other_tests(report, &mut out);
    calibration(report, &mut out);
    timestamps(report, &mut out);
    search_trials(report, &mut out);
    setup(report, &mut out);
    out.push_str("</body></html>\n");
    out
}

/// The summary table: one row per frame size (and kind of traffic).
fn results_table(report: &Report, out: &mut String) {
    out.push_str("<h2>Results</h2><table><tr><th>frame size (B)</th><th>line rate (frames/s)</th><th>NDR (frames/s)</th><th>NDR (bit/s)</th><th>limit</th><th>NDR repeats min / median / max</th><th>PDR (frames/s)</th><th>latency p50 / p99 / p99.9 at the highest load (µs; samples)</th><th>same minus floor (µs)</th><th>tester vs kernel counters (tx / rx)</th></tr>");
    for result in &report.results {
        let ndr = result.ndr();
        let repeats = result
            .throughput
            .as_ref()
            .and_then(|t| t.repeated.as_ref())
            .map(|r| {
                format!(
                    "{} / {} / {}",
                    si(r.received_rate.min),
                    si(r.received_rate.median),
                    si(r.received_rate.max)
                )
            })
            .unwrap_or_else(|| "–".into());
        let at = result.latency.last();
        let (share, of_what) = load_share(report, result);
        let latency = at
            .map(|at| {
                let s = &at.summary;
                format!(
                    "{:.1} / {:.1} / {:.1} ({}) at {}",
                    s.p50_ns as f64 / 1e3,
                    s.p99_ns as f64 / 1e3,
                    s.p999_ns as f64 / 1e3,
                    s.count,
                    load_label(at.rate, share, of_what)
                )
            })
            .unwrap_or_else(|| "–".into());
        let floor = report
            .calibration
            .as_ref()
            .and_then(|c| c.floor_ns(result.frame_size));
        let minus_floor = at
            .zip(floor)
            .map(|(at, floor)| {
                let s = &at.summary;
                let less = |v: u64| v.saturating_sub(floor) as f64 / 1e3;
                format!(
                    "{:.1} / {:.1} / {:.1}",
                    less(s.p50_ns),
                    less(s.p99_ns),
                    less(s.p999_ns)
                )
            })
            .unwrap_or_else(|| "–".into());
        let counters = result
            .counters
            .map(|c| {
                format!(
                    "{} / {} vs {} / {} ({:.3} % / {:.3} %)",
                    c.transmitted,
                    c.arrived,
                    c.kernel_tx,
                    c.kernel_rx,
                    100.0 * c.tx_error(),
                    100.0 * c.rx_error()
                )
            })
            .unwrap_or_else(|| "–".into());
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&result.label()),
            si(report.line_rate(result.frame_size)),
            number(ndr),
            number(ndr.map(|n| wire_bits_per_second(n, result.frame_size))),
            result.limit.map_or("–", |l| l.label()),
            repeats,
            number(result.pdr()),
            latency,
            minus_floor,
            escape(&counters)
        );
    }
    out.push_str("</table>");
}

/// The run's notes.
fn notes(report: &Report, out: &mut String) {
    if !report.notes.is_empty() {
        out.push_str("<h2>Notes</h2><ul>");
        for note in &report.notes {
            let _ = write!(out, "<li>{}</li>", escape(note));
        }
        out.push_str("</ul>");
    }
}

/// The tester without a DuT: its own limit and the bare path's latency.
fn calibration(report: &Report, out: &mut String) {
    if let Some(calibration) = &report.calibration {
        out.push_str("<h2>Calibration (tester without DuT, looped-back veth)</h2><table><tr><th>frame size (B)</th><th>tester limit (frames/s)</th><th>bare-path latency p50 / p99 / max (µs)</th></tr>");
        for (size, fps) in &calibration.throughput {
            let floor = calibration
                .latency_by_size
                .iter()
                .find(|(s, _)| s == size)
                .map(|(_, l)| {
                    format!(
                        "{:.1} / {:.1} / {:.1}",
                        l.p50_ns as f64 / 1e3,
                        l.p99_ns as f64 / 1e3,
                        l.max_ns as f64 / 1e3
                    )
                })
                .unwrap_or_else(|| "–".into());
            let _ = write!(
                out,
                "<tr><td>{size}</td><td>{}</td><td>{floor}</td></tr>",
                si(*fps)
            );
        }
        let _ = write!(
            out,
            "</table><p>Bare-path latency: p50 {} ns, p99 {} ns, max {} ns. A result is \
             tester-limited when its NDR reaches {:.0} % of the tester's own limit; latency \
             \"minus floor\" subtracts the bare path's median at the same frame size.</p>",
            calibration.latency.p50_ns,
            calibration.latency.p99_ns,
            calibration.latency.max_ns,
            100.0 * super::TESTER_SHARE
        );
    }
}

/// Which timestamps were used, and why.
fn timestamps(report: &Report, out: &mut String) {
    if let Some(probe) = &report.timestamps {
        out.push_str("<h2>Timestamps</h2><table>");
        row(out, "RX port probed", &probe.interface);
        let offered = probe.capabilities.map_or("unknown".to_string(), |c| {
            format!(
                "hardware RX {}, software RX {}{}",
                yes(c.hardware_receive),
                yes(c.software_receive),
                c.phc_index
                    .map_or(String::new(), |i| format!(", PTP clock {i}"))
            )
        });
        row(out, "offered (ethtool -T)", &offered);
        row(out, "used", &probe.used);
        row(out, "why", &probe.reason);
        for clock in &probe.clocks {
            row(
                out,
                &clock.name,
                &format!(
                    "resolution {:.1} ns (smallest non-zero step of successive readings), \
                     read cost {:.1} ns",
                    clock.resolution_ns, clock.read_cost_ns
                ),
            );
        }
        out.push_str("</table>");
    }
}

/// Everything needed to run it again.
fn setup(report: &Report, out: &mut String) {
    let setup = &report.setup;
    out.push_str("<h2>Setup</h2><table>");
    row(out, "started", &setup.started);
    row(out, "command line", &setup.command_line.join(" "));
    row(
        out,
        "DuT",
        &format!("{} {}", setup.dut.name, setup.dut.version),
    );
    if !setup.dut.host.is_empty() {
        row(out, "DuT's host", &setup.dut.host);
    }
    for (name, version) in &setup.versions {
        row(out, &format!("version of {name}"), version);
    }
    row(out, "kernel", &setup.kernel);
    row(
        out,
        "CPU",
        &format!(
            "{} at {} MHz (TSC {} Hz)",
            setup.cpu_model,
            setup.cpu_mhz,
            si(setup.tsc_hz as f64)
        ),
    );
    row(out, "ports / XDP mode", &setup.xdp_mode);
    let pinning: Vec<String> = setup
        .core_pinning
        .iter()
        .map(|p| format!("{} on core {}", p.thread, p.core))
        .collect();
    row(out, "core pinning", &pinning.join(", "));
    row(
        out,
        "link speed",
        &format!("{}bit/s", si(setup.link_bits_per_second)),
    );
    row(
        out,
        "timestamps",
        &format!(
            "{} (resolution {} ns)",
            setup.timestamp_source, setup.timestamp_resolution_ns
        ),
    );
    row(out, "traffic", &setup.traffic);
    row(out, "receiver", &setup.receiver);
    row(out, "search", &setup.search);
    if let Some(wakeups) = &setup.dut_core_wakeups {
        row(out, "DuT core wake-ups", &wakeups.summary());
    }
    out.push_str("</table>");
    let folded = |out: &mut String, title: &str, text: &str| {
        let _ = write!(
            out,
            "<details><summary>{title}</summary><pre>{}</pre></details>",
            escape(text)
        );
    };
    folded(out, "DuT commands", &setup.dut.commands.join("\n"));
    if !setup.dut.output.is_empty() {
        folded(out, "DuT output", &setup.dut.output);
    }
    folded(out, "Full configuration", &setup.config);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{FrameSizeResult, Setup};
    use crate::rfc2544::{
        BackToBackResult, LossRatePoint, LossRateResult, RecoveryResult, Spread, ThroughputResult,
    };

    /// Two kinds of traffic at two frame sizes, every test measured.
    fn report() -> Report {
        let mut report = Report::new("two kinds", Setup::default());
        report.setup.link_bits_per_second = 10e9;
        for kind in ["CBR, 1 flow", "Poisson (seed 1), 256 random flows"] {
            for size in [64u32, 1518] {
                let ndr = 1e6 / size as f64 * 64.0;
                report.results.push(FrameSizeResult {
                    frame_size: size,
                    traffic: kind.into(),
                    throughput: Some(ThroughputResult {
                        ndr: Some(ndr),
                        ..ThroughputResult::default()
                    }),
                    ndr_runs: vec![ndr, ndr * 0.98],
                    loss_rate: Some(LossRateResult {
                        points: [100.0, 90.0, 80.0]
                            .map(|percent| LossRatePoint {
                                percent,
                                rate: ndr * percent / 80.0,
                                loss_ratio: (percent - 80.0) / 400.0,
                            })
                            .to_vec(),
                        reached_clean: false,
                        trials: Vec::new(),
                    }),
                    back_to_back: Some(BackToBackResult {
                        bursts: vec![900, 1000, 1100],
                        burst: Spread::of(&[900.0, 1000.0, 1100.0]),
                        implied_buffer_seconds: 0.001,
                        corrected_buffer_seconds: Some(0.0005),
                        ..BackToBackResult::default()
                    }),
                    recovery: Some(RecoveryResult {
                        overload_rate: 1.1 * ndr,
                        recovery_rate: 0.55 * ndr,
                        times: vec![Some(0.25), Some(0.5)],
                        time: Spread::of(&[0.25, 0.5]),
                        ..RecoveryResult::default()
                    }),
                    ..FrameSizeResult::default()
                });
            }
        }
        report
    }

    /// Results lead, the setup comes last with its long parts folded, and loads are told in
    /// Mpps and as a share of the NDR.
    #[test]
    fn the_page_leads_with_results_and_folds_the_setup() {
        let mut report = report();
        report.setup.config = "[switch]\napp = \"xconnect\"".into();
        report.setup.dut.commands = vec!["ip link set d0 up".into()];
        report.calibration = Some(crate::report::Calibration::default());
        report.results[0].latency = vec![crate::report::LatencyAtLoad {
            rate: 500_000.0,
            summary: crate::stats::LatencySummary {
                count: 10,
                p50_ns: 20_000,
                ..Default::default()
            },
        }];
        let html = to_html(&report);
        let at = |text: &str| html.find(text).unwrap_or_else(|| panic!("{text} missing"));
        let order = [
            "<h2>Results</h2>",
            "<h2>Plots</h2>",
            "<h2>NDR repeatability</h2>",
            "<h2>Calibration",
            "<h2>Setup</h2>",
            "<details><summary>DuT commands</summary>",
            "<details><summary>Full configuration</summary>",
        ];
        for pair in order.windows(2) {
            assert!(at(pair[0]) < at(pair[1]), "{} before {}", pair[0], pair[1]);
        }
        // NDR 1 Mpps at 64 B: the load is half of it.
        assert!(html.contains("at 0.500 Mpps (50 % of the NDR)"), "{html}");
        assert!(html.contains("offered load (% of the NDR)"));
    }

    #[test]
    fn every_kind_of_traffic_gets_its_series_and_every_test_its_table() {
        let report = report();
        let plots = plots(&report);
        let titles: Vec<&str> = plots.iter().map(|p| p.title.as_str()).collect();
        assert_eq!(
            titles,
            [
                "Throughput in frames/s vs frame size",
                "Throughput in bit/s (on the wire) vs frame size",
                "Frame loss vs offered load",
                "Back-to-back: longest loss-free burst vs frame size",
                "System recovery time vs frame size",
            ]
        );
        // One NDR series per kind, and the line rate.
        let names: Vec<&str> = plots[0].series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "NDR (CBR, 1 flow)",
                "NDR (Poisson (seed 1), 256 random flows)",
                "line rate 10Gbit/s"
            ]
        );
        assert_eq!(plots[0].series[0].points.len(), 2);
        // One loss curve per result; min, median and max per kind for the spreads.
        assert_eq!(plots[2].series.len(), 4);
        assert_eq!(
            plots[2].series[3].name,
            "1518 B, Poisson (seed 1), 256 random flows"
        );
        assert_eq!(plots[3].series.len(), 6);
        assert_eq!(plots[3].series[1].name, "median (CBR, 1 flow)");
        assert_eq!(
            plots[3].series[1].points,
            [(64.0, 1000.0), (1518.0, 1000.0)]
        );
        assert_eq!(plots[4].series[0].points, [(64.0, 0.5), (1518.0, 0.5)]);
        let html = to_html(&report);
        for heading in [
            "<h2>NDR repeatability</h2>",
            "<h2>Frame loss rate</h2>",
            "<h2>Back-to-back (RFC 2544 §26.4, RFC 9004)</h2>",
            "<h2>System recovery (RFC 2544 §26.5)</h2>",
        ] {
            assert_eq!(html.matches(heading).count(), 1, "{heading}");
        }
        // (max - min) / mean of 1 and 0.98.
        assert!(html.contains("<td>2.02 %</td>"), "NDR difference");
        assert!(html.contains("<td>900 / 1000 / 1100</td><td>3</td><td>1000.0</td><td>500.0</td>"));
        assert!(html.contains("<td>0.2500 / 0.3750 / 0.5000</td><td>2</td>"));
        assert!(html.contains("100 % (1.25M): 5.0000 %"));
        assert_eq!(
            html.matches("<table>").count(),
            html.matches("</table>").count()
        );
    }

    #[test]
    fn a_run_of_one_kind_keeps_its_plain_names_and_no_extra_tables() {
        let mut report = report();
        report.results.retain(|r| r.traffic == "CBR, 1 flow");
        for result in &mut report.results {
            result.traffic.clear();
            result.ndr_runs.clear();
            result.back_to_back = None;
            result.recovery = None;
        }
        let plots = plots(&report);
        assert_eq!(plots.len(), 3);
        assert_eq!(plots[0].series[0].name, "NDR");
        assert_eq!(plots[2].series[0].name, "64 B");
        let html = to_html(&report);
        assert!(!html.contains("NDR repeatability"));
        assert!(!html.contains("Back-to-back"));
        assert!(html.contains("<h2>Frame loss rate</h2>"));
    }
}
