//! `wirespeed bench fib` (seed 002 Figure 4): a router DuT's throughput against its
//! routing-table size.
//!
//! ```sh
//! wirespeed bench fib --duts wirespeed-router-afxdp,linux-router --routes 1,10,100,1k,10k,100k,1M --out fib
//! wirespeed bench fib --ip 6 --routes 1,1k,100k --out fib6
//! ```
//!
//! The routes follow the testkit's BGP-like prefix-length mix of the IP version `--ip` asks for,
//! all via the tester's `t1` ([`RouteTable`] adds the lab's own destinations and leaves the lab's
//! range out), and the frames (of that version) go to destinations spread over every installed
//! route, so the lookups are as spread as the table. One table per size is drawn from one seed,
//! so every DuT gets the same routes.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Result, bail, ensure};
use clap::Args;
use serde_json::json;
use wirespeed_tester::bench::sweep::point;
use wirespeed_tester::dut::routes::{LinuxRouterFib, RouteTable};
use wirespeed_tester::dut::{
    Dut, LinuxRouter, SwitchCounters, WirespeedApp, WirespeedBackend, WirespeedDut,
    WirespeedOptions,
};
use wirespeed_tester::report::svg::Plot;

use crate::cli::bench::{bgp_like_table, spread_destinations};

use super::{
    Session, SweepCommon, finish, first_error, header, medians, parse_count, point_json, progress,
    series_by_dut, settle,
};

#[derive(Args)]
pub struct FibArgs {
    /// Router DuTs: wirespeed-router-afxdp, wirespeed-router-xdp (behind the XDP fast path),
    /// wirespeed-router-afpacket, linux-router.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "wirespeed-router-afxdp,linux-router"
    )]
    duts: Vec<String>,
    /// Where the DuTs are: the lab, or a host over ssh (an external DuT's table is not the
    /// tester's to size).
    #[command(flatten)]
    site: Box<crate::cli::site::SiteArgs>,
    /// Routing-table sizes (k = 1000, M = 1000000; default 1,10,100,1k,10k,100k,1M). With
    /// --against: one IPv4 table size (default 1M) or a file of `PREFIX NEXTHOP` lines.
    #[arg(long, value_delimiter = ',')]
    routes: Option<Vec<String>>,
    /// Instead of the lab sweep, compare wirespeed's FIB lookups with DPDK's in this process:
    /// rte_lpm (IPv4), rte_lpm6 (IPv6), or both (needs root for DPDK's EAL).
    #[arg(long, value_delimiter = ',')]
    against: Vec<super::fib_reference::Reference>,
    #[command(flatten)]
    reference: super::fib_reference::ReferenceArgs,
    /// IP version of the routes and the frames: 4 or 6 (with 6 the frames are 84 bytes, the
    /// smallest IPv6 frame that holds the tester's probe, instead of 64).
    #[arg(long, default_value = "4")]
    ip: crate::cli::bench::IpArg,
    /// Seed of the route and destination generators.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Name prefix of the lab (at most 6 characters).
    #[arg(long, default_value = "wsfib")]
    prefix: String,
    #[command(flatten)]
    common: SweepCommon,
}

fn no_counters(_: &(dyn Dut + 'static)) -> Option<Result<SwitchCounters, String>> {
    None
}

/// `wirespeed bench fib`.
pub fn run(mut args: FibArgs) -> Result<()> {
    if !args.against.is_empty() {
        return super::fib_reference::run(
            &args.against,
            args.routes.as_deref(),
            &args.reference,
            args.seed,
        );
    }
    args.duts = crate::cli::bench::dut_names(&args.duts);
    let sizes = args.routes.unwrap_or_else(|| {
        ["1", "10", "100", "1k", "10k", "100k", "1M"]
            .map(String::from)
            .to_vec()
    });
    let mut counts = sizes
        .iter()
        .map(|r| parse_count(r).map(|c| c as usize))
        .collect::<Result<Vec<_>>>()?;
    ensure!(!counts.is_empty(), "give at least one routing-table size");
    ensure!(
        counts.iter().all(|&c| (1..=4_000_000).contains(&c)),
        "routing-table sizes must be 1 to 4M"
    );
    counts.dedup();
    let site = args.site.site(&args.duts)?;
    ensure!(
        !site.is_external(),
        "bench fib fills each DuT's routing table with 1 to 4M routes, and the tester configures \
         nothing on an external DuT: measure it at its own table with bench rfc2544 --dut external"
    );
    for name in &args.duts {
        site.place(fib_dut(name, Path::new("."), 0, None)?)?;
    }
    let largest = counts.iter().copied().max().unwrap_or(1);
    eprintln!(
        "generating {largest} IPv{} routes (seed {})",
        args.ip.number(),
        args.seed
    );
    // Every size's table is the first routes of the largest one.
    let largest_table = bgp_like_table(largest, args.seed, args.ip);
    let mut session = Session::open(&args.prefix, &args.common)?;
    session.wiring = site.remote(session.wiring.clone());
    session.config.ip = args.ip.into();
    session.config.frame_size = args.ip.smallest_frame();
    let total = counts.len() * args.common.runs * args.duts.len();
    // Every table and its destinations first (the same for every DuT and run), then the
    // points in interleaved order: run by run, each size, each DuT, so that a drift of a shared
    // machine spreads over the sizes instead of bending the curve.
    let mut prepared = Vec::with_capacity(counts.len());
    for &count in &counts {
        let table = Arc::new(largest_table.first(count));
        let destinations = spread_destinations(
            &table,
            table.len().clamp(1024, 1 << 20),
            args.seed ^ count as u64,
        );
        prepared.push((count, table, destinations));
    }
    let tables: Vec<_> = prepared
        .iter()
        .map(|(count, table, destinations)| {
            json!({"asked": count, "routes": table.len(), "destinations": destinations.len()})
        })
        .collect();
    let mut records = Vec::new();
    'sweep: for _ in 0..args.common.runs {
        for (_, table, destinations) in &prepared {
            for name in &args.duts {
                if session.stopped() {
                    break 'sweep;
                }
                let mut dut = site.place(fib_dut(
                    name,
                    &session.binary,
                    session.config.plan.dut_cpu,
                    Some(Arc::clone(table)),
                )?)?;
                let template = session.template(dut.as_ref())?.with_spread(destinations)?;
                let mut record = point(
                    dut.as_mut(),
                    table.len() as f64,
                    &session.wiring,
                    &session.config,
                    &template,
                    None,
                    &session.stop,
                    &mut no_counters,
                );
                settle(&mut record, &session);
                progress(
                    records.len() + 1,
                    total,
                    &record,
                    &format!("{} routes", table.len()),
                );
                records.push(record);
            }
        }
    }
    let lab_commands = session.close()?;
    let medians = medians(&records);
    let mut table =
        String::from("| DuT | routes | median Mpps | runs |\n| --- | ---: | ---: | ---: |\n");
    for (dut, routes, pps, ok) in &medians {
        let rate = match first_error(&records, dut, *routes) {
            Some(error) if *ok == 0 => format!("failed: {}", error.replace('\n', " ")),
            _ => format!("{:.3}", pps / 1e6),
        };
        table.push_str(&format!("| {dut} | {routes} | {rate} | {ok} |\n"));
    }
    println!("{table}");
    let mut result = header("wirespeed.bench.fib/1", &session, &lab_commands);
    result["seed"] = json!(args.seed);
    result["ip"] = json!(args.ip.number());
    result["frame_size"] = json!(session.config.frame_size);
    result["tables"] = json!(tables);
    result["summary"] = json!(medians
        .iter()
        .map(|(dut, routes, pps, ok)| json!({"dut": dut, "routes": routes, "median_pps": pps, "runs": ok}))
        .collect::<Vec<_>>());
    result["points"] = json!(records.iter().map(point_json).collect::<Vec<_>>());
    let json_path = session.write_json("fib.json", &result)?;
    let plot = Plot {
        title: format!(
            "Throughput vs IPv{} routing-table size ({} B, destinations over all routes)",
            args.ip.number(),
            session.config.frame_size
        ),
        x_label: "routes, log10 (0 = 1, 6 = 1M)".into(),
        y_label: "Mpps".into(),
        series: series_by_dut(&medians, f64::log10, 1e6),
        log_y: false,
        y_from_zero: true,
    };
    let svg_path = session.write_svg("fib.svg", &plot)?;
    println!("wrote {} and {}", json_path.display(), svg_path.display());
    finish(&session)
}

/// The router DuT called `name` with `routes` (checked only when `routes` is `None`).
fn fib_dut(
    name: &str,
    binary: &Path,
    core: usize,
    routes: Option<Arc<RouteTable>>,
) -> Result<Box<dyn Dut>> {
    let wirespeed = |backend| -> Box<dyn Dut> {
        Box::new(
            WirespeedDut::new(backend, binary.into(), core).with_options(WirespeedOptions {
                app: routes
                    .clone()
                    .map_or(WirespeedApp::Xconnect, WirespeedApp::Router),
                ..WirespeedOptions::default()
            }),
        )
    };
    Ok(match name {
        "wirespeed-router-afxdp" => wirespeed(WirespeedBackend::AfXdp),
        "wirespeed-router-xdp" => wirespeed(WirespeedBackend::Xdp),
        "wirespeed-router-afpacket" => wirespeed(WirespeedBackend::AfPacket),
        "linux-router" => match &routes {
            Some(routes) => Box::new(LinuxRouterFib::new(Arc::clone(routes))),
            None => Box::new(LinuxRouter::new()),
        },
        other => bail!(
            "unknown router DuT {other:?}; choose from wirespeed-router-afxdp, \
             wirespeed-router-xdp, wirespeed-router-afpacket, linux-router"
        ),
    })
}
