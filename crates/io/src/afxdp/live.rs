//! [`XdpLiveGenerator`]: a traffic generator inside the kernel. One frame is handed to
//! `bpf(BPF_PROG_TEST_RUN)` with `BPF_F_TEST_XDP_LIVE_FRAMES`; the kernel runs a small XDP
//! program over copies of it `repeat` times, and each run's verdict is carried out for real:
//! our program returns `XDP_REDIRECT` to the target interface, so the frames leave through the
//! target's `ndo_xdp_xmit` in bulk, without a socket, an skb or a copy from user space.
//!
//! Why: over AF_XDP in copy mode (all a veth offers) every transmitted frame becomes an skb, and
//! a veth peer with an XDP program copies it once more; the generator is then the slowest part
//! of the lab. Here a veth's `ndo_xdp_xmit` puts the frames straight into the peer's ring.
//!
//! The program is `bpf/live.c`; the target, the flows' count and order, the heads' length and
//! the pacing are read-only globals set when it is loaded.
//!
//! The kernel's semantics (Documentation/bpf/bpf_prog_run.rst, net/bpf/test_run.c, Linux ≥
//! 5.18), and what they mean here:
//! * Runs happen in batches of `batch_size` (1..=256) frames; a batch's redirected frames are
//!   flushed to the device together at its end.
//! * Frames live in page-pool pages initialised once with the frame given; recycled pages keep
//!   whatever was written into them: by our program, and by every XDP program the frame met on
//!   its way, since a veth hands the page itself to its peer, whose program (a DuT's fast path
//!   rewriting MAC addresses and decrementing the TTL) writes into it before the page comes back
//!   to the pool. So the program writes the frame's whole head (every header, [`LiveFlows`]) on
//!   every run, and every frame leaves as the frame given, with its flow's head, byte for byte.
//!   (Measured: with only the flow's fields written, a router on the fast path saw 96 % of the
//!   frames with a bad IPv4 checksum once they came back with its TTL decrement in them.)
//! * The redirect's ifindex is looked up in the network namespace of the *calling thread* (the
//!   runs see the loopback device of that namespace as their ingress). Create the generator and
//!   call [`XdpLiveGenerator::send`] from a thread in the target's namespace.
//! * The call does not say how many frames the device took: a failed redirect (for a veth: the
//!   peer has no NAPI, or its ring of 256 frames is full) only skips that frame. "Sent" here is
//!   therefore "frames run and redirected"; what the device transmitted and dropped is in its
//!   counters. Measured on kernel 6.18 with a veth target: the frames a peer took count in the
//!   target's `tx_packets` (and the peer's `rx_packets`), the ones it refused in the target's
//!   `tx_dropped` (`ethtool -S`: `tx_queue_0_xdp_xmit_errors`). The peer must run NAPI: an XDP
//!   program attached to it (e.g. [`XdpSink`](super::XdpSink)) or GRO on.
//! * A pending signal ends a call early with `EINTR`; how many of its frames ran is unknown.
//!
//! Flows. The program writes one of several heads per frame from a table the caller fills (for
//! the tester's UDP templates: everything up to the end of the UDP header, each flow's
//! precomputed, so IPv4 and IPv6 checksums stay valid with no arithmetic in the program). The
//! head of each frame is either the next in turn, from a per-CPU counter (exact round robin per
//! CPU; pin the calling thread), or drawn with `bpf_get_prandom_u32`.

use std::os::fd::{AsRawFd, OwnedFd};

use aya::EbpfLoader;

use super::bpf::{BPF_PROG_TEST_RUN, bpf, update_map};
use super::config::AfXdpError;
use super::live_pacing::{LivePaceCounts, LivePacing, MAX_PACING_GAP, MAX_PACING_GAPS, PacingMaps};
use super::object::{Loaded, load, object};
use super::port::{program_error, query_interface};
use super::program::ProgramError;

/// The compiled `bpf/live.c`.
static OBJECT: &[u8] = object!("live");

/// `BPF_F_TEST_XDP_LIVE_FRAMES` (linux/bpf.h).
const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;
/// The kernel's largest batch (`TEST_XDP_MAX_BATCH`).
pub const MAX_LIVE_BATCH: u32 = 256;
/// The most flows the program varies (the tester's flows are UDP source ports, or those
/// times the destinations a routing-table benchmark spreads its frames over).
pub const MAX_LIVE_FLOWS: usize = 65536;
/// The longest head a flow writes (Ethernet, a VLAN tag, IPv6 and UDP take 66 bytes); every
/// entry of the program's table of heads has room for it (`MAX_HEAD` of `bpf/live.c`).
pub const MAX_LIVE_HEAD: usize = 128;
/// The largest frame we hand over: a live frame must fit one 4 KiB page with the kernel's 256
/// bytes of XDP headroom, its page-pool header and the skb tail room (about 3.4 KiB are left).
pub const MAX_LIVE_FRAME: usize = 3072;

/// How a frame's flow is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LiveFlowOrder {
    /// Flow 0, 1, 2, ... per CPU.
    RoundRobin,
    /// Uniformly at random (`bpf_get_prandom_u32() % flows`).
    Random,
}

/// What the program writes into every frame: one flow's head (the frame's first bytes, every
/// header), so that flows differ and nothing a receiver wrote into a recycled page stays.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveFlows {
    /// Per flow, the frame's first bytes: all of one even length, 2 to [`MAX_LIVE_HEAD`], at
    /// most the frame's.
    pub heads: Vec<Vec<u8>>,
    pub order: LiveFlowOrder,
}

impl LiveFlows {
    /// One flow: `frame`'s head (as much of it as a head may hold, an even length).
    pub fn single(frame: &[u8]) -> LiveFlows {
        let len = frame.len().min(MAX_LIVE_HEAD) & !1;
        LiveFlows {
            heads: vec![frame[..len].to_vec()],
            order: LiveFlowOrder::RoundRobin,
        }
    }

    /// The length of every head, if they fit a frame of `frame_len` bytes (see `heads`).
    fn head_len(&self, frame_len: usize) -> Option<usize> {
        let len = self.heads.first()?.len();
        let fits = (2..=MAX_LIVE_HEAD.min(frame_len)).contains(&len)
            && len % 2 == 0
            && self.heads.len() <= MAX_LIVE_FLOWS
            && self.heads.iter().all(|head| head.len() == len);
        fits.then_some(len)
    }
}

/// Why a live generator could not be made or run.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error(transparent)]
    Setup(#[from] AfXdpError),
    #[error(
        "a live frame must be 14 to {MAX_LIVE_FRAME} bytes (it must fit one page with the \
         kernel's headroom); this one is {0} bytes: send larger (jumbo) frames with the AF_XDP \
         generator (`--generator afxdp`), which sends them in several buffers"
    )]
    FrameSize(usize),
    #[error(
        "live flows: give 1 to {MAX_LIVE_FLOWS} flows whose heads are all of one even length \
         from 2 to {MAX_LIVE_HEAD} bytes and no longer than the {frame}-byte frame; got \
         {flows} flows"
    )]
    Flows { flows: usize, frame: usize },
    #[error("batch size {0} is not in 1..={MAX_LIVE_BATCH}")]
    BatchSize(u32),
    #[error("filling the flow table: {0}")]
    FlowTable(std::io::Error),
    #[error(
        "bpf(BPF_PROG_TEST_RUN) with live frames failed: {0}; Linux 5.18 or later and root \
         (CAP_BPF, CAP_NET_ADMIN) are needed"
    )]
    Run(std::io::Error),
    #[error("interrupted by a signal")]
    Interrupted,
    #[error(
        "live pacing: give a power-of-two count of gaps (at most {MAX_PACING_GAPS}), each at \
         most {MAX_PACING_GAP:?}"
    )]
    Pacing,
    #[error("this live generator was made without pacing")]
    NotPaced,
    #[error("reading or resetting the live generator's pacing state: {0}")]
    PacingState(std::io::Error),
    #[error(
        "live payload: {len} bytes at {at} do not fit between the {head}-byte head and the end \
         of the {frame}-byte frame"
    )]
    Payload {
        at: usize,
        len: usize,
        head: usize,
        frame: usize,
    },
}

/// The loaded generator program, its maps, and the frame it sends. Dropping it frees them;
/// nothing is attached to any interface.
#[derive(Debug)]
pub struct XdpLiveGenerator {
    /// The program, which holds its maps.
    program: OwnedFd,
    /// A paced generator's state.
    pacing: Option<PacingMaps>,
    frame: Vec<u8>,
    /// Bytes of the frame the program writes (the flows' heads).
    head_len: usize,
    batch_size: u32,
    target: String,
    flows: usize,
}

impl XdpLiveGenerator {
    /// Loads the program that sends `frame` with the heads of `flows` out of interface
    /// `target` of the calling thread's namespace, `batch_size` frames per flush.
    pub fn new(
        target: &str,
        frame: &[u8],
        flows: &LiveFlows,
        batch_size: u32,
    ) -> Result<XdpLiveGenerator, LiveError> {
        Self::build(target, frame, flows, batch_size, None, None)
    }

    /// As [`XdpLiveGenerator::new`], with every frame sent at its due time per `pacing`
    /// (see [`live_pacing`](super::live_pacing)): start each send with
    /// [`XdpLiveGenerator::start_pacing`], read what it recorded with
    /// [`XdpLiveGenerator::pace_counts`].
    pub fn paced(
        target: &str,
        frame: &[u8],
        flows: &LiveFlows,
        batch_size: u32,
        pacing: &LivePacing,
    ) -> Result<XdpLiveGenerator, LiveError> {
        Self::build(target, frame, flows, batch_size, Some(pacing), None)
    }

    /// As [`XdpLiveGenerator::paced`], and every frame gets the kernel's clock
    /// (`bpf_ktime_get_ns`, `CLOCK_MONOTONIC`) written at byte `stamp_at` as a big-endian u64 as
    /// it leaves: the TX timestamp of a probe, whose latency the probe counter then bins on
    /// arrival with the same clock ([`super::XdpProbeCounter::attach_binning`]). The 8 bytes
    /// must lie after the flows' head and inside the frame.
    pub fn paced_stamped(
        target: &str,
        frame: &[u8],
        flows: &LiveFlows,
        batch_size: u32,
        pacing: &LivePacing,
        stamp_at: usize,
    ) -> Result<XdpLiveGenerator, LiveError> {
        Self::build(
            target,
            frame,
            flows,
            batch_size,
            Some(pacing),
            Some(stamp_at),
        )
    }

    fn build(
        target: &str,
        frame: &[u8],
        flows: &LiveFlows,
        batch_size: u32,
        pacing: Option<&LivePacing>,
        stamp_at: Option<usize>,
    ) -> Result<XdpLiveGenerator, LiveError> {
        if !(14..=MAX_LIVE_FRAME).contains(&frame.len()) {
            return Err(LiveError::FrameSize(frame.len()));
        }
        if !(1..=MAX_LIVE_BATCH).contains(&batch_size) {
            return Err(LiveError::BatchSize(batch_size));
        }
        let head_len = flows.head_len(frame.len()).ok_or(LiveError::Flows {
            flows: flows.heads.len(),
            frame: frame.len(),
        })?;
        if pacing.is_some_and(|pacing| !pacing.is_valid()) {
            return Err(LiveError::Pacing);
        }
        if let Some(at) = stamp_at
            && (at < head_len || at + 8 > frame.len())
        {
            return Err(LiveError::Payload {
                at,
                len: 8,
                head: head_len,
                frame: frame.len(),
            });
        }
        let ifindex = query_interface(target)?.ifindex;
        let setup = |error| LiveError::Setup(program_error(target, error));
        let loaded = load_generator(ifindex, flows, head_len, pacing, stamp_at).map_err(setup)?;
        let table = loaded.map("heads").map_err(setup)?;
        let mut entry = [0u8; MAX_LIVE_HEAD];
        for (flow, head) in flows.heads.iter().enumerate() {
            entry[..head_len].copy_from_slice(head);
            update_map(&table, flow as u32, &entry).map_err(LiveError::FlowTable)?;
        }
        let pacing = match pacing {
            None => None,
            Some(pacing) => {
                let gaps = loaded.map("gaps").map_err(setup)?;
                for (index, gap) in pacing.gaps.iter().enumerate() {
                    update_map(&gaps, index as u32, &gap.to_ne_bytes())
                        .map_err(LiveError::FlowTable)?;
                }
                Some(PacingMaps {
                    state: loaded.map("pacing").map_err(setup)?,
                    pacing: pacing.clone(),
                })
            }
        };
        let program = loaded.into_program();
        // Flow 0's head, so that the page-pool pages start as flow 0 (round robin's first).
        let mut frame = frame.to_vec();
        frame[..head_len].copy_from_slice(&flows.heads[0]);
        Ok(XdpLiveGenerator {
            program,
            pacing,
            frame,
            head_len,
            batch_size,
            target: target.to_string(),
            flows: flows.heads.len(),
        })
    }

    /// Restarts the schedule of a paced generator: the next send's first frame is due at
    /// `start_ns` (`CLOCK_MONOTONIC`, the clock of `bpf_ktime_get_ns`), or as soon as
    /// it runs for 0 (the call's set-up takes milliseconds before the first frame).
    /// Frames whose turn comes more than `deadline_ns` after the start are not sent.
    pub fn start_pacing(&self, start_ns: u64, deadline_ns: u64) -> Result<(), LiveError> {
        self.start_pacing_frames(start_ns, deadline_ns, 0)
    }

    /// [`XdpLiveGenerator::start_pacing`] for a send of `frames` frames in
    /// [`XdpLiveGenerator::runs`] runs: a yielding pacing ends some runs without a frame, and
    /// the runs left once every frame is handled send nothing.
    pub fn start_pacing_frames(
        &self,
        start_ns: u64,
        deadline_ns: u64,
        frames: u32,
    ) -> Result<(), LiveError> {
        let maps = self.pacing.as_ref().ok_or(LiveError::NotPaced)?;
        maps.start(start_ns, deadline_ns, u64::from(frames))
            .map_err(LiveError::PacingState)
    }

    /// Runs of [`XdpLiveGenerator::send`] that send `frames` frames: as many, unless the
    /// pacing yields ([`LivePacing::runs`]).
    pub fn runs(&self, frames: u32) -> u32 {
        self.pacing
            .as_ref()
            .map_or(frames, |maps| maps.pacing.runs(frames))
    }

    /// What the pacing recorded since [`XdpLiveGenerator::start_pacing`].
    pub fn pace_counts(&self) -> Result<LivePaceCounts, LiveError> {
        let maps = self.pacing.as_ref().ok_or(LiveError::NotPaced)?;
        maps.counts().map_err(LiveError::PacingState)
    }

    /// Overwrites the frame's bytes from `at` on (after the flows' head: the head is the
    /// program's) for the sends that follow, e.g. a probe stamped for the next trial.
    pub fn write_payload(&mut self, at: usize, bytes: &[u8]) -> Result<(), LiveError> {
        let end = at
            .checked_add(bytes.len())
            .filter(|&end| end <= self.frame.len());
        match end {
            Some(end) if at >= self.head_len => {
                self.frame[at..end].copy_from_slice(bytes);
                Ok(())
            }
            _ => Err(LiveError::Payload {
                at,
                len: bytes.len(),
                head: self.head_len,
                frame: self.frame.len(),
            }),
        }
    }

    /// Runs the program over `frames` frames (one system call; the kernel flushes every
    /// `batch_size`). Returns when they have all been handed to the target; see the module
    /// documentation for what the kernel counts as transmitted.
    pub fn send(&self, frames: u32) -> Result<(), LiveError> {
        if frames == 0 {
            return Ok(());
        }
        let mut attr = TestRunAttr {
            prog_fd: self.program.as_raw_fd() as u32,
            data_size_in: self.frame.len() as u32,
            data_in: self.frame.as_ptr() as u64,
            repeat: frames,
            flags: BPF_F_TEST_XDP_LIVE_FRAMES,
            batch_size: self.batch_size,
            ..TestRunAttr::default()
        };
        match bpf(BPF_PROG_TEST_RUN, &mut attr) {
            Ok(_) => Ok(()),
            Err(error) if error.raw_os_error() == Some(libc::EINTR) => Err(LiveError::Interrupted),
            Err(error) => Err(LiveError::Run(error)),
        }
    }

    /// The interface frames leave by.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// How many flows the frames cycle through.
    pub fn flows(&self) -> usize {
        self.flows
    }

    /// The frame as it starts (flow 0).
    pub fn frame(&self) -> &[u8] {
        &self.frame
    }
}

/// `union bpf_attr` for BPF_PROG_TEST_RUN (the `test` struct).
#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    _pad: u32,
}

/// `CLOCK_MONOTONIC` now, in nanoseconds: the clock of `bpf_ktime_get_ns`, with which the live
/// generator paces and stamps its frames.
pub fn kernel_clock_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec that the call only writes; CLOCK_MONOTONIC always
    // exists, so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

/// Loads the generator program (`bpf/live.c`) that writes the `head_len`-byte heads of `flows`
/// and sends every frame out of interface `ifindex`, paced when `pacing` is given (valid). Its
/// tables (`heads`, and `gaps` when paced) are sized for them and still empty. With `stamp_at`
/// every frame gets the kernel's clock written there.
fn load_generator(
    ifindex: u32,
    flows: &LiveFlows,
    head_len: usize,
    pacing: Option<&LivePacing>,
    stamp_at: Option<usize>,
) -> Result<Loaded, ProgramError> {
    let flow_count = flows.heads.len() as u32;
    let random = u32::from(flows.order == LiveFlowOrder::Random);
    let head_len = head_len as u32;
    let paced = u32::from(pacing.is_some());
    let gap_count = pacing.map_or(1, |pacing| pacing.gaps.len() as u32);
    let gap_mask = gap_count - 1;
    let max_spin_ns = pacing.map_or(0, |pacing| pacing.yield_ns);
    // The frame's length (at most MAX_LIVE_FRAME) bounds it; 0 stamps nothing.
    let stamp_at = stamp_at.map_or(0, |at| at as u32);
    let mut loader = EbpfLoader::new();
    loader
        .override_global("target_ifindex", &ifindex, true)
        .override_global("flow_count", &flow_count, true)
        .override_global("random_order", &random, true)
        .override_global("head_len", &head_len, true)
        .override_global("paced", &paced, true)
        .override_global("gap_mask", &gap_mask, true)
        .override_global("stamp_at", &stamp_at, true)
        .override_global("max_spin_ns", &max_spin_ns, true)
        .map_max_entries("heads", flow_count)
        .map_max_entries("gaps", gap_count);
    load(&mut loader, OBJECT, "live")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flows(order: LiveFlowOrder) -> LiveFlows {
        LiveFlows {
            heads: vec![vec![7; 42]; 5],
            order,
        }
    }

    #[test]
    fn every_flow_program_paced_or_not_passes_the_verifier_when_root() {
        if !crate::afxdp::bpf::may_load_for_test() {
            return;
        }
        let gaps = LivePacing::from_gaps([1e-6, 2e-6, 3e-6, 4e-6], 1000);
        for head_len in [2, 42, 60, MAX_LIVE_HEAD] {
            for order in [LiveFlowOrder::RoundRobin, LiveFlowOrder::Random] {
                let flows = LiveFlows {
                    heads: vec![vec![7; head_len]; 5],
                    order,
                };
                for (pacing, stamp_at) in
                    [(None, None), (Some(&gaps), None), (Some(&gaps), Some(130))]
                {
                    match load_generator(1, &flows, head_len, pacing, stamp_at) {
                        Ok(loaded) => {
                            for map in ["heads", "pacing", "gaps"] {
                                loaded.map(map).expect(map);
                            }
                        }
                        Err(error) => {
                            panic!(
                                "{order:?}, {head_len}-byte head, {pacing:?}, stamp at \
                                 {stamp_at:?}: {error:?}"
                            )
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn bad_frames_flows_and_batches_are_refused_before_any_system_call() {
        let frame = [0u8; 60];
        let one = LiveFlows::single(&frame);
        assert_eq!(one.heads, [vec![0u8; 60]]);
        assert!(matches!(
            XdpLiveGenerator::new("lo", &[0; 10], &one, 64),
            Err(LiveError::FrameSize(10))
        ));
        assert!(matches!(
            XdpLiveGenerator::new("lo", &frame, &one, 0),
            Err(LiveError::BatchSize(0))
        ));
        let pacing = LivePacing::constant(1e6, 1000);
        for at in [10, 53] {
            assert!(
                matches!(
                    XdpLiveGenerator::paced_stamped("lo", &frame, &one, 64, &pacing, at),
                    Err(LiveError::Payload { .. })
                ),
                "a stamp at {at} overlaps the head or passes the frame's end"
            );
        }
        let longer_than_the_frame = LiveFlows {
            heads: vec![vec![0; 62]; 2],
            ..flows(LiveFlowOrder::Random)
        };
        let odd = LiveFlows {
            heads: vec![vec![0; 41]; 2],
            ..flows(LiveFlowOrder::Random)
        };
        let unequal = LiveFlows {
            heads: vec![vec![0; 42], vec![0; 44]],
            ..flows(LiveFlowOrder::Random)
        };
        let none = LiveFlows {
            heads: Vec::new(),
            ..flows(LiveFlowOrder::Random)
        };
        for bad in [longer_than_the_frame, odd, unequal, none] {
            assert!(matches!(
                XdpLiveGenerator::new("lo", &frame, &bad, 64),
                Err(LiveError::Flows { .. })
            ));
        }
    }
}
