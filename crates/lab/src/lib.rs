//! Testbeds made of network namespaces and veth pairs, and the guarantee that they go away.
//!
//! A [`Testbed`] is the two-host lab of DESIGN.md §6: a tester namespace and a DuT namespace
//! joined by N veth pairs (tester port *i* <-> DuT port *i*), with fixed MACs and addresses from
//! the RFC 2544 benchmarking ranges (198.18.0.0/15, 2001:2::/48). Everything it creates is pushed
//! on an undo stack that runs when the testbed is dropped (also on panic), and [`down`] removes the
//! leftovers of a run that was killed, by name prefix, so two labs with different prefixes coexist.
//!
//! Setup is done with iproute2's `ip` command rather than raw netlink: it is what an engineer
//! would type, every command is recorded for reports, and the error text of a failing step is the
//! one the engineer knows.

mod command;
mod netns;
mod testbed;

pub use command::{CommandError, HERE, ip_in, run, run_in, run_with_input};
pub use netns::{NetnsGuard, enter};
pub use testbed::{
    CalibrationPair, DEFAULT_MTU, DUT_EGRESS_FRAMES, PortPair, Testbed, TestbedConfig, down, list,
};

/// Whether this process may build testbeds (root, with `ip` available). Tests that need a lab
/// call this first: where it is false they skip with the returned reason, except under CI (the
/// `CI` environment variable is set), where a missing lab is a failure.
pub fn unavailable_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("network namespaces need root".into());
    }
    if run("ip", &["-V"]).is_err() {
        return Some("iproute2's `ip` command is not installed".into());
    }
    None
}

/// For tests: `true` when the lab can be built; otherwise prints why and returns `false`, or
/// panics under CI where every lab test must run.
pub fn available_for_test() -> bool {
    match unavailable_reason() {
        None => true,
        Some(reason) if std::env::var_os("CI").is_some() => {
            panic!("lab tests must run under CI, but: {reason}")
        }
        Some(reason) => {
            eprintln!("skipped: {reason}");
            false
        }
    }
}

/// For tests that build their lab through something else (the binary's `bench` commands):
/// `true` when [`available_for_test`] says the lab can be built, with the leftovers of a killed
/// run under `prefix` removed, so the run starts from nothing and a later
/// [`assert_gone_for_test`] sees only what this run left.
pub fn clear_for_test(prefix: &str) -> bool {
    if !available_for_test() {
        return false;
    }
    let _ = down(prefix);
    true
}

/// For tests: the testbed `config` describes, built afresh (see [`clear_for_test`]), or `None`
/// where [`available_for_test`] says the lab cannot be built. A testbed that fails to come up
/// fails the test.
pub fn up_for_test(config: &TestbedConfig) -> Option<Testbed> {
    if !clear_for_test(&config.prefix) {
        return None;
    }
    match Testbed::up(config) {
        Ok(testbed) => Some(testbed),
        Err(error) => panic!("lab {} up: {error}", config.prefix),
    }
}

/// For tests of the tester alone: a fresh testbed of one port pair and the looped-back
/// calibration pair, which the tests send over (see [`up_for_test`]).
pub fn calibration_for_test(prefix: &str) -> Option<Testbed> {
    up_for_test(&TestbedConfig {
        prefix: prefix.into(),
        pairs: 1,
        queues: 1,
        calibration: true,
        mtu: DEFAULT_MTU,
    })
}

/// For tests: asserts that no namespace whose name starts with `prefix` is left, naming what is.
/// A test calls it after dropping its testbed, to show the undo stack removed everything.
pub fn assert_gone_for_test(prefix: &str) {
    let left = list().expect("list network namespaces");
    assert!(
        !left.iter().any(|ns| ns.starts_with(prefix)),
        "left behind: {left:?}"
    );
}

/// For tests of a third-party program (nft, Open vSwitch, DPDK testpmd): `true` when `program`
/// is installed in a system directory; otherwise prints why the test is skipped and returns
/// `false`, or panics under CI, which installs everything with scripts/setup-debian.sh.
pub fn installed_for_test(program: &str) -> bool {
    let installed = ["/usr/sbin", "/usr/bin", "/sbin", "/bin"]
        .iter()
        .any(|dir| std::path::Path::new(dir).join(program).is_file());
    if !installed {
        assert!(
            std::env::var_os("CI").is_none(),
            "{program} is missing; CI runs scripts/setup-debian.sh first"
        );
        eprintln!("skipped: {program} is not installed (run scripts/setup-debian.sh)");
    }
    installed
}

/// For tests: the packet counter `name` (`tx_packets`, `rx_packets`, ...) of `interface`, read
/// from /sys inside namespace `ns`: the kernel's count, to check a count of one's own against.
pub fn interface_counter_for_test(ns: &str, interface: &str, name: &str) -> u64 {
    let path = format!("/sys/class/net/{interface}/statistics/{name}");
    run("ip", &["netns", "exec", ns, "cat", &path])
        .expect("read an interface counter")
        .trim()
        .parse()
        .expect("a number")
}
