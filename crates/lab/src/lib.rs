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

pub use command::{CommandError, run, run_in};
pub use netns::{NetnsGuard, enter};
pub use testbed::{CalibrationPair, PortPair, Testbed, TestbedConfig, down, list};

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

/// For tests: the testbed `config` describes, built afresh (leftovers of a killed run with the
/// same prefix removed first), or `None` where [`available_for_test`] says the lab cannot be
/// built. A testbed that fails to come up fails the test.
pub fn up_for_test(config: &TestbedConfig) -> Option<Testbed> {
    if !available_for_test() {
        return None;
    }
    let _ = down(&config.prefix);
    match Testbed::up(config) {
        Ok(testbed) => Some(testbed),
        Err(error) => panic!("lab {} up: {error}", config.prefix),
    }
}
