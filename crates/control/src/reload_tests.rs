use super::*;
use crate::config::parse;

const ROUTER: &str = r#"
[switch]
app = "router"
cores = [1]

[[port]]
name = "p0"
backend = "pcap"
rx = "in.pcap"

[[port]]
name = "p1"
backend = "pcap"
tx = "out.pcap"

[[router.interface]]
port = "p0"
addresses = ["198.18.0.254/24"]

[[router.interface]]
port = "p1"
addresses = ["198.18.1.254/24"]

[[router.neighbour]]
port = "p1"
address = "198.18.1.1"
mac = "02:00:00:00:00:01"

[[router.route]]
prefix = "10.0.0.0/8"
via = ["198.18.1.1"]

[[router.route]]
prefix = "10.1.0.0/16"
via = ["198.18.1.1"]

[acl]
[[acl.rule]]
action = "deny"
proto = "udp"
dst_port = 53
"#;

const TWO_PORTS: &str = "\n[[port]]\nname = \"p0\"\nbackend = \"pcap\"\nrx = \"in.pcap\"\n\n\
                         [[port]]\nname = \"p1\"\nbackend = \"pcap\"\ntx = \"out.pcap\"\n";

fn router(text: &str) -> Config {
    parse("router.toml", text).unwrap()
}

fn whats(changes: &[Change]) -> Vec<&str> {
    changes.iter().map(|c| c.what.as_str()).collect()
}

#[test]
fn an_unchanged_file_changes_nothing() {
    let config = router(ROUTER);
    assert!(changes(&config, &config).is_empty());
    assert!(restart_keys(&config, &config).is_empty());
}

#[test]
fn routes_change_by_difference_with_neighbours_around_them() {
    let old = router(ROUTER);
    let text = ROUTER
        .replace(
            "prefix = \"10.1.0.0/16\"\nvia = [\"198.18.1.1\"]",
            "prefix = \"10.2.0.0/16\"\nvia = [\"198.18.1.2\"]",
        )
        .replace(
            "prefix = \"10.0.0.0/8\"\nvia = [\"198.18.1.1\"]",
            "prefix = \"10.0.0.0/8\"\nvia = [\"198.18.1.1\", \"198.18.1.2\"]",
        )
        + "\n[[router.neighbour]]\nport = \"p1\"\naddress = \"198.18.1.2\"\nmac = \"02:00:00:00:00:02\"\n";
    let new = router(&text);
    let planned = changes(&old, &new);
    assert_eq!(
        whats(&planned),
        [
            "neighbour 198.18.1.2 at 02:00:00:00:00:02 on p1 added",
            "route 10.0.0.0/8 via 198.18.1.1, 198.18.1.2 changed (was via 198.18.1.1)",
            "route 10.2.0.0/16 via 198.18.1.2 added",
            "route 10.1.0.0/16 removed (was via 198.18.1.1)",
        ]
    );
    assert!(restart_keys(&old, &new).is_empty());
    // Recorded change by change, the running configuration ends as the new one.
    let mut running = old.clone();
    for change in &planned {
        assert!(!change.commands(&running).unwrap().is_empty());
        change.record(&mut running);
    }
    assert!(changes(&running, &new).is_empty());
}

#[test]
fn a_neighbour_that_moves_port_is_cleared_first_and_a_gone_one_last() {
    let old = router(ROUTER);
    let moved = ROUTER.replace(
        "port = \"p1\"\naddress = \"198.18.1.1\"",
        "port = \"p0\"\naddress = \"198.18.1.1\"",
    );
    let planned = changes(&old, &router(&moved));
    assert_eq!(planned.len(), 1);
    let commands = planned[0].commands(&old).unwrap();
    assert!(
        matches!(&commands[..], [AppCommand::NeighbourRemove(_), AppCommand::NeighbourAdd(n)] if n.port == "p0"),
        "{commands:?}"
    );
    let gone = ROUTER.replace(
        "[[router.neighbour]]\nport = \"p1\"\naddress = \"198.18.1.1\"\nmac = \"02:00:00:00:00:01\"\n",
        "",
    );
    let planned = changes(&old, &router(&gone));
    assert_eq!(
        whats(&planned),
        ["neighbour 198.18.1.1 removed (was at 02:00:00:00:00:01 on p1)"]
    );
}

#[test]
fn acl_rules_are_swapped_whole_and_its_default_needs_a_restart() {
    let old = router(ROUTER);
    let new = router(&ROUTER.replace("dst_port = 53", "dst_port = 54"));
    assert_eq!(
        whats(&changes(&old, &new)),
        ["acl replaced: 1 rule(s), was 1"]
    );
    let new = router(&ROUTER.replace("[acl]\n", "[acl]\ndefault = \"deny\"\n"));
    assert!(changes(&old, &new).is_empty());
    assert_eq!(restart_keys(&old, &new), ["acl.default"]);
}

#[test]
fn ports_cores_and_the_app_are_restart_keys() {
    let old = router(ROUTER);
    let new = router(
        &ROUTER
            .replace("cores = [1]", "cores = [0]")
            .replace("tx = \"out.pcap\"", "tx = \"other.pcap\""),
    );
    assert_eq!(restart_keys(&old, &new), ["switch.cores", "port[1]"]);
    let bridge = router(&format!("[switch]\napp = \"bridge\"\n{TWO_PORTS}"));
    assert!(restart_keys(&old, &bridge).contains(&"switch.app".to_string()));
    assert!(changes(&old, &bridge).is_empty());
}

#[test]
fn the_mac_age_and_flows_change_at_run_time() {
    let bridge = format!("[switch]\napp = \"bridge\"\n{TWO_PORTS}\n[bridge]\nage_seconds = 300\n");
    let (old, new) = (router(&bridge), router(&bridge.replace("= 300", "= 20")));
    assert_eq!(
        whats(&changes(&old, &new)),
        ["bridge.age_seconds 300 -> 20"]
    );

    let openflow = format!(
        "[switch]\napp = \"openflow\"\n{TWO_PORTS}\n[openflow]\n\n\
                    [[openflow.flow]]\npriority = 10\nmatch = \"in_port=p0\"\nactions = \"output:p1\"\n\n\
                    [[openflow.flow]]\npriority = 5\nmatch = \"in_port=p1\"\nactions = \"drop\"\n"
    );
    let old = router(&openflow);
    let new = router(
        &openflow
            .replace("actions = \"output:p1\"", "actions = \"drop\"")
            .replace("priority = 5", "priority = 6"),
    );
    let planned = changes(&old, &new);
    assert_eq!(
        whats(&planned),
        [
            "flow priority=10 table=0,in_port=p0 actions=drop changed",
            "flow priority=6 table=0,in_port=p1 actions=drop added",
            "flow priority=5 table=0,in_port=p1 actions=drop removed",
        ]
    );
    let mut running = old.clone();
    for change in &planned {
        change.record(&mut running);
    }
    assert!(changes(&running, &new).is_empty());
}
