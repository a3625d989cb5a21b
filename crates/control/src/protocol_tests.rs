//! The control protocol's parser and replies against fixtures.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::*;

fn ok(line: &str) -> Request {
    parse(line.as_bytes()).unwrap()
}

fn error(line: &[u8]) -> ProtocolError {
    parse(line).unwrap_err()
}

fn v4(text: &str, len: u8) -> Prefix {
    let addr: Ipv4Addr = text.parse().unwrap();
    Prefix::V4(Ipv4Prefix::new(addr.to_bits(), len).unwrap())
}

#[test]
fn every_command_parses() {
    assert_eq!(ok("help"), Request::Help);
    assert_eq!(ok("  ping \r"), Request::Ping);
    for (word, show) in [
        ("ports", Show::Ports),
        ("counters", Show::Counters),
        ("workers", Show::Workers),
        ("routes", Show::Routes),
        ("macs", Show::Macs),
        ("neighbours", Show::Neighbours),
        ("neighbors", Show::Neighbours),
        ("flows", Show::Flows),
        ("groups", Show::Groups),
        ("openflow", Show::OpenFlow),
    ] {
        assert_eq!(ok(&format!("show {word}")), Request::Show(show));
    }
    assert_eq!(
        ok("route add 10.0.0.0/8 via 198.18.1.1"),
        Request::RouteAdd {
            prefix: v4("10.0.0.0", 8),
            via: "198.18.1.1".parse().unwrap()
        }
    );
    let v6: Ipv6Addr = "2001:db8::".parse().unwrap();
    assert_eq!(
        ok("route del 2001:db8::/32"),
        Request::RouteDel(Prefix::V6(Ipv6Prefix::new(v6.to_bits(), 32).unwrap()))
    );
    assert_eq!(
        ok("route remove 0.0.0.0/0"),
        Request::RouteDel(v4("0.0.0.0", 0))
    );
    assert_eq!(
        ok("route load 1234 my routes.txt"),
        Request::RouteLoad(Upload {
            name: "my routes.txt".into(),
            bytes: 1234
        })
    );
    assert_eq!(
        ok("neighbour add 198.18.1.1 02:00:00:00:00:0a p1"),
        Request::NeighbourAdd(Neighbour {
            addr: "198.18.1.1".parse().unwrap(),
            mac: [2, 0, 0, 0, 0, 0x0a],
            port: "p1".into()
        })
    );
    assert_eq!(
        ok("neighbor del 2001:db8::1"),
        Request::NeighbourDel("2001:db8::1".parse().unwrap())
    );
    assert_eq!(ok("mac flush"), Request::MacFlush);
    for (words, show) in [
        ("route show", Show::Routes),
        ("mac show", Show::Macs),
        ("neighbour show", Show::Neighbours),
        ("neighbor show", Show::Neighbours),
        ("flow show", Show::Flows),
        ("group show", Show::Groups),
    ] {
        assert_eq!(ok(words), Request::Show(show), "{words}");
    }
    assert_eq!(
        ok("flow add priority=10 in_port=p0 ip_dst=10.0.0.0/8 actions=output:p1,count"),
        Request::FlowAdd(FlowRule {
            priority: 10,
            fields: vec![
                ("in_port".into(), "p0".into()),
                ("ip_dst".into(), "10.0.0.0/8".into())
            ],
            actions: vec!["output:p1".into(), "count".into()],
        })
    );
    assert_eq!(
        ok("flow del in_port=p0"),
        Request::FlowDel(FlowRule {
            priority: 0,
            fields: vec![("in_port".into(), "p0".into())],
            actions: vec![],
        })
    );
    assert_eq!(
        ok("group add id=1 type=select bucket=weight:2,output:p1 bucket=output:p0,group:2"),
        Request::GroupEdit(GroupEdit::Add(GroupRule {
            id: 1,
            kind: "select".into(),
            buckets: vec![
                vec!["weight:2".into(), "output:p1".into()],
                vec!["output:p0".into(), "group:2".into()],
            ],
        }))
    );
    assert_eq!(
        ok("group del id=7"),
        Request::GroupEdit(GroupEdit::Remove(7))
    );
    assert_eq!(ok("group del"), Request::GroupEdit(GroupEdit::RemoveAll));
    assert!(error(b"group add type=all").error.contains("id="));
    assert!(error(b"group del id=x").error.contains("id=N"));
    assert_eq!(
        ok("acl load 0 acl.txt"),
        Request::AclLoad(Upload {
            name: "acl.txt".into(),
            bytes: 0
        })
    );
    assert_eq!(ok("acl load 9 acl.txt").body_len(), 9);
    assert_eq!(ok("ping").body_len(), 0);
}

#[test]
fn requests_become_app_commands() {
    assert!(matches!(
        ok("route add 10.0.0.0/8 via 198.18.1.1").app_command(),
        Some(AppCommand::RouteAddV4 { .. })
    ));
    assert!(matches!(
        ok("mac flush").app_command(),
        Some(AppCommand::MacFlush)
    ));
    assert!(matches!(
        ok("show flows").app_command(),
        Some(AppCommand::ShowFlows)
    ));
    assert!(ok("show ports").app_command().is_none());
    assert!(ok("route load 1 f").app_command().is_none());
}

#[test]
fn unknown_words_are_named_with_what_is_accepted() {
    let e = error(b"frobnicate now");
    assert!(e.error.contains("`frobnicate`"), "{e}");
    assert!(e.fix.contains("help, ping, show"), "{e}");
    let e = error(b"show everything");
    assert!(e.error.contains("`everything`"), "{e}");
    assert!(e.fix.contains("ports, counters"), "{e}");
    let e = error(b"route add 10.0.0.0/8 198.18.1.1");
    assert!(e.fix.contains("route add PREFIX via ADDRESS"), "{e}");
    let e = error(b"ping pong");
    assert!(e.error.contains("0 more word"), "{e}");
}

#[test]
fn bad_values_are_refused() {
    assert!(
        error(b"route add 10.0.0.0/33 via 1.1.1.1")
            .error
            .contains("/33")
    );
    assert!(
        error(b"route add 10.0.0.0 via 1.1.1.1")
            .error
            .contains("not a prefix")
    );
    assert!(
        error(b"route add 10.0.0.0/8 via ::1")
            .error
            .contains("IP versions")
    );
    assert!(
        error(b"neighbour add 1.1.1.1 02:00:00:00:00 p0")
            .error
            .contains("MAC")
    );
    assert!(
        error(b"neighbour add 1.1.1.1 02:00:00:00:00:00:01 p0")
            .error
            .contains("MAC")
    );
    assert!(
        error(b"neighbour add 1.1.1.1 02:00:00:00:00:+1 p0")
            .error
            .contains("MAC")
    );
    assert!(error(b"flow add in_port=p0").error.contains("actions"));
    assert!(
        error(b"flow add priority=x actions=drop")
            .error
            .contains("priority")
    );
    assert!(
        error(b"flow add =x actions=drop")
            .error
            .contains("FIELD=VALUE")
    );
}

#[test]
fn a_prefix_with_host_bits_set_is_refused_naming_both_readings() {
    let e = error(b"route add 10.0.0.1/8 via 198.18.1.1");
    assert_eq!(e.error, "`10.0.0.1/8` has host bits set");
    assert_eq!(
        e.fix,
        "write the network, 10.0.0.0/8, or the host route, 10.0.0.1/32"
    );
    let e = error(b"route del 2001:db8::1/32");
    assert_eq!(
        e.fix,
        "write the network, 2001:db8::/32, or the host route, 2001:db8::1/128"
    );
    assert_eq!(
        ok("route del 10.0.0.1/32"),
        Request::RouteDel(v4("10.0.0.1", 32))
    );
}

#[test]
fn a_load_names_no_path_for_the_switch_to_open() {
    // The old form, a path the switch would open as root, is refused without touching it.
    let e = error(b"route load /etc/shadow");
    assert!(e.error.contains("does not open files"), "{e}");
    assert!(e.fix.contains("wirespeed ctl route load FILE"), "{e}");
    let e = error(b"acl load /etc/shadow");
    assert!(e.fix.contains("acl load BYTES NAME"), "{e}");
    let e = error(b"route load lots routes.txt");
    assert!(e.error.contains("`lots` is not a size"), "{e}");
    assert!(error(b"route load 12").error.contains("size and name"));
}

#[test]
fn a_flow_request_gives_priority_and_actions_once() {
    let e = error(b"flow add priority=1 priority=2 actions=drop");
    assert!(e.error.contains("priority is given twice"), "{e}");
    let e = error(b"flow add in_port=p0 actions=drop actions=output:p1");
    assert!(e.error.contains("actions is given twice"), "{e}");
}

#[test]
fn garbage_is_an_error_never_a_panic() {
    let e = error(b"\xff\xfe show ports");
    assert!(e.error.contains("UTF-8"), "{e}");
    assert!(error(b"").error.contains("empty"));
    assert!(error(b" \t ").error.contains("empty"));
    // Control characters are escaped and long words cut in the message.
    let e = error(format!("\u{1b}[2J{}", "x".repeat(1000)).as_bytes());
    assert!(e.error.contains("\\u{1b}"), "{e}");
    assert!(e.error.len() < 200, "{e}");
}

#[test]
fn replies_are_one_json_line() {
    let line = Response::Ok(json!({"applied": 2})).to_line();
    assert_eq!(line, "{\"ok\":true,\"result\":{\"applied\":2}}\n");
    let line = Response::error("bad \"word\"\n", "fix it").to_line();
    assert_eq!(line.matches('\n').count(), 1);
    let value: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(value["ok"], false);
    assert_eq!(value["error"], "bad \"word\"\n");
    assert_eq!(value["fix"], "fix it");
}

#[test]
fn feed_line_stops_after_one_line_so_content_can_follow() {
    let mut splitter = LineSplitter::new(10);
    let bytes = b"route\r\nrest";
    assert_eq!(
        splitter.feed_line(bytes),
        (7, Some(LineEvent::Line(b"route".to_vec())))
    );
    assert_eq!(splitter.feed_line(&bytes[7..]), (4, None));
    assert_eq!(
        splitter.feed_line(b"\n"),
        (1, Some(LineEvent::Line(b"rest".to_vec())))
    );
    assert_eq!(
        splitter.feed_line(&[b'x'; 12]),
        (11, Some(LineEvent::TooLong))
    );
}

#[test]
fn lines_are_cut_and_oversized_ones_discarded() {
    let mut splitter = LineSplitter::new(10);
    let mut out = Vec::new();
    splitter.feed(b"ping\r\nshow po", &mut out);
    assert_eq!(out, [LineEvent::Line(b"ping".to_vec())]);
    assert!(splitter.in_line());
    out.clear();
    // Exactly the limit is accepted; one byte more is not.
    splitter.feed(b"rts\n12345678901", &mut out);
    assert_eq!(
        out,
        [LineEvent::Line(b"show ports".to_vec()), LineEvent::TooLong]
    );
    out.clear();
    splitter.feed(&[b'x'; 100_000], &mut out);
    assert!(out.is_empty(), "one TooLong per line");
    splitter.feed(b"xx\nhelp\n", &mut out);
    assert_eq!(out, [LineEvent::Line(b"help".to_vec())]);
    assert!(!splitter.in_line());
    let Response::Error { error, .. } = too_long(MAX_LINE) else {
        panic!("too_long is an error")
    };
    assert!(error.contains("65536"), "{error}");
}

proptest::proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
        let _ = parse(&bytes);
    }

    #[test]
    fn arbitrary_words_never_panic(line in "(route|flow|show|neighbour|mac|acl|add|del|via|load|[0-9a-f:./=,]{0,20}| ){0,8}") {
        if let Err(e) = parse(line.as_bytes()) {
            proptest::prop_assert!(!e.error.is_empty() && !e.fix.is_empty());
        }
    }
}
