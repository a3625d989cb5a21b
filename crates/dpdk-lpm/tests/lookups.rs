//! DPDK's tables through the wrappers, on routes whose answers are known: longest match wins,
//! misses are MISS, single and bulk lookups agree, the sizes add up. Needs root (DPDK's EAL);
//! skips with the reason otherwise. wirespeed's FIBs are checked against these tables in
//! `wirespeed bench fib --against`'s own tests.

use wirespeed_dpdk_lpm::{Eal, Lpm, Lpm6, LpmError, MAX_HOP, MISS};

/// Held by each test for its whole run: a table's `heap_bytes` is the growth of DPDK's heap
/// while it was built, which another test's tables, built or freed meanwhile, would change.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// DPDK's EAL, or `None` (the test skips) when not root; as root it must start.
fn eal() -> Option<&'static Eal> {
    use std::os::unix::fs::MetadataExt;
    // /proc/self belongs to the process's effective user.
    if std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() != 0) {
        eprintln!("skipped: DPDK's EAL needs root");
        return None;
    }
    Some(Eal::init(512).expect("DPDK's EAL starts as root"))
}

#[test]
fn rte_lpm_finds_the_longest_prefix_single_and_bulk() {
    let _alone = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(eal) = eal() else { return };
    let routes = [
        (0x0a00_0000, 8, 1),
        (0x0a01_0000, 16, 2),
        (0x0a01_0280, 25, 3),
        (0x0a01_0281, 32, 4),
        (0x8000_0000, 1, 5),
        // A later duplicate replaces the earlier next hop.
        (0x0a00_0000, 8, 6),
    ];
    let lpm = Lpm::new(eal, &routes).unwrap();
    let addrs = [
        0x0a02_0304,
        0x0a01_0001,
        0x0a01_0290,
        0x0a01_0281,
        0xc000_0201,
        0x0b00_0000,
    ];
    let want = [6, 2, 3, 4, 5, MISS];
    let mut hops = [0; 6];
    lpm.lookup_each(&addrs, &mut hops);
    assert_eq!(hops, want);
    let mut bulk = [0; 6];
    lpm.lookup_bulk(&addrs, &mut bulk);
    assert_eq!(bulk, want);
    // Two tbl8 groups would be one too many: one /24 holds the long prefixes, plus a spare.
    assert_eq!(lpm.memory_bytes(), ((1 << 24) + 2 * 256) * 4);
    assert!(lpm.heap_bytes() >= lpm.memory_bytes());

    // Bulk lookups of more than one step, and a tail.
    let mut many = [0; 40];
    lpm.lookup_bulk(&[0x0b00_0000; 40], &mut many);
    assert_eq!(many, [MISS; 40]);
}

#[test]
fn rte_lpm6_finds_the_longest_prefix_single_and_bulk() {
    let _alone = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(eal) = eal() else { return };
    let net = 0x2001_0db8_u128 << 96;
    let routes = [
        (net, 32, 1),
        (net | (0xab << 80), 48, 2),
        (net | (0xab << 80) | 1, 128, 3),
    ];
    let lpm = Lpm6::new(eal, &routes).unwrap();
    let addrs = [
        net | 7,
        net | (0xab << 80) | 2,
        net | (0xab << 80) | 1,
        0x2002_u128 << 112,
    ]
    .map(u128::to_be_bytes);
    let want = [1, 2, 3, MISS];
    let mut hops = [0; 4];
    lpm.lookup_each(&addrs, &mut hops);
    assert_eq!(hops, want);
    let mut bulk = [0; 4];
    lpm.lookup_bulk(&addrs, &mut bulk);
    assert_eq!(bulk, want);
    assert!(lpm.heap_bytes() >= lpm.memory_bytes());
}

#[test]
fn routes_outside_dpdks_limits_are_refused_before_dpdk_sees_them() {
    let _alone = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(eal) = eal() else { return };
    assert!(matches!(
        Lpm::new(eal, &[(0, 33, 1)]),
        Err(LpmError::Route { len: 33, .. })
    ));
    assert!(matches!(
        Lpm::new(eal, &[(0x0a00_0000, 8, 1), (0, 0, 1)]),
        Err(LpmError::Route {
            index: 1,
            len: 0,
            ..
        })
    ));
    assert!(matches!(
        Lpm6::new(eal, &[(0, 64, MAX_HOP + 1)]),
        Err(LpmError::Route { index: 0, .. })
    ));
}
