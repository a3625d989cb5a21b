//! A deterministic driver for instruction-count profiling of the router bench's loop.
//!
//! `benches/router.rs` lets criterion pick its iteration counts and runs IPv6 beside IPv4, so
//! under `valgrind --tool=callgrind` its totals mix cases and vary from run to run. This driver
//! runs the same traffic (64-byte IPv4/UDP frames to random destinations over a BGP-like mix of
//! `routes` routes, all via 16 resolved gateways on port 1, the harness restoring each frame's
//! TTL and writing a new destination) a fixed number of worker iterations, so two runs with
//! different counts give the cost per packet exactly:
//!
//! ```text
//! cargo build --release -p wirespeed-dataplane --example router_profile
//! for n in 1000 2000; do valgrind --tool=callgrind --callgrind-out-file=cg.$n \
//!     --toggle-collect='*Worker*poll_once*' \
//!     target/release/examples/router_profile router 1000 $n; done
//! # instructions per packet = (total(2000) - total(1000)) / (1000 * 32)
//! ```
//!
//! Modes: `router` (the fast path on, as the bench runs it), `stages` (the router with the fast
//! path off: every packet through the stage passes), `xconnect` (the bench's baseline). It
//! prints the nanoseconds per packet of the loop too, but that figure is only as good as the
//! machine is quiet: the bench's interleaved ratio is the one to quote.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant;

use wirespeed_dataplane::app::router::{
    Gateway, Interface, Prefix, Router, RouterConfig, StaticNeighbour, StaticRoute,
};
use wirespeed_dataplane::app::{App, Xconnect};
use wirespeed_io::Port;
use wirespeed_packet::checksum;
use wirespeed_packet::wire::EthernetAddress;
use wirespeed_packet::{Batch, MAX_BATCH};
use wirespeed_testkit::frames::{FrameBuilder, L3};
use wirespeed_testkit::rig::Rig;
use wirespeed_testkit::routes::{ipv4_destinations, ipv4_prefixes};

const BATCH: usize = 32;
const GATEWAYS: u16 = 16;
const TTL: u8 = 64;
const ROUTER_MAC: [EthernetAddress; 2] = [
    EthernetAddress([2, 0, 0, 0, 0, 0xa0]),
    EthernetAddress([2, 0, 0, 0, 0, 0xa1]),
];

fn gateway(i: u16) -> Ipv4Addr {
    Ipv4Addr::new(10, 1, 0, 10 + i as u8)
}

/// The bench's router: two interfaces, the gateways resolved, `prefixes` routed over them.
fn router(prefixes: &[(u32, u8)], fast_path: bool) -> Router {
    let config = RouterConfig {
        interfaces: (0..2u16)
            .map(|port| Interface {
                port,
                mac: ROUTER_MAC[usize::from(port)],
                ipv4: vec![(Ipv4Addr::new(10, port as u8, 0, 1), 24)],
                ipv6: Vec::new(),
            })
            .collect(),
        neighbours: (0..GATEWAYS)
            .map(|i| StaticNeighbour {
                port: 1,
                addr: IpAddr::V4(gateway(i)),
                mac: EthernetAddress([2, 0, 0, 0, 1, i as u8]),
            })
            .collect(),
        neighbour_capacity: 64,
        ..RouterConfig::default()
    };
    let routes: Vec<StaticRoute> = prefixes
        .iter()
        .enumerate()
        .map(|(i, &(addr, len))| StaticRoute {
            prefix: Prefix::new(IpAddr::V4(Ipv4Addr::from_bits(addr)), len).expect("prefix"),
            via: vec![Gateway {
                addr: IpAddr::V4(gateway(i as u16 % GATEWAYS)),
                port: Some(1),
            }],
        })
        .collect();
    let mut router = Router::new(config).expect("router");
    router.set_routes(&routes).expect("routes");
    router.set_fast_path(fast_path);
    router
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(mode), Some(routes), Some(iterations)) = (
        args.get(1),
        args.get(2).and_then(|a| a.parse::<usize>().ok()),
        args.get(3).and_then(|a| a.parse::<usize>().ok()),
    ) else {
        eprintln!("usage: router_profile router|stages|xconnect <routes> <iterations>");
        std::process::exit(2);
    };
    let prefixes = ipv4_prefixes(routes, 42);
    let destinations = ipv4_destinations(&prefixes, 1 << 20, 7);
    let app: Box<dyn App> = match mode.as_str() {
        "router" => Box::new(router(&prefixes, true)),
        "stages" => Box::new(router(&prefixes, false)),
        "xconnect" => Box::new(Xconnect::new(&[(0, 1)], None)),
        other => {
            eprintln!("unknown mode {other}: router, stages or xconnect");
            std::process::exit(2);
        }
    };
    let mut rig = Rig::new(app, 2, BATCH);
    let frames: Vec<Vec<u8>> = destinations
        .iter()
        .take(1024)
        .map(|&dst| {
            FrameBuilder::ipv4_udp()
                .with_l3(L3::Ipv4 {
                    src: Ipv4Addr::new(10, 0, 0, 2),
                    dst: Ipv4Addr::from_bits(dst),
                })
                .macs(EthernetAddress([2, 0, 0, 0, 0, 0xb0]), ROUTER_MAC[0])
                .ttl(TTL)
                .frame_len(60)
                .build()
        })
        .collect();
    rig.send(0, &frames);
    let mut carry = Batch::new(MAX_BATCH);
    let mut next = frames.len();
    let start = Instant::now();
    for _ in 0..iterations {
        rig.worker.poll_once();
        let pool = rig.worker.pool_mut();
        rig.ends[1].rx(0, pool, &mut carry);
        for desc in carry.descs() {
            let at = usize::from(desc.offset) + 14;
            if let Some(ip) = pool.frame_mut(desc.frame).get_mut(at..at + 20) {
                ip[8] = TTL;
                let dst = destinations[next % destinations.len()];
                ip[16..20].copy_from_slice(&dst.to_be_bytes());
                ip[10..12].copy_from_slice(&[0, 0]);
                let sum = checksum::internet_checksum(ip);
                ip[10..12].copy_from_slice(&sum.to_be_bytes());
            }
            next += 1;
        }
        rig.ends[0].tx(0, pool, &mut carry);
        for desc in carry.descs() {
            pool.release(desc.frame);
        }
        carry.clear();
    }
    let ns = start.elapsed().as_nanos() as f64 / (iterations * BATCH) as f64;
    let counters = rig.worker.counters();
    println!(
        "{mode} {routes} routes: {ns:.1} ns/packet; {} received, {} sent, {} dropped",
        counters.rx_packets,
        counters.tx_packets,
        counters.dropped()
    );
}
