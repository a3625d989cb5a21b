//! `wirespeed bench generator` end to end in a lab: DPDK testpmd txonly and wirespeed's own
//! generator (AF_XDP, AF_PACKET) each send for a short window; every trial's rate comes from
//! `d0`'s kernel counter and each generator's own count of frames sent agrees with the kernel's
//! count out of `t0`. Bad input is refused before a lab is built.

use std::process::Command;

fn assert_lab_gone(prefix: &str) {
    let left = wirespeed_lab::list().unwrap();
    assert!(
        !left.iter().any(|ns| ns.starts_with(prefix)),
        "left behind: {left:?}"
    );
}

#[test]
fn generators_report_rates_that_agree_with_the_kernels_counters() {
    if !wirespeed_lab::available_for_test() {
        return;
    }
    let testpmd = std::path::Path::new("/usr/bin/dpdk-testpmd").is_file();
    if !testpmd {
        assert!(
            std::env::var_os("CI").is_none(),
            "dpdk-testpmd is missing; CI runs scripts/setup-debian.sh first"
        );
        eprintln!("skipped: dpdk-testpmd is not installed (run scripts/setup-debian.sh)");
        return;
    }
    let prefix = "wstgn";
    let _ = wirespeed_lab::down(prefix);
    let out = std::env::temp_dir().join(format!("wirespeed-generator-test-{}", std::process::id()));
    let output = Command::new(env!("CARGO_BIN_EXE_wirespeed"))
        .args([
            "bench",
            "generator",
            "--generators",
            "testpmd-txonly,afxdp,afpacket",
            "--runs",
            "1",
            "--seconds",
            "1",
            "--warm-up",
            "0.5",
            "--prefix",
            prefix,
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("Relative to testpmd-txonly"), "{stdout}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("generators.json")).unwrap())
            .unwrap();
    let trials = json["trials"].as_array().unwrap();
    let names: Vec<&str> = trials
        .iter()
        .map(|t| t["generator"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["testpmd-txonly", "afxdp", "afpacket"], "{json}");
    for trial in trials {
        assert!(trial.get("error").is_none(), "{trial}");
        let received = trial["received"].as_u64().unwrap();
        let seconds = trial["seconds"].as_f64().unwrap();
        let own = trial["generator_sent"].as_u64().unwrap();
        let kernel = trial["kernel_sent"].as_u64().unwrap();
        assert!(received > 1000 && seconds >= 0.9, "{trial}");
        assert!((trial["pps"].as_f64().unwrap() - received as f64 / seconds).abs() < 1e-6);
        // The window lies inside the run: d0 received no more than t0 sent start to stop.
        assert!(received <= kernel, "{trial}");
        // The generator's count and the kernel's agree but for the lab kernels' own frames.
        assert!(
            own.abs_diff(kernel) <= 50 + kernel / 1000,
            "own count {own}, t0's {kernel}: {trial}"
        );
    }
    // testpmd stopped and cleaned up after itself.
    assert!(
        !std::path::Path::new("/var/run/dpdk")
            .read_dir()
            .map(|mut dir| dir.any(|e| e
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(&format!("wirespeed-{prefix}-"))))
            .unwrap_or(false)
    );
    assert_lab_gone(prefix);
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn an_unknown_generator_is_refused_before_any_lab_is_built() {
    let output = Command::new(env!("CARGO_BIN_EXE_wirespeed"))
        .args([
            "bench",
            "generator",
            "--generators",
            "afxdp,pktgen",
            "--prefix",
            "wstgx",
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("unknown generator \"pktgen\"")
            && stderr.contains("testpmd-txonly, afxdp, afpacket"),
        "{stderr}"
    );
    assert_lab_gone("wstgx");
}
