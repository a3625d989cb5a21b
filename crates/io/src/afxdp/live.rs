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

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use super::bpf::Assembler;
use super::bpf::{
    ALU64_ADD_K, ALU64_MOD_K, ALU64_MOV_K, ALU64_MOV_X, BPF_FUNC_GET_PRANDOM_U32,
    BPF_FUNC_REDIRECT, BPF_MAP_TYPE_ARRAY, BPF_MAP_TYPE_PERCPU_ARRAY, BPF_PROG_TEST_RUN, Insn,
    JMP_CALL, JMP_EXIT, JMP_JEQ_K, JMP_JGT_X, JMP_JLT_K, LDX_MEM_DW, LDX_MEM_H, LDX_MEM_W,
    ST_MEM_W, STX_MEM_DW, STX_MEM_H, STX_MEM_W, XDP_MD_DATA, XDP_MD_DATA_END, bpf, create_map,
    insn, load, load_functions, map_lookup, update_map,
};
use super::config::AfXdpError;
use super::live_pacing::{
    self, LivePaceCounts, LivePacing, MAX_PACING_GAP, MAX_PACING_GAPS, PacingMaps, STATE_SIZE,
};
use super::port::{program_error, query_interface};

/// `BPF_F_TEST_XDP_LIVE_FRAMES` (linux/bpf.h).
const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;
/// The kernel's largest batch (`TEST_XDP_MAX_BATCH`).
pub const MAX_LIVE_BATCH: u32 = 256;
/// The most flows the program varies (the tester's flows are UDP source ports, or those
/// times the destinations a routing-table benchmark spreads its frames over).
pub const MAX_LIVE_FLOWS: usize = 65536;
/// The longest head a flow writes (Ethernet, a VLAN tag, IPv6 and UDP take 66 bytes).
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
    program: OwnedFd,
    /// The flow counter and the table of heads (the program holds references too; kept for
    /// clarity of ownership).
    _maps: Vec<OwnedFd>,
    /// A paced generator's state and gaps.
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
        Self::build(target, frame, flows, batch_size, None)
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
        Self::build(target, frame, flows, batch_size, Some(pacing))
    }

    fn build(
        target: &str,
        frame: &[u8],
        flows: &LiveFlows,
        batch_size: u32,
        pacing: Option<&LivePacing>,
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
        let ifindex = query_interface(target)?.ifindex;
        let setup = |error| LiveError::Setup(program_error(target, error));
        let counter = create_map(BPF_MAP_TYPE_PERCPU_ARRAY, 8, 1).map_err(setup)?;
        let table = create_map(
            BPF_MAP_TYPE_ARRAY,
            head_len as u32,
            flows.heads.len() as u32,
        )
        .map_err(setup)?;
        for (flow, head) in flows.heads.iter().enumerate() {
            update_map(&table, flow as u32, head).map_err(LiveError::FlowTable)?;
        }
        let pacing = match pacing {
            None => None,
            Some(pacing) if !pacing.is_valid() => return Err(LiveError::Pacing),
            Some(pacing) => {
                let state = create_map(BPF_MAP_TYPE_ARRAY, STATE_SIZE, 1).map_err(setup)?;
                let gaps =
                    create_map(BPF_MAP_TYPE_ARRAY, 8, pacing.gaps.len() as u32).map_err(setup)?;
                for (index, gap) in pacing.gaps.iter().enumerate() {
                    update_map(&gaps, index as u32, &gap.to_ne_bytes())
                        .map_err(LiveError::FlowTable)?;
                }
                Some(PacingMaps {
                    state,
                    gaps,
                    gap_count: pacing.gaps.len(),
                    tolerance_ns: pacing.tolerance_ns,
                })
            }
        };
        let code = flow_program(
            ifindex,
            counter.as_raw_fd(),
            table.as_raw_fd(),
            flows,
            head_len,
            pacing.as_ref().map(|maps| {
                (
                    maps.state.as_raw_fd(),
                    maps.gaps.as_raw_fd(),
                    maps.gap_count,
                )
            }),
        );
        let program = load_generator(&code).map_err(setup)?;
        // Flow 0's head, so that the page-pool pages start as flow 0 (round robin's first).
        let mut frame = frame.to_vec();
        frame[..head_len].copy_from_slice(&flows.heads[0]);
        Ok(XdpLiveGenerator {
            program,
            _maps: vec![counter, table],
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
        let maps = self.pacing.as_ref().ok_or(LiveError::NotPaced)?;
        maps.start(start_ns, deadline_ns)
            .map_err(LiveError::PacingState)
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

/// The generator program:
///
/// ```text
/// flow = round robin ? counter[cpu]++ (wrapping at flows) : prandom() % flows
/// head = table[flow]
/// if data + head_len <= data_end: copy head over the frame's first head_len bytes
/// return bpf_redirect(ifindex, 0)
/// ```
fn flow_program(
    ifindex: u32,
    counter: RawFd,
    table: RawFd,
    flows: &LiveFlows,
    head_len: usize,
    pacing: Option<(RawFd, RawFd, usize)>,
) -> Vec<Insn> {
    let count = flows.heads.len() as i32;
    // Every early exit jumps to the redirect at the end.
    let mut asm = Assembler::with_capacity(128);
    // r6 = ctx, kept across the calls
    asm.push(&[insn(ALU64_MOV_X, 6, 1, 0, 0)]);
    let spin = pacing.map(|(state, gaps, count)| live_pacing::pace(&mut asm, state, gaps, count));
    match flows.order {
        LiveFlowOrder::RoundRobin => {
            // r0 = &counter[0] of this CPU
            asm.push(&[insn(ST_MEM_W, 10, 0, -4, 0)]);
            asm.push(&map_lookup(counter, -4));
            asm.jump_to_tail(insn(JMP_JEQ_K, 0, 0, 0, 0));
            asm.push(&[
                // r7 = this frame's flow; the counter moves on to the next, wrapping to 0
                insn(LDX_MEM_DW, 7, 0, 0, 0),
                insn(ALU64_MOV_X, 1, 7, 0, 0),
                insn(ALU64_ADD_K, 1, 0, 0, 1),
                insn(JMP_JLT_K, 1, 0, 1, count),
                insn(ALU64_MOV_K, 1, 0, 0, 0),
                insn(STX_MEM_DW, 0, 1, 0, 0),
                // key = flow
                insn(STX_MEM_W, 10, 7, -8, 0),
            ]);
        }
        LiveFlowOrder::Random => asm.push(&[
            insn(JMP_CALL, 0, 0, 0, BPF_FUNC_GET_PRANDOM_U32),
            insn(ALU64_MOD_K, 0, 0, 0, count),
            insn(STX_MEM_W, 10, 0, -8, 0),
        ]),
    }
    // r0 = &table[flow]
    asm.push(&map_lookup(table, -8));
    asm.jump_to_tail(insn(JMP_JEQ_K, 0, 0, 0, 0));
    asm.push(&[
        // The verifier (and a program that shortened the frame) needs the bounds check.
        insn(LDX_MEM_W, 1, 6, XDP_MD_DATA, 0),
        insn(LDX_MEM_W, 2, 6, XDP_MD_DATA_END, 0),
        insn(ALU64_MOV_X, 5, 1, 0, 0),
        insn(ALU64_ADD_K, 5, 0, 0, head_len as i32),
    ]);
    asm.jump_to_tail(insn(JMP_JGT_X, 5, 2, 0, 0));
    // The head in 8-byte words, then 2-byte ones (its length is even).
    let words = head_len / 8;
    for at in (0..words).map(|word| 8 * word as i16) {
        asm.push(&[insn(LDX_MEM_DW, 3, 0, at, 0), insn(STX_MEM_DW, 1, 3, at, 0)]);
    }
    for at in (8 * words..head_len).step_by(2).map(|at| at as i16) {
        asm.push(&[insn(LDX_MEM_H, 3, 0, at, 0), insn(STX_MEM_H, 1, 3, at, 0)]);
    }
    let mut code = asm.finish_with(&redirect_to_interface_program(ifindex));
    if let Some(load_at) = spin {
        live_pacing::append_spin_callback(&mut code, load_at);
    }
    code
}

/// The program's end: send the frame out of interface `ifindex` (`bpf_redirect` with no flags
/// returns `XDP_REDIRECT`).
fn redirect_to_interface_program(ifindex: u32) -> [Insn; 4] {
    [
        insn(ALU64_MOV_K, 1, 0, 0, ifindex as i32),
        insn(ALU64_MOV_K, 2, 0, 0, 0),
        insn(JMP_CALL, 0, 0, 0, BPF_FUNC_REDIRECT),
        insn(JMP_EXIT, 0, 0, 0, 0),
    ]
}

/// Loads a generator program: a paced one has the spin callback after its main function.
fn load_generator(code: &[Insn]) -> Result<OwnedFd, super::program::ProgramError> {
    match live_pacing::callback_start(code) {
        Some(start) => load_functions(code, &[start]),
        None => load(code),
    }
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
    fn every_early_exit_jumps_to_the_redirect() {
        for order in [LiveFlowOrder::RoundRobin, LiveFlowOrder::Random] {
            let code = flow_program(9, 3, 4, &flows(order), 42, None);
            let redirect = code.len() - 4;
            assert_eq!(code[redirect..], redirect_to_interface_program(9));
            let mut jumps = 0;
            for (at, instruction) in code.iter().enumerate() {
                if matches!(instruction.code, JMP_JEQ_K | JMP_JGT_X) {
                    assert_eq!(at + 1 + instruction.off as usize, redirect, "jump at {at}");
                    jumps += 1;
                }
            }
            let expected = if order == LiveFlowOrder::RoundRobin {
                3
            } else {
                2
            };
            assert_eq!(jumps, expected);
        }
    }

    #[test]
    fn the_head_is_copied_whole_in_words_then_halves() {
        let code = flow_program(9, 3, 4, &flows(LiveFlowOrder::Random), 42, None);
        let stores: Vec<(u8, i16)> = code
            .iter()
            .filter(|insn| matches!(insn.code, STX_MEM_DW | STX_MEM_H) && insn.regs & 0x0f == 1)
            .map(|insn| (insn.code, insn.off))
            .collect();
        let mut want: Vec<(u8, i16)> = (0..5).map(|w| (STX_MEM_DW, 8 * w)).collect();
        want.push((STX_MEM_H, 40));
        assert_eq!(stores, want);
    }

    #[test]
    fn the_round_robin_counter_wraps_at_the_flow_count() {
        let code = flow_program(9, 3, 4, &flows(LiveFlowOrder::RoundRobin), 42, None);
        let wrap = code
            .iter()
            .position(|insn| insn.code == JMP_JLT_K)
            .expect("the wrap");
        assert_eq!((code[wrap].imm, code[wrap].off), (5, 1));
        assert_eq!(code[wrap + 1], insn(ALU64_MOV_K, 1, 0, 0, 0));
    }

    #[test]
    fn every_flow_program_paced_or_not_passes_the_verifier_when_root() {
        if !crate::afxdp::bpf::may_load_for_test() {
            return;
        }
        let counter = create_map(BPF_MAP_TYPE_PERCPU_ARRAY, 8, 1).expect("counter");
        for head_len in [42, 60, MAX_LIVE_HEAD] {
            let table = create_map(BPF_MAP_TYPE_ARRAY, head_len as u32, 5).expect("table");
            for order in [LiveFlowOrder::RoundRobin, LiveFlowOrder::Random] {
                let state = create_map(BPF_MAP_TYPE_ARRAY, STATE_SIZE, 1).expect("state");
                let gaps = create_map(BPF_MAP_TYPE_ARRAY, 8, 4).expect("gaps");
                let paced = Some((state.as_raw_fd(), gaps.as_raw_fd(), 4));
                for pacing in [None, paced] {
                    let code = flow_program(
                        1,
                        counter.as_raw_fd(),
                        table.as_raw_fd(),
                        &flows(order),
                        head_len,
                        pacing,
                    );
                    if let Err(error) = load_generator(&code) {
                        panic!("{order:?}, {head_len}-byte head, {pacing:?}: {error:?}");
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
