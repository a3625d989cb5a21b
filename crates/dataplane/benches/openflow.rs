//! The OpenFlow app's lookup tiers and the ACL stage, each against the cross-connect measured
//! in the same run (64-byte frames, batches of 32, memory ports, testkit's Rig).
//!
//! * `xconnect`: the ceiling (parse + a port lookup).
//! * `openflow_cache_hit`: one flow, every packet an exact-match cache hit.
//! * `openflow_cache_hit_64_flows` / `openflow_cache_hit_1024_flows`: as many flows (UDP source
//!   ports), each with a flow entry of its own (so each is its own megaflow and stored result),
//!   in a shuffled order: every packet an exact-match cache hit, but neighbours almost never
//!   share a flow, so nothing is saved by trains of one flow.
//! * `openflow_megaflow_hit`: the cache off, every packet a megaflow classifier hit.
//! * `openflow_tables_1000r_10m`: cache and megaflows off, every packet walks a table of 1000
//!   rules over 10 masks (none matching) plus a catch-all: the classifier's miss path, 11 probes.
//! * `acl_1000_cached` / `acl_1000_scan`: 1000 ACL rules (none matching, default permit) in
//!   front of a cross-connect, with the decision cache and without it (a full linear scan).
//!
//! Frames circulate: what the worker sends on port 1 is moved back into port 0 untouched.
//!
//! Before criterion measures a case, the bench prints its ratio to the cross-connect measured
//! interleaved (`wirespeed_testkit::interleave`: the two alternate in short blocks), which a
//! shared machine's changing load cannot skew the way it skews two criterion figures taken a
//! minute apart. Filtered to nothing (`--bench zzz`), the bench prints only those ratios.

use std::net::Ipv4Addr;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use wirespeed_dataplane::app::openflow::{Action, FlowEntry, OpenFlow, OpenFlowConfig};
use wirespeed_dataplane::app::{App, Context, Xconnect};
use wirespeed_dataplane::stage::Parse;
use wirespeed_dataplane::stage::acl::{Acl, AclAction, AclConfig, AclRule, IpPrefix};
use wirespeed_dataplane::table::classifier::FlowMatch;
use wirespeed_packet::Batch;
use wirespeed_tester::generator::{Template, TemplateConfig};
use wirespeed_testkit::interleave::interleaved;
use wirespeed_testkit::rig::Rig;

const BATCH: usize = 32;

/// Builds the loaded rig a case measures.
type MakeRig = fn() -> Rig;

/// Frames in circulation.
const FRAMES: u32 = 1024;

/// `FRAMES` frames of 64 bytes spread evenly over `flows` flows (UDP source ports
/// `TemplateConfig::default().src_port + i`), shuffled with a fixed seed when there is more
/// than one.
fn frames(flows: u32) -> Vec<Vec<u8>> {
    let template = Template::new(&TemplateConfig {
        flows,
        ..TemplateConfig::default()
    })
    .expect("template");
    let mut order: Vec<u32> = (0..FRAMES).collect();
    // Fisher-Yates with xorshift32: the same order in every run.
    let mut rng = 0x9e37_79b9u32;
    for i in (1..order.len()).rev() {
        rng ^= rng << 13;
        rng ^= rng >> 17;
        rng ^= rng << 5;
        order.swap(i, rng as usize % (i + 1));
    }
    order.into_iter().map(|i| template.frame(i)).collect()
}

fn loaded(app: Box<dyn App>) -> Rig {
    loaded_with(app, 1)
}

fn loaded_with(app: Box<dyn App>, flows: u32) -> Rig {
    let mut rig = Rig::new(app, 2, BATCH);
    rig.send(0, &frames(flows));
    // Every case must forward everything: a case that drops would measure the wrong path.
    for _ in 0..64 {
        rig.worker.poll_once();
        rig.recirculate(1, 0);
    }
    let counters = rig.worker.counters();
    assert!(
        counters.tx_packets > 0 && counters.dropped() == 0,
        "{counters:?}"
    );
    rig
}

/// A cache-hit case of `flows` flows: asserts that after the warm-up every packet hits the
/// exact-match cache, so the case measures what its name says.
fn loaded_cache_hits(flows: u32) -> Rig {
    let mut app = openflow(1, 4096, false);
    let base = TemplateConfig::default().src_port;
    for flow in 0..flows {
        let port = base.wrapping_add(flow as u16);
        app.add_flow(
            0,
            FlowEntry::new(10, FlowMatch::any().l4_src(port), vec![Action::Output(1)]),
        )
        .expect("per-flow rule");
    }
    let mut rig = loaded_with(Box::new(app), flows);
    let hits_before = app_counter(&rig, "openflow.cache_hits");
    let sent_before = rig.worker.counters().tx_packets;
    for _ in 0..64 {
        rig.worker.poll_once();
        rig.recirculate(1, 0);
    }
    let hits = app_counter(&rig, "openflow.cache_hits") - hits_before;
    let sent = rig.worker.counters().tx_packets - sent_before;
    assert!(
        sent > 0 && hits == sent,
        "{hits} cache hits for {sent} packets"
    );
    rig
}

fn app_counter(rig: &Rig, name: &str) -> u64 {
    rig.app_counters()
        .into_iter()
        .find(|(n, _)| *n == name)
        .map_or(0, |(_, value)| value)
}

fn openflow(cache_insert_one_in: u32, megaflows: usize, rules: bool) -> OpenFlow {
    let mut app = OpenFlow::new(OpenFlowConfig {
        ports: 2,
        cache_insert_one_in,
        megaflows,
        ..OpenFlowConfig::default()
    });
    if rules {
        // Ten prefix lengths over 10.128.0.0/9 (the traffic is elsewhere), 100 rules each.
        for i in 0..1000u32 {
            let len = 16 + (i % 10) as u8;
            let addr = Ipv4Addr::from(0x0a80_0000 + (i << 8));
            let entry = FlowEntry::new(
                100 + (i % 50) as u16,
                FlowMatch::any().ipv4_dst(addr, len),
                vec![Action::Output(0)],
            );
            app.add_flow(0, entry).expect("rule");
        }
    }
    app.add_flow(
        0,
        FlowEntry::new(0, FlowMatch::any(), vec![Action::Output(1)]),
    )
    .expect("catch-all");
    app
}

/// Parse, ACL, then port 0 -> port 1.
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
    }
}

fn firewall(cache_insert_one_in: u32) -> Firewall {
    let rules = (0..1000u32)
        .map(|i| AclRule {
            src: IpPrefix::v4(Ipv4Addr::from(0xc0a8_0000 + (i << 4)), 28),
            protocol: Some(6),
            dst_ports: 1..=1023,
            ..AclRule::any(AclAction::Deny)
        })
        .collect();
    Firewall {
        parse: Parse::new(),
        acl: Acl::new(&AclConfig {
            rules,
            default: AclAction::Permit,
            cache_entries: 4096,
            cache_insert_one_in,
        }),
    }
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("openflow_64B_batch32");
    group.throughput(Throughput::Elements(BATCH as u64));
    let cases: [(&str, MakeRig); 8] = [
        ("xconnect", || {
            loaded(Box::new(Xconnect::new(&[(0, 1)], None)))
        }),
        ("openflow_cache_hit", || {
            loaded(Box::new(openflow(1, 1024, false)))
        }),
        ("openflow_cache_hit_64_flows", || loaded_cache_hits(64)),
        ("openflow_cache_hit_1024_flows", || loaded_cache_hits(1024)),
        ("openflow_megaflow_hit", || {
            loaded(Box::new(openflow(0, 1024, false)))
        }),
        ("openflow_tables_1000r_10m", || {
            loaded(Box::new(openflow(0, 0, true)))
        }),
        ("acl_1000_cached", || loaded(Box::new(firewall(1)))),
        ("acl_1000_scan", || loaded(Box::new(firewall(0)))),
    ];
    let mut baseline = cases[0].1();
    for (name, make) in cases {
        let mut rig = make();
        if name != "xconnect" {
            // 64 iterations each, 500 times (a slow case takes a few seconds).
            let (case_ns, baseline_ns) = interleaved(
                500,
                64,
                BATCH as f64,
                || step(&mut rig),
                || step(&mut baseline),
            );
            eprintln!(
                "{name}: interleaved {case_ns:.1} ns/packet, xconnect {baseline_ns:.1} ns/packet, \
                 ratio {:.2}",
                case_ns / baseline_ns
            );
        }
        group.bench_function(name, |b| b.iter(|| step(&mut rig)));
    }
    group.finish();
}

/// One worker iteration, and the frames it sent back into its port 0.
fn step(rig: &mut Rig) {
    rig.worker.poll_once();
    rig.recirculate(1, 0);
}

criterion_group!(benches, bench);
criterion_main!(benches);
