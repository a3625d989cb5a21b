//! The packet layer of wirespeed: where frames live and how they are read.
//!
//! * [`pool`]: one preallocated, 2 MiB-aligned region of fixed-size frames and a stack of free
//!   frame indices. Frames are never freed, only recycled; the region doubles as the AF_XDP UMEM.
//! * [`batch`]: the caller-owned array of descriptors and per-packet metadata that every port and
//!   stage works on.
//! * [`wire`]: zero-copy views of protocol headers (smoltcp style), validated once.
//! * [`checksum`]: full Internet checksums and the RFC 1624 incremental update.
//! * [`flow_key`]: the fields a forwarding decision depends on, and their CRC32C hash.
//! * [`mod@parse`]: the hot-path parser that fills a packet's [`Meta`] and [`FlowKey`] in one pass.
//!
//! * [`memory`]: memory in transparent huge pages: the frame pool's region, the lookup tables
//!   that grow ([`memory::ReservedTable`]) and the advice for those of fixed size.
//!
//! `unsafe` is confined to the pool (memory shared with the kernel), the CRC32C instruction and
//! the read of a flow key's memory as words ([`flow_key`]), the TSC and prefetch ([`cpu`]) and
//! the huge-page mappings and advice ([`memory`]).

pub mod batch;
pub mod checksum;
pub mod cpu;
pub mod flow_key;
pub mod memory;
pub mod parse;
pub mod pool;
pub mod wire;

pub use batch::{Batch, Desc, DropReason, HEADROOM, MAX_BATCH, MAX_VLAN_TAGS, Meta};
pub use flow_key::{FlowKey, crc32c};
pub use parse::{parse, parse_batch, parse_batch_unhashed};
pub use pool::{FrameId, FramePool, PoolError};
