//! `wirespeed gen`: blast a template out of an interface and count what comes back on another.
//!
//! ```sh
//! ip netns exec ws-tester wirespeed gen --backend afxdp --tx ws-t0 --rx ws-t1 --size 64 --flows 256
//! ```

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use wirespeed_io::Port;
use wirespeed_io::afxdp::Umem;
use wirespeed_packet::FramePool;
use wirespeed_packet::wire::EthernetAddress;
use wirespeed_tester::generator::{BlastConfig, Template, TemplateConfig, blast, prefill};

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
    let template = Template::new(&TemplateConfig {
        frame_size: args.size,
        flows: args.flows,
        dst_mac: parse_mac(&args.dst_mac)?,
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
    tx.port.release_all(&mut pool);
    if let Some(rx) = &mut rx {
        rx.port.release_all(&mut pool);
    }
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
    Ok(out)
}
