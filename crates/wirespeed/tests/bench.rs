//! The wirespeed DuT driver and `wirespeed bench forwarding` end to end in a lab: the real binary
//! forwards probe frames byte for byte over AF_XDP and AF_PACKET, stops cleanly on SIGINT with
//! its pool whole, and leaves nothing behind; a very short benchmark prints its table, writes
//! JSON and removes its lab, and its in-kernel generator feeds a router correctly. `bench generator`: DPDK testpmd txonly and wirespeed's own generator
//! (AF_XDP, AF_PACKET) each send for a short window; every trial's rate comes from `d0`'s kernel
//! counter and each generator's own count of frames sent agrees with the kernel's count out of
//! `t0`; an unknown generator is refused before a lab is built.

use std::process::Command;
use std::time::Duration;

use wirespeed_lab::{assert_gone_for_test, run};
use wirespeed_tester::dut::probe::verify;
use wirespeed_tester::dut::{Dut, WirespeedBackend, WirespeedDut, Wiring};

mod common;

fn wirespeed_forwards(prefix: &str, backend: WirespeedBackend) {
    let Some(lab) = common::testbed(prefix, 2, 1) else {
        return;
    };
    let wiring = Wiring::of(&lab).unwrap();
    let mut dut = WirespeedDut::new(backend, env!("CARGO_BIN_EXE_wirespeed").into(), 1);
    dut.setup(&wiring).unwrap();
    assert!(dut.pid().is_some());
    assert_eq!(
        verify(&mut dut, &wiring, 20, Duration::from_secs(10)).unwrap(),
        20
    );
    dut.teardown().unwrap();
    let output = dut.output().unwrap();
    assert!(output.contains("conservation holds"), "{output}");
    assert!(
        output.contains(&format!("({})", backend.config_name())),
        "{output}"
    );
    if backend == WirespeedBackend::AfPacketV2 {
        assert!(output.contains("tpacket_v2 rx"), "{output}");
    }
    let config_line = dut
        .commands()
        .iter()
        .find(|c| c.starts_with("cat > "))
        .unwrap();
    assert!(config_line.contains("cores = [1]"), "{config_line}");
    let path = config_line
        .trim_start_matches("cat > ")
        .split_whitespace()
        .next()
        .unwrap();
    assert!(!std::path::Path::new(path).exists(), "config left: {path}");
    let d0 = run(
        "ip",
        &["-n", &wiring.dut_ns, "link", "show", &wiring.ingress.dut_if],
    )
    .unwrap();
    assert!(!d0.contains("xdp"), "{d0}");
    drop(lab);
    assert_gone_for_test(prefix);
}

#[test]
fn wirespeed_dut_forwards_over_afxdp() {
    wirespeed_forwards("wstbx", WirespeedBackend::AfXdp);
}

#[test]
fn wirespeed_dut_forwards_over_afpacket() {
    wirespeed_forwards("wstbp", WirespeedBackend::AfPacket);
}

#[test]
fn wirespeed_dut_forwards_over_afpacket_with_a_v2_ring() {
    wirespeed_forwards("wstb2", WirespeedBackend::AfPacketV2);
}

#[test]
fn a_wirespeed_dut_that_exits_is_reported_by_name_with_its_output() {
    let prefix = "wstbe";
    let Some(lab) = common::testbed(prefix, 2, 1) else {
        return;
    };
    let mut wiring = Wiring::of(&lab).unwrap();
    wiring.ingress.dut_if = "wstnone8".into();
    let mut dut = WirespeedDut::new(
        WirespeedBackend::AfPacket,
        env!("CARGO_BIN_EXE_wirespeed").into(),
        1,
    );
    // Setup waits for the switch to say it forwards, so it sees the exit itself.
    let error = match dut.setup(&wiring) {
        Err(error) => error,
        Ok(()) => verify(&mut dut, &wiring, 1, Duration::from_secs(10)).unwrap_err(),
    };
    let text = error.to_string();
    assert!(
        text.contains("wirespeed-xconnect-afpacket") && text.contains("wstnone8"),
        "{text}"
    );
    drop(dut);
    drop(lab);
    assert_gone_for_test(prefix);
}

#[test]
fn bench_forwarding_prints_a_table_writes_json_and_removes_its_lab() {
    let prefix = "wstbc";
    if !wirespeed_lab::clear_for_test(prefix) {
        return;
    }
    let out = std::env::temp_dir().join("wirespeed-wstbc");
    let (stdout, _) = common::bench(
        &[
            "forwarding",
            "--duts",
            "linux-bridge,linux-router,wirespeed-openflow-xdp,wirespeed-openflow-ofctl-xdp",
            "--flows",
            "1",
            "--runs",
            "1",
            "--trial-seconds",
            "0.2",
        ],
        prefix,
        "--out",
        &out,
    );
    assert!(stdout.contains("| DuT | flows | median Mpps |"), "{stdout}");
    assert!(stdout.contains("| linux-bridge | 1 | "), "{stdout}");
    // The in-kernel generator (the default) sends what the template says even to a DuT that
    // rewrites frames in place in the very pages the generator recycles (a router: MACs, TTL,
    // checksum); when it did not, the Linux router forwarded 0.08 % of it.
    assert!(!row(&stdout, "linux-router").contains("broken"), "{stdout}");
    // The openflow app's flows, on the fast path once its cache took them.
    assert!(
        !row(&stdout, "wirespeed-openflow-xdp").contains("broken"),
        "{stdout}"
    );
    // The same flows installed by `ovs-ofctl` through the agent forward too.
    assert!(
        !row(&stdout, "wirespeed-openflow-ofctl-xdp").contains("broken"),
        "{stdout}"
    );
    assert!(stdout.contains("generator on CPU 0 nice -20"), "{stdout}");
    let written = std::fs::read_to_string(out.join("forwarding.json")).unwrap();
    assert!(written.contains("\"schema\": \"wirespeed.bench.forwarding/1\""));
    assert!(written.contains("\"dut\": \"linux-bridge\""));
    assert!(written.contains("type bridge"));
    assert!(written.contains("ovs-ofctl -O OpenFlow13 add-flows tcp:127.0.0.1:6653"));
    let _ = std::fs::remove_dir_all(&out);
    assert_gone_for_test(prefix);

    let refused = Command::new(env!("CARGO_BIN_EXE_wirespeed"))
        .args([
            "bench",
            "forwarding",
            "--duts",
            "linux-bridge,vpp",
            "--prefix",
            prefix,
        ])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let text = String::from_utf8_lossy(&refused.stderr);
    assert!(text.contains("unknown DuT \"vpp\""), "{text}");
    assert_gone_for_test(prefix);
}

/// The 1-flow row of `dut` in a `bench forwarding` table.
fn row<'a>(stdout: &'a str, dut: &str) -> &'a str {
    stdout
        .lines()
        .find(|line| line.starts_with(&format!("| {dut} | 1 | ")))
        .unwrap_or_else(|| panic!("no {dut} row: {stdout}"))
}

/// IPv6 frames through both routers (each is set up for IPv4 and IPv6 alike): neither is a
/// broken setup, and the report says which version ran. The JSON goes to the old `--json`
/// spelling, which still works and says what to write instead.
#[test]
fn bench_forwarding_routes_ipv6_through_the_linux_and_wirespeed_routers() {
    let prefix = "wstb6";
    if !wirespeed_lab::clear_for_test(prefix) {
        return;
    }
    let json = std::env::temp_dir().join("wirespeed-wstb6.json");
    let (stdout, stderr) = common::bench(
        &[
            "forwarding",
            "--ip",
            "6",
            "--duts",
            "linux-router,wirespeed-router-afxdp",
            "--flows",
            "1",
            "--runs",
            "1",
            "--trial-seconds",
            "0.2",
        ],
        prefix,
        "--json",
        &json,
    );
    assert!(stdout.contains("84 B UDP/IPv6 frames"), "{stdout}");
    assert!(
        stderr.contains(
            "note: --json FILE is deprecated and goes in the next release; write --out DIR"
        ),
        "{stderr}"
    );
    for dut in ["linux-router", "wirespeed-router-afxdp"] {
        let row = row(&stdout, dut);
        assert!(
            !row.contains("broken") && !row.contains("failed"),
            "{stdout}"
        );
    }
    assert!(
        std::fs::read_to_string(&json)
            .unwrap()
            .contains("\"ip\": 6")
    );
    let _ = std::fs::remove_file(&json);
    assert_gone_for_test(prefix);
}

#[test]
fn generators_report_rates_that_agree_with_the_kernels_counters() {
    let prefix = "wstgn";
    if !wirespeed_lab::installed_for_test("dpdk-testpmd") {
        return;
    }
    let Some((stdout, _, out)) = common::bench_out(
        prefix,
        &[
            "generator",
            "--generators",
            "testpmd-txonly,afxdp,afpacket,xdp-live",
            "--runs",
            "1",
            "--trial-seconds",
            "1",
            "--warm-up",
            "0.5",
        ],
    ) else {
        return;
    };
    assert!(stdout.contains("Relative to testpmd-txonly"), "{stdout}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("generators.json")).unwrap())
            .unwrap();
    let trials = json["trials"].as_array().unwrap();
    let names: Vec<&str> = trials
        .iter()
        .map(|t| t["generator"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["testpmd-txonly", "afxdp", "afpacket", "xdp-live"],
        "{json}"
    );
    for trial in trials {
        assert!(trial.get("error").is_none(), "{trial}");
        let received = trial["received"].as_u64().unwrap();
        let seconds = trial["seconds"].as_f64().unwrap();
        let own = trial["generator_sent"].as_u64().unwrap();
        let kernel = trial["kernel_sent"].as_u64().unwrap();
        let dropped = trial["kernel_dropped"].as_u64().unwrap();
        assert!(received > 1000 && seconds >= 0.9, "{trial}");
        assert!((trial["pps"].as_f64().unwrap() - received as f64 / seconds).abs() < 1e-6);
        // The window lies inside the run: d0 received no more than t0 sent start to stop.
        assert!(received <= kernel, "{trial}");
        // The generator's count lies between what t0 sent and that plus what it dropped at
        // d0's full ring, but for the lab kernels' own frames.
        let slack = 50 + kernel / 1000;
        assert!(
            own + slack >= kernel && own <= kernel + dropped + slack,
            "own count {own}, t0's {kernel} sent and {dropped} dropped: {trial}"
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
    assert_gone_for_test(prefix);
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
    assert_gone_for_test("wstgx");
}
