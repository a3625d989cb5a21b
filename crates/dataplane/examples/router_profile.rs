//! TEMPORARY (not committed): deterministic driver for callgrind of the router bench's loop.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
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

const ROUTER_MAC: [EthernetAddress; 2] = [
    EthernetAddress([2, 0, 0, 0, 0, 0xa0]),
    EthernetAddress([2, 0, 0, 0, 0, 0xa1]),
];
fn gw(i: u16) -> Ipv4Addr {
    Ipv4Addr::new(10, 1, 0, 10 + i as u8)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args[1].as_str();
    let routes: usize = args[2].parse().unwrap();
    let iterations: usize = args[3].parse().unwrap();
    let prefixes = ipv4_prefixes(routes, 42);
    let d = ipv4_destinations(&prefixes, 1 << 20, 7);
    let app: Box<dyn App> = if mode == "xconnect" {
        Box::new(Xconnect::new(&[(0, 1)], None))
    } else {
        let mut neighbours = Vec::new();
        for i in 0..16u16 {
            neighbours.push(StaticNeighbour {
                port: 1,
                addr: IpAddr::V4(gw(i)),
                mac: EthernetAddress([2, 0, 0, 0, 1, i as u8]),
            });
        }
        let config = RouterConfig {
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
        };
        let statics: Vec<StaticRoute> = prefixes
            .iter()
            .enumerate()
            .map(|(i, &(a, l))| StaticRoute {
                prefix: Prefix::new(IpAddr::V4(Ipv4Addr::from_bits(a)), l).unwrap(),
                via: vec![Gateway {
                    addr: IpAddr::V4(gw(i as u16 % 16)),
                    port: Some(1),
                }],
            })
            .collect();
        let mut router = Router::new(config).unwrap();
        router.set_routes(&statics).unwrap();
        if mode == "stages" {
            router.set_fast_path(false);
        }
        Box::new(router)
    };
    let mut rig = Rig::new(app, 2, 32);
    let frames: Vec<Vec<u8>> = (0..1024)
        .map(|i| {
            FrameBuilder::ipv4_udp()
                .with_l3(L3::Ipv4 {
                    src: Ipv4Addr::new(10, 0, 0, 2),
                    dst: Ipv4Addr::from_bits(d[i % d.len()]),
                })
                .macs(EthernetAddress([2, 0, 0, 0, 0, 0xb0]), ROUTER_MAC[0])
                .ttl(64)
                .frame_len(60)
                .build()
        })
        .collect();
    rig.send(0, &frames);
    let mut carry = Batch::new(MAX_BATCH);
    let mut next = 1024usize;
    let t0 = std::time::Instant::now();
    for _ in 0..iterations {
        rig.worker.poll_once();
        let pool = rig.worker.pool_mut();
        rig.ends[1].rx(0, pool, &mut carry);
        for desc in carry.descs() {
            let at = usize::from(desc.offset) + 14;
            let frame = pool.frame_mut(desc.frame);
            let dst = d[next & (d.len() - 1)];
            let ip = &mut frame[at..at + 20];
            ip[8] = 64;
            ip[16..20].copy_from_slice(&dst.to_be_bytes());
            ip[10..12].copy_from_slice(&[0, 0]);
            let sum = checksum::internet_checksum(ip);
            ip[10..12].copy_from_slice(&sum.to_be_bytes());
            next += 1;
        }
        rig.ends[0].tx(0, pool, &mut carry);
        for desc in carry.descs() {
            pool.release(desc.frame);
        }
        carry.clear();
    }
    let ns = t0.elapsed().as_nanos() as f64 / (iterations * 32) as f64;
    println!("{mode} {routes}: {ns:.1} ns/packet");
    let c = rig.worker.counters();
    eprintln!(
        "rx {} tx {} dropped {}",
        c.rx_packets,
        c.tx_packets,
        c.dropped()
    );
}
