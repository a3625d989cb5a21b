//! `wirespeed bench compare` end to end in a lab: two cheap DuTs, two repeats of tiny trials.
//! The runs are interleaved (A B A B), the report's side-by-side table has a row per DuT with
//! an NDR from each repeat, the JSON reads back, the HTML has the table and the chart, and the
//! lab is gone afterwards.

use wirespeed_tester::report::compare::from_json;

mod common;

#[test]
fn a_short_comparison_of_two_duts_has_both_rows_and_interleaved_runs() {
    let prefix = "wspcmp";
    let Some((stdout, _, out)) = common::bench_out(
        prefix,
        &[
            "compare",
            "--duts",
            "linux-bridge,linux-router",
            "--frame-sizes",
            "64",
            "--runs",
            "2",
            "--trial-seconds",
            "0.2",
            "--calibration-seconds",
            "0.2",
            "--resolution",
            "50%",
        ],
    ) else {
        return;
    };
    let comparison =
        from_json(&std::fs::read_to_string(out.join("compare.json")).unwrap()).unwrap();
    let order: Vec<(&str, u32)> = comparison
        .runs
        .iter()
        .map(|r| (r.dut.as_str(), r.repeat))
        .collect();
    assert_eq!(
        order,
        [
            ("linux-bridge", 0),
            ("linux-router", 0),
            ("linux-bridge", 1),
            ("linux-router", 1)
        ]
    );
    let rows = comparison.rows();
    let names: Vec<&str> = rows.iter().map(|r| r.dut.as_str()).collect();
    assert_eq!(names, ["linux-bridge", "linux-router"]);
    for row in &rows {
        assert_eq!((row.flows, row.frame_size, row.repeats), (1, 64, 2));
        assert_eq!(row.ndrs.len(), 2, "an NDR from each repeat: {row:?}");
        assert!(row.ndr_median.unwrap() > 0.0);
        assert!(row.p50_ns.is_some(), "latency at the NDR: {row:?}");
    }
    for run in &comparison.runs {
        assert!(
            run.report
                .setup
                .dut
                .commands
                .iter()
                .any(|c| c.contains(prefix)),
            "each run records its DuT's commands"
        );
    }
    let html = std::fs::read_to_string(out.join("compare.html")).unwrap();
    assert!(html.contains("<td>linux-bridge</td>") && html.contains("<td>linux-router</td>"));
    assert!(html.contains("<svg"));
    assert!(stdout.contains("| linux-bridge | 1 | 64 B |"), "{stdout}");
    assert!(stdout.contains("| linux-router | 1 | 64 B |"), "{stdout}");
    wirespeed_lab::assert_gone_for_test(prefix);
    let _ = std::fs::remove_dir_all(&out);
}
