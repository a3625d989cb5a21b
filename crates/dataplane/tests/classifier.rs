//! The flow cache and the classifier against the simplest possible model: a linear scan of the
//! rules in insertion order (highest priority wins, the first inserted among equals). Random
//! rules with random masks and priorities, random keys, insertions and removals interleaved with
//! lookups; and a storm of a million distinct flows that must neither grow the cache nor push a
//! long-lived flow out of it.

use std::net::Ipv4Addr;

use proptest::prelude::*;
use wirespeed_dataplane::stage::flow_cache::FlowLookup;
use wirespeed_dataplane::table::classifier::{FlowMatch, RuleId};
use wirespeed_packet::flow_key::FlowKey;
use wirespeed_packet::wire::EthernetAddress;

/// Keys from small domains, so random rules and keys meet often.
fn arb_key() -> impl Strategy<Value = FlowKey> {
    (
        0u8..3,
        0u8..4,
        0u8..4,
        prop_oneof![Just(6u8), Just(17u8)],
        0u16..4,
        0u8..2,
    )
        .prop_map(|(port, src, dst, proto, l4, mac)| FlowKey {
            in_port: port,
            ip_src: FlowKey::map_ipv4(Ipv4Addr::new(10, 0, src, 1)),
            ip_dst: FlowKey::map_ipv4(Ipv4Addr::new(10, 1, 0, dst)),
            ethertype: 0x0800,
            ip_proto: proto,
            l4_dst: 80 + l4,
            dst_mac: EthernetAddress([2, 0, 0, 0, 0, mac]),
            ..FlowKey::EMPTY
        })
}

/// A match built from a key: each field kept or wildcarded at random, addresses as prefixes.
fn arb_match() -> impl Strategy<Value = FlowMatch> {
    (arb_key(), any::<u8>(), 0u8..=32, 0u8..=32).prop_map(|(key, fields, src_len, dst_len)| {
        let mut m = FlowMatch::any();
        if fields & 1 != 0 {
            m = m.in_port(u16::from(key.in_port));
        }
        if fields & 2 != 0 {
            m = m.ipv4_src(key.ipv4_src().unwrap_or(Ipv4Addr::UNSPECIFIED), src_len);
        }
        if fields & 4 != 0 {
            m = m.ipv4_dst(key.ipv4_dst().unwrap_or(Ipv4Addr::UNSPECIFIED), dst_len);
        }
        if fields & 8 != 0 {
            m = m.ip_proto(key.ip_proto);
        }
        if fields & 16 != 0 {
            m = m.l4_dst(key.l4_dst);
        }
        if fields & 32 != 0 {
            m = m.eth_dst(key.dst_mac);
        }
        m
    })
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u32, FlowMatch),
    /// Removes the rule at this index (modulo the number of rules).
    Remove(usize),
    Lookup(FlowKey),
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0u32..6, arb_match()).prop_map(|(p, m)| Op::Insert(p, m)),
        1 => any::<usize>().prop_map(Op::Remove),
        6 => arb_key().prop_map(Op::Lookup),
    ]
}

/// The model: rules in insertion order.
struct Linear {
    rules: Vec<(u32, FlowMatch, u32, RuleId)>,
}

impl Linear {
    fn decide(&self, key: &FlowKey) -> Option<u32> {
        let mut best: Option<(u32, u32)> = None;
        for &(priority, matcher, value, _) in &self.rules {
            if matcher.matches(key) && best.is_none_or(|(p, _)| priority > p) {
                best = Some((priority, value));
            }
        }
        best.map(|(_, value)| value)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn cache_and_classifier_decide_like_a_linear_scan(
        ops in proptest::collection::vec(arb_op(), 1..200),
        cache_entries in prop_oneof![Just(2usize), Just(16), Just(1024)],
        insert_one_in in prop_oneof![Just(1u32), Just(3)],
    ) {
        let mut lookup = FlowLookup::<u32>::new(cache_entries, insert_one_in, 1000);
        let mut model = Linear { rules: Vec::new() };
        let mut next_value = 1u32;
        for op in ops {
            match op {
                Op::Insert(priority, matcher) => {
                    let id = lookup.insert(priority, matcher, next_value).unwrap();
                    model.rules.push((priority, matcher, next_value, id));
                    next_value += 1;
                }
                Op::Remove(index) => {
                    if !model.rules.is_empty() {
                        let (_, _, value, id) = model.rules.remove(index % model.rules.len());
                        prop_assert_eq!(lookup.remove(id), Some(value));
                    }
                }
                Op::Lookup(key) => {
                    let expected = model.decide(&key);
                    // Twice: the second time the answer may come from the cache.
                    prop_assert_eq!(lookup.lookup(key.hash(), &key), expected);
                    prop_assert_eq!(lookup.lookup(key.hash(), &key), expected);
                }
            }
        }
        let c = lookup.counters();
        prop_assert_eq!(c.cache_hits + c.classifier_hits + c.misses, lookup.classifier().counters().lookups + c.cache_hits);
    }
}

#[test]
fn ten_masks_over_a_thousand_rules_cost_at_most_ten_probes() {
    let mut lookup = FlowLookup::<u32>::new(16, 0, 2000);
    for i in 0..1000u32 {
        let mask = i % 10;
        let m = FlowMatch::any()
            .ipv4_dst(Ipv4Addr::from(0x0a00_0000 + i), 22 + mask as u8)
            .in_port((i % 3) as u16);
        lookup.insert(i % 7, m, i).unwrap();
    }
    assert_eq!(lookup.classifier().masks(), 10);
    let key = FlowKey {
        ip_dst: FlowKey::map_ipv4(Ipv4Addr::new(10, 0, 1, 7)),
        ethertype: 0x0800,
        in_port: 1,
        ..FlowKey::EMPTY
    };
    let _ = lookup.lookup(key.hash(), &key);
    let counters = lookup.classifier().counters();
    assert_eq!(counters.lookups, 1);
    assert!(counters.probes <= 10, "{counters:?}");
}

#[test]
fn a_storm_of_a_million_flows_neither_grows_the_cache_nor_evicts_a_long_lived_flow() {
    let mut lookup = FlowLookup::<u32>::new(8192, 100, 16);
    lookup.insert(1, FlowMatch::any(), 7).unwrap();
    let capacity = lookup.cache().capacity();
    let memory = lookup.cache().memory_bytes();
    let long_lived = FlowKey {
        ip_src: FlowKey::map_ipv4(Ipv4Addr::new(192, 168, 0, 1)),
        l4_dst: 443,
        ..FlowKey::EMPTY
    };
    let mut long_packets = 0u64;
    let mut long_hits = 0u64;
    let mut warmed = false;
    for n in 0..1_000_000u32 {
        let storm = FlowKey {
            ip_src: FlowKey::map_ipv4(Ipv4Addr::from(0x0a00_0000 + n)),
            l4_src: n as u16,
            ..FlowKey::EMPTY
        };
        assert_eq!(lookup.lookup(storm.hash(), &storm), Some(7));
        if n % 10 == 0 {
            let before = lookup.counters().cache_hits;
            assert_eq!(lookup.lookup(long_lived.hash(), &long_lived), Some(7));
            let hit = lookup.counters().cache_hits > before;
            // Until it got in the first time, misses are the insertion probability at work.
            warmed |= hit;
            if warmed {
                long_packets += 1;
                long_hits += u64::from(hit);
            }
        }
    }
    let cache = lookup.cache();
    assert_eq!(cache.capacity(), capacity);
    assert_eq!(cache.memory_bytes(), memory);
    assert!(cache.len() <= capacity);
    // Every cache hit was the long-lived flow (storm flows are all distinct).
    assert_eq!(lookup.counters().cache_hits, long_hits);
    assert!(
        long_hits * 1000 >= long_packets * 995,
        "long-lived flow hit {long_hits} of {long_packets}"
    );
    // About one storm miss in a hundred was written into the cache.
    let counters = cache.counters();
    let offered = counters.inserted + counters.skipped;
    assert!(
        counters.inserted * 100 < offered * 2 && counters.inserted * 200 > offered,
        "{counters:?}"
    );
}
