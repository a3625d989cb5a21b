//! The first traffic generator: send a template out of one port as fast as possible or at a set
//! rate, and count what arrives on another.
//!
//! Every frame of the pool is filled with the template once, at start-up; per packet the
//! generator only takes a frame index from the pool and stamps the flow's 4 changing bytes
//! (MoonGen's pre-filled buffers). Frames come back to the pool when their transmission
//! completes, so the generator never allocates or copies a whole frame while it runs. Frames
//! received on the RX port (which shares the pool, as AF_XDP ports of one UMEM do) are written
//! back to the template before they return to the pool: one small copy per arrival.
//!
//! Flows take turns, or with `random_flows` each frame's flow is drawn from a seeded
//! [`Rng`] (a few cycles per frame; the stamp is the same 4 bytes either way, so randomized
//! traffic costs what one flow costs, IPv6 as much as IPv4).
//!
//! Pacing here is per batch from the TSC: at a set rate, batch *k* leaves no earlier than
//! `k * batch / rate` after the start. Packet-level pacing (CBR, Poisson, bursts) with recorded
//! departure times is the tester's own work and builds on this loop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wirespeed_io::{Port, QueueId};
use wirespeed_packet::cpu::{rdtsc, tsc_hz};
use wirespeed_packet::{Batch, Desc, FramePool, HEADROOM, MAX_BATCH};

use super::Template;
use super::kernel_count::TxCounters;
use super::pacing::Rng;

/// How to blast.
#[derive(Clone, Debug)]
pub struct BlastConfig {
    /// Packets per TX batch.
    pub batch: usize,
    /// Packets per second to offer; `None` for as fast as the port takes them.
    pub rate_pps: Option<f64>,
    /// How long to send.
    pub duration: Duration,
    /// Stop after this many packets, if set.
    pub count: Option<u64>,
    /// The TX queue to send on.
    pub queue: QueueId,
    /// After sending stops, how long to keep counting arrivals.
    pub linger: Duration,
    /// Draw each frame's flow at random from a generator with this seed instead of in turn.
    pub random_flows: Option<u64>,
}

impl Default for BlastConfig {
    fn default() -> Self {
        Self {
            batch: 32,
            rate_pps: None,
            duration: Duration::from_secs(1),
            count: None,
            queue: 0,
            linger: Duration::from_millis(200),
            random_flows: None,
        }
    }
}

/// What a blast did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BlastResult {
    /// Packets the TX port took (after [`BlastResult::settle`]: that the interface
    /// transmitted).
    pub sent: u64,
    /// Packets the TX port refused (its ring was full); not counted as offered.
    pub refused: u64,
    /// Packets the TX port took that the interface did not transmit (set by
    /// [`BlastResult::settle`]): the kernel dropped them, too long for the MTU or for want of
    /// a peer.
    pub dropped_by_kernel: u64,
    /// Packets received on the RX port.
    pub received: u64,
    /// Seconds from the first to the last transmission.
    pub seconds: f64,
}

impl BlastResult {
    /// Counts as sent only what the TX interface's own counters say it transmitted during the
    /// blast (`interface`: their difference over it); the rest of what the port took becomes
    /// [`BlastResult::dropped_by_kernel`]. Frames the host sent itself in the meantime (a few
    /// IPv6 neighbour messages) can make the interface's count the larger, never the sent one.
    pub fn settle(&mut self, interface: &TxCounters) {
        let transmitted = self.sent.min(interface.transmitted);
        self.dropped_by_kernel += self.sent - transmitted;
        self.sent = transmitted;
    }

    /// Transmitted packets per second.
    pub fn tx_pps(&self) -> f64 {
        if self.seconds > 0.0 {
            self.sent as f64 / self.seconds
        } else {
            0.0
        }
    }

    /// Received packets per second (over the sending time).
    pub fn rx_pps(&self) -> f64 {
        if self.seconds > 0.0 {
            self.received as f64 / self.seconds
        } else {
            0.0
        }
    }

    /// Share of the sent packets that did not arrive.
    pub fn loss(&self) -> f64 {
        if self.sent == 0 {
            0.0
        } else {
            1.0 - self.received as f64 / self.sent as f64
        }
    }
}

/// Fills every frame of `pool` with the template (flow 0) at `HEADROOM`.
pub fn prefill(pool: &mut FramePool, template: &Template) {
    let mut ids = vec![0; pool.free_count() as usize];
    let count = pool.alloc_bulk(&mut ids);
    for &id in &ids[..count] {
        template.write(&mut pool.frame_mut(id)[HEADROOM as usize..], 0);
    }
    for &id in &ids[..count] {
        pool.release(id);
    }
}

/// Sends `template` out of `tx` (and counts arrivals on `rx`) until the duration or count is
/// reached or `stop` is set. `pool` must have been [`prefill`]ed with the same template.
pub fn blast(
    tx: &mut dyn Port,
    mut rx: Option<&mut dyn Port>,
    pool: &mut FramePool,
    template: &Template,
    config: &BlastConfig,
    stop: &AtomicBool,
) -> BlastResult {
    let batch_size = config.batch.clamp(1, MAX_BATCH);
    let mut batch = Batch::new(batch_size);
    let mut incoming = Batch::new(MAX_BATCH);
    let mut ids = [0u32; MAX_BATCH];
    let hz = tsc_hz() as f64;
    let cycles_per_batch = config
        .rate_pps
        .map(|pps| hz * batch_size as f64 / pps.max(1.0));
    let duration_cycles = (config.duration.as_secs_f64() * hz) as u64;
    let limit = config.count.unwrap_or(u64::MAX);
    let len = template.len() as u16;
    let mut result = BlastResult::default();
    let mut flow = 0u32;
    let mut random = config.random_flows.map(Rng::new);
    let start = rdtsc();
    let mut batches = 0u64;
    let mut last_tx = start;
    let mut receive =
        |rx: &mut Option<&mut dyn Port>, pool: &mut FramePool, result: &mut BlastResult| {
            if let Some(rx) = rx.as_deref_mut() {
                while rx.rx(0, pool, &mut incoming) > 0 {
                    result.received += incoming.len() as u64;
                    for desc in incoming.descs() {
                        // The frame holds what arrived (a router's rewritten MACs and TTL, the
                        // kernels' own frames); it goes back to the pool as the template again,
                        // or the generator would send those bytes on.
                        template.write(&mut pool.frame_mut(desc.frame)[HEADROOM as usize..], 0);
                        pool.release(desc.frame);
                    }
                    incoming.clear();
                }
                rx.poll(pool);
            }
        };
    loop {
        let now = rdtsc();
        if now.wrapping_sub(start) >= duration_cycles
            || result.sent >= limit
            || (batches.is_multiple_of(64) && stop.load(Ordering::Relaxed))
        {
            break;
        }
        if let Some(cycles) = cycles_per_batch
            && (now.wrapping_sub(start) as f64) < batches as f64 * cycles
        {
            tx.poll(pool);
            receive(&mut rx, pool, &mut result);
            continue;
        }
        let want = batch_size.min((limit - result.sent).min(batch_size as u64) as usize);
        let got = pool.alloc_bulk(&mut ids[..want]);
        for &id in &ids[..got] {
            if let Some(rng) = &mut random {
                flow = rng.next_u64() as u32;
            }
            template.stamp(&mut pool.frame_mut(id)[HEADROOM as usize..], flow);
            flow = flow.wrapping_add(1);
            batch.push(Desc {
                frame: id,
                offset: HEADROOM,
                len,
                port: 0,
                queue: config.queue,
            });
        }
        let taken = tx.tx(config.queue, pool, &mut batch);
        last_tx = rdtsc();
        result.sent += taken as u64;
        result.refused += batch.len() as u64;
        for desc in batch.descs() {
            pool.release(desc.frame);
        }
        batch.clear();
        tx.poll(pool);
        batches += 1;
        receive(&mut rx, pool, &mut result);
    }
    result.seconds = last_tx.wrapping_sub(start) as f64 / hz;
    let linger_end = rdtsc() + (config.linger.as_secs_f64() * hz) as u64;
    while rdtsc() < linger_end {
        tx.poll(pool);
        receive(&mut rx, pool, &mut result);
        std::hint::spin_loop();
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generator::TemplateConfig;
    use wirespeed_io::memory::{LinkConfig, link};

    #[test]
    fn every_sent_frame_arrives_with_the_flow_sequence() {
        let template = Template::new(&TemplateConfig {
            flows: 4,
            ..TemplateConfig::default()
        })
        .unwrap();
        let mut pool = FramePool::new(8192, 2048).unwrap();
        prefill(&mut pool, &template);
        let (mut tx, mut rx) = link(
            "tx",
            "rx",
            &LinkConfig {
                ring_size: 8192,
                ..LinkConfig::default()
            },
        );
        let config = BlastConfig {
            count: Some(1000),
            duration: Duration::from_secs(5),
            linger: Duration::ZERO,
            ..BlastConfig::default()
        };
        let result = blast(
            &mut tx,
            None,
            &mut pool,
            &template,
            &config,
            &AtomicBool::new(false),
        );
        assert_eq!(result.sent, 1000);
        let mut batch = Batch::new(MAX_BATCH);
        let mut expected = vec![0u8; 2048];
        let mut index = 0;
        while rx.rx(0, &mut pool, &mut batch) > 0 {
            for desc in batch.descs() {
                let start = desc.offset as usize;
                let frame = &pool.frame(desc.frame)[start..start + desc.len as usize];
                let len = template.write(&mut expected, index);
                assert_eq!(frame, &expected[..len], "packet {index}");
                index += 1;
                pool.release(desc.frame);
            }
            batch.clear();
        }
        assert_eq!(index, 1000);
        assert_eq!(pool.free_count(), pool.total());
    }

    #[test]
    fn random_flows_cover_every_flow_in_no_fixed_order() {
        let template = Template::new(&TemplateConfig {
            // The smallest IPv6/UDP frame.
            frame_size: 66,
            flows: 16,
            src_ip: "2001:db8::1".parse().unwrap(),
            dst_ip: "2001:db8::2".parse().unwrap(),
            ..TemplateConfig::default()
        })
        .unwrap();
        let mut pool = FramePool::new(4096, 2048).unwrap();
        prefill(&mut pool, &template);
        let (mut tx, mut rx) = link(
            "tx",
            "rx",
            &LinkConfig {
                ring_size: 4096,
                ..LinkConfig::default()
            },
        );
        let config = BlastConfig {
            count: Some(2000),
            linger: Duration::ZERO,
            random_flows: Some(7),
            ..BlastConfig::default()
        };
        let result = blast(
            &mut tx,
            None,
            &mut pool,
            &template,
            &config,
            &AtomicBool::new(false),
        );
        assert_eq!(result.sent, 2000);
        let mut batch = Batch::new(MAX_BATCH);
        let mut expected = vec![0u8; 2048];
        let mut per_flow = [0u32; 16];
        let mut in_turn = 0;
        let mut index = 0u32;
        while rx.rx(0, &mut pool, &mut batch) > 0 {
            for desc in batch.descs() {
                let start = desc.offset as usize;
                let frame = &pool.frame(desc.frame)[start..start + desc.len as usize];
                // Each frame is exactly the template of one of the 16 flows.
                let flow = (0..16)
                    .find(|&f| {
                        let len = template.write(&mut expected, f);
                        frame == &expected[..len]
                    })
                    .expect("a frame of one of the flows");
                per_flow[flow as usize] += 1;
                in_turn += u32::from(flow == index % 16);
                index += 1;
                pool.release(desc.frame);
            }
            batch.clear();
        }
        assert_eq!(index, 2000);
        // About 125 frames each; turns would put every frame in its turn.
        assert!(
            per_flow.iter().all(|&n| (60..200).contains(&n)),
            "{per_flow:?}"
        );
        assert!(in_turn < 400, "{in_turn} frames in turn");
        assert_eq!(pool.free_count(), pool.total());
    }

    #[test]
    fn settling_counts_as_sent_only_what_the_interface_transmitted() {
        let mut result = BlastResult {
            sent: 1000,
            refused: 3,
            ..BlastResult::default()
        };
        // The interface dropped 400 of the 1000 the ring took.
        result.settle(&TxCounters {
            transmitted: 600,
            dropped: 400,
        });
        assert_eq!(
            (result.sent, result.dropped_by_kernel, result.refused),
            (600, 400, 3)
        );
        // The host's own frames make the interface count more than was sent: all were sent.
        let mut result = BlastResult {
            sent: 1000,
            ..BlastResult::default()
        };
        result.settle(&TxCounters {
            transmitted: 1004,
            dropped: 0,
        });
        assert_eq!((result.sent, result.dropped_by_kernel), (1000, 0));
    }

    #[test]
    fn a_set_rate_is_kept_and_arrivals_are_counted() {
        let template = Template::new(&TemplateConfig::default()).unwrap();
        let mut pool = FramePool::new(4096, 2048).unwrap();
        prefill(&mut pool, &template);
        let (mut a, mut b) = link("a", "b", &LinkConfig::default());
        let config = BlastConfig {
            rate_pps: Some(200_000.0),
            duration: Duration::from_millis(200),
            ..BlastConfig::default()
        };
        // A test thread preempted by a busy machine (the other tests run in parallel) sends
        // late; pacing that works keeps the count in one of three tries, pacing that does not
        // in none.
        let mut misses = Vec::new();
        for _ in 0..3 {
            // The receiving end of the link is also the RX port: everything sent arrives.
            let result = blast(
                &mut a,
                Some(&mut b),
                &mut pool,
                &template,
                &config,
                &AtomicBool::new(false),
            );
            assert_eq!(result.received, result.sent);
            assert_eq!(pool.free_count(), pool.total());
            // Batch-level pacing: within one batch (32 packets) of the asked count.
            let asked = 200_000.0 * result.seconds;
            if (result.sent as f64 - asked).abs() <= 64.0 {
                return;
            }
            misses.push(format!("sent {} asked {asked}", result.sent));
        }
        panic!("the rate was missed in every try: {misses:?}");
    }
}
