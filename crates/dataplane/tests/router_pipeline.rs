//! The router's pipeline against itself: passes skipped for batches that do not need them and
//! the fused fast path for the common packets must leave every output byte and counter as the
//! full pipeline would, for random mixes of every kind of frame the router handles. Topology
//! and helpers as in `router.rs`.

use proptest::prelude::*;
use wirespeed_dataplane::app::router::{Prefix, Router, RouterConfig};
use wirespeed_packet::wire::arp;
use wirespeed_testkit::frames::{FrameBuilder, L3, L4, arp_request};
use wirespeed_testkit::rig::Rig;

mod router_common;
use router_common::*;

/// What every port put out after each exchange through a router built from `config()`,
/// traced (every stage's pass over every batch) or not (passes no packet needs are skipped).
fn outputs_of(traced: bool, exchanges: &[(usize, Vec<Vec<u8>>)]) -> Vec<Vec<Vec<Vec<u8>>>> {
    let mut router = Router::new(config()).unwrap();
    if traced {
        router.set_trace(64);
    }
    let mut rig = Rig::new(Box::new(router), 3, 32);
    let out = exchanges
        .iter()
        .map(|(port, frames)| rig.exchange(*port, frames))
        .collect();
    finish(rig);
    out
}

#[test]
fn skipped_passes_change_nothing_in_batches_mixing_forwarded_packets_and_exceptions() {
    let plain = |n: u16| udp4("192.0.2.5", 64, n);
    let mut bad_checksum = udp4("192.0.2.6", 64, 9);
    bad_checksum[14 + 10] ^= 0x5a;
    let ping = echo_request("10.0.0.1").payload_len(18).build();
    let arp = arp_request(HOST_MAC, v4("10.0.0.2"), v4("10.0.0.1"));
    let mixed = vec![
        plain(1),
        udp4("192.0.2.7", 1, 2),
        plain(3),
        bad_checksum,
        with_options(&plain(4)),
        plain(5),
        udp4("203.0.113.5", 64, 6),
        arp.clone(),
        plain(7),
        ping.clone(),
        udp6("2001:db8:100::5", 64),
        udp6("2001:db8:100::6", 1),
        plain(8),
        udp4("255.255.255.255", 64, 10),
    ];
    let forwarded: Vec<Vec<u8>> = (1..=4).map(plain).collect();
    let exchanges = vec![
        (0, forwarded.clone()),
        (0, mixed),
        (0, forwarded.clone()),
        (0, vec![plain(1), arp, plain(2)]),
        (0, vec![plain(1), ping, plain(2)]),
        (0, vec![plain(1), udp4("192.0.2.9", 1, 2), plain(2)]),
    ];
    let skipping = outputs_of(false, &exchanges);
    assert_eq!(skipping, outputs_of(true, &exchanges));
    // And the forwarded ones are right, in order, with exceptions among them or not.
    let expected: Vec<Vec<u8>> = forwarded
        .iter()
        .map(|f| forwarded4(f, ROUTER[1], G1_MAC))
        .collect();
    assert_eq!(skipping[0][1], expected);
    assert_eq!(skipping[2][1], expected);
    let among: Vec<Vec<u8>> = [1, 3, 5, 7, 8]
        .map(|n| forwarded4(&plain(n), ROUTER[1], G1_MAC))
        .to_vec();
    let is_arp = |frame: &&Vec<u8>| frame[12..14] == [0x08, 0x06];
    let (requests, routed): (Vec<&Vec<u8>>, Vec<&Vec<u8>>) =
        skipping[1][1].iter().partition(is_arp);
    assert_eq!(routed, among.iter().collect::<Vec<_>>());
    // Every exception did what it does: the ARP request for 10.1.0.9 on port 1; back on port 0
    // the ARP reply, the echo reply, and time-exceeded for the IPv4 and the IPv6 packet (the
    // bad checksum, the options and the broadcast destination are dropped silently); the IPv6
    // packet to G2 on port 2.
    assert_eq!(requests.len(), 1);
    assert_eq!(skipping[1][0].len(), 4);
    assert_eq!(skipping[1][0].iter().filter(is_arp).count(), 1);
    assert_eq!(
        skipping[1][2],
        [forwarded6(&udp6("2001:db8:100::5", 64), ROUTER[2], G2_MAC)]
    );
}

/// What a router put out, port by port after each exchange, and what it counted.
#[derive(Debug, PartialEq)]
struct Observed {
    outputs: Vec<Vec<Vec<Vec<u8>>>>,
    drops: Vec<u64>,
    /// The app's counters but the fast path's own.
    counters: Vec<(&'static str, u64)>,
}

/// What the fused loop counted: packets forwarded (all, IPv6), batches declined.
#[derive(Debug, Clone, Copy)]
struct Fast {
    forwarded: u64,
    forwarded_ipv6: u64,
    declined: u64,
}

/// Runs `exchanges` through a router built from `config` with the fused forwarding loop on or
/// off; returns what it did and what the loop counted.
fn observe(
    config: RouterConfig,
    fast_path: bool,
    exchanges: &[(usize, Vec<Vec<u8>>)],
) -> (Observed, Fast) {
    let mut router = Router::new(config).unwrap();
    router.set_fast_path(fast_path);
    let mut rig = Rig::new(Box::new(router), 3, 32);
    let outputs = exchanges
        .iter()
        .map(|(port, frames)| rig.exchange(*port, frames))
        .collect();
    let (fast, counters): (Vec<_>, Vec<_>) = rig
        .app_counters()
        .into_iter()
        .partition(|(name, _)| name.starts_with("fast_path."));
    let fast = |name: &str| fast.iter().find(|(n, _)| *n == name).map_or(0, |c| c.1);
    let loop_counts = Fast {
        forwarded: fast("fast_path.forwarded"),
        forwarded_ipv6: fast("fast_path.forwarded_ipv6"),
        declined: fast("fast_path.declined"),
    };
    let observed = Observed {
        outputs,
        drops: rig.worker.counters().drops.to_vec(),
        counters,
    };
    finish(rig);
    (observed, loop_counts)
}

/// `config()` without the default routes, so that a destination can have no route, and with
/// an IPv6 prefix over two gateways (ECMP).
fn config_without_default() -> RouterConfig {
    let mut config = config();
    let defaults = [
        Prefix::new("0.0.0.0".parse().unwrap(), 0).unwrap(),
        Prefix::new("::".parse().unwrap(), 0).unwrap(),
    ];
    config.routes.retain(|r| !defaults.contains(&r.prefix));
    config.routes.push(route(
        "2001:db8:300::",
        48,
        &["2001:db8:1::2", "2001:db8:2::2"],
    ));
    config
}

/// A UDP frame from the host on port 0 to `dst` with the source address `src`.
fn udp6_from(src: &str, dst: &str, hop_limit: u8, n: u8) -> Vec<u8> {
    FrameBuilder::ipv6_udp()
        .with_l3(L3::Ipv6 {
            src: v6(src),
            dst: v6(dst),
        })
        .with_l4(L4::Udp {
            src_port: 1000 + u16::from(n),
            dst_port: 53,
        })
        .macs(HOST_MAC, ROUTER[0])
        .ttl(hop_limit)
        .payload_len(10)
        .build()
}

/// A TCP frame from the host on port 0 to `dst`.
fn tcp6(dst: &str, hop_limit: u8) -> Vec<u8> {
    FrameBuilder::ipv6_udp()
        .with_l3(L3::Ipv6 {
            src: v6("2001:db8::2"),
            dst: v6(dst),
        })
        .with_l4(L4::Tcp {
            src_port: 4000,
            dst_port: 80,
        })
        .macs(HOST_MAC, ROUTER[0])
        .ttl(hop_limit)
        .build()
}

/// A TCP frame from the host on port 0 to `dst`.
fn tcp4(dst: &str, ttl: u8) -> Vec<u8> {
    from_host(dst)
        .with_l4(L4::Tcp {
            src_port: 4000,
            dst_port: 80,
        })
        .ttl(ttl)
        .build()
}

/// One frame of a kind the fused loop forwards (`kind` 0, 1, 23 and 24: [`FAST_KINDS`]) or
/// must leave to the stages (every other kind), `n` varying it.
fn frame_of_kind(kind: u8, n: u8) -> Vec<u8> {
    let plain = || udp4(&format!("192.0.2.{}", n % 128), 64, u16::from(n));
    let to = |dst: &str| udp4(dst, 64, u16::from(n));
    match kind {
        0 => plain(),
        1 => tcp4(&format!("192.0.2.{}", 128 + n % 128), 2 + n % 62),
        2 => udp4("192.0.2.9", 1 - n % 2, 1),
        3 => {
            let mut bad = plain();
            bad[24] ^= n | 1;
            bad
        }
        4 => with_options(&plain()),
        5 => to(&format!("100.64.0.{n}")),
        6 => to(&format!("203.0.113.{n}")),
        7 => arp_request(HOST_MAC, v4("10.0.0.2"), v4("10.0.0.1")),
        8 => echo_request("10.0.0.1").payload_len(18).build(),
        9 => udp6("2001:db8:100::5", 64 - n % 64),
        10 => from_host("192.0.2.5").vlan(u16::from(n) + 1).build(),
        11 => plain()[..usize::from(n % 42)].to_vec(),
        12 => {
            let mut cut = plain();
            cut.truncate(14 + 20 + 4);
            cut
        }
        13 => FrameBuilder::ipv4_udp()
            .with_l3(L3::Ipv4 {
                src: v4("127.0.0.1"),
                dst: v4("192.0.2.5"),
            })
            .macs(HOST_MAC, ROUTER[0])
            .build(),
        14 => to("255.255.255.255"),
        15 => {
            let mut group = plain();
            group[0] = 0x01;
            group
        }
        16 => to(&format!("198.51.100.{n}")),
        17 => to("10.1.0.2"),
        18 => from_host("192.0.2.5")
            .fragment(u16::from(n) * 8, n.is_multiple_of(2))
            .build(),
        19 => echo_request("192.0.2.5").payload_len(18).build(),
        20 => to("10.2.0.1"),
        // An answer from 10.1.0.9 (the unresolved gateway of 203.0.113.0/24), at a MAC that
        // changes with `n`: the neighbour table learns or relearns it.
        21 => arp_frame(
            arp::Operation::Reply,
            ROUTER[1],
            (mac(0xe0 | (n % 4)), v4("10.1.0.9")),
            (ROUTER[1], v4("10.1.0.1")),
        ),
        22 => {
            let mut flipped = plain();
            let at = usize::from(n) % flipped.len();
            flipped[at] ^= 0x80;
            flipped
        }
        // IPv6 through G2 (2001:db8:100::/48 on port 2): UDP and TCP, hop limits 2 to 64.
        23 => udp6_from(
            "2001:db8::2",
            &format!("2001:db8:100::{n:x}"),
            2 + n % 63,
            n,
        ),
        24 => tcp6(&format!("2001:db8:100:{n:x}::1"), 64),
        25 => udp6_from("2001:db8::2", "2001:db8:100::5", n % 2, n),
        // Via the unresolved gateway 2001:db8:1::9: held while NDP resolves it.
        26 => udp6_from("2001:db8::2", &format!("2001:db8:200::{n:x}"), 64, n),
        27 => udp6_from("fe80::2", "2001:db8:100::5", 64, n),
        28 => udp6_from("2001:db8::2", "ff02::1", 64, n),
        29 => {
            let mut group = udp6_from("2001:db8::2", "2001:db8:100::5", 64, n);
            group[..6].copy_from_slice(&[0x33, 0x33, 0, 0, 0, 1]);
            group
        }
        // The router's own address, a connected host nobody resolved, no route, ECMP.
        30 => udp6_from("2001:db8::2", "2001:db8::1", 64, n),
        31 => udp6_from(
            "2001:db8::2",
            &format!("2001:db8:2::{:x}", 0x100 + u16::from(n)),
            64,
            n,
        ),
        32 => udp6_from("2001:db8::2", &format!("2001:db8:999::{n:x}"), 64, n),
        33 => udp6_from("2001:db8::2", &format!("2001:db8:300::{n:x}"), 64, n),
        // A payload length past the frame's end; a header cut short.
        34 => {
            let mut long = udp6_from("2001:db8::2", "2001:db8:100::5", 64, n);
            long[18..20].copy_from_slice(&(100 + u16::from(n)).to_be_bytes());
            long
        }
        35 => {
            udp6_from("2001:db8::2", "2001:db8:100::5", 64, n)[..40 + usize::from(n % 20)].to_vec()
        }
        // Behind a hop-by-hop header: not plain, and discovery may learn from it.
        36 => FrameBuilder::ipv6_udp()
            .with_l3(L3::Ipv6 {
                src: v6("2001:db8::2"),
                dst: v6("2001:db8:100::5"),
            })
            .macs(HOST_MAC, ROUTER[0])
            .extension_headers(1)
            .build(),
        _ => {
            let mut flipped = udp6_from("2001:db8::2", "2001:db8:100::5", 64, n);
            let at = usize::from(n) % flipped.len();
            flipped[at] ^= 0x80;
            flipped
        }
    }
}

/// The kinds of [`frame_of_kind`].
const KINDS: u8 = 38;

/// The kinds the fused loop forwards.
const FAST_KINDS: [u8; 4] = [0, 1, 23, 24];

/// Whether `kind` is a batch-wide exception: a frame discovery may learn from, so that the
/// loop leaves its whole batch to the stages.
fn declines(kind: u8) -> bool {
    matches!(kind, 7 | 21 | 36)
}

#[test]
fn the_fast_path_gives_the_stage_passes_output_byte_for_byte_among_every_exception() {
    let fast = |n: u8| frame_of_kind(n % 2, n);
    // A batch of fast packets with every exception between two of them.
    let exceptions: Vec<u8> = (2..KINDS)
        .filter(|&kind| !declines(kind) && !FAST_KINDS.contains(&kind))
        .collect();
    let mixed: Vec<Vec<u8>> = exceptions[..16]
        .iter()
        .flat_map(|&kind| [fast(kind), frame_of_kind(kind, kind)])
        .collect();
    let mixed_rest: Vec<Vec<u8>> = exceptions[16..]
        .iter()
        .flat_map(|&kind| [fast(kind), frame_of_kind(kind, kind + 1)])
        .collect();
    let fast6 = |n: u8| frame_of_kind(FAST_KINDS[2 + usize::from(n % 2)], n);
    let only_fast6: Vec<Vec<u8>> = (0..32).map(fast6).collect();
    let both: Vec<Vec<u8>> = (0..32)
        .map(|n| frame_of_kind(FAST_KINDS[usize::from(n % 4)], n))
        .collect();
    let only_fast: Vec<Vec<u8>> = (0..32).map(fast).collect();
    let via_g9 = |n: u8| frame_of_kind(6, n);
    // After any change of the neighbour table the first batch for a gateway takes the stages,
    // which rebuild its adjacency; the loop forwards by it from the next batch on.
    let exchanges = vec![
        (0, only_fast.clone()),
        (0, only_fast.clone()),
        (0, mixed),
        (0, mixed_rest),
        // Discovery learns in the middle of a batch: an ARP request for the router; then
        // 10.1.0.9's answer (its waiting packets leave), later a new MAC for it between
        // packets for it.
        (0, vec![fast(1), frame_of_kind(7, 0), fast(2)]),
        (1, vec![frame_of_kind(21, 0)]),
        (0, (0..8).map(via_g9).collect()),
        (0, (0..8).map(via_g9).collect()),
        (
            1,
            vec![via_g9(1), via_g9(2), frame_of_kind(21, 1), via_g9(3)],
        ),
        (0, (0..8).map(via_g9).collect()),
        (0, (0..8).map(via_g9).collect()),
        (0, only_fast.clone()),
        (0, only_fast6.clone()),
        (0, both.clone()),
        // The frame behind a hop-by-hop header declines its batch.
        (0, vec![fast6(1), frame_of_kind(36, 0), fast6(2)]),
    ];
    let (fused, loop_counts) = observe(config_without_default(), true, &exchanges);
    let (stages, none) = observe(config_without_default(), false, &exchanges);
    assert_eq!(none.forwarded, 0, "the loop is off");
    let Fast {
        forwarded,
        forwarded_ipv6,
        declined,
    } = loop_counts;
    assert!(
        forwarded_ipv6 >= 16,
        "the loop forwarded {forwarded_ipv6} IPv6 packets"
    );
    // The IPv4 batches through current adjacencies, and the batch of both families; the first
    // IPv6 batch may build G2's IPv6 adjacency in the stages.
    assert!(
        forwarded >= 32 + 8 + 8 + 8 + 32,
        "the loop forwarded {forwarded}"
    );
    assert_eq!(
        declined, 3,
        "the two batches with an ARP frame, the one with an IPv6 extension header"
    );
    assert_eq!(fused, stages);
    // And what it forwarded is right: MACs, TTL, checksum, port, order.
    let expected = |frames: &[Vec<u8>]| -> [Vec<Vec<u8>>; 2] {
        let to = |port: usize, mac| {
            frames
                .iter()
                .filter(|f| (f[30..34] == [192, 0, 2, f[33]]) && (f[33] >= 128) == (port == 2))
                .map(|f| forwarded4(f, ROUTER[port], mac))
                .collect()
        };
        [to(1, G1_MAC), to(2, G2_MAC)]
    };
    let [g1, g2] = expected(&only_fast);
    assert_eq!(fused.outputs[1][1], g1);
    assert_eq!(fused.outputs[1][2], g2);
    let relearned: Vec<Vec<u8>> = (0..8)
        .map(|n| forwarded4(&via_g9(n), ROUTER[1], mac(0xe1)))
        .collect();
    assert_eq!(fused.outputs[10][1], relearned);
    // IPv6 alone and among IPv4: MACs and hop limit, out of port 2 to G2, in order.
    let via_g2 = |frames: &[Vec<u8>]| -> Vec<Vec<u8>> {
        frames
            .iter()
            .filter(|f| f[12..14] == [0x86, 0xdd])
            .map(|f| forwarded6(f, ROUTER[2], G2_MAC))
            .collect()
    };
    assert_eq!(fused.outputs[12][2], via_g2(&only_fast6));
    let [g1, _] = expected(&both);
    assert_eq!(fused.outputs[13][1], g1);
    let on_port_2: Vec<Vec<u8>> = both
        .iter()
        .filter_map(|f| match [f[12], f[13]] {
            [0x86, 0xdd] => Some(forwarded6(f, ROUTER[2], G2_MAC)),
            _ if f[33] >= 128 => Some(forwarded4(f, ROUTER[2], G2_MAC)),
            _ => None,
        })
        .collect();
    assert_eq!(fused.outputs[13][2], on_port_2);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random batches of fast-path packets and exceptions, arriving on random ports, give the
    /// same bytes in the same order and the same counters with the fused loop as without.
    #[test]
    fn random_mixes_give_the_same_output_with_and_without_the_fast_path(
        batches in proptest::collection::vec(
            (0usize..3, proptest::collection::vec((0..KINDS + 8, any::<u8>()), 1..33)),
            1..6,
        )
    ) {
        // Kinds beyond KINDS stand for more fast packets, the common case.
        let exchanges: Vec<(usize, Vec<Vec<u8>>)> = batches
            .iter()
            .map(|(port, frames)| {
                let frames = frames
                    .iter()
                    .map(|&(kind, n)| {
                        let kind = if kind < KINDS { kind } else { FAST_KINDS[usize::from(kind % 4)] };
                        frame_of_kind(kind, n)
                    })
                    .collect();
                (*port, frames)
            })
            .collect();
        let (fused, _) = observe(config_without_default(), true, &exchanges);
        let (stages, _) = observe(config_without_default(), false, &exchanges);
        prop_assert_eq!(fused, stages);
    }
}
