//! The peer DuT drivers end to end in a lab: the Linux router behind an nftables chain, Open
//! vSwitch and DPDK testpmd each forward probe frames from `t0` to `t1` exactly as their drivers
//! predict, are torn down, and leave nothing behind (no table, no daemon, no pidfile, no run
//! directory, no XDP program, no promiscuous flag, no `/var/run/dpdk` directory, no namespace) —
//! also after a setup that failed halfway, with an error that says why.

use std::path::PathBuf;
use std::time::Duration;

use wirespeed_lab::{Testbed, assert_gone_for_test, run};
use wirespeed_tester::bench::placement::check_threads;
use wirespeed_tester::dut::probe::verify;
use wirespeed_tester::dut::{Dut, DutError, LinuxRouterNft, OvsAction, OvsDut, TestpmdDut, Wiring};

mod common;
use common::ip_forward;

/// The lab of a test of `program`'s driver (see [`common::lab`]), or `None`, after printing why,
/// where the lab cannot be built or `program` is not installed (CI fails instead).
fn lab_if_installed(program: &str, prefix: &str) -> Option<Testbed> {
    if !wirespeed_lab::available_for_test() || !wirespeed_lab::installed_for_test(program) {
        return None;
    }
    common::lab(prefix)
}

fn nft_tables(wiring: &Wiring) -> String {
    run(
        "ip",
        &["netns", "exec", &wiring.dut_ns, "nft", "list", "tables"],
    )
    .unwrap()
}

/// The router's forward chain as `nft` lists it, rules and counters.
fn nft_forward_chain(wiring: &Wiring) -> String {
    run(
        "ip",
        &[
            "netns",
            "exec",
            &wiring.dut_ns,
            "nft",
            "list",
            "chain",
            "inet",
            "wirespeed",
            "forward",
        ],
    )
    .unwrap()
}

#[test]
fn linux_router_nft_forwards_through_every_rule_and_removes_its_table() {
    let Some(lab) = lab_if_installed("nft", "wspnt") else {
        return;
    };
    let wiring = Wiring::of(&lab).unwrap();
    let mut router = LinuxRouterNft::new(10_000);
    router.setup(&wiring).unwrap();
    let chain = nft_forward_chain(&wiring);
    assert_eq!(chain.matches("ip saddr 100.").count(), 10_000);
    assert_eq!(
        verify(&mut router, &wiring, 20, Duration::from_secs(5)).unwrap(),
        20
    );
    // The chain's policy is drop: the frames arrived because they reached the final accept.
    let chain = nft_forward_chain(&wiring);
    let accepted: u64 = chain
        .split("counter packets ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(accepted >= 21, "{accepted} frames accepted");
    assert!(router.description().contains("10000 non-matching rules"));
    router.teardown().unwrap();
    assert_eq!(nft_tables(&wiring).trim(), "");
    assert_eq!(ip_forward(&wiring.dut_ns), "0");
    let routes = run("ip", &["-n", &wiring.dut_ns, "route", "show"]).unwrap();
    assert!(!routes.contains("198.19.0.0/16"), "{routes}");
    let file = router
        .commands()
        .iter()
        .find_map(|c| c.strip_prefix("cat > "))
        .and_then(|c| c.split_whitespace().next())
        .map(PathBuf::from)
        .unwrap();
    assert!(!file.exists(), "{} is left", file.display());
    drop(lab);
    assert_gone_for_test("wspnt");
}

#[test]
fn linux_router_nft_that_fails_halfway_removes_its_table() {
    let Some(lab) = lab_if_installed("nft", "wspnf") else {
        return;
    };
    let mut wiring = Wiring::of(&lab).unwrap();
    wiring.egress.dut_if = "wstnone9".into();
    let mut router = LinuxRouterNft::new(50);
    let error = router.setup(&wiring).unwrap_err();
    assert!(matches!(error, DutError::Step { .. }), "{error}");
    assert!(error.to_string().contains("linux-router-nft:50"), "{error}");
    assert!(nft_tables(&wiring).contains("wirespeed"), "loaded before");
    drop(router);
    assert_eq!(nft_tables(&wiring).trim(), "");
    assert_eq!(ip_forward(&wiring.dut_ns), "0");
    drop(lab);
    assert_gone_for_test("wspnf");
}

/// Everything an OvS driver could leave behind, as a list of findings (empty when clean).
fn ovs_leftovers(wiring: &Wiring, pid: Option<u32>, dir: &std::path::Path) -> Vec<String> {
    let mut found = Vec::new();
    if let Some(pid) = pid {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let zombie_or_gone = stat
            .rsplit_once(')')
            .and_then(|(_, after)| after.split_whitespace().next())
            .is_none_or(|state| state == "Z");
        if !zombie_or_gone {
            found.push(format!("ovs-vswitchd pid {pid} still runs"));
        }
    }
    if dir.exists() {
        found.push(format!("{} exists", dir.display()));
    }
    let links = run("ip", &["-n", &wiring.dut_ns, "-br", "link"]).unwrap();
    for line in links.lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        let expected = name == "lo" || name.contains("-d0") || name.contains("-d1");
        if !expected {
            found.push(format!("link {name}"));
        }
    }
    let details = run("ip", &["-n", &wiring.dut_ns, "link", "show"]).unwrap();
    if details.contains("prog/xdp") {
        found.push(format!("an XDP program: {details}"));
    }
    found
}

#[test]
fn ovs_forwards_with_its_own_daemons_on_the_dut_core_and_stops_them() {
    let Some(lab) = lab_if_installed("ovs-vswitchd", "wspov") else {
        return;
    };
    let wiring = Wiring::of(&lab).unwrap();
    let mut ovs = OvsDut::new(OvsAction::Output, 1);
    ovs.setup(&wiring).unwrap();
    let dir = ovs.run_dir().unwrap().to_path_buf();
    assert!(dir.join("ovs-vswitchd.pid").exists());
    assert!(dir.join("ovsdb-server.pid").exists());
    let pid = ovs.pid().unwrap();
    let description = ovs.description();
    assert!(
        description.contains("type=afxdp") || description.contains("AF_PACKET"),
        "{description}"
    );
    assert_eq!(
        verify(&mut ovs, &wiring, 20, Duration::from_secs(8)).unwrap(),
        20
    );
    let placed = check_threads(pid, ovs.worker_prefix(), 1).unwrap();
    assert!(placed.iter().all(|p| p.cpus == "1"), "{placed:?}");
    assert!(
        ovs.commands()
            .iter()
            .any(|c| c.contains("taskset -c 1 ovs-vswitchd"))
    );
    ovs.teardown().unwrap();
    let left = ovs_leftovers(&wiring, Some(pid), &dir);
    assert!(left.is_empty(), "{left:?}");
    assert!(ovs.commands().iter().any(|c| c.starts_with("kill -TERM")));
    drop(lab);
    assert_gone_for_test("wspov");
}

#[test]
fn ovs_that_fails_halfway_stops_its_daemons_and_names_the_step() {
    let Some(lab) = lab_if_installed("ovs-vswitchd", "wspof") else {
        return;
    };
    let mut wiring = Wiring::of(&lab).unwrap();
    wiring.egress.dut_if = "wstnone9".into();
    let mut ovs = OvsDut::new(OvsAction::Normal, 1);
    let error = ovs.setup(&wiring).unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("ovs-normal") && text.contains("wstnone9"),
        "{text}"
    );
    let pid = ovs.pid();
    assert!(
        pid.is_some(),
        "the daemons were running when the step failed"
    );
    let dir = ovs.run_dir().unwrap().to_path_buf();
    drop(ovs);
    let left = ovs_leftovers(&wiring, pid, &dir);
    assert!(left.is_empty(), "{left:?}");
    drop(lab);
    assert_gone_for_test("wspof");
}

#[test]
fn ovs_with_afpacket_ports_forwards_and_says_so() {
    let Some(lab) = lab_if_installed("ovs-vswitchd", "wspoa") else {
        return;
    };
    let wiring = Wiring::of(&lab).unwrap();
    let mut ovs = OvsDut::afpacket(1);
    ovs.setup(&wiring).unwrap();
    assert_eq!(ovs.port_type(), Some("system"));
    assert!(ovs.description().contains("AF_PACKET, asked for"));
    let dir = ovs.run_dir().unwrap().to_path_buf();
    let pid = ovs.pid();
    assert_eq!(
        verify(&mut ovs, &wiring, 20, Duration::from_secs(8)).unwrap(),
        20
    );
    let placed = check_threads(pid.unwrap(), ovs.worker_prefix(), 1).unwrap();
    assert!(placed.iter().any(|p| p.thread.starts_with("ovs-vswitchd")));
    ovs.teardown().unwrap();
    let left = ovs_leftovers(&wiring, pid, &dir);
    assert!(left.is_empty(), "{left:?}");
    drop(lab);
    assert_gone_for_test("wspoa");
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
fn testpmd_leftovers(wiring: &Wiring, pid: Option<u32>) -> Vec<String> {
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
    let Some(lab) = lab_if_installed("dpdk-testpmd", "wsdpf") else {
        return;
    };
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
    let left = testpmd_leftovers(&wiring, Some(pid));
    assert!(left.is_empty(), "{left:?}");
    // The clean stop: testpmd printed its totals (the probes and readiness frames it moved).
    let output = testpmd.output().unwrap();
    assert!(output.contains("Bye..."), "{output}");
    let totals = wirespeed_tester::testpmd::ForwardTotals::parse(output).unwrap();
    assert!(totals.tx_packets >= 20, "{totals:?}");
    // Teardown twice is harmless.
    testpmd.teardown().unwrap();
    drop(lab);
    assert_gone_for_test("wsdpf");
}

#[test]
fn testpmd_that_cannot_start_cleans_up_and_says_why() {
    let Some(lab) = lab_if_installed("dpdk-testpmd", "wsdpx") else {
        return;
    };
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
    assert!(testpmd_leftovers(&wiring, None).is_empty());

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
    let left = testpmd_leftovers(&wiring, None);
    assert!(left.is_empty(), "{left:?}");
    drop(lab);
    assert_gone_for_test("wsdpx");
}
