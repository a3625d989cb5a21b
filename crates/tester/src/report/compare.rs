//! The side-by-side report of `wirespeed bench compare`: several DuTs through the same RFC 2544
//! throughput search (and latency at the NDR), repeated and interleaved, in one lab and one run.
//!
//! A [`Comparison`] keeps every run's full [`Report`] (calibration, trials, commands), so the
//! comparison can be checked and reproduced run by run; the summary is computed from them,
//! never stored apart: per (DuT, flows, frame size) the median NDR of the repeats and their
//! spread (min..max), the median latency percentiles at the NDR, and who was the limit. The
//! median rather than the mean, because one repeat disturbed by another job on a shared machine
//! should not move the figure; the spread is shown beside it so that a reader sees how far the
//! repeats agree before reading a ratio.
//!
//! wirespeed is compared with each peer as the ratio of median NDRs at the same flows and frame
//! size. When wirespeed's NDR reached the tester's own limit the ratio is a lower bound and is
//! written with `≥`.
//!
//! The runs' latency histograms are left out ([`CompareRun::new`]); their percentiles stay.
//! At the tester's nanosecond buckets one histogram is thousands of entries, and a comparison
//! of six DuTs with three repeats came to 26 MB of JSON with them; `bench rfc2544` on one DuT
//! keeps them for the plots.
//!
//! Renderings: JSON (the comparison plus the computed summary, versioned by
//! [`COMPARE_SCHEMA_VERSION`]), a markdown table for the terminal, and one self-contained HTML
//! page with a table and an SVG bar chart per (flows, frame size) whose whiskers are the spread
//! and whose dots are the single repeats.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::svg::{escape, si, ticks};
use super::{Limit, Report, Setup};
use crate::bench::median;

/// Version of the JSON layout of a [`Comparison`]. 2: latency histograms are HdrHistogram
/// encodings, as in the report.
pub const COMPARE_SCHEMA_VERSION: u32 = 2;

/// One DuT as it was run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ComparedDut {
    pub name: String,
    /// What exactly ran (software, version, port types, rule counts).
    pub description: String,
}

/// One suite run: one DuT, one flow count, one repeat.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompareRun {
    pub dut: String,
    pub flows: u32,
    /// 0-based repeat index.
    pub repeat: u32,
    pub report: Report,
}

/// Everything one `bench compare` measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub schema_version: u32,
    pub title: String,
    /// What the runs share (command line, machine, kernel); each run's report has its own too.
    pub setup: Setup,
    /// The DuTs in the order they ran within each repeat.
    pub duts: Vec<ComparedDut>,
    /// Every run, in the order it ran.
    pub runs: Vec<CompareRun>,
    #[serde(default)]
    pub notes: Vec<String>,
}

/// One line of the summary: a DuT at one flow count and frame size over its repeats.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CompareRow {
    pub dut: String,
    pub flows: u32,
    pub frame_size: u32,
    /// NDR of every repeat that found one, frames/s, in repeat order.
    pub ndrs: Vec<f64>,
    pub ndr_median: Option<f64>,
    pub ndr_min: Option<f64>,
    pub ndr_max: Option<f64>,
    /// Medians over the repeats of the latency percentiles at the NDR, nanoseconds.
    pub p50_ns: Option<u64>,
    pub p99_ns: Option<u64>,
    /// Median over the repeats of the latencies each histogram at the NDR holds (every frame
    /// with the probe receiver, one in N with the sampled one).
    #[serde(default)]
    pub samples: Option<u64>,
    /// Tester-limited if any repeat was: the DuT's own limit is then higher than shown.
    pub limit: Option<Limit>,
    /// Repeats run for this row (with or without an NDR).
    pub repeats: usize,
    /// Why repeats found no NDR (the runs' notes).
    pub failures: Vec<String>,
}

/// wirespeed against one peer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ratio {
    pub ours: String,
    pub peer: String,
    pub flows: u32,
    pub frame_size: u32,
    /// Median NDR of ours / median NDR of the peer.
    pub ratio: f64,
    /// Ours reached the tester's limit: the true ratio is at least this.
    pub lower_bound: bool,
    /// The peer does what ours does ([`function_of`]); `false` where the run had no peer of
    /// ours's function and every peer stands in.
    #[serde(default)]
    pub same_function: bool,
}

impl CompareRun {
    /// One run, its report without latency histogram buckets (percentiles, counts and every
    /// trial stay).
    pub fn new(dut: String, flows: u32, repeat: u32, mut report: Report) -> CompareRun {
        if let Some(calibration) = &mut report.calibration {
            calibration.latency.buckets.clear();
            for (_, summary) in &mut calibration.latency_by_size {
                summary.buckets.clear();
            }
        }
        for result in &mut report.results {
            for at in &mut result.latency {
                at.summary.buckets.clear();
            }
        }
        CompareRun {
            dut,
            flows,
            repeat,
            report,
        }
    }
}

impl Comparison {
    /// An empty comparison of the current schema.
    pub fn new(title: impl Into<String>, setup: Setup) -> Comparison {
        Comparison {
            schema_version: COMPARE_SCHEMA_VERSION,
            title: title.into(),
            setup,
            duts: Vec::new(),
            runs: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// The summary rows, in the order the DuTs ran, per flow count and frame size.
    pub fn rows(&self) -> Vec<CompareRow> {
        let mut keys: Vec<(u32, u32, String)> = Vec::new();
        for run in &self.runs {
            let sizes: Vec<u32> = if run.report.results.is_empty() {
                vec![0]
            } else {
                run.report.results.iter().map(|r| r.frame_size).collect()
            };
            for size in sizes {
                let key = (run.flows, size, run.dut.clone());
                if !keys.contains(&key) {
                    keys.push(key);
                }
            }
        }
        // A DuT whose every run failed before any frame size has only size 0: show it under
        // each size the others measured, so the table says it failed.
        let sizes: Vec<(u32, u32)> = keys
            .iter()
            .filter(|(_, size, _)| *size != 0)
            .map(|(flows, size, _)| (*flows, *size))
            .collect();
        let mut expanded: Vec<(u32, u32, String)> = Vec::new();
        for (flows, size, dut) in keys {
            let targets: Vec<u32> = if size == 0 {
                let mut found: Vec<u32> = sizes
                    .iter()
                    .filter(|(f, _)| *f == flows)
                    .map(|&(_, s)| s)
                    .collect();
                found.dedup();
                if found.is_empty() { vec![0] } else { found }
            } else {
                vec![size]
            };
            for target in targets {
                let key = (flows, target, dut.clone());
                if !expanded.contains(&key) {
                    expanded.push(key);
                }
            }
        }
        expanded.sort_by_key(|(flows, size, dut)| (*flows, *size, self.dut_order(dut)));
        expanded
            .into_iter()
            .map(|(flows, size, dut)| self.row(&dut, flows, size))
            .collect()
    }

    fn dut_order(&self, dut: &str) -> usize {
        self.duts
            .iter()
            .position(|d| d.name == dut)
            .unwrap_or(usize::MAX)
    }

    fn row(&self, dut: &str, flows: u32, frame_size: u32) -> CompareRow {
        let mut row = CompareRow {
            dut: dut.into(),
            flows,
            frame_size,
            ..CompareRow::default()
        };
        let mut p50 = Vec::new();
        let mut p99 = Vec::new();
        let mut samples = Vec::new();
        for run in self
            .runs
            .iter()
            .filter(|r| r.dut == dut && r.flows == flows)
        {
            row.repeats += 1;
            let result = run
                .report
                .results
                .iter()
                .find(|r| r.frame_size == frame_size);
            match result.and_then(|r| r.ndr().map(|ndr| (r, ndr))) {
                Some((result, ndr)) => {
                    row.ndrs.push(ndr);
                    if let Some(at) = result.latency.last().filter(|l| l.summary.count > 0) {
                        p50.push(at.summary.p50_ns as f64);
                        p99.push(at.summary.p99_ns as f64);
                        samples.push(at.summary.count as f64);
                    }
                    match (row.limit, result.limit) {
                        (_, Some(Limit::TesterLimited)) => row.limit = Some(Limit::TesterLimited),
                        (None, limit) => row.limit = limit,
                        _ => {}
                    }
                }
                None => {
                    let why = if run.report.notes.is_empty() {
                        format!("repeat {}: no NDR found", run.repeat + 1)
                    } else {
                        format!("repeat {}: {}", run.repeat + 1, run.report.notes.join("; "))
                    };
                    row.failures.push(why);
                }
            }
        }
        if !row.ndrs.is_empty() {
            row.ndr_median = Some(median(&row.ndrs));
            row.ndr_min = row.ndrs.iter().copied().reduce(f64::min);
            row.ndr_max = row.ndrs.iter().copied().reduce(f64::max);
        }
        if !p50.is_empty() {
            row.p50_ns = Some(median(&p50) as u64);
            row.p99_ns = Some(median(&p99) as u64);
            row.samples = Some(median(&samples) as u64);
        }
        row
    }
}

/// Whether `dut` is one of wirespeed's own DuTs (the numerators of the ratios).
pub fn is_ours(dut: &str) -> bool {
    dut.starts_with("wirespeed")
}

/// What a DuT does with a frame, as far as its name says: a comparison's ratios are taken
/// between DuTs of one function (issue 6's goals: the bridge against the bridge, the router
/// against the router), not across them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Function {
    /// Every frame out of the other port: wirespeed's cross-connect, the XDP redirect, testpmd.
    CrossConnect,
    /// A learning bridge: the Linux bridge, OvS's NORMAL action, wirespeed's bridge.
    Bridge,
    /// IPv4 and IPv6 forwarding: the Linux router (with nftables rules or a shaper too),
    /// wirespeed's router.
    Router,
    /// A flow table: OvS with its flows, wirespeed's openflow app.
    FlowTable,
}

/// The function of the DuT named `dut` (a name as the compare reports it, options such as
/// `+scrape` or `:N` included); `None` for one the tester does not know (an external DuT).
pub fn function_of(dut: &str) -> Option<Function> {
    let name = dut.split(['+', ':']).next().unwrap_or(dut);
    if let Some(app) = name.strip_prefix("wirespeed-") {
        return Some(match app.split('-').next() {
            Some("bridge") => Function::Bridge,
            Some("router") => Function::Router,
            Some("openflow") => Function::FlowTable,
            _ => Function::CrossConnect,
        });
    }
    match name {
        "linux-bridge" | "ovs-normal" => Some(Function::Bridge),
        "ovs" | "ovs-afpacket" => Some(Function::FlowTable),
        "xdp-redirect" | "dpdk-testpmd" => Some(Function::CrossConnect),
        _ if name.starts_with("linux-router") => Some(Function::Router),
        _ => None,
    }
}

/// Every wirespeed DuT against the peers of its function ([`function_of`]) at the same flows
/// and frame size, where both have an NDR; against every peer where the run has none of its
/// function (the ratios then say so).
pub fn ratios(rows: &[CompareRow]) -> Vec<Ratio> {
    let mut out = Vec::new();
    for ours in rows.iter().filter(|r| is_ours(&r.dut)) {
        let Some(our_ndr) = ours.ndr_median else {
            continue;
        };
        let peers: Vec<(&CompareRow, f64)> = rows
            .iter()
            .filter(|r| {
                !is_ours(&r.dut) && r.flows == ours.flows && r.frame_size == ours.frame_size
            })
            .filter_map(|peer| Some((peer, peer.ndr_median.filter(|n| *n > 0.0)?)))
            .collect();
        let function = function_of(&ours.dut);
        let (alike, others): (Vec<_>, Vec<_>) = peers
            .into_iter()
            .partition(|(peer, _)| function.is_some() && function_of(&peer.dut) == function);
        let same_function = !alike.is_empty();
        for (peer, peer_ndr) in if same_function { alike } else { others } {
            out.push(Ratio {
                ours: ours.dut.clone(),
                peer: peer.dut.clone(),
                flows: ours.flows,
                frame_size: ours.frame_size,
                ratio: our_ndr / peer_ndr,
                lower_bound: ours.limit == Some(Limit::TesterLimited),
                same_function,
            });
        }
    }
    out
}

impl Ratio {
    /// `2.41 x` or `≥ 2.41 x`.
    pub fn text(&self) -> String {
        let bound = if self.lower_bound { "≥ " } else { "" };
        format!("{bound}{:.2} x", self.ratio)
    }

    /// The peer's name, marked when it does something else than ours.
    pub fn peer_text(&self) -> String {
        if self.same_function {
            self.peer.clone()
        } else {
            format!(
                "{} (another function: no peer of the same in this run)",
                self.peer
            )
        }
    }
}

/// The JSON document: the comparison with its computed summary and ratios.
#[derive(Serialize)]
struct Document<'a> {
    #[serde(flatten)]
    comparison: &'a Comparison,
    summary: Vec<CompareRow>,
    ratios: Vec<Ratio>,
}

/// The comparison as compact JSON on one line (as the report's), with the summary and the
/// ratios computed.
pub fn to_json(comparison: &Comparison) -> String {
    let summary = comparison.rows();
    let ratios = ratios(&summary);
    let document = Document {
        comparison,
        summary,
        ratios,
    };
    // Strings, numbers, options and vectors only: serialising cannot fail.
    let mut text =
        serde_json::to_string(&document).unwrap_or_else(|_| unreachable!("reports serialise"));
    text.push('\n');
    text
}

/// Why a comparison cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum CompareJsonError {
    #[error("comparison JSON is malformed: {0}")]
    Syntax(#[from] serde_json::Error),
    #[error(
        "comparison has schema version {found}, this wirespeed reads version \
         {COMPARE_SCHEMA_VERSION}; use the wirespeed that wrote it"
    )]
    Version { found: u64 },
}

/// Reads a comparison written by [`to_json`] (the computed summary is ignored: it is computed
/// again from the runs).
pub fn from_json(text: &str) -> Result<Comparison, CompareJsonError> {
    let value: serde_json::Value = serde_json::from_str(text)?;
    let found = value
        .get("schema_version")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    if found != COMPARE_SCHEMA_VERSION as u64 {
        return Err(CompareJsonError::Version { found });
    }
    Ok(serde_json::from_value(value)?)
}

fn mpps(value: Option<f64>) -> String {
    value.map_or_else(|| "-".into(), |v| format!("{:.3}", v / 1e6))
}

fn micros(value: Option<u64>) -> String {
    value.map_or_else(|| "-".into(), |v| format!("{:.1}", v as f64 / 1e3))
}

fn spread(row: &CompareRow) -> String {
    match (row.ndr_min, row.ndr_max) {
        (Some(low), Some(high)) => format!("{}..{}", mpps(Some(low)), mpps(Some(high))),
        _ => "-".into(),
    }
}

fn limit_text(row: &CompareRow) -> String {
    match (row.limit, row.ndr_median) {
        (Some(limit), _) => limit.label().into(),
        (None, Some(_)) => "-".into(),
        (None, None) => format!(
            "failed: {}",
            row.failures
                .first()
                .map_or("", String::as_str)
                .replace('\n', " ")
        ),
    }
}

/// The summary as a markdown table, then the ratios.
pub fn summary_table(comparison: &Comparison) -> String {
    let rows = comparison.rows();
    let mut out = String::new();
    let _ = writeln!(out, "{}", comparison.title);
    let _ = writeln!(
        out,
        "| DuT | flows | frame | NDR Mpps (median) | min..max | NDRs found | p50 / p99 µs at NDR | samples | limit |"
    );
    let _ = writeln!(
        out,
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
    );
    for row in &rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} B | {} | {} | {}/{} | {} / {} | {} | {} |",
            row.dut,
            row.flows,
            row.frame_size,
            mpps(row.ndr_median),
            spread(row),
            row.ndrs.len(),
            row.repeats,
            micros(row.p50_ns),
            micros(row.p99_ns),
            row.samples.map_or("-".into(), |n| n.to_string()),
            limit_text(row)
        );
    }
    let ratios = ratios(&rows);
    if !ratios.is_empty() {
        let _ = writeln!(
            out,
            "\nwirespeed relative to each peer of its function (median NDR / median NDR):"
        );
        for ratio in &ratios {
            let _ = writeln!(
                out,
                "- {} flow(s), {} B: {} is {} {}",
                ratio.flows,
                ratio.frame_size,
                ratio.ours,
                ratio.text(),
                ratio.peer_text()
            );
        }
    }
    for note in &comparison.notes {
        let _ = writeln!(out, "note: {note}");
    }
    out
}

const BAR_WIDTH: f64 = 640.0;
const LABEL: f64 = 170.0;
const BAR_RIGHT: f64 = 90.0;
const BAR_ROW: f64 = 28.0;
const BAR_TOP: f64 = 34.0;
const BAR_BOTTOM: f64 = 42.0;

/// A horizontal bar chart of the median NDRs of `rows` (one flow count and frame size): one bar
/// per DuT, a whisker from the lowest to the highest repeat, a dot per repeat.
pub fn bar_chart(title: &str, rows: &[&CompareRow]) -> String {
    let high = rows.iter().filter_map(|r| r.ndr_max).fold(0.0f64, f64::max);
    let high = if high > 0.0 { high * 1.05 } else { 1.0 };
    let height = BAR_TOP + BAR_BOTTOM + BAR_ROW * rows.len().max(1) as f64;
    let plot = BAR_WIDTH - LABEL - BAR_RIGHT;
    let x = |value: f64| LABEL + plot * (value / high).clamp(0.0, 1.0);
    let mut out = String::new();
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{BAR_WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {BAR_WIDTH} {height}\" font-family=\"sans-serif\" font-size=\"11\">\
         <text x=\"{}\" y=\"18\" text-anchor=\"middle\" font-size=\"13\">{}</text>",
        BAR_WIDTH / 2.0,
        escape(title)
    );
    let bottom = height - BAR_BOTTOM;
    for tick in ticks(0.0, high, 5) {
        let tx = x(tick);
        let _ = write!(
            out,
            "<line x1=\"{tx:.1}\" y1=\"{BAR_TOP}\" x2=\"{tx:.1}\" y2=\"{bottom:.1}\" stroke=\"#e4e4e4\"/>\
             <text x=\"{tx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            bottom + 14.0,
            si(tick)
        );
    }
    let _ = write!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">NDR, frames/s (bar: median; whisker: \
         min..max of the repeats; dots: repeats)</text>",
        LABEL + plot / 2.0,
        bottom + 32.0
    );
    for (index, row) in rows.iter().enumerate() {
        let top = BAR_TOP + BAR_ROW * index as f64;
        let middle = top + BAR_ROW / 2.0;
        let colour = if is_ours(&row.dut) {
            "#1f77b4"
        } else {
            "#9a9a9a"
        };
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            LABEL - 6.0,
            middle + 4.0,
            escape(&row.dut)
        );
        let Some(median) = row.ndr_median else {
            let _ = write!(
                out,
                "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"#d62728\">no NDR</text>",
                LABEL + 4.0,
                middle + 4.0
            );
            continue;
        };
        let _ = write!(
            out,
            "<rect x=\"{LABEL}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{colour}\"/>",
            top + 5.0,
            x(median) - LABEL,
            BAR_ROW - 10.0
        );
        if let (Some(low), Some(high)) = (row.ndr_min, row.ndr_max) {
            let _ = write!(
                out,
                "<line x1=\"{:.1}\" y1=\"{middle:.1}\" x2=\"{:.1}\" y2=\"{middle:.1}\" stroke=\"#222\"/>\
                 <line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#222\"/>\
                 <line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#222\"/>",
                x(low),
                x(high),
                x(low),
                middle - 5.0,
                x(low),
                middle + 5.0,
                x(high),
                middle - 5.0,
                x(high),
                middle + 5.0
            );
        }
        for ndr in &row.ndrs {
            let _ = write!(
                out,
                "<circle cx=\"{:.1}\" cy=\"{middle:.1}\" r=\"2.5\" fill=\"#fff\" stroke=\"#222\"/>",
                x(*ndr)
            );
        }
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            x(row.ndr_max.unwrap_or(median)) + 6.0,
            middle + 4.0,
            si(median)
        );
    }
    out.push_str("</svg>");
    out
}

fn cell(out: &mut String, text: &str) {
    let _ = write!(out, "<td>{}</td>", escape(text));
}

/// The whole page: setup, the side-by-side table, a bar chart per (flows, frame size), the
/// ratios, what each DuT was and the commands of its first run, the settings, and the notes.
pub fn to_html(comparison: &Comparison) -> String {
    let rows = comparison.rows();
    let title = escape(&comparison.title);
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title><style>\
body{{font-family:sans-serif;margin:24px;max-width:1180px;color:#222}}\
table{{border-collapse:collapse;margin:8px 0 18px}}th,td{{border:1px solid #ccc;padding:3px 8px;text-align:left;font-size:13px;vertical-align:top}}\
th{{background:#f3f3f3}}pre{{background:#f7f7f7;padding:8px;font-size:12px;white-space:pre-wrap}}\
.plots{{display:flex;flex-wrap:wrap;gap:12px}}.plots svg{{border:1px solid #eee}}\
</style></head><body><h1>{title}</h1><p>wirespeed comparison, schema version {}.</p>",
        comparison.schema_version
    );
    let setup = &comparison.setup;
    out.push_str("<h2>Setup</h2><table>");
    for (name, value) in [
        ("started", setup.started.clone()),
        ("command line", setup.command_line.join(" ")),
        ("kernel", setup.kernel.clone()),
        (
            "CPU",
            format!("{} at {} MHz", setup.cpu_model, setup.cpu_mhz),
        ),
        ("traffic", setup.traffic.clone()),
        ("receiver", setup.receiver.clone()),
        ("search", setup.search.clone()),
    ] {
        out.push_str("<tr><th>");
        out.push_str(&escape(name));
        out.push_str("</th>");
        cell(&mut out, &value);
        out.push_str("</tr>");
    }
    out.push_str(
        "</table><h2>Side by side</h2><table><tr><th>DuT</th><th>flows</th>\
<th>frame</th><th>NDR Mpps (median)</th><th>min..max</th><th>NDRs found</th>\
<th>p50 µs at NDR</th><th>p99 µs at NDR</th><th>latency samples</th><th>limit</th></tr>",
    );
    for row in &rows {
        out.push_str("<tr>");
        cell(&mut out, &row.dut);
        cell(&mut out, &row.flows.to_string());
        cell(&mut out, &format!("{} B", row.frame_size));
        cell(&mut out, &mpps(row.ndr_median));
        cell(&mut out, &spread(row));
        cell(&mut out, &format!("{}/{}", row.ndrs.len(), row.repeats));
        cell(&mut out, &micros(row.p50_ns));
        cell(&mut out, &micros(row.p99_ns));
        cell(&mut out, &row.samples.map_or("-".into(), |n| n.to_string()));
        cell(&mut out, &limit_text(row));
        out.push_str("</tr>");
    }
    out.push_str("</table><div class=\"plots\">");
    let mut groups: Vec<(u32, u32)> = Vec::new();
    for row in &rows {
        if !groups.contains(&(row.flows, row.frame_size)) {
            groups.push((row.flows, row.frame_size));
        }
    }
    for (flows, size) in groups {
        let members: Vec<&CompareRow> = rows
            .iter()
            .filter(|r| r.flows == flows && r.frame_size == size)
            .collect();
        out.push_str(&bar_chart(
            &format!("NDR, {size} B frames, {flows} flow(s)"),
            &members,
        ));
    }
    out.push_str("</div>");
    let ratios = ratios(&rows);
    if !ratios.is_empty() {
        out.push_str(
            "<h2>wirespeed relative to each peer of its function</h2><table><tr><th>flows</th>\
<th>frame</th><th>wirespeed DuT</th><th>peer</th><th>median NDR ratio</th></tr>",
        );
        for ratio in &ratios {
            out.push_str("<tr>");
            cell(&mut out, &ratio.flows.to_string());
            cell(&mut out, &format!("{} B", ratio.frame_size));
            cell(&mut out, &ratio.ours);
            cell(&mut out, &ratio.peer_text());
            cell(&mut out, &ratio.text());
            out.push_str("</tr>");
        }
        out.push_str(
            "</table><p>≥: wirespeed reached the tester's own limit; its true NDR, \
and the ratio, are higher.</p>",
        );
    }
    out.push_str("<h2>DuTs</h2>");
    for dut in &comparison.duts {
        let _ = write!(
            out,
            "<h3>{}</h3><p>{}</p>",
            escape(&dut.name),
            escape(&dut.description)
        );
        if let Some(run) = comparison.runs.iter().find(|r| r.dut == dut.name) {
            let _ = write!(
                out,
                "<pre>{}</pre>",
                escape(&run.report.setup.dut.commands.join("\n"))
            );
        }
    }
    let _ = write!(out, "<h2>Settings</h2><pre>{}</pre>", escape(&setup.config));
    if !comparison.notes.is_empty() || comparison.runs.iter().any(|r| !r.report.notes.is_empty()) {
        out.push_str("<h2>Notes</h2><ul>");
        for note in &comparison.notes {
            let _ = write!(out, "<li>{}</li>", escape(note));
        }
        for run in &comparison.runs {
            for note in &run.report.notes {
                let _ = write!(
                    out,
                    "<li>{} ({} flow(s), repeat {}): {}</li>",
                    escape(&run.dut),
                    run.flows,
                    run.repeat + 1,
                    escape(note)
                );
            }
        }
        out.push_str("</ul>");
    }
    out.push_str("</body></html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{FrameSizeResult, LatencyAtLoad};
    use crate::rfc2544::ThroughputResult;
    use crate::stats::LatencySummary;

    fn run(dut: &str, repeat: u32, ndr: Option<f64>, limit: Option<Limit>) -> CompareRun {
        let mut report = Report::new(format!("{dut}, RFC 2544"), Setup::default());
        match ndr {
            Some(ndr) => report.results.push(FrameSizeResult {
                frame_size: 64,
                throughput: Some(ThroughputResult {
                    ndr: Some(ndr),
                    lowest_failing: None,
                    repeated: None,
                    truncated: false,
                    trials: Vec::new(),
                }),
                latency: vec![LatencyAtLoad {
                    rate: ndr,
                    summary: LatencySummary {
                        count: 10,
                        p50_ns: (ndr / 100.0) as u64,
                        p99_ns: (ndr / 10.0) as u64,
                        ..LatencySummary::default()
                    },
                }],
                limit,
                ..FrameSizeResult::default()
            }),
            None => report.notes.push(format!(
                "DuT {dut}: start ovs-vswitchd failed: no such file"
            )),
        }
        CompareRun {
            dut: dut.into(),
            flows: 1,
            repeat,
            report,
        }
    }

    fn comparison() -> Comparison {
        let mut c = Comparison::new("compare", Setup::default());
        for name in ["wirespeed-afxdp", "linux-bridge", "ovs"] {
            c.duts.push(ComparedDut {
                name: name.into(),
                description: format!("{name} as run"),
            });
        }
        let ours = Some(Limit::DutLimited);
        c.runs = vec![
            run("wirespeed-afxdp", 0, Some(600_000.0), ours),
            run("linux-bridge", 0, Some(200_000.0), ours),
            run("ovs", 0, None, None),
            run(
                "wirespeed-afxdp",
                1,
                Some(500_000.0),
                Some(Limit::TesterLimited),
            ),
            run("linux-bridge", 1, Some(300_000.0), ours),
            run("ovs", 1, None, None),
            run("wirespeed-afxdp", 2, Some(700_000.0), ours),
            run("linux-bridge", 2, Some(250_000.0), ours),
            run("ovs", 2, None, None),
        ];
        c
    }

    #[test]
    fn rows_take_the_median_and_spread_of_the_repeats_and_keep_failures() {
        let rows = comparison().rows();
        assert_eq!(rows.len(), 3);
        let names: Vec<&str> = rows.iter().map(|r| r.dut.as_str()).collect();
        assert_eq!(names, ["wirespeed-afxdp", "linux-bridge", "ovs"]);
        let ours = &rows[0];
        assert_eq!(ours.ndrs, [600_000.0, 500_000.0, 700_000.0]);
        assert_eq!(ours.ndr_median, Some(600_000.0));
        assert_eq!(
            (ours.ndr_min, ours.ndr_max),
            (Some(500_000.0), Some(700_000.0))
        );
        assert_eq!(ours.p50_ns, Some(6_000));
        assert_eq!(
            ours.limit,
            Some(Limit::TesterLimited),
            "any repeat at the tester's limit"
        );
        let ovs = &rows[2];
        assert_eq!((ovs.frame_size, ovs.repeats), (64, 3));
        assert_eq!(ovs.ndr_median, None);
        assert!(ovs.failures[0].contains("start ovs-vswitchd failed"));
    }

    #[test]
    fn runs_keep_percentiles_but_not_histogram_buckets() {
        let mut report = run("ovs", 0, Some(1000.0), None).report;
        let bucket = crate::stats::LatencyBucket {
            low_ns: 10,
            high_ns: 10,
            count: 3,
        };
        report.results[0].latency[0].summary.buckets = vec![bucket; 5];
        report.calibration = Some(crate::report::Calibration {
            latency: LatencySummary {
                buckets: vec![bucket; 4],
                p50_ns: 7,
                ..LatencySummary::default()
            },
            latency_by_size: vec![(
                64,
                LatencySummary {
                    buckets: vec![bucket; 4],
                    ..LatencySummary::default()
                },
            )],
            ..crate::report::Calibration::default()
        });
        let run = CompareRun::new("ovs".into(), 1, 0, report);
        let calibration = run.report.calibration.as_ref().unwrap();
        assert!(calibration.latency.buckets.is_empty());
        assert_eq!(calibration.latency.p50_ns, 7);
        assert!(calibration.latency_by_size[0].1.buckets.is_empty());
        let at = &run.report.results[0].latency[0].summary;
        assert!(at.buckets.is_empty());
        assert_eq!((at.p50_ns, at.count), (10, 10));
    }

    #[test]
    fn ratios_divide_medians_and_mark_tester_limited_ones_as_lower_bounds() {
        let ratios = ratios(&comparison().rows());
        assert_eq!(ratios.len(), 1, "no ratio against a DuT without an NDR");
        assert_eq!(ratios[0].peer, "linux-bridge");
        assert_eq!(ratios[0].ratio, 600_000.0 / 250_000.0);
        assert_eq!(ratios[0].text(), "≥ 2.40 x");
        assert!(
            !ratios[0].same_function,
            "a cross-connect against the bridge, the only peer with an NDR"
        );
        assert!(ratios[0].peer_text().contains("another function"));
    }

    #[test]
    fn each_wirespeed_dut_is_set_against_the_peers_of_its_function() {
        let ours = Some(Limit::DutLimited);
        let mut c = Comparison::new("compare", Setup::default());
        let duts = [
            ("linux-bridge", 500_000.0),
            ("wirespeed-bridge-xdp", 1_500_000.0),
            ("linux-router", 400_000.0),
            ("wirespeed-router-xdp", 1_200_000.0),
            ("ovs", 600_000.0),
            ("wirespeed-openflow-xdp", 1_800_000.0),
            ("wirespeed-xdp+scrape", 2_000_000.0),
        ];
        for (name, ndr) in duts {
            c.runs.push(run(name, 0, Some(ndr), ours));
        }
        let found: Vec<(String, String, f64, bool)> = ratios(&c.rows())
            .into_iter()
            .map(|r| (r.ours, r.peer, r.ratio, r.same_function))
            .collect();
        let expect = |ours: &str, peer: &str, ratio: f64, same: bool| {
            (ours.to_string(), peer.to_string(), ratio, same)
        };
        // The cross-connect has no peer of its own function here: every peer stands in.
        assert_eq!(
            found,
            [
                expect("wirespeed-bridge-xdp", "linux-bridge", 3.0, true),
                expect("wirespeed-router-xdp", "linux-router", 3.0, true),
                expect("wirespeed-openflow-xdp", "ovs", 3.0, true),
                expect("wirespeed-xdp+scrape", "linux-bridge", 4.0, false),
                expect("wirespeed-xdp+scrape", "linux-router", 5.0, false),
                expect(
                    "wirespeed-xdp+scrape",
                    "ovs",
                    2_000_000.0 / 600_000.0,
                    false
                ),
            ]
        );
        for (name, function) in [
            ("linux-router-nft:1000", Function::Router),
            ("linux-router-tbf:50", Function::Router),
            ("ovs-normal", Function::Bridge),
            ("ovs-afpacket", Function::FlowTable),
            ("dpdk-testpmd", Function::CrossConnect),
            ("wirespeed-afpacket-v2", Function::CrossConnect),
            ("wirespeed-openflow-ofctl-xdp", Function::FlowTable),
        ] {
            assert_eq!(function_of(name), Some(function), "{name}");
        }
        assert_eq!(function_of("external"), None);
    }

    #[test]
    fn json_round_trips_and_html_and_table_show_every_dut() {
        let c = comparison();
        let json = to_json(&c);
        assert!(json.contains("\"summary\"") && json.contains("\"ratios\""));
        assert_eq!(from_json(&json).unwrap(), c);
        let wrong = json.replacen(
            &format!("\"schema_version\":{COMPARE_SCHEMA_VERSION}"),
            "\"schema_version\":9",
            1,
        );
        assert!(matches!(
            from_json(&wrong),
            Err(CompareJsonError::Version { found: 9 })
        ));
        let html = to_html(&c);
        assert!(html.contains("<svg") && html.ends_with("</html>\n"));
        for name in ["wirespeed-afxdp", "linux-bridge", "ovs"] {
            assert!(html.contains(&format!("<td>{name}</td>")), "{name}");
        }
        assert!(html.contains("no NDR"));
        assert_eq!(
            html.matches("<circle").count(),
            6,
            "a dot per repeat with an NDR"
        );
        let table = summary_table(&c);
        assert!(table.contains("| wirespeed-afxdp | 1 | 64 B | 0.600 | 0.500..0.700 | 3/3 |"));
        assert!(table.contains("| ovs | 1 | 64 B | - | - | 0/3 |"));
        assert!(table.contains("wirespeed-afxdp is ≥ 2.40 x linux-bridge"));
    }
}
