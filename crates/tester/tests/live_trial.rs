//! The in-kernel sender's trials ([`SenderKind::XdpLive`]) over the lab's looped-back
//! calibration pair: paced in the kernel, they offer exactly `rate × seconds` frames, never
//! faster than asked, over the trial's length (not in one burst), and every frame is
//! accounted for: counted by the probe counter on the receiving interface, refused by it (the
//! sending veth's `tx_dropped`), or not sent because its turn came after the deadline; the
//! kernel's own counters confirm the counts. A trial right after another counts only its own
//! frames.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use wirespeed_tester::generator::pacing::Pattern;
use wirespeed_tester::generator::{Template, TemplateConfig};
use wirespeed_tester::trial::{ReceiverKind, SenderKind, TrialConfig, TrialPorts, run_in_lab};

#[test]
fn live_trials_offer_their_rate_over_their_length_and_account_for_every_frame() {
    let prefix = "wstliv";
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
    for pattern in [Pattern::Cbr, Pattern::Poisson { seed: 7 }] {
        let config = TrialConfig {
            rate: 100_000.0,
            seconds: 0.5,
            pattern,
            linger: Duration::from_millis(200),
            receiver: ReceiverKind::Count,
            sender: SenderKind::XdpLive,
            ..TrialConfig::default()
        };
        let started = Instant::now();
        let trial = run_in_lab(&ports, &template, &config, 0, &stop).expect("a live trial");
        let took = started.elapsed();
        let m = &trial.measurement;
        assert_eq!(m.sender, SenderKind::XdpLive, "{m:?}");
        assert_eq!(m.outcome.sent, 50_000, "{pattern:?}: {m:?}");
        // Paced over the trial, not sent in one go (a blast takes a few milliseconds).
        assert!(
            took >= Duration::from_millis(450),
            "{pattern:?} took {took:?}"
        );
        let departure = m.outcome.departure.expect("a steady trial's departures");
        // Never faster than asked; slower only by what the program counted as late.
        assert!(
            departure.departed_rate <= 100_000.0 * 1.02,
            "{pattern:?}: {departure:?}"
        );
        if departure.sent_late == 0 {
            assert!(
                departure.departed_rate >= 100_000.0 * 0.98,
                "{pattern:?}: {departure:?}"
            );
        }
        // Every frame: counted, or refused by the receiving side's ring; the kernel agrees.
        assert_eq!(
            m.outcome.received + m.refused,
            m.outcome.sent,
            "{pattern:?}: {m:?}"
        );
        // (within the 0.1 % the tester promises: the kernel's own frames, IPv6 neighbour
        // discovery, also pass the interfaces while their counters are read).
        assert!(trial.counters.agrees_within(0.001), "{:?}", trial.counters);
        assert_eq!(
            m.stale, 0,
            "{pattern:?}: the trial before was waited for: {m:?}"
        );
    }
    // A rate far beyond the generator: the frames whose turn came after the deadline were
    // not sent, and the trial ended in bounded time instead of sending all of them late.
    let config = TrialConfig {
        rate: 20e6,
        seconds: 0.2,
        receiver: ReceiverKind::Count,
        sender: SenderKind::XdpLive,
        ..TrialConfig::default()
    };
    let started = Instant::now();
    let trial = run_in_lab(&ports, &template, &config, 0, &stop).expect("a live trial");
    let took = started.elapsed();
    let m = &trial.measurement;
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert!(m.unsent > 0, "{m:?}");
    assert_eq!(m.outcome.received + m.refused + m.unsent, 4_000_000, "{m:?}");
    assert!(m.outcome.departure.is_some_and(|d| d.sent_late > 0), "{m:?}");
    lab.teardown().unwrap();
    wirespeed_lab::assert_gone_for_test(prefix);
}
