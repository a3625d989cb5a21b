//! The parser against Wireshark: frames built by scapy (an independent generator), dissected by
//! tshark (the oracle) and by [`parse`]; the verdict (malformed or not) and every field of the
//! flow key must agree, frame by frame.
//!
//! `conformance/oracle.py` builds the corpus (every header class the parser knows, valid and
//! malformed, and seeded random headers), runs tshark and prints what it found in the key's
//! terms; this test prints the same words from the parser's key and compares. Where wirespeed
//! decides differently on purpose, the case is listed in [`POLICY`] with the reason, and the test
//! checks that it still differs (a stale entry fails too). Both tools come from Debian
//! (`python3-scapy`, `tshark`), installed by `make setup`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::Ipv6Addr;
use std::process::Command;

use wirespeed_packet::{FlowKey, Meta, parse};

/// Cases where wirespeed's verdict differs from Wireshark's on purpose.
const POLICY: &[(&str, &str)] = &[
    (
        "ipv4-option-overruns",
        "an option running past the header: Wireshark warns and reads on, wirespeed drops it \
         (bad_ipv4_header) as Linux does (ip_options_compile, RFC 791 3.1)",
    ),
    (
        "ipv4-option-zero-length",
        "an option length below 2 never moves on: Wireshark warns, wirespeed drops, as Linux",
    ),
    (
        "ipv4-option-no-length-byte",
        "an option type without its length byte: Wireshark warns, wirespeed drops, as Linux",
    ),
    (
        "vlan-9-ipv4-udp",
        "VLAN stacks are bounded at 8 tags, as Linux bounds them (VLAN_MAX_DEPTH); a deeper \
         stack is dropped as vlan_too_deep, Wireshark reads any depth",
    ),
    (
        "ipv6-payload-length-beyond-frame",
        "a payload length beyond the frame: Wireshark dissects what is there, wirespeed drops \
         it (bad_ipv6_header) as Linux does (ipv6_rcv), since the packet is truncated",
    ),
];

/// The words the oracle prints, from the parser's result.
fn words(frame: &[u8]) -> String {
    let mut meta = Meta::EMPTY;
    let mut key = FlowKey::EMPTY;
    if parse(frame, 0, &mut meta, &mut key).is_err() {
        return "verdict=malformed".into();
    }
    let mac = |m: [u8; 6]| {
        m.iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":")
    };
    let vlans = meta.vlan[..usize::from(meta.vlan_depth)]
        .iter()
        .map(|tci| (tci & 0x0fff).to_string())
        .collect::<Vec<_>>();
    let vlans = if vlans.is_empty() {
        "-".to_string()
    } else {
        vlans.join(",")
    };
    let address = |bytes: [u8; 16], v4: Option<std::net::Ipv4Addr>| {
        if meta.flags & Meta::FLAG_IPV6 != 0 {
            Ipv6Addr::from(bytes).to_string()
        } else {
            v4.map_or("-".into(), |a| a.to_string())
        }
    };
    let fragment = if key.flags & FlowKey::FLAG_LATER_FRAGMENT != 0 {
        "later"
    } else if key.flags & FlowKey::FLAG_FRAGMENT != 0 {
        "first"
    } else {
        "no"
    };
    let mut out = String::new();
    write!(
        out,
        "verdict=ok eth_src={} eth_dst={} ethertype={:#06x} vlans={vlans} ip_src={} ip_dst={} \
         ip_proto={} fragment={fragment} l4_src={} l4_dst={}",
        mac(key.src_mac.0),
        mac(key.dst_mac.0),
        key.ethertype,
        address(key.ip_src, key.ipv4_src()),
        address(key.ip_dst, key.ipv4_dst()),
        key.ip_proto,
        key.l4_src,
        key.l4_dst,
    )
    .unwrap();
    out
}

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn the_parser_agrees_with_wireshark() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/conformance/oracle.py");
    let output = Command::new("/usr/bin/python3")
        .arg(script)
        .arg(env!("CARGO_TARGET_TMPDIR"))
        .output()
        .expect("/usr/bin/python3 runs the oracle: run `make setup` (python3-scapy, tshark)");
    assert!(
        output.status.success(),
        "the oracle failed (run `make setup` for python3-scapy and tshark): {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let policy: BTreeMap<&str, &str> = POLICY.iter().copied().collect();
    let (mut cases, mut disagreements, mut stale) = (0, Vec::new(), Vec::new());
    let oracle = String::from_utf8(output.stdout).unwrap();
    for line in oracle.lines() {
        let [name, frame, expected] = line.splitn(3, '\t').collect::<Vec<_>>()[..] else {
            panic!("not an oracle line: {line:?}");
        };
        cases += 1;
        let found = words(&hex(frame));
        match (found == expected, policy.contains_key(name)) {
            (false, false) => disagreements.push(format!(
                "{name}\n  tshark:    {expected}\n  wirespeed: {found}\n  frame:     {frame}"
            )),
            (true, true) => stale.push(name),
            _ => {}
        }
    }
    println!("{cases} frames compared with tshark");
    assert!(cases >= 100, "the oracle printed only {cases} cases");
    assert!(
        disagreements.is_empty(),
        "{} of {cases} frames disagree with tshark:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
    assert!(
        stale.is_empty(),
        "policy differences that no longer differ (remove them from POLICY): {stale:?}"
    );
}
