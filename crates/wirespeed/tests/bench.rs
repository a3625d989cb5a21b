//! The wirespeed DuT driver and `wirespeed bench forwarding` end to end in a lab: the real binary
//! forwards probe frames byte for byte over AF_XDP and AF_PACKET, stops cleanly on SIGINT with
//! its pool whole, and leaves nothing behind; a very short benchmark prints its table, writes
//! JSON and removes its lab.

use std::process::Command;
use std::time::Duration;

use wirespeed_lab::{Testbed, TestbedConfig, run};
use wirespeed_tester::dut::probe::verify;
use wirespeed_tester::dut::{Dut, WirespeedBackend, WirespeedDut, Wiring};

fn assert_lab_gone(prefix: &str) {
    let left = wirespeed_lab::list().unwrap();
    assert!(
        !left.iter().any(|ns| ns.starts_with(prefix)),
        "left behind: {left:?}"
    );
}

fn wirespeed_forwards(prefix: &str, backend: WirespeedBackend) {
    if !wirespeed_lab::available_for_test() {
        return;
    }
    let _ = wirespeed_lab::down(prefix);
    let lab = Testbed::up(&TestbedConfig {
        prefix: prefix.into(),
        pairs: 2,
        queues: 1,
        calibration: false,
    })
    .unwrap();
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
    assert_lab_gone(prefix);
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
    if !wirespeed_lab::available_for_test() {
        return;
    }
    let prefix = "wstbe";
    let _ = wirespeed_lab::down(prefix);
    let lab = Testbed::up(&TestbedConfig {
        prefix: prefix.into(),
        pairs: 2,
        queues: 1,
        calibration: false,
    })
    .unwrap();
    let mut wiring = Wiring::of(&lab).unwrap();
    wiring.ingress.dut_if = "wstnone8".into();
    let mut dut = WirespeedDut::new(
        WirespeedBackend::AfPacket,
        env!("CARGO_BIN_EXE_wirespeed").into(),
        1,
    );
    dut.setup(&wiring).unwrap();
    let error = verify(&mut dut, &wiring, 1, Duration::from_secs(10)).unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("wirespeed-afpacket") && text.contains("wstnone8"),
        "{text}"
    );
    drop(dut);
    drop(lab);
    assert_lab_gone(prefix);
}

#[test]
fn bench_forwarding_prints_a_table_writes_json_and_removes_its_lab() {
    if !wirespeed_lab::available_for_test() {
        return;
    }
    let prefix = "wstbc";
    let _ = wirespeed_lab::down(prefix);
    let json = std::env::temp_dir().join("wirespeed-wstbc.json");
    let out = Command::new(env!("CARGO_BIN_EXE_wirespeed"))
        .args([
            "bench",
            "forwarding",
            "--duts",
            "linux-bridge",
            "--flows",
            "1",
            "--runs",
            "1",
            "--seconds",
            "0.2",
            "--prefix",
            prefix,
            "--json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("| DuT | flows | median Mpps |"), "{stdout}");
    assert!(stdout.contains("| linux-bridge | 1 | "), "{stdout}");
    assert!(stdout.contains("generator on CPU 0 nice -20"), "{stdout}");
    let written = std::fs::read_to_string(&json).unwrap();
    assert!(written.contains("\"schema\": \"wirespeed.bench.forwarding/1\""));
    assert!(written.contains("\"dut\": \"linux-bridge\""));
    assert!(written.contains("type bridge"));
    let _ = std::fs::remove_file(&json);
    assert_lab_gone(prefix);

    let refused = Command::new(env!("CARGO_BIN_EXE_wirespeed"))
        .args([
            "bench",
            "forwarding",
            "--duts",
            "linux-bridge,dpdk-testpmd",
            "--prefix",
            prefix,
        ])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let text = String::from_utf8_lossy(&refused.stderr);
    assert!(text.contains("unknown DuT \"dpdk-testpmd\""), "{text}");
    assert_lab_gone(prefix);
}
