use super::frame_size::{search_floor, stalled};
use super::*;
use crate::rfc2544::Departure;
use crate::trial::{DEFAULT_SAMPLE_EVERY, FlowOrder};

/// Every frame of a [`steady`] trial left on time, 1 ms of tolerance.
fn on_time() -> Departure {
    Departure {
        scheduled_rate: 100_000.0,
        departed_rate: 100_000.0,
        tolerance_seconds: 0.001,
        ..Departure::default()
    }
}

/// 100 000 frames/s for half a second.
fn steady() -> TrialSpec {
    TrialSpec {
        load: Load::Rate {
            rate: 100_000.0,
            seconds: 0.5,
        },
    }
}

#[test]
fn a_trial_is_repeated_only_for_a_loss_its_late_burst_explains() {
    let steady = steady();
    let mut trial = TrialMeasurement::default();
    trial.outcome.sent = 50_000;
    trial.outcome.received = 49_200;
    let late = Departure {
        sent_late: 800,
        ..on_time()
    };
    trial.outcome.departure = Some(late);
    assert!(stalled(&steady, &trial));
    // On time: the loss is the DuT's.
    trial.outcome.departure = Some(Departure {
        sent_late: 0,
        ..late
    });
    assert!(!stalled(&steady, &trial));
    trial.outcome.departure = Some(late);
    // Nothing lost, or more than the late burst: nothing to repeat.
    trial.outcome.received = 50_000;
    assert!(!stalled(&steady, &trial));
    trial.outcome.received = 49_199;
    assert!(!stalled(&steady, &trial));
    trial.outcome.received = 49_200;
    assert!(stalled(&steady, &trial));
    // A burst is meant to be sent at once.
    trial.outcome.received = 49_200;
    let burst = TrialSpec {
        load: Load::Burst {
            frames: 50_000,
            rate: 1e6,
        },
    };
    assert!(!stalled(&burst, &trial));
}

/// Issue 16's rule: a trial that ended with its generator behind never passes as it is; it
/// is run again, and a last run still behind counts the owed frames lost.
#[test]
fn a_trial_that_ended_behind_its_schedule_is_repeated_and_never_passes() {
    let steady = steady();
    let mut trial = TrialMeasurement::default();
    trial.outcome.sent = 50_000;
    trial.outcome.received = 50_000;
    let on_time = on_time();
    trial.outcome.departure = Some(on_time);
    assert!(!stalled(&steady, &trial));
    assert_eq!(trial.outcome.loss_ratio(), 0.0);
    // Late in the middle and caught up, nothing lost: a pass, the burst was harder.
    trial.outcome.departure = Some(Departure {
        sent_late: 400,
        ..on_time
    });
    assert!(!stalled(&steady, &trial));
    // ... but a small loss behind a late sender is the burst's.
    trial.outcome.received = 49_990;
    assert!(stalled(&steady, &trial));
    // Behind at the end: every frame arrived, and still it is repeated and fails.
    trial.outcome.received = 50_000;
    trial.outcome.departure = Some(Departure {
        sent_late: 400,
        behind: 400,
        departed_rate: 99_200.0,
        ..on_time
    });
    assert!(stalled(&steady, &trial));
    assert_eq!(trial.outcome.lost(), 400);
    // Frames the DuT held back in the tester's port are its loss, not a stall.
    trial.outcome.departure = Some(Departure {
        held_back: 300,
        ..on_time
    });
    assert!(!stalled(&steady, &trial));
    assert_eq!(trial.outcome.lost(), 300);
    // The in-kernel sender fell behind (10 000 frames never sent), but of the 40 000 it sent
    // the DuT lost 5 000, far more than its 400 late frames explain: the DuT failed at this
    // rate, whatever the generator managed. Losing only the unsent ones is the generator's.
    trial.outcome.received = 35_000;
    trial.outcome.departure = Some(Departure {
        sent_late: 400,
        behind: 400,
        not_sent: Some(10_000),
        ..on_time
    });
    assert!(!stalled(&steady, &trial));
    trial.outcome.received = 40_000;
    assert!(stalled(&steady, &trial));
}

/// Frames the DuT forwarded and the tester's receiving ring refused are the tester's loss: a
/// trial that lost no more than those (and its generator's late burst) is repeated, and one
/// that lost more is the DuT's failure.
#[test]
fn a_loss_the_testers_receive_refused_is_the_testers() {
    let steady = steady();
    let mut trial = TrialMeasurement::default();
    trial.outcome.sent = 50_000;
    trial.outcome.received = 49_983;
    trial.outcome.departure = Some(Departure {
        not_sent: Some(0),
        ..on_time()
    });
    assert!(
        !stalled(&steady, &trial),
        "nothing refused: the DuT lost them"
    );
    trial.outcome.receiver_refused = 17;
    assert!(stalled(&steady, &trial));
    trial.outcome.receiver_refused = 16;
    assert!(
        !stalled(&steady, &trial),
        "one frame more than the receiver refused"
    );
    // With the generator's late burst, both together explain it.
    trial.outcome.departure = Some(Departure {
        sent_late: 1,
        not_sent: Some(0),
        ..on_time()
    });
    assert!(stalled(&steady, &trial));
    // Refusals in a trial that lost nothing change nothing.
    trial.outcome.received = 50_000;
    assert!(!stalled(&steady, &trial));
    assert_eq!(trial.outcome.loss_ratio(), 0.0);
}

#[test]
fn test_lists_parse_and_latency_recovery_or_reset_need_the_search() {
    let all = Tests::parse("throughput,latency,loss,back-to-back,recovery,reset").unwrap();
    assert_eq!(all, Tests::parse("all").unwrap());
    let loss = Tests::parse(" loss ").unwrap();
    assert!(loss.loss && !loss.searches() && !loss.back_to_back);
    assert!(Tests::parse("recovery").unwrap().searches());
    assert!(Tests::parse("reset").unwrap().searches());
    assert!(Tests::parse("latency").unwrap().searches());
    assert!(Tests::parse("back-to-back,").unwrap().back_to_back);
    assert!(Tests::parse("speed").unwrap_err().contains("back-to-back"));
    assert!(Tests::parse("").is_err());
}

#[test]
fn latency_at_given_rates_needs_no_search_and_latency_samples_by_default() {
    let at_rates = SuiteConfig {
        tests: Tests::parse("latency").unwrap(),
        latency_rates: vec![450_000.0],
        ..SuiteConfig::default()
    };
    assert!(!at_rates.searches());
    for tests in ["throughput,latency", "latency,recovery"] {
        let searched = SuiteConfig {
            tests: Tests::parse(tests).unwrap(),
            ..at_rates.clone()
        };
        assert!(searched.searches(), "{tests}");
    }
    let at_ndr = SuiteConfig {
        latency_rates: Vec::new(),
        ..at_rates
    };
    assert!(at_ndr.searches());
    assert_eq!(
        at_ndr.latency_receiver,
        ReceiverKind::Sampled {
            every: DEFAULT_SAMPLE_EVERY
        }
    );
    let said = receivers(&at_ndr);
    assert!(said.contains("sampling 1 in 64"), "{said}");
    assert!(said.contains(&ReceiverKind::Probe.label()), "{said}");
}

#[test]
fn each_load_becomes_its_trial() {
    let config = SuiteConfig {
        pattern: Pattern::Poisson { seed: 4 },
        flow_order: FlowOrder::Random { seed: 2 },
        ..SuiteConfig::default()
    };
    let steady = load_config(
        &config,
        Load::Rate {
            rate: 1e5,
            seconds: 2.0,
        },
    );
    assert_eq!((steady.rate, steady.seconds), (1e5, 2.0));
    assert_eq!(steady.pattern, Pattern::Poisson { seed: 4 });
    assert_eq!(steady.flow_order, FlowOrder::Random { seed: 2 });
    assert_eq!((steady.frames, steady.then), (None, None));
    // A burst is exactly its frames, evenly spaced at the burst's rate.
    let burst = load_config(
        &config,
        Load::Burst {
            frames: 5000,
            rate: 1e6,
        },
    );
    assert_eq!(burst.frames, Some(5000));
    assert_eq!(burst.pattern, Pattern::Cbr);
    assert!((burst.seconds - 0.005).abs() < 1e-12);
    let step = load_config(
        &config,
        Load::Step {
            first_rate: 1.1e6,
            first_seconds: 3.0,
            then_rate: 0.55e6,
            then_seconds: 2.0,
        },
    );
    assert_eq!((step.rate, step.seconds), (1.1e6, 3.0));
    assert_eq!(
        step.then,
        Some(Phase {
            rate: 0.55e6,
            seconds: 2.0
        })
    );
}

#[test]
fn traffic_kinds_are_named_and_multiply_the_estimate() {
    let one = SuiteConfig::default();
    assert_eq!(one.kinds().len(), 1);
    assert_eq!(one.kinds()[0].label(), "CBR, 1 flow");
    let kinds: Vec<Traffic> = [Pattern::Cbr, Pattern::Poisson { seed: 1 }]
        .into_iter()
        .flat_map(|pattern| {
            [1, 256].map(|flows| Traffic {
                pattern,
                flows,
                flow_order: FlowOrder::Random { seed: 1 },
            })
        })
        .collect();
    assert_eq!(kinds[1].label(), "CBR, 256 random flows");
    assert_eq!(kinds[2].label(), "Poisson (seed 1), 1 flow");
    let four = SuiteConfig {
        traffic: kinds,
        ..SuiteConfig::default()
    };
    assert_eq!(four.with(four.kinds()[3]).flows, 256);
    let per_kind = |c: &SuiteConfig| estimate_trials(c) - 2 * c.frame_sizes.len();
    assert_eq!(per_kind(&four), 4 * per_kind(&one));
    let everything = SuiteConfig {
        tests: Tests::parse("all").unwrap(),
        ndr_runs: 2,
        ..SuiteConfig::default()
    };
    assert!(per_kind(&everything) > 2 * per_kind(&one));
    let calibration = SuiteConfig {
        calibrate_only: true,
        ..everything
    };
    assert_eq!(estimate_trials(&calibration), 14);
}

#[test]
fn a_latency_load_the_sender_could_not_offer_is_noted_with_what_it_did_offer() {
    let mut m = TrialMeasurement {
        outcome: TrialOutcome {
            sent: 20_000,
            seconds: 0.01,
            ..TrialOutcome::default()
        },
        transmitted: 10_000,
        refused: 10_000,
        ..TrialMeasurement::default()
    };
    let note = unoffered_latency_load(64, 2e6, &m).expect("a note");
    assert!(note.contains("2.000 Mpps"), "{note}");
    assert!(
        note.contains("afxdp sender could not offer 50.0 %"),
        "{note}"
    );
    assert!(note.contains("about 1.000 Mpps"), "{note}");
    // Within 1 %: the load was offered.
    (m.transmitted, m.refused) = (19_900, 100);
    assert_eq!(unoffered_latency_load(64, 2e6, &m), None);
}

/// A DuT far slower than the search's maximum still gets its NDR: an external 50-Mbit/s router
/// (104.2 kframes/s of 64 B) behind a 10-Gbit/s line rate (14.88 Mframes/s) had none while the
/// search stopped at 1 % of the maximum.
#[test]
fn a_dut_slower_than_a_hundredth_of_the_maximum_still_gets_its_ndr() {
    let max_rate = line_rate(10e9, 64);
    let capacity = 104_167.0;
    let search = ThroughputConfig {
        max_rate,
        min_rate: search_floor(max_rate),
        trial_seconds: 0.5,
        resolution: 1000.0,
        repeats: 0,
        ..ThroughputConfig::default()
    };
    let found = throughput(&search, |spec| {
        let rate = spec.load.rate();
        let sent = (rate * 0.5) as u64;
        let received = if rate <= capacity {
            sent
        } else {
            (capacity * 0.5) as u64
        };
        TrialOutcome {
            sent,
            received,
            seconds: 0.5,
            ..TrialOutcome::default()
        }
    });
    let ndr = found.ndr.expect("an NDR");
    assert!((capacity - 1000.0..=capacity).contains(&ndr), "{ndr}");
    // The floor is the live sender's lowest paced rate, never above the maximum.
    assert_eq!(search_floor(max_rate), crate::trial::live::MIN_RATE);
    assert_eq!(search_floor(500.0), 500.0);
}
