//! `wirespeed bench rfc2544` end to end in a lab: a very short run against wirespeed as the DuT
//! (one frame size, a coarse search of 0.2-second trials) writes a report that parses, an HTML
//! page with its plots, a non-zero NDR marked DuT- or tester-limited, and tester counts that
//! agree with the kernel's interface counters within 0.1 %; the lab and its calibration pair
//! are gone afterwards.

use std::process::Command;

use wirespeed_tester::report::json::from_json;

#[test]
fn a_short_rfc2544_run_against_wirespeed_writes_a_checked_report() {
    if !wirespeed_lab::available_for_test() {
        return;
    }
    // At most 6 characters: NAPI thread names must keep the interface whole (see the CLI).
    let prefix = "wstrf1";
    let _ = wirespeed_lab::down(prefix);
    let out = std::env::temp_dir().join(format!("wirespeed-rfc2544-{}", std::process::id()));
    let status = Command::new(env!("CARGO_BIN_EXE_wirespeed"))
        .args([
            "bench",
            "rfc2544",
            "--dut",
            "wirespeed-afxdp",
            "--frame-sizes",
            "64",
            "--trial-seconds",
            "0.2",
            "--calibration-seconds",
            "0.2",
            "--resolution",
            "60%",
            "--latency-loads",
            "",
            "--prefix",
            prefix,
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&status.stdout);
    let stderr = String::from_utf8_lossy(&status.stderr);
    assert!(status.status.success(), "{stdout}\n{stderr}");
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
    // Latency was measured at the NDR, on every frame of that trial.
    assert_eq!(result.latency.last().unwrap().rate, ndr);
    assert!(result.latency.last().unwrap().summary.count > 0);
    let counters = result.counters.expect("counter check");
    assert!(counters.transmitted > 0);
    assert!(
        counters.agrees_within(0.001),
        "tester and kernel disagree: {counters:?}"
    );
    assert!(report.setup.core_pinning.len() >= 3, "{:?}", report.setup);
    assert!(
        report
            .setup
            .dut
            .commands
            .iter()
            .any(|c| c.contains("cores = [1]"))
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<svg"), "no plots");
    assert!(html.contains("Calibration"));
    assert!(html.contains(result.limit.unwrap().label()));
    for name in ["results.csv", "latency.csv"] {
        assert!(out.join(name).exists(), "{name}");
    }
    assert!(stdout.contains("| 64 B |"), "{stdout}");
    let left = wirespeed_lab::list().unwrap();
    assert!(
        !left.iter().any(|ns| ns.starts_with(prefix)),
        "left behind: {left:?}"
    );
    let links = wirespeed_lab::run("ip", &["-o", "link", "show"]).unwrap();
    assert!(!links.contains("wstrf1-c"), "{links}");
    let _ = std::fs::remove_dir_all(&out);
}
