//! The XDP program that steers a queue's frames into its AF_XDP socket, made with `bpf(2)` alone.
//!
//! No compiler, object file or BPF library is involved: the program is six instructions written
//! here (`r2 = ctx->rx_queue_index; r1 = xskmap; r3 = XDP_PASS; call bpf_redirect_map; exit`),
//! loaded with `BPF_PROG_LOAD` against an XSKMAP made with `BPF_MAP_CREATE`, and attached with
//! `BPF_LINK_CREATE`. A link (rather than the netlink attach `ip link set xdp` uses) is owned by
//! its file descriptor: when the process exits, even by SIGKILL, the kernel closes the descriptor
//! and detaches the program, so a crashed forwarder never leaves an interface redirecting into a
//! socket nobody reads. A link also refuses to attach where any program is already attached,
//! which is how we avoid replacing someone else's program.
//!
//! A queue without a socket in the map makes `bpf_redirect_map` return its fallback action
//! (the low bits of the flags argument, here `XDP_PASS`): such frames go to the kernel stack.
//!
//! The same loader and link make the four-instruction program behind
//! [`XdpRedirect`](super::XdpRedirect) (`r1 = ifindex; r2 = 0; call bpf_redirect; exit`), which
//! sends every frame of one interface out of another without leaving the kernel.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use super::bpf::{
    ALU64_MOV_K, BPF_FUNC_REDIRECT, BPF_FUNC_REDIRECT_MAP, BPF_LINK_CREATE, BPF_MAP_DELETE_ELEM,
    BPF_MAP_TYPE_XSKMAP, BPF_XDP, Insn, JMP_CALL, JMP_EXIT, LDX_MEM_W, LinkCreateAttr,
    MapUpdateAttr, XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE, XDP_MD_RX_QUEUE_INDEX, XDP_PASS, bpf,
    create_map, insn, load, load_map, owned, update_map,
};

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

/// The program, with the XSKMAP's descriptor in the 64-bit load of the map.
fn redirect_program(map_fd: RawFd) -> [Insn; 6] {
    let map = load_map(1, map_fd);
    [
        // r2 = ((struct xdp_md *)r1)->rx_queue_index
        insn(LDX_MEM_W, 2, 1, XDP_MD_RX_QUEUE_INDEX, 0),
        // r1 = the XSKMAP (two slots: low and high 32 bits of the map reference)
        map[0],
        map[1],
        // r3 = XDP_PASS: the action when the queue has no socket
        insn(ALU64_MOV_K, 3, 0, 0, XDP_PASS),
        // r0 = bpf_redirect_map(r1, r2, r3)
        insn(JMP_CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
        insn(JMP_EXIT, 0, 0, 0, 0),
    ]
}

/// The program that sends every frame out of interface `ifindex` (`bpf_redirect` with no flags
/// returns `XDP_REDIRECT`; the redirect happens when the driver flushes after the program).
pub(crate) fn redirect_to_interface_program(ifindex: u32) -> [Insn; 4] {
    [
        // r1 = the target interface (the immediate is the u32's bits)
        insn(ALU64_MOV_K, 1, 0, 0, ifindex as i32),
        // r2 = 0: no flags (BPF_F_INGRESS would inject into the target's own RX instead)
        insn(ALU64_MOV_K, 2, 0, 0, 0),
        // r0 = bpf_redirect(r1, r2)
        insn(JMP_CALL, 0, 0, 0, BPF_FUNC_REDIRECT),
        insn(JMP_EXIT, 0, 0, 0, 0),
    ]
}

/// Why a step of setting up the XDP program failed.
#[derive(Debug)]
pub(crate) enum ProgramError {
    /// BPF_MAP_CREATE failed.
    Map(std::io::Error),
    /// BPF_PROG_LOAD failed; the verifier's log.
    Load(std::io::Error, String),
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
    /// Loads `program` and attaches it to `ifindex` in `mode`.
    pub(crate) fn attach(
        program: &[Insn],
        ifindex: u32,
        mode: XdpMode,
    ) -> Result<Self, ProgramError> {
        Self::link(load(program)?, ifindex, mode)
    }

    /// Attaches `program`, loaded elsewhere (the fast path's, which aya loads), to `ifindex`
    /// in `mode`.
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

    /// Attaches to `from` the program that redirects every frame out of interface `to`.
    pub(crate) fn redirect(from: u32, to: u32, mode: XdpMode) -> Result<Self, ProgramError> {
        Self::attach(&redirect_to_interface_program(to), from, mode)
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
    /// Creates a map of `queues` slots and the program, and attaches it to `ifindex` in `mode`.
    pub(crate) fn attach(ifindex: u32, queues: u32, mode: XdpMode) -> Result<Self, ProgramError> {
        Self::attach_built(ifindex, queues, mode, |map| redirect_program(map).to_vec())
    }

    /// [`XdpProgram::attach`] with the program `build` makes for the XSKMAP (its descriptor is
    /// `build`'s argument) instead of the plain redirect: a program that redirects only some
    /// frames to the sockets (the probe counter's samples) and decides about the others itself.
    pub(crate) fn attach_built(
        ifindex: u32,
        queues: u32,
        mode: XdpMode,
        build: impl FnOnce(RawFd) -> Vec<Insn>,
    ) -> Result<Self, ProgramError> {
        let map = create_map(BPF_MAP_TYPE_XSKMAP, 4, queues.max(1))?;
        let attached = AttachedProgram::attach(&build(map.as_raw_fd()), ifindex, mode)?;
        Ok(Self {
            attached,
            map,
            base: 0,
        })
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
    fn program_encodes_as_the_kernel_expects() {
        let program = redirect_program(7);
        // struct bpf_insn is 8 bytes; the loader passes the array as is.
        assert_eq!(std::mem::size_of::<Insn>(), 8);
        assert_eq!(program[0].code, 0x61);
        assert_eq!(program[0].regs, 0x12); // src r1, dst r2
        assert_eq!(program[1].code, 0x18);
        assert_eq!(program[1].regs, 0x11); // src BPF_PSEUDO_MAP_FD, dst r1
        assert_eq!(program[1].imm, 7);
        assert_eq!(program[3].code, 0xb7);
        assert_eq!(program[4].code, 0x85);
        assert_eq!(program[5].code, 0x95);
    }

    #[test]
    fn redirect_to_interface_encodes_as_the_kernel_expects() {
        let program = redirect_to_interface_program(42);
        assert_eq!(
            (program[0].code, program[0].regs, program[0].imm),
            (0xb7, 0x01, 42)
        );
        assert_eq!(
            (program[1].code, program[1].regs, program[1].imm),
            (0xb7, 0x02, 0)
        );
        assert_eq!((program[2].code, program[2].imm), (0x85, 23));
        assert_eq!(program[3].code, 0x95);
    }

    #[test]
    fn map_and_program_load_when_root() {
        if !crate::afxdp::bpf::may_load_for_test() {
            return;
        }
        let map = create_map(BPF_MAP_TYPE_XSKMAP, 4, 4).expect("XSKMAP");
        match load(&redirect_program(map.as_raw_fd())) {
            Ok(_program) => {}
            Err(ProgramError::Load(error, log)) => panic!("load failed: {error}: {log}"),
            Err(other) => panic!("{other:?}"),
        }
        match load(&redirect_to_interface_program(1)) {
            Ok(_program) => {}
            Err(ProgramError::Load(error, log)) => panic!("load failed: {error}: {log}"),
            Err(other) => panic!("{other:?}"),
        }
    }
}
