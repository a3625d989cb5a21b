//! The report as CSV, for spreadsheets: one table of per-frame-size results, one of latency
//! per offered load, and one of every search trial with its departures (what was scheduled,
//! what left the tester, how late). Columns are fixed and named in the first line; an unknown
//! value is empty. Written with the `csv` crate, which quotes what needs quoting (RFC 4180).

use super::{Report, wire_bits_per_second};

/// Columns of [`results_csv`].
pub const RESULT_COLUMNS: [&str; 17] = [
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
    "reset_median_s",
    "reset_method",
];

/// Columns of [`latency_csv`].
pub const LATENCY_COLUMNS: [&str; 14] = [
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
    "percent_of_ndr",
];

/// Columns of [`trials_csv`].
pub const TRIAL_COLUMNS: [&str; 19] = [
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
    "not_sent",
    "receiver_refused",
];

fn cell(value: Option<f64>) -> String {
    value.map(|v| format!("{v}")).unwrap_or_default()
}

/// A CSV table: `columns`, then one record per row.
fn table<const N: usize>(
    columns: [&str; N],
    rows: impl IntoIterator<Item = [String; N]>,
) -> String {
    let mut writer = csv::Writer::from_writer(Vec::new());
    // Writing to memory cannot fail, and every record has the header's length.
    let _ = writer.write_record(columns);
    for row in rows {
        let _ = writer.write_record(&row);
    }
    let bytes = writer.into_inner().unwrap_or_default();
    String::from_utf8(bytes).unwrap_or_default()
}

/// One line per frame size (and kind of traffic).
pub fn results_csv(report: &Report) -> String {
    let rows = report.results.iter().map(|result| {
        let line = report.line_rate(result.frame_size);
        let ndr = result.ndr();
        let repeated = result.throughput.as_ref().and_then(|t| t.repeated.as_ref());
        [
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
            result.traffic.clone(),
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
            cell(result.reset.as_ref().map(|r| r.time.median)),
            result
                .reset
                .as_ref()
                .map(|r| r.method.clone())
                .unwrap_or_default(),
        ]
    });
    table(RESULT_COLUMNS, rows)
}

/// One line per frame size and offered load.
pub fn latency_csv(report: &Report) -> String {
    let rows = report.results.iter().flat_map(|result| {
        let line = report.line_rate(result.frame_size);
        let ndr = result.ndr().filter(|&ndr| ndr > 0.0);
        result.latency.iter().map(move |at| {
            let s = &at.summary;
            [
                result.frame_size.to_string(),
                at.rate.to_string(),
                s.count.to_string(),
                s.min_ns.to_string(),
                s.mean_ns.to_string(),
                s.p25_ns.to_string(),
                s.p50_ns.to_string(),
                s.p75_ns.to_string(),
                s.p95_ns.to_string(),
                s.p99_ns.to_string(),
                s.p999_ns.to_string(),
                s.max_ns.to_string(),
                (100.0 * at.rate / line).to_string(),
                cell(ndr.map(|ndr| 100.0 * at.rate / ndr)),
            ]
        })
    });
    table(LATENCY_COLUMNS, rows)
}

/// One line per trial of every search (the first, then those that measured repeatability),
/// with its departure figures where the trial measured them ([`crate::rfc2544::Departure`]).
pub fn trials_csv(report: &Report) -> String {
    let rows = report.results.iter().flat_map(|result| {
        result
            .searches()
            .enumerate()
            .flat_map(move |(search, trials)| {
                trials.iter().enumerate().map(move |(index, trial)| {
                    let outcome = &trial.outcome;
                    let departure = outcome.departure;
                    let count =
                        |value: Option<u64>| value.map(|v| v.to_string()).unwrap_or_default();
                    [
                        result.frame_size.to_string(),
                        result.traffic.clone(),
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
                        count(departure.and_then(|d| d.not_sent)),
                        outcome.receiver_refused.to_string(),
                    ]
                })
            })
    });
    table(TRIAL_COLUMNS, rows)
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
                ",\"Poisson (seed 1), 256 random flows\",1000 1010,0.009950248756218905,100:0.25 90:0,,"
            ),
            "{row}"
        );
        // No search: the trials table has its header alone.
        assert_eq!(
            trials_csv(&report),
            format!("{}\n", TRIAL_COLUMNS.join(","))
        );
        // A quote in a cell is doubled, and a reader gets the cell back whole.
        report.results[0].traffic = "a \"b\", c".into();
        let text = results_csv(&report);
        assert!(text.contains("\"a \"\"b\"\", c\""), "{text}");
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        let record = reader.records().next().unwrap().unwrap();
        assert_eq!(&record[11], "a \"b\", c");
        assert_eq!(record.len(), RESULT_COLUMNS.len());
    }
}
