//! FIB micro-benchmarks: lookups per second at BGP-like table sizes, the 1M-route build, and the
//! memory the tables take (printed once, criterion has no memory measurement), for DIR-24-8 and
//! the 16-8-8 trie (`batch32`, `single`) and for Poptrie on the same tables and destinations
//! (`trie_batch32`, `trie_single`).
//!
//! Destinations are spread over every route of the table (`testkit::routes`), so the large tables
//! miss the caches on almost every lookup, as a router's FIB does under many flows. Batched
//! lookups go 32 at a time (one worker batch); each iteration does 1024 lookups, so criterion's
//! "elements/s" is lookups per second on one core.
//!
//! Run: `cargo bench -p wirespeed-dataplane --bench fib -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::BenchmarkGroup;
use criterion::measurement::WallTime;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use wirespeed_dataplane::table::fib::{
    Ipv4Fib, Ipv4Prefix, Ipv4Trie, Ipv6Fib, Ipv6Prefix, Ipv6Trie, NextHop,
};
use wirespeed_testkit::routes;

const BATCH: usize = 32;
const PER_ITER: usize = 1024;
const DESTINATIONS: usize = 1 << 16;
const MIB: f64 = (1 << 20) as f64;

fn hop(i: usize) -> NextHop {
    NextHop::hop(i as u32 % 4096).unwrap()
}

fn ipv4_routes(count: usize) -> Vec<(Ipv4Prefix, NextHop)> {
    routes::ipv4_prefixes(count, 1)
        .iter()
        .enumerate()
        .map(|(i, &(a, l))| (Ipv4Prefix::new(a, l).unwrap(), hop(i)))
        .collect()
}

fn ipv6_routes(count: usize) -> Vec<(Ipv6Prefix, NextHop)> {
    routes::ipv6_prefixes(count, 1)
        .iter()
        .enumerate()
        .map(|(i, &(a, l))| (Ipv6Prefix::new(a, l).unwrap(), hop(i)))
        .collect()
}

/// Runs `step` over consecutive windows of `PER_ITER` destinations, wrapping around.
fn sweep<A: Copy>(destinations: &[A], mut step: impl FnMut(&[A])) -> impl FnMut() {
    let mut at = 0;
    move || {
        step(&destinations[at..at + PER_ITER]);
        at = (at + PER_ITER) % destinations.len();
    }
}

/// Benchmarks `{prefix}batch32/{name}` (lookups 32 at a time through `batch`) and
/// `{prefix}single/{name}` (one by one through `single`) over `destinations`.
fn lookups<A: Copy>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    prefix: &str,
    name: &str,
    destinations: &[A],
    batch: impl Fn(&[A], &mut [Option<NextHop>]),
    single: impl Fn(A) -> Option<NextHop>,
) {
    let mut out = [None; BATCH];
    group.bench_function(BenchmarkId::new(format!("{prefix}batch32"), name), |b| {
        b.iter(sweep(destinations, |window| {
            for addrs in window.chunks(BATCH) {
                batch(black_box(addrs), &mut out);
                black_box(&out);
            }
        }))
    });
    group.bench_function(BenchmarkId::new(format!("{prefix}single"), name), |b| {
        b.iter(sweep(destinations, |window| {
            for &addr in window {
                black_box(single(black_box(addr)));
            }
        }))
    });
}

fn print_trie(family: &str, name: &str, bytes: usize, rib_bytes: usize, nodes: usize) {
    println!(
        "{family} {name} routes, Poptrie: lookup arrays {:.1} MiB, route set {:.1} MiB, {nodes} nodes",
        bytes as f64 / MIB,
        rib_bytes as f64 / MIB,
    );
}

fn ipv4_lookup(c: &mut Criterion) {
    let mut group = c.benchmark_group("fib_ipv4_lookup");
    group.throughput(Throughput::Elements(PER_ITER as u64));
    for (name, count) in [("1k", 1_000), ("100k", 100_000), ("1M", 1_000_000)] {
        let table = ipv4_routes(count);
        let fib = Ipv4Fib::from_routes(table.iter().copied()).unwrap();
        println!(
            "fib_ipv4 {name} routes: lookup arrays {:.1} MiB, route set {:.1} MiB, {} tbl8 groups",
            fib.memory_bytes() as f64 / MIB,
            fib.rib_memory_bytes() as f64 / MIB,
            fib.tbl8_groups_in_use()
        );
        let prefixes: Vec<(u32, u8)> = table.iter().map(|(p, _)| (p.addr(), p.len())).collect();
        let destinations = routes::ipv4_destinations(&prefixes, DESTINATIONS, 2);
        lookups(
            &mut group,
            "",
            name,
            &destinations,
            |a, o| fib.lookup_batch(a, o),
            |a| fib.lookup(a),
        );
        let trie = Ipv4Trie::from_routes(table.iter().copied()).unwrap();
        print_trie(
            "fib_ipv4",
            name,
            trie.memory_bytes(),
            trie.rib_memory_bytes(),
            trie.nodes_in_use(),
        );
        lookups(
            &mut group,
            "trie_",
            name,
            &destinations,
            |a, o| trie.lookup_batch(a, o),
            |a| trie.lookup(a),
        );
    }
    group.finish();
}

fn ipv6_lookup(c: &mut Criterion) {
    let mut group = c.benchmark_group("fib_ipv6_lookup");
    group.throughput(Throughput::Elements(PER_ITER as u64));
    for (name, count) in [("10k", 10_000), ("200k", 200_000)] {
        let table = ipv6_routes(count);
        let fib = Ipv6Fib::from_routes(table.iter().copied()).unwrap();
        println!(
            "fib_ipv6 {name} routes: lookup arrays {:.1} MiB, route set + lengths {:.1} MiB, {} nodes",
            fib.memory_bytes() as f64 / MIB,
            fib.rib_memory_bytes() as f64 / MIB,
            fib.nodes_in_use()
        );
        let prefixes: Vec<(u128, u8)> = table.iter().map(|(p, _)| (p.addr(), p.len())).collect();
        let destinations = routes::ipv6_destinations(&prefixes, DESTINATIONS, 2);
        lookups(
            &mut group,
            "",
            name,
            &destinations,
            |a, o| fib.lookup_batch(a, o),
            |a| fib.lookup(a),
        );
        let trie = Ipv6Trie::from_routes(table.iter().copied()).unwrap();
        print_trie(
            "fib_ipv6",
            name,
            trie.memory_bytes(),
            trie.rib_memory_bytes(),
            trie.nodes_in_use(),
        );
        lookups(
            &mut group,
            "trie_",
            name,
            &destinations,
            |a, o| trie.lookup_batch(a, o),
            |a| trie.lookup(a),
        );
    }
    group.finish();
}

fn build(c: &mut Criterion) {
    let mut group = c.benchmark_group("fib_build");
    group.sample_size(10);
    let v4 = ipv4_routes(1_000_000);
    group.bench_function("ipv4_1M", |b| {
        b.iter_with_large_drop(|| Ipv4Fib::from_routes(black_box(&v4).iter().copied()).unwrap())
    });
    let v6 = ipv6_routes(200_000);
    group.bench_function("ipv6_200k", |b| {
        b.iter_with_large_drop(|| Ipv6Fib::from_routes(black_box(&v6).iter().copied()).unwrap())
    });
    group.bench_function("ipv4_1M_trie", |b| {
        b.iter_with_large_drop(|| Ipv4Trie::from_routes(black_box(&v4).iter().copied()).unwrap())
    });
    group.bench_function("ipv6_200k_trie", |b| {
        b.iter_with_large_drop(|| Ipv6Trie::from_routes(black_box(&v6).iter().copied()).unwrap())
    });
    group.finish();
}

criterion_group!(benches, ipv4_lookup, ipv6_lookup, build);
criterion_main!(benches);
