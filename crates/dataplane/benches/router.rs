//! The router over memory ports with realistic FIBs, against the cross-connect in the same run.
//!
//! Routes come from `wirespeed_testkit::routes` (BGP-like length mix), each via one of 16
//! gateways on port 1, all resolved (static neighbours). 1024 frames of 64 bytes circulate:
//! the worker receives a batch of 32 on port 0, routes it out of port 1, and the harness moves
//! what arrived back into port 0, writing into each frame the next of 2^20 random destinations
//! spread over the routes and restoring the TTL (IPv4 header checksum recomputed). So every
//! packet the router sees goes to a new random destination, and the FIB's cache misses are
//! those of real traffic. The cross-connect baseline runs the same harness, fix-up included, so
//! the ratio of the two is the router's own cost.
//!
//! The large tables are measured with both lookup structures (`[router] fib`): DIR-24-8 and the
//! 16-8-8 trie (`routes`), and Poptrie (`trie_routes`).
//!
//! The setup prints, for each table size, the time `Router::set_routes` takes to build the FIBs
//! and the FIBs' memory (lookup arrays, and the route set kept for the control plane), and a
//! ratio to the cross-connect measured interleaved (router and baseline alternate in short
//! blocks), which a shared machine's changing load cannot skew the way it skews two criterion
//! figures taken a minute apart; the group measures the baseline before and after the router
//! so the drift shows there too.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Instant;

use criterion::measurement::WallTime;
use criterion::{
    BenchmarkGroup, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main,
};
use wirespeed_dataplane::app::router::{
    Gateway, Interface, Prefix, Router, RouterConfig, StaticNeighbour, StaticRoute,
};
use wirespeed_dataplane::app::{App, Xconnect};
use wirespeed_dataplane::table::fib::FibKind;
use wirespeed_io::Port;
use wirespeed_packet::checksum;
use wirespeed_packet::wire::EthernetAddress;
use wirespeed_packet::{Batch, MAX_BATCH};
use wirespeed_testkit::frames::{FrameBuilder, L3};
use wirespeed_testkit::interleave::interleaved;
use wirespeed_testkit::rig::Rig;
use wirespeed_testkit::routes::{
    ipv4_destinations, ipv4_prefixes, ipv6_destinations, ipv6_prefixes,
};

const BATCH: usize = 32;
const GATEWAYS: u16 = 16;
const DESTINATIONS: usize = 1 << 20;
const TTL: u8 = 64;

const ROUTER_MAC: [EthernetAddress; 2] = [
    EthernetAddress([2, 0, 0, 0, 0, 0xa0]),
    EthernetAddress([2, 0, 0, 0, 0, 0xa1]),
];

fn gateway_v4(i: u16) -> Ipv4Addr {
    Ipv4Addr::new(10, 1, 0, 10 + i as u8)
}

fn gateway_v6(i: u16) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0, 1, 0, 0, 0, 0, 0x10 + i)
}

/// Two interfaces, 16 resolved gateways of each family on port 1, no routes yet.
fn config() -> RouterConfig {
    let mut neighbours = Vec::new();
    for i in 0..GATEWAYS {
        let mac = EthernetAddress([2, 0, 0, 0, 1, i as u8]);
        neighbours.push(StaticNeighbour {
            port: 1,
            addr: IpAddr::V4(gateway_v4(i)),
            mac,
        });
        neighbours.push(StaticNeighbour {
            port: 1,
            addr: IpAddr::V6(gateway_v6(i)),
            mac,
        });
    }
    RouterConfig {
        interfaces: (0..2u16)
            .map(|port| Interface {
                port,
                mac: ROUTER_MAC[port as usize],
                ipv4: vec![(Ipv4Addr::new(10, port as u8, 0, 1), 24)],
                ipv6: vec![(Ipv6Addr::new(0xfd00, 0, port, 0, 0, 0, 0, 1), 64)],
            })
            .collect(),
        neighbours,
        neighbour_capacity: 64,
        ..RouterConfig::default()
    }
}

/// What the harness writes into each returning frame.
enum Destinations {
    V4(Vec<u32>),
    V6(Vec<u128>),
}

/// A rig and the harness state that keeps traffic circulating.
struct Bench {
    rig: Rig,
    destinations: Destinations,
    next: usize,
    carry: Batch,
}

impl Bench {
    fn new(app: Box<dyn App>, destinations: Destinations) -> Bench {
        let mut rig = Rig::new(app, 2, BATCH);
        let frames: Vec<Vec<u8>> = (0..1024)
            .map(|i| {
                let l3 = match &destinations {
                    Destinations::V4(d) => L3::Ipv4 {
                        src: Ipv4Addr::new(10, 0, 0, 2),
                        dst: Ipv4Addr::from_bits(d[i % d.len()]),
                    },
                    Destinations::V6(d) => L3::Ipv6 {
                        src: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2),
                        dst: Ipv6Addr::from_bits(d[i % d.len()]),
                    },
                };
                let builder = match l3 {
                    L3::Ipv4 { .. } => FrameBuilder::ipv4_udp(),
                    L3::Ipv6 { .. } => FrameBuilder::ipv6_udp(),
                };
                builder
                    .with_l3(l3)
                    .macs(EthernetAddress([2, 0, 0, 0, 0, 0xb0]), ROUTER_MAC[0])
                    .ttl(TTL)
                    .frame_len(60)
                    .build()
            })
            .collect();
        assert_eq!(rig.send(0, &frames), frames.len());
        let mut bench = Bench {
            rig,
            destinations,
            next: 1024,
            carry: Batch::new(MAX_BATCH),
        };
        // Every packet must be forwarded, or the figure would measure drops.
        for _ in 0..256 {
            bench.step();
        }
        let counters = bench.rig.worker.counters();
        assert_eq!(counters.dropped(), 0, "{:?}", counters.drops);
        assert_eq!(counters.tx_packets, counters.rx_packets);
        bench
    }

    /// Measures [`Bench::step`] as `name` in `group`.
    fn bench(&mut self, group: &mut BenchmarkGroup<'_, WallTime>, name: &str) {
        group.bench_function(name, |b| b.iter(|| self.step()));
    }

    /// One worker iteration, then the harness moves what came out of port 1 back into port 0
    /// with a new destination and the TTL restored.
    fn step(&mut self) {
        self.rig.worker.poll_once();
        let pool = self.rig.worker.pool_mut();
        self.rig.ends[1].rx(0, pool, &mut self.carry);
        for desc in self.carry.descs() {
            let at = usize::from(desc.offset) + 14;
            let frame = pool.frame_mut(desc.frame);
            match &self.destinations {
                Destinations::V4(d) => {
                    let dst = d[self.next & (d.len() - 1)];
                    if let Some(ip) = frame.get_mut(at..at + 20) {
                        ip[8] = TTL;
                        ip[16..20].copy_from_slice(&dst.to_be_bytes());
                        ip[10..12].copy_from_slice(&[0, 0]);
                        let sum = checksum::internet_checksum(ip);
                        ip[10..12].copy_from_slice(&sum.to_be_bytes());
                    }
                }
                Destinations::V6(d) => {
                    let dst = d[self.next & (d.len() - 1)];
                    if let Some(ip) = frame.get_mut(at..at + 40) {
                        ip[7] = TTL;
                        ip[24..40].copy_from_slice(&dst.to_be_bytes());
                    }
                }
            }
            self.next += 1;
        }
        self.rig.ends[0].tx(0, pool, &mut self.carry);
        for desc in self.carry.descs() {
            pool.release(desc.frame);
        }
        self.carry.clear();
    }
}

/// The lookup structure as the report names it.
fn fib_name(fib: FibKind) -> &'static str {
    match fib {
        FibKind::Auto => "auto",
        FibKind::Dir24 => "dir24",
        FibKind::Trie => "trie",
    }
}

/// The criterion id of a router with `fib`: `routes` for the default tables, as before.
fn id(fib: FibKind) -> &'static str {
    match fib {
        FibKind::Auto => "auto_routes",
        FibKind::Dir24 => "routes",
        FibKind::Trie => "trie_routes",
    }
}

fn report_interleaved(family: &str, routes: usize, router: &mut Bench, baseline: &mut Bench) {
    // 64 iterations each, 1000 times: about a second in all.
    let (router_ns, baseline_ns) =
        interleaved(1000, 64, BATCH as f64, || router.step(), || baseline.step());
    eprintln!(
        "{family} {routes} routes: interleaved router {router_ns:.1} ns/packet, xconnect \
         {baseline_ns:.1} ns/packet, ratio {:.2}",
        router_ns / baseline_ns
    );
}

/// Two interfaces, 16 resolved gateways of each family on port 1, FIBs of `fib`, no routes yet.
fn config_with(fib: FibKind) -> RouterConfig {
    RouterConfig { fib, ..config() }
}

fn ipv4_router(routes: usize, fib: FibKind) -> (Router, Vec<u32>) {
    let prefixes = ipv4_prefixes(routes, 42);
    let statics: Vec<StaticRoute> = prefixes
        .iter()
        .enumerate()
        .map(|(i, &(addr, len))| StaticRoute {
            prefix: Prefix::new(IpAddr::V4(Ipv4Addr::from_bits(addr)), len).expect("prefix"),
            via: vec![Gateway {
                addr: IpAddr::V4(gateway_v4(i as u16 % GATEWAYS)),
                port: Some(1),
            }],
        })
        .collect();
    let mut router = Router::new(config_with(fib)).expect("router");
    let start = Instant::now();
    router.set_routes(&statics).expect("routes");
    let fib = router.routes().fib_v4();
    eprintln!(
        "ipv4 {routes} routes ({}): set_routes {:.3} s, FIB {:.1} MiB lookup + {:.1} MiB route set",
        fib_name(fib.kind()),
        start.elapsed().as_secs_f64(),
        fib.memory_bytes() as f64 / (1 << 20) as f64,
        fib.rib_memory_bytes() as f64 / (1 << 20) as f64,
    );
    (router, ipv4_destinations(&prefixes, DESTINATIONS, 7))
}

fn ipv6_router(routes: usize, fib: FibKind) -> (Router, Vec<u128>) {
    let prefixes = ipv6_prefixes(routes, 42);
    let statics: Vec<StaticRoute> = prefixes
        .iter()
        .enumerate()
        .map(|(i, &(addr, len))| StaticRoute {
            prefix: Prefix::new(IpAddr::V6(Ipv6Addr::from_bits(addr)), len).expect("prefix"),
            via: vec![Gateway {
                addr: IpAddr::V6(gateway_v6(i as u16 % GATEWAYS)),
                port: Some(1),
            }],
        })
        .collect();
    let mut router = Router::new(config_with(fib)).expect("router");
    let start = Instant::now();
    router.set_routes(&statics).expect("routes");
    let fib = router.routes().fib_v6();
    eprintln!(
        "ipv6 {routes} routes ({}): set_routes {:.3} s, FIB {:.1} MiB lookup + {:.1} MiB route set",
        fib_name(fib.kind()),
        start.elapsed().as_secs_f64(),
        fib.memory_bytes() as f64 / (1 << 20) as f64,
        fib.rib_memory_bytes() as f64 / (1 << 20) as f64,
    );
    (router, ipv6_destinations(&prefixes, DESTINATIONS, 7))
}

fn router_ipv4(c: &mut Criterion) {
    let mut group = c.benchmark_group("router_ipv4_64B");
    group.throughput(Throughput::Elements(BATCH as u64));
    let mut xconnect = Bench::new(
        Box::new(Xconnect::new(&[(0, 1)], None)),
        Destinations::V4(ipv4_destinations(&ipv4_prefixes(1000, 42), DESTINATIONS, 7)),
    );
    xconnect.bench(&mut group, "xconnect");
    let sizes = [
        (1_000usize, FibKind::Dir24),
        (100_000, FibKind::Dir24),
        (1_000_000, FibKind::Dir24),
        (1_000_000, FibKind::Trie),
    ];
    for (routes, fib) in sizes {
        let (router, destinations) = ipv4_router(routes, fib);
        let mut bench = Bench::new(Box::new(router), Destinations::V4(destinations));
        let name = format!("ipv4 ({})", fib_name(fib));
        report_interleaved(&name, routes, &mut bench, &mut xconnect);
        group.bench_with_input(BenchmarkId::new(id(fib), routes), &routes, |b, _| {
            b.iter(|| bench.step())
        });
    }
    // Measured again at the end: the two baselines bracket the router figures, so a change of
    // the machine's load during the run shows.
    xconnect.bench(&mut group, "xconnect_again");
    group.finish();
}

fn router_ipv6(c: &mut Criterion) {
    let mut group = c.benchmark_group("router_ipv6_64B");
    group.throughput(Throughput::Elements(BATCH as u64));
    let mut xconnect = Bench::new(
        Box::new(Xconnect::new(&[(0, 1)], None)),
        Destinations::V6(ipv6_destinations(
            &ipv6_prefixes(10_000, 42),
            DESTINATIONS,
            7,
        )),
    );
    xconnect.bench(&mut group, "xconnect");
    let sizes = [
        (10_000usize, FibKind::Dir24),
        (200_000, FibKind::Dir24),
        (200_000, FibKind::Trie),
    ];
    for (routes, fib) in sizes {
        let (router, destinations) = ipv6_router(routes, fib);
        let mut bench = Bench::new(Box::new(router), Destinations::V6(destinations));
        let name = format!("ipv6 ({})", fib_name(fib));
        report_interleaved(&name, routes, &mut bench, &mut xconnect);
        group.bench_with_input(BenchmarkId::new(id(fib), routes), &routes, |b, _| {
            b.iter(|| bench.step())
        });
    }
    xconnect.bench(&mut group, "xconnect_again");
    group.finish();
}

criterion_group!(benches, router_ipv4, router_ipv6);
criterion_main!(benches);
