//! `wirespeed gen`: blast a template out of an interface and count what comes back on another;
//! or, with `--rate-percent`, measure the generator's maximum first and then offer paced trials
//! (CBR or Poisson, every departure recorded) at shares of it, printing how close the achieved
//! rate came to the asked one and the spread of the gaps between departures.
//!
//! ```sh
//! ip netns exec ws-tester wirespeed gen --backend afxdp --tx ws-t0 --rx ws-t1 --size 64 --flows 256
//! ip netns exec ws-tester wirespeed gen --tx ws-t0 --size 66 --ipv6 --flows 65536 --random-flows
//! ip netns exec ws-tester wirespeed gen --tx ws-t0 --rx ws-t1 --rate-percent 10,50,90 --pattern cbr
//! ```

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use std::net::IpAddr;

use anyhow::{Context, Result, bail, ensure};
use clap::Args;
use wirespeed_io::Port;
use wirespeed_io::afxdp::Umem;
use wirespeed_packet::FramePool;
use wirespeed_packet::wire::EthernetAddress;
use wirespeed_tester::generator::pacing::Pattern;
use wirespeed_tester::generator::{BlastConfig, Template, TemplateConfig, blast, prefill};
use wirespeed_tester::trial::{self, FlowOrder, TrialConfig, TrialMeasurement};

use super::build::{KernelBackend, open_interface};

#[derive(Args)]
pub struct GenArgs {
    /// How to send and receive: afxdp or afpacket.
    #[arg(long, default_value = "afxdp")]
    backend: KernelBackend,
    /// Interface to send on.
    #[arg(long)]
    tx: String,
    /// Interface to count arrivals on.
    #[arg(long)]
    rx: Option<String>,
    /// Frame size including FCS (64..1518).
    #[arg(long, default_value_t = 64)]
    size: u16,
    /// Number of UDP flows (source ports).
    #[arg(long, default_value_t = 1)]
    flows: u32,
    /// Offered rate in Mpps; as fast as possible when absent.
    #[arg(long)]
    rate_mpps: Option<f64>,
    /// Seconds to send.
    #[arg(long, default_value_t = 5.0)]
    duration: f64,
    /// Packets per batch.
    #[arg(long, default_value_t = 64)]
    batch: usize,
    /// Pin the generator to this core.
    #[arg(long)]
    core: Option<usize>,
    /// Destination MAC of the frames (default: the lab's DuT side of pair 0).
    #[arg(long, default_value = "02:57:53:00:00:fe")]
    dst_mac: String,
    /// IPv6/UDP frames (2001:2::1 -> 2001:2:0:1::1, the lab's addresses) instead of IPv4;
    /// the smallest is 66 bytes.
    #[arg(long)]
    ipv6: bool,
    /// Draw each frame's flow at random instead of in turn.
    #[arg(long)]
    random_flows: bool,
    /// Paced trials at these percentages of the generator's maximum, measured first by a
    /// blast of `--duration` seconds; needs `--rx`.
    #[arg(long, value_delimiter = ',')]
    rate_percent: Vec<f64>,
    /// Departures of the paced trials: `cbr` or `poisson`.
    #[arg(long, default_value = "cbr")]
    pattern: String,
    /// Seconds per paced trial.
    #[arg(long, default_value_t = 2.0)]
    trial_seconds: f64,
}

pub fn run(args: GenArgs) -> Result<()> {
    if let Some(core) = args.core {
        wirespeed_io::thread::pin_to_core(core)
            .with_context(|| format!("pinning to core {core}"))?;
    }
    let outcome = generate(&args)?;
    println!("{outcome}");
    Ok(())
}

/// Parses `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(text: &str) -> Result<[u8; 6]> {
    let mac: EthernetAddress = text
        .parse()
        .with_context(|| format!("--dst-mac {text:?}"))?;
    Ok(mac.0)
}

fn generate(args: &GenArgs) -> Result<String> {
    let (src_ip, dst_ip) = if args.ipv6 {
        (
            IpAddr::from([0x2001, 2, 0, 0, 0, 0, 0, 1]),
            IpAddr::from([0x2001, 2, 0, 1, 0, 0, 0, 1]),
        )
    } else {
        let defaults = TemplateConfig::default();
        (defaults.src_ip, defaults.dst_ip)
    };
    let pattern = match args.pattern.as_str() {
        "cbr" => Pattern::Cbr,
        "poisson" => Pattern::Poisson { seed: 1 },
        other => bail!("unknown pattern {other:?}; use cbr or poisson"),
    };
    if !args.rate_percent.is_empty() {
        ensure!(
            args.rx.is_some(),
            "paced trials (--rate-percent) count arrivals: give --rx"
        );
        ensure!(
            args.rate_percent.iter().all(|p| *p > 0.0 && *p <= 100.0),
            "--rate-percent takes percentages in (0, 100]"
        );
        ensure!(args.trial_seconds > 0.0, "--trial-seconds must be positive");
    }
    let template = Template::new(&TemplateConfig {
        frame_size: args.size,
        flows: args.flows,
        dst_mac: parse_mac(&args.dst_mac)?,
        src_ip,
        dst_ip,
        ..TemplateConfig::default()
    })?;
    let mut pool = FramePool::new(16384, 2048)?;
    prefill(&mut pool, &template);
    let umem = Umem::new(&pool);
    let mut tx = open_interface(args.backend, "tx", &args.tx, &mut pool, &umem)?;
    let mut rx = match &args.rx {
        Some(name) => Some(open_interface(args.backend, "rx", name, &mut pool, &umem)?),
        None => None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))?;
    }
    let config = BlastConfig {
        batch: args.batch,
        rate_pps: args.rate_mpps.map(|m| m * 1e6),
        duration: Duration::from_secs_f64(args.duration),
        random_flows: args.random_flows.then_some(1),
        ..BlastConfig::default()
    };
    let rx_port: Option<&mut dyn Port> = match &mut rx {
        Some(port) => Some(port.port.as_mut()),
        None => None,
    };
    let result = blast(
        tx.port.as_mut(),
        rx_port,
        &mut pool,
        &template,
        &config,
        &stop,
    );
    let mut out = format!(
        "sent {} frames of {} B in {:.3} s: {:.3} Mpps ({} refused by the TX ring)",
        result.sent,
        args.size,
        result.seconds,
        result.tx_pps() / 1e6,
        result.refused
    );
    if args.rx.is_some() {
        out.push_str(&format!(
            "\nreceived {}: {:.3} Mpps, loss {:.3} %",
            result.received,
            result.rx_pps() / 1e6,
            100.0 * result.loss()
        ));
    }
    if let Some(rx) = &mut rx {
        // The maximum is what arrived: what the generator sends and its own sink takes.
        let max = result.rx_pps();
        ensure!(
            max > 0.0,
            "nothing arrived on --rx; no maximum to take shares of"
        );
        let flow_order = if args.random_flows {
            FlowOrder::Random { seed: 1 }
        } else {
            FlowOrder::RoundRobin
        };
        for &percent in &args.rate_percent {
            let trial = TrialConfig {
                rate: max * percent / 100.0,
                seconds: args.trial_seconds,
                pattern,
                batch: args.batch,
                flow_order,
                ..TrialConfig::default()
            };
            let measured = trial::run(
                tx.port.as_mut(),
                rx.port.as_mut(),
                &mut pool,
                &template,
                &trial,
                &stop,
            );
            let m = measured?;
            out.push_str(&format!("\n{}", pacing_line(percent, max, &m)));
        }
    }
    // The ports give back what they hold (an AF_XDP port is not used again after this).
    tx.port.release_all(&mut pool);
    if let Some(rx) = &mut rx {
        rx.port.release_all(&mut pool);
    }
    Ok(out)
}

/// One paced trial's figures: asked and achieved rate, their error, the gaps' spread, loss and
/// latency.
fn pacing_line(percent: f64, max: f64, m: &TrialMeasurement) -> String {
    let p = &m.pacing;
    format!(
        "paced at {percent} % of {:.4} Mpps: asked {:.4} Mpps, achieved {:.4} Mpps ({:+.3} %), \
         gaps mean {:.1} ns sd {:.1} ns, lateness mean {:.1} ns max {:.1} ns, loss {:.4} %, \
         latency p50 {:.1} µs p99 {:.1} µs",
        max / 1e6,
        p.asked_rate / 1e6,
        p.achieved_rate / 1e6,
        100.0 * (p.achieved_rate - p.asked_rate) / p.asked_rate.max(1e-9),
        p.gap_mean_ns,
        p.gap_stddev_ns,
        p.lateness_mean_ns,
        p.lateness_max_ns,
        100.0 * m.outcome.loss_ratio(),
        m.latency.p50_ns as f64 / 1e3,
        m.latency.p99_ns as f64 / 1e3
    )
}
