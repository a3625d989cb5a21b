use super::*;

fn p4(addr: [u8; 4], len: u8) -> Ipv4Prefix {
    Ipv4Prefix::new(u32::from_be_bytes(addr), len).unwrap()
}
fn a4(addr: [u8; 4]) -> u32 {
    u32::from_be_bytes(addr)
}
fn p6(addr: u128, len: u8) -> Ipv6Prefix {
    Ipv6Prefix::new(addr, len).unwrap()
}
fn hop(id: u32) -> NextHop {
    NextHop::hop(id).unwrap()
}
const DOC: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0000;

#[test]
fn bit_fields_pad_past_the_end_of_the_address() {
    assert_eq!(0xdead_beefu32.bits(0, 18), 0xdead_beef >> 14);
    assert_eq!(0xdead_beefu32.bits(30, 6), 0b11 << 4);
    assert_eq!(0xdead_beefu32.bits(24, 6), 0xef >> 2);
    assert_eq!(DOC.bits(0, 16), 0x2001);
    assert_eq!(u128::MAX.bits(126, 6), 0b11 << 4);
    // Fields in the high half, ending at its last bit, straddling the halves, in the low half.
    let addr: u128 = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210;
    for offset in [0, 18, 52, 58, 59, 60, 63, 64, 65, 100, 122] {
        let expected = ((addr << offset) >> 122) as usize;
        assert_eq!(addr.bits(offset, 6), expected, "offset {offset}");
    }
    assert_eq!(addr.bits(58, 6), 0xef & 0x3f);
    assert_eq!(addr.bits(60, 6), (0xf << 2) | (0xfe >> 6));
    assert_eq!(<u32 as Key>::block(1), (1 << 14, (2 << 14) - 1));
}

#[test]
fn removing_a_middle_prefix_keeps_longer_and_restores_shorter() {
    let mut fib = Ipv4Trie::new();
    fib.insert(p4([10, 0, 0, 0], 8), hop(8)).unwrap();
    fib.insert(p4([10, 1, 2, 0], 24), hop(24)).unwrap();
    fib.insert(p4([10, 1, 0, 0], 16), hop(16)).unwrap();
    fib.insert(p4([10, 1, 2, 128], 25), hop(25)).unwrap();
    assert_eq!(fib.lookup(a4([10, 1, 3, 1])), Some(hop(16)));
    assert_eq!(fib.lookup(a4([10, 1, 2, 1])), Some(hop(24)));
    assert_eq!(fib.lookup(a4([10, 1, 2, 200])), Some(hop(25)));
    assert_eq!(fib.remove(p4([10, 1, 0, 0], 16)), Some(hop(16)));
    assert_eq!(fib.lookup(a4([10, 1, 3, 1])), Some(hop(8)));
    assert_eq!(fib.lookup(a4([10, 1, 2, 200])), Some(hop(25)));
    assert_eq!(fib.remove(p4([10, 1, 2, 0], 24)), Some(hop(24)));
    assert_eq!(fib.lookup(a4([10, 1, 2, 1])), Some(hop(8)));
    assert_eq!(fib.lookup(a4([10, 1, 2, 129])), Some(hop(25)));
    assert_eq!(fib.lookup(a4([11, 0, 0, 0])), None);
    assert_eq!(fib.remove(p4([10, 1, 0, 0], 16)), None, "already gone");
    assert_eq!(fib.len(), 2);
}

#[test]
fn default_and_host_routes_at_both_ends_of_both_families() {
    let mut fib = Ipv4Trie::new();
    fib.insert(p4([0, 0, 0, 0], 0), hop(0)).unwrap();
    fib.insert(p4([255, 255, 255, 255], 32), hop(1)).unwrap();
    fib.insert(p4([0, 0, 0, 0], 32), hop(2)).unwrap();
    assert_eq!(fib.lookup(0), Some(hop(2)));
    assert_eq!(fib.lookup(1), Some(hop(0)));
    assert_eq!(fib.lookup(u32::MAX), Some(hop(1)));
    assert_eq!(fib.lookup(u32::MAX - 1), Some(hop(0)));
    assert_eq!(fib.insert(p4([0, 0, 0, 0], 0), hop(5)), Ok(Some(hop(0))));
    assert_eq!(fib.lookup(1), Some(hop(5)));
    assert_eq!(fib.remove(p4([0, 0, 0, 0], 0)), Some(hop(5)));
    assert_eq!(fib.lookup(1), None);
    assert_eq!(fib.lookup(0), Some(hop(2)));
    fib.remove(p4([0, 0, 0, 0], 32)).unwrap();
    fib.remove(p4([255, 255, 255, 255], 32)).unwrap();
    assert_eq!((fib.nodes_in_use(), fib.leaves_in_use()), (0, 0));
    assert!(fib.is_empty());

    let mut fib = Ipv6Trie::new();
    fib.insert(p6(0, 0), hop(0)).unwrap();
    fib.insert(p6(DOC, 32), hop(32)).unwrap();
    fib.insert(p6(DOC | 0x0001_0000 << 80, 48), hop(48))
        .unwrap();
    fib.insert(p6(DOC | 0x1234, 128), hop(128)).unwrap();
    fib.insert(p6(u128::MAX, 128), hop(7)).unwrap();
    assert_eq!(fib.lookup(DOC | 0x1234), Some(hop(128)));
    assert_eq!(fib.lookup(DOC | 0x1235), Some(hop(32)));
    assert_eq!(fib.lookup(DOC | 0x0001_0000 << 80 | 5), Some(hop(48)));
    assert_eq!(fib.lookup(u128::MAX), Some(hop(7)));
    assert_eq!(fib.lookup(u128::MAX - 1), Some(hop(0)));
    assert_eq!(fib.remove(p6(DOC, 32)), Some(hop(32)));
    assert_eq!(fib.lookup(DOC | 0x1235), Some(hop(0)));
    assert_eq!(fib.lookup(DOC | 0x1234), Some(hop(128)));
    assert_eq!(fib.remove(p6(0, 0)), Some(hop(0)));
    assert_eq!(fib.lookup(1), None);
    assert_eq!(fib.lookup(DOC | 0x0001_0000 << 80 | 5), Some(hop(48)));
}

#[test]
fn a_short_prefix_reaches_into_every_subtree_it_covers() {
    let mut fib = Ipv4Trie::new();
    for i in 0..64u8 {
        fib.insert(p4([10, i, 0, 128], 25), hop(u32::from(i) + 100))
            .unwrap();
    }
    fib.insert(p4([10, 0, 0, 0], 8), hop(8)).unwrap();
    fib.insert(p4([10, 5, 0, 0], 16), hop(16)).unwrap();
    assert_eq!(fib.lookup(a4([10, 3, 0, 1])), Some(hop(8)));
    assert_eq!(fib.lookup(a4([10, 5, 0, 1])), Some(hop(16)));
    assert_eq!(fib.lookup(a4([10, 5, 0, 129])), Some(hop(105)));
    fib.remove(p4([10, 0, 0, 0], 8)).unwrap();
    assert_eq!(fib.lookup(a4([10, 3, 0, 1])), None);
    assert_eq!(fib.lookup(a4([10, 5, 0, 1])), Some(hop(16)));
    assert_eq!(fib.lookup(a4([10, 3, 0, 200])), Some(hop(103)));
    let used = (fib.nodes_in_use(), fib.leaves_in_use());
    for _ in 0..10 {
        fib.insert(p4([10, 0, 0, 0], 8), hop(9)).unwrap();
        fib.remove(p4([10, 0, 0, 0], 8)).unwrap();
    }
    assert_eq!((fib.nodes_in_use(), fib.leaves_in_use()), used);
    let bytes = fib.memory_bytes();
    fib.insert(p4([10, 0, 0, 0], 8), hop(9)).unwrap();
    assert_eq!(fib.memory_bytes(), bytes, "freed blocks reused");
}

#[test]
fn exhaustion_is_an_error_and_changes_nothing() {
    let mut fib = Ipv6Trie::with_node_limit(3);
    fib.insert(p6(DOC, 40), hop(1)).unwrap();
    assert_eq!(
        fib.nodes_in_use(),
        3,
        "nodes at 24, 30, 36 (the root, at 18, is the direct entry)"
    );
    let err = fib.insert(p6(DOC, 48), hop(2));
    assert_eq!(err, Err(FibError::TrieNodesExhausted { limit: 3 }));
    assert!(err.unwrap_err().to_string().contains("with_node_limit"));
    assert_eq!(fib.nodes_in_use(), 3);
    assert_eq!(fib.route(p6(DOC, 48)), None);
    assert_eq!(fib.lookup(DOC), Some(hop(1)));
    fib.insert(p6(DOC, 41), hop(3)).unwrap();
    assert_eq!(fib.lookup(DOC), Some(hop(3)));
    let many = [(p6(DOC, 40), hop(1)), (p6(DOC, 64), hop(1))];
    assert_eq!(
        Ipv6Trie::from_routes_with_node_limit(3, many).err(),
        Some(FibError::TrieNodesExhausted { limit: 3 })
    );
}

#[test]
fn batch_matches_single_lookups_and_ecmp_passes_through() {
    let mut fib = Ipv6Trie::new();
    fib.insert(p6(DOC, 32), hop(1)).unwrap();
    fib.insert(p6(DOC | 0xabcd << 80, 48), hop(2)).unwrap();
    fib.insert(p6(DOC | 0xabcd << 80 | 9, 128), NextHop::ecmp(4).unwrap())
        .unwrap();
    let addrs: Vec<u128> = (0..70u128)
        .map(|i| match i % 3 {
            0 => DOC | 0xabcd << 80 | (i / 7),
            1 => DOC | i << 64,
            _ => i << 100,
        })
        .collect();
    let mut out = vec![None; addrs.len()];
    fib.lookup_batch(&addrs, &mut out);
    for (&addr, &result) in addrs.iter().zip(&out) {
        assert_eq!(result, fib.lookup(addr), "{addr:#x}");
    }
    assert_eq!(fib.lookup(DOC | 0xabcd << 80 | 9), NextHop::ecmp(4));
    assert_eq!(
        fib.lookup_hop(DOC | 0xabcd << 80 | 9),
        None,
        "an ECMP group"
    );
    assert_eq!(fib.lookup_hop(DOC | 0xabcd << 80 | 8), Some(2));
}

#[test]
fn the_portable_lookups_answer_as_the_popcnt_ones() {
    use wirespeed_testkit::routes;
    let v4: Vec<(Ipv4Prefix, NextHop)> = routes::ipv4_prefixes(20_000, 5)
        .into_iter()
        .enumerate()
        .map(|(i, (a, l))| (Ipv4Prefix::new(a, l).unwrap(), hop(i as u32)))
        .collect();
    let fast = Ipv4Trie::from_routes(v4.iter().copied()).unwrap();
    let mut portable = Ipv4Trie::from_routes(v4.iter().copied()).unwrap();
    portable.popcnt = None;
    let prefixes: Vec<(u32, u8)> = v4.iter().map(|(p, _)| (p.addr(), p.len())).collect();
    let addrs = routes::ipv4_destinations(&prefixes, 5_000, 6);
    let (mut a, mut b) = (vec![None; addrs.len()], vec![None; addrs.len()]);
    fast.lookup_batch(&addrs, &mut a);
    portable.lookup_batch(&addrs, &mut b);
    assert_eq!(a, b);
    assert!(a.iter().all(Option::is_some), "every destination is routed");
    for &addr in &addrs {
        assert_eq!(fast.lookup(addr), portable.lookup(addr));
    }
    #[cfg(target_arch = "x86_64")]
    assert_eq!(
        fast.uses_popcnt(),
        std::arch::is_x86_feature_detected!("popcnt")
    );
    assert!(!portable.uses_popcnt());
}

#[test]
fn leaves_answer_alike_in_one_byte_ids_two_byte_ids_and_the_leaf_array() {
    // 70 000 routes with a next hop each: the first 255 roots' leaves get one-byte ids, the
    // next ones two-byte ids, and once all 65 536 ids are taken the roots keep their leaves in
    // the leaf array. Every /24 in its own /18 block, between two covering routes.
    const ROUTES: u32 = 70_000;
    let block = |i: u32| (i + 1) << 14;
    let mut fib = Ipv4Trie::new();
    fib.insert(p4([0, 0, 0, 0], 0), hop(NextHop::MAX_ID))
        .unwrap();
    for i in 0..ROUTES {
        let prefix = Ipv4Prefix::new(block(i) | 5 << 8, 24).unwrap();
        fib.insert(prefix, hop(i)).unwrap();
    }
    assert!(fib.leaves_in_use() > 0, "the last roots spilled");
    let check = |fib: &Ipv4Trie, removed: &dyn Fn(u32) -> bool| {
        let addrs: Vec<u32> = (0..ROUTES)
            .flat_map(|i| [block(i) | 5 << 8 | 77, block(i) | 6 << 8])
            .collect();
        let mut batch = vec![None; addrs.len()];
        fib.lookup_batch(&addrs, &mut batch);
        for (pair, (i, found)) in addrs.chunks(2).zip((0..ROUTES).zip(batch.chunks(2))) {
            let inside = if removed(i) { NextHop::MAX_ID } else { i };
            assert_eq!(fib.lookup(pair[0]), Some(hop(inside)), "route {i}");
            assert_eq!(
                fib.lookup(pair[1]),
                Some(hop(NextHop::MAX_ID)),
                "beside {i}"
            );
            assert_eq!(found, [Some(hop(inside)), Some(hop(NextHop::MAX_ID))]);
        }
    };
    check(&fib, &|_| false);
    for i in (0..ROUTES).step_by(3) {
        let prefix = Ipv4Prefix::new(block(i) | 5 << 8, 24).unwrap();
        assert_eq!(fib.remove(prefix), Some(hop(i)));
    }
    check(&fib, &|i| i % 3 == 0);
}
