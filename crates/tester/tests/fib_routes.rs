//! Router DuTs with a generated routing table, in a lab: the Linux router installs a thousand
//! BGP-like routes in one `ip -batch` run, forwards frames addressed all over them to `t1`
//! exactly as a router rewrites them, and its teardown takes every one of those routes out again.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wirespeed_lab::run;
use wirespeed_tester::dut::probe::TesterPorts;
use wirespeed_tester::dut::routes::{LINUX_PROTO, LinuxRouterFib, Prefixes, RouteTable};
use wirespeed_tester::dut::{Dut, Wiring};
use wirespeed_tester::generator::{Template, TemplateConfig};
use wirespeed_testkit::routes::{ipv4_destinations, ipv4_prefixes};

mod common;

fn bulk_routes(wiring: &Wiring) -> usize {
    let proto = LINUX_PROTO.to_string();
    run(
        "ip",
        &["-n", &wiring.dut_ns, "route", "show", "proto", &proto],
    )
    .unwrap()
    .lines()
    .count()
}

#[test]
fn the_linux_router_installs_forwards_over_and_removes_a_thousand_routes() {
    let Some(lab) = common::lab("wsxlr") else {
        return;
    };
    let wiring = Wiring::of(&lab).unwrap();
    let table = Arc::new(RouteTable::new(&ipv4_prefixes(1100, 7), 1000));
    assert_eq!(table.len(), 1000);
    let mut dut = LinuxRouterFib::new(Arc::clone(&table));
    dut.setup(&wiring).unwrap();
    // The router's own route to the lab's destinations, and the 999 others in one batch.
    assert_eq!(bulk_routes(&wiring), 999);

    // 64 frames to destinations spread over the table: each comes back routed.
    let Prefixes::V4(prefixes) = table.prefixes() else {
        panic!("an IPv4 table")
    };
    let destinations: Vec<Ipv4Addr> = ipv4_destinations(prefixes, 64, 7)
        .into_iter()
        .map(Ipv4Addr::from)
        .collect();
    let template = Template::new(&TemplateConfig {
        src_mac: wiring.ingress.tester_mac,
        dst_mac: dut.destination_mac(&wiring),
        src_ip: wiring.ingress.tester_ipv4.into(),
        dst_port: 7070,
        ..TemplateConfig::default()
    })
    .unwrap()
    .with_destinations(destinations)
    .unwrap();
    let frames: Vec<Vec<u8>> = (0..64).map(|i| template.frame(i)).collect();
    let mut expected: Vec<Vec<u8>> = frames.iter().map(|f| dut.forwarded(&wiring, f)).collect();
    let mut ports = TesterPorts::open(&wiring, 8192).unwrap();
    assert_eq!(ports.send(&frames), 64);
    let mut received = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while received.len() < 64 && Instant::now() < deadline {
        received.extend(ports.receive(7070));
        std::thread::sleep(Duration::from_millis(10));
    }
    ports.release_all();
    drop(ports);
    received.sort();
    expected.sort();
    assert_eq!(received, expected);

    dut.teardown().unwrap();
    assert_eq!(bulk_routes(&wiring), 0);
    lab.teardown().unwrap();
}
