//! Validity against a third party: the tester's own counts (frames its TX port took, frames its
//! RX port received) agree with the kernel's interface counters within 0.1 %, read from
//! /sys/class/net/<interface>/statistics inside the tester's namespace, and the rate the tester
//! measured agrees with the rate those counters imply over the trial. Run over the lab's
//! looped-back calibration pair (AF_XDP in native copy mode), at a load the tester keeps up with
//! and at one far above what it can send (where the TX ring refuses frames: those must not be
//! counted as sent by either side).

use std::sync::atomic::AtomicBool;

use wirespeed_tester::generator::{Template, TemplateConfig};
use wirespeed_tester::trial::{TrialConfig, TrialPorts, run_in_lab};

/// Packet counters of one interface from sysfs, as seen inside namespace `ns`.
fn sysfs(ns: &str, interface: &str) -> (u64, u64) {
    let read = |name| wirespeed_lab::interface_counter_for_test(ns, interface, name);
    (read("tx_packets"), read("rx_packets"))
}

fn within(tester: u64, kernel: u64, share: f64) -> bool {
    tester > 0 && tester.abs_diff(kernel) as f64 <= share * tester as f64
}

#[test]
fn tester_counts_agree_with_the_kernels_interface_counters() {
    let prefix = "wstcnt";
    let Some(lab) = wirespeed_lab::calibration_for_test(prefix) else {
        return;
    };
    let pair = lab.calibration.clone().expect("a calibration pair");
    let ports = TrialPorts::looped(&lab.tester_ns, &pair);
    let template = Template::new(&TemplateConfig {
        frame_size: 64,
        src_mac: pair.sender_mac,
        dst_mac: pair.receiver_mac,
        flows: 16,
        ..TemplateConfig::default()
    })
    .unwrap();
    let stop = AtomicBool::new(false);
    // 20 kpps is far below what the tester does even unoptimised; 20 Mpps far above.
    for rate in [20_000.0, 20_000_000.0] {
        let before = (
            sysfs(&lab.tester_ns, &pair.sender_if),
            sysfs(&lab.tester_ns, &pair.receiver_if),
        );
        let config = TrialConfig {
            rate,
            seconds: 0.5,
            ..TrialConfig::default()
        };
        let trial = run_in_lab(&ports, &template, &config, 0, &stop).expect("a trial");
        let after = (
            sysfs(&lab.tester_ns, &pair.sender_if),
            sysfs(&lab.tester_ns, &pair.receiver_if),
        );
        let m = &trial.measurement;
        let kernel_tx = after.0.0 - before.0.0;
        let kernel_rx = after.1.1 - before.1.1;
        assert!(
            within(m.transmitted, kernel_tx, 0.001),
            "{rate}/s: the tester's TX port took {} frames, the kernel sent {kernel_tx}",
            m.transmitted
        );
        assert!(
            within(m.arrived, kernel_rx, 0.001),
            "{rate}/s: the tester received {} frames, the kernel counted {kernel_rx}",
            m.arrived
        );
        // The trial's own netlink reading says the same.
        assert!(trial.counters.agrees_within(0.001), "{:?}", trial.counters);
        // The rate the tester reports is what the kernel's counter implies over the same span.
        let kernel_rate = kernel_tx.saturating_sub(1) as f64 / m.outcome.seconds;
        assert!(
            (m.pacing.achieved_rate - kernel_rate).abs() <= 0.001 * kernel_rate,
            "{rate}/s: tester {} /s, kernel {kernel_rate} /s",
            m.pacing.achieved_rate
        );
        if rate < 1e6 {
            // The easy load: everything offered left and came back.
            assert_eq!(m.outcome.sent, 10_000);
            assert_eq!(m.transmitted + m.refused + m.unsent, 10_000, "{m:?}");
        } else {
            // The impossible load: the ring refused frames, and neither side counted them.
            assert!(m.refused + m.unsent > 0, "{m:?}");
            assert!(m.transmitted < m.outcome.sent);
        }
    }
    lab.teardown().unwrap();
    wirespeed_lab::assert_gone_for_test(prefix);
}
