//! The XDP program that steers a queue's frames into its AF_XDP socket (`bpf/xsk_redirect.c`:
//! `bpf_redirect_map(xsks, ctx->rx_queue_index, XDP_PASS)`, six instructions), its XSKMAP, and
//! the link that attaches a program to an interface.
//!
//! The program is loaded with aya against an XSKMAP of one slot per queue, and attached with
//! `BPF_LINK_CREATE`. A link (rather than the netlink attach `ip link set xdp` uses) is owned by
//! its file descriptor: when the process exits, even by SIGKILL, the kernel closes the descriptor
//! and detaches the program, so a crashed forwarder never leaves an interface redirecting into a
//! socket nobody reads. A link also refuses to attach where any program is already attached,
//! which is how we avoid replacing someone else's program.
//!
//! A queue without a socket in the map makes `bpf_redirect_map` return its fallback action
//! (the low bits of the flags argument, here `XDP_PASS`): such frames go to the kernel stack.
//!
//! The same link attaches every other program of this crate (the redirect DuT, the sink, the
//! probe counter) and the fast path's, which aya loads in its own crate.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use aya::EbpfLoader;

use super::bpf::{
    BPF_LINK_CREATE, BPF_MAP_DELETE_ELEM, BPF_XDP, LinkCreateAttr, MapUpdateAttr,
    XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE, bpf, owned, update_map,
};
use super::object::{load_twin, object};

/// The compiled `bpf/xsk_redirect.c`.
static OBJECT: &[u8] = object!("xsk_redirect");

/// Which XDP attach mode to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum XdpMode {
    /// Native (driver) mode, falling back to generic where the driver has no XDP support; the
    /// fallback is reported in the port's mode.
    #[default]
    Auto,
    /// Native (driver) mode only (veth and most NIC drivers have it).
    Native,
    /// Generic (skb) mode: works on every interface, slower.
    Generic,
}

/// Why a step of setting up the XDP program failed.
#[derive(Debug)]
pub(crate) enum ProgramError {
    /// BPF_MAP_CREATE failed.
    Map(std::io::Error),
    /// Loading program `program` (its name in its object) failed; `log` says why: the
    /// verifier's last lines when it refused it.
    Load {
        program: &'static str,
        source: std::io::Error,
        log: String,
    },
    /// BPF_LINK_CREATE failed in `mode` ("native" or "generic").
    Attach(std::io::Error, &'static str),
    /// BPF_MAP_UPDATE_ELEM failed.
    Insert(std::io::Error),
}

/// A loaded program attached to one interface by a link. Dropping it detaches the program (the
/// link's descriptor first, then the program's).
#[derive(Debug)]
pub(crate) struct AttachedProgram {
    _link: OwnedFd,
    _program: OwnedFd,
    /// "native" or "generic".
    mode: &'static str,
    /// Why native mode was not used, when `Auto` fell back to generic.
    fallback: Option<String>,
}

impl AttachedProgram {
    /// Attaches `program`, loaded by aya (here or in the fast path's crate), to `ifindex` in
    /// `mode`.
    pub(crate) fn link(
        program: OwnedFd,
        ifindex: u32,
        mode: XdpMode,
    ) -> Result<Self, ProgramError> {
        let link = |flags: u32| {
            let mut attr = LinkCreateAttr {
                prog_fd: program.as_raw_fd() as u32,
                target_ifindex: ifindex,
                attach_type: BPF_XDP,
                flags,
            };
            bpf(BPF_LINK_CREATE, &mut attr).map(owned)
        };
        let native = || link(XDP_FLAGS_DRV_MODE).map_err(|e| ProgramError::Attach(e, "native"));
        let generic = || link(XDP_FLAGS_SKB_MODE).map_err(|e| ProgramError::Attach(e, "generic"));
        let (link, mode, fallback) = match mode {
            XdpMode::Native => (native()?, "native", None),
            XdpMode::Generic => (generic()?, "generic", None),
            XdpMode::Auto => match native() {
                Ok(link) => (link, "native", None),
                // Another program is attached: falling back would not help and must not hide it.
                Err(ProgramError::Attach(error, _)) if is_busy(&error) => {
                    return Err(ProgramError::Attach(error, "native"));
                }
                Err(ProgramError::Attach(error, _)) => (
                    generic()?,
                    "generic",
                    Some(format!("native XDP refused: {error}")),
                ),
                Err(other) => return Err(other),
            },
        };
        Ok(Self {
            _link: link,
            _program: program,
            mode,
            fallback,
        })
    }

    /// "native" or "generic".
    pub(crate) fn mode(&self) -> &'static str {
        self.mode
    }

    /// Why `Auto` fell back to generic mode, if it did.
    pub(crate) fn fallback(&self) -> Option<&str> {
        self.fallback.as_deref()
    }
}

/// An XSKMAP, the redirect program using it, and the link that attaches it to one interface.
/// Dropping it detaches the program (the link first, then program and map are freed).
#[derive(Debug)]
pub(crate) struct XdpProgram {
    attached: AttachedProgram,
    map: OwnedFd,
    /// The slot of queue 0 in the map: 0 for a map of the interface's own; a program shared by
    /// several interfaces (the fast path) gives each a range of one map.
    base: u32,
}

impl XdpProgram {
    /// Loads the program with a map of `queues` slots, and attaches it to `ifindex` in `mode`.
    pub(crate) fn attach(ifindex: u32, queues: u32, mode: XdpMode) -> Result<Self, ProgramError> {
        let mut loader = EbpfLoader::new();
        loader.map_max_entries("xsks", queues.max(1));
        let loaded = load_twin(&mut loader, OBJECT, "xsk_redirect", "xsk_redirect_single")?;
        let map = loaded.map("xsks")?;
        Self::attach_loaded(loaded.into_program(), map, 0, ifindex, mode)
    }

    /// Attaches `program`, loaded elsewhere, to `ifindex` in `mode`; its XSKMAP is `map`, where
    /// the interface's queue *q* has slot `base + q`.
    pub(crate) fn attach_loaded(
        program: OwnedFd,
        map: OwnedFd,
        base: u32,
        ifindex: u32,
        mode: XdpMode,
    ) -> Result<Self, ProgramError> {
        let attached = AttachedProgram::link(program, ifindex, mode)?;
        Ok(Self {
            attached,
            map,
            base,
        })
    }

    /// Points slot `queue` of the map at socket `socket` (which must be bound).
    pub(crate) fn insert(&self, queue: u32, socket: RawFd) -> Result<(), ProgramError> {
        update_map(&self.map, self.base + queue, &(socket as u32).to_ne_bytes())
            .map_err(ProgramError::Insert)
    }

    /// Empties slot `queue` of the map: the queue's frames go to the kernel stack again. An
    /// empty slot is not an error.
    pub(crate) fn remove(&self, queue: u32) -> std::io::Result<()> {
        let key = self.base + queue;
        let mut attr = MapUpdateAttr {
            map_fd: self.map.as_raw_fd() as u32,
            _pad: 0,
            key: &key as *const u32 as u64,
            value: 0,
            flags: 0,
        };
        match bpf(BPF_MAP_DELETE_ELEM, &mut attr) {
            Ok(_) => Ok(()),
            Err(error) if error.raw_os_error() == Some(libc::ENOENT) => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// "native" or "generic".
    pub(crate) fn mode(&self) -> &'static str {
        self.attached.mode()
    }

    /// Why `Auto` fell back to generic mode, if it did.
    pub(crate) fn fallback(&self) -> Option<&str> {
        self.attached.fallback()
    }
}

/// EBUSY/EEXIST from BPF_LINK_CREATE: a program (ours or someone else's, in this or the other
/// mode) is already attached to the interface.
pub(crate) fn is_busy(error: &std::io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::EBUSY) | Some(libc::EEXIST))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_and_its_map_load_when_root() {
        if !crate::afxdp::bpf::may_load_for_test() {
            return;
        }
        let mut loader = EbpfLoader::new();
        loader.map_max_entries("xsks", 4);
        let loaded = load_twin(&mut loader, OBJECT, "xsk_redirect", "xsk_redirect_single")
            .unwrap_or_else(|error| panic!("{error:?}"));
        loaded.map("xsks").expect("the XSKMAP");
        // The plain twin, for kernels before 5.18, passes the verifier too.
        let plain = super::super::object::load(&mut loader, OBJECT, "xsk_redirect_single");
        plain.unwrap_or_else(|error| panic!("{error:?}"));
    }
}
