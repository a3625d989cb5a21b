//! [`XdpRedirect`]: every frame arriving on one interface leaves by another, redirected by a
//! five-instruction XDP program inside the kernel, without ever reaching user space.
//!
//! This is the ceiling a user-space forwarder on the same machine is measured against: the same
//! veth pairs, the same driver paths, no socket rings, no copies into a UMEM, no wakeups. The
//! program is `bpf/redirect.c` (`bpf_redirect(target_ifindex, 0)`, the target a read-only global
//! set when it is loaded); it is attached by the same kind of link as the AF_XDP program
//! (`program`), so it detaches when the handle is dropped or the process dies, and it never
//! replaces a program someone else attached.
//!
//! What the receiving side needs (measured on kernel 6.18). `bpf_redirect` hands each frame to
//! the target's `ndo_xdp_xmit`. A veth implements that by putting the frame on its *peer's*
//! receive ring, which exists only while the peer runs its NAPI poller; a veth peer does so when
//! it has an XDP program attached or when GRO is on (`ethtool -K PEER gro on`; off by default on
//! veth). Otherwise the kernel drops every redirected frame, and says so only in the *source*
//! interface's counters (`ip -s link`: RX dropped; `ethtool -S`: `rx_queue_N_drops`). So
//! redirecting d0 -> d1 of the veth pair d1 <-> t1 needs `ethtool -K t1 gro on` (or any XDP
//! program on t1) in t1's namespace. A NIC with native XDP transmits redirected frames itself
//! and needs nothing of the kind.

use aya::EbpfLoader;

use super::config::{AfXdpError, XdpMode};
use super::object::{Loaded, load_twin, object};
use super::port::{program_error, query_interface};
use super::program::{AttachedProgram, ProgramError};

/// The compiled `bpf/redirect.c`.
static OBJECT: &[u8] = object!("redirect");

/// An in-kernel XDP program on interface `from` that sends every frame out of interface `to`.
/// Dropping it detaches the program.
#[derive(Debug)]
pub struct XdpRedirect {
    program: AttachedProgram,
    from: String,
    to: String,
}

impl XdpRedirect {
    /// Attaches to `from` (an interface of the calling thread's network namespace) the program
    /// that redirects every frame received there out of `to` (same namespace), in `mode`. See
    /// the module documentation for what a veth `to` needs from its peer.
    pub fn attach(from: &str, to: &str, mode: XdpMode) -> Result<XdpRedirect, AfXdpError> {
        let source = query_interface(from)?;
        let target = query_interface(to)?;
        let program = load_redirect(target.ifindex)
            .and_then(|loaded| AttachedProgram::link(loaded.into_program(), source.ifindex, mode))
            .map_err(|error| program_error(from, error))?;
        Ok(XdpRedirect {
            program,
            from: from.to_string(),
            to: to.to_string(),
        })
    }

    /// How the program is attached: "native" or "generic".
    pub fn mode(&self) -> &str {
        self.program.mode()
    }

    /// Why `XdpMode::Auto` fell back to generic mode, if it did.
    pub fn fallback(&self) -> Option<&str> {
        self.program.fallback()
    }

    /// The interface whose frames are redirected.
    pub fn from(&self) -> &str {
        &self.from
    }

    /// The interface they leave by.
    pub fn to(&self) -> &str {
        &self.to
    }
}

/// Loads the program that redirects every frame out of interface `ifindex`.
fn load_redirect(ifindex: u32) -> Result<Loaded, ProgramError> {
    let mut loader = EbpfLoader::new();
    loader.override_global("target_ifindex", &ifindex, true);
    load_twin(&mut loader, OBJECT, "redirect", "redirect_single")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_twins_load_when_root() {
        if !crate::afxdp::bpf::may_load_for_test() {
            return;
        }
        load_redirect(1).unwrap_or_else(|error| panic!("{error:?}"));
        let mut loader = EbpfLoader::new();
        loader.override_global("target_ifindex", &1u32, true);
        let plain = super::super::object::load(&mut loader, OBJECT, "redirect_single");
        plain.unwrap_or_else(|error| panic!("{error:?}"));
    }
}
