//! The receiving halves of a trial: an AF_XDP socket that parses every frame ([`Sink`]), the
//! XDP probe counter ([`Counting`]), and the counter with one probe in N sampled to a socket
//! ([`Sampling`]).

use std::time::Duration;

use wirespeed_io::Port;
use wirespeed_io::afxdp::XdpProbeCounter;
use wirespeed_packet::cpu::{rdtsc, tsc_hz};
use wirespeed_packet::{Batch, FramePool, HEADROOM, MAX_BATCH};

use crate::generator::Template;
use crate::generator::probe::{self, PROBE_LEN, ProbeWriter};
use crate::stats::{LatencyHistogram, SequenceTable};

/// The receiving half of a trial, as the sender sees it.
pub(super) trait Receive {
    /// Takes what has arrived; called whenever no frame is due.
    fn receive(&mut self, pool: &mut FramePool, template: &Template);
    /// After sending: waits a little for more and takes it.
    fn wait(&mut self, pool: &mut FramePool, template: &Template);
    /// This trial's probes taken so far (duplicates included).
    fn fresh(&self) -> u64;
    /// The TSC when the last of them was taken (0 for none).
    fn last_fresh(&self) -> u64;
}

/// The receiving half of a trial with an AF_XDP socket: every frame parsed.
pub(super) struct Sink<'a> {
    pub(super) rx: &'a mut dyn Port,
    pub(super) table: SequenceTable,
    pub(super) histogram: LatencyHistogram,
    pub(super) arrived: u64,
    pub(super) foreign: u64,
    pub(super) stale: u64,
    /// Probes of this trial that arrived (duplicates included), and the TSC of the last one.
    pub(super) fresh: u64,
    pub(super) last_fresh: u64,
    pub(super) ns_per_cycle: f64,
    pub(super) trial_start: u64,
    pub(super) incoming: Batch,
    /// Bytes of a frame to rewrite from the template at least (headers and probe).
    pub(super) restore_from: usize,
}

impl<'a> Sink<'a> {
    /// A sink for probes of `template`'s frames (written by `writer`) stamped at or after
    /// `trial_start`, received on `rx`.
    pub(super) fn new(
        rx: &'a mut dyn Port,
        template: &Template,
        writer: &ProbeWriter,
        trial_start: u64,
    ) -> Sink<'a> {
        Sink {
            rx,
            table: SequenceTable::new(template.flows()),
            histogram: LatencyHistogram::new(),
            arrived: 0,
            foreign: 0,
            stale: 0,
            fresh: 0,
            last_fresh: 0,
            ns_per_cycle: 1e9 / tsc_hz() as f64,
            trial_start,
            incoming: Batch::new(MAX_BATCH),
            restore_from: writer.offset() + PROBE_LEN,
        }
    }
}

impl Receive for Sink<'_> {
    #[inline]
    fn receive(&mut self, pool: &mut FramePool, template: &Template) {
        while self.rx.rx(0, pool, &mut self.incoming) > 0 {
            let now = rdtsc();
            for desc in self.incoming.descs() {
                self.arrived += 1;
                let start = desc.offset as usize;
                let frame = pool
                    .frame(desc.frame)
                    .get(start..start + desc.len as usize)
                    .unwrap_or_default();
                match probe::read(frame) {
                    Ok(probe) if probe.timestamp >= self.trial_start && probe.timestamp <= now => {
                        let cycles = now - probe.timestamp;
                        self.histogram
                            .record((cycles as f64 * self.ns_per_cycle) as u64);
                        self.table.record(probe.flow.into(), probe.sequence.into());
                        self.fresh += 1;
                        self.last_fresh = now;
                    }
                    Ok(_) => self.stale += 1,
                    Err(_) => self.foreign += 1,
                }
                // The arrival overwrote up to `len` bytes (a router's MACs and TTL, a kernel's
                // own frame): put the template back before the frame is sent again.
                let restore = (desc.len as usize)
                    .max(self.restore_from)
                    .min(template.len());
                let head = HEADROOM as usize;
                if let (Some(area), Some(bytes)) = (
                    pool.frame_mut(desc.frame).get_mut(head..head + restore),
                    template.bytes().get(..restore),
                ) {
                    area.copy_from_slice(bytes);
                }
                pool.release(desc.frame);
            }
            self.incoming.clear();
        }
        self.rx.poll(pool);
    }

    fn wait(&mut self, pool: &mut FramePool, template: &Template) {
        self.receive(pool, template);
        std::hint::spin_loop();
    }

    fn fresh(&self) -> u64 {
        self.fresh
    }

    fn last_fresh(&self) -> u64 {
        self.last_fresh
    }
}

/// The receiving half of a trial with the probe counter: nothing to do while sending; while
/// lingering, one read of the counter every [`COUNTER_POLL`].
pub(super) struct Counting<'a> {
    pub(super) counter: &'a XdpProbeCounter,
    /// The count before the trial.
    pub(super) before: u64,
    /// This trial's probes at the last read, and the TSC of the read that last saw more.
    pub(super) fresh: u64,
    pub(super) last_fresh: u64,
    pub(super) reads: u64,
    /// The first failed read (which ends the linger).
    pub(super) error: Option<std::io::Error>,
}

/// How often a lingering counted trial reads its counter: a read is a system call, and the
/// receiving interface's NAPI poll, which does the counting, may share the tester's core, so
/// the reads must not spin; the drain time is known to this much.
pub const COUNTER_POLL: Duration = Duration::from_micros(100);

impl Receive for Counting<'_> {
    fn receive(&mut self, _pool: &mut FramePool, _template: &Template) {}

    fn wait(&mut self, _pool: &mut FramePool, _template: &Template) {
        if self.reads > 0 {
            std::thread::sleep(COUNTER_POLL);
        }
        self.reads += 1;
        match self.counter.probes() {
            Ok(counts) => {
                let fresh = counts.packets.saturating_sub(self.before);
                if fresh > self.fresh {
                    self.fresh = fresh;
                    self.last_fresh = rdtsc();
                }
            }
            Err(error) => {
                self.error.get_or_insert(error);
                // Nothing more can be learnt: end the linger.
                self.fresh = u64::MAX;
            }
        }
    }

    fn fresh(&self) -> u64 {
        self.fresh
    }

    fn last_fresh(&self) -> u64 {
        self.last_fresh
    }
}

/// The receiving half of a sampled trial: the counter for the count (the linger waits for it),
/// the socket's samples, parsed as the probe receiver parses every frame, for latency.
pub(super) struct Sampling<'a, 'b> {
    pub(super) counting: Counting<'a>,
    pub(super) samples: Sink<'b>,
}

/// Longest a sampled trial waits, after its count is complete, for samples still on their way
/// to the socket: [`COUNTER_POLL`] times this.
pub(super) const SETTLE_POLLS: u32 = 1000;

impl Sampling<'_, '_> {
    /// Takes the samples still on their way once the count is complete (the kernel counts a
    /// probe, then redirects it), until one [`COUNTER_POLL`] brings none (or
    /// [`SETTLE_POLLS`] did not suffice).
    pub(super) fn settle(&mut self, pool: &mut FramePool, template: &Template) {
        for _ in 0..SETTLE_POLLS {
            let before = self.samples.arrived;
            std::thread::sleep(COUNTER_POLL);
            self.samples.receive(pool, template);
            if self.samples.arrived == before {
                break;
            }
        }
    }
}

impl Receive for Sampling<'_, '_> {
    fn receive(&mut self, pool: &mut FramePool, template: &Template) {
        self.samples.receive(pool, template);
    }

    fn wait(&mut self, pool: &mut FramePool, template: &Template) {
        self.samples.receive(pool, template);
        self.counting.wait(pool, template);
    }

    fn fresh(&self) -> u64 {
        self.counting.fresh()
    }

    fn last_fresh(&self) -> u64 {
        self.counting.last_fresh()
    }
}
