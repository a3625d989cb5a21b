//! The ACL stage in front of a forwarding decision, over the memory-port rig: first match wins,
//! prefixes, port ranges, protocols, the default action, per-rule hit counters, the decision
//! cache, and hostile frames. Every scenario ends with the pool whole.

use std::net::{Ipv4Addr, Ipv6Addr};

use wirespeed_dataplane::app::{App, Context};
use wirespeed_dataplane::stage::Parse;
use wirespeed_dataplane::stage::acl::{Acl, AclAction, AclConfig, AclRule, IpPrefix};
use wirespeed_packet::flow_key::FlowKey;
use wirespeed_packet::{Batch, DropReason};
use wirespeed_testkit::frames::{FrameBuilder, L3, L4};
use wirespeed_testkit::rig::Rig;

/// Parse, ACL, then port 0 <-> port 1: the smallest "forwarder with a firewall".
struct Firewall {
    parse: Parse,
    acl: Acl,
}

impl App for Firewall {
    fn name(&self) -> &'static str {
        "firewall"
    }

    fn process(&mut self, ctx: &mut Context<'_>, batch: &mut Batch) {
        self.parse.process(ctx.pool, batch, ctx.keys);
        self.acl.process(batch, ctx.keys);
        let (descs, metas) = batch.split_mut();
        for (desc, meta) in descs.iter().zip(metas.iter_mut()) {
            if meta.drop.is_none() {
                meta.out_port = desc.port ^ 1;
            }
        }
    }

    fn counters(&self, out: &mut Vec<(&'static str, u64)>) {
        self.acl.append_counters(out);
        for (i, hits) in self.acl.rule_hits().iter().enumerate() {
            // Names are static; the test only needs the first few.
            const NAMES: [&str; 4] = ["rule0", "rule1", "rule2", "rule3"];
            if let Some(name) = NAMES.get(i) {
                out.push((name, *hits));
            }
        }
    }
}

fn firewall(rules: Vec<AclRule>, default: AclAction) -> Rig {
    let config = AclConfig {
        rules,
        default,
        cache_entries: 64,
        cache_insert_one_in: 1,
    };
    let app = Firewall {
        parse: Parse::new(),
        acl: Acl::new(&config),
    };
    Rig::new(Box::new(app), 2, 32)
}

fn udp(src: Ipv4Addr, dst: Ipv4Addr, src_port: u16, dst_port: u16) -> Vec<u8> {
    FrameBuilder::ipv4_udp()
        .with_l3(L3::Ipv4 { src, dst })
        .with_l4(L4::Udp { src_port, dst_port })
        .frame_len(60)
        .build()
}

fn tcp(src: Ipv4Addr, dst: Ipv4Addr, src_port: u16, dst_port: u16) -> Vec<u8> {
    FrameBuilder::ipv4_udp()
        .with_l3(L3::Ipv4 { src, dst })
        .with_l4(L4::Tcp { src_port, dst_port })
        .frame_len(60)
        .build()
}

fn counter(rig: &Rig, name: &str) -> u64 {
    rig.app_counters()
        .into_iter()
        .find(|(n, _)| *n == name)
        .map_or(0, |(_, v)| v)
}

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 2);
const C: Ipv4Addr = Ipv4Addr::new(192, 168, 7, 9);

#[test]
fn the_first_matching_rule_wins() {
    // Deny 10.0.1.0/24 first, then permit 10.0.0.0/8: a packet to 10.0.1.2 matches both.
    let rules = vec![
        AclRule {
            dst: IpPrefix::v4(Ipv4Addr::new(10, 0, 1, 0), 24),
            ..AclRule::any(AclAction::Deny)
        },
        AclRule {
            dst: IpPrefix::v4(Ipv4Addr::new(10, 0, 0, 0), 8),
            ..AclRule::any(AclAction::Permit)
        },
    ];
    let mut rig = firewall(rules, AclAction::Deny);
    let to_b = udp(A, B, 1000, 53);
    let to_a = udp(B, A, 1000, 53);
    let out = rig.exchange(0, &[to_b.clone(), to_a.clone(), to_b.clone()]);
    assert_eq!(out[1], vec![to_a]);
    assert_eq!(
        rig.worker.counters().drops[DropReason::AclDenied as usize],
        2
    );
    assert_eq!(counter(&rig, "rule0"), 2);
    assert_eq!(counter(&rig, "rule1"), 1);
    assert_eq!(counter(&rig, "acl.default_hits"), 0);
    // The second packet to B was decided from the cache, and still counted on its rule.
    assert_eq!(counter(&rig, "acl.cache_hits"), 1);
    assert!(rig.finish().holds());

    // The same rules in the other order: the permit shadows the deny.
    let rules = vec![
        AclRule {
            dst: IpPrefix::v4(Ipv4Addr::new(10, 0, 0, 0), 8),
            ..AclRule::any(AclAction::Permit)
        },
        AclRule {
            dst: IpPrefix::v4(Ipv4Addr::new(10, 0, 1, 0), 24),
            ..AclRule::any(AclAction::Deny)
        },
    ];
    let mut rig = firewall(rules, AclAction::Deny);
    let out = rig.exchange(0, std::slice::from_ref(&to_b));
    assert_eq!(out[1], vec![to_b]);
    assert!(rig.finish().holds());
}

#[test]
fn prefixes_port_ranges_and_protocols() {
    let rules = vec![
        // TCP to 192.168.0.0/16, ports 20..=23.
        AclRule {
            dst: IpPrefix::v4(Ipv4Addr::new(192, 168, 0, 0), 16),
            protocol: Some(6),
            dst_ports: 20..=23,
            ..AclRule::any(AclAction::Deny)
        },
        // UDP from 10.0.0.0/31 with source ports 1000..=1999.
        AclRule {
            src: IpPrefix::v4(Ipv4Addr::new(10, 0, 0, 0), 31),
            protocol: Some(17),
            src_ports: 1000..=1999,
            ..AclRule::any(AclAction::Deny)
        },
    ];
    let mut rig = firewall(rules, AclAction::Permit);
    let cases = [
        (tcp(A, C, 5000, 22), false),
        (tcp(A, C, 5000, 24), true),
        (udp(A, C, 5000, 22), true),
        (tcp(A, Ipv4Addr::new(192, 169, 0, 1), 5000, 22), true),
        (udp(A, C, 1000, 9), false),
        (udp(A, C, 1999, 9), false),
        (udp(A, C, 2000, 9), true),
        (udp(Ipv4Addr::new(10, 0, 0, 2), C, 1500, 9), true),
        (tcp(A, B, 1500, 9), true),
    ];
    for (frame, passes) in &cases {
        let out = rig.exchange(0, std::slice::from_ref(frame));
        let expected = if *passes { vec![frame.clone()] } else { vec![] };
        assert_eq!(out[1], expected, "{frame:02x?}");
    }
    assert_eq!(counter(&rig, "acl.denied"), 3);
    assert_eq!(counter(&rig, "acl.permitted"), 6);
    assert_eq!(counter(&rig, "rule0"), 1);
    assert_eq!(counter(&rig, "rule1"), 2);
    assert_eq!(counter(&rig, "acl.default_hits"), 6);
    assert!(rig.finish().holds());
}

#[test]
fn ipv6_prefixes_and_the_default_action() {
    let net = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0);
    let rules = vec![AclRule {
        src: IpPrefix::v6(net, 32),
        ..AclRule::any(AclAction::Permit)
    }];
    let mut rig = firewall(rules, AclAction::Deny);
    let inside = FrameBuilder::ipv6_udp().frame_len(80).build();
    let outside = FrameBuilder::ipv6_udp()
        .with_l3(L3::Ipv6 {
            src: Ipv6Addr::new(0x2001, 0xdb9, 0, 0, 0, 0, 0, 1),
            dst: net,
        })
        .frame_len(80)
        .build();
    // An IPv4 packet is outside every IPv6 prefix: the default (deny) decides.
    let v4 = udp(A, B, 1, 2);
    let out = rig.exchange(0, &[inside.clone(), outside, v4]);
    assert_eq!(out[1], vec![inside]);
    assert_eq!(counter(&rig, "acl.default_hits"), 2);
    assert!(rig.finish().holds());
}

#[test]
fn replacing_the_rules_invalidates_cached_decisions() {
    let mut acl = Acl::new(&AclConfig {
        cache_insert_one_in: 1,
        ..AclConfig::default()
    });
    let frame = udp(A, B, 1, 2);
    let mut key = FlowKey::default();
    let mut meta = wirespeed_packet::Meta::EMPTY;
    wirespeed_packet::parse(&frame, 0, &mut meta, &mut key).unwrap();
    let mut batch = Batch::new(4);
    batch.push_with_meta(wirespeed_packet::Desc::default(), meta);
    acl.process(&mut batch, &[key]);
    assert_eq!(batch.meta()[0].drop, None);
    acl.set_rules(
        &[AclRule {
            dst: IpPrefix::v4(B, 32),
            ..AclRule::any(AclAction::Deny)
        }],
        AclAction::Permit,
    );
    let mut batch = Batch::new(4);
    batch.push_with_meta(wirespeed_packet::Desc::default(), meta);
    acl.process(&mut batch, &[key]);
    assert_eq!(batch.meta()[0].drop, Some(DropReason::AclDenied));
    assert_eq!(acl.rule_hits(), &[1]);
    assert_eq!(acl.trace(&key).to_string(), "acl: rule 0 deny");
    let other = FlowKey {
        ip_dst: FlowKey::map_ipv4(A),
        ..key
    };
    assert_eq!(acl.trace(&other).to_string(), "acl: default permit");
}

#[test]
fn hostile_frames_never_panic_and_the_pool_stays_whole() {
    let rules = vec![AclRule {
        protocol: Some(17),
        dst_ports: 0..=100,
        ..AclRule::any(AclAction::Deny)
    }];
    let mut rig = firewall(rules, AclAction::Permit);
    let good = udp(A, B, 1, 200);
    let mut frames = Vec::new();
    for cut in 0..good.len() {
        frames.push(good[..cut].to_vec());
    }
    for i in 0..good.len() {
        let mut bad = good.clone();
        bad[i] ^= 0xff;
        frames.push(bad);
    }
    frames.push(vec![0xff; 1500]);
    for chunk in frames.chunks(32) {
        rig.exchange(0, chunk);
    }
    let counters = rig.worker.counters().clone();
    assert_eq!(counters.rx_packets, frames.len() as u64);
    assert_eq!(
        counters.rx_packets,
        counters.tx_packets + counters.dropped()
    );
    assert!(rig.finish().holds());
}
