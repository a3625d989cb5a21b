//! `wirespeed gen`: blast a template out of an interface and count what comes back on another;
//! or, with `--rate-percent`, measure the generator's maximum first and then offer paced trials
//! (CBR or Poisson, every departure recorded) at shares of it, printing how close the achieved
//! rate came to the asked one and the spread of the gaps between departures.
//!
//! ```sh
//! ip netns exec ws-tester wirespeed gen --backend afxdp --tx ws-t0 --rx ws-t1 --size 64 --flows 256
//! ip netns exec ws-tester wirespeed gen --tx ws-t0 --size 66 --ipv6 --flows 65536 --random-flows
//! ip netns exec ws-tester wirespeed gen --tx ws-t0 --rx ws-t1 --rate-percent 10,50,90 --pattern cbr
//! ip netns exec ws-tester wirespeed gen --backend xdp-live --tx ws-c0 --rx ws-c1 --flows 256
//! ```
//!
//! `--backend xdp-live` sends from inside the kernel (`BPF_PROG_TEST_RUN` with live frames, see
//! `wirespeed_tester::generator::live`) and counts arrivals on `--rx` with the XDP counting sink.
//!
//! Every backend counts as sent only what the TX interface's own counters say it transmitted
//! ([`BlastResult::settle`]): a socket's ring takes frames the kernel then drops (longer than
//! the MTU, no peer), and the live-frame call does not say what became of its frames. What the
//! port or the call took beyond that is printed as dropped by the kernel.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use std::net::IpAddr;

use anyhow::{Context, Result, ensure};
use clap::Args;
use wirespeed_io::Port;
use wirespeed_io::afxdp::{Umem, XdpMode, XdpSink};
use wirespeed_packet::FramePool;
use wirespeed_packet::pool::frame_size_for_mtu;
use wirespeed_packet::wire::EthernetAddress;
use wirespeed_tester::generator::live::{self, LiveConfig};
use wirespeed_tester::generator::{
    BlastConfig, BlastResult, Template, TemplateConfig, TxCounters, blast, prefill,
};
use wirespeed_tester::trial::{self, FlowOrder, TrialConfig, TrialMeasurement};

use super::build::{KernelBackend, open_interface};
use super::numbers;

#[derive(Args)]
pub struct GenArgs {
    /// How to send and receive: afxdp, afpacket, or xdp-live (in-kernel sender, XDP sink).
    #[arg(long, default_value = "afxdp")]
    backend: GenBackend,
    /// Interface to send on.
    #[arg(long)]
    tx: String,
    /// Interface to count arrivals on.
    #[arg(long)]
    rx: Option<String>,
    /// Count arrivals on `--rx` with the XDP counting sink (count and drop in the kernel)
    /// instead of a port of the backend: the same, cheapest receiver for every backend
    /// (xdp-live always counts so).
    #[arg(long)]
    rx_sink: bool,
    /// Frame size including FCS (64..=9018; above 1518 the interface's MTU must hold it).
    #[arg(long, default_value_t = 64, value_parser = numbers::frame_size())]
    size: u16,
    /// Number of UDP flows (source ports), 1..=65536.
    #[arg(long, default_value_t = 1, value_parser = numbers::flows())]
    flows: u32,
    /// Offered rate in Mpps (0.000001..=1000); as fast as possible when absent.
    #[arg(long, value_parser = numbers::real(1e-6, 1000.0))]
    rate_mpps: Option<f64>,
    /// Seconds to send (0.001..=86400).
    #[arg(long, default_value_t = 5.0, value_parser = numbers::seconds())]
    duration: f64,
    /// Packets per batch, 1..=256 (xdp-live: per kernel flush).
    #[arg(long, default_value_t = 64, value_parser = numbers::batch())]
    batch: usize,
    /// Pin the generator to this core (one this process may use).
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
    /// Paced trials at these percentages (0.001..=100) of the generator's maximum, measured
    /// first by a blast of `--duration` seconds; needs `--rx`.
    #[arg(long, value_delimiter = ',', value_parser = numbers::real(0.001, 100.0))]
    rate_percent: Vec<f64>,
    /// Departures of the paced trials: `cbr`, `poisson` or `burst:SIZE[@MPPS]` (as in `bench
    /// rfc2544 --pattern`).
    #[arg(long, default_value = "cbr")]
    pattern: String,
    /// Seconds per paced trial (0.001..=86400).
    #[arg(long, default_value_t = 2.0, value_parser = numbers::seconds())]
    trial_seconds: f64,
}

/// The generator's backends: a port of the data plane's, or the in-kernel live-frame sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum GenBackend {
    Afxdp,
    Afpacket,
    XdpLive,
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
    let pattern = super::rfc2544::parse_pattern(&args.pattern, 1)?;
    if !args.rate_percent.is_empty() {
        ensure!(
            args.rx.is_some(),
            "paced trials (--rate-percent) count arrivals: give --rx"
        );
    }
    let template = Template::new(&TemplateConfig {
        frame_size: args.size,
        flows: args.flows,
        dst_mac: parse_mac(&args.dst_mac)?,
        src_ip,
        dst_ip,
        ..TemplateConfig::default()
    })?;
    let live = args.backend == GenBackend::XdpLive;
    if live || args.rx_sink {
        ensure!(
            args.rate_percent.is_empty(),
            "paced trials (--rate-percent) need the user-space generator's probes and receiver; \
             use --backend afxdp or afpacket without --rx-sink"
        );
    }
    let backend = match args.backend {
        GenBackend::Afxdp => KernelBackend::Afxdp,
        GenBackend::Afpacket => KernelBackend::Afpacket,
        GenBackend::XdpLive => return generate_live(args, &template),
    };
    // Frames as large as the interface's MTU allows, and a frame size that fits it: a frame
    // larger than the MTU never leaves (the kernel drops it).
    let mtu = wirespeed_io::afxdp::interface_mtu(&args.tx)?;
    ensure!(
        numbers::mtu_for_frame(args.size) <= mtu,
        "--size {} needs an MTU of {} on {}, which has {mtu}; raise it (`ip link set dev {} mtu \
         {}`) or send smaller frames",
        args.size,
        numbers::mtu_for_frame(args.size),
        args.tx,
        args.tx,
        numbers::mtu_for_frame(args.size)
    );
    let frame_size = frame_size_for_mtu(mtu).with_context(|| {
        format!(
            "{} has MTU {mtu}, more than the largest frames hold",
            args.tx
        )
    })?;
    let mut pool = FramePool::new(16384, frame_size)?;
    prefill(&mut pool, &template);
    let umem = Umem::new(&pool);
    let mut tx = open_interface(backend, "tx", &args.tx, &mut pool, &umem)?;
    let sink = Sink::attach(args)?;
    let mut rx = match &args.rx {
        Some(name) if sink.is_none() => {
            Some(open_interface(backend, "rx", name, &mut pool, &umem)?)
        }
        _ => None,
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
    let before = tx_counters(&args.tx)?;
    let mut result = blast(
        tx.port.as_mut(),
        rx_port,
        &mut pool,
        &template,
        &config,
        &stop,
    );
    let kernel = tx_counters(&args.tx)?.since(&before);
    result.settle(&kernel);
    if let Some(sink) = &sink {
        result.received = sink.received()?;
    }
    let mut out = format!(
        "{}; the TX ring refused {}",
        sent_line(args, &result, &kernel),
        result.refused
    );
    if args.rx.is_some() {
        out.push_str(&received_line(&result, sink.as_ref()));
    }
    // Paced trials take shares of the maximum, so only they need one.
    if !args.rate_percent.is_empty()
        && let Some(rx) = &mut rx
    {
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

/// `--backend xdp-live`: the kernel sends, the XDP sink on `--rx` counts.
fn generate_live(args: &GenArgs, template: &Template) -> Result<String> {
    let config = LiveConfig {
        batch: args.batch as u32,
        rate_pps: args.rate_mpps.map(|m| m * 1e6),
        duration: Duration::from_secs_f64(args.duration),
        random_flows: args.random_flows,
        ..LiveConfig::default()
    };
    let generator = live::open(&args.tx, template, &config)?;
    let sink = Sink::attach(args)?;
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))?;
    }
    let before = tx_counters(&args.tx)?;
    let mut result = live::send(&generator, &config, &stop)?;
    if let Some(sink) = &sink {
        result.received = sink.received()?;
    }
    let kernel = tx_counters(&args.tx)?.since(&before);
    result.settle(&kernel);
    let mut out = sent_line(args, &result, &kernel);
    if args.rx.is_some() {
        out.push_str(&received_line(&result, sink.as_ref()));
    }
    Ok(out)
}

/// `--tx`'s transmit counters, as the kernel keeps them.
fn tx_counters(interface: &str) -> Result<TxCounters> {
    TxCounters::read(interface).map_err(|e| anyhow::anyhow!("--tx {interface}: {e}"))
}

/// "sent N frames of S B in T s: R Mpps (IF says X transmitted, Y dropped); the kernel
/// dropped D more": the count is what the interface transmitted ([`BlastResult::settle`]).
fn sent_line(args: &GenArgs, result: &BlastResult, kernel: &TxCounters) -> String {
    format!(
        "sent {} frames of {} B in {:.3} s: {:.3} Mpps ({} says {kernel}); the kernel dropped \
         {} more",
        result.sent,
        args.size,
        result.seconds,
        result.tx_pps() / 1e6,
        args.tx,
        result.dropped_by_kernel,
    )
}

/// The XDP counting sink on `--rx`, when the backend or `--rx-sink` asks for it, and its count
/// when it was attached.
struct Sink {
    sink: XdpSink,
    before: u64,
}

impl Sink {
    fn attach(args: &GenArgs) -> Result<Option<Sink>> {
        let wanted = args.rx_sink || args.backend == GenBackend::XdpLive;
        let Some(rx) = args.rx.as_deref().filter(|_| wanted) else {
            return Ok(None);
        };
        let sink = XdpSink::attach(rx, XdpMode::Auto)?;
        let before = sink.counts()?.packets;
        Ok(Some(Sink { sink, before }))
    }

    /// Frames counted since it was attached, after a pause for the ones still on their way (a
    /// NAPI poll on another core).
    fn received(&self) -> Result<u64> {
        std::thread::sleep(Duration::from_millis(100));
        Ok(self.sink.counts()?.packets - self.before)
    }
}

/// "received N (where): R Mpps, loss L %".
fn received_line(result: &BlastResult, sink: Option<&Sink>) -> String {
    let by = sink.map_or(String::new(), |sink| {
        format!(" (XDP sink on {})", sink.sink.interface())
    });
    format!(
        "\nreceived {}{by}: {:.3} Mpps, loss {:.3} %",
        result.received,
        result.rx_pps() / 1e6,
        // The lab kernels' own frames are counted too and can exceed a zero loss by a few.
        100.0 * result.loss().max(0.0)
    )
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
