//! `wirespeed bench forwarding` (and `wirespeed bench rfc2544`, in [`super::rfc2544`], and
//! `wirespeed bench compare`, in [`super::compare`]): wirespeed and its peers side by side in one lab, one DuT core,
//! 64-byte frames, with the same placement of every thread for every DuT.
//!
//! ```sh
//! wirespeed bench forwarding --runs 3 --trial-seconds 5 --out reports/forwarding
//! ```
//!
//! The command builds the lab (two pairs), runs the interleaved trials of
//! [`wirespeed_tester::bench`], always takes every DuT and the lab down again (also on Ctrl-C,
//! which ends the current trial early), and prints a markdown table, the ratios of
//! every wirespeed DuT to each other DuT, the placement as read back, the machine, and every DuT's
//! commands. The wirespeed DuTs run this very executable.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use wirespeed_lab::{Testbed, TestbedConfig};
use wirespeed_tester::bench::placement::{Plan, SessionShield};
use wirespeed_tester::bench::{
    CEILING, ForwardingConfig, Generator, Limit, Summary, TrialRecord, run_forwarding, summarize,
};
use wirespeed_tester::dut::routes::{LinuxRouterFib, Prefixes, RouteTable};
use wirespeed_tester::dut::{
    Dut, FlowSource, IpVersion, LinuxBridge, LinuxRouter, LinuxRouterNft, LinuxRouterTbf,
    OvsAction, OvsDut, TestpmdDut, WirespeedApp, WirespeedBackend, WirespeedDut, WirespeedOptions,
    XdpRedirectDut,
};
use wirespeed_tester::generator::probe::SMALLEST_IPV6_FRAME;
use wirespeed_tester::generator::xdp_tools;
use wirespeed_testkit::routes;

use super::numbers;

#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    what: BenchCommand,
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Throughput of router DuTs vs routing-table size (seed 002 Figure 4).
    Fib(super::sweep::fib::FibArgs),
    /// Seed 001's cost model: throughput vs emulated work and working set, c_IO and c_busy.
    Model(super::sweep::model::ModelArgs),
    /// wirespeed's batch size vs throughput and latency percentiles.
    Batch(super::sweep::batch::BatchArgs),
    /// Forwarding rate of wirespeed and its peers, side by side, on one DuT core.
    Forwarding(ForwardingArgs),
    /// RFC 2544 throughput and latency of one DuT, calibrated, with a full report.
    Rfc2544(super::rfc2544::Rfc2544Args),
    /// The RFC 2544 throughput search on several DuTs side by side, repeats interleaved.
    Compare(super::compare::CompareArgs),
    /// Traffic generators side by side on one veth: DPDK testpmd txonly vs wirespeed's own.
    Generator(super::sweep::generator::GeneratorArgs),
}

#[derive(Args)]
struct ForwardingArgs {
    /// DuTs to measure, in this order within each run.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "wirespeed-xconnect-afxdp,wirespeed-xconnect-afpacket,linux-bridge,linux-router,xdp-redirect"
    )]
    duts: Vec<String>,
    /// Where the DuTs are: the lab, external (`--duts external`, alone, without the
    /// generator's ceiling, which needs the lab), or a host over ssh.
    #[command(flatten)]
    site: Box<super::site::SiteArgs>,
    /// Flow counts (UDP source ports), 1..=65536.
    #[arg(long, value_delimiter = ',', default_value = "1,256", value_parser = numbers::flows())]
    flows: Vec<u32>,
    /// Trials per DuT and flow count (the median is reported), 1..=1000.
    #[arg(long, default_value_t = 3, value_parser = numbers::repeats::<usize>())]
    runs: usize,
    /// Seconds per trial (0.001..=86400).
    #[arg(long, default_value_t = 5.0, value_parser = numbers::seconds())]
    trial_seconds: f64,
    /// Old spelling of `--trial-seconds`.
    #[arg(long, hide = true, value_parser = numbers::seconds())]
    seconds: Option<f64>,
    /// Name prefix of the lab (at most 6 characters, so NAPI thread names stay distinct).
    #[arg(long, default_value = "wsb")]
    prefix: String,
    /// Directory for forwarding.json, every trial and the summary (created if missing);
    /// without it the table is printed only.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Old spelling: the JSON file itself (`--out DIR` writes DIR/forwarding.json).
    #[arg(long, hide = true)]
    json: Option<PathBuf>,
    /// Core of the generator thread.
    #[arg(long, default_value_t = 0)]
    generator_cpu: usize,
    /// Core of the DuT (its ingress NAPI thread and its worker).
    #[arg(long, default_value_t = 1)]
    dut_cpu: usize,
    /// Core of t1's NAPI thread, the tester's receive (default: the DuT core).
    #[arg(long)]
    receiver_cpu: Option<usize>,
    /// Nice value for every benchmark thread (generator, NAPI threads, the DuT's threads), which
    /// shields them from other jobs on a shared machine while keeping them equal among
    /// themselves (-20..=19), or `off` to leave priorities alone.
    #[arg(long, default_value = "-20", allow_hyphen_values = true, value_parser = numbers::nice_or_off())]
    nice: numbers::Nice,
    /// Old spelling of `--nice off`.
    #[arg(long, hide = true)]
    keep_priorities: bool,
    /// The tester's sender and receiver: xdp-live (in-kernel live-frame sender on t0, XDP
    /// counting sink on t1: several Mpps, so it does not cap the DuTs compared) or afxdp
    /// (AF_XDP sockets on t0 and t1, about 1 Mpps, the receive a copy on the DuT's core), or
    /// xdp-tools (xdp-trafficgen udp on t0, xdp-bench drop on t1, built by
    /// scripts/build-xdp-tools.sh: the independent check of the other two; IPv6 frames of 66
    /// bytes at the smallest, trials of 3 s or more, the generator on core 0).
    #[arg(long, default_value = "xdp-live")]
    generator: GeneratorArg,
    /// Offer this many Mpps, evenly spaced (paced in the kernel for xdp-live), instead of as
    /// fast as the generator can: the forwarding rate at a stated overload. Far beyond a DuT's
    /// capacity what it forwards changes (receive livelock); its zero-loss rate is `bench
    /// compare`'s.
    #[arg(long, value_parser = numbers::real(0.001, 1000.0))]
    offered: Option<f64>,
    /// Generator batch: frames per AF_XDP transmit, or per kernel flush for xdp-live, 1..=256.
    #[arg(long, default_value_t = 64, value_parser = numbers::batch())]
    batch: usize,
    /// Routes in the router DuTs' tables (e.g. 1M): BGP-like prefix lengths, every route via
    /// `t1`, and the frames of every DuT spread over 65536 destinations among them (`bench fib`
    /// sweeps the size with the AF_XDP generator; this measures one size with any generator).
    /// Without it a router has one route and the frames one destination.
    #[arg(long)]
    routes: Option<String>,
    /// IP version of the frames and of the `--routes` table: 4 or 6.
    #[arg(long, default_value = "4")]
    ip: IpArg,
}

/// Destinations the frames of `bench forwarding --routes` spread over: as many as the live
/// generator varies, so every DuT gets the same frames with either generator.
const ROUTED_DESTINATIONS: usize = 65536;

/// `count` routes of version `ip` drawn from the testkit's BGP-like generator with `seed`, via
/// `t1` (a few drawn prefixes fall in the lab's range and are left out, so a little more is
/// drawn).
pub(super) fn bgp_like_table(count: usize, seed: u64, ip: IpArg) -> RouteTable {
    let drawn = count + count / 50 + 64;
    match ip {
        IpArg::V4 => RouteTable::new(&routes::ipv4_prefixes(drawn, seed), count),
        IpArg::V6 => RouteTable::new_v6(&routes::ipv6_prefixes(drawn, seed), count),
    }
}

/// `count` destinations spread over every route of `table` (each inside a route chosen
/// uniformly, random host bits), from the testkit's generator with `seed`.
pub(super) fn spread_destinations(table: &RouteTable, count: usize, seed: u64) -> Vec<IpAddr> {
    match table.prefixes() {
        Prefixes::V4(prefixes) => routes::ipv4_destinations(prefixes, count, seed)
            .into_iter()
            .map(|a| Ipv4Addr::from(a).into())
            .collect(),
        Prefixes::V6(prefixes) => routes::ipv6_destinations(prefixes, count, seed)
            .into_iter()
            .map(|a| Ipv6Addr::from(a).into())
            .collect(),
    }
}

/// The table and destinations of `--routes` for frames of version `ip`, drawn from seed 1 as
/// `bench fib` draws them.
fn routing_table(routes: &str, ip: IpArg) -> Result<(Arc<RouteTable>, Vec<IpAddr>)> {
    let count = super::sweep::parse_count(routes)? as usize;
    anyhow::ensure!(
        (1..=4_000_000).contains(&count),
        "--routes {routes}: give 1 to 4M routes"
    );
    let seed = 1;
    let table = Arc::new(bgp_like_table(count, seed, ip));
    let destinations = spread_destinations(&table, ROUTED_DESTINATIONS, seed);
    Ok((table, destinations))
}

/// `--ip 4|6`: the IP version of the frames (every router DuT is set up for both).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum IpArg {
    #[value(name = "4")]
    V4,
    #[value(name = "6")]
    V6,
}

impl IpArg {
    /// 4 or 6.
    pub(super) fn number(self) -> u8 {
        IpVersion::from(self).number()
    }

    /// The smallest frame of this version the tester sends (64 bytes, or the smallest IPv6
    /// frame that holds the tester's probe), with FCS.
    pub(super) fn smallest_frame(self) -> u16 {
        match self {
            IpArg::V4 => 64,
            IpArg::V6 => SMALLEST_IPV6_FRAME,
        }
    }

    /// Refuses frame sizes too small for this version's headers and a probe.
    pub(super) fn check_frame_sizes(self, sizes: &[u16]) -> Result<()> {
        if let (IpArg::V6, Some(size)) = (self, sizes.iter().find(|&&s| s < SMALLEST_IPV6_FRAME)) {
            bail!(
                "--frame-sizes {size}: an IPv6/UDP frame with the tester's probe needs at least \
                 {SMALLEST_IPV6_FRAME} bytes; give sizes from {SMALLEST_IPV6_FRAME} with --ip 6"
            );
        }
        Ok(())
    }
}

impl From<IpArg> for IpVersion {
    fn from(ip: IpArg) -> IpVersion {
        match ip {
            IpArg::V4 => IpVersion::V4,
            IpArg::V6 => IpVersion::V6,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum GeneratorArg {
    Afxdp,
    XdpLive,
    XdpTools,
}

/// The DuT names `--duts` accepts, by function and path (`linux-router-nft:N` gives the
/// firewall N rules, `linux-router-tbf:MBIT` the shaper its rate,
/// `wirespeed-xconnect-afxdp+scrape` and the like a wirespeed DuT whose metrics are scraped
/// every 100 ms; `wirespeed-openflow-ofctl-*` the openflow DuT's flows installed by
/// `ovs-ofctl` through its OpenFlow agent instead of its configuration file).
pub const DUT_NAMES: [&str; 21] = [
    "wirespeed-xconnect-xdp",
    "wirespeed-xconnect-afxdp",
    "wirespeed-xconnect-afpacket",
    "wirespeed-xconnect-afpacket-v2",
    "wirespeed-bridge-xdp",
    "wirespeed-bridge-afxdp",
    "wirespeed-router-xdp",
    "wirespeed-router-afxdp",
    "wirespeed-openflow-xdp",
    "wirespeed-openflow-afxdp",
    "wirespeed-openflow-ofctl-xdp",
    "wirespeed-openflow-ofctl-afxdp",
    "linux-bridge",
    "linux-router",
    "linux-router-nft",
    "linux-router-tbf",
    "xdp-redirect",
    "ovs",
    "ovs-normal",
    "ovs-afpacket",
    "dpdk-testpmd",
];

/// Old DuT names, kept for one release, and the names by function and path that replace them.
const OLD_DUT_NAMES: [(&str, &str); 5] = [
    ("wirespeed-xdp", "wirespeed-xconnect-xdp"),
    ("wirespeed-afxdp", "wirespeed-xconnect-afxdp"),
    ("wirespeed-afpacket", "wirespeed-xconnect-afpacket"),
    ("wirespeed-afpacket-v2", "wirespeed-xconnect-afpacket-v2"),
    ("wirespeed-router", "wirespeed-router-afxdp"),
];

/// `names` with every old name (also with `+scrape`) replaced by its name by function and
/// path, saying so once per name.
pub(super) fn dut_names(names: &[String]) -> Vec<String> {
    names
        .iter()
        .map(|name| {
            let name = name.trim();
            let (base, scrape) = match name.strip_suffix("+scrape") {
                Some(base) => (base, "+scrape"),
                None => (name, ""),
            };
            match OLD_DUT_NAMES.iter().find(|(old, _)| *old == base) {
                Some((_, new)) => {
                    numbers::deprecated(&format!("DuT name {name}"), &format!("{new}{scrape}"));
                    format!("{new}{scrape}")
                }
                None => name.to_owned(),
            }
        })
        .collect()
}

pub fn run(args: BenchArgs) -> Result<()> {
    match args.what {
        BenchCommand::Fib(args) => super::sweep::fib::run(args),
        BenchCommand::Model(args) => super::sweep::model::run(args),
        BenchCommand::Batch(args) => super::sweep::batch::run(args),
        BenchCommand::Forwarding(args) => forwarding(args),
        BenchCommand::Rfc2544(args) => super::rfc2544::run(args),
        BenchCommand::Compare(args) => super::compare::run(args),
        BenchCommand::Generator(args) => super::sweep::generator::run(args),
    }
}

/// The fast path (`...-xdp`) or the user-space path over AF_XDP (`...-afxdp`), by the name's end.
fn xdp_or_afxdp(name: &str) -> WirespeedBackend {
    if name.ends_with("-xdp") {
        WirespeedBackend::Xdp
    } else {
        WirespeedBackend::AfXdp
    }
}

/// The driver for the DuT called `name` (one of [`DUT_NAMES`], `linux-router-nft:N`,
/// `linux-router-tbf:MBIT` or `wirespeed-xconnect-afxdp+scrape`, `-xdp+scrape`,
/// `-afpacket+scrape`).
pub fn dut(name: &str, binary: &std::path::Path, core: usize) -> Result<Box<dyn Dut>> {
    routing_dut(name, binary, core, None)
}

/// [`dut`], with `routes` (when given) in the router DuTs' tables: wirespeed's routers and the
/// Linux router.
fn routing_dut(
    name: &str,
    binary: &std::path::Path,
    core: usize,
    routes: Option<&Arc<RouteTable>>,
) -> Result<Box<dyn Dut>> {
    // `NAME+scrape`: the wirespeed DuT NAME serving its metrics, scraped every 100 ms as
    // Prometheus would, to measure what being watched costs it beside NAME itself.
    if let Some(base) = name.strip_suffix("+scrape") {
        let scraped = match base {
            "wirespeed-xconnect-afxdp" => WirespeedBackend::AfXdp,
            "wirespeed-xconnect-xdp" => WirespeedBackend::Xdp,
            "wirespeed-xconnect-afpacket" => WirespeedBackend::AfPacket,
            other => bail!(
                "{other}+scrape: scraping is for wirespeed-xconnect-afxdp, \
                 wirespeed-xconnect-xdp and wirespeed-xconnect-afpacket"
            ),
        };
        return Ok(Box::new(
            WirespeedDut::new(scraped, binary.into(), core).with_options(WirespeedOptions {
                scrape_every: Some(Duration::from_millis(100)),
                ..WirespeedOptions::default()
            }),
        ));
    }
    Ok(match name {
        "wirespeed-xconnect-afxdp" => Box::new(WirespeedDut::new(
            WirespeedBackend::AfXdp,
            binary.into(),
            core,
        )),
        "wirespeed-xconnect-xdp" => Box::new(WirespeedDut::new(
            WirespeedBackend::Xdp,
            binary.into(),
            core,
        )),
        "wirespeed-bridge-xdp" | "wirespeed-bridge-afxdp" => {
            let backend = xdp_or_afxdp(name);
            Box::new(
                WirespeedDut::new(backend, binary.into(), core).with_options(WirespeedOptions {
                    app: WirespeedApp::Bridge,
                    ..WirespeedOptions::default()
                }),
            )
        }
        // The same two flows from the configuration file, or by OpenFlow from `ovs-ofctl`.
        "wirespeed-openflow-xdp"
        | "wirespeed-openflow-afxdp"
        | "wirespeed-openflow-ofctl-xdp"
        | "wirespeed-openflow-ofctl-afxdp" => {
            let backend = xdp_or_afxdp(name);
            let source = if name.contains("-ofctl-") {
                FlowSource::OvsOfctl
            } else {
                FlowSource::Config
            };
            Box::new(
                WirespeedDut::new(backend, binary.into(), core).with_options(WirespeedOptions {
                    app: WirespeedApp::OpenFlow(source),
                    ..WirespeedOptions::default()
                }),
            )
        }
        // The router with one route, the lab's destinations through `t1`, unless `--routes`
        // gives it a table (`bench fib` sweeps the table's size).
        "wirespeed-router-xdp" | "wirespeed-router-afxdp" => {
            let backend = xdp_or_afxdp(name);
            let routes = routes.map_or_else(|| Arc::new(RouteTable::new(&[], 1)), Arc::clone);
            Box::new(
                WirespeedDut::new(backend, binary.into(), core).with_options(WirespeedOptions {
                    app: WirespeedApp::Router(routes),
                    ..WirespeedOptions::default()
                }),
            )
        }
        "linux-router" if routes.is_some() => {
            Box::new(LinuxRouterFib::new(Arc::clone(routes.expect("checked"))))
        }
        "wirespeed-xconnect-afpacket" => Box::new(WirespeedDut::new(
            WirespeedBackend::AfPacket,
            binary.into(),
            core,
        )),
        "wirespeed-xconnect-afpacket-v2" => Box::new(WirespeedDut::new(
            WirespeedBackend::AfPacketV2,
            binary.into(),
            core,
        )),
        "linux-bridge" => Box::new(LinuxBridge::new()),
        "linux-router" => Box::new(LinuxRouter::new()),
        "xdp-redirect" => Box::new(XdpRedirectDut::new()),
        "linux-router-nft" => Box::new(LinuxRouterNft::new(LinuxRouterNft::DEFAULT_RULES)),
        "ovs" => Box::new(OvsDut::new(OvsAction::Output, core)),
        "ovs-normal" => Box::new(OvsDut::new(OvsAction::Normal, core)),
        "ovs-afpacket" => Box::new(OvsDut::afpacket(core)),
        "dpdk-testpmd" => Box::new(TestpmdDut::new(core)),
        "linux-router-tbf" => Box::new(LinuxRouterTbf::new(LinuxRouterTbf::DEFAULT_MBIT)),
        other if other.starts_with("linux-router-tbf:") => {
            let mbit = other
                .strip_prefix("linux-router-tbf:")
                .and_then(|n| n.parse::<u32>().ok())
                .filter(|n| (1..=LinuxRouterTbf::MAX_MBIT).contains(n))
                .with_context(|| {
                    format!(
                        "{other:?}: give the shaper's rate in Mbit/s as linux-router-tbf:MBIT \
                         with MBIT from 1 to {}",
                        LinuxRouterTbf::MAX_MBIT
                    )
                })?;
            Box::new(LinuxRouterTbf::new(mbit))
        }
        other if other.starts_with("linux-router-nft:") => {
            let rules = other
                .strip_prefix("linux-router-nft:")
                .and_then(|n| n.parse::<u32>().ok())
                .filter(|&n| n <= LinuxRouterNft::MAX_RULES)
                .with_context(|| {
                    format!(
                        "{other:?}: give the rule count as linux-router-nft:N with N at most {}",
                        LinuxRouterNft::MAX_RULES
                    )
                })?;
            Box::new(LinuxRouterNft::new(rules))
        }
        other => bail!(
            "unknown DuT {other:?}; choose from {}",
            DUT_NAMES.join(", ")
        ),
    })
}

/// `bench forwarding` with `words` as its command line (after `forwarding`), every other
/// option at its default: the demo's side-by-side run.
pub fn forwarding_with(words: &[&str]) -> Result<()> {
    use clap::Parser;
    #[derive(Parser)]
    struct Line {
        #[command(flatten)]
        args: ForwardingArgs,
    }
    let line = Line::try_parse_from(std::iter::once("forwarding").chain(words.iter().copied()))?;
    forwarding(line.args)
}

fn forwarding(mut args: ForwardingArgs) -> Result<()> {
    args.duts = dut_names(&args.duts);
    // Every argument is checked before the rights to build a lab are.
    if args.prefix.len() > 6 {
        bail!(
            "prefix {:?} is longer than 6 characters: the kernel cuts thread names at 15 bytes \
             and napi/<prefix>-d0-<id> must stay distinct from napi/<prefix>-d1-<id>",
            args.prefix
        );
    }
    let plan = Plan {
        generator_cpu: args.generator_cpu,
        dut_cpu: args.dut_cpu,
        receiver_cpu: args.receiver_cpu.unwrap_or(args.dut_cpu),
        nice: if args.keep_priorities {
            numbers::deprecated("--keep-priorities", "--nice off");
            None
        } else {
            args.nice.0
        },
    };
    let _shield = SessionShield::new(plan.nice);
    let cores = wirespeed_io::thread::available_cores();
    if plan.generator_cpu.max(plan.dut_cpu).max(plan.receiver_cpu) >= cores {
        bail!("this machine has {cores} core(s); the placement {plan:?} needs more");
    }
    anyhow::ensure!(!args.flows.is_empty(), "give at least one flow count");
    anyhow::ensure!(
        args.out.is_none() || args.json.is_none(),
        "give --out DIR alone (--json is its old spelling)"
    );
    let binary =
        std::env::current_exe().context("finding this executable for the wirespeed DuTs")?;
    let site = args.site.site(&args.duts)?;
    anyhow::ensure!(
        args.routes.is_none() || !site.is_external(),
        "--routes fills the router DuTs' tables; the tester configures nothing on an external DuT"
    );
    if args.generator == GeneratorArg::XdpTools {
        anyhow::ensure!(
            args.offered.is_none() && args.routes.is_none(),
            "--generator xdp-tools sends as fast as it can to one address: drop --offered and \
             --routes"
        );
        let seconds = args.seconds.unwrap_or(args.trial_seconds);
        for &flows in &args.flows {
            xdp_tools::check(
                flows,
                xdp_tools::SMALLEST_FRAME,
                seconds,
                plan.generator_cpu,
            )
            .map_err(anyhow::Error::msg)?;
        }
        xdp_tools::find().map_err(anyhow::Error::msg)?;
    }
    let routing = args
        .routes
        .as_deref()
        .map(|routes| routing_table(routes, args.ip))
        .transpose()?;
    let (mut duts, external_wiring) = match site.external() {
        Some(external) => {
            let (device, wiring) = external?;
            (vec![device], Some(wiring))
        }
        None => (
            args.duts
                .iter()
                .map(|name| {
                    site.place(routing_dut(
                        name,
                        &binary,
                        plan.dut_cpu,
                        routing.as_ref().map(|r| &r.0),
                    )?)
                })
                .collect::<Result<Vec<_>>>()?,
            None,
        ),
    };
    if let Some(reason) = wirespeed_lab::unavailable_reason() {
        bail!("the benchmark builds a lab, but {reason}");
    }
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .context("installing the signal handler")?;
    }
    let machine = Machine::read();
    let config = ForwardingConfig {
        flows: args.flows.clone(),
        runs: args.runs,
        seconds: numbers::renamed(args.seconds, "--seconds", "--trial-seconds")
            .unwrap_or(args.trial_seconds),
        plan,
        batch: args.batch,
        generator: match args.generator {
            GeneratorArg::Afxdp => Generator::Afxdp,
            GeneratorArg::XdpLive => Generator::XdpLive,
            GeneratorArg::XdpTools => Generator::XdpTools,
        },
        offered_pps: args.offered.map(|mpps| mpps * 1e6),
        destinations: routing
            .map(|(_, destinations)| destinations)
            .unwrap_or_default(),
        ip: args.ip.into(),
        frame_size: args.ip.smallest_frame(),
        // The generator's ceiling is measured in the lab with nothing on `d0`: an external
        // DuT cannot be taken out of the path.
        ceiling: external_wiring.is_none(),
    };
    let lab = match external_wiring {
        Some(_) => None,
        None => Some(Testbed::up(&TestbedConfig {
            prefix: args.prefix.clone(),
            pairs: 2,
            queues: 1,
            calibration: false,
            mtu: wirespeed_lab::DEFAULT_MTU,
        })?),
    };
    let wiring = match (external_wiring, &lab) {
        (Some(wiring), _) => wiring,
        (None, Some(lab)) => site.wiring(lab)?,
        (None, None) => bail!("neither a lab nor an external DuT"),
    };
    let total = args.runs * args.flows.len() * (duts.len() + usize::from(config.ceiling));
    let mut done = 0;
    let records = run_forwarding(&wiring, &mut duts, &config, &stop, &mut |record| {
        done += 1;
        eprintln!("[{done}/{total}] {}", trial_line(record));
    });
    let descriptions: Vec<(String, String)> = duts
        .iter()
        .map(|d| (d.name(), d.description()))
        .filter(|(name, description)| name != description)
        .collect();
    let outputs: Vec<(String, String)> = duts
        .iter()
        .filter_map(|d| d.output().map(|o| (d.name(), o.to_string())))
        .collect();
    drop(duts);
    let mut lab_commands = vec![format!(
        "# DuT: {}",
        wirespeed_tester::dut::location(&wiring, &site.host())
    )];
    if let Some(lab) = lab {
        lab_commands.extend_from_slice(lab.commands());
        lab.teardown().context("taking the lab down")?;
    }
    let interrupted = stop.load(Ordering::Relaxed);
    let load_after = Machine::load();
    let summaries = summarize(&records);
    let command_line = std::env::args().collect::<Vec<_>>().join(" ");
    let results = Results {
        summaries: &summaries,
        records: &records,
        config: &config,
        machine: &machine,
        load_after: &load_after,
        command_line: &command_line,
        lab_commands: &lab_commands,
        outputs: &outputs,
        descriptions: &descriptions,
    };
    println!("{}", report(&results));
    if interrupted {
        println!("\ninterrupted: the last trial was cut short and the runs are incomplete");
    }
    if let Some(path) = forwarding_json(&args)? {
        let json = json(&results);
        std::fs::write(&path, json).with_context(|| format!("writing {}", path.display()))?;
        println!("\nwrote {}", path.display());
    }
    Ok(())
}

/// Where `bench forwarding` writes its JSON: `--out DIR`'s forwarding.json (the directory
/// made), or the old `--json FILE`, with a note.
fn forwarding_json(args: &ForwardingArgs) -> Result<Option<PathBuf>> {
    match (&args.out, &args.json) {
        (Some(dir), None) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            Ok(Some(dir.join("forwarding.json")))
        }
        (None, Some(file)) => {
            numbers::deprecated("--json FILE", "--out DIR (it writes DIR/forwarding.json)");
            Ok(Some(file.clone()))
        }
        (None, None) => Ok(None),
        (Some(_), Some(_)) => bail!("give --out DIR alone (--json is its old spelling)"),
    }
}

fn trial_line(record: &TrialRecord) -> String {
    let head = format!(
        "run {} {:>3} flow(s) {:<18}",
        record.run + 1,
        record.flows,
        record.dut
    );
    match &record.outcome {
        Ok(m) => format!(
            "{head} received {:.3} Mpps of {:.3} offered, loss {:.2} %, {} dropped by the \
             tester's RX socket, {} forwarded by the DuT and refused by t1's ring",
            m.received_pps() / 1e6,
            m.offered_pps() / 1e6,
            100.0 * m.loss(),
            m.tester_dropped,
            m.receive_refused
        ),
        Err(error) => format!("{head} FAILED: {error}"),
    }
}

/// Facts about the machine, read at the start.
struct Machine {
    cpus: usize,
    kernel: String,
    cpu_model: String,
    date: String,
    load_before: String,
}

impl Machine {
    fn read() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, m)| m.trim().to_string())
            .unwrap_or_else(|| "unknown".into());
        let output = |program: &str, args: &[&str]| {
            wirespeed_lab::run(program, args)
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".into())
        };
        Machine {
            cpus: wirespeed_io::thread::available_cores(),
            kernel: output("uname", &["-r"]),
            cpu_model,
            date: output("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]),
            load_before: Self::load(),
        }
    }

    /// The 1, 5 and 15 minute load averages.
    fn load() -> String {
        std::fs::read_to_string("/proc/loadavg")
            .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|_| "unknown".into())
    }
}

fn mpps(pps: f64) -> String {
    format!("{:.3}", pps / 1e6)
}

/// Everything the report and the JSON are made of.
struct Results<'a> {
    summaries: &'a [Summary],
    records: &'a [TrialRecord],
    config: &'a ForwardingConfig,
    machine: &'a Machine,
    load_after: &'a str,
    command_line: &'a str,
    lab_commands: &'a [String],
    /// What each program DuT printed in its last trial.
    outputs: &'a [(String, String)],
    /// What each DuT was, where its name does not say it all (port types, rule counts).
    descriptions: &'a [(String, String)],
}

/// The size and IP version of the frames sent: the configuration's, except that xdp-trafficgen
/// sends IPv6 frames of its smallest size or more.
fn frames(config: &ForwardingConfig) -> (u16, u8) {
    match config.generator {
        Generator::XdpTools => (config.frame_size.max(xdp_tools::SMALLEST_FRAME), 6),
        _ => (config.frame_size, config.ip.number()),
    }
}

fn report(results: &Results) -> String {
    let Results {
        summaries,
        records,
        config,
        machine,
        load_after,
        command_line,
        ..
    } = *results;
    let mut out = String::new();
    let _ = writeln!(out, "Command: `{command_line}`  ");
    let _ = writeln!(
        out,
        "Date: {}; machine: {} CPUs, {}, kernel {}; load average before {}, after {}  ",
        machine.date,
        machine.cpus,
        machine.cpu_model,
        machine.kernel,
        machine.load_before,
        load_after
    );
    let _ = writeln!(
        out,
        "{} B UDP/IPv{} frames, {} s trials, {} run(s), median of the runs; generator {}, {}; \
         placement: generator on CPU {}, DuT and d0's NAPI on CPU {}, t1's NAPI (tester receive) \
         on CPU {}; {}\n",
        frames(config).0,
        frames(config).1,
        config.seconds,
        config.runs,
        config.generator.name(),
        config.offered_pps.map_or_else(
            || "as fast as it sends".to_string(),
            |pps| format!("offering {:.3} Mpps", pps / 1e6)
        ),
        config.plan.generator_cpu,
        config.plan.dut_cpu,
        config.plan.receiver_cpu,
        config.plan.nice.map_or_else(
            || "priorities left alone".to_string(),
            |nice| format!("all of these threads at nice {nice}")
        )
    );
    let _ = writeln!(
        out,
        "| DuT | flows | median Mpps | min..max Mpps | offered Mpps | loss | limit |"
    );
    let _ = writeln!(out, "| --- | ---: | ---: | ---: | ---: | ---: | --- |");
    for s in summaries {
        if s.trials == 0 {
            let _ = writeln!(
                out,
                "| {} | {} | - | - | - | - | failed: {} |",
                s.dut,
                s.flows,
                s.errors
                    .first()
                    .map_or("", String::as_str)
                    .replace('\n', " ")
            );
            continue;
        }
        let received = if s.dut == CEILING {
            "-".to_string()
        } else {
            mpps(s.median_pps)
        };
        let range = if s.dut == CEILING {
            "-".to_string()
        } else {
            format!("{}..{}", mpps(s.min_pps), mpps(s.max_pps))
        };
        let loss = if s.dut == CEILING {
            "-".to_string()
        } else {
            format!("{:.2} %", 100.0 * s.loss_median)
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            s.dut,
            s.flows,
            received,
            range,
            mpps(s.offered_median_pps),
            loss,
            s.limit.label()
        );
    }
    let ratios = ratios(summaries);
    if !ratios.is_empty() {
        let _ = writeln!(
            out,
            "\nwirespeed relative to each other DuT (median / median):"
        );
        for line in ratios {
            let _ = writeln!(out, "- {line}");
        }
    }
    if !results.descriptions.is_empty() {
        let _ = writeln!(out, "\nDuTs as run:");
        for (name, description) in results.descriptions {
            let _ = writeln!(out, "- {name}: {description}");
        }
    }
    let _ = writeln!(out, "\nPlacement as read back (first trial of each DuT):");
    let mut seen = Vec::new();
    for record in records {
        if seen.contains(&record.dut) || record.placement.is_empty() {
            continue;
        }
        seen.push(record.dut.clone());
        let placed: Vec<String> = record.placement.iter().map(placed).collect();
        let _ = writeln!(out, "- {}: {}", record.dut, placed.join("; "));
    }
    let failures: Vec<&TrialRecord> = records.iter().filter(|r| r.outcome.is_err()).collect();
    if !failures.is_empty() {
        let _ = writeln!(out, "\nFailed trials:");
        for record in failures {
            let _ = writeln!(out, "- {}", trial_line(record).replace('\n', " "));
        }
    }
    out
}

/// A thread's placement as the reports print it.
pub(crate) fn placed(p: &wirespeed_tester::bench::placement::Placed) -> String {
    match p.nice {
        Some(nice) => format!("{} on CPU {} nice {nice}", p.thread, p.cpus),
        None => format!("{} on CPU {}", p.thread, p.cpus),
    }
}

/// wirespeed's DuTs against every other DuT of the same flow count; a DuT that forwarded next
/// to nothing is a setup to diagnose, never a ratio (`62.89 x linux-router` said nothing about
/// Linux routing, only that the setup dropped what it was sent).
fn ratios(summaries: &[Summary]) -> Vec<String> {
    let mut lines = Vec::new();
    for ours in summaries
        .iter()
        .filter(|s| s.dut.starts_with("wirespeed-") && s.trials > 0)
    {
        for peer in summaries.iter().filter(|s| {
            s.flows == ours.flows
                && s.dut != ours.dut
                && s.dut != CEILING
                && s.trials > 0
                && s.median_pps > 0.0
        }) {
            let line = if ours.limit == Limit::Broken || peer.limit == Limit::Broken {
                let broken = if ours.limit == Limit::Broken {
                    ours
                } else {
                    peer
                };
                format!(
                    "{} flow(s): {} not compared with {}: {} forwarded {:.2} % of what it was \
                     offered, a broken setup (its output and commands are in the JSON results)",
                    ours.flows,
                    ours.dut,
                    peer.dut,
                    broken.dut,
                    100.0 * (1.0 - broken.loss_median)
                )
            } else {
                // A figure held down by the tester's receive is a lower bound: the ratio then
                // bounds the truth from one side only.
                let bound = match (ours.limit, peer.limit) {
                    (Limit::TesterReceive, Limit::TesterReceive) => {
                        " (both held down by the tester's receive: lower bounds)"
                    }
                    (Limit::TesterReceive, _) => {
                        " (at least: wirespeed's figure was held down by the tester's receive)"
                    }
                    (_, Limit::TesterReceive) => {
                        " (at most: the peer's figure was held down by the tester's receive)"
                    }
                    _ => "",
                };
                format!(
                    "{} flow(s): {} is {:.2} x {}{bound}",
                    ours.flows,
                    ours.dut,
                    ours.median_pps / peer.median_pps,
                    peer.dut
                )
            };
            lines.push(line);
        }
    }
    lines
}

/// A JSON string literal.
fn string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn strings(items: &[String]) -> String {
    format!(
        "[{}]",
        items
            .iter()
            .map(|s| string(s))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// A finite number for JSON (non-finite values become null).
fn number(value: f64) -> String {
    if value.is_finite() {
        format!("{value}")
    } else {
        "null".into()
    }
}

fn json(results: &Results) -> String {
    let Results {
        summaries,
        records,
        config,
        machine,
        load_after,
        command_line,
        lab_commands,
        outputs,
        descriptions,
    } = *results;
    let mut out = String::from("{\n  \"schema\": \"wirespeed.bench.forwarding/1\",\n");
    let _ = writeln!(out, "  \"command\": {},", string(command_line));
    let _ = writeln!(
        out,
        "  \"machine\": {{\"date\": {}, \"cpus\": {}, \"cpu_model\": {}, \"kernel\": {}, \
         \"load_before\": {}, \"load_after\": {}}},",
        string(&machine.date),
        machine.cpus,
        string(&machine.cpu_model),
        string(&machine.kernel),
        string(&machine.load_before),
        string(load_after)
    );
    let _ = writeln!(
        out,
        "  \"config\": {{\"frame_size\": {}, \"seconds\": {}, \"runs\": {}, \"flows\": [{}], \
         \"batch\": {}, \"ip\": {}, \"generator\": {}, \"generator_cpu\": {}, \"dut_cpu\": {}, \
         \"receiver_cpu\": {}, \"nice\": {}}},",
        frames(config).0,
        number(config.seconds),
        config.runs,
        config
            .flows
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        config.batch,
        frames(config).1,
        string(config.generator.name()),
        config.plan.generator_cpu,
        config.plan.dut_cpu,
        config.plan.receiver_cpu,
        config
            .plan
            .nice
            .map_or("null".to_string(), |n| n.to_string())
    );
    let _ = writeln!(out, "  \"lab_commands\": {},", strings(lab_commands));
    out.push_str("  \"summaries\": [\n");
    let items: Vec<String> = summaries
        .iter()
        .map(|s| {
            format!(
                "    {{\"dut\": {}, \"flows\": {}, \"trials\": {}, \"median_pps\": {}, \
                 \"min_pps\": {}, \"max_pps\": {}, \"offered_median_pps\": {}, \
                 \"loss_median\": {}, \"limit\": {}, \"errors\": {}}}",
                string(&s.dut),
                s.flows,
                s.trials,
                number(s.median_pps),
                number(s.min_pps),
                number(s.max_pps),
                number(s.offered_median_pps),
                number(s.loss_median),
                string(limit_key(s.limit)),
                strings(&s.errors)
            )
        })
        .collect();
    out.push_str(&items.join(",\n"));
    out.push_str("\n  ],\n  \"trials\": [\n");
    let items: Vec<String> = records
        .iter()
        .map(|r| {
            let outcome = match &r.outcome {
                Ok(m) => format!(
                    "\"sent\": {}, \"refused\": {}, \"received\": {}, \"tester_dropped\": {}, \
                     \"receive_refused\": {}, \"seconds\": {}, \"offered_pps\": {}, \
                     \"received_pps\": {}, \"loss\": {}",
                    m.sent,
                    m.refused,
                    m.received,
                    m.tester_dropped,
                    m.receive_refused,
                    number(m.seconds),
                    number(m.offered_pps()),
                    number(m.received_pps()),
                    number(m.loss())
                ),
                Err(error) => format!("\"error\": {}", string(error)),
            };
            let placement: Vec<String> = r.placement.iter().map(placed).collect();
            format!(
                "    {{\"dut\": {}, \"flows\": {}, \"run\": {}, {outcome}, \"placement\": {}, \
                 \"commands\": {}}}",
                string(&r.dut),
                r.flows,
                r.run,
                strings(&placement),
                strings(&r.commands)
            )
        })
        .collect();
    out.push_str(&items.join(",\n"));
    out.push_str("\n  ],\n  \"descriptions\": {");
    let items: Vec<String> = descriptions
        .iter()
        .map(|(name, text)| format!("{}: {}", string(name), string(text)))
        .collect();
    out.push_str(&items.join(", "));
    out.push_str("},\n  \"outputs\": {");
    let items: Vec<String> = outputs
        .iter()
        .map(|(name, text)| format!("{}: {}", string(name), string(text)))
        .collect();
    out.push_str(&items.join(", "));
    out.push_str("}\n}\n");
    out
}

fn limit_key(limit: Limit) -> &'static str {
    match limit {
        Limit::Generator => "generator",
        Limit::DutDrops => "dut-drops",
        Limit::DutBackpressure => "dut-backpressure",
        Limit::Broken => "broken",
        Limit::TesterReceive => "tester-receive",
        Limit::Failed => "failed",
        Limit::Ceiling => "ceiling",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_escape_quotes_backslashes_and_control_characters() {
        assert_eq!(string("a\"b\\c\nd\u{1}"), "\"a\\\"b\\\\c\\nd\\u0001\"");
        assert_eq!(number(f64::NAN), "null");
        assert_eq!(number(1.5), "1.5");
    }

    #[test]
    fn ratios_compare_wirespeed_afxdp_with_each_peer_at_the_same_flow_count() {
        let summary = |dut: &str, flows, median_pps| Summary {
            dut: dut.into(),
            flows,
            trials: 3,
            median_pps,
            min_pps: median_pps,
            max_pps: median_pps,
            offered_median_pps: median_pps,
            loss_median: 0.0,
            receive_refused_median: 0.0,
            limit: Limit::Generator,
            errors: Vec::new(),
        };
        let summaries = [
            summary("wirespeed-afxdp", 1, 2e6),
            summary("linux-bridge", 1, 1e6),
            summary("linux-bridge", 256, 4e6),
            summary(CEILING, 1, 3e6),
        ];
        assert_eq!(
            ratios(&summaries),
            vec!["1 flow(s): wirespeed-afxdp is 2.00 x linux-bridge"]
        );
        let held = Summary {
            limit: Limit::TesterReceive,
            ..summary("linux-bridge", 1, 1e6)
        };
        assert_eq!(
            ratios(&[summary("wirespeed-afxdp", 1, 2e6), held]),
            vec![
                "1 flow(s): wirespeed-afxdp is 2.00 x linux-bridge (at most: the peer's figure \
                 was held down by the tester's receive)"
            ]
        );
        // A peer that forwarded 0.08 % of what it was offered gives no ratio.
        let broken = Summary {
            loss_median: 0.9992,
            limit: Limit::Broken,
            ..summary("linux-router", 1, 6e3)
        };
        let lines = ratios(&[summary("wirespeed-afxdp", 1, 2e6), broken]);
        assert_eq!(
            lines,
            vec![
                "1 flow(s): wirespeed-afxdp not compared with linux-router: linux-router \
                 forwarded 0.08 % of what it was offered, a broken setup (its output and \
                 commands are in the JSON results)"
            ]
        );
    }
}
