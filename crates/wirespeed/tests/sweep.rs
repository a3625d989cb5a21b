//! `wirespeed bench fib|model|batch` end to end in a lab, with tiny settings (two points, short
//! blasts): each run of the real binary must succeed, write its JSON with one row per point and
//! DuT, every point measured (frames forwarded), its SVG plots, and leave no lab behind.
//! Root-only: without the rights to build a lab they print why and pass (CI runs them as root).

use std::path::{Path, PathBuf};

use serde_json::Value;

mod common;

/// Runs `wirespeed bench ARGS --trial-seconds 0.4 --prefix PREFIX --out DIR`, checks it left no lab,
/// and returns the parsed `json` file and DIR.
fn sweep(prefix: &str, args: &[&str], json: &str) -> Option<(Value, PathBuf)> {
    let (_, _, out) = common::bench_out(prefix, &[args, &["--trial-seconds", "0.4"]].concat())?;
    wirespeed_lab::assert_gone_for_test(prefix);
    let text = std::fs::read_to_string(out.join(json)).unwrap();
    Some((serde_json::from_str(&text).unwrap(), out))
}

/// Every point succeeded and forwarded frames.
fn assert_measured(points: &Value, expected: usize) {
    let points = points.as_array().unwrap();
    assert_eq!(points.len(), expected, "{points:#?}");
    for point in points {
        assert!(point.get("error").is_none(), "{point:#}");
        assert!(point["received"].as_u64().unwrap() > 0, "{point:#}");
    }
}

fn assert_svg(dir: &Path, name: &str) {
    let svg = std::fs::read_to_string(dir.join(name)).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("<path"),
        "{name}: {svg}"
    );
}

#[test]
fn bench_fib_measures_each_router_at_each_table_size() {
    let Some((json, dir)) = sweep(
        "wsxfib",
        &[
            "fib",
            "--duts",
            "wirespeed-router-afxdp,linux-router",
            "--routes",
            // 20k: above the 10k a config file carries, so the table goes in by `ctl route load`.
            "1,20k",
        ],
        "fib.json",
    ) else {
        return;
    };
    assert_eq!(json["schema"], "wirespeed.bench.fib/1");
    assert_measured(&json["points"], 4);
    let summary = json["summary"].as_array().unwrap();
    let rows: Vec<(String, f64)> = summary
        .iter()
        .map(|s| {
            (
                s["dut"].as_str().unwrap().to_string(),
                s["routes"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("wirespeed-router-afxdp".to_string(), 1.0),
            ("linux-router".to_string(), 1.0),
            ("wirespeed-router-afxdp".to_string(), 20_000.0),
            ("linux-router".to_string(), 20_000.0),
        ]
    );
    assert_eq!(json["tables"][1]["routes"], 20_000);
    assert_svg(&dir, "fib.svg");
}

#[test]
fn bench_fib_sweeps_ipv6_tables_with_ipv6_frames() {
    let Some((json, dir)) = sweep(
        "wsxfi6",
        &[
            "fib",
            "--ip",
            "6",
            "--duts",
            "wirespeed-router-afxdp,linux-router",
            "--routes",
            "1,300",
        ],
        "fib.json",
    ) else {
        return;
    };
    // The report says the version, and the frames were IPv6's smallest.
    assert_eq!(json["ip"], 6);
    assert_eq!(json["frame_size"], 84);
    assert_measured(&json["points"], 4);
    assert_eq!(json["tables"][1]["routes"], 300);
    let routes: Vec<f64> = json["summary"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["routes"].as_f64().unwrap())
        .collect();
    assert_eq!(routes, [1.0, 1.0, 300.0, 300.0]);
    let svg = std::fs::read_to_string(dir.join("fib.svg")).unwrap();
    assert!(svg.contains("IPv6"), "{svg}");
}

#[test]
fn bench_model_fits_the_spin_curve_and_walks_two_working_sets() {
    let Some((json, dir)) = sweep(
        "wsxmod",
        &[
            "model",
            "--backends",
            "afxdp",
            "--spin",
            "0,100k",
            "--walk",
            "16KiB,1MiB",
        ],
        "model.json",
    ) else {
        return;
    };
    assert_eq!(json["schema"], "wirespeed.bench.model/1");
    let curve = &json["curves"][0];
    assert_eq!(curve["name"], "afxdp batch 32");
    assert_measured(&curve["points"], 4);
    // 100 000 cycles per packet cap a core of f_CPU cycles per second at f_CPU / 100 000
    // packets per second; the curve falls and the model is fitted to it.
    let fit = &curve["fit"];
    assert!(fit["r_max"].as_f64().unwrap() > 0.0, "{fit:#}");
    assert!(fit["c_io"].as_f64().unwrap() >= 0.0, "{fit:#}");
    let spin = curve["spin"].as_array().unwrap();
    assert_eq!(spin.len(), 2);
    assert!(spin[0]["median_pps"].as_f64() > spin[1]["median_pps"].as_f64());
    // Only what arrived while the tester sent counts: the slow point is not flattered by the
    // frames the worker still held when sending stopped.
    let ceiling = json["f_cpu"].as_f64().unwrap() / 100_000.0;
    let slow = spin[1]["median_pps"].as_f64().unwrap();
    assert!(slow <= 1.02 * ceiling, "{slow} pps > {ceiling}");
    // The worker's own accounting was read around every blast.
    for row in spin {
        assert!(
            row["live_cycles_per_packet"]["io"].as_f64().unwrap() > 0.0,
            "{row:#}"
        );
    }
    assert_eq!(curve["walk"].as_array().unwrap().len(), 2);
    assert_svg(&dir, "model-spin.svg");
    assert_svg(&dir, "model-walk.svg");
}

#[test]
fn bench_batch_measures_throughput_and_latency_at_each_size() {
    let Some((json, dir)) = sweep(
        "wsxbat",
        &[
            "batch",
            "--sizes",
            "8,64",
            "--latency-rate",
            "5k",
            "--latency-seconds",
            "0.4",
        ],
        "batch.json",
    ) else {
        return;
    };
    assert_eq!(json["schema"], "wirespeed.bench.batch/1");
    assert_measured(&json["points"], 2);
    let summary = json["summary"].as_array().unwrap();
    assert_eq!(summary.len(), 2);
    for (row, size) in summary.iter().zip([8, 64]) {
        assert_eq!(row["batch"].as_f64(), Some(f64::from(size)));
        assert!(row["median_pps"].as_f64().unwrap() > 0.0, "{row:#}");
        let latency = &row["latency"]["summary"];
        assert!(latency["count"].as_u64().unwrap() > 0, "{row:#}");
        assert!(latency["p50_ns"].as_u64() <= latency["p99_ns"].as_u64());
    }
    assert_svg(&dir, "batch-throughput.svg");
    assert_svg(&dir, "batch-latency.svg");
}
