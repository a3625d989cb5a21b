//! Ports: how wirespeed moves batches of frames in and out.
//!
//! Every backend implements [`Port`]. The caller (a worker) owns the [`FramePool`] and the
//! batches and lends them to the port on every call, so a port never allocates or locks, and a
//! frame received on one port can be transmitted on another without a copy as long as both use
//! the worker's pool (for AF_XDP: both sockets share the worker's UMEM).
//!
//! [`FramePool`]: wirespeed_packet::FramePool

pub mod afpacket;
pub mod afxdp;
pub mod link_watch;
pub mod memory;
pub mod pcap;
pub mod port;
pub mod thread;
pub mod wait;
pub mod wrap;

pub use port::{Backend, Port, PortInfo, PortStats, QueueId};
