//! The `bpf(2)` system call with nothing but `libc`, for what aya does not do for us: the link
//! that attaches a program (`program`, with its own fallback from native to generic mode), the
//! live-frames test run (`live`), and the few map operations on the descriptors `object` hands
//! out. The programs themselves are C (`bpf/*.c`), loaded with aya (`object`).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

// bpf(2) commands and the attach type (linux/bpf.h).
const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
pub(crate) const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
pub(crate) const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
pub(crate) const BPF_PROG_TEST_RUN: libc::c_long = 10;
pub(crate) const BPF_LINK_CREATE: libc::c_long = 28;
pub(crate) const BPF_XDP: u32 = 37;
const BPF_ANY: u64 = 0;
// XDP attach flags (linux/if_link.h).
pub(crate) const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
pub(crate) const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// `union bpf_attr` for BPF_MAP_LOOKUP_ELEM, BPF_MAP_UPDATE_ELEM and BPF_MAP_DELETE_ELEM
/// (which ignores `value`).
#[repr(C)]
pub(crate) struct MapUpdateAttr {
    pub(crate) map_fd: u32,
    pub(crate) _pad: u32,
    pub(crate) key: u64,
    pub(crate) value: u64,
    pub(crate) flags: u64,
}

/// `union bpf_attr` for BPF_LINK_CREATE, without the per-type tail.
#[repr(C)]
#[derive(Default)]
pub(crate) struct LinkCreateAttr {
    pub(crate) prog_fd: u32,
    pub(crate) target_ifindex: u32,
    pub(crate) attach_type: u32,
    pub(crate) flags: u32,
}

/// Calls `bpf(cmd, attr, sizeof attr)`; returns the new descriptor (or 0) or the errno.
pub(crate) fn bpf<A>(cmd: libc::c_long, attr: &mut A) -> std::io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, initialised `#[repr(C)]` prefix of `union bpf_attr` matching
    // `cmd`, and its size is passed so the kernel reads no further (it treats the rest as zero);
    // every pointer inside it points at memory that outlives the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut A,
            std::mem::size_of::<A>() as libc::c_uint,
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(rc)
}

pub(crate) fn owned(fd: libc::c_long) -> OwnedFd {
    // SAFETY: `fd` was just returned by a successful bpf() call that creates a descriptor, and
    // nothing else owns it.
    unsafe { OwnedFd::from_raw_fd(fd as RawFd) }
}

/// Sets entry `key` of `map` to `value` (which must be the map's value size; for a per-CPU map,
/// one value per possible CPU).
pub(crate) fn update_map(map: &OwnedFd, key: u32, value: &[u8]) -> std::io::Result<()> {
    let mut attr = MapUpdateAttr {
        map_fd: map.as_raw_fd() as u32,
        _pad: 0,
        key: &key as *const u32 as u64,
        value: value.as_ptr() as u64,
        flags: BPF_ANY,
    };
    bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(drop)
}

/// Reads entry `key` of `map` into `value` (which must be the map's value size; for a per-CPU
/// map, one value per possible CPU, each rounded up to 8 bytes).
pub(crate) fn lookup_map(map: &OwnedFd, key: u32, value: &mut [u8]) -> std::io::Result<()> {
    let mut attr = MapUpdateAttr {
        map_fd: map.as_raw_fd() as u32,
        _pad: 0,
        key: &key as *const u32 as u64,
        value: value.as_mut_ptr() as u64,
        flags: 0,
    };
    bpf(BPF_MAP_LOOKUP_ELEM, &mut attr).map(drop)
}

/// How many CPUs the kernel may ever bring up (`/sys/devices/system/cpu/possible`, e.g.
/// `0-1`): the number of values a per-CPU map holds per key.
pub(crate) fn possible_cpus() -> std::io::Result<usize> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible")?;
    parse_cpu_list(&text).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("/sys/devices/system/cpu/possible holds {text:?}, not a CPU list"),
        )
    })
}

/// The count of a CPU list such as `0-3,8,10-11` (highest listed + 1: per-CPU maps are indexed
/// by CPU number, gaps included).
fn parse_cpu_list(text: &str) -> Option<usize> {
    let mut highest = None;
    for part in text.trim().split(',') {
        let last = part.rsplit('-').next()?;
        let cpu: usize = last.trim().parse().ok()?;
        highest = highest.max(Some(cpu));
    }
    highest.map(|cpu| cpu + 1)
}

/// For the tests that load a program: whether this process may (root). Elsewhere prints why
/// the test skips and returns `false`.
#[cfg(test)]
pub(crate) fn may_load_for_test() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: loading BPF needs root");
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_count_up_to_the_highest_cpu() {
        assert_eq!(parse_cpu_list("0-1\n"), Some(2));
        assert_eq!(parse_cpu_list("0"), Some(1));
        assert_eq!(parse_cpu_list("0-3,8,10-11"), Some(12));
        assert_eq!(parse_cpu_list(""), None);
        assert_eq!(parse_cpu_list("x"), None);
    }
}
