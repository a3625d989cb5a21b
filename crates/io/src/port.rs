//! The [`Port`] trait every backend implements, and what a port reports about itself.
//!
//! The shape follows ixy and the AF_XDP rings it must fit: the caller owns the batch and the pool;
//! `rx` appends received frames to the batch, `tx` takes frames from its front. Frames a port
//! holds (in a fill ring, in flight on a TX ring, queued in a memory link) are the port's until it
//! hands them back, and [`Port::frames_held`] says how many, so the worker can prove pool
//! conservation: free + held by ports + in batches = total.

use wirespeed_packet::{Batch, FramePool};

/// Index of an RX/TX queue pair of a port.
pub type QueueId = u16;

/// How a port moves frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// In-process rings; deterministic tests and pipeline benchmarks.
    Memory,
    /// Frames read from / written to a capture file.
    Pcap,
    /// AF_XDP sockets.
    AfXdp,
    /// AF_PACKET mmap rings.
    AfPacket,
}

impl Backend {
    /// The name used in configuration and output.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Memory => "memory",
            Backend::Pcap => "pcap",
            Backend::AfXdp => "afxdp",
            Backend::AfPacket => "afpacket",
        }
    }
}

/// What a port is, as the worker and the stats output see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortInfo {
    /// The name the configuration gave the port.
    pub name: String,
    pub backend: Backend,
    /// The interface's MAC address (all zero where there is none, e.g. a capture file).
    pub mac: [u8; 6],
    /// Largest L3 packet the port carries; frames up to `mtu + 22` bytes (Ethernet + two VLAN
    /// tags) are accepted.
    pub mtu: u16,
    /// Number of RX/TX queue pairs.
    pub queues: u16,
    /// Whether the link is up (always true for memory and pcap ports).
    pub link_up: bool,
    /// Backend-specific mode actually in use, e.g. "native, copy" for AF_XDP; shown in stats.
    pub mode: String,
}

/// Counters of one port, cumulative since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortStats {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Frames the backend dropped on receive (ring full, kernel drops it reports, no free frame).
    pub rx_dropped: u64,
    /// Frames `tx` refused because its ring was full (the worker drops and counts them too).
    pub tx_refused: u64,
    /// Frames the backend could not use: too long for a frame, a corrupt record.
    pub rx_errors: u64,
}

impl std::ops::AddAssign for PortStats {
    fn add_assign(&mut self, other: Self) {
        self.rx_packets += other.rx_packets;
        self.rx_bytes += other.rx_bytes;
        self.tx_packets += other.tx_packets;
        self.tx_bytes += other.tx_bytes;
        self.rx_dropped += other.rx_dropped;
        self.tx_refused += other.tx_refused;
        self.rx_errors += other.rx_errors;
    }
}

/// A network port as a worker drives it: batches in, batches out, never blocking.
///
/// Every method is called from the one worker thread that owns the port, with that worker's pool.
pub trait Port: Send {
    /// Name, backend, MAC, MTU, queues and mode.
    fn info(&self) -> &PortInfo;

    /// Appends up to `batch.room()` received frames from `queue` to `batch`; returns how many.
    /// Each descriptor's `port` is left for the caller to set; `queue` is set to `queue`.
    fn rx(&mut self, queue: QueueId, pool: &mut FramePool, batch: &mut Batch) -> usize;

    /// Takes frames from the front of `batch` for transmission on `queue` and removes them from
    /// it; what the port cannot take stays in the batch for the caller to drop and count.
    /// Returns how many it took. Frames taken become the port's until their transmission
    /// completes, when they go back to `pool`.
    fn tx(&mut self, queue: QueueId, pool: &mut FramePool, batch: &mut Batch) -> usize;

    /// How many frames `tx` on `queue` would take right now, at most `want`, found without a
    /// system call (the ring's indices or status words, as `tx` itself reads them; completed
    /// transmissions go back to `pool` first, as in `tx`).
    ///
    /// It exists for a sender whose schedule asks for more than the ring drains: the paced
    /// tester at line rate has ~13 frames due for every one the AF_XDP TX ring takes. Asking
    /// first, it prepares only what will leave, counts the rest as refused without touching a
    /// buffer, and sees a full ring, on which it gives its core to the kernel thread that
    /// drains the ring instead of spinning (`tester::trial`).
    ///
    /// The default, for ports that cannot tell (a capture file), says `want`: no limit, so a
    /// caller loses nothing by asking. Wrappers ask the port they wrap.
    fn tx_room(&mut self, _queue: QueueId, _pool: &mut FramePool, want: usize) -> usize {
        want
    }

    /// Does the periodic work that is neither rx nor tx (reclaiming completed TX frames, kicking
    /// the kernel). The worker calls it once per loop iteration; the default does nothing.
    fn poll(&mut self, _pool: &mut FramePool) {}

    /// Frames that have left the port so far, cumulative: for AF_XDP the TX descriptors the
    /// kernel has consumed (it takes one only once it has handed the frame to the device), not
    /// frames merely placed in the TX ring. A paced sender compares it with what it handed to
    /// `tx` to see how long frames wait in the port (the tester's departure lag,
    /// `tester::trial`), so it is read in every loop and makes no system call. The default,
    /// for ports that transmit inside `tx`, is `stats().tx_packets`. Wrappers ask the port
    /// they wrap.
    fn tx_departed(&self) -> u64 {
        self.stats().tx_packets
    }

    /// Whether frames handed to `tx` still wait for the kernel to take them (copy-mode AF_XDP
    /// transmits at most 32 per kick; an AF_PACKET ring can be left with a kick pending). A
    /// worker does not sleep while any port has a backlog: nothing would send it until the
    /// next frame arrives. The default says `false`.
    fn tx_backlog(&mut self) -> bool {
        false
    }

    /// A descriptor that polls readable when `queue` has frames to receive, for a worker that
    /// sleeps in `poll(2)` when idle instead of spinning ([`crate::wait::wait_readable`]).
    /// `None` (the default) when the backend has none; such a port is simply polled.
    fn rx_fd(&self, _queue: QueueId) -> Option<std::os::fd::RawFd> {
        None
    }

    /// Whether the port's input is exhausted for good (a capture file read to its end). Live
    /// ports never are; the default says `false`.
    fn at_end(&self) -> bool {
        false
    }

    /// Why the port stopped working, if it did (a corrupt capture record, a device that went
    /// away); `None` while it works. The default never fails.
    fn fault(&self) -> Option<String> {
        None
    }

    /// The worker's poll(2) found `rx_fd(queue)` in error (POLLERR, POLLHUP) instead of
    /// readable. The port finds out why; when its interface is gone (deleted, moved to another
    /// namespace) it says so from then on in [`Port::fault`] and its [`Port::info`], and the
    /// worker stops watching the descriptor, which would otherwise end every sleep at once.
    /// Wrappers pass it on; the default does nothing.
    fn descriptor_failed(&mut self, _queue: QueueId) {}

    /// Frames of the pool this port holds right now.
    fn frames_held(&self) -> usize;

    /// Returns every frame the port holds to `pool` (on shutdown, before the conservation check).
    fn release_all(&mut self, pool: &mut FramePool);

    /// Cumulative counters.
    fn stats(&self) -> PortStats;
}
