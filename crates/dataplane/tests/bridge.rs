//! The learning bridge over memory ports, byte for byte: learning, unicast, flooding inside a
//! VLAN, tag push/pop, MAC moves, aging, hostile floods of sources, malformed frames; every
//! frame of the pool accounted for after every scenario.
//!
//! The tests take one lock so they run one at a time: the flood test measures the process's
//! resident memory, which other tests' rigs running in parallel would disturb.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use proptest::prelude::*;
use wirespeed_dataplane::app::bridge::{Bridge, BridgeConfig, BridgePort};
use wirespeed_dataplane::app::{App, Context};
use wirespeed_dataplane::stage::vlan::VlanMode;
use wirespeed_packet::flow_key::FlowKey;
use wirespeed_packet::wire::EthernetAddress;
use wirespeed_packet::{Batch, Desc, DropReason, FramePool, HEADROOM, MAX_BATCH};
use wirespeed_testkit::frames::FrameBuilder;
use wirespeed_testkit::rig::Rig;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn mac(n: u8) -> EthernetAddress {
    EthernetAddress([0x02, 0, 0, 0, 0, n])
}

const BROADCAST: EthernetAddress = EthernetAddress::BROADCAST;
const MULTICAST: EthernetAddress = EthernetAddress([0x01, 0x00, 0x5e, 0x00, 0x00, 0x01]);

fn access(port: u16, vlan: u16) -> BridgePort {
    BridgePort {
        port,
        mode: VlanMode::Access(vlan),
    }
}

fn trunk(port: u16, allowed: &[u16], native: Option<u16>) -> BridgePort {
    BridgePort {
        port,
        mode: VlanMode::Trunk {
            allowed: allowed.to_vec(),
            native,
        },
    }
}

fn bridge(ports: Vec<BridgePort>) -> Bridge {
    Bridge::new(BridgeConfig {
        ports,
        ..BridgeConfig::default()
    })
    .unwrap()
}

fn rig(ports: Vec<BridgePort>) -> Rig {
    let count = ports.iter().map(|p| p.port as usize + 1).max().unwrap();
    Rig::new(Box::new(bridge(ports)), count, 32)
}

/// An untagged IPv4/UDP frame of 60 bytes (a 64-byte frame on the wire).
fn frame(src: EthernetAddress, dst: EthernetAddress) -> Vec<u8> {
    FrameBuilder::ipv4_udp()
        .macs(src, dst)
        .payload_len(18)
        .build()
}

/// `untagged` with an 802.1Q tag of `tci` inserted after the MACs.
fn tagged(untagged: &[u8], tci: u16) -> Vec<u8> {
    let mut out = untagged[..12].to_vec();
    out.extend_from_slice(&[0x81, 0x00]);
    out.extend_from_slice(&tci.to_be_bytes());
    out.extend_from_slice(&untagged[12..]);
    out
}

fn counter(rig: &Rig, name: &str) -> u64 {
    rig.app_counters()
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
        .unwrap_or_else(|| panic!("no counter {name}"))
}

fn drops(rig: &Rig, reason: DropReason) -> u64 {
    rig.worker.counters().drops[reason as usize]
}

fn finish(rig: Rig) {
    let conservation = rig.finish();
    assert!(conservation.holds(), "{conservation:?}");
    assert_eq!(conservation.free, conservation.total);
}

/// What came out of every port: `expected[p]` for port p.
#[track_caller]
fn assert_out(out: &[Vec<Vec<u8>>], expected: &[&[&Vec<u8>]]) {
    assert_eq!(out.len(), expected.len());
    for (port, (got, want)) in out.iter().zip(expected).enumerate() {
        let want: Vec<&Vec<u8>> = want.to_vec();
        assert_eq!(got.iter().collect::<Vec<_>>(), want, "port {port}");
    }
}

#[test]
fn a_learned_destination_gets_unicast_only() {
    let _serial = serial();
    let mut rig = rig(vec![access(0, 10), access(1, 10), access(2, 10)]);
    let (a, b) = (mac(1), mac(2));
    // B is unknown: flooded to the other ports.
    let ab = frame(a, b);
    let out = rig.exchange(0, std::slice::from_ref(&ab));
    assert_out(&out, &[&[], &[&ab], &[&ab]]);
    // A was learned on port 0: B's answer goes there only.
    let ba = frame(b, a);
    let out = rig.exchange(1, std::slice::from_ref(&ba));
    assert_out(&out, &[&[&ba], &[], &[]]);
    // Both known now.
    let out = rig.exchange(0, &[ab.clone(), ab.clone()]);
    assert_out(&out, &[&[], &[&ab, &ab], &[]]);
    assert_eq!(counter(&rig, "learn.learned"), 2);
    assert_eq!(counter(&rig, "learn.refreshed"), 2);
    assert_eq!(counter(&rig, "forward.unicast"), 3);
    assert_eq!(counter(&rig, "forward.flooded"), 1);
    assert_eq!(counter(&rig, "forward.flood_copies"), 1);
    assert_eq!(rig.worker.counters().dropped(), 0);
    finish(rig);
}

#[test]
fn a_destination_on_the_ingress_port_is_dropped() {
    let _serial = serial();
    let mut rig = rig(vec![access(0, 10), access(1, 10)]);
    rig.exchange(0, &[frame(mac(1), BROADCAST)]);
    let out = rig.exchange(0, &[frame(mac(2), mac(1))]);
    assert_out(&out, &[&[], &[]]);
    assert_eq!(drops(&rig, DropReason::SameSegment), 1);
    assert_eq!(counter(&rig, "forward.same_segment"), 1);
    finish(rig);
}

#[test]
fn unknown_broadcast_and_multicast_flood_to_the_vlan_only() {
    let _serial = serial();
    // VLAN 10: ports 0, 1, 3 (trunk, tagged) and 4 (trunk, native). VLAN 20: ports 2, 3.
    let mut rig = rig(vec![
        access(0, 10),
        access(1, 10),
        access(2, 20),
        trunk(3, &[10, 20], None),
        trunk(4, &[20], Some(10)),
    ]);
    for dst in [mac(9), BROADCAST, MULTICAST] {
        let f = frame(mac(1), dst);
        let out = rig.exchange(0, std::slice::from_ref(&f));
        assert_out(&out, &[&[], &[&f], &[], &[&tagged(&f, 10)], &[&f]]);
    }
    // From the trunk in VLAN 20: to port 2 untagged and to port 4 tagged.
    let f = frame(mac(2), BROADCAST);
    let out = rig.exchange(3, &[tagged(&f, 20)]);
    assert_out(&out, &[&[], &[], &[&f], &[], &[&tagged(&f, 20)]]);
    assert_eq!(counter(&rig, "forward.flooded"), 4);
    assert_eq!(counter(&rig, "forward.flood_copies"), 3 * 2 + 1);
    finish(rig);
}

#[test]
fn the_same_mac_in_two_vlans_is_two_entries() {
    let _serial = serial();
    let mut rig = rig(vec![
        access(0, 10),
        access(1, 10),
        access(2, 20),
        trunk(3, &[10, 20], None),
    ]);
    let x = mac(7);
    // X speaks in VLAN 10 on port 0 and in VLAN 20 on port 2.
    rig.exchange(0, &[frame(x, BROADCAST)]);
    rig.exchange(2, &[frame(x, BROADCAST)]);
    assert_eq!(counter(&rig, "learn.learned"), 2);
    assert_eq!(counter(&rig, "learn.moved"), 0);
    // To X in VLAN 10 from port 1: port 0. To X in VLAN 20 from the trunk: port 2, untagged.
    let to_x = frame(mac(1), x);
    let out = rig.exchange(1, std::slice::from_ref(&to_x));
    assert_out(&out, &[&[&to_x], &[], &[], &[]]);
    let out = rig.exchange(3, &[tagged(&to_x, 20)]);
    assert_out(&out, &[&[], &[], &[&to_x], &[]]);
    // And in VLAN 10 from the trunk: port 0.
    let out = rig.exchange(3, &[tagged(&to_x, 10)]);
    assert_out(&out, &[&[&to_x], &[], &[], &[]]);
    assert_eq!(counter(&rig, "forward.unicast"), 3);
    finish(rig);
}

#[test]
fn tags_are_pushed_popped_and_kept_byte_for_byte() {
    let _serial = serial();
    let mut rig = rig(vec![
        access(0, 10),
        trunk(1, &[10], None),
        trunk(2, &[10], None),
        trunk(3, &[20], Some(10)),
    ]);
    let (a, b, c, d) = (mac(1), mac(2), mac(3), mac(4));
    // Learn everybody: a on 0, b on 1, c on 2, d on 3 (native: untagged).
    rig.exchange(0, &[frame(a, BROADCAST)]);
    rig.exchange(1, &[tagged(&frame(b, BROADCAST), 10)]);
    rig.exchange(2, &[tagged(&frame(c, BROADCAST), 10)]);
    rig.exchange(3, &[frame(d, BROADCAST)]);
    assert_eq!(counter(&rig, "learn.learned"), 4);

    // access -> trunk: the tag is added; it is the frame FrameBuilder builds with that tag.
    let ab = frame(a, b);
    let out = rig.exchange(0, std::slice::from_ref(&ab));
    let expected = FrameBuilder::ipv4_udp()
        .macs(a, b)
        .vlan(10)
        .payload_len(18)
        .build();
    assert_eq!(expected, tagged(&ab, 10));
    assert_out(&out, &[&[], &[&expected], &[], &[]]);

    // trunk -> access: the tag is removed.
    let ba = frame(b, a);
    let out = rig.exchange(1, &[tagged(&ba, 10)]);
    assert_out(&out, &[&[&ba], &[], &[], &[]]);

    // trunk -> trunk: the tag stays as it was, priority bits included.
    let bc = tagged(&frame(b, c), 0xa00a);
    let out = rig.exchange(1, std::slice::from_ref(&bc));
    assert_out(&out, &[&[], &[], &[&bc], &[]]);

    // trunk -> native VLAN of a trunk: untagged; and back: tagged again.
    let cd = frame(c, d);
    let out = rig.exchange(2, &[tagged(&cd, 10)]);
    assert_out(&out, &[&[], &[], &[], &[&cd]]);
    let dc = frame(d, c);
    let out = rig.exchange(3, std::slice::from_ref(&dc));
    assert_out(&out, &[&[], &[], &[&tagged(&dc, 10)], &[]]);

    // A priority-tagged frame (VLAN 0) on the access port belongs to VLAN 10; on the trunk it
    // leaves with VLAN 10 and its priority.
    let ab = frame(a, b);
    let out = rig.exchange(0, &[tagged(&ab, 0x6000)]);
    assert_out(&out, &[&[], &[&tagged(&ab, 0x600a)], &[], &[]]);
    assert_eq!(counter(&rig, "vlan.rewritten"), 1);
    assert_eq!(rig.worker.counters().dropped(), 0);
    finish(rig);
}

#[test]
fn a_mac_that_moves_is_followed() {
    let _serial = serial();
    let mut rig = rig(vec![access(0, 10), access(1, 10), access(2, 10)]);
    let (a, b) = (mac(1), mac(2));
    rig.exchange(0, &[frame(a, BROADCAST)]);
    let ba = frame(b, a);
    assert_out(
        &rig.exchange(2, std::slice::from_ref(&ba)),
        &[&[&ba], &[], &[]],
    );
    // A now speaks from port 1.
    rig.exchange(1, &[frame(a, BROADCAST)]);
    assert_eq!(counter(&rig, "learn.moved"), 1);
    assert_out(
        &rig.exchange(2, std::slice::from_ref(&ba)),
        &[&[], &[&ba], &[]],
    );
    finish(rig);
}

#[test]
fn entries_age_out_and_their_destinations_are_flooded_again() {
    let _serial = serial();
    let bridge = Bridge::new(BridgeConfig {
        ports: vec![access(0, 10), access(1, 10), access(2, 10)],
        mac_capacity: 64,
        age_seconds: 0.05,
    })
    .unwrap();
    let mut rig = Rig::new(Box::new(bridge), 3, 32);
    let (a, b) = (mac(1), mac(2));
    rig.exchange(0, &[frame(a, BROADCAST)]);
    let ba = frame(b, a);
    assert_out(
        &rig.exchange(1, std::slice::from_ref(&ba)),
        &[&[&ba], &[], &[]],
    );
    std::thread::sleep(Duration::from_millis(200));
    // A has aged out: flooded (and B, last seen as long ago, comes back as new).
    assert_out(
        &rig.exchange(1, std::slice::from_ref(&ba)),
        &[&[&ba], &[], &[&ba]],
    );
    assert!(counter(&rig, "mac.aged") >= 1);
    assert_eq!(counter(&rig, "learn.learned"), 3);
    // A speaks again and is unicast to again.
    rig.exchange(0, &[frame(a, BROADCAST)]);
    assert_out(
        &rig.exchange(1, std::slice::from_ref(&ba)),
        &[&[&ba], &[], &[]],
    );
    finish(rig);
}

/// Resident set size of this process in bytes.
fn resident() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[test]
fn a_flood_of_random_sources_fills_the_table_and_nothing_more() {
    let _serial = serial();
    const CAPACITY: usize = 1024;
    const SOURCES: usize = 1_000_000;
    const CHUNK: usize = 2000;
    let bridge = Bridge::new(BridgeConfig {
        ports: vec![access(0, 10), access(1, 10), access(2, 10)],
        mac_capacity: CAPACITY,
        age_seconds: 300.0,
    })
    .unwrap();
    let memory = bridge.mac_table_memory();
    let mut rig = Rig::new(Box::new(bridge), 3, 32);
    // Host H on port 0 and destination D on port 2 are learned before the flood.
    let (h, d) = (mac(1), mac(2));
    rig.exchange(0, &[frame(h, BROADCAST)]);
    rig.exchange(2, &[frame(d, BROADCAST)]);
    // The flood: random unicast sources on port 1, towards D (unicast, so nothing multiplies).
    let mut chunk: Vec<Vec<u8>> = (0..CHUNK).map(|_| frame(mac(3), d)).collect();
    let probe = frame(mac(3), h);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut baseline = 0;
    for round in 0..SOURCES / CHUNK {
        for f in &mut chunk {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let src = &mut f[6..12];
            src.copy_from_slice(&x.to_be_bytes()[..6]);
            src[0] &= 0xfe; // unicast
        }
        let out = rig.exchange(1, &chunk);
        assert_eq!(out[2].len(), CHUNK, "round {round}: D is unicast to");
        assert!(out[0].is_empty() && out[1].is_empty(), "round {round}");
        // H, learned before, still gets unicast, not flooded.
        let out = rig.exchange(1, std::slice::from_ref(&probe));
        assert_out(&out, &[&[&probe], &[], &[]]);
        if round == 1 {
            baseline = resident();
        }
    }
    let grown = resident().saturating_sub(baseline);
    assert!(grown < 4 << 20, "resident memory grew by {grown} bytes");
    assert_eq!(counter(&rig, "mac.entries"), CAPACITY as u64);
    let learned = counter(&rig, "learn.learned");
    let refused = counter(&rig, "learn.refused");
    assert_eq!(learned, CAPACITY as u64);
    // Every random source either was learned or refused (a repeat would be refreshed).
    assert_eq!(
        learned + refused + counter(&rig, "learn.refreshed"),
        SOURCES as u64 + 2 + (SOURCES / CHUNK) as u64
    );
    assert!(refused >= (SOURCES - CAPACITY) as u64);
    assert_eq!(counter(&rig, "forward.flooded"), 2);
    assert_eq!(rig.worker.counters().dropped(), 0);
    finish(rig);
    // The table's memory is what it was at construction.
    let again = Bridge::new(BridgeConfig {
        ports: vec![access(0, 10)],
        mac_capacity: CAPACITY,
        age_seconds: 300.0,
    })
    .unwrap();
    assert_eq!(again.mac_table_memory(), memory);
}

#[test]
fn malformed_filtered_and_control_frames_are_dropped_with_their_reasons() {
    let _serial = serial();
    let mut rig = rig(vec![access(0, 10), access(1, 10), trunk(3, &[20], None)]);
    let good = frame(mac(1), BROADCAST);
    let runt = good[..10].to_vec();
    let mut bad_ihl = good.clone();
    bad_ihl[14] = 0x44;
    let wrong_vlan = tagged(&good, 30);
    let untagged_on_trunk = frame(mac(5), BROADCAST);
    let group_source = frame(MULTICAST, mac(1));
    let zero_source = frame(EthernetAddress([0; 6]), mac(1));
    let stp = frame(mac(1), EthernetAddress([0x01, 0x80, 0xc2, 0, 0, 0]));
    let lacp = frame(mac(1), EthernetAddress([0x01, 0x80, 0xc2, 0, 0, 2]));
    let out = rig.exchange(
        0,
        &[
            runt,
            bad_ihl,
            wrong_vlan,
            group_source,
            zero_source,
            stp,
            lacp,
            good.clone(),
        ],
    );
    assert_out(&out, &[&[], &[&good], &[], &[]]);
    // Port 2 is not part of the bridge; port 3 has no native VLAN.
    let out = rig.exchange(2, std::slice::from_ref(&good));
    assert!(out.iter().all(Vec::is_empty));
    let out = rig.exchange(3, &[untagged_on_trunk]);
    assert!(out.iter().all(Vec::is_empty));
    assert_eq!(drops(&rig, DropReason::Truncated), 1);
    assert_eq!(drops(&rig, DropReason::BadIpv4Header), 1);
    assert_eq!(drops(&rig, DropReason::VlanFiltered), 3);
    assert_eq!(drops(&rig, DropReason::MartianSource), 2);
    assert_eq!(drops(&rig, DropReason::Consumed), 2);
    assert_eq!(rig.worker.counters().dropped(), 9);
    assert_eq!(counter(&rig, "vlan.filtered"), 3);
    assert_eq!(counter(&rig, "learn.invalid_source"), 2);
    assert_eq!(counter(&rig, "forward.control"), 2);
    assert_eq!(counter(&rig, "parse.malformed"), 2);
    finish(rig);
}

#[test]
fn a_flood_wider_than_the_extra_batch_counts_the_copies_it_could_not_make() {
    let _serial = serial();
    // 11 ports in one VLAN: a broadcast needs 9 copies; 32 of them need 288 > 256 slots.
    let mut rig = rig((0..11).map(|p| access(p, 1)).collect());
    let frames: Vec<Vec<u8>> = (0..32).map(|i| frame(mac(i + 1), BROADCAST)).collect();
    let out = rig.exchange(0, &frames);
    assert_eq!(out[1], frames);
    let copies: usize = out[2..].iter().map(Vec::len).sum();
    assert_eq!(copies, 256);
    assert_eq!(counter(&rig, "forward.flood_copies"), 256);
    assert_eq!(counter(&rig, "forward.flood_emit_overflow"), 288 - 256);
    for port in &out[2..] {
        assert!(port.iter().all(|f| frames.contains(f)));
    }
    finish(rig);
}

/// Drives the app directly over a tiny pool: a flood with no free frame left.
#[test]
fn a_flood_with_an_empty_pool_counts_and_keeps_the_pool_whole() {
    let _serial = serial();
    let mut bridge = bridge(vec![access(0, 1), access(1, 1), access(2, 1), access(3, 1)]);
    let mut pool = FramePool::new(2, 2048).unwrap();
    let mut batch = Batch::new(32);
    let mut extra = Batch::new(MAX_BATCH);
    let mut keys = vec![FlowKey::default(); 32];
    let bytes = frame(mac(1), BROADCAST);
    let id = pool.alloc().unwrap();
    let start = usize::from(HEADROOM);
    pool.frame_mut(id)[start..start + bytes.len()].copy_from_slice(&bytes);
    batch.push(Desc {
        frame: id,
        offset: HEADROOM,
        len: bytes.len() as u16,
        port: 0,
        queue: 0,
    });
    let mut ctx = Context {
        pool: &mut pool,
        keys: &mut keys[..1],
        now: 1 << 30,
        extra: &mut extra,
    };
    bridge.process(&mut ctx, &mut batch);
    // The original goes to port 1, one copy (the last free frame) to port 2, none to port 3.
    assert_eq!(batch.meta()[0].out_port, 1);
    assert_eq!(extra.len(), 1);
    assert_eq!(extra.meta()[0].out_port, 2);
    let copy = extra.descs()[0];
    let copy_start = usize::from(copy.offset);
    assert_eq!(
        pool.frame(copy.frame)[copy_start..copy_start + usize::from(copy.len)],
        bytes[..]
    );
    let counters = bridge.bridge_counters();
    assert_eq!(counters.forward.flood_copies, 1);
    assert_eq!(counters.forward.flood_pool_empty, 1);
    // "show mac table".
    let macs = bridge.macs(1 << 30);
    assert_eq!(macs.len(), 1);
    assert_eq!((macs[0].vlan, macs[0].mac, macs[0].port), (1, mac(1), 0));
    bridge.flush_macs();
    assert!(bridge.macs(1 << 30).is_empty());
    pool.release(batch.descs()[0].frame);
    pool.release(copy.frame);
    assert_eq!(pool.free_count(), pool.total());
    assert_eq!(pool.double_releases(), 0);
}

#[test]
fn a_trace_keeps_each_stage_decision_for_the_last_packets() {
    let _serial = serial();
    let mut bridge = bridge(vec![access(0, 10), access(1, 10)]);
    bridge.set_trace(3);
    let mut pool = FramePool::new(64, 2048).unwrap();
    let mut batch = Batch::new(32);
    let mut extra = Batch::new(MAX_BATCH);
    let mut keys = vec![FlowKey::default(); 32];
    let inputs = [
        (1, frame(mac(2), BROADCAST)),
        (0, tagged(&frame(mac(1), BROADCAST), 20)),
        (
            0,
            frame(mac(1), EthernetAddress([0x01, 0x80, 0xc2, 0, 0, 0])),
        ),
        (0, frame(mac(1), mac(2))),
    ];
    for (port, bytes) in &inputs {
        let id = pool.alloc().unwrap();
        let start = usize::from(HEADROOM);
        pool.frame_mut(id)[start..start + bytes.len()].copy_from_slice(bytes);
        batch.push(Desc {
            frame: id,
            offset: HEADROOM,
            len: bytes.len() as u16,
            port: *port,
            queue: 0,
        });
    }
    let mut ctx = Context {
        pool: &mut pool,
        keys: &mut keys[..inputs.len()],
        now: 77,
        extra: &mut extra,
    };
    bridge.process(&mut ctx, &mut batch);
    let lines: Vec<String> = bridge.trace().iter().map(ToString::to_string).collect();
    assert_eq!(
        lines,
        [
            "77 port 0 len 64: vlan filtered; learn: -; forward: -; dropped (vlan_filtered)",
            "77 port 0 len 60: vlan 10 (untagged); learn: learned; forward: control frame, \
             not relayed; dropped (consumed)",
            "77 port 0 len 60: vlan 10 (untagged); learn: refreshed; forward: unicast to port 1; \
             out port 1",
        ]
    );
    for desc in batch.descs() {
        pool.release(desc.frame);
    }
    assert_eq!(pool.free_count(), pool.total());
}

#[test]
fn bad_configurations_are_refused_with_the_fix() {
    let _serial = serial();
    let error = |config| Bridge::new(config).unwrap_err().to_string();
    let message = error(BridgeConfig {
        ports: vec![access(0, 5000)],
        ..BridgeConfig::default()
    });
    assert!(
        message.contains("VLAN 5000") && message.contains("1 to 4094"),
        "{message}"
    );
    let message = error(BridgeConfig {
        mac_capacity: 0,
        ..BridgeConfig::default()
    });
    assert!(message.contains("capacity 0"), "{message}");
    let message = error(BridgeConfig {
        age_seconds: -1.0,
        ..BridgeConfig::default()
    });
    assert!(message.contains("age"), "{message}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Whatever arrives, on whatever port, tagged or not: no panic, and every frame that came
    /// in is accounted for as sent or dropped, copies included.
    #[test]
    fn any_frames_are_forwarded_or_dropped_and_the_pool_stays_whole(
        input in proptest::collection::vec(
            (0usize..4, wirespeed_testkit::frames::arb_frame(), proptest::option::of(0u16..64)),
            1..64,
        ),
    ) {
        let _serial = serial();
        let mut rig = rig(vec![
            access(0, 1),
            access(1, 2),
            trunk(2, &[1, 2, 3], Some(4)),
            trunk(3, &[1, 2], None),
        ]);
        for (port, bytes, tag) in &input {
            let bytes = match tag {
                Some(tci) if bytes.len() >= 14 => tagged(bytes, *tci),
                _ => bytes.clone(),
            };
            rig.exchange(*port, &[bytes]);
        }
        let counters = rig.worker.counters().clone();
        let copies = counter(&rig, "forward.flood_copies");
        prop_assert_eq!(counters.rx_packets + copies, counters.tx_packets + counters.dropped());
        let conservation = rig.finish();
        prop_assert!(conservation.holds(), "{:?}", conservation);
    }
}
