//! DPDK testpmd as a DuT in a lab: it forwards probe frames from `t0` to `t1` byte for byte with
//! every thread on the DuT core, and its teardown leaves nothing behind (no process, no XDP
//! program, no promiscuous flag, no `/var/run/dpdk` directory, no namespace) — also when the
//! setup fails, before testpmd starts (an interface that does not exist) or after (testpmd
//! itself gives up), and the error says why.

use std::path::PathBuf;
use std::time::Duration;

use wirespeed_lab::{Testbed, TestbedConfig, run};
use wirespeed_tester::bench::placement::check_threads;
use wirespeed_tester::dut::probe::verify;
use wirespeed_tester::dut::{Dut, TestpmdDut, Wiring};

/// Whether the lab works and testpmd is installed; prints why not and returns false (panics
/// under CI, which installs everything with scripts/setup-debian.sh).
fn ready() -> bool {
    if !wirespeed_lab::available_for_test() {
        return false;
    }
    let installed = std::path::Path::new("/usr/bin/dpdk-testpmd").is_file();
    if !installed {
        assert!(
            std::env::var_os("CI").is_none(),
            "dpdk-testpmd is missing; CI runs scripts/setup-debian.sh first"
        );
        eprintln!("skipped: dpdk-testpmd is not installed (run scripts/setup-debian.sh)");
    }
    installed
}

fn lab(prefix: &str) -> Testbed {
    let _ = wirespeed_lab::down(prefix);
    Testbed::up(&TestbedConfig {
        prefix: prefix.into(),
        pairs: 2,
        queues: 1,
        calibration: false,
    })
    .expect("lab up")
}

/// The EAL runtime directory testpmd gets in a lab with DuT namespace `wiring.dut_ns`.
fn runtime_dir(wiring: &Wiring) -> PathBuf {
    PathBuf::from(format!(
        "/var/run/dpdk/wirespeed-{}-dpdk-testpmd-{}",
        wiring.prefix(),
        std::process::id()
    ))
}

/// What a testpmd run left behind: its process, an XDP program or the promiscuous flag on the
/// DuT's interfaces, its runtime directory.
fn leftovers(wiring: &Wiring, pid: Option<u32>) -> Vec<String> {
    let mut found = Vec::new();
    if let Some(pid) = pid
        && std::path::Path::new(&format!("/proc/{pid}")).exists()
    {
        found.push(format!("process {pid}"));
    }
    let links = run("ip", &["-n", &wiring.dut_ns, "link", "show"]).unwrap();
    if links.contains("prog/xdp") || links.contains("PROMISC") {
        found.push(format!("interface state: {links}"));
    }
    if runtime_dir(wiring).exists() {
        found.push(runtime_dir(wiring).display().to_string());
    }
    found
}

#[test]
fn testpmd_forwards_probes_byte_for_byte_on_the_dut_core_and_leaves_nothing() {
    if !ready() {
        return;
    }
    let lab = lab("wsdpf");
    let wiring = Wiring::of(&lab).unwrap();
    let mut testpmd = TestpmdDut::new(1);
    testpmd.setup(&wiring).unwrap();
    let pid = testpmd.pid().unwrap();
    let links = run("ip", &["-n", &wiring.dut_ns, "link", "show"]).unwrap();
    assert_eq!(links.matches("prog/xdp").count(), 2, "{links}");
    assert!(runtime_dir(&wiring).exists());
    assert_eq!(
        verify(&mut testpmd, &wiring, 20, Duration::from_secs(8)).unwrap(),
        20
    );
    // The forwarding lcore and every other thread of the process on the DuT core.
    let workers = check_threads(pid, testpmd.worker_prefix(), 1).unwrap();
    assert_eq!(workers.len(), 1, "{workers:?}");
    let everything = check_threads(pid, "", 1).unwrap();
    assert!(everything.len() > 1, "{everything:?}");
    assert!(
        testpmd.description().contains("DPDK 22."),
        "{}",
        testpmd.description()
    );
    testpmd.teardown().unwrap();
    let left = leftovers(&wiring, Some(pid));
    assert!(left.is_empty(), "{left:?}");
    // The clean stop: testpmd printed its totals (the probes and readiness frames it moved).
    let output = testpmd.output().unwrap();
    assert!(output.contains("Bye..."), "{output}");
    let totals = wirespeed_tester::testpmd::ForwardTotals::parse(output).unwrap();
    assert!(totals.tx_packets >= 20, "{totals:?}");
    // Teardown twice is harmless.
    testpmd.teardown().unwrap();
    drop(lab);
    assert!(
        !wirespeed_lab::list()
            .unwrap()
            .iter()
            .any(|ns| ns.starts_with("wsdpf"))
    );
}

#[test]
fn testpmd_that_cannot_start_cleans_up_and_says_why() {
    if !ready() {
        return;
    }
    let lab = lab("wsdpx");
    let wiring = Wiring::of(&lab).unwrap();

    // An interface that does not exist: refused before testpmd runs.
    let mut missing = wiring.clone();
    missing.egress.dut_if = "wsdpnone9".into();
    let mut testpmd = TestpmdDut::new(1);
    let text = testpmd.setup(&missing).unwrap_err().to_string();
    assert!(
        text.contains("dpdk-testpmd") && text.contains("wsdpnone9"),
        "{text}"
    );
    assert_eq!(testpmd.pid(), None);
    testpmd.teardown().unwrap();
    assert!(leftovers(&wiring, None).is_empty());

    // Both ports on d0: testpmd starts, attaches to d0 once, fails to bind the second socket to
    // the same queue and exits; the setup reports testpmd's own words.
    let mut twice = wiring.clone();
    twice.egress.dut_if = wiring.ingress.dut_if.clone();
    let mut testpmd = TestpmdDut::new(1);
    let text = testpmd.setup(&twice).unwrap_err().to_string();
    assert!(
        text.contains("dpdk-testpmd") && text.contains("it exited") && text.contains("EAL"),
        "{text}"
    );
    drop(testpmd);
    let left = leftovers(&wiring, None);
    assert!(left.is_empty(), "{left:?}");
    drop(lab);
}
