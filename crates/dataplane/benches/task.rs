//! Calibration of the emulated task (seed 001): does spinning N cycles per packet cost N cycles,
//! and what does one step of the linked-list walk cost at each working-set size (the cache
//! steps of seed 001 Figure 3 on this machine)?
//!
//! Prints markdown tables; run with `cargo bench -p wirespeed-dataplane --bench task`.
//! Each figure is the median of 101 short runs (about a millisecond each) measured with the
//! TSC: short runs are rarely preempted on a shared machine, and the median discards those
//! that were.

use wirespeed_dataplane::stage::Task;
use wirespeed_packet::cpu::{rdtsc, tsc_hz};

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Cycles per packet of `task` over `packets` packets, median of 101 runs.
fn cycles_per_packet(task: &mut Task, packets: u64) -> f64 {
    task.run(packets); // warm the caches and the list
    let runs = (0..101)
        .map(|_| {
            let start = rdtsc();
            task.run(packets);
            (rdtsc() - start) as f64 / packets as f64
        })
        .collect();
    median(runs)
}

fn main() {
    // `cargo bench` passes `--bench`; a plain `cargo test --benches` run passes nothing and
    // should stay quick.
    let quick = !std::env::args().any(|a| a == "--bench");
    println!("TSC: {:.3} GHz\n", tsc_hz() as f64 / 1e9);
    let base = cycles_per_packet(
        &mut Task::new(0, 0, 1),
        if quick { 10_000 } else { 1_000_000 },
    );
    println!("| asked cycles/packet | measured | error |\n| ---: | ---: | ---: |");
    for asked in [100u64, 200, 500, 1_000, 2_000, 5_000, 10_000] {
        let packets = if quick { 1_000 } else { 2_000_000 / asked };
        // The spin's deadline absorbs the loop's own overhead, so nothing is subtracted here.
        let measured = cycles_per_packet(&mut Task::new(asked, 0, 1), packets);
        let error = 100.0 * (measured - asked as f64) / asked as f64;
        println!("| {asked} | {measured:.1} | {error:+.2} % |");
    }
    println!(
        "\n(loop overhead of an empty task, subtracted from the walk below: {base:.1} cycles/packet)\n"
    );
    println!("| working set | cycles per step |\n| ---: | ---: |");
    let mut size: u64 = 16 << 10;
    let largest = if quick { 1 << 20 } else { 256 << 20 };
    while size <= largest {
        // Enough steps to leave the cache state of the previous run behind, few enough that a
        // run is short: at least the list's length, at most 2^18.
        let packets = if quick {
            1_000
        } else {
            (size / 64).clamp(20_000, 1 << 18)
        };
        let measured = cycles_per_packet(&mut Task::new(0, size, 7), packets) - base;
        let label = if size >= 1 << 20 {
            format!("{} MiB", size >> 20)
        } else {
            format!("{} KiB", size >> 10)
        };
        println!("| {label} | {measured:.1} |");
        size *= 2;
    }
}
