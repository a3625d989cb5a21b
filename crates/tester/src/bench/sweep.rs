//! One point of a sweep: a DuT set up with one value of the swept parameter (routes, cycles of
//! emulated work, working set, batch size), verified, placed, blasted at full rate like a
//! [forwarding trial](super::trial), optionally given a paced latency trial, and torn down.
//!
//! The sweeps (`wirespeed bench fib|model|batch`) differ only in how they build the DuT and the
//! frames of a point, so that is all they pass in: the driver, a [`Template`] (the FIB sweep's
//! spreads over every route), and a sampler that reads the DuT's own counters right before and
//! after the blast (the cost model compares its fit with the worker's cycle accounting). The
//! teardown runs whatever happened, so a failed point leaves nothing behind and the sweep moves
//! on to the next.
//!
//! **Arrivals while sending.** A point's throughput is what arrived on `t1` while `t0` was
//! sending, over the sending time: the blast stops counting when it stops sending. Counting a
//! lingering tail too (as a forwarding trial does, to judge loss) credits the frames a slow DuT
//! still held in its rings to a window in which it did not forward them; measured here, a worker
//! spinning 20 000 cycles per packet (at most 115 kpps on this 2.3 GHz core) then seemed to
//! forward 149 kpps in a 0.3 s blast, which bends exactly the falling part of the cost model's
//! curve. Frames still inside the DuT when sending stops count as lost instead.

pub mod model;

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use crate::dut::probe::verify;
use crate::dut::{Dut, SwitchCounters, Wiring};
use crate::generator::Template;
use crate::generator::pacing::Pattern;
use crate::stats::LatencySummary;
use crate::trial::{TrialConfig, TrialPorts, run_in_lab};

use super::placement::{Placed, place_kernel, place_process};
use super::{ForwardingConfig, Measurement, generate};

/// A driver seen as a [`Dut`], whether it is a concrete driver or already a `dyn Dut` (so that a
/// sweep can keep its concrete type and still read counters only that type has).
pub trait AsDut {
    fn as_dut(&mut self) -> &mut dyn Dut;
}

impl<T: Dut> AsDut for T {
    fn as_dut(&mut self) -> &mut dyn Dut {
        self
    }
}

impl AsDut for dyn Dut {
    fn as_dut(&mut self) -> &mut dyn Dut {
        self
    }
}

/// A paced trial after the blast, for latency.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatencyConfig {
    /// Offered rate, frames per second.
    pub rate: f64,
    pub seconds: f64,
}

/// The latency trial of a point.
#[derive(Clone, Debug, PartialEq)]
pub struct LatencyPoint {
    /// Offered rate, frames per second.
    pub rate: f64,
    /// Frames offered (`rate × seconds`) and frames that came back.
    pub sent: u64,
    pub received: u64,
    /// Share of the offered frames that did not arrive.
    pub loss: f64,
    pub latency: LatencySummary,
}

/// What one point measured.
#[derive(Clone, Debug, PartialEq)]
pub struct PointMeasurement {
    /// The full-rate blast: its received rate is the DuT's throughput at this point.
    pub forwarding: Measurement,
    pub latency: Option<LatencyPoint>,
    /// The DuT's counters over the blast, when the sampler could read them.
    pub counters: Option<SwitchCounters>,
}

/// One point as it happened.
#[derive(Clone, Debug)]
pub struct PointRecord {
    pub dut: String,
    /// The swept parameter's value at this point.
    pub value: f64,
    /// The measurement, or why the point failed (naming the DuT and the step).
    pub outcome: Result<PointMeasurement, String>,
    /// Every thread placed for the point, as read back.
    pub placement: Vec<Placed>,
    /// Commands the point ran (DuT setup and teardown, placement).
    pub commands: Vec<String>,
    /// What a program DuT printed (its final counters and drop reasons).
    pub output: Option<String>,
}

impl PointRecord {
    /// The received rate of the blast (0 for a failed point).
    pub fn received_pps(&self) -> f64 {
        self.outcome
            .as_ref()
            .map_or(0.0, |m| m.forwarding.received_pps())
    }
}

/// Reads the DuT's counters; `None` when the DuT has none to read.
pub type Sampler<'a, D> = dyn FnMut(&D) -> Option<Result<SwitchCounters, String>> + 'a;

/// Runs one point: setup, verify, place, blast `template` (counters sampled around it), the
/// latency trial if asked, teardown (always). `config` gives the trial length, generator batch
/// and placement (its `flows` are not used: the template carries its own).
#[allow(clippy::too_many_arguments)]
pub fn point<D: AsDut + ?Sized>(
    dut: &mut D,
    value: f64,
    wiring: &Wiring,
    config: &ForwardingConfig,
    template: &Template,
    latency: Option<LatencyConfig>,
    stop: &AtomicBool,
    sample: &mut Sampler<'_, D>,
) -> PointRecord {
    let logged = dut.as_dut().commands().len();
    let mut placement = Vec::new();
    let mut commands = Vec::new();
    let outcome = measure(
        dut,
        wiring,
        config,
        template,
        latency,
        stop,
        sample,
        &mut placement,
        &mut commands,
    );
    let dut = dut.as_dut();
    let torn = dut.teardown().map_err(|error| error.to_string());
    let mut all = dut.commands().get(logged..).unwrap_or_default().to_vec();
    all.extend(commands);
    PointRecord {
        dut: dut.name(),
        value,
        outcome: outcome.and_then(|m| torn.map(|()| m)),
        placement,
        commands: all,
        output: dut.output().map(str::to_string),
    }
}

#[allow(clippy::too_many_arguments)]
fn measure<D: AsDut + ?Sized>(
    dut: &mut D,
    wiring: &Wiring,
    config: &ForwardingConfig,
    template: &Template,
    latency: Option<LatencyConfig>,
    stop: &AtomicBool,
    sample: &mut Sampler<'_, D>,
    placement: &mut Vec<Placed>,
    commands: &mut Vec<String>,
) -> Result<PointMeasurement, String> {
    {
        let dut = dut.as_dut();
        dut.setup(wiring).map_err(|error| error.to_string())?;
        verify(dut, wiring, 1, Duration::from_secs(10)).map_err(|error| error.to_string())?;
        let plan = &config.plan;
        placement.extend(place_kernel(wiring, plan, commands).map_err(|e| e.to_string())?);
        if let Some(pid) = dut.pid() {
            placement.extend(
                place_process(pid, "worker", plan.dut_cpu, plan.nice, commands)
                    .map_err(|e| e.to_string())?,
            );
        }
    }
    let before = sample(dut).transpose()?;
    // Only what arrives while the generator sends counts: a tail would credit a slow DuT with
    // the frames it still had queued.
    let (forwarding, generator) =
        generate(wiring, template, config, Duration::ZERO, stop, commands)?;
    placement.extend(generator);
    let after = sample(dut).transpose()?;
    dut.as_dut().check().map_err(|error| error.to_string())?;
    let counters = match (before, after) {
        (Some(before), Some(after)) => Some(after.since(&before)),
        _ => None,
    };
    let latency = match latency {
        Some(latency) => Some(latency_trial(wiring, template, config, latency, stop)?),
        None => None,
    };
    dut.as_dut().check().map_err(|error| error.to_string())?;
    Ok(PointMeasurement {
        forwarding,
        latency,
        counters,
    })
}

fn latency_trial(
    wiring: &Wiring,
    template: &Template,
    config: &ForwardingConfig,
    latency: LatencyConfig,
    stop: &AtomicBool,
) -> Result<LatencyPoint, String> {
    let trial = TrialConfig {
        rate: latency.rate,
        seconds: latency.seconds,
        pattern: Pattern::Cbr,
        batch: config.batch.min(32),
        ..TrialConfig::default()
    };
    let lab = run_in_lab(
        &TrialPorts::through_dut(wiring),
        template,
        &trial,
        config.plan.generator_cpu,
        stop,
    )?;
    let outcome = &lab.measurement.outcome;
    let loss = if outcome.sent == 0 {
        0.0
    } else {
        (1.0 - outcome.received as f64 / outcome.sent as f64).max(0.0)
    };
    Ok(LatencyPoint {
        rate: latency.rate,
        sent: outcome.sent,
        received: outcome.received,
        loss,
        latency: lab.measurement.latency,
    })
}
