//! [`XdpProbeCounter`]: a receiver for throughput trials that costs next to nothing. An XDP
//! program counts the frames that carry one trial's probes (packets and bytes, per-CPU) and
//! drops them; user space reads the counts before and after the trial, the way MoonGen reads a
//! NIC's counters for throughput.
//!
//! A tester that receives through an AF_XDP socket copies every frame into its UMEM and parses
//! it; on a small machine that receive takes a large share of the core the generator needs, so
//! fast DuTs all stop at the tester's limit. Counting in the interface's NAPI poll instead costs
//! a bounds check, two loads, a compare and the counting of [`XdpSink`] per frame. The program is
//! `bpf/probe_counter.c`; where the probe lies is given to it as read-only globals when it is
//! loaded, which the verifier reads as constants.
//!
//! Which frames count is the [`ProbeFilter`]'s business: the probe's signature at a fixed
//! offset (known when the trial's template is built) and its TX timestamp, a big-endian u64 at
//! another fixed offset, not below the floor user space sets before each trial
//! ([`XdpProbeCounter::set_floor`]). Each frame falls in one class, counted in its own map entry:
//! * probes of this trial (signature, timestamp >= floor): counted and dropped;
//! * stale probes (signature, timestamp below the floor: late frames of an earlier trial):
//!   counted and dropped;
//! * foreign frames (too short for the probe, or another signature: the lab kernels' neighbour
//!   discovery): counted and passed to the stack, as if no program were there.
//!
//! What it cannot see: sequence numbers (no loss per flow, reordering or duplicates) and
//! latency. A trial that needs those for every frame receives with a socket.
//!
//! **Sampling** ([`XdpProbeCounter::attach_sampling`]), the way MoonGen counts every frame in
//! the NIC and timestamps only some: the program still counts every probe of the trial, and
//! redirects one in [`ProbeSampling::every`] of them (those whose sequence number is a multiple
//! of it, a power of two: a mask and a compare, the same choice every run) into an XSKMAP, so an
//! AF_XDP socket on the same interface and queue receives them
//! ([`XdpProbeCounter::sample_sockets`] is the attachment to open it on); the rest are dropped
//! as before. Stale and foreign frames are never sampled. A sample the socket has no room for
//! is still counted: the count stays exact, and only the latency has one sample less.
//!
//! **Binning** ([`XdpProbeCounter::attach_binning`]): when the in-kernel sender stamps every
//! frame with the kernel's clock as it leaves
//! ([`XdpLiveGenerator::paced_stamped`](super::XdpLiveGenerator::paced_stamped)), the program
//! reads the same clock as the frame arrives and counts the difference in a per-CPU histogram
//! of [`LATENCY_BUCKETS`] log-linear buckets (HdrHistogram's layout: exact below 32 ns, then 32
//! buckets per power of two, each at most 1/32 of its value wide). Every probe's latency is
//! measured, at any rate the kernel sends, with no socket and no copy: what MoonGen does with a
//! NIC's hardware timestamps, here with the clock both ends of a veth share. Both stamps are
//! taken in XDP, so the latency is the path between the two programs (the DuT and both veths),
//! without the tester's socket delivery.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use aya::EbpfLoader;

use super::attachment::XdpAttachment;
use super::bpf::{lookup_map, possible_cpus, update_map};
use super::config::{AfXdpError, XdpMode};
use super::object::{Loaded, load, object};
use super::port::{program_error, query_interface};
use super::program::ProgramError;
use super::sink::{SinkCounts, XdpSink};

/// The compiled `bpf/probe_counter.c`.
static OBJECT: &[u8] = object!("probe_counter");

/// Where a probe sits in the frames to count, from the start of the Ethernet header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeFilter {
    /// The 4 bytes every probe starts with.
    pub signature: [u8; 4],
    pub signature_at: u16,
    /// Offset of the probe's TX timestamp, a big-endian u64.
    pub timestamp_at: u16,
}

/// Which of this trial's probes the counter also hands to an AF_XDP socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeSampling {
    /// Offset of the probe's sequence number (a big-endian u32) from the start of the
    /// Ethernet header.
    pub sequence_at: u16,
    /// One probe in this many, a power of two (1 samples all): those whose sequence number is
    /// a multiple of it.
    pub every: u32,
}

/// Largest offset a filter may name: every probe lies inside a 1518-byte frame.
pub const MAX_PROBE_END: u16 = 1518;

impl ProbeFilter {
    /// Bytes a frame needs for the signature, the timestamp and (when sampling) the sequence
    /// number, or `None` when that is beyond [`MAX_PROBE_END`].
    fn end(&self, sampling: Option<&ProbeSampling>) -> Option<u16> {
        let end = (self.signature_at as u32 + 4)
            .max(self.timestamp_at as u32 + 8)
            .max(sampling.map_or(0, |s| s.sequence_at as u32 + 4));
        u16::try_from(end).ok().filter(|&end| end <= MAX_PROBE_END)
    }
}

/// What the counter has counted since it was attached, per class, over all CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProbeCounts {
    /// Probes of this trial (timestamp at or above the floor).
    pub probes: SinkCounts,
    /// Probes stamped before the floor.
    pub stale: SinkCounts,
    /// Everything else (passed to the stack).
    pub foreign: SinkCounts,
}

impl ProbeCounts {
    /// Frames of every class.
    pub fn frames(&self) -> u64 {
        self.probes.packets + self.stale.packets + self.foreign.packets
    }
}

/// Buckets of the latency histogram (`LATENCY_BUCKETS` of `bpf/probe_counter.c`).
pub const LATENCY_BUCKETS: u32 = LATENCY_SUB + (64 - LATENCY_SUB_BITS) * LATENCY_SUB;
const LATENCY_SUB_BITS: u32 = 5;
const LATENCY_SUB: u32 = 1 << LATENCY_SUB_BITS;

/// The histogram bucket of a latency of `ns` nanoseconds, as the program computes it.
pub fn latency_bucket(ns: u64) -> u32 {
    if ns < u64::from(LATENCY_SUB) {
        return ns as u32;
    }
    let top = 63 - ns.leading_zeros();
    let shift = top - LATENCY_SUB_BITS;
    LATENCY_SUB + shift * LATENCY_SUB + ((ns >> shift) as u32 & (LATENCY_SUB - 1))
}

/// The lowest and highest latency (ns) of bucket `index` (below [`LATENCY_BUCKETS`]).
pub fn latency_bucket_bounds(index: u32) -> (u64, u64) {
    if index < LATENCY_SUB {
        return (u64::from(index), u64::from(index));
    }
    let shift = (index - LATENCY_SUB) / LATENCY_SUB;
    let sub = u64::from((index - LATENCY_SUB) % LATENCY_SUB);
    let low = (u64::from(LATENCY_SUB) + sub) << shift;
    (low, low + ((1u64 << shift) - 1))
}

/// The map entries of the classes (as `bpf/probe_counter.c` counts them).
const PROBES: u32 = 0;
const STALE: u32 = 1;
const FOREIGN: u32 = 2;

/// An XDP program on one interface that counts one trial's probes (see the module
/// documentation). Dropping it detaches the program.
#[derive(Debug)]
pub struct XdpProbeCounter {
    sink: XdpSink,
    /// One u64: the lowest timestamp of a probe that counts.
    floor: OwnedFd,
    sampling: Option<ProbeSampling>,
    /// With binning: the per-CPU latency histogram.
    latencies: Option<OwnedFd>,
    cpus: usize,
}

impl XdpProbeCounter {
    /// Attaches the counter for probes placed as `filter` says to `interface` (of the calling
    /// thread's network namespace) in `mode`. The floor starts at 0: every probe counts.
    pub fn attach(
        interface: &str,
        mode: XdpMode,
        filter: &ProbeFilter,
    ) -> Result<XdpProbeCounter, AfXdpError> {
        Self::attach_as(interface, mode, filter, None, false)
    }

    /// [`XdpProbeCounter::attach`], and every probe's latency is binned in the kernel: the
    /// probes' timestamps must then be the kernel's clock when they left
    /// ([`XdpLiveGenerator::paced_stamped`](super::XdpLiveGenerator::paced_stamped)), and so
    /// must the floor. Read the histogram with [`XdpProbeCounter::latencies`].
    pub fn attach_binning(
        interface: &str,
        mode: XdpMode,
        filter: &ProbeFilter,
    ) -> Result<XdpProbeCounter, AfXdpError> {
        Self::attach_as(interface, mode, filter, None, true)
    }

    /// [`XdpProbeCounter::attach`], and the probes `sampling` chooses are also redirected to
    /// the AF_XDP socket of their queue, opened on [`XdpProbeCounter::sample_sockets`] (until
    /// one is, they are dropped like the others).
    pub fn attach_sampling(
        interface: &str,
        mode: XdpMode,
        filter: &ProbeFilter,
        sampling: &ProbeSampling,
    ) -> Result<XdpProbeCounter, AfXdpError> {
        if !sampling.every.is_power_of_two() || sampling.every > 1 << 31 {
            return Err(AfXdpError::ProbeFilter {
                port: interface.to_string(),
                detail: format!(
                    "sampling one probe in {} needs a power of two up to 2^31",
                    sampling.every
                ),
            });
        }
        Self::attach_as(interface, mode, filter, Some(*sampling), false)
    }

    fn attach_as(
        interface: &str,
        mode: XdpMode,
        filter: &ProbeFilter,
        sampling: Option<ProbeSampling>,
        binning: bool,
    ) -> Result<XdpProbeCounter, AfXdpError> {
        let end = filter
            .end(sampling.as_ref())
            .ok_or_else(|| AfXdpError::ProbeFilter {
                port: interface.to_string(),
                detail: format!(
                    "the probe at {} (timestamp at {}{}) ends past byte {MAX_PROBE_END}",
                    filter.signature_at,
                    filter.timestamp_at,
                    sampling.map_or(String::new(), |s| format!(
                        ", sequence number at {}",
                        s.sequence_at
                    )),
                ),
            })?;
        // The samples' XSKMAP has a slot per queue of the interface.
        let queues = match sampling {
            Some(_) => u32::from(query_interface(interface)?.queues),
            None => 1,
        };
        let error = |error| program_error(interface, error);
        let loaded =
            load_counter(filter, end, sampling.as_ref(), queues, binning).map_err(error)?;
        let floor = loaded.map("floors").map_err(error)?;
        let latencies = match binning {
            true => Some(loaded.map("latencies").map_err(error)?),
            false => None,
        };
        let cpus = possible_cpus().map_err(|error| AfXdpError::ProbeFilter {
            port: interface.to_string(),
            detail: format!("counting the possible CPUs: {error}"),
        })?;
        let sink = XdpSink::attach_loaded(interface, mode, loaded, sampling.is_some())?;
        Ok(XdpProbeCounter {
            sink,
            floor,
            sampling,
            latencies,
            cpus,
        })
    }

    /// From now on, probes with a timestamp below `floor` count as stale (one system call; set
    /// it before the trial's first frame leaves).
    pub fn set_floor(&self, floor: u64) -> std::io::Result<()> {
        update_map(&self.floor, 0, &floor.to_ne_bytes())
    }

    /// The probes of this trial counted so far, sampled ones included (one system call).
    pub fn probes(&self) -> std::io::Result<SinkCounts> {
        self.sink.class_counts(PROBES)
    }

    /// All three classes so far (three system calls).
    pub fn counts(&self) -> std::io::Result<ProbeCounts> {
        Ok(ProbeCounts {
            probes: self.probes()?,
            stale: self.sink.class_counts(STALE)?,
            foreign: self.sink.class_counts(FOREIGN)?,
        })
    }

    /// With [`XdpProbeCounter::attach_binning`]: the probes counted so far per latency bucket
    /// ([`latency_bucket_bounds`] gives each bucket's range), over all CPUs; `None` without
    /// binning. One system call per bucket: read it after the trial.
    pub fn latencies(&self) -> Option<std::io::Result<Vec<u64>>> {
        let map = self.latencies.as_ref()?;
        let mut values = vec![0u8; self.cpus * 8];
        let read = (0..LATENCY_BUCKETS)
            .map(|bucket| {
                lookup_map(map, bucket, &mut values)?;
                Ok(values
                    .chunks_exact(8)
                    .map(|cpu| u64::from_ne_bytes(cpu.try_into().unwrap_or([0; 8])))
                    .sum())
            })
            .collect();
        Some(read)
    }

    /// Which probes it samples, when attached with [`XdpProbeCounter::attach_sampling`].
    pub fn sampling(&self) -> Option<ProbeSampling> {
        self.sampling
    }

    /// The attachment to open the AF_XDP socket that receives the samples on
    /// ([`AfXdpPort::open_shared`](super::AfXdpPort::open_shared), queue by queue), when
    /// attached with [`XdpProbeCounter::attach_sampling`].
    pub fn sample_sockets(&self) -> Option<&Arc<XdpAttachment>> {
        self.sink.sockets()
    }

    /// The interface it counts on.
    pub fn interface(&self) -> &str {
        self.sink.interface()
    }

    /// How the program is attached: "native" or "generic".
    pub fn mode(&self) -> &str {
        self.sink.mode()
    }
}

/// Loads the counter's program for probes placed as `filter` says, `end` bytes needed; with
/// `sampling`, its XSKMAP has `queues` slots.
fn load_counter(
    filter: &ProbeFilter,
    end: u16,
    sampling: Option<&ProbeSampling>,
    queues: u32,
    binning: bool,
) -> Result<Loaded, ProgramError> {
    let signature = u32::from_ne_bytes(filter.signature);
    let signature_at = u32::from(filter.signature_at);
    let timestamp_at = u32::from(filter.timestamp_at);
    let end = u32::from(end);
    let sampled = u32::from(sampling.is_some());
    let sequence_at = sampling.map_or(0, |sampling| u32::from(sampling.sequence_at));
    let sample_mask = sampling.map_or(0, |sampling| sampling.every - 1);
    let binning = u32::from(binning);
    let mut loader = EbpfLoader::new();
    loader
        .override_global("signature", &signature, true)
        .override_global("signature_at", &signature_at, true)
        .override_global("timestamp_at", &timestamp_at, true)
        .override_global("probe_end", &end, true)
        .override_global("sampling", &sampled, true)
        .override_global("sequence_at", &sequence_at, true)
        .override_global("sample_mask", &sample_mask, true)
        .override_global("binning", &binning, true)
        .map_max_entries("xsks", queues.max(1));
    load(&mut loader, OBJECT, "probe_counter")
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILTER: ProbeFilter = ProbeFilter {
        signature: *b"wsP2",
        signature_at: 42,
        timestamp_at: 52,
    };

    const SAMPLING: ProbeSampling = ProbeSampling {
        sequence_at: 48,
        every: 64,
    };

    #[test]
    fn a_filter_ends_after_its_last_field_and_inside_a_frame() {
        assert_eq!(FILTER.end(None), Some(60));
        let signature_last = ProbeFilter {
            signature_at: 100,
            ..FILTER
        };
        assert_eq!(signature_last.end(None), Some(104));
        let sequence_last = ProbeSampling {
            sequence_at: 200,
            ..SAMPLING
        };
        assert_eq!(FILTER.end(Some(&SAMPLING)), Some(60));
        assert_eq!(FILTER.end(Some(&sequence_last)), Some(204));
        let beyond = ProbeFilter {
            timestamp_at: 1511,
            ..FILTER
        };
        assert_eq!(beyond.end(None), None);
        let sequence_beyond = ProbeSampling {
            sequence_at: 1515,
            ..SAMPLING
        };
        assert_eq!(FILTER.end(Some(&sequence_beyond)), None);
        let far_beyond = ProbeFilter {
            signature_at: u16::MAX,
            ..FILTER
        };
        assert_eq!(far_beyond.end(None), None);
    }

    #[test]
    fn sampling_needs_a_power_of_two() {
        for every in [0, 3, 48, u32::MAX] {
            let sampling = ProbeSampling { every, ..SAMPLING };
            let refused =
                XdpProbeCounter::attach_sampling("nonexistent0", XdpMode::Auto, &FILTER, &sampling);
            assert!(
                matches!(refused, Err(AfXdpError::ProbeFilter { .. })),
                "{every}: {refused:?}"
            );
        }
    }

    #[test]
    fn every_program_passes_the_verifier_when_root() {
        if !crate::afxdp::bpf::may_load_for_test() {
            return;
        }
        let plain = load_counter(&FILTER, FILTER.end(None).unwrap(), None, 1, false);
        let sampled = load_counter(
            &FILTER,
            FILTER.end(Some(&SAMPLING)).unwrap(),
            Some(&SAMPLING),
            4,
            false,
        );
        let binning = load_counter(&FILTER, FILTER.end(None).unwrap(), None, 1, true);
        for loaded in [plain, sampled, binning] {
            match loaded {
                Ok(loaded) => {
                    for map in ["counters", "floors", "xsks", "latencies"] {
                        loaded.map(map).expect(map);
                    }
                }
                Err(error) => panic!("{error:?}"),
            }
        }
    }

    #[test]
    fn latency_buckets_hold_their_values_within_a_32nd() {
        assert_eq!(latency_bucket(0), 0);
        assert_eq!(latency_bucket(31), 31);
        assert_eq!(latency_bucket_bounds(31), (31, 31));
        assert_eq!(latency_bucket(32), 32);
        assert_eq!(latency_bucket_bounds(32), (32, 32));
        assert_eq!(latency_bucket(u64::MAX), LATENCY_BUCKETS - 1);
        assert_eq!(latency_bucket_bounds(LATENCY_BUCKETS - 1).1, u64::MAX);
        let mut previous_high = None;
        for index in 0..LATENCY_BUCKETS {
            let (low, high) = latency_bucket_bounds(index);
            assert_eq!(latency_bucket(low), index);
            assert_eq!(latency_bucket(high), index);
            // Contiguous, and no wider than a 32nd of their lowest value.
            assert_eq!(
                previous_high.map(|h: u64| h + 1),
                (index > 0).then_some(low)
            );
            assert!(
                (high - low) as f64 <= low as f64 / 32.0,
                "{index}: {low}..={high}"
            );
            previous_high = Some(high);
        }
        for ns in [1_000, 21_800, 38_500, 1_000_000, 123_456_789] {
            let (low, high) = latency_bucket_bounds(latency_bucket(ns));
            assert!((low..=high).contains(&ns), "{ns}");
        }
    }

    #[test]
    fn a_refused_program_is_named_with_the_verifiers_last_lines_when_root() {
        if !crate::afxdp::bpf::may_load_for_test() {
            return;
        }
        // An end before the signature: the program would read past the bounds it checked.
        let refused =
            load_counter(&FILTER, 4, None, 1, false).expect_err("an end before the probe");
        let ProgramError::Load { program, log, .. } = &refused else {
            panic!("{refused:?}");
        };
        assert_eq!(*program, "probe_counter");
        assert!(log.contains("the verifier's last lines"), "{log}");
        assert!(log.contains("invalid access to packet"), "{log}");
        let message = program_error("t0", refused).to_string();
        assert!(message.contains("port t0"), "{message}");
        assert!(message.contains("XDP program probe_counter"), "{message}");
        assert!(message.contains("invalid access to packet"), "{message}");
    }
}
