//! The OpenFlow 1.3 agent driven by Open vSwitch's `ovs-ofctl -O OpenFlow13`, end to end: a
//! `wirespeed switch` running the openflow app over AF_XDP in a lab's DuT namespace, its agent
//! listening on the namespace's loopback; what ovs-ofctl prints is checked, and frames sent
//! on the tester side go where the flows it installed say.
//!
//! Skips with a printed reason where namespaces cannot be made (not root) or where ovs-ofctl
//! is not installed (`scripts/setup-debian.sh` installs it); runs in CI, which is root.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use wirespeed_io::afpacket::AfPacketPort;
use wirespeed_lab::Testbed;
use wirespeed_packet::FramePool;
use wirespeed_testkit::frames::arp_request;
use wirespeed_testkit::ports::send;

mod common;
use common::*;

/// How long the test waits to be sure that frames do not arrive.
const QUIET: Duration = Duration::from_millis(300);

/// ovs-ofctl against the switch, 5 s at most.
fn ofctl(lab: &Testbed, command: &str, args: &[&str]) -> (bool, String) {
    ofctl_within(lab, 5, command, args)
}

fn ok(lab: &Testbed, command: &str, args: &[&str]) -> String {
    let (success, out) = ofctl(lab, command, args);
    assert!(success, "ovs-ofctl {command} {args:?} failed:\n{out}");
    out
}

/// The flow lines of `dump-flows` (the reply header line left out).
fn flow_lines(lab: &Testbed) -> Vec<String> {
    ok(lab, "dump-flows", &[])
        .lines()
        .filter(|l| l.contains("priority="))
        .map(str::to_string)
        .collect()
}

/// The switch's configuration, with `flows` flows a table.
fn config(lab: &Testbed, socket: &Path, flows: usize) -> String {
    format!(
        "[switch]\napp = \"openflow\"\ncontrol_socket = \"{}\"\n\n\
         [[port]]\nname = \"p0\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n\
         [[port]]\nname = \"p1\"\nbackend = \"afxdp\"\ninterface = \"{}\"\n\n\
         [openflow]\ntables = 2\nmiss = \"drop\"\ncache_entries = 1024\n\
         flows_per_table = {flows}\n\
         listen = \"ptcp:6653\"\ndatapath_id = \"0x00000000000000a1\"\n",
        socket.display(),
        lab.pairs[0].dut_if,
        lab.pairs[1].dut_if,
    )
}

/// A lab named `prefix` with a switch of `flows` flows a table whose agent answers `show`
/// (what it printed), its directory and control socket; `None` (printed why) without
/// ovs-ofctl or the rights to build a lab.
fn switch_with_agent(
    prefix: &str,
    flows: usize,
) -> Option<(
    Testbed,
    std::path::PathBuf,
    std::path::PathBuf,
    Switch,
    String,
)> {
    if Command::new("ovs-ofctl").arg("--version").output().is_err() {
        println!("skipped: ovs-ofctl is not installed (scripts/setup-debian.sh installs it)");
        return None;
    }
    let (lab, dir) = lab(prefix, 1)?;
    dut_loopback_up(&lab);
    let socket = dir.join("ctl.sock");
    let switch = Switch::start(&lab, &config(&lab, &socket, flows), &dir);
    wait_for_control(&socket);
    let deadline = Instant::now() + Duration::from_secs(10);
    let shown = loop {
        let (success, out) = ofctl(&lab, "show", &[]);
        if success || Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    Some((lab, dir, socket, switch, shown))
}

#[test]
fn ovs_ofctl_drives_the_openflow_app() {
    let Some((lab, dir, socket, mut switch, shown)) = switch_with_agent("wsofa", 65_536) else {
        return;
    };
    for want in ["dpid:00000000000000a1", "n_tables:2", "1(p0)", "2(p1)"] {
        assert!(shown.contains(want), "show lacks {want}:\n{shown}");
    }

    let mut pool = FramePool::new(4096, 2048).unwrap();
    let (mut t0, mut t1) = (tester_port(&lab, 0), tester_port(&lab, 1));
    let input = frames(40);
    let ours = |f: &[u8]| is_udp_to(f, TEST_PORT);
    send(&mut t0, &mut pool, &input);
    assert!(receive_during(&mut t1, &mut pool, QUIET, ours).is_empty());

    // add-flow: the frames go out of p1 with the MAC the flow sets.
    let to = mac_text(lab.pairs[1].tester_mac);
    let flow = format!(
        "cookie=0x5a,priority=10,in_port=1,udp,nw_dst=198.19.0.0/16,\
         actions=set_field:{to}->eth_dst,output:2"
    );
    ok(&lab, "add-flow", &[&flow]);
    send(&mut t0, &mut pool, &input);
    let expected: Vec<Vec<u8>> = input
        .iter()
        .map(|f| {
            let mut out = f.clone();
            out[0..6].copy_from_slice(&lab.pairs[1].tester_mac);
            out
        })
        .collect();
    assert_same(
        &receive_all(&mut t1, &mut pool, expected.len(), TEST_PORT),
        &expected,
    );
    let flows = flow_lines(&lab);
    assert_eq!(flows.len(), 1, "{flows:?}");
    // The flow's duration counts from its first batch, before the 40 frames crossed.
    assert!(!flows[0].contains("duration=0.000s"), "{flows:?}");
    for want in [
        "cookie=0x5a",
        "n_packets=40",
        "priority=10",
        "in_port=1",
        "nw_dst=198.19.0.0/16",
        "output:2",
        "eth_dst",
    ] {
        assert!(
            flows[0].contains(want),
            "dump-flows lacks {want}: {flows:?}"
        );
    }
    // The same flow, as `wirespeed ctl` shows it: one table behind both.
    let (_, ctl_flows) = ctl_at(&socket, &["flow", "show"]);
    assert!(ctl_flows.contains("ip_dst=198.19.0.0/16"), "{ctl_flows}");
    let (shown, connections) = ctl_at(&socket, &["show", "openflow"]);
    assert!(shown && connections.contains("flow mods"), "{connections}");

    // add-flows from a file, dump-aggregate, dump-tables.
    let file = dir.join("flows.txt");
    std::fs::write(
        &file,
        "table=0,priority=5,in_port=2,udp,actions=output:1\n\
         table=1,priority=1,ip,nw_src=10.0.0.0/8,actions=drop\n",
    )
    .unwrap();
    ok(&lab, "add-flows", &[file.to_str().unwrap()]);
    assert_eq!(flow_lines(&lab).len(), 3);
    let aggregate = ok(&lab, "dump-aggregate", &[]);
    assert!(
        aggregate.contains("flow_count=3") && aggregate.contains("packet_count=40"),
        "{aggregate}"
    );
    let tables = ok(&lab, "dump-tables", &[]);
    assert!(
        tables.contains("table 0") || tables.contains("  0:"),
        "{tables}"
    );
    let ports = ok(&lab, "dump-ports", &[]);
    assert!(
        ports.contains("port  1") || ports.contains("port 1"),
        "{ports}"
    );
    let descs = ok(&lab, "dump-ports-desc", &[]);
    assert!(
        descs.contains("1(p0)") && descs.contains("2(p1)"),
        "{descs}"
    );
    ok(&lab, "dump-groups", &[]);

    // mod-flows: the flow to p1 now floods (p1 is the only other port).
    ok(
        &lab,
        "mod-flows",
        &["in_port=1,udp,nw_dst=198.19.0.0/16,actions=flood"],
    );
    let modified = flow_lines(&lab);
    assert!(
        modified
            .iter()
            .any(|f| f.contains("nw_dst=198.19.0.0/16") && f.contains("FLOOD")),
        "{modified:?}"
    );
    send(&mut t0, &mut pool, &input);
    assert_eq!(
        receive_all(&mut t1, &mut pool, input.len(), TEST_PORT).len(),
        input.len()
    );

    // replace-flows --bundle: one transaction of strict deletes, modifies and adds leaves
    // the file's flows and no others, and the traffic follows the file.
    let replacement = dir.join("replace.txt");
    std::fs::write(
        &replacement,
        "priority=10,in_port=1,udp,nw_dst=198.19.0.0/16,actions=output:2\n\
         table=0,priority=6,in_port=2,tcp,actions=output:1\n\
         table=1,priority=1,ip,nw_src=10.0.0.0/8,actions=drop\n",
    )
    .unwrap();
    ok(
        &lab,
        "replace-flows",
        &[replacement.to_str().unwrap(), "--bundle"],
    );
    let replaced = flow_lines(&lab);
    assert_eq!(replaced.len(), 3, "{replaced:?}");
    for want in ["output:2", "tcp", "actions=drop"] {
        assert!(replaced.iter().any(|f| f.contains(want)), "{replaced:?}");
    }
    assert!(
        !replaced.iter().any(|f| f.contains("FLOOD")),
        "{replaced:?}"
    );
    send(&mut t0, &mut pool, &input);
    assert_same(
        &receive_all(&mut t1, &mut pool, input.len(), TEST_PORT),
        &input,
    );

    // del-flows --strict takes exactly one flow; it stops the traffic.
    let strict = ofctl(
        &lab,
        "del-flows",
        &["--strict", "priority=10,in_port=1,udp,nw_dst=198.19.0.0/16"],
    );
    assert!(strict.0, "{}", strict.1);
    assert_eq!(flow_lines(&lab).len(), 2);
    send(&mut t0, &mut pool, &input);
    assert!(receive_during(&mut t1, &mut pool, QUIET, ours).is_empty());
    // Non-strict del-flows of one table, then of all.
    ok(&lab, "del-flows", &["table=1"]);
    assert_eq!(flow_lines(&lab).len(), 1);
    ok(&lab, "del-flows", &[]);
    assert!(flow_lines(&lab).is_empty());

    // The action set and metadata across two tables, an address under a mask with holes:
    // table 0 writes the output and a new destination MAC into the set and metadata 5, table
    // 1 matches the metadata and writes a new source MAC; the set runs at the end.
    let [a, _, c, _] = input[0][30..34] else {
        unreachable!()
    };
    ok(
        &lab,
        "add-flow",
        &[&format!(
            "priority=20,in_port=1,udp,actions=write_actions(set_field:{to}->eth_dst,\
             output:2),write_metadata:0x5/0xff,goto_table:1"
        )],
    );
    let holes = format!("metadata=0x5/0xff,ip,nw_dst={a}.0.{c}.0/255.0.255.0");
    ok(
        &lab,
        "add-flow",
        &[&format!(
            "table=1,priority=5,{holes},actions=write_actions(set_field:02:00:00:00:00:99->eth_src)"
        )],
    );
    send(&mut t0, &mut pool, &input);
    let rewritten: Vec<Vec<u8>> = expected
        .iter()
        .map(|f| {
            let mut out = f.clone();
            out[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 0x99]);
            out
        })
        .collect();
    assert_same(
        &receive_all(&mut t1, &mut pool, rewritten.len(), TEST_PORT),
        &rewritten,
    );
    let flows = flow_lines(&lab).join("\n");
    for want in [
        "write_metadata:0x5/0xff",
        "write_actions(",
        "goto_table:1",
        "metadata=0x5/0xff",
        &format!("nw_dst={a}.0.{c}.0/255.0.255.0"),
    ] {
        assert!(flows.contains(want), "dump-flows lacks {want}:\n{flows}");
    }
    // Table 1 clears the set instead: nothing goes out.
    ok(
        &lab,
        "mod-flows",
        &[&format!("table=1,{holes},actions=clear_actions")],
    );
    assert!(flow_lines(&lab).join("\n").contains("clear_actions"));
    send(&mut t0, &mut pool, &input);
    assert!(receive_during(&mut t1, &mut pool, QUIET, ours).is_empty());
    ok(&lab, "del-flows", &[]);

    // ARP by operation and target address: the request for .77 crosses, the one for .78
    // does not.
    ok(
        &lab,
        "add-flow",
        &["priority=30,in_port=1,arp,arp_op=1,arp_tpa=192.0.2.77,actions=output:2"],
    );
    let sender = wirespeed_packet::wire::EthernetAddress(lab.pairs[0].tester_mac);
    let request =
        |target: u8| arp_request(sender, [192, 0, 2, 1].into(), [192, 0, 2, target].into());
    send(&mut t0, &mut pool, &[request(77), request(78)]);
    let ours_arp = |f: &[u8]| f.len() >= 42 && f[12..14] == [8, 6] && f[38..41] == [192, 0, 2];
    assert_same(
        &receive_during(&mut t1, &mut pool, QUIET, ours_arp),
        &[request(77)],
    );
    ok(&lab, "del-flows", &[]);

    // DSCP: the frames marked expedited forwarding (46) cross, the others do not.
    ok(
        &lab,
        "add-flow",
        &["priority=30,in_port=1,ip,ip_dscp=46,actions=output:2"],
    );
    let marked: Vec<Vec<u8>> = input
        .iter()
        .map(|f| {
            let mut f = f.clone();
            f[15] = 46 << 2;
            f[24..26].copy_from_slice(&[0, 0]);
            let sum = wirespeed_packet::checksum::internet_checksum(&f[14..34]);
            f[24..26].copy_from_slice(&sum.to_be_bytes());
            f
        })
        .collect();
    send(&mut t0, &mut pool, &input);
    assert!(receive_during(&mut t1, &mut pool, QUIET, ours).is_empty());
    send(&mut t0, &mut pool, &marked);
    assert_same(
        &receive_all(&mut t1, &mut pool, marked.len(), TEST_PORT),
        &marked,
    );
    // ovs-ofctl shows the DSCP as the TOS byte it makes.
    let shown = flow_lines(&lab).join("\n");
    assert!(shown.contains("nw_tos=184"), "{shown}");
    ok(&lab, "del-flows", &[]);

    groups_forward_as_their_buckets_say(&lab, &mut pool, (&mut t0, &mut t1), &input);

    // What the app cannot do is refused with the spec's error, which ovs-ofctl prints.
    let (success, out) = ofctl(
        &lab,
        "add-group",
        &["group_id=2,type=ff,bucket=watch_port:1,output:1"],
    );
    assert!(!success && out.contains("OFPGMFC_BAD_TYPE"), "{out}");

    // packet-out: out of a port, and through the tables as if received on port 1.
    let frame =
        "02000000000202000000000108004500001c0001000040117acbc6120001c613000100090009000800000000";
    let bytes: Vec<u8> = (0..frame.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&frame[i..i + 2], 16).unwrap())
        .collect();
    ok(&lab, "packet-out", &["controller", "output:2", frame]);
    assert_same(
        &receive_during(&mut t1, &mut pool, QUIET, ours),
        std::slice::from_ref(&bytes),
    );
    ok(&lab, "add-flow", &["priority=1,in_port=1,actions=output:2"]);
    ok(&lab, "packet-out", &["1", "table", frame]);
    assert_same(
        &receive_during(&mut t1, &mut pool, QUIET, ours),
        std::slice::from_ref(&bytes),
    );
    // packet-out with a rewrite: the frame leaves as its actions made it.
    let mut rewritten = bytes.clone();
    rewritten[..6].copy_from_slice(&[2, 0, 0, 0, 0, 0x77]);
    ok(
        &lab,
        "packet-out",
        &[
            "controller",
            "set_field:02:00:00:00:00:77->eth_dst,output:2",
            frame,
        ],
    );
    assert_same(
        &receive_during(&mut t1, &mut pool, QUIET, ours),
        &[rewritten],
    );

    let (success, out) = switch.interrupt();
    assert!(
        success && out.contains("conservation holds") && out.contains("openflow agent"),
        "{out}"
    );
}

/// add-group, dump-groups, dump-group-stats, mod-group and del-groups, and a flow
/// `actions=group:1` between them: an all group gives p1 two copies of every frame (one as it
/// came, one with the MAC its second bucket sets), the same group made a select group of those
/// two buckets gives each flow one of them, always the same; deleting the group deletes the
/// flow. Starts and ends with no flows.
fn groups_forward_as_their_buckets_say(
    lab: &Testbed,
    pool: &mut FramePool,
    (t0, t1): (&mut AfPacketPort, &mut AfPacketPort),
    input: &[Vec<u8>],
) {
    let to = mac_text(lab.pairs[1].tester_mac);
    let buckets = format!("bucket=output:2,bucket=set_field:{to}->eth_dst,output:2");
    ok(
        lab,
        "add-group",
        &[&format!("group_id=1,type=all,{buckets}")],
    );
    let (success, out) = ofctl(lab, "add-group", &["group_id=1,type=all,bucket=output:2"]);
    assert!(!success && out.contains("OFPGMFC_GROUP_EXISTS"), "{out}");
    ok(
        lab,
        "add-flow",
        &["priority=10,in_port=1,udp,actions=group:1"],
    );
    let rewritten = |frame: &Vec<u8>| {
        let mut out = frame.clone();
        out[0..6].copy_from_slice(&lab.pairs[1].tester_mac);
        out
    };
    send(t0, pool, input);
    let mut got = receive_all(t1, pool, 2 * input.len(), TEST_PORT);
    let mut want: Vec<Vec<u8>> = input
        .iter()
        .cloned()
        .chain(input.iter().map(rewritten))
        .collect();
    // The copies leave after their batch's originals: the same frames, another order.
    got.sort();
    want.sort();
    assert_same(&got, &want);
    let groups = ok(lab, "dump-groups", &[]);
    assert!(
        groups.contains("group_id=1,type=all,bucket=actions=output:2,bucket=actions=set_field:"),
        "{groups}"
    );
    let stats = ok(lab, "dump-group-stats", &[]);
    for want in [
        "group_id=1",
        "ref_count=1",
        "packet_count=40",
        "bucket1:packet_count=40",
    ] {
        assert!(
            stats.contains(want),
            "dump-group-stats lacks {want}: {stats}"
        );
    }

    let weighted = buckets.replace("bucket=", "bucket=weight:1,");
    ok(
        lab,
        "mod-group",
        &[&format!("group_id=1,type=select,{weighted}")],
    );
    send(t0, pool, input);
    let got = receive_all(t1, pool, input.len(), TEST_PORT);
    // Each flow (addresses and ports) leaves with one MAC, the flows with both.
    let mut mac_of = std::collections::HashMap::new();
    for frame in &got {
        let mac = &frame[0..6];
        let before = mac_of.insert(frame[26..38].to_vec(), mac.to_vec());
        assert!(before.is_none_or(|b| b == mac), "a flow took two buckets");
    }
    let macs: std::collections::HashSet<_> = mac_of.values().collect();
    assert_eq!(macs.len(), 2, "8 flows over 2 buckets took {macs:?}");
    let mut restored: Vec<Vec<u8>> = got
        .iter()
        .map(|f| {
            let mut f = f.clone();
            f[0..6].copy_from_slice(&input[0][0..6]);
            f
        })
        .collect();
    let mut sent = input.to_vec();
    restored.sort();
    sent.sort();
    assert_same(&restored, &sent);
    // ovs-ofctl leaves a select bucket's weight out when it is 1, the default.
    let groups = ok(lab, "dump-groups", &[]);
    assert!(
        groups.contains("group_id=1,type=select,bucket=actions=output:2"),
        "{groups}"
    );
    // A modify keeps the group's counts.
    let stats = ok(lab, "dump-group-stats", &[]);
    assert!(stats.contains("packet_count=80"), "{stats}");

    ok(lab, "del-groups", &["group_id=1"]);
    assert!(!ok(lab, "dump-groups", &[]).contains("group_id"));
    assert!(flow_lines(lab).is_empty());
    send(t0, pool, input);
    assert!(receive_during(t1, pool, QUIET, |f| is_udp_to(f, TEST_PORT)).is_empty());
}

/// The flow of host `i` of the many-flows test: a /32 in 10.0.0.0/16.
fn host_flow(i: usize) -> String {
    format!(
        "priority=10,ip,nw_dst=10.0.{}.{},actions=output:2",
        i >> 8,
        i & 255
    )
}

#[test]
fn many_flows_pipelined_or_bundled_counted_and_deleted_whatever_their_number() {
    const FLOWS: usize = 25_000;
    let Some((lab, dir, _, mut switch, shown)) = switch_with_agent("wsofm", FLOWS) else {
        return;
    };
    assert!(
        shown.contains("n_tables:2"),
        "the agent never answered:\n{shown}"
    );
    // One add-flows file, pipelined, its last flow one too many: the app refuses it in its
    // run, which ovs-ofctl prints (it stops sending at the first error, so the refusal is
    // last; the agent's tests refuse one in the middle of a run), every other flow is in.
    let lines: Vec<String> = (0..=FLOWS).map(host_flow).collect();
    let file = dir.join("flows.txt");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let began = Instant::now();
    let (success, out) = ofctl_within(&lab, 60, "add-flows", &[file.to_str().unwrap()]);
    assert!(!success && out.contains("OFPFMFC_TABLE_FULL"), "{out}");
    println!("{FLOWS} flows added in {:?}", began.elapsed());
    let long = |command: &str, args: &[&str]| {
        let (success, out) = ofctl_within(&lab, 60, command, args);
        assert!(success, "ovs-ofctl {command} {args:?} failed:\n{out}");
        out
    };
    let aggregate = long("dump-aggregate", &[]);
    assert!(
        aggregate.contains(&format!("flow_count={FLOWS}")),
        "{aggregate}"
    );
    // Statistics of every flow, in parts: each flow once.
    let dumped = long("dump-flows", &[]);
    let mut hosts: Vec<&str> = dumped
        .lines()
        .filter_map(|l| l.split("nw_dst=").nth(1))
        .map(|rest| rest.split([' ', ',']).next().unwrap_or(rest))
        .collect();
    hosts.sort_unstable();
    hosts.dedup();
    assert_eq!(hosts.len(), FLOWS);
    // Bundles (`--bundle`: no barrier per flow), over more than one part of a commit: the
    // last 2000 hosts sent to port 1 instead, then one flow too many; the table is full, so
    // nothing of the bundle applies, not even the changes that would have fitted.
    let to_port_1: Vec<String> = (FLOWS - 2000..FLOWS)
        .map(|i| host_flow(i).replace("output:2", "output:1"))
        .collect();
    let bundle = dir.join("bundle.txt");
    let refused = [to_port_1.clone(), vec![host_flow(FLOWS)]].concat();
    std::fs::write(&bundle, refused.join("\n") + "\n").unwrap();
    let (success, out) = ofctl_within(
        &lab,
        60,
        "add-flows",
        &[bundle.to_str().unwrap(), "--bundle"],
    );
    assert!(
        !success && out.contains("OFPFMFC_TABLE_FULL") && out.contains("OFPBFC_MSG_FAILED"),
        "{out}"
    );
    // 10.0.96.0/21 is hosts 24576..26623: the last 424 of the table.
    let on_port = |port: u32| {
        let dumped = long("dump-flows", &["ip,nw_dst=10.0.96.0/21"]);
        dumped.matches(&format!("actions=output:{port}")).count()
    };
    assert_eq!(
        (on_port(2), on_port(1)),
        (FLOWS - 24576, 0),
        "a refused bundle changed flows"
    );
    // Without the one too many, the bundle applies whole.
    std::fs::write(&bundle, to_port_1.join("\n") + "\n").unwrap();
    let began = Instant::now();
    long("add-flows", &[bundle.to_str().unwrap(), "--bundle"]);
    println!("a bundle of 2000 flows committed in {:?}", began.elapsed());
    assert_eq!((on_port(2), on_port(1)), (0, FLOWS - 24576));
    let aggregate = long("dump-aggregate", &[]);
    assert!(
        aggregate.contains(&format!("flow_count={FLOWS}")),
        "{aggregate}"
    );
    // A non-strict delete takes exactly the flows it covers: 10.0.0.0/18, 64 x 256 hosts.
    long("del-flows", &["ip,nw_dst=10.0.0.0/18"]);
    let aggregate = long("dump-aggregate", &[]);
    assert!(
        aggregate.contains(&format!("flow_count={}", FLOWS - 64 * 256)),
        "{aggregate}"
    );
    let kept = long("dump-aggregate", &["ip,nw_dst=10.0.64.0/18"]);
    assert!(
        kept.contains(&format!("flow_count={}", FLOWS - 64 * 256)),
        "{kept}"
    );
    // replace-flows --bundle over the 8 616 flows left: the file drops the first 1 000 and
    // sends the last 2 000 back to port 2, so ovs-ofctl bundles 1 000 strict deletes and
    // 2 000 strict modifies, each of which finds its one flow without reading the table.
    let replacement: Vec<String> = (64 * 256 + 1000..FLOWS).map(host_flow).collect();
    std::fs::write(&bundle, replacement.join("\n") + "\n").unwrap();
    let began = Instant::now();
    long("replace-flows", &[bundle.to_str().unwrap(), "--bundle"]);
    println!(
        "replace-flows of 1000 deletes and 2000 modifies in {:?}",
        began.elapsed()
    );
    assert_eq!((on_port(2), on_port(1)), (FLOWS - 24576, 0));
    let aggregate = long("dump-aggregate", &[]);
    assert!(
        aggregate.contains(&format!("flow_count={}", replacement.len())),
        "{aggregate}"
    );

    let (success, out) = switch.interrupt();
    assert!(success && out.contains("conservation holds"), "{out}");
}
