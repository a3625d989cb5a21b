//! `wirespeed bench rfc2544` end to end in a lab: a very short run against wirespeed as the DuT
//! (one frame size, a coarse search of 0.2-second trials) writes a report that parses, an HTML
//! page with its plots, a non-zero NDR marked DuT- or tester-limited, and tester counts that
//! agree with the kernel's interface counters within 0.1 %; the lab and its calibration pair
//! are gone afterwards.
//!
//! A second run makes every other test over real trials (frame loss rate, back-to-back,
//! system recovery, two NDR searches in a row) with Poisson departures and flows drawn at
//! random, and headless Chromium renders its HTML report into a screenshot that must be a real
//! picture: a PNG that decodes, of the window's size, not one flat colour. Chromium may only be
//! missing on a machine that is not root (CI is root and installs it with
//! scripts/setup-debian.sh); the render is then skipped with the reason printed.
//!
//! A third measures RFC 2544 §26.6 reset: the wirespeed DuT restarted and the Linux bridge's
//! ingress link taken down and up while the NDR is offered, and a DuT the tester cannot reset
//! noted instead.

use std::process::Command;

use wirespeed_tester::report::Limit;
use wirespeed_tester::report::json::from_json;

mod common;

/// One frame size and 0.2-second trials.
const TINY_TRIALS: &[&str] = &[
    "--frame-sizes",
    "64",
    "--trial-seconds",
    "0.2",
    "--calibration-seconds",
    "0.2",
];

/// [`TINY_TRIALS`]' resolution: a coarse search, enough to run every step for real.
const COARSE: &[&str] = &["--resolution", "60%"];

#[test]
fn a_short_rfc2544_run_against_wirespeed_writes_a_checked_report() {
    let _cores = common::shared();
    // At most 6 characters: NAPI thread names must keep the interface whole (see the CLI).
    let prefix = "wstrf1";
    let Some((stdout, stderr, out)) = common::bench_out(
        prefix,
        &[
            &[
                "rfc2544",
                "--dut",
                "wirespeed-xconnect-afxdp",
                "--latency-loads",
                "",
            ],
            TINY_TRIALS,
            COARSE,
        ]
        .concat(),
    ) else {
        return;
    };
    // Progress lines with an ETA went to stderr.
    assert!(stderr.contains("ETA"), "{stderr}");
    let report = from_json(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let calibration = report.calibration.as_ref().expect("calibration");
    assert!(calibration.max_rate(64).unwrap() > 0.0);
    assert!(calibration.floor_ns(64).unwrap() > 0);
    let result = &report.results[0];
    assert_eq!(result.frame_size, 64);
    let ndr = result.ndr().expect("an NDR");
    assert!(ndr > 0.0);
    assert!(result.limit.is_some());
    // Latency was measured at the NDR, by default for every probe of that trial, stamped in
    // the kernel by the in-kernel sender.
    assert_eq!(result.latency.last().unwrap().rate, ndr);
    assert!(result.latency.last().unwrap().summary.count > 0);
    let counters = result.counters.expect("counter check");
    assert!(counters.transmitted > 0);
    assert!(
        counters.agrees_within(0.001),
        "tester and kernel disagree: {counters:?}"
    );
    assert!(report.setup.core_pinning.len() >= 3, "{:?}", report.setup);
    // The search counted in the kernel by default, latency stamped there.
    assert!(
        report
            .setup
            .receiver
            .starts_with("throughput searches and the calibration's limit: XDP probe counter"),
        "{}",
        report.setup.receiver
    );
    assert!(
        report.setup.receiver.contains(
            "binning every probe's latency in the kernel, stamped by the in-kernel sender"
        ),
        "{}",
        report.setup.receiver
    );
    assert!(
        report
            .setup
            .dut
            .commands
            .iter()
            .any(|c| c.contains("cores = [1]"))
    );
    // The DuT core's wake-ups were measured before the searches: one every 200 µs for a second.
    let wakeups = report.setup.dut_core_wakeups.as_ref().expect("wake-ups");
    assert_eq!((wakeups.core, wakeups.samples), (1, 5000), "{wakeups:?}");
    assert!(
        wakeups.realtime && wakeups.p99_us <= wakeups.max_us,
        "{wakeups:?}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<svg"), "no plots");
    assert!(html.contains("Calibration"));
    assert!(html.contains("DuT core wake-ups"));
    assert!(html.contains(result.limit.unwrap().label()));
    for name in ["results.csv", "latency.csv", "trials.csv"] {
        assert!(out.join(name).exists(), "{name}");
    }
    assert!(stdout.contains("| 64 B |"), "{stdout}");
    wirespeed_lab::assert_gone_for_test(prefix);
    let links = wirespeed_lab::run("ip", &["-o", "link", "show"]).unwrap();
    assert!(!links.contains("wstrf1-c"), "{links}");
    let _ = std::fs::remove_dir_all(&out);
}

/// Renders `html` with headless Chromium into a `width` × `height` screenshot and checks the
/// picture; skipped (with the reason printed) only when Chromium is absent and we are not root.
fn assert_renders(html: &std::path::Path, width: u32, height: u32) {
    let Some(chromium) = ["chromium", "chromium-browser"]
        .into_iter()
        .find(|name| Command::new(name).arg("--version").output().is_ok())
    else {
        let root = wirespeed_lab::run("id", &["-u"]).is_ok_and(|id| id.trim() == "0");
        assert!(
            !root,
            "chromium is missing; scripts/setup-debian.sh installs it (Debian package chromium)"
        );
        eprintln!("skipping the report render: chromium is not installed and we are not root");
        return;
    };
    let shot = html.with_file_name("screenshot.png");
    let output = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            &format!("--screenshot={}", shot.display()),
            &format!("--window-size={width},{height}"),
        ])
        .arg(format!("file://{}", html.display()))
        .output()
        .unwrap();
    assert!(
        output.status.success() && shot.exists(),
        "chromium failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().expect("a PNG header");
    let mut pixels = vec![0; reader.output_buffer_size().expect("a buffer size")];
    let info = reader.next_frame(&mut pixels).expect("PNG pixel data");
    assert_eq!((info.width, info.height), (width, height));
    let pixels = &pixels[..info.buffer_size()];
    let step = info.line_size / info.width as usize;
    let mut colours: Vec<&[u8]> = pixels.chunks_exact(step).collect();
    colours.sort_unstable();
    colours.dedup();
    // Text, tables and coloured plot lines: far more than a blank page's one colour (or the
    // few of an error page).
    assert!(colours.len() > 50, "{} colours only", colours.len());
    // Mostly the white page, with ink on it.
    let white = pixels
        .chunks_exact(step)
        .filter(|p| p.iter().take(3).all(|&c| c >= 0xf0))
        .count();
    let share = white as f64 / (width * height) as f64;
    assert!((0.5..0.995).contains(&share), "white share {share}");
}

/// Runs [`common::alone`] with the DuT core kept for the DuT (`--shield-dut-core`): its
/// recovery test needs an NDR, and beside a build on both cores the DuT's core stopped for up
/// to 14 ms (the report's wake-up probe), so the debug-built cross-connect lost frames at every
/// rate down to the search's lowest (CI, 2026-11-28).
#[test]
fn loss_back_to_back_recovery_and_repeated_searches_run_and_the_report_renders() {
    let _cores = common::alone();
    let prefix = "wstrf2";
    let Some((stdout, _, out)) = common::bench_out(
        prefix,
        &[
            &[
                "rfc2544",
                "--shield-dut-core",
                "--tests",
                "throughput,loss,back-to-back,recovery",
                "--pattern",
                "poisson",
                "--flows",
                "8",
                "--random-flows",
                "--ndr-runs",
                "2",
                "--loss-step",
                "50",
                "--burst-max-seconds",
                "0.02",
                "--test-repeats",
                "2",
                "--overload-seconds",
                "0.2",
                "--recovery-seconds",
                "0.2",
            ],
            TINY_TRIALS,
            COARSE,
        ]
        .concat(),
    ) else {
        return;
    };
    let report = from_json(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let result = &report.results[0];
    // Frame loss rate: 100 % of the starting rate first, then 50 %, each a real trial.
    let loss = result.loss_rate.as_ref().expect("a loss curve");
    assert_eq!(loss.points.first().map(|p| p.percent), Some(100.0));
    assert_eq!(loss.trials.len(), loss.points.len());
    assert!(loss.trials.iter().all(|t| t.outcome.sent > 0));
    // Back-to-back: two searches, each burst offered exactly.
    let b2b = result.back_to_back.as_ref().expect("back-to-back");
    assert_eq!((b2b.bursts.len(), b2b.burst.count), (2, 2));
    for trial in &b2b.trials {
        let wirespeed_tester::rfc2544::Load::Burst { frames, .. } = trial.spec.load else {
            panic!("not a burst: {trial:?}");
        };
        assert_eq!(trial.outcome.sent, frames);
    }
    // System recovery: two trials from 110 % of the NDR down to half of it.
    let ndr = result.ndr().expect("an NDR");
    let recovery = result.recovery.as_ref().expect("recovery");
    assert_eq!(recovery.times.len(), 2);
    assert!(recovery.overload_rate <= 1.1 * ndr + 1.0);
    assert!((recovery.recovery_rate - recovery.overload_rate / 2.0).abs() < 1.0);
    // Two searches in a row, both kept with every trial, each rate decided by the default
    // vote (a majority of nine trials' time), which the report states.
    assert_eq!(result.ndr_runs.len(), 2, "{:?}", result.ndr_runs);
    assert_eq!(result.ndr_runs[0], ndr);
    assert_eq!(result.later_searches.len(), 1);
    assert!(result.later_searches[0].len() >= 5);
    assert!(
        report
            .setup
            .search
            .contains("exceed ratio 0.5, duration sum 1.8 s")
    );
    assert!(result.ndr_difference().is_some());
    assert!(stdout.contains("searches in a row"), "{stdout}");
    // Timestamps: veth offers kernel software stamps, the AF_XDP trials used the TSC, whose
    // measured resolution is reported.
    let stamps = report.timestamps.as_ref().expect("a timestamp probe");
    assert!(stamps.capabilities.expect("ethtool -T").software_receive);
    assert!(stamps.used.starts_with("TSC"));
    assert!(report.setup.timestamp_resolution_ns > 0.0);
    assert!(report.setup.timestamp_resolution_ns <= 100.0);
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    for heading in [
        "NDR repeatability",
        "Frame loss rate",
        "Back-to-back",
        "System recovery",
        "Timestamps",
        "Frame loss vs offered load",
    ] {
        assert!(html.contains(heading), "{heading}");
    }
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    assert!(csv.lines().next().unwrap().contains(",loss_rate_points,"));
    assert_renders(&out.join("report.html"), 1280, 2400);
    wirespeed_lab::assert_gone_for_test(prefix);
    let _ = std::fs::remove_dir_all(&out);
}

/// `bench rfc2544 --tests reset ARGS` with [`TINY_TRIALS`]; the report.
fn reset_run(prefix: &str, args: &[&str]) -> Option<(wirespeed_tester::report::Report, String)> {
    let reset = [
        "rfc2544",
        "--tests",
        "reset",
        "--reset-seconds",
        "1.5",
        "--reset-after",
        "0.4",
        "--test-repeats",
        "1",
        // Each rate decided by one trial: the search only finds the rate to offer.
        "--exceed-ratio",
        "0",
        "--duration-sum",
        "0",
        // A resolution wider than any rate: the first trial, at the tester's maximum, fails
        // and ends the search, whose lowest rate (1000 frames/s) then passes and is the rate
        // reset. A 0.2-s search finds rates a debug build does not sustain for the reset's
        // 1.5 s (0.59 Mpps: it forwarded 9 kframes/s after its restart, CI 2026-11-28).
        "--resolution",
        "100000000",
    ];
    let (stdout, _, out) = common::bench_out(prefix, &[&reset, args, TINY_TRIALS].concat())?;
    wirespeed_lab::assert_gone_for_test(prefix);
    let report = from_json(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    let _ = std::fs::remove_dir_all(&out);
    if report.results[0].reset.is_some() {
        assert!(html.contains("Reset (RFC 2544 §26.6)"), "{html}");
        let mut reader = csv::Reader::from_reader(csv.as_bytes());
        let headers = reader.headers().unwrap().clone();
        let row = reader.records().next().unwrap().unwrap();
        let column = headers.iter().position(|h| h == "reset_median_s").unwrap();
        assert!(row[column].parse::<f64>().is_ok(), "{csv}");
    }
    Some((report, stdout))
}

#[test]
fn a_reset_is_measured_by_restart_and_by_link_flap_and_noted_where_impossible() {
    let _cores = common::shared();
    // wirespeed restarts: it was down for a while (it stops, starts and loads its
    // configuration), and forwarded again before the trial ended.
    let Some((report, stdout)) = reset_run("wstrs1", &["--dut", "wirespeed-xconnect-afxdp"]) else {
        return;
    };
    let reset = report.results[0].reset.as_ref().expect("a reset result");
    assert!(reset.method.starts_with("restart"), "{reset:?}");
    assert_eq!(reset.times.len(), 1);
    assert!(reset.time.median > 0.0, "{reset:?}");
    // Back within the trial: a restart slower than the 1.1 s after the reset (a loaded
    // machine) gets a trial twice as long, not a bound.
    assert!(!reset.unrecovered, "{reset:?}");
    assert_eq!(reset.rate, report.results[0].ndr().unwrap());
    assert!(stdout.contains("reset (restart"), "{stdout}");

    // The bridge's ingress link goes down and up, under bursts given on the command line.
    let (report, _) = reset_run(
        "wstrs2",
        &["--dut", "linux-bridge", "--pattern", "burst:16"],
    )
    .unwrap();
    assert!(
        report.setup.traffic.starts_with("bursts of 16"),
        "{}",
        report.setup.traffic
    );
    let reset = report.results[0].reset.as_ref().expect("a reset result");
    assert!(reset.method.contains("link down and up"), "{reset:?}");
    assert!(!reset.unrecovered, "{reset:?}");
    assert_eq!(reset.times.len(), 1);

    // The XDP redirect cannot be reset by the tester: a note, not an error.
    let (report, _) = reset_run("wstrs3", &["--dut", "xdp-redirect"]).unwrap();
    assert!(report.results[0].reset.is_none());
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("not measured: the tester cannot reset xdp-redirect")),
        "{:?}",
        report.notes
    );
}

/// The tester's accuracy and repeatability against a real kernel DuT whose capacity is known in
/// advance: the Linux router shaped by tbf to 50 Mbit/s, 104,167 frames/s of 64 bytes, far
/// below what the router itself forwards and under half of what this debug-built tester sends
/// alone. The test runs [`common::alone`]: beside the other tests' busy-polling wirespeed the
/// tester once reached only 78,000 frames/s (CI, 2026-11-26).
///
/// Every invocation: two searches in a row, and neither NDR above what the shaper lets through
/// (its 6 ms of queue and bucket pass a 0.5-second trial up to 1.2 % above the capacity; one
/// resolution step more): a tester that over-reports fails however the machine behaves.
///
/// Both NDRs must also be within 3 % of the capacity and of each other (issue 5's goal), or
/// the run must explain the miss, search by search: trials above the NDR that the generator
/// spoiled even when repeated (`TrialOutcome::spoiled_by_tester`; the tester then marks the
/// NDR tester-limited), or frames lost below 99 % of the capacity, where the shaper itself drops
/// nothing (a shared VM stalls the DuT's core for 5–40 ms at times; the 6 ms of queue cannot
/// hold that). Another invocation is made then, three in all; when every one was explained so,
/// the test says so and passes on the upper bound alone. The figures are in
/// docs/benchmarks.md ("Departures").
#[test]
fn two_searches_in_a_row_find_a_shaped_routers_known_capacity() {
    let _cores = common::alone();
    shaped_searches("wstrf3", 3);
}

/// The same searches with both cores busy the whole time: a spinning process of normal
/// priority in a session of its own on each core, as a compiler beside `make test` is. The
/// tester must still never credit a rate the shaper did not pass (issue 16: a loaded machine
/// found 108.5 kframes/s through the 104.2 kframes/s shaper), and where it finds less than the
/// capacity its own trials must show why.
#[test]
fn a_loaded_machine_still_finds_the_shaped_routers_capacity_and_never_more() {
    let _cores = common::alone();
    let _hogs = Hogs::on_every_core();
    // One invocation: under the hogs a miss is expected, and must be explained by the run.
    shaped_searches("wstrf4", 1);
}

/// One busy-looping `sh` per core, each in its own session (so the tester's session-wide nice
/// value does not reach it), killed when dropped.
struct Hogs(Vec<std::process::Child>);

impl Hogs {
    fn on_every_core() -> Hogs {
        let cores = std::thread::available_parallelism().map_or(2, usize::from);
        Hogs(
            (0..cores)
                .map(|core| {
                    std::process::Command::new("setsid")
                        .args(["taskset", "-c", &core.to_string()])
                        .args(["sh", "-c", "while :; do :; done"])
                        .spawn()
                        .expect("start a CPU hog (setsid, taskset: util-linux)")
                })
                .collect(),
        )
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        for hog in &mut self.0 {
            let _ = hog.kill();
            let _ = hog.wait();
        }
    }
}

/// Up to `invocations` invocations of [`SHAPED_SEARCHES`] in lab `prefix`; see
/// [`two_searches_in_a_row_find_a_shaped_routers_known_capacity`].
fn shaped_searches(prefix: &str, invocations: usize) {
    let capacity = wirespeed_tester::dut::LinuxRouterTbf::new(50).capacity(64);
    let ceiling = 1.012 * capacity + 1000.0;
    let mut misses = Vec::new();
    for _ in 0..invocations {
        let Some((stdout, _, out)) = common::bench_out(prefix, SHAPED_SEARCHES) else {
            return;
        };
        let report = from_json(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
        wirespeed_lab::assert_gone_for_test(prefix);
        let _ = std::fs::remove_dir_all(&out);
        assert!(
            report.setup.dut.version.contains("reference DuT"),
            "{}",
            report.setup.dut.version
        );
        let result = &report.results[0];
        assert_eq!(result.ndr_runs.len(), 2, "{stdout}");
        assert!(
            result.ndr_runs.iter().all(|&ndr| ndr <= ceiling),
            "an NDR above the shaper's capacity {capacity:.0} frames/s: {:?}\n{stdout}",
            result.ndr_runs
        );
        let found = result
            .ndr_runs
            .iter()
            .all(|ndr| (0.97 * capacity..=1.03 * capacity).contains(ndr));
        let difference = result.ndr_difference().expect("two searches");
        if found && difference <= 0.03 {
            return;
        }
        // A miss must be explained by the run itself, search by search: either trials above
        // the NDR that the generator spoiled even when repeated (the tester then marks the
        // NDR tester-limited), or frames lost below 99 % of the capacity, where the shaper
        // itself drops nothing (the machine stalled the DuT's core).
        let searches = result.throughput.iter().map(|t| &t.trials);
        let mut explained = Vec::new();
        for (run, (trials, &ndr)) in searches
            .chain(&result.later_searches)
            .zip(&result.ndr_runs)
            .enumerate()
        {
            let spoiled = trials
                .iter()
                .filter(|t| t.spec.load.rate() > ndr && t.outcome.spoiled_by_tester())
                .count();
            let dut_stalls = trials
                .iter()
                .filter(|t| t.spec.load.rate() < 0.99 * capacity && t.outcome.lost() > 0)
                .count();
            if run == 0 && spoiled > 0 {
                assert_eq!(result.limit, Some(Limit::TesterLimited), "{stdout}");
            }
            explained.push((0.97 * capacity..).contains(&ndr) || spoiled > 0 || dut_stalls > 0);
        }
        let miss = format!(
            "NDRs {:?} frames/s ({:.2} % apart, limit {:?}), the shaper's capacity {capacity:.0}; \
             tester alone {:?} frames/s; each search explained: {explained:?}\n{stdout}",
            result.ndr_runs,
            100.0 * difference,
            result.limit,
            report.calibration.as_ref().and_then(|c| c.max_rate(64)),
        );
        assert!(
            explained.iter().all(|&e| e),
            "a miss the run does not explain: {miss}"
        );
        misses.push(miss);
    }
    println!(
        "every invocation met the machine's stalls (the tester's or the DuT's); only the upper \
         bound was held:\n{}",
        misses.join("\n")
    );
}

/// Two throughput searches in a row against the reference DuT: 0.5-second trials, a
/// resolution of 1000 frames/s, and a majority of three trials per rate, so that one trial's
/// stall on a busy CI core cannot decide a rate alone.
const SHAPED_SEARCHES: &[&str] = &[
    "rfc2544",
    "--dut",
    "linux-router-tbf:50",
    "--tests",
    "throughput",
    "--ndr-runs",
    "2",
    "--frame-sizes",
    "64",
    "--trial-seconds",
    "0.5",
    "--calibration-seconds",
    "0.2",
    "--resolution",
    "1000",
    "--exceed-ratio",
    "0.5",
    "--duration-sum",
    "1.5",
];
