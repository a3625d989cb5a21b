use super::*;
use wirespeed_dataplane::app::fields;

const GOOD: &str = r#"
[switch]
app = "xconnect"
batch = 64

[[port]]
name = "in"
backend = "pcap"
rx = "in.pcap"

[[port]]
name = "out"
backend = "pcap"
tx = "out.pcap"

[[port]]
name = "wire"
backend = "afxdp"
interface = "ws-d0"
queues = [0, 1]

[xconnect]
pairs = [["in", "out"]]
"#;

#[test]
fn a_good_config_is_read_with_defaults() {
    let config = parse("good.toml", GOOD).unwrap();
    assert_eq!(config.switch.batch, 64);
    assert_eq!(config.switch.workers, 1);
    assert_eq!(config.switch.idle, IdleMode::Adaptive);
    assert_eq!(config.ports.len(), 3);
    assert_eq!(
        config.switch.control_socket,
        Some(PathBuf::from("/run/wirespeed/good.sock"))
    );
    assert_eq!(
        config.app,
        AppConfig::Xconnect {
            pairs: vec![(0, 1)]
        }
    );
    assert_eq!(
        config.ports[2].backend,
        BackendConfig::AfXdp {
            interface: "ws-d0".into(),
            queues: Some(vec![0, 1]),
            zero_copy: false,
            xdp_mode: XdpMode::Auto,
            rings: RingSizes::default(),
        }
    );
}

#[test]
fn afxdp_ring_sizes_are_read_and_checked() {
    let sized = GOOD.replace(
        "queues = [0, 1]",
        "queues = [0, 1]\ntx_ring = 8192\ncompletion_ring = 8192\nfill_ring = 4096",
    );
    let config = parse("good.toml", &sized).unwrap();
    let BackendConfig::AfXdp { rings, .. } = config.ports[2].backend else {
        panic!("an AF_XDP port");
    };
    assert_eq!(
        rings,
        RingSizes {
            rx: None,
            tx: Some(8192),
            fill: Some(4096),
            completion: Some(8192),
        }
    );
    for bad in ["3000", "32", "131072"] {
        let error = error_of(&GOOD.replace("queues = [0, 1]", &format!("rx_ring = {bad}")));
        assert_eq!(error.key, "port[2].rx_ring", "{bad}");
        assert!(error.message.contains("power of two"), "{error}");
    }
    // Only AF_XDP ports have these rings.
    let error = error_of(&GOOD.replace("rx = \"in.pcap\"", "rx = \"in.pcap\"\ntx_ring = 4096"));
    assert_eq!(error.key, "port[0].tx_ring");
}

#[test]
fn the_control_socket_can_be_moved_or_disabled() {
    let moved = GOOD.replace("batch = 64", "control_socket = \"/tmp/s.sock\"");
    let config = parse("good.toml", &moved).unwrap();
    assert_eq!(
        config.switch.control_socket,
        Some(PathBuf::from("/tmp/s.sock"))
    );
    let off = GOOD.replace("batch = 64", "control_socket = \"\"");
    assert_eq!(
        parse("good.toml", &off).unwrap().switch.control_socket,
        None
    );
    let long = GOOD.replace(
        "batch = 64",
        &format!("control_socket = \"/{}\"", "x".repeat(200)),
    );
    let error = error_of(&long);
    assert_eq!(error.key, "switch.control_socket");
    assert!(error.message.contains("107"), "{error}");
}

fn error_of(text: &str) -> ConfigError {
    parse("bad.toml", text).unwrap_err()
}

#[test]
fn fast_path_is_auto_unless_set_and_a_bad_word_is_refused() {
    assert_eq!(
        parse("good.toml", GOOD).unwrap().switch.fast_path,
        FastPathMode::Auto
    );
    for (text, expected) in [
        ("\"xdp\"", FastPathMode::Xdp),
        ("\"off\"", FastPathMode::Off),
        ("\"auto\"", FastPathMode::Auto),
    ] {
        let config = GOOD.replace("batch = 64", &format!("fast_path = {text}"));
        assert_eq!(
            parse("good.toml", &config).unwrap().switch.fast_path,
            expected
        );
    }
    let error = error_of(&GOOD.replace("batch = 64", "fast_path = \"kernel\""));
    assert_eq!(error.key, "switch.fast_path");
    assert!(error.message.contains("xdp"), "{error}");
}

#[test]
fn realtime_is_auto_unless_set_and_a_bad_word_is_refused() {
    assert_eq!(
        parse("good.toml", GOOD).unwrap().switch.realtime,
        Realtime::Auto
    );
    for (text, expected) in [
        ("true", Realtime::On),
        ("false", Realtime::Off),
        ("\"auto\"", Realtime::Auto),
    ] {
        let config = GOOD.replace("batch = 64", &format!("realtime = {text}"));
        assert_eq!(
            parse("good.toml", &config).unwrap().switch.realtime,
            expected
        );
    }
    let error = error_of(&GOOD.replace("batch = 64", "realtime = \"always\""));
    assert_eq!(error.key, "switch.realtime");
    assert!(error.message.contains("true, false or \"auto\""), "{error}");
}

#[test]
fn an_unknown_port_in_a_pair_names_line_key_and_fix() {
    let error = error_of(&GOOD.replace(r#"["in", "out"]"#, r#"["in", "nope"]"#));
    assert_eq!(error.line, 23);
    assert_eq!(error.key, "xconnect.pairs[0]");
    assert!(error.message.contains("\"nope\""), "{error}");
    assert!(error.message.contains("in, out, wire"), "{error}");
    assert!(error.to_string().starts_with("bad.toml:23:"));
}

#[test]
fn a_misspelt_key_is_refused_with_its_place() {
    let error = error_of(&GOOD.replace("batch = 64", "bacth = 64"));
    assert_eq!((error.line, error.column), (4, 1));
    assert_eq!(error.key, "switch.bacth");
    assert!(error.message.contains("unknown field"), "{error}");
}

#[test]
fn a_wrong_type_and_a_range_are_refused() {
    let error = error_of(&GOOD.replace("batch = 64", "batch = \"many\""));
    assert_eq!(error.line, 4);
    assert_eq!(error.key, "switch.batch");
    let error = error_of(&GOOD.replace("batch = 64", "batch = 1000"));
    assert_eq!(error.key, "switch.batch");
    assert!(error.message.contains("1 to 256"));
}

#[test]
fn backend_specific_keys_are_checked() {
    let error =
        error_of(&GOOD.replace("rx = \"in.pcap\"", "rx = \"in.pcap\"\ninterface = \"eth0\""));
    assert_eq!(error.key, "port[0].interface");
    assert_eq!(error.line, 10);
    let error = error_of(&GOOD.replace("interface = \"ws-d0\"\n", ""));
    assert_eq!(error.key, "port[2].interface");
    let error = error_of(&GOOD.replace("backend = \"afxdp\"", "backend = \"dpdk\""));
    assert!(error.message.contains("unknown backend \"dpdk\""));
    let error = error_of(&GOOD.replace("queues = [0, 1]", "rx_tpacket = \"v2\""));
    assert_eq!(error.key, "port[2].rx_tpacket");
    assert!(
        error.message.contains("applies only to afpacket"),
        "{error}"
    );
}

/// GOOD with its third port (the AF_XDP one) turned into an AF_PACKET port with `keys`.
fn with_afpacket_port(keys: &str) -> String {
    GOOD.replace(
        "backend = \"afxdp\"\ninterface = \"ws-d0\"\nqueues = [0, 1]",
        &format!("backend = \"afpacket\"\ninterface = \"ws-d0\"{keys}"),
    )
}

#[test]
fn an_afpacket_port_takes_its_rx_tpacket_version() {
    let afpacket = with_afpacket_port("");
    let config = parse("good.toml", &afpacket).unwrap();
    assert_eq!(
        config.ports[2].backend,
        BackendConfig::AfPacket {
            interface: "ws-d0".into(),
            rx_tpacket: RxRingKind::Blocks,
            tx_ring: None,
        }
    );
    let slots = afpacket.replace(
        "interface = \"ws-d0\"",
        "interface = \"ws-d0\"\nrx_tpacket = \"v2\"",
    );
    let config = parse("good.toml", &slots).unwrap();
    assert_eq!(
        config.ports[2].backend,
        BackendConfig::AfPacket {
            interface: "ws-d0".into(),
            rx_tpacket: RxRingKind::Slots,
            tx_ring: None,
        }
    );
    let error = error_of(&slots.replace("\"v2\"", "\"v4\""));
    assert_eq!(error.key, "port[2].rx_tpacket");
    assert_eq!(error.line, 20);
    assert!(error.message.contains("\"v4\""), "{error}");
    assert!(error.fix.contains("rx_tpacket = \"v3\""), "{error}");
}

#[test]
fn an_afpacket_port_takes_its_tx_ring_size() {
    let afpacket = with_afpacket_port("\ntx_ring = 8192");
    let config = parse("good.toml", &afpacket).unwrap();
    assert_eq!(
        config.ports[2].backend,
        BackendConfig::AfPacket {
            interface: "ws-d0".into(),
            rx_tpacket: RxRingKind::Blocks,
            tx_ring: Some(8192),
        }
    );
    let error = error_of(&afpacket.replace("8192", "1000"));
    assert_eq!(error.key, "port[2].tx_ring");
    assert!(error.message.contains("power of two"), "{error}");
}

#[test]
fn duplicates_and_self_pairs_are_refused() {
    let error = error_of(&GOOD.replace("name = \"out\"", "name = \"in\""));
    assert!(error.message.contains("already defined"), "{error}");
    let error = error_of(&GOOD.replace(r#"["in", "out"]"#, r#"["in", "in"]"#));
    assert!(error.message.contains("itself"), "{error}");
    let error = error_of(&GOOD.replace(r#"["in", "out"]"#, r#"["in", "out"], ["wire", "in"]"#));
    assert!(error.message.contains("already in another pair"), "{error}");
}

#[test]
fn a_bridge_with_access_and_trunk_ports() {
    let text = GOOD.replace("app = \"xconnect\"", "app = \"bridge\"")
        + "\n[bridge]\nmac_capacity = 1000\n\n[[bridge.port]]\nname = \"in\"\naccess = 10\n\n\
           [[bridge.port]]\nname = \"wire\"\ntrunk = [10, 20]\nnative = 1\n";
    let config = parse("bridge.toml", &text).unwrap();
    assert_eq!(
        config.app,
        AppConfig::Bridge {
            ports: vec![
                (0, PortVlan::Access(10)),
                (1, PortVlan::Access(1)),
                (
                    2,
                    PortVlan::Trunk {
                        allowed: vec![10, 20],
                        native: Some(1)
                    }
                ),
            ],
            mac_capacity: 1000,
            age_seconds: 300.0,
        }
    );
    let bad = text.replace("access = 10", "access = 5000");
    let error = parse("bridge.toml", &bad).unwrap_err();
    assert_eq!(error.key, "bridge.port[0].access");
    let both = text.replace("access = 10", "access = 10\ntrunk = [3]");
    assert!(
        parse("bridge.toml", &both)
            .unwrap_err()
            .message
            .contains("either")
    );
    let unknown = text.replace("name = \"wire\"\ntrunk", "name = \"nope\"\ntrunk");
    assert!(
        parse("bridge.toml", &unknown)
            .unwrap_err()
            .message
            .contains("no port is named")
    );
}

#[test]
fn a_router_with_interfaces_routes_and_neighbours() {
    let text = GOOD.replace("app = \"xconnect\"", "app = \"router\"")
        + "\n[router]\nicmp_rate = 10\n\n[[router.interface]]\nport = \"in\"\naddresses = [\"198.18.0.254/24\", \"2001:2::fe/64\"]\n\n\
           [[router.interface]]\nport = \"wire\"\nmac = \"02:00:00:00:00:09\"\naddresses = [\"198.18.1.254/24\"]\n\n\
           [[router.route]]\nprefix = \"198.19.0.0/16\"\nvia = [\"198.18.1.1\", \"198.18.1.2\"]\n\n\
           [[router.neighbour]]\nport = \"wire\"\naddress = \"198.18.1.1\"\nmac = \"02:57:53:00:01:01\"\n";
    let config = parse("router.toml", &text).unwrap();
    let AppConfig::Router(router) = config.app else {
        panic!("not a router")
    };
    assert_eq!(router.interfaces.len(), 2);
    assert_eq!(router.interfaces[1].port, 2);
    assert_eq!(router.interfaces[1].mac, Some([2, 0, 0, 0, 0, 9]));
    assert_eq!(router.routes[0].via.len(), 2);
    assert_eq!(router.neighbours[0].mac, [2, 0x57, 0x53, 0, 1, 1]);
    assert_eq!(router.icmp_rate, 10);
    let bad = text.replace("198.19.0.0/16", "198.19.0.0/33");
    let error = parse("router.toml", &bad).unwrap_err();
    assert_eq!(error.key, "router.route[0].prefix");
    let bad = text.replace("02:57:53:00:01:01", "zz");
    assert_eq!(
        parse("router.toml", &bad).unwrap_err().key,
        "router.neighbour[0].mac"
    );
    let bad = text.replace(
        "via = [\"198.18.1.1\", \"198.18.1.2\"]",
        "via = [\"2001:2::1\"]",
    );
    assert!(
        parse("router.toml", &bad)
            .unwrap_err()
            .message
            .contains("address family")
    );
}

#[test]
fn an_acl_in_front_of_the_bridge_names_the_bad_field_and_its_line() {
    let text = GOOD.replace("app = \"xconnect\"", "app = \"bridge\"")
        + "\n[acl]\ndefault = \"deny\"\n\n[[acl.rule]]\naction = \"permit\"\nproto = \"udp\"\n\
           src = \"198.18.0.0/16\"\ndst_port = \"1000-2000\"\n\n[[acl.rule]]\naction = \"permit\"\n\
           dst_port = 53\n";
    let config = parse("acl.toml", &text).unwrap();
    let acl = config.acl.unwrap();
    assert_eq!(acl.default, AclAction::Deny);
    assert_eq!(acl.rules.len(), 2);
    assert_eq!(
        acl.rules[0].fields,
        [
            ("src".to_string(), "198.18.0.0/16".to_string()),
            ("proto".into(), "udp".into()),
            ("dst_port".into(), "1000-2000".into())
        ]
    );
    assert_eq!(acl.rules[1].fields, [("dst_port".into(), "53".into())]);
    let bad = text.replace("1000-2000", "2000-1000");
    let error = parse("acl.toml", &bad).unwrap_err();
    assert_eq!(error.key, "acl.rule[0].dst_port");
    assert_eq!(
        error.line,
        text.lines().position(|l| l.contains("1000-2000")).unwrap() + 1
    );
    assert!(error.fix.contains("src (or ip_src)"), "{error}");
    let bad = text.replace("action = \"permit\"\nproto", "action = \"allow\"\nproto");
    assert_eq!(
        parse("acl.toml", &bad).unwrap_err().key,
        "acl.rule[0].action"
    );
    let bad = text.replace("proto = ", "colour = ");
    assert!(
        parse("acl.toml", &bad)
            .unwrap_err()
            .message
            .contains("colour")
    );
    let xconnect = GOOD.to_string() + "\n[acl]\ndefault = \"deny\"\n";
    let error = parse("acl.toml", &xconnect).unwrap_err();
    assert!(error.message.contains("bridge and router"), "{error}");
}

#[test]
fn an_openflow_app_with_flows_and_errors_that_name_the_flow() {
    let text = GOOD.replace("app = \"xconnect\"", "app = \"openflow\"")
        + "\n[openflow]\ntables = 2\nmiss = \"output:out\"\ncache_entries = 1024\n\n\
           [[openflow.flow]]\npriority = 10\nmatch = \"in_port=in, ip_dst=10.0.0.0/8\"\n\
           actions = \"set_field:eth_dst=02:00:00:00:00:01,output:wire\"\ngoto = 1\n\n\
           [[openflow.flow]]\ntable = 1\nactions = \"output:out\"\nidle_timeout = 30\n";
    let config = parse("of.toml", &text).unwrap();
    let AppConfig::OpenFlow(openflow) = config.app else {
        panic!("not openflow")
    };
    assert_eq!(openflow.tables, 2);
    assert_eq!(openflow.miss, OpenFlowMiss::Output(1));
    assert_eq!(openflow.cache_entries, 1024);
    assert_eq!(openflow.flows.len(), 2);
    let port = |name: &str| {
        ["in", "out", "wire"]
            .iter()
            .position(|p| *p == name)
            .map(|i| i as u16)
    };
    let first = fields::flow_rule(&openflow.flows[0], &port).unwrap();
    assert_eq!(
        (first.table, first.entry.goto, first.entry.priority),
        (0, Some(1), 10)
    );
    let second = fields::flow_rule(&openflow.flows[1], &port).unwrap();
    assert_eq!((second.table, second.entry.idle_timeout), (1, 30));

    let line_of = |needle: &str| text.lines().position(|l| l.contains(needle)).unwrap() + 1;
    let bad = text.replace("ip_dst=10", "ip_dts=10");
    let error = parse("of.toml", &bad).unwrap_err();
    assert_eq!(
        (error.key.as_str(), error.line),
        ("openflow.flow[0].match", line_of("ip_dst=10"))
    );
    assert!(
        error.message.contains("ip_dts") && error.fix.contains("ip_dst"),
        "{error}"
    );
    let bad = text.replace("output:wire", "output:nowhere");
    let error = parse("of.toml", &bad).unwrap_err();
    assert_eq!(error.key, "openflow.flow[0].actions");
    assert!(error.message.contains("output:nowhere"), "{error}");
    let bad = text.replace("goto = 1", "goto = 2");
    assert_eq!(
        parse("of.toml", &bad).unwrap_err().key,
        "openflow.flow[0].goto"
    );
    let bad = text.replace("table = 1", "table = 5");
    assert_eq!(
        parse("of.toml", &bad).unwrap_err().key,
        "openflow.flow[1].table"
    );
    let bad = text.replace("miss = \"output:out\"", "miss = \"output:gone\"");
    assert!(parse("of.toml", &bad).unwrap_err().message.contains("gone"));
    let bad = text.replace("idle_timeout = 30", "idle_time = 30");
    assert!(
        parse("of.toml", &bad)
            .unwrap_err()
            .message
            .contains("idle_time")
    );
}

#[test]
fn syntax_errors_have_a_line() {
    let error = error_of("[switch]\napp = \"xconnect\"\nbatch = [1,\n");
    assert_eq!(error.line, 3, "{error}");
    let error = error_of("");
    assert!(error.message.contains("missing field `switch`"), "{error}");
}

proptest::proptest! {
    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,400}") {
        let _ = parse("fuzz.toml", &text);
    }

    #[test]
    fn mutated_good_config_never_panics(cut in 0usize..400, byte in proptest::prelude::any::<u8>()) {
        let mut bytes = GOOD.as_bytes().to_vec();
        let at = cut % bytes.len();
        bytes[at] = byte;
        if let Ok(text) = String::from_utf8(bytes) {
            let _ = parse("fuzz.toml", &text);
        }
    }
}

#[test]
fn a_capture_written_by_one_port_cannot_be_read_or_written_by_another() {
    // Two ports writing one file: the output would hold half of each.
    let error = error_of(&GOOD.replace("rx = \"in.pcap\"", "tx = \"out.pcap\""));
    assert_eq!(error.key, "port[1].tx");
    assert!(error.message.contains("is also port[0].tx"), "{error}");
    // A port reading what another writes: the input would be overwritten.
    let error = error_of(&GOOD.replace("tx = \"out.pcap\"", "tx = \"in.pcap\""));
    assert_eq!(error.key, "port[1].tx");
    assert!(error.message.contains("is also port[0].rx"), "{error}");
    // One port reading and writing one file.
    let error = error_of(&GOOD.replace("rx = \"in.pcap\"", "rx = \"in.pcap\"\ntx = \"in.pcap\""));
    assert_eq!(error.key, "port[0].tx");
    // Two ports reading one file harm nothing.
    let both_read = GOOD.replace("tx = \"out.pcap\"", "rx = \"in.pcap\"\ntx = \"out.pcap\"");
    assert!(parse("good.toml", &both_read).is_ok());
}

#[test]
fn a_core_this_process_may_not_use_is_refused_at_its_line() {
    let allowed = wirespeed_io::thread::allowed_cores().unwrap();
    let first = allowed[0];
    let config = GOOD.replace("batch = 64", &format!("cores = [{first}]"));
    assert_eq!(
        parse("good.toml", &config).unwrap().switch.cores,
        vec![first]
    );
    // CPU_SETSIZE - 1: no process may run there on any machine this runs on.
    let error = error_of(&GOOD.replace("batch = 64", "cores = [1023]"));
    assert_eq!(
        (error.key.as_str(), error.line, error.excerpt.as_str()),
        ("switch.cores", 4, "cores = [1023]")
    );
    assert!(
        error
            .message
            .starts_with("core 1023 is not one this process may run on (it may use ")
            && error.message.contains(&first.to_string()),
        "{error}"
    );
    assert!(error.fix.contains("taskset"), "{error}");
}

#[test]
fn a_file_that_is_not_utf8_is_refused_at_its_first_bad_byte() {
    let path = std::env::temp_dir().join(format!("wirespeed-latin1-{}.toml", std::process::id()));
    // "é" in Latin-1 on line 3.
    std::fs::write(&path, b"[switch]\napp = \"xconnect\"\n# caf\xe9\n").unwrap();
    let error = load(&path).unwrap_err();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(
        (error.line, error.column, error.excerpt.as_str()),
        (3, 6, "# caf")
    );
    assert!(error.message.contains("0xe9"), "{error}");
    assert!(error.fix.contains("save the file as UTF-8"), "{error}");
    assert!(
        error
            .to_string()
            .starts_with(&format!("{}:3:6:", path.display())),
        "{error}"
    );
}

#[test]
fn what_an_app_lacks_is_reported_at_the_line_that_chose_the_app() {
    for (app, key) in [
        ("openflow", "openflow"),
        ("router", "router"),
        ("bridge", "port"),
    ] {
        let text = "# a comment\n[switch]\napp = \"APP\"\n\n[[port]]\nname = \"in\"\n\
                    backend = \"pcap\"\nrx = \"in.pcap\"\n"
            .replace("APP", app);
        let error = error_of(&text);
        assert_eq!(
            (error.key.as_str(), error.line, error.excerpt.as_str()),
            (key, 3, format!("app = \"{app}\"").as_str()),
            "{error}"
        );
    }
}

#[test]
fn the_metrics_endpoint_is_where_the_config_says_or_refused_at_its_line() {
    assert_eq!(parse("good.toml", GOOD).unwrap().metrics, None);
    let with = format!("{GOOD}\n[metrics]\nlisten = \"127.0.0.1:9417\"\n");
    assert_eq!(
        parse("good.toml", &with).unwrap().metrics,
        Some("127.0.0.1:9417".parse().unwrap())
    );
    let bad = error_of(&format!("{GOOD}\n[metrics]\nlisten = \"localhost\"\n"));
    let text = bad.to_string();
    assert!(text.contains("metrics.listen"), "{text}");
    assert!(text.contains("127.0.0.1:9417"), "{text}");
    assert_eq!(bad.line, GOOD.lines().count() + 3, "{text}");
}

#[test]
fn openflow_groups_are_checked_in_order_and_errors_name_the_group() {
    let text = GOOD.replace("app = \"xconnect\"", "app = \"openflow\"")
        + "\n[openflow]\ntables = 2\n\n\
           [[openflow.group]]\nid = 2\ntype = \"indirect\"\nbuckets = [\"dec_ttl,output:out\"]\n\n\
           [[openflow.group]]\nid = 1\ntype = \"select\"\n\
           buckets = [\"weight:1,output:wire\", \"weight:3,group:2\"]\n\n\
           [[openflow.flow]]\nactions = \"group:1\"\n";
    let config = parse("of.toml", &text).unwrap();
    let AppConfig::OpenFlow(openflow) = config.app else {
        panic!("not openflow")
    };
    assert_eq!(openflow.groups.len(), 2);
    assert_eq!(
        openflow.groups[1].buckets,
        [vec!["weight:1", "output:wire"], vec!["weight:3", "group:2"]]
    );
    let line_of = |needle: &str| text.lines().position(|l| l.contains(needle)).unwrap() + 1;
    let bad = text.replace("output:wire", "output:nowhere");
    let error = parse("of.toml", &bad).unwrap_err();
    assert_eq!(
        (error.key.as_str(), error.line),
        ("openflow.group[1].buckets[0]", line_of("weight:3"))
    );
    assert!(error.message.contains("output:nowhere"), "{error}");
    let bad = text.replace("\"select\"", "\"fast_failover\"");
    let error = parse("of.toml", &bad).unwrap_err();
    assert_eq!(error.key, "openflow.group[1].type");
    // A chain to a group below it, a loop, and a flow to a group that is not there.
    let bad = text.replace("id = 2", "id = 3");
    let error = parse("of.toml", &bad).unwrap_err();
    assert_eq!(error.key, "openflow.group[1]");
    assert!(error.fix.contains("in order"), "{error}");
    let bad = text.replace("dec_ttl,output:out", "group:2");
    assert!(parse("of.toml", &bad).unwrap_err().message.contains("loop"));
    let bad = text.replace("actions = \"group:1\"", "actions = \"group:7\"");
    let error = parse("of.toml", &bad).unwrap_err();
    assert_eq!(error.key, "openflow.flow[0].actions");
    assert!(error.message.contains("group:7"), "{error}");
}

#[test]
fn the_openflow_agent_is_configured_by_its_keys_with_errors_that_name_them() {
    let base =
        GOOD.replace("app = \"xconnect\"", "app = \"openflow\"") + "\n[openflow]\ntables = 2\n";
    let agent = |text: &str| match parse("of.toml", text).unwrap().app {
        AppConfig::OpenFlow(openflow) => openflow.agent,
        _ => panic!("not openflow"),
    };
    assert_eq!(agent(&base), None);
    let text = base.clone()
        + "listen = \"ptcp:6634\"\ncontrollers = [\"tcp:192.0.2.1:6653\"]\n\
           datapath_id = \"0x00000000000000ff\"\nfail_mode = \"secure\"\n";
    let config = agent(&text).unwrap();
    assert_eq!(config.listen, Some("127.0.0.1:6634".parse().unwrap()));
    assert_eq!(config.controllers, ["192.0.2.1:6653".parse().unwrap()]);
    assert_eq!(config.datapath_id, 255);
    assert_eq!(config.fail_mode, crate::openflow::FailMode::Secure);
    let standalone = agent(&text.replace("\"secure\"", "\"standalone\"")).unwrap();
    assert_eq!(standalone.fail_mode, crate::openflow::FailMode::Standalone);
    let default = agent(&(base.clone() + "datapath_id = 7\n")).unwrap();
    assert_eq!(default.listen, Some("127.0.0.1:6653".parse().unwrap()));
    for (bad, key) in [
        ("ptcp:6634", "openflow.listen"),
        ("tcp:192.0.2.1:6653", "openflow.controllers[0]"),
        ("0x00000000000000ff", "openflow.datapath_id"),
        ("secure", "openflow.fail_mode"),
    ] {
        let broken = match bad {
            "ptcp:6634" => "tcp:6634",
            "tcp:192.0.2.1:6653" => "tcp:controller.example:6653",
            "0x00000000000000ff" => "0xzz",
            _ => "open",
        };
        let error = parse("of.toml", &text.replace(bad, broken)).unwrap_err();
        assert_eq!(error.key, key, "{error}");
        assert_eq!(
            error.line,
            text.lines().position(|l| l.contains(bad)).unwrap() + 1
        );
        assert!(!error.fix.is_empty());
    }
}

#[test]
fn a_switch_takes_at_most_255_ports() {
    // A flow key holds the ingress port's index in one byte.
    let ports = |count: usize| -> String {
        (0..count)
            .map(|i| {
                format!("\n[[port]]\nname = \"p{i}\"\nbackend = \"pcap\"\nrx = \"in{i}.pcap\"\n")
            })
            .collect()
    };
    let text = |count: usize| {
        format!(
            "[switch]\napp = \"xconnect\"\n{}\n[xconnect]\npairs = [[\"p0\", \"p1\"]]\n",
            ports(count)
        )
    };
    assert_eq!(parse("max.toml", &text(255)).unwrap().ports.len(), 255);
    let error = error_of(&text(256));
    assert_eq!(error.key, "port[255].name");
    assert!(error.message.contains("at most 255 ports"), "{error}");
}
