//! Seed 001's cost model fitted to a measured curve: throughput against cycles of emulated work
//! per packet.
//!
//! A core of `f_CPU` cycles per second that spends `c_IO` cycles per packet on I/O and `c_task` on
//! the task forwards `T = min(r_max, f_CPU / (c_IO + c_task))` packets per second: flat at the
//! rate the rest of the system allows (`r_max`: the link, the generator, the kernel's half of the
//! I/O) while the core has cycles to spare, then falling like `1 / (c_IO + c_task)` once it has
//! none. Below the knee the spare cycles go to polling empty rings: `c_busy = f_CPU / T - c_IO -
//! c_task` per packet.
//!
//! [`fit`] tries every plateau the first k points suggest (their mean or median) against every
//! `c_IO` a single point implies (`f_CPU / T - c_task`, exact for a point past the knee) and keeps
//! the pair with the least sum of absolute differences of the logarithms: a 10 % miss counts the
//! same at 0.1 and at 1 Mpps, and one trial disturbed by another job on a shared machine does not
//! drag the fit the way squares would. A dozen points make a few hundred candidates: nothing
//! iterative that could fail to converge. It is a pure function, tested on synthetic curves; the
//! sweep must reach past the knee for `c_IO` to be measured at all.

/// The fitted model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModelFit {
    /// The plateau, packets per second.
    pub r_max: f64,
    /// Cycles per packet for I/O.
    pub c_io: f64,
    /// Cycles of work per packet where the plateau ends: `f_CPU / r_max - c_IO`.
    pub knee: f64,
    /// How many of the points (lowest work first) are on the plateau.
    pub plateau_points: usize,
}

impl ModelFit {
    /// The model's throughput at `c_task` cycles of work per packet.
    pub fn predict(&self, f_cpu: f64, c_task: f64) -> f64 {
        predict(self.r_max, self.c_io, f_cpu, c_task)
    }

    /// Cycles per packet lost to polling at a measured point (0 past the knee).
    pub fn busy_cycles(&self, f_cpu: f64, c_task: f64, pps: f64) -> f64 {
        if pps <= 0.0 {
            return 0.0;
        }
        (f_cpu / pps - self.c_io - c_task).max(0.0)
    }

    /// Cycles per packet of a task whose cost is unknown (the linked-list walk), from its
    /// measured throughput: what is left of the core's cycles per packet after I/O. Meaningful
    /// only past the knee (the core busy); near the plateau it includes polling.
    pub fn task_cycles(&self, f_cpu: f64, pps: f64) -> f64 {
        if pps <= 0.0 {
            return 0.0;
        }
        (f_cpu / pps - self.c_io).max(0.0)
    }
}

/// `min(r_max, f_cpu / (c_io + c_task))`.
pub fn predict(r_max: f64, c_io: f64, f_cpu: f64, c_task: f64) -> f64 {
    let cycles = c_io + c_task;
    if cycles <= 0.0 {
        return r_max;
    }
    r_max.min(f_cpu / cycles)
}

/// Fits the model to `points` of (cycles of work per packet, packets per second) measured on a
/// core of `f_cpu` cycles per second. `None` with fewer than two usable points (positive,
/// finite rate; non-negative work) or no positive `f_cpu`.
pub fn fit(points: &[(f64, f64)], f_cpu: f64) -> Option<ModelFit> {
    if !(f_cpu.is_finite() && f_cpu > 0.0) {
        return None;
    }
    let mut usable: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|&(c, t)| c.is_finite() && c >= 0.0 && t.is_finite() && t > 0.0)
        .collect();
    usable.sort_by(|a, b| a.0.total_cmp(&b.0));
    if usable.len() < 2 {
        return None;
    }
    // Candidates: r_max the mean or median of the first k points (k = 1..=n), c_IO what each
    // point implies if it is past the knee. Every pair is scored; the best explains the curve.
    let mut plateaus = Vec::with_capacity(2 * usable.len());
    for flat in 1..=usable.len() {
        let rates: Vec<f64> = usable[..flat].iter().map(|p| p.1).collect();
        plateaus.push(rates.iter().sum::<f64>() / flat as f64);
        plateaus.push(crate::bench::median(&rates));
    }
    let costs: Vec<f64> = usable
        .iter()
        .map(|&(c, t)| (f_cpu / t - c).max(0.0))
        .collect();
    let mut best: Option<(f64, f64, f64)> = None;
    for &r_max in &plateaus {
        for &c_io in &costs {
            let error: f64 = usable
                .iter()
                .map(|&(c, t)| (predict(r_max, c_io, f_cpu, c).ln() - t.ln()).abs())
                .sum();
            if best.is_none_or(|(e, _, _)| error < e) {
                best = Some((error, r_max, c_io));
            }
        }
    }
    best.map(|(_, r_max, c_io)| {
        let knee = (f_cpu / r_max - c_io).max(0.0);
        ModelFit {
            r_max,
            c_io,
            knee,
            plateau_points: usable.iter().filter(|p| p.0 <= knee).count(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: f64 = 2.3e9;

    fn curve(r_max: f64, c_io: f64, work: &[f64]) -> Vec<(f64, f64)> {
        work.iter()
            .map(|&c| (c, predict(r_max, c_io, F, c)))
            .collect()
    }

    #[test]
    fn an_exact_curve_gives_back_its_parameters() {
        // Knee at 2.3e9 / 1e6 - 300 = 2000 cycles.
        let work = [0.0, 500.0, 1000.0, 1500.0, 3000.0, 6000.0, 12000.0];
        let fit = fit(&curve(1e6, 300.0, &work), F).unwrap();
        assert!((fit.r_max - 1e6).abs() < 1.0, "{fit:?}");
        assert!((fit.c_io - 300.0).abs() < 1e-6, "{fit:?}");
        assert!((fit.knee - 2000.0).abs() < 1e-3, "{fit:?}");
        assert_eq!(fit.plateau_points, 4);
        // Below the knee the spare cycles are busy polling; past it there are none.
        assert!((fit.busy_cycles(F, 0.0, 1e6) - 2000.0).abs() < 1e-6);
        assert_eq!(
            fit.busy_cycles(F, 6000.0, predict(1e6, 300.0, F, 6000.0)),
            0.0
        );
        // A task of unknown cost is read back from its rate.
        assert!((fit.task_cycles(F, F / 1300.0) - 1000.0).abs() < 1e-6);
    }

    #[test]
    fn noise_and_one_disturbed_trial_move_the_fit_little() {
        let work = [0.0, 1000.0, 2000.0, 4000.0, 8000.0, 16000.0, 32000.0];
        // AF_XDP on the lab's veth: ~0.35 Mpps plateau, c_IO of a few thousand cycles.
        let mut points = curve(350_000.0, 2500.0, &work);
        for (i, point) in points.iter_mut().enumerate() {
            point.1 *= if i % 2 == 0 { 1.02 } else { 0.98 };
        }
        // One trial lost half its rate to another job on the machine.
        points[5].1 *= 0.5;
        let fit = fit(&points, F).unwrap();
        assert!((fit.r_max / 350_000.0 - 1.0).abs() < 0.05, "{fit:?}");
        assert!((fit.c_io / 2500.0 - 1.0).abs() < 0.15, "{fit:?}");
        // The knee sits between 2000 and 8000 cycles (exactly: 4071).
        assert!((2000.0..8000.0).contains(&fit.knee), "{fit:?}");
    }

    #[test]
    fn a_curve_that_falls_from_the_start_has_one_plateau_point() {
        let work = [0.0, 1000.0, 2000.0, 4000.0];
        let fit = fit(&curve(1e9, 500.0, &work), F).unwrap();
        assert_eq!(fit.plateau_points, 1);
        assert!((fit.c_io - 500.0).abs() < 1e-6, "{fit:?}");
    }

    #[test]
    fn too_few_or_unusable_points_give_no_fit() {
        assert_eq!(fit(&[], F), None);
        assert_eq!(fit(&[(0.0, 1e6)], F), None);
        assert_eq!(fit(&[(0.0, 1e6), (100.0, 0.0), (f64::NAN, 1.0)], F), None);
        assert_eq!(fit(&[(0.0, 1e6), (100.0, 5e5)], 0.0), None);
        assert_eq!(predict(1e6, 0.0, F, 0.0), 1e6);
    }
}
