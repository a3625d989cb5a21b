//! Printing what workers counted: the interval line and the final tables.
//!
//! Cycles per packet per part of the loop are seed 000's Table II and seed 001's c_IO (rx + tx),
//! c_task (process) and c_busy (idle, the share of cycles lost to empty polls), measured live.

use std::fmt::Write;

use wirespeed_dataplane::worker::WorkerSnapshot;
use wirespeed_fastpath::{FastPath, ToUser};
use wirespeed_packet::DropReason;

/// Sums of all workers.
#[derive(Default)]
pub struct Totals {
    pub rx: u64,
    pub tx: u64,
    pub dropped: u64,
}

/// The workers' sums, plus the frames the fast path forwarded in the kernel, if there is one.
pub fn totals(workers: &[WorkerSnapshot], fast_path: Option<&FastPath>) -> Totals {
    let mut totals = Totals::default();
    for worker in workers {
        totals.rx += worker.counters.rx_packets;
        totals.tx += worker.counters.tx_packets;
        totals.dropped += worker.counters.dropped();
    }
    for port in fast_path.map(FastPath::counters).unwrap_or_default() {
        totals.rx += port.rx_forwarded.packets + port.dropped.packets;
        totals.tx += port.tx_forwarded.packets;
        totals.dropped += port.dropped.packets;
    }
    totals
}

/// What the XDP fast path counted, per port: frames it forwarded, frames it handed to user
/// space, by reason (those are in the worker's counters too, as received), and frames it
/// dropped (an OpenFlow flow without an output).
pub fn fast_path_table(fast_path: &FastPath) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "fast path (XDP, in the kernel):\n{:<12} {:>14} {:>14}",
        "port", "rx forwarded", "tx forwarded"
    );
    for reason in ToUser::ALL {
        let _ = write!(out, " {:>14}", format!("to user: {}", reason.name()));
    }
    let _ = writeln!(out, " {:>14}", "dropped");
    for (name, port) in fast_path.port_names().iter().zip(fast_path.counters()) {
        let _ = write!(
            out,
            "{name:<12} {:>14} {:>14}",
            port.rx_forwarded.packets, port.tx_forwarded.packets
        );
        for reason in ToUser::ALL {
            let _ = write!(out, " {:>14}", port.to_user(reason));
        }
        let _ = writeln!(out, " {:>14}", port.dropped.packets);
    }
    out
}
/// One line per interval: rates since the previous line.
pub fn interval_line(now: &Totals, before: &Totals, seconds: f64) -> String {
    let rate = |a: u64, b: u64| (a.saturating_sub(b)) as f64 / seconds / 1e6;
    format!(
        "rx {:.3} Mpps  tx {:.3} Mpps  dropped {:.3} Mpps  (total rx {} tx {} dropped {})",
        rate(now.rx, before.rx),
        rate(now.tx, before.tx),
        rate(now.dropped, before.dropped),
        now.rx,
        now.tx,
        now.dropped
    )
}

/// The final report: ports, drops per reason, app counters, cycles per packet per worker.
pub fn final_tables(workers: &[WorkerSnapshot]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<12} {:<9} {:>12} {:>12} {:>10} {:>10} {:>9}  mode",
        "port", "backend", "rx packets", "tx packets", "rx drop", "tx refused", "rx error"
    );
    for worker in workers {
        for (info, stats) in &worker.ports {
            let _ = writeln!(
                out,
                "{:<12} {:<9} {:>12} {:>12} {:>10} {:>10} {:>9}  {}",
                info.name,
                info.backend.name(),
                stats.rx_packets,
                stats.tx_packets,
                stats.rx_dropped,
                stats.tx_refused,
                stats.rx_errors,
                info.mode
            );
        }
    }
    let _ = writeln!(out, "\ndrops by reason:");
    let mut any = false;
    for reason in DropReason::ALL {
        let count: u64 = workers
            .iter()
            .map(|w| w.counters.drops[reason as usize])
            .sum();
        if count > 0 {
            any = true;
            let _ = writeln!(out, "  {:<20} {count:>12}", reason.name());
        }
    }
    if !any {
        let _ = writeln!(out, "  (none)");
    }
    for (index, worker) in workers.iter().enumerate() {
        let c = &worker.counters;
        let _ = writeln!(
            out,
            "\nworker {index}: rx {} tx {} dropped {}",
            c.rx_packets,
            c.tx_packets,
            c.dropped()
        );
        for (name, value) in &worker.app {
            let _ = writeln!(out, "  {name:<20} {value:>12}");
        }
        let per_packet = |cycles: u64| cycles.checked_div(c.rx_packets).unwrap_or(0);
        let busy = c.cycles.rx + c.cycles.process + c.cycles.tx;
        let all = busy + c.cycles.idle;
        let idle_share = if all == 0 {
            0.0
        } else {
            100.0 * c.cycles.idle as f64 / all as f64
        };
        let _ = writeln!(
            out,
            "  cycles/packet: rx {} process {} tx {} (c_IO {} c_task {})  idle {:.1} % of cycles ({} empty polls, {} sleeps)",
            per_packet(c.cycles.rx),
            per_packet(c.cycles.process),
            per_packet(c.cycles.tx),
            per_packet(c.cycles.rx + c.cycles.tx),
            per_packet(c.cycles.process),
            idle_share,
            c.empty_polls,
            c.sleeps
        );
    }
    out
}
