//! `wirespeed pcap --in A --out B`: forward a capture offline through an app.
//!
//! The input capture is port 0, the output capture port 1, and the cross-connect joins them, so
//! every frame that survives the pipeline is written to the output with its original timestamp.
//! Useful on its own: test a pipeline on real captures, count what it would drop and why.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, Result};
use clap::Args;
use wirespeed_dataplane::app::Xconnect;
use wirespeed_dataplane::worker::{StatsCell, Worker, WorkerConfig, WorkerPort};
use wirespeed_io::pcap::PcapPort;
use wirespeed_packet::FramePool;
use wirespeed_packet::pool::MAX_FRAME_SIZE;

use super::{stats, switch};

#[derive(Args)]
pub struct PcapArgs {
    /// Capture to read (pcap or pcapng, Ethernet).
    #[arg(long = "in")]
    input: PathBuf,
    /// Capture to write (pcap, nanosecond timestamps).
    #[arg(long = "out")]
    output: PathBuf,
    /// The app to run; the input is its port 0, the output its port 1.
    #[arg(long, default_value = "xconnect", value_parser = ["xconnect"])]
    app: String,
    /// Packets per batch.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..=256))]
    batch: u16,
}

/// What an offline run did.
pub struct Outcome {
    pub report: String,
    pub forwarded: u64,
    pub dropped: u64,
    /// Why a port stopped before the end (a write that failed, a corrupt input).
    pub faults: Vec<String>,
}

pub fn run(args: PcapArgs) -> Result<()> {
    let outcome = forward(&args.input, &args.output, args.batch as usize)?;
    println!("{}", outcome.report);
    anyhow::ensure!(
        outcome.faults.is_empty(),
        "{} is incomplete: {}",
        args.output.display(),
        outcome.faults.join("; ")
    );
    Ok(())
}

/// Forwards `input` to `output` through the cross-connect.
pub fn forward(input: &std::path::Path, output: &std::path::Path, batch: usize) -> Result<Outcome> {
    anyhow::ensure!(
        !wirespeed_control::config::same_file(input, output),
        "--in and --out are the same file ({}): writing the output would destroy the input; \
         choose another --out",
        output.display()
    );
    let rx = PcapPort::open("in", Some(input), None).context("opening the input capture")?;
    let tx = PcapPort::open("out", None, Some(output)).context("creating the output capture")?;
    let ports = vec![
        WorkerPort {
            port: Box::new(rx),
            rx_queues: vec![0],
            tx_queue: 0,
        },
        WorkerPort {
            port: Box::new(tx),
            rx_queues: vec![],
            tx_queue: 0,
        },
    ];
    // Frames of the largest size, so that jumbo frames in a capture are forwarded like any
    // other; 1024 of them cover the batches in flight between two files.
    let pool = FramePool::new(1024, MAX_FRAME_SIZE)?;
    let config = WorkerConfig {
        batch_size: batch,
        ..WorkerConfig::default()
    };
    let mut worker = Worker::new(
        config,
        pool,
        ports,
        Box::new(Xconnect::new(&[(0, 1)], None)),
    );
    // Ctrl-C ends the run early; what was forwarded so far is written and reported.
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .context("installing the signal handler")?;
    }
    worker.run_to_end(&stop);
    let conservation = worker.shutdown();
    let cell = StatsCell::default();
    worker.publish(&cell, true);
    let snapshot = cell.into_inner().unwrap_or_default();
    let counters = snapshot.counters.clone();
    let mut report = stats::final_tables(&[snapshot]);
    report.push('\n');
    report.push_str(&switch::conservation_report(&[conservation])?);
    let mut faults = Vec::new();
    for port in worker.ports() {
        if let Some(fault) = port.fault() {
            let fault = format!("port {} stopped early: {fault}", port.info().name);
            report.push_str(&format!("\n{fault}\n"));
            faults.push(fault);
        }
    }
    Ok(Outcome {
        report,
        forwarded: counters.tx_packets,
        dropped: counters.dropped(),
        faults,
    })
}
