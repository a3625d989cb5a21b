//! Reports rendered from synthetic results (real searches run against a simulated DuT, real
//! histograms of generated latencies): the HTML has one `<svg>` per plot with axis labels and
//! fetches nothing; the JSON round-trips and refuses other schema versions; the CSV has its
//! columns. Also writes the example report, docs/report-example.html.

use wirespeed_tester::bench::wakeups::Wakeups;
use wirespeed_tester::generator::pacing::{PacingAccuracy, Pattern, Rng, Schedule};
use wirespeed_tester::report::csv::{LATENCY_COLUMNS, RESULT_COLUMNS, latency_csv, results_csv};
use wirespeed_tester::report::html::{plots, to_html};
use wirespeed_tester::report::json::{JsonError, from_json, to_json};
use wirespeed_tester::report::{
    Calibration, CorePin, DutSetup, FrameSizeResult, LatencyAtLoad, Report, SCHEMA_VERSION, Setup,
};
use wirespeed_tester::rfc2544::{
    BackToBackConfig, Load, LossRateConfig, MlrConfig, ThroughputConfig, TrialOutcome, TrialSpec,
    Vote, back_to_back, line_rate, loss_rate, mlrsearch, throughput,
};
use wirespeed_tester::stats::LatencyHistogram;

const LINK: f64 = 10e9;

/// A DuT limited to 2 Mpps and to the link, with a 20 000-frame buffer.
fn dut(frame_size: u32) -> impl FnMut(TrialSpec) -> TrialOutcome {
    let capacity = 2e6f64.min(line_rate(LINK, frame_size));
    move |spec| match spec.load {
        Load::Rate { rate, seconds } => {
            let sent = (rate * seconds) as u64;
            TrialOutcome {
                sent,
                received: sent.min((capacity * seconds) as u64 + 20_000),
                seconds,
                ..TrialOutcome::default()
            }
        }
        Load::Burst { frames, rate } => {
            let held = frames as f64 * (1.0 - (capacity / rate).min(1.0));
            TrialOutcome {
                sent: frames,
                received: frames - ((held - 20_000.0).max(0.0) as u64).min(frames),
                seconds: frames as f64 / rate,
                ..TrialOutcome::default()
            }
        }
        Load::Step { .. } => TrialOutcome::default(),
    }
}

fn latency(load: f64, seed: u64) -> LatencyHistogram {
    // Base latency grows with load, plus a long tail and a second mode.
    let mut rng = Rng::new(seed);
    let mut histogram = LatencyHistogram::new();
    for _ in 0..50_000 {
        let base = 8_000.0 + 30_000.0 * load * load;
        let mode = if rng.chance(0.15) { 12_000.0 } else { 0.0 };
        let tail = if rng.chance(0.002) {
            rng.exponential(200_000.0)
        } else {
            0.0
        };
        histogram.record((base + mode + rng.exponential(1_500.0) + tail) as u64);
    }
    histogram
}

fn synthetic_report() -> Report {
    let setup = Setup {
        started: "2026-11-22T10:00:00Z".into(),
        command_line: vec![
            "wirespeed".into(),
            "bench".into(),
            "rfc2544".into(),
            "--dut".into(),
            "linux-bridge".into(),
        ],
        config: "[bench]\nframe_sizes = [64, 128, 256, 512, 1024, 1280, 1518]\n".into(),
        dut: DutSetup {
            name: "Linux bridge".into(),
            version: "6.18".into(),
            commands: vec![
                "ip link add wstbr0 type bridge".into(),
                "ip link set wstdut0 master wstbr0".into(),
            ],
            output: String::new(),
            host: "this machine, namespace wst-dut".into(),
        },
        versions: [("wirespeed".to_string(), "0.1.0".to_string())].into(),
        kernel: "6.18.0".into(),
        cpu_model: "Intel Xeon (KVM)".into(),
        cpu_mhz: 2300.0,
        tsc_hz: 2_300_000_000,
        xdp_mode: "afxdp native, copy".into(),
        core_pinning: vec![
            CorePin {
                thread: "generator".into(),
                core: 0,
            },
            CorePin {
                thread: "sink".into(),
                core: 1,
            },
        ],
        link_bits_per_second: LINK,
        timestamp_source: "TSC".into(),
        timestamp_resolution_ns: 0.43,
        traffic: "CBR, 1 flow, UDP/IPv4".into(),
        receiver: "throughput searches: XDP probe counter; latency: AF_XDP probe receiver".into(),
        search: Vote::majority(9, 1.0).describe(1.0),
        dut_core_wakeups: Some(Wakeups {
            core: 1,
            realtime: true,
            seconds: 1.0,
            interval_us: 200.0,
            samples: 5000,
            p50_us: 12.5,
            p99_us: 81.0,
            max_us: 1250.0,
            late_300us_per_second: 3.0,
            late_1ms_per_second: 1.0,
        }),
    };
    let mut report = Report::new("Linux bridge, RFC 2544 (synthetic example)", setup);
    report.calibration = Some(Calibration {
        throughput: vec![(64, 4.1e6), (1518, line_rate(LINK, 1518))],
        latency: latency(0.0, 99).summary(),
        pacing: None,
        latency_by_size: Vec::new(),
    });
    for (index, &size) in [64u32, 128, 256, 512, 1024, 1280, 1518].iter().enumerate() {
        let line = line_rate(LINK, size);
        let mut result = FrameSizeResult {
            frame_size: size,
            ..FrameSizeResult::default()
        };
        result.throughput = Some(throughput(
            &ThroughputConfig {
                max_rate: line,
                resolution: line * 0.001,
                ..ThroughputConfig::default()
            },
            dut(size),
        ));
        result.mlrsearch = Some(mlrsearch(
            &MlrConfig {
                max_rate: line,
                ..MlrConfig::default()
            },
            dut(size),
        ));
        if size == 64 || size == 512 || size == 1518 {
            result.loss_rate = Some(loss_rate(
                &LossRateConfig {
                    max_rate: line,
                    ..LossRateConfig::default()
                },
                dut(size),
            ));
        }
        if size == 64 || size == 1518 {
            result.back_to_back = Some(back_to_back(
                &BackToBackConfig {
                    rate: line,
                    repeats: 3,
                    ..BackToBackConfig::default()
                },
                dut(size),
            ));
            let ndr = result.ndr().unwrap_or(line);
            result.latency = [0.1, 0.5, 0.9, 1.0]
                .iter()
                .map(|&share| LatencyAtLoad {
                    rate: share * ndr,
                    summary: latency(share * ndr / line, index as u64).summary(),
                })
                .collect();
        }
        // Pacing: a schedule against "departures" jittered by a few hundred cycles.
        let asked = 0.5 * line;
        let scheduled: Vec<u64> = Schedule::new(Pattern::Cbr, asked, 2_300_000_000, 1_000_000)
            .unwrap()
            .take(10_000)
            .collect();
        let mut rng = Rng::new(size as u64);
        let departures: Vec<u64> = scheduled
            .iter()
            .map(|&t| t + (rng.unit() * 300.0) as u64 + size as u64 / 8)
            .collect();
        result.pacing = Some(PacingAccuracy::measure(
            asked,
            2_300_000_000,
            &departures,
            &scheduled,
        ));
        report.results.push(result);
    }
    report
}

#[test]
fn html_has_one_svg_per_plot_with_labels_and_no_external_urls() {
    let report = synthetic_report();
    let html = to_html(&report);
    let plots = plots(&report);
    // Throughput twice, loss, histogram and percentiles for two frame sizes, back-to-back
    // bursts, pacing.
    assert_eq!(plots.len(), 9);
    assert_eq!(html.matches("<svg").count(), plots.len());
    assert_eq!(html.matches("</svg>").count(), plots.len());
    assert!(
        html.contains(
            "max 1.25 ms; 3.0/s at least 0.3 ms late, 1.0/s at least 1 ms; the worst stop \
             overflows a veth&#39;s 256-frame ring above 0.205 Mpps"
        ),
        "the DuT core's wake-ups in the setup"
    );
    for label in [
        "frame size (bytes)",
        "frames/s",
        "bit/s",
        "offered load (% of the NDR)",
        "frames lost (%)",
        "latency (µs)",
        "rate error (%)",
    ] {
        assert!(html.contains(&format!(">{label}</text>")), "{label}");
    }
    assert!(html.contains("line rate 10Gbit/s"));
    // Nothing to fetch: no URL, no src, no href, no script.
    for forbidden in ["http", "src=", "href=", "<script", "url("] {
        assert!(!html.contains(forbidden), "{forbidden}");
    }
    // The whole setup is there.
    for needle in [
        "wirespeed bench rfc2544 --dut linux-bridge",
        "ip link add wstbr0 type bridge",
        "6.18.0",
        "Intel Xeon (KVM) at 2300 MHz",
        "afxdp native, copy",
        "generator on core 0",
        "TSC (resolution 0.43 ns)",
        "throughput searches: XDP probe counter",
        "frame_sizes = [64",
        "Calibration",
        "exceed ratio 0.5, duration sum 9 s",
    ] {
        assert!(html.contains(needle), "{needle}");
    }
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/report-example.html");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, &html).unwrap();
}

#[test]
fn json_round_trips_and_checks_the_schema_version() {
    let report = synthetic_report();
    let json = to_json(&report);
    assert!(json.contains(&format!("\"schema_version\":{SCHEMA_VERSION}")));
    let back = from_json(&json).unwrap();
    assert!(back == report, "the report read back differs");
    let future = json.replacen(
        &format!("\"schema_version\":{SCHEMA_VERSION}"),
        "\"schema_version\":999",
        1,
    );
    assert!(matches!(
        from_json(&future),
        Err(JsonError::Version { found: 999 })
    ));
    assert!(matches!(from_json("{"), Err(JsonError::Syntax(_))));
    // Every trial of every search is in the JSON.
    let trials: usize = report
        .results
        .iter()
        .map(|r| r.throughput.as_ref().unwrap().trials.len())
        .sum();
    assert!(trials > 7 * 5);
    assert!(json.matches("\"outcome\"").count() >= trials);
}

#[test]
fn csv_has_its_columns_and_one_line_per_result() {
    let report = synthetic_report();
    let results = results_csv(&report);
    let lines: Vec<&str> = results.lines().collect();
    assert_eq!(lines[0], RESULT_COLUMNS.join(","));
    assert_eq!(lines.len(), 1 + 7);
    for line in &lines[1..] {
        assert_eq!(line.split(',').count(), RESULT_COLUMNS.len(), "{line}");
    }
    // 64-byte frames: the DuT's 2 Mpps (plus what its buffer hides), 13 % of line rate.
    let cells: Vec<&str> = lines[1].split(',').collect();
    assert_eq!(cells[0], "64");
    let ndr: f64 = cells[2].parse().unwrap();
    assert!((ndr / 2e6 - 1.0).abs() < 0.01, "{ndr}");
    let latency = latency_csv(&report);
    let lines: Vec<&str> = latency.lines().collect();
    assert_eq!(lines[0], LATENCY_COLUMNS.join(","));
    assert_eq!(lines.len(), 1 + 2 * 4);
    assert!(
        lines[1..]
            .iter()
            .all(|l| l.split(',').count() == LATENCY_COLUMNS.len())
    );
}

#[test]
fn a_programs_output_is_kept_in_the_json_and_shown_in_the_html() {
    let mut report = synthetic_report();
    assert!(
        !to_html(&report).contains("DuT output"),
        "a kernel DuT has none"
    );
    report.setup.dut.output = "drops by reason:\n  tx_full  4148 <- ring".into();
    let html = to_html(&report);
    assert!(html.contains(
        "<details><summary>DuT output</summary><pre>drops by reason:\n  tx_full  4148 &lt;- ring"
    ));
    let back = from_json(&to_json(&report)).unwrap();
    assert_eq!(back.setup.dut.output, report.setup.dut.output);
}

#[test]
fn html_lists_every_search_trial_with_its_departures_and_marks_the_late_ones() {
    let mut report = synthetic_report();
    let searches: usize = report.results.iter().map(|r| r.searches().count()).sum();
    assert!(searches > 0);
    let trial = report.results[0]
        .throughput
        .as_mut()
        .and_then(|t| t.trials.first_mut())
        .expect("a search trial");
    trial.outcome.departure = Some(wirespeed_tester::rfc2544::Departure {
        scheduled_rate: 1e6,
        departed_rate: 0.75e6,
        lag_seconds: 0.0042,
        tolerance_seconds: 0.001,
        held_back: 1234,
        ..Default::default()
    });
    let html = to_html(&report);
    assert!(html.contains("<h2>Search trials</h2>"));
    // One folded list per search, besides the setup's folded commands and configuration.
    assert_eq!(
        html.matches("<details><summary>").count(),
        searches + 2,
        "{html}"
    );
    assert!(
        html.contains("<td>4.20</td>")
            && html.contains("(1234, 0)")
            && html.contains("<td>no</td>"),
        "the late trial's lag, held-back frames and mark"
    );
}
