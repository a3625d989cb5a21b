//! The configurations the sweeps give the wirespeed DuT are valid `wirespeed switch`
//! configurations that say what the sweep asked: the router with its interfaces, the static
//! neighbours `t1` (IPv4 and IPv6) and every route of a table that fits the file; the batch size; the emulated
//! task. Pure: parsed with the switch's own parser, no lab needed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use wirespeed_control::config::{AppConfig, parse};
use wirespeed_lab::PortPair;
use wirespeed_tester::dut::routes::RouteTable;
use wirespeed_tester::dut::{
    WirespeedApp, WirespeedBackend, WirespeedDut, WirespeedOptions, Wiring,
};

fn pair(index: u8) -> PortPair {
    PortPair {
        tester_if: format!("cfg-t{index}"),
        dut_if: format!("cfg-d{index}"),
        tester_mac: [2, 0, 0, 0, index, 1],
        dut_mac: [2, 0, 0, 0, index, 2],
        tester_ipv4: Ipv4Addr::new(198, 18, index, 1),
        dut_ipv4: Ipv4Addr::new(198, 18, index, 2),
        tester_ipv6: Ipv6Addr::new(0x2001, 2, 0, index.into(), 0, 0, 0, 1),
        dut_ipv6: Ipv6Addr::new(0x2001, 2, 0, index.into(), 0, 0, 0, 0xfe),
    }
}

fn wiring() -> Wiring {
    Wiring {
        tester_ns: "cfg-tester".into(),
        dut_ns: "cfg-dut".into(),
        ingress: pair(0),
        egress: pair(1),
        mtu: wirespeed_lab::DEFAULT_MTU,
        dut_host: Some(wirespeed_tester::dut::Host::Local),
    }
}

fn dut(options: WirespeedOptions) -> WirespeedDut {
    WirespeedDut::new(WirespeedBackend::AfXdp, "/bin/false".into(), 1).with_options(options)
}

#[test]
fn a_router_configuration_holds_the_whole_table_the_neighbour_and_the_batch() {
    let generated: Vec<(u32, u8)> = (1..=300u32).map(|i| (i << 12, 20)).collect();
    let table = Arc::new(RouteTable::new(&generated, 200));
    let dut = dut(WirespeedOptions {
        batch: Some(64),
        app: WirespeedApp::Router(Arc::clone(&table)),
        ..WirespeedOptions::default()
    });
    let config = parse("router.toml", &dut.config(&wiring())).unwrap();
    assert_eq!(config.switch.batch, 64);
    let AppConfig::Router(router) = config.app else {
        panic!("not a router: {:?}", config.app)
    };
    assert_eq!(router.interfaces.len(), 2);
    // The table's 200 IPv4 routes, and the generator's IPv6 prefix: the router is set up for
    // both versions.
    let gateway = IpAddr::from(Ipv4Addr::new(198, 18, 1, 1));
    let gateway6 = IpAddr::from(Ipv6Addr::new(0x2001, 2, 0, 1, 0, 0, 0, 1));
    let via = |gateway| router.routes.iter().filter(|r| r.via == [gateway]).count();
    assert_eq!((via(gateway), via(gateway6)), (200, 1));
    assert_eq!(router.routes.len(), 201);
    let neighbours: Vec<_> = router
        .neighbours
        .iter()
        .map(|n| (n.address, n.mac))
        .collect();
    assert_eq!(
        neighbours,
        [
            (gateway, [2, 0, 0, 0, 1, 1]),
            (gateway6, [2, 0, 0, 0, 1, 1])
        ]
    );
    assert_eq!(
        wirespeed_tester::dut::Dut::name(&dut),
        "wirespeed-router-afxdp"
    );
}

#[test]
fn a_table_too_large_for_the_file_starts_with_the_lab_route_only() {
    let generated: Vec<(u32, u8)> = (1..=20_000u32).map(|i| (i << 8, 24)).collect();
    let table = Arc::new(RouteTable::new(&generated, 15_000));
    let dut = dut(WirespeedOptions {
        app: WirespeedApp::Router(table),
        ..WirespeedOptions::default()
    });
    let AppConfig::Router(router) = parse("big.toml", &dut.config(&wiring())).unwrap().app else {
        panic!("not a router")
    };
    // The lab's IPv4 route and the IPv6 one.
    assert_eq!(router.routes.len(), 2);
}

#[test]
fn an_xconnect_with_the_emulated_task() {
    let dut = dut(WirespeedOptions {
        spin_cycles: 4000,
        walk_bytes: 1 << 20,
        ..WirespeedOptions::default()
    });
    let config = parse("task.toml", &dut.config(&wiring())).unwrap();
    assert!(
        matches!(config.app, AppConfig::Xconnect { .. }),
        "{:?}",
        config.app
    );
    assert_eq!(config.task.spin_cycles, 4000);
    assert_eq!(config.task.walk_bytes, 1 << 20);
    assert_eq!(config.switch.batch, 32);
}

#[test]
fn a_scraped_dut_serves_its_metrics_and_says_so_in_its_name() {
    let dut = dut(WirespeedOptions {
        scrape_every: Some(std::time::Duration::from_millis(100)),
        ..WirespeedOptions::default()
    });
    assert_eq!(
        wirespeed_tester::dut::Dut::name(&dut),
        "wirespeed-xconnect-afxdp+scrape"
    );
    let config = parse("scraped.toml", &dut.config(&wiring())).unwrap();
    assert_eq!(
        config.metrics,
        Some(wirespeed_tester::dut::METRICS.parse().unwrap())
    );
}

#[test]
fn the_openflow_dut_gets_one_flow_each_way() {
    let dut = dut(WirespeedOptions {
        app: WirespeedApp::OpenFlow(wirespeed_tester::dut::FlowSource::Config),
        ..WirespeedOptions::default()
    });
    assert_eq!(
        wirespeed_tester::dut::Dut::name(&dut),
        "wirespeed-openflow-afxdp"
    );
    let AppConfig::OpenFlow(openflow) = parse("of.toml", &dut.config(&wiring())).unwrap().app
    else {
        panic!("not the openflow app")
    };
    let flows: Vec<_> = openflow
        .flows
        .iter()
        .map(|f| (f.fields.clone(), f.actions.clone()))
        .collect();
    let flow = |from: &str, to: &str| {
        (
            vec![
                ("table".to_string(), "0".to_string()),
                ("in_port".to_string(), from.to_string()),
            ],
            vec![format!("output:{to}")],
        )
    };
    assert_eq!(flows, [flow("p0", "p1"), flow("p1", "p0")]);
}

#[test]
fn the_openflow_dut_by_ovs_ofctl_gets_its_flows_through_its_agent() {
    let dut = dut(WirespeedOptions {
        app: WirespeedApp::OpenFlow(wirespeed_tester::dut::FlowSource::OvsOfctl),
        ..WirespeedOptions::default()
    });
    assert_eq!(
        wirespeed_tester::dut::Dut::name(&dut),
        "wirespeed-openflow-ofctl-afxdp"
    );
    let AppConfig::OpenFlow(openflow) = parse("of.toml", &dut.config(&wiring())).unwrap().app
    else {
        panic!("not the openflow app")
    };
    // No flow in the file: `ovs-ofctl add-flows` brings them once the switch runs.
    assert!(openflow.flows.is_empty());
    let agent = openflow.agent.expect("the agent listens");
    assert_eq!(
        agent.listen,
        Some(wirespeed_tester::dut::OPENFLOW_LISTEN.parse().unwrap())
    );
}
