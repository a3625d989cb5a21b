//! The report as CSV, for spreadsheets: one table of per-frame-size results, one of latency
//! per offered load, and one of every search trial with its departures (what was scheduled,
//! what left the tester, how late). Columns are fixed and named in the first line; an unknown
//! value is empty.

use std::fmt::Write;

use super::{Report, wire_bits_per_second};

/// Columns of [`results_csv`].
pub const RESULT_COLUMNS: [&str; 15] = [
    "frame_size",
    "line_rate_fps",
    "ndr_fps",
    "ndr_bps",
    "ndr_percent_of_line",
    "pdr_fps",
    "ndr_repeat_min_fps",
    "ndr_repeat_median_fps",
    "ndr_repeat_max_fps",
    "back_to_back_median_frames",
    "recovery_median_s",
    "traffic",
    "ndr_runs_fps",
    "ndr_runs_difference",
    "loss_rate_points",
];

/// Columns of [`latency_csv`].
pub const LATENCY_COLUMNS: [&str; 13] = [
    "frame_size",
    "rate_fps",
    "count",
    "min_ns",
    "mean_ns",
    "p25_ns",
    "p50_ns",
    "p75_ns",
    "p95_ns",
    "p99_ns",
    "p999_ns",
    "max_ns",
    "percent_of_line",
];

/// Columns of [`trials_csv`].
pub const TRIAL_COLUMNS: [&str; 17] = [
    "frame_size",
    "traffic",
    "search",
    "trial",
    "phase",
    "scheduled_fps",
    "sent",
    "received",
    "lost",
    "loss_ratio",
    "departed_fps",
    "lag_ms",
    "tolerance_ms",
    "held_back",
    "behind",
    "sent_late",
    "on_schedule",
];

fn cell(value: Option<f64>) -> String {
    value.map(|v| format!("{v}")).unwrap_or_default()
}

/// `text` as a CSV field: quoted (with doubled quotes) when it holds a comma or a quote.
fn quoted(text: &str) -> String {
    if text.contains([',', '"', '\n']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// One line per frame size (and kind of traffic).
pub fn results_csv(report: &Report) -> String {
    let mut out = RESULT_COLUMNS.join(",");
    out.push('\n');
    for result in &report.results {
        let line = report.line_rate(result.frame_size);
        let ndr = result.ndr();
        let repeated = result.throughput.as_ref().and_then(|t| t.repeated.as_ref());
        let cells = [
            result.frame_size.to_string(),
            cell(Some(line)),
            cell(ndr),
            cell(ndr.map(|n| wire_bits_per_second(n, result.frame_size))),
            cell(ndr.map(|n| 100.0 * n / line)),
            cell(result.pdr()),
            cell(repeated.map(|r| r.received_rate.min)),
            cell(repeated.map(|r| r.received_rate.median)),
            cell(repeated.map(|r| r.received_rate.max)),
            cell(result.back_to_back.as_ref().map(|b| b.burst.median)),
            cell(
                result
                    .recovery
                    .as_ref()
                    .filter(|r| r.time.count > 0)
                    .map(|r| r.time.median),
            ),
            quoted(&result.traffic),
            // Several values in one cell, separated by spaces.
            result
                .ndr_runs
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(" "),
            cell(result.ndr_difference()),
            result
                .loss_rate
                .as_ref()
                .map(|l| {
                    l.points
                        .iter()
                        .map(|p| format!("{}:{}", p.percent, p.loss_ratio))
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default(),
        ];
        let _ = writeln!(out, "{}", cells.join(","));
    }
    out
}

/// One line per frame size and offered load.
pub fn latency_csv(report: &Report) -> String {
    let mut out = LATENCY_COLUMNS.join(",");
    out.push('\n');
    for result in &report.results {
        let line = report.line_rate(result.frame_size);
        for at in &result.latency {
            let s = &at.summary;
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{},{},{},{}",
                result.frame_size,
                at.rate,
                s.count,
                s.min_ns,
                s.mean_ns,
                s.p25_ns,
                s.p50_ns,
                s.p75_ns,
                s.p95_ns,
                s.p99_ns,
                s.p999_ns,
                s.max_ns,
                100.0 * at.rate / line
            );
        }
    }
    out
}

/// One line per trial of every search (the first, then those that measured repeatability),
/// with its departure figures where the trial measured them ([`crate::rfc2544::Departure`]).
pub fn trials_csv(report: &Report) -> String {
    let mut out = TRIAL_COLUMNS.join(",");
    out.push('\n');
    for result in &report.results {
        for (search, trials) in result.searches().enumerate() {
            for (index, trial) in trials.iter().enumerate() {
                let outcome = &trial.outcome;
                let departure = outcome.departure;
                let count = |value: Option<u64>| value.map(|v| v.to_string()).unwrap_or_default();
                let cells = [
                    result.frame_size.to_string(),
                    quoted(&result.traffic),
                    (search + 1).to_string(),
                    (index + 1).to_string(),
                    trial.phase.to_string(),
                    cell(Some(trial.spec.load.rate())),
                    outcome.sent.to_string(),
                    outcome.received.to_string(),
                    outcome.lost().to_string(),
                    cell(Some(outcome.loss_ratio())),
                    cell(departure.map(|d| d.departed_rate)),
                    cell(departure.map(|d| d.lag_seconds * 1e3)),
                    cell(departure.map(|d| d.tolerance_seconds * 1e3)),
                    count(departure.map(|d| d.held_back)),
                    count(departure.map(|d| d.behind)),
                    count(departure.map(|d| d.sent_late)),
                    departure
                        .map(|d| d.on_schedule().to_string())
                        .unwrap_or_default(),
                ];
                let _ = writeln!(out, "{}", cells.join(","));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{FrameSizeResult, Setup};
    use crate::rfc2544::{LossRatePoint, LossRateResult};

    #[test]
    fn traffic_repeated_ndrs_and_the_loss_curve_get_their_cells() {
        let mut report = Report::new("csv", Setup::default());
        report.setup.link_bits_per_second = 10e9;
        report.results.push(FrameSizeResult {
            frame_size: 64,
            traffic: "Poisson (seed 1), 256 random flows".into(),
            ndr_runs: vec![1000.0, 1010.0],
            loss_rate: Some(LossRateResult {
                points: vec![
                    LossRatePoint {
                        percent: 100.0,
                        rate: 2000.0,
                        loss_ratio: 0.25,
                    },
                    LossRatePoint {
                        percent: 90.0,
                        rate: 1800.0,
                        loss_ratio: 0.0,
                    },
                ],
                ..LossRateResult::default()
            }),
            ..FrameSizeResult::default()
        });
        let text = results_csv(&report);
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some(RESULT_COLUMNS.join(",").as_str()));
        let row = lines.next().unwrap();
        // The traffic holds a comma, so it is quoted.
        assert!(
            row.ends_with(
                ",\"Poisson (seed 1), 256 random flows\",1000 1010,0.009950248756218905,100:0.25 90:0"
            ),
            "{row}"
        );
        assert_eq!(quoted("a \"b\""), "\"a \"\"b\"\"\"");
        // No search: the trials table has its header alone.
        assert_eq!(
            trials_csv(&report),
            format!("{}\n", TRIAL_COLUMNS.join(","))
        );
        assert_eq!(quoted("CBR"), "CBR");
    }
}
