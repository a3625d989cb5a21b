//! `wirespeed bench fib --against rte_lpm,rte_lpm6`: wirespeed's FIBs against DPDK's LPM tables
//! in this process, with the same routes and the same destinations for every table.
//!
//! ```sh
//! taskset -c 1 wirespeed bench fib --against rte_lpm,rte_lpm6          # 1M IPv4, 200k IPv6 routes
//! taskset -c 1 wirespeed bench fib --against rte_lpm --routes table.txt # a real table
//! ```
//!
//! For each family and trace, every table is built (the load time is measured), looked up once
//! untimed (warming it, and checking that every table answers every destination as the first
//! one does: a disagreement fails the command), then measured in interleaved rounds (round by
//! round, table by table, single lookups then batched), so a drift of a shared machine spreads
//! over all tables alike. Medians over the rounds are printed with the ratios of each wirespeed
//! table to DPDK's. Single lookups are one plain loop of lookups; batched ones hand the table a
//! worker batch of 32 addresses per call (`rte_lpm_lookup_bulk`, `lookup_batch`). Timed lookups
//! write their next hops into a small buffer that is folded into a checksum, as DPDK's own
//! `test_lpm_perf` keeps one batch of results: a router uses a next hop and forgets it, and 40 MB
//! of results written for a 10M-lookup trace pushed the tables out of the cache as no router's
//! lookups do (batched at 1M IPv4 routes, routed trace: rte_lpm about 10-16 % faster without
//! them, DIR-24-8 9-14 %, Poptrie 25-31 %; docs/benchmarks/journal.md, session twenty).
//!
//! Beside the tables, in the same rounds, the memory's own rate: random line reads in an array
//! of each table's size ([`ceiling`]), and each table's rate as a share of it, which says
//! whether a table waits for the memory or for its own work.

mod ceiling;
pub mod tables;

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use anyhow::{Result, bail, ensure};
use clap::Args;
use wirespeed_dpdk_lpm::Eal;
use wirespeed_tester::bench::median;

use super::parse_count;
use ceiling::{LineReads, Spread};
use tables::{
    Candidate, LpmTable, NextHops, Routes, TraceKind, generated_ipv4, generated_ipv6, ipv4_tables,
    ipv4_trace, ipv6_tables, ipv6_trace, routes_file,
};

/// The DPDK reference tables `--against` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Reference {
    /// DPDK's IPv4 table against wirespeed's IPv4 FIBs.
    #[value(name = "rte_lpm")]
    RteLpm,
    /// DPDK's IPv6 table against wirespeed's IPv6 FIBs.
    #[value(name = "rte_lpm6")]
    RteLpm6,
}

/// The options of the comparison with DPDK (`--against`).
#[derive(Args)]
pub struct ReferenceArgs {
    /// With --against: IPv6 routes generated when --routes is not a file (k = 1000, M = 1000000).
    #[arg(long, default_value = "200k")]
    routes6: String,
    /// With --against: next hops of the generated routes, each route one of this many drawn
    /// at random, or `distinct` (one per route, the worst case for a compressed trie).
    #[arg(long, default_value_t = NextHops::DEFAULT)]
    next_hops: NextHops,
    /// With --against: destinations per trace.
    #[arg(long, default_value = "10M")]
    lookups: String,
    /// With --against: the traces, uniform over the address space and/or inside routed prefixes.
    #[arg(long, value_delimiter = ',', default_value = "random,routed")]
    trace: Vec<TraceKind>,
    /// With --against: measured rounds per table (the median is reported), 1..=1000.
    #[arg(long, default_value_t = 5, value_parser = crate::cli::numbers::repeats::<usize>())]
    rounds: usize,
    /// With --against: MiB of memory DPDK's EAL may give its tables (ordinary pages).
    #[arg(long, default_value_t = 2048)]
    dpdk_memory: u32,
}

/// One table's figures for one trace.
struct Measured {
    name: String,
    /// `None` for a ceiling, which loads nothing.
    load_seconds: Option<f64>,
    memory_bytes: usize,
    heap_bytes: Option<usize>,
    /// Seconds of every round: single lookups, batched lookups.
    single: Vec<f64>,
    bulk: Vec<f64>,
}

/// `wirespeed bench fib --against ...`; `routes` is `--routes`: one IPv4 count (default 1M) or a
/// routes file.
pub fn run(
    against: &[Reference],
    routes: Option<&[String]>,
    args: &ReferenceArgs,
    seed: u64,
) -> Result<()> {
    let lookups = parse_count(&args.lookups)? as usize;
    ensure!(
        (1..=1_000_000_000).contains(&lookups),
        "--lookups must be 1 to 1G"
    );
    // What the titles say of the next hops: how the generator drew them, or the file's.
    let mut hops = format!("next hops {}", args.next_hops);
    let (v4, v6) = match routes {
        None => (generated_ipv4(1_000_000, seed, args.next_hops), None),
        Some([one]) if Path::new(one).is_file() => {
            let (v4, v6) = routes_file(Path::new(one))?;
            hops = format!("next hops of {one}");
            eprintln!("{one}: {} IPv4 and {} IPv6 routes", v4.len(), v6.len());
            (v4, Some(v6))
        }
        Some([one]) => {
            let count = parse_count(one)? as usize;
            ensure!(
                (1..=4_000_000).contains(&count),
                "--routes must be 1 to 4M routes or a file"
            );
            (generated_ipv4(count, seed, args.next_hops), None)
        }
        Some(_) => bail!("with --against, --routes is one count or one routes file"),
    };
    let eal = Eal::init(args.dpdk_memory)?;
    for reference in against {
        match reference {
            Reference::RteLpm => {
                let built = build(eal, &ipv4_tables(), &v4)?;
                for &kind in &args.trace {
                    let trace = ipv4_trace(kind, &v4, lookups, seed ^ 0x4);
                    let results = measure(&built, &trace, args.rounds)?;
                    print(
                        &format!("IPv4, {} routes ({hops}), {kind:?} trace", v4.len()),
                        &results,
                        lookups,
                    );
                }
            }
            Reference::RteLpm6 => {
                let v6 = match &v6 {
                    Some(v6) => v6.clone(),
                    None => {
                        generated_ipv6(parse_count(&args.routes6)? as usize, seed, args.next_hops)
                    }
                };
                let built = build(eal, &ipv6_tables(), &v6)?;
                for &kind in &args.trace {
                    let trace = ipv6_trace(kind, &v6, lookups, seed ^ 0x6);
                    let results = measure(&built, &trace, args.rounds)?;
                    print(
                        &format!("IPv6, {} routes ({hops}), {kind:?} trace", v6.len()),
                        &results,
                        lookups,
                    );
                }
            }
        }
    }
    Ok(())
}

/// The addresses of `trace` that `table` answers differently from `expected`, at most `limit`
/// of them (index, expected, found), for single and batched lookups.
pub fn disagreements<A>(
    table: &dyn LpmTable<A>,
    trace: &[A],
    expected: &[u32],
    limit: usize,
) -> Vec<(usize, u32, u32)> {
    let mut found = vec![0; trace.len()];
    let mut out = Vec::new();
    for bulk in [false, true] {
        if bulk {
            table.lookup_bulk(trace, &mut found);
        } else {
            table.lookup_each(trace, &mut found);
        }
        out.extend(
            expected
                .iter()
                .zip(&found)
                .enumerate()
                .filter(|(_, (e, f))| e != f)
                .map(|(i, (&e, &f))| (i, e, f))
                .take(limit),
        );
    }
    out.truncate(limit);
    out
}

/// A table built for the comparison: its name, the table, its load time in seconds.
type Loaded<A> = (&'static str, Box<dyn LpmTable<A>>, f64);

/// Builds every table of `candidates` from `routes`, timing each. DPDK's `rte_lpm_add` looks
/// for the prefix among every rule of its length, so its load time grows with the square of
/// the table (minutes for 1M routes): the tables are built once per family, for every trace.
fn build<A, R>(
    eal: &Eal,
    candidates: &[Candidate<A, R>],
    routes: &Routes<R>,
) -> Result<Vec<Loaded<A>>> {
    let mut built = Vec::with_capacity(candidates.len());
    for candidate in candidates {
        eprintln!("loading {} routes into {}", routes.len(), candidate.name);
        let start = Instant::now();
        let table = (candidate.build)(eal, routes)?;
        built.push((candidate.name, table, start.elapsed().as_secs_f64()));
    }
    Ok(built)
}

/// What [`measure`] found: the tables', and the memory's ceiling at each table's size.
struct Figures {
    tables: Vec<Measured>,
    /// Random line reads ([`ceiling`]) in arrays of the tables' sizes, one per size.
    ceilings: Vec<Measured>,
    /// Per table, the index of its size's ceiling in `ceilings`.
    ceiling_of: Vec<usize>,
}

/// Checks every table's answers for `trace` against the first one's, then times `rounds`
/// interleaved rounds of single and batched lookups of it, and of random line reads in arrays
/// of the tables' sizes (one per size, to a tenth of a MiB).
fn measure<A: Spread>(built: &[Loaded<A>], trace: &[A], rounds: usize) -> Result<Figures> {
    let mut expected = vec![0; trace.len()];
    if let Some((_, first, _)) = built.first() {
        first.lookup_each(trace, &mut expected);
    }
    for (name, table, _) in built {
        let wrong = disagreements(table.as_ref(), trace, &expected, 5);
        if let (false, Some((first, _, _))) = (wrong.is_empty(), built.first()) {
            bail!(
                "{name} and {first} disagree (index, {first}, {name}; {} is a miss): {wrong:?}",
                tables::MISS
            );
        }
    }
    let measured = |name: String, table: &dyn LpmTable<A>, load_seconds| Measured {
        name,
        load_seconds,
        memory_bytes: table.memory_bytes(),
        heap_bytes: table.heap_bytes(),
        single: Vec::new(),
        bulk: Vec::new(),
    };
    // One array per size, in tenths of a MiB, and per table the index of its size's.
    let mut readers: Vec<(usize, LineReads)> = Vec::new();
    let mut ceiling_of = Vec::with_capacity(built.len());
    for (_, table, _) in built {
        let tenths = (table.memory_bytes() as f64 / MIB * 10.0).round() as usize;
        if let Some(index) = readers.iter().position(|&(size, _)| size == tenths) {
            ceiling_of.push(index);
            continue;
        }
        let bytes = (tenths as f64 / 10.0 * MIB) as usize;
        let Some(reads) = LineReads::new(bytes) else {
            bail!("cannot reserve {bytes} bytes for the memory's ceiling");
        };
        ceiling_of.push(readers.len());
        readers.push((tenths, reads));
    }
    let mut figures = Figures {
        tables: built
            .iter()
            .map(|(name, table, load)| measured(name.to_string(), table.as_ref(), Some(*load)))
            .collect(),
        ceilings: readers
            .iter()
            .map(|(_, reads)| {
                let mib = reads.bytes() as f64 / MIB;
                measured(format!("random line reads, {mib:.1} MiB"), reads, None)
            })
            .collect(),
        ceiling_of,
    };
    let timed = |table: &dyn LpmTable<A>, result: &mut Measured| {
        let start = Instant::now();
        black_box(folded(trace, |addrs, hops| table.lookup_each(addrs, hops)));
        result.single.push(start.elapsed().as_secs_f64());
        let start = Instant::now();
        black_box(folded(trace, |addrs, hops| table.lookup_bulk(addrs, hops)));
        result.bulk.push(start.elapsed().as_secs_f64());
    };
    for _ in 0..rounds {
        for ((_, table, _), result) in built.iter().zip(&mut figures.tables) {
            timed(table.as_ref(), result);
        }
        for ((_, reads), result) in readers.iter().zip(&mut figures.ceilings) {
            timed(reads, result);
        }
    }
    Ok(figures)
}

/// Addresses a timed call looks up into [`folded`]'s buffer (16 KiB of next hops, in L1).
const WINDOW: usize = 4096;

/// Looks `trace` up through `lookup`, [`WINDOW`] addresses a call into one buffer, and returns
/// the wrapping sum of the next hops found: what the lookups answered, kept from the optimiser,
/// without a result array the size of the trace.
fn folded<A>(trace: &[A], mut lookup: impl FnMut(&[A], &mut [u32])) -> u32 {
    let mut hops = [0u32; WINDOW];
    let mut sum = 0u32;
    for addrs in trace.chunks(WINDOW) {
        lookup(black_box(addrs), &mut hops);
        sum = hops
            .iter()
            .take(addrs.len())
            .fold(sum, |sum, &hop| sum.wrapping_add(hop));
    }
    sum
}

/// Bytes in a MiB, for the printed sizes.
const MIB: f64 = (1 << 20) as f64;

fn print(title: &str, figures: &Figures, lookups: usize) {
    let Figures {
        tables: results,
        ceilings,
        ceiling_of,
    } = figures;
    let rate = |seconds: &[f64]| lookups as f64 / median(seconds) / 1e6;
    println!(
        "\n### {title}, {lookups} lookups, medians over {} rounds\n",
        { results.first().map_or(0, |r| r.single.len()) }
    );
    println!(
        "| table | load s | lookup arrays MiB | DPDK heap MiB | single M lookups/s | \
         batched M lookups/s |\n| --- | ---: | ---: | ---: | ---: | ---: |"
    );
    for r in results.iter().chain(ceilings) {
        println!(
            "| {} | {} | {:.1} | {} | {:.1} | {:.1} |",
            r.name,
            r.load_seconds.map_or("-".into(), |s| format!("{s:.2}")),
            r.memory_bytes as f64 / MIB,
            r.heap_bytes
                .map_or("-".into(), |b| format!("{:.1}", b as f64 / MIB)),
            rate(&r.single),
            rate(&r.bulk),
        );
    }
    let Some(reference) = results.last() else {
        return;
    };
    for r in &results[..results.len() - 1] {
        let load = match (r.load_seconds, reference.load_seconds) {
            (Some(load), Some(reference)) => format!("{:.4}", load / reference),
            _ => "-".into(),
        };
        println!(
            "{} / {}: single {:.2}x, batched {:.2}x, load time {load}x, lookup arrays {:.2}x",
            r.name,
            reference.name,
            rate(&r.single) / rate(&reference.single),
            rate(&r.bulk) / rate(&reference.bulk),
            r.memory_bytes as f64 / reference.memory_bytes as f64,
        );
    }
    for (r, &c) in results.iter().zip(ceiling_of) {
        let Some(ceiling) = ceilings.get(c) else {
            continue;
        };
        println!(
            "{} / one random line read per lookup at its size: single {:.2}x, batched {:.2}x",
            r.name,
            rate(&r.single) / rate(&ceiling.single),
            rate(&r.bulk) / rate(&ceiling.bulk),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::tables::*;
    use super::*;

    /// DPDK's EAL, or `None` (the test skips) when not root; as root it must start.
    fn eal() -> Option<&'static Eal> {
        use std::os::unix::fs::MetadataExt;
        // /proc/self belongs to the process's effective user.
        if std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() != 0) {
            eprintln!("skipped: DPDK's EAL needs root");
            return None;
        }
        Some(Eal::init(1024).expect("DPDK's EAL starts as root"))
    }

    fn agree<A, R>(candidates: &[Candidate<A, R>], routes: &Routes<R>, trace: &[A]) {
        let Some(eal) = eal() else { return };
        let reference = candidates.last().unwrap();
        let dpdk = (reference.build)(eal, routes).unwrap();
        let mut expected = vec![0; trace.len()];
        dpdk.lookup_each(trace, &mut expected);
        assert!(
            expected.contains(&MISS) && expected.iter().any(|&h| h != MISS),
            "the trace has hits and misses"
        );
        for candidate in candidates {
            let table = (candidate.build)(eal, routes).unwrap();
            let wrong = disagreements(table.as_ref(), trace, &expected, 10);
            assert!(wrong.is_empty(), "{}: {wrong:?}", candidate.name);
        }
    }

    /// One next hop per route, and a few shared by many (long runs of equal leaves).
    const HOPS: [NextHops; 2] = [NextHops::Distinct, NextHops::Drawn(4)];

    #[test]
    fn every_ipv4_fib_agrees_with_rte_lpm_on_every_lookup() {
        for hops in HOPS {
            let routes = generated_ipv4(10_000, 11, hops);
            let mut trace = ipv4_trace(TraceKind::Routed, &routes, 50_000, 12);
            trace.extend(ipv4_trace(TraceKind::Random, &routes, 50_000, 13));
            agree(&ipv4_tables(), &routes, &trace);
        }
    }

    #[test]
    fn every_ipv6_fib_agrees_with_rte_lpm6_on_every_lookup() {
        for hops in HOPS {
            let routes = generated_ipv6(10_000, 21, hops);
            let mut trace = ipv6_trace(TraceKind::Routed, &routes, 50_000, 22);
            trace.extend(ipv6_trace(TraceKind::Random, &routes, 50_000, 23));
            agree(&ipv6_tables(), &routes, &trace);
        }
    }

    #[test]
    fn folded_lookups_see_every_address_once_and_sum_what_they_found() {
        // 10 000 addresses: two whole windows and a part; each "lookup" answers 3 * addr.
        let trace: Vec<u32> = (0..10_000).collect();
        let mut calls = 0;
        let sum = folded(&trace, |addrs, hops| {
            calls += 1;
            for (hop, &addr) in hops.iter_mut().zip(addrs) {
                *hop = 3 * addr;
            }
        });
        assert_eq!(calls, 10_000usize.div_ceil(WINDOW));
        assert_eq!(sum, trace.iter().map(|&a| 3 * a).sum::<u32>());
    }

    #[test]
    fn generated_next_hops_are_one_per_route_or_drawn_from_the_count() {
        let distinct = generated_ipv4(1000, 3, NextHops::Distinct);
        let ids: Vec<u32> = distinct.iter().map(|&(_, _, id)| id).collect();
        assert_eq!(ids, (0..1000).collect::<Vec<u32>>());
        let drawn = generated_ipv6(1000, 3, NextHops::Drawn(8));
        let mut seen = [0; 8];
        for &(_, _, id) in &drawn {
            seen[id as usize] += 1;
        }
        assert!(
            seen.iter().all(|&n| n > 60),
            "each of 8 about 125 times: {seen:?}"
        );
        assert_eq!("distinct".parse(), Ok(NextHops::Distinct));
        assert_eq!("64".parse(), Ok(NextHops::DEFAULT));
        assert!("0".parse::<NextHops>().is_err() && "many".parse::<NextHops>().is_err());
    }

    #[test]
    fn a_routes_file_gives_both_families_with_numbered_next_hops() {
        let path = std::env::temp_dir().join(format!("ws-routes-{}.txt", std::process::id()));
        std::fs::write(
            &path,
            "# bgpdump -m | awk\n0.0.0.0/0 192.0.2.9\n1.2.3.0/24 192.0.2.1\n10.1.0.0/16 192.0.2.2 \n\n\
             2001:db8::/32 2001:db8::1\n1.2.3.77/24 192.0.2.2  # again: replaces\n",
        )
        .unwrap();
        let (v4, v6) = routes_file(&path).unwrap();
        assert_eq!(v4, vec![(0x0102_0300, 24, 1), (0x0a01_0000, 16, 1)]);
        assert_eq!(v6, vec![(0x2001_0db8 << 96, 32, 2)]);
        std::fs::write(&path, "1.2.3.0/24\n").unwrap();
        assert!(routes_file(&path).is_err());
        std::fs::remove_file(&path).unwrap();
    }
}
