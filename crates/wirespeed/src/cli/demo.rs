//! `wirespeed demo`: the short tour, run by `make demo`, in well under two minutes.
//!
//! 1. A capture check (under a second): traffic from the tester's templates (IPv4 and IPv6,
//!    several frame sizes and flows, plus a few malformed frames) goes through the
//!    cross-connect from one capture file into another; every good frame must come out byte for
//!    byte, every malformed one be dropped with its reason, and, where Debian's tshark is
//!    installed, Wireshark's reader must agree with the frame count.
//! 2. The real thing, short: the namespace lab is built with its calibration pair, the tester
//!    measures itself (its limit and latency floor per frame size), wirespeed starts as the DuT
//!    (an xconnect over AF_XDP, worker on core 1), and for 64, 512 and 1518-byte frames a
//!    binary search with 1-second trials finds the NDR, then latency is measured at 10, 50 and
//!    90 % of it and at the NDR. The summary table is printed, the report (JSON, CSV, HTML) goes
//!    to `--out`, and the lab is taken down, also on Ctrl-C.
//! 3. The XDP fast path beside the user-space path: `bench forwarding` with the in-kernel
//!    generator, one 2-second trial each for the cross-connect on the fast path, on the
//!    user-space AF_XDP path, and the kernel's XDP redirect.

use std::net::{IpAddr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, Result};
use clap::Args;
use wirespeed_io::Port;
use wirespeed_io::pcap::PcapPort;
use wirespeed_packet::{Batch, FramePool};
use wirespeed_tester::bench::placement::Plan;
use wirespeed_tester::generator::{Template, TemplateConfig};
use wirespeed_tester::suite::{Resolution, SuiteConfig};
use wirespeed_tester::trial::{ReceiverKind, SenderKind};

use super::numbers;
use super::pcap::forward;
use super::rfc2544::{Options, execute, summary_table, write};

#[derive(Args)]
pub struct DemoArgs {
    /// Directory for the report and the captures the demo writes.
    #[arg(long, default_value = "reports/demo")]
    out: PathBuf,
    /// Good frames to generate for the capture check (1..=1000000: the demo keeps them all
    /// in memory to compare with what comes out).
    #[arg(long, default_value_t = 10_000, value_parser = numbers::whole(1u32, 1_000_000))]
    frames: u32,
    /// Seconds per trial of the RFC 2544 part (0.001..=86400).
    #[arg(long, default_value_t = 1.0, value_parser = numbers::seconds())]
    trial_seconds: f64,
    /// Name prefix of the demo's lab.
    #[arg(long, default_value = "wsdemo")]
    prefix: String,
}

/// Malformed frames the demo adds, and the drop reason each must get.
fn malformed() -> Vec<(Vec<u8>, &'static str)> {
    let good = Template::new(&TemplateConfig::default())
        .map(|t| t.bytes().to_vec())
        .unwrap_or_default();
    let mut truncated = good.clone();
    truncated.truncate(20);
    let mut bad_ihl = good.clone();
    bad_ihl[14] = 0x43; // IPv4, header length 3 words: less than the minimum of 5
    let mut too_long = good.clone();
    too_long[16..18].copy_from_slice(&1500u16.to_be_bytes()); // total length beyond the frame
    let mut deep_vlan = good[..12].to_vec();
    for _ in 0..=wirespeed_packet::MAX_VLAN_TAGS {
        deep_vlan.extend_from_slice(&[0x81, 0x00, 0x00, 0x0a]);
    }
    deep_vlan.extend_from_slice(&good[12..]);
    vec![
        (truncated, "truncated"),
        (bad_ihl, "bad_ipv4_header"),
        (too_long, "bad_ipv4_length"),
        (deep_vlan, "vlan_too_deep"),
    ]
}

/// The good frames: IPv4 and IPv6, four sizes, 16 flows each.
fn templates() -> Result<Vec<Template>> {
    let mut templates = Vec::new();
    for size in [64u16, 128, 512, 1518] {
        templates.push(Template::new(&TemplateConfig {
            frame_size: size,
            flows: 16,
            ..TemplateConfig::default()
        })?);
        templates.push(Template::new(&TemplateConfig {
            frame_size: size.max(66),
            flows: 16,
            src_ip: IpAddr::V6(Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1)),
            dst_ip: IpAddr::V6(Ipv6Addr::new(0x2001, 2, 0, 1, 0, 0, 0, 1)),
            ..TemplateConfig::default()
        })?);
    }
    Ok(templates)
}

/// Writes `frames` good frames and the malformed ones to `path` through a pcap port; returns
/// the good frames' bytes in order.
fn generate(path: &Path, frames: u32) -> Result<Vec<Vec<u8>>> {
    let templates = templates()?;
    let mut port = PcapPort::open("gen", None, Some(path)).context("creating the input capture")?;
    let mut pool = FramePool::new(1024, 2048)?;
    let mut batch = Batch::new(32);
    let mut good = Vec::new();
    let bad = malformed();
    let push = |pool: &mut FramePool,
                batch: &mut Batch,
                port: &mut PcapPort,
                bytes: &[u8]|
     -> Result<()> {
        let desc = pool.alloc_copy(bytes, 0).context("demo pool exhausted")?;
        batch.push(desc);
        if batch.is_full() {
            port.tx(0, pool, batch);
            anyhow::ensure!(batch.is_empty(), "the capture port refused frames");
        }
        Ok(())
    };
    let mut scratch = vec![0u8; 2048];
    for i in 0..frames {
        let template = &templates[i as usize % templates.len()];
        let len = template.write(&mut scratch, i / templates.len() as u32);
        good.push(scratch[..len].to_vec());
        push(&mut pool, &mut batch, &mut port, &scratch[..len])?;
        if i % (frames / 4).max(1) == 0 {
            let (bytes, _) = &bad[(i / (frames / 4).max(1)) as usize % bad.len()];
            push(&mut pool, &mut batch, &mut port, bytes)?;
        }
    }
    port.tx(0, &mut pool, &mut batch);
    port.release_all(&mut pool);
    Ok(good)
}

pub fn run(args: DemoArgs) -> Result<()> {
    let started = std::time::Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .context("installing the signal handler")?;
    }
    capture_check(&args)?;
    println!(
        "\n== 4. RFC 2544 in the lab: calibrate the tester, then wirespeed (xconnect over AF_XDP) as the DuT"
    );
    let options = Options {
        dut: "wirespeed-xconnect-afxdp".into(),
        site: Default::default(),
        prefix: args.prefix.clone(),
        suite: SuiteConfig {
            frame_sizes: vec![64, 512, 1518],
            trial_seconds: args.trial_seconds,
            calibration_seconds: 0.5,
            resolution: Resolution::Relative(0.05),
            latency_loads: vec![10.0, 50.0, 90.0],
            // The tester's receive on its own core, as `bench rfc2544` places it (why: its
            // `--receiver-cpu`).
            plan: Plan {
                receiver_cpu: 0,
                ..Plan::default()
            },
            // The throughput search sends, and the latency trials are timed, as `bench
            // rfc2544` does by default.
            sender: SenderKind::XdpLive,
            latency_receiver: ReceiverKind::Stamped,
            ..SuiteConfig::default()
        },
    };
    let config_text = format!("wirespeed demo\n{:#?}", options.suite);
    let report = execute(&options, &config_text, &stop)?;
    println!("\n{}", summary_table(&report));
    for path in write(&report, &args.out)? {
        println!("wrote {}", path.display());
    }
    if !stop.load(std::sync::atomic::Ordering::Relaxed) {
        println!(
            "\n== 5. the XDP fast path beside the user-space path: the cross-connect with \
             fast_path = \"xdp\" (the kernel forwards) and \"off\" (every frame through the \
             AF_XDP socket), and the kernel's own XDP redirect, offered several Mpps by the \
             in-kernel generator"
        );
        super::bench::forwarding_with(&[
            "--duts",
            "wirespeed-xconnect-xdp,wirespeed-xconnect-afxdp,xdp-redirect",
            "--flows",
            "1",
            "--runs",
            "1",
            "--trial-seconds",
            "2",
            "--generator",
            "xdp-live",
            "--prefix",
            &args.prefix,
        ])?;
    }
    println!(
        "\ndemo finished in {:.0} s; open {} in a browser",
        started.elapsed().as_secs_f64(),
        args.out.join("report.html").display()
    );
    Ok(())
}

/// Step 1 to 3: generate a capture, forward it offline, check every frame.
fn capture_check(args: &DemoArgs) -> Result<()> {
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let input = args.out.join("generated.pcap");
    let output = args.out.join("forwarded.pcap");
    println!(
        "== 1. generating {} frames (IPv4+IPv6, 64..1518 B, 16 flows each) plus malformed ones",
        args.frames
    );
    let good = generate(&input, args.frames)?;
    println!("   wrote {}", input.display());
    println!(
        "\n== 2. forwarding {} through the cross-connect into {}",
        input.display(),
        output.display()
    );
    let outcome = forward(&input, &output, 32)?;
    println!("{}", outcome.report);
    anyhow::ensure!(
        outcome.faults.is_empty(),
        "{} is incomplete: {}",
        output.display(),
        outcome.faults.join("; ")
    );

    println!("== 3. checking the result");
    let mut reader = PcapPort::open("check", Some(&output), None)?;
    let mut pool = FramePool::new(1024, 2048)?;
    let mut batch = Batch::new(256);
    let mut index = 0usize;
    let mut mismatches = 0usize;
    while reader.rx(0, &mut pool, &mut batch) > 0 {
        for desc in batch.descs() {
            let start = desc.offset as usize;
            let bytes = &pool.frame(desc.frame)[start..start + desc.len as usize];
            if good.get(index).map(Vec::as_slice) != Some(bytes) {
                mismatches += 1;
            }
            index += 1;
            pool.release(desc.frame);
        }
        batch.clear();
    }
    let expected_drops = malformed().len() as u64;
    println!(
        "   {index} frames out ({} counted by the worker), {} expected; {mismatches} differ from what was generated",
        outcome.forwarded,
        good.len()
    );
    println!(
        "   {} dropped, {} malformed frames were generated",
        outcome.dropped, expected_drops
    );
    anyhow::ensure!(
        index == good.len() && mismatches == 0,
        "the forwarded capture differs from the input"
    );
    anyhow::ensure!(
        outcome.dropped == expected_drops,
        "every malformed frame must be dropped, and only those"
    );
    match std::process::Command::new("tshark")
        .args(["-r"])
        .arg(&output)
        .args(["-T", "fields", "-e", "frame.len"])
        .output()
    {
        Ok(out) if out.status.success() => {
            let count = String::from_utf8_lossy(&out.stdout).lines().count();
            println!("   tshark reads {count} frames from {}", output.display());
            anyhow::ensure!(count == good.len(), "tshark disagrees with the frame count");
        }
        _ => println!("   (tshark not installed: `make setup` installs it)"),
    }
    println!(
        "   capture check passed: every good frame forwarded byte for byte, every malformed frame dropped with its reason"
    );
    Ok(())
}
