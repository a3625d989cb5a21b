//! What an AF_XDP port is asked to be, and the errors that stop it before it starts.
//!
//! Every error names the port and says how to fix the problem, because the person reading it is
//! setting up a forwarder or a test, not debugging wirespeed.

pub use super::program::XdpMode;
use crate::port::QueueId;

/// Default size of each of the four rings: enough for a few milliseconds of a busy 10 GbE queue,
/// and the size libxdp and Snabb use.
pub const DEFAULT_RING_SIZE: u32 = 2048;

/// Which queues of the interface the port opens.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum QueueSelection {
    /// Every RX queue the interface has.
    #[default]
    All,
    /// These queues (each below the interface's queue count).
    List(Vec<QueueId>),
}

/// How to open an AF_XDP port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AfXdpConfig {
    pub queues: QueueSelection,
    /// Fill ring size (frames offered to the kernel for receiving), a power of two.
    pub fill_size: u32,
    /// Completion ring size (transmitted frames coming back), a power of two.
    pub completion_size: u32,
    /// RX ring size, a power of two.
    pub rx_size: u32,
    /// TX ring size, a power of two.
    pub tx_size: u32,
    /// Try a zero-copy bind first (falls back to copy mode, reported in the port's mode).
    pub zero_copy: bool,
    /// XDP attach mode wish (for a port that attaches its own program: not used by
    /// [`AfXdpPort::open_shared`](super::AfXdpPort::open_shared), whose attachment has its mode).
    pub xdp_mode: XdpMode,
    /// Send buffer of each socket, bytes (`SO_SNDBUFFORCE`, as root; `None` keeps the system's
    /// `net.core.wmem_default`). In copy mode every frame sent is an skb charged to the socket
    /// until its last holder frees it, so the send buffer caps the frames a sender can have
    /// inside a DuT's queues: with the default, a few hundred, and the kernel then leaves the
    /// next frames in the TX ring. A tester that must see the DuT's own queues set it large;
    /// the completion ring then bounds the frames in flight.
    pub send_buffer: Option<u32>,
}

impl Default for AfXdpConfig {
    fn default() -> Self {
        Self {
            queues: QueueSelection::All,
            fill_size: DEFAULT_RING_SIZE,
            completion_size: DEFAULT_RING_SIZE,
            rx_size: DEFAULT_RING_SIZE,
            tx_size: DEFAULT_RING_SIZE,
            zero_copy: true,
            xdp_mode: XdpMode::Auto,
            send_buffer: None,
        }
    }
}

impl AfXdpConfig {
    /// The most frames one queue of such a port can hold at once: a full fill ring, a full RX
    /// ring, and transmissions in flight (TX ring plus completion ring). Size the pool to at
    /// least the sum over all queues of all ports, plus the worker's batches.
    pub fn frames_per_queue(&self) -> u32 {
        self.fill_size + self.rx_size + self.tx_size + self.completion_size
    }
}

/// Why an AF_XDP port could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum AfXdpError {
    #[error(
        "port {port}: no interface of that name in this network namespace; check `ip link show` \
         (and that wirespeed runs in the namespace that holds it)"
    )]
    NoSuchInterface { port: String },
    #[error("port {port}: cannot read {path}: {source}; is the interface still there?")]
    Sysfs {
        port: String,
        path: String,
        source: std::io::Error,
    },
    #[error(
        "port {port}: queue {queue} does not exist, the interface has {queues} queue(s) \
         (0..{queues}); pick a lower queue or add queues with `ethtool -L {port} combined N`"
    )]
    QueueOutOfRange {
        port: String,
        queue: QueueId,
        queues: u16,
    },
    #[error("port {port}: the queue list is empty; list at least one queue or ask for all")]
    NoQueues { port: String },
    #[error(
        "port {port}: {ring} ring size {size} is not a power of two between 64 and 65536; \
         use e.g. 2048"
    )]
    RingSize {
        port: String,
        ring: &'static str,
        size: u32,
    },
    #[error(
        "port {port}: MTU {mtu} plus 22 bytes of Ethernet and VLAN headers does not fit the \
         {room} bytes a {frame_size}-byte frame leaves after its {headroom}-byte headroom; lower \
         the MTU (`ip link set dev {port} mtu {max_mtu}`) or use larger frames (`frame_size`: \
         4096 up to an MTU of 3818, 16384 for jumbo frames)"
    )]
    MtuTooLarge {
        port: String,
        mtu: u32,
        frame_size: u32,
        headroom: u16,
        room: u32,
        max_mtu: u32,
    },
    #[error(
        "port {port}: the frame pool is not the one the UMEM was made from; open every port of \
         a worker with the worker's pool and its Umem"
    )]
    WrongPool { port: String },
    #[error(
        "port {port}: permission denied ({what}); AF_XDP needs CAP_NET_ADMIN, CAP_NET_RAW and \
         CAP_BPF (run as root)"
    )]
    PermissionDenied { port: String, what: String },
    #[error("port {port}: cannot count probes: {detail}")]
    ProbeFilter { port: String, detail: String },
    #[error(
        "port {port}: an XDP program is already attached; wirespeed does not replace another \
         program: remove it with `ip link set dev {port} xdp off` (or stop the program that owns \
         it, e.g. another wirespeed)"
    )]
    XdpAlreadyAttached { port: String },
    #[error(
        "port {port}: queue {queue} is already served by another AF_XDP port of this process \
         (another worker); give each worker its own queues of the interface"
    )]
    QueueTaken { port: String, queue: QueueId },
    #[error(
        "port {port}: the shared XDP attachment is for interface index {attached}, but {port} \
         here has index {ifindex}; attach and open in the same network namespace"
    )]
    AttachmentMismatch {
        port: String,
        attached: u32,
        ifindex: u32,
    },
    #[error(
        "port {port}: cannot attach XDP in {mode} mode: {source}; the driver may lack XDP \
         support: try xdp mode `generic` (or `auto`)"
    )]
    XdpAttach {
        port: String,
        mode: &'static str,
        source: std::io::Error,
    },
    #[error(
        "port {port}: the kernel refused XDP program {program}: {log}; kernel ≥ 5.10 with \
         CONFIG_XDP_SOCKETS is needed"
    )]
    XdpLoad {
        port: String,
        /// The program's name in its object (`bpf/*.c`).
        program: &'static str,
        source: std::io::Error,
        log: String,
    },
    #[error("port {port}: could not create the XSKMAP: {source}; kernel ≥ 5.10 is needed")]
    XskMap {
        port: String,
        source: std::io::Error,
    },
    #[error(
        "port {port}, queue {queue}: AF_XDP socket setup failed to {step}: {source}; check that \
         the kernel has CONFIG_XDP_SOCKETS and that the queue is not used by another AF_XDP \
         program"
    )]
    Socket {
        port: String,
        queue: QueueId,
        step: &'static str,
        source: std::io::Error,
    },
    #[error(
        "port {port}, queue {queue}: the kernel would not lock the frame pool in memory for \
         AF_XDP (ENOBUFS): RLIMIT_MEMLOCK is {limit} and this process lacks CAP_IPC_LOCK; \
         raise the limit: `ulimit -l unlimited` in the shell that starts it, \
         LimitMEMLOCK=infinity in its systemd unit, or a memlock line in \
         /etc/security/limits.conf (or give it a smaller frame pool: [switch] frames)"
    )]
    Memlock {
        port: String,
        queue: QueueId,
        limit: super::MemlockLimit,
    },
    #[error(
        "port {port}: the frame pool has too few free frames ({free}) to fill the fill rings \
         ({needed}); make the pool larger (at least {needed} more frames)"
    )]
    PoolTooSmall {
        port: String,
        free: u32,
        needed: u32,
    },
}
