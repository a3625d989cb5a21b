//! The AF_XDP backend: the kernel hands received frames to user space, and takes frames to
//! transmit, through rings of descriptors into the worker's own frame region. No frame is copied
//! in user space, and with a zero-copy driver none is copied at all.
//!
//! The pieces, each written against the kernel's UAPI (linux/if_xdp.h, linux/bpf.h) with
//! nothing but `libc`, except the XDP programs: C in the crate's `bpf/` directory, compiled by
//! the build script with `clang -target bpf` and loaded with aya:
//! * [`umem`]: the worker's [`FramePool`] registered as the UMEM, shared by all its sockets;
//! * `ring`: the fill, completion, RX and TX rings with cached indices;
//! * `socket`: one socket per (port, queue), its bind modes and wakeups;
//! * `program`: the six-instruction XDP program (`bpf/xsk_redirect.c`), its XSKMAP and the
//!   link that attaches it;
//! * [`XdpAttachment`]: one interface's program and XSKMAP, shared by the ports several workers
//!   open on different queues of it ([`AfXdpPort::open_shared`]);
//! * `interface`: MTU, MAC and queue count of an interface;
//! * `ledger`: which frames the kernel holds, so that every one comes back;
//! * [`AfXdpPort`]: all of it behind the [`Port`] trait;
//! * [`XdpRedirect`]: no socket at all, an in-kernel redirect from one interface to another,
//!   the reference a user-space forwarder is measured against;
//! * [`XdpLiveGenerator`]: no socket either, frames made and sent inside the kernel by
//!   `BPF_PROG_TEST_RUN` in live-frame mode, the tester's fastest generator;
//! * [`XdpSink`]: an XDP program that counts and drops what arrives, the cheapest receiver;
//! * [`XdpProbeCounter`]: the same counting for the frames that carry one trial's probes, the
//!   tester's receiver for throughput trials, which can also hand one probe in N to an AF_XDP
//!   socket for latency (sampling);
//! * `object`: the programs compiled from `bpf/*.c`, loaded with aya; a verifier refusal names
//!   the program and the verifier's last lines;
//! * `bpf`: the system call for the link, the live-frames run and the map operations.
//!
//! A worker makes one [`Umem`] from its pool, opens its ports with it, and on shutdown calls
//! [`Port::release_all`] on every port before dropping the pool:
//!
//! ```no_run
//! use wirespeed_io::afxdp::{AfXdpConfig, AfXdpPort, Umem};
//! use wirespeed_io::Port;
//! use wirespeed_packet::FramePool;
//!
//! let mut pool = FramePool::new(16384, 2048)?;
//! let umem = Umem::new(&pool);
//! let mut a = AfXdpPort::open("eth1", &AfXdpConfig::default(), &umem, &mut pool)?;
//! let mut b = AfXdpPort::open("eth2", &AfXdpConfig::default(), &umem, &mut pool)?;
//! // ... forward ...
//! a.release_all(&mut pool);
//! b.release_all(&mut pool);
//! assert_eq!(pool.free_count(), pool.total());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Several workers serve one interface by queues: the interface's program is attached once, and
//! each worker opens its own queues of it on its own pool (a queue is one worker's):
//!
//! ```no_run
//! use std::sync::Arc;
//! use wirespeed_io::afxdp::{AfXdpConfig, AfXdpPort, QueueSelection, Umem, XdpAttachment, XdpMode};
//! use wirespeed_packet::FramePool;
//!
//! let eth1 = Arc::new(XdpAttachment::attach("eth1", XdpMode::Auto)?);
//! for queue in 0..eth1.queues() {
//!     let mut pool = FramePool::new(16384, 2048)?;
//!     let umem = Umem::new(&pool);
//!     let config = AfXdpConfig {
//!         queues: QueueSelection::List(vec![queue]),
//!         ..AfXdpConfig::default()
//!     };
//!     let port = AfXdpPort::open_shared(&eth1, &config, &umem, &mut pool)?;
//!     // ... hand port and pool to worker `queue` ...
//! #   drop((port, pool));
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`FramePool`]: wirespeed_packet::FramePool
//! [`Port`]: crate::Port
//! [`Port::release_all`]: crate::Port::release_all

mod attachment;
mod bpf;
mod config;
mod interface;
mod ledger;
mod live;
mod live_pacing;
mod memlock;
mod object;
mod port;
mod probe_counter;
mod program;
mod redirect;
mod ring;
mod sink;
mod socket;
pub mod umem;

pub use attachment::XdpAttachment;
pub use config::{AfXdpConfig, AfXdpError, DEFAULT_RING_SIZE, QueueSelection, XdpMode};
pub use live::{
    LiveError, LiveFlowOrder, LiveFlows, MAX_LIVE_BATCH, MAX_LIVE_FLOWS, MAX_LIVE_FRAME,
    MAX_LIVE_HEAD, XdpLiveGenerator, kernel_clock_ns,
};
pub use live_pacing::{
    GAP_FRACTION_BITS, LivePaceCounts, LivePacing, MAX_PACING_GAP, MAX_PACING_GAPS,
};
pub use memlock::MemlockLimit;
pub use object::verifier_refusal;
pub use port::{AfXdpPort, interface_driver, interface_index, interface_mtu};
pub use probe_counter::{
    LATENCY_BUCKETS, MAX_PROBE_END, ProbeCounts, ProbeFilter, ProbeSampling, XdpProbeCounter,
    latency_bucket, latency_bucket_bounds,
};
pub use redirect::XdpRedirect;
pub use sink::{SinkCounts, XdpSink};
pub use umem::Umem;
