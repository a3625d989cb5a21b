//! DPDK's longest-prefix-match tables, `rte_lpm` (DIR-24-8) and `rte_lpm6`, behind safe
//! wrappers: the reference that `wirespeed bench fib --against rte_lpm` measures wirespeed's
//! FIBs against, and that the agreement tests check them with.
//!
//! DPDK's lookups are inline C (`rte_lpm_lookup`, `rte_lpm_lookup_bulk_func`), so a small C
//! shim (`src/shim.c`) compiles them inside loops over whole arrays: one call per array, never a
//! function call per lookup, so the comparison is loop against loop. Results are hop ids, or
//! [`MISS`] where no route matches.
//!
//! The tables allocate from DPDK's heap, which needs its Environment Abstraction Layer: [`Eal`]
//! starts it once per process on ordinary pages (`--no-huge --no-shconf`: no hugepages to
//! reserve, no shared config files, no PCI scan, no telemetry socket), with one lcore and the
//! calling thread's CPU affinity kept.

use std::ffi::{CString, c_char, c_int};
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// A lookup result for "no route".
pub const MISS: u32 = u32::MAX;
/// Bytes of one DPDK table entry (tbl24 and tbl8 alike, in both tables).
const ENTRY_BYTES: usize = 4;
/// Entries of the first-level table of both tables (indexed by 24 bits).
const TBL24_ENTRIES: usize = 1 << 24;
/// Entries of one second-level group.
const TBL8_ENTRIES: usize = 256;
/// The largest next hop a DPDK table entry can carry in both tables (rte_lpm6's 21 bits).
pub const MAX_HOP: u32 = (1 << 21) - 1;

/// Opaque `struct rte_lpm` and `struct rte_lpm6`.
#[repr(C)]
struct RawLpm {
    _opaque: [u8; 0],
    _not_send: PhantomData<*mut u8>,
}
#[repr(C)]
struct RawLpm6 {
    _opaque: [u8; 0],
    _not_send: PhantomData<*mut u8>,
}

unsafe extern "C" {
    fn ws_eal_init(argc: c_int, argv: *mut *mut c_char) -> c_int;
    fn ws_heap_allocated() -> u64;
    fn ws_last_error() -> c_int;
    fn ws_lpm_create(name: *const c_char, max_rules: u32, tbl8s: u32) -> *mut RawLpm;
    fn ws_lpm_add(lpm: *mut RawLpm, ip: u32, depth: u8, hop: u32) -> c_int;
    fn ws_lpm_free(lpm: *mut RawLpm);
    fn ws_lpm_lookup_each(lpm: *const RawLpm, ips: *const u32, hops: *mut u32, n: usize);
    fn ws_lpm_lookup_bulk(lpm: *const RawLpm, ips: *const u32, hops: *mut u32, n: usize);
    fn ws_lpm6_create(name: *const c_char, max_rules: u32, tbl8s: u32) -> *mut RawLpm6;
    fn ws_lpm6_add(lpm: *mut RawLpm6, ip: *const u8, depth: u8, hop: u32) -> c_int;
    fn ws_lpm6_free(lpm: *mut RawLpm6);
    fn ws_lpm6_lookup_each(lpm: *const RawLpm6, ips: *const [u8; 16], hops: *mut u32, n: usize);
    fn ws_lpm6_lookup_bulk(lpm: *const RawLpm6, ips: *const [u8; 16], hops: *mut u32, n: usize);
}

/// Why DPDK refused something; each says what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LpmError {
    /// `rte_eal_init` failed.
    #[error(
        "DPDK's EAL did not start (rte_eal_init errno {errno}, options {options}): it needs \
         root or CAP_SYS_ADMIN, libdpdk-dev (scripts/setup-debian.sh) and {memory_mib} MiB free"
    )]
    Eal {
        /// rte_errno.
        errno: i32,
        /// The options passed.
        options: String,
        /// The memory asked for.
        memory_mib: u32,
    },
    /// `rte_lpm_create` or `rte_lpm6_create` failed.
    #[error(
        "{table} create ({rules} rules, {tbl8s} tbl8 groups) failed with rte_errno {errno}: \
         start the EAL with more memory (Eal::init)"
    )]
    Create {
        /// rte_lpm or rte_lpm6.
        table: &'static str,
        /// Rules asked for.
        rules: u32,
        /// Groups asked for.
        tbl8s: u32,
        /// rte_errno.
        errno: i32,
    },
    /// `rte_lpm_add` or `rte_lpm6_add` refused a route.
    #[error("{table}: adding route {index} (/{len} -> {hop}) failed with {code}")]
    Add {
        /// rte_lpm or rte_lpm6.
        table: &'static str,
        /// Its index in the routes given.
        index: usize,
        /// Its prefix length.
        len: u8,
        /// Its next hop.
        hop: u32,
        /// The negative errno DPDK returned.
        code: i32,
    },
    /// A next hop beyond [`MAX_HOP`], a prefix longer than the address, or a default route
    /// (DPDK's tables take lengths from 1: a default route is the caller's fallback).
    #[error(
        "route {index}: /{len} -> {hop} is outside DPDK's limits (/1../{max}, hop <= {MAX_HOP})"
    )]
    Route {
        /// Its index in the routes given.
        index: usize,
        /// Its prefix length.
        len: u8,
        /// Its next hop.
        hop: u32,
        /// The address width.
        max: u8,
    },
}

/// Proof that DPDK's EAL runs in this process: tables are created through it.
#[derive(Debug)]
pub struct Eal {
    _started: (),
}

static EAL: OnceLock<Result<Eal, LpmError>> = OnceLock::new();

impl Eal {
    /// Starts the EAL once per process with `memory_mib` MiB of ordinary pages for the tables
    /// (a 1M-route rte_lpm takes about 100, a 200k-route rte_lpm6 a few hundred); every later
    /// call returns the first call's result, whatever `memory_mib` it asks for. Needs root.
    pub fn init(memory_mib: u32) -> Result<&'static Eal, LpmError> {
        EAL.get_or_init(|| start(memory_mib))
            .as_ref()
            .map_err(Clone::clone)
    }
}

fn start(memory_mib: u32) -> Result<Eal, LpmError> {
    let memory = memory_mib.to_string();
    let options = [
        "wirespeed",
        "--no-huge",
        "--no-shconf",
        "--no-pci",
        "--no-telemetry",
        "--log-level=*:error",
        "-m",
        &memory,
    ];
    let owned: Vec<CString> = options
        .iter()
        .map(|o| CString::new(*o).unwrap_or_default())
        .collect();
    let mut argv: Vec<*mut c_char> = owned.iter().map(|o| o.as_ptr().cast_mut()).collect();
    // SAFETY: argv holds `owned.len()` valid NUL-terminated strings that outlive the call
    // (`owned` is alive until the end of this function; EAL copies what it keeps); the shim
    // appends its own options in an array of its own and never writes through these pointers.
    let ret = unsafe { ws_eal_init(argv.len() as c_int, argv.as_mut_ptr()) };
    if ret < 0 {
        return Err(LpmError::Eal {
            errno: -ret,
            options: options[1..].join(" "),
            memory_mib,
        });
    }
    Ok(Eal { _started: () })
}

/// A name no other table of this process has (DPDK refuses a second table of the same name).
fn unique_name(kind: &str) -> CString {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    CString::new(format!("ws{kind}{n}")).unwrap_or_default()
}

fn heap_allocated(_eal: &Eal) -> usize {
    // SAFETY: the EAL runs (an `Eal` exists), which is all the heap statistics need.
    unsafe { ws_heap_allocated() as usize }
}

fn last_error() -> i32 {
    // SAFETY: reads DPDK's per-thread rte_errno; no arguments.
    unsafe { ws_last_error() }
}

/// Refuses the first route DPDK could not hold (`max`: the address width).
fn check_routes<A>(routes: &[(A, u8, u32)], max: u8) -> Result<(), LpmError> {
    for (index, &(_, len, hop)) in routes.iter().enumerate() {
        if len == 0 || len > max || hop > MAX_HOP {
            return Err(LpmError::Route {
                index,
                len,
                hop,
                max,
            });
        }
    }
    Ok(())
}

/// The table `create` returned, or the error naming why DPDK returned none.
fn created<T>(
    raw: *mut T,
    table: &'static str,
    rules: u32,
    tbl8s: u32,
) -> Result<NonNull<T>, LpmError> {
    NonNull::new(raw).ok_or_else(|| LpmError::Create {
        table,
        rules,
        tbl8s,
        errno: last_error(),
    })
}

/// Adds every route with `add` (DPDK's add for one route: 0 or a negative errno), stopping at
/// the first it refuses.
fn add_all<A: Copy>(
    table: &'static str,
    routes: &[(A, u8, u32)],
    mut add: impl FnMut(A, u8, u32) -> c_int,
) -> Result<(), LpmError> {
    for (index, &(addr, len, hop)) in routes.iter().enumerate() {
        let code = add(addr, len, hop);
        if code < 0 {
            return Err(LpmError::Add {
                table,
                index,
                len,
                hop,
                code,
            });
        }
    }
    Ok(())
}

fn mask4(len: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0)
}

fn mask6(len: u8) -> u128 {
    u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0)
}

/// An `rte_lpm` table (IPv4, DIR-24-8 as wirespeed's `Ipv4Fib`).
pub struct Lpm {
    raw: NonNull<RawLpm>,
    tbl8s: u32,
    heap_bytes: usize,
}

impl Lpm {
    /// A table holding `routes` (network address in host order, prefix length 1..=32, next hop),
    /// with exactly as many tbl8 groups as they need (one per /24 that holds a longer prefix), so
    /// its memory is what these routes take. A later duplicate prefix replaces an earlier one.
    pub fn new(eal: &Eal, routes: &[(u32, u8, u32)]) -> Result<Self, LpmError> {
        check_routes(routes, 32)?;
        let mut long: Vec<u32> = routes
            .iter()
            .filter(|r| r.1 > 24)
            .map(|r| r.0 >> 8)
            .collect();
        long.sort_unstable();
        long.dedup();
        let tbl8s = long.len() as u32 + 1;
        let rules = routes.len().max(1) as u32;
        let before = heap_allocated(eal);
        let name = unique_name("lpm");
        // SAFETY: the EAL runs; `name` is a NUL-terminated string DPDK copies.
        let raw = unsafe { ws_lpm_create(name.as_ptr(), rules, tbl8s) };
        let mut lpm = Lpm {
            raw: created(raw, "rte_lpm", rules, tbl8s)?,
            tbl8s,
            heap_bytes: 0,
        };
        add_all("rte_lpm", routes, |addr, len, hop| {
            // SAFETY: `raw` is a live table `lpm` owns; the arguments are plain values.
            unsafe { ws_lpm_add(lpm.raw.as_ptr(), addr & mask4(len), len, hop) }
        })?;
        lpm.heap_bytes = heap_allocated(eal).saturating_sub(before);
        Ok(lpm)
    }

    /// Looks up `addrs[i]` (host order) into `hops[i]`, one `rte_lpm_lookup` each, for `i` below
    /// the shorter length.
    pub fn lookup_each(&self, addrs: &[u32], hops: &mut [u32]) {
        let n = addrs.len().min(hops.len());
        // SAFETY: both arrays hold at least `n` elements; the table is alive and only read.
        unsafe { ws_lpm_lookup_each(self.raw.as_ptr(), addrs.as_ptr(), hops.as_mut_ptr(), n) }
    }

    /// [`Lpm::lookup_each`] with `rte_lpm_lookup_bulk`, 32 addresses per call.
    pub fn lookup_bulk(&self, addrs: &[u32], hops: &mut [u32]) {
        let n = addrs.len().min(hops.len());
        // SAFETY: as in `lookup_each`.
        unsafe { ws_lpm_lookup_bulk(self.raw.as_ptr(), addrs.as_ptr(), hops.as_mut_ptr(), n) }
    }

    /// Bytes of the arrays lookups read: tbl24 and the tbl8 groups.
    pub fn memory_bytes(&self) -> usize {
        (TBL24_ENTRIES + self.tbl8s as usize * TBL8_ENTRIES) * ENTRY_BYTES
    }

    /// Bytes the table took from DPDK's heap: the lookup arrays and the rules (the heap's
    /// growth while it was built: exact when no other thread of the process builds or frees a
    /// table meanwhile, as in `bench fib --against`).
    pub fn heap_bytes(&self) -> usize {
        self.heap_bytes
    }
}

impl Drop for Lpm {
    fn drop(&mut self) {
        // SAFETY: `raw` came from rte_lpm_create, is owned by this value and freed once here.
        unsafe { ws_lpm_free(self.raw.as_ptr()) }
    }
}

/// An `rte_lpm6` table (IPv6: a 24-bit first level, then 8 bits per level).
pub struct Lpm6 {
    raw: NonNull<RawLpm6>,
    tbl8s: u32,
    heap_bytes: usize,
}

impl Lpm6 {
    /// The tbl8 groups `routes` need: one per distinct node of the trie, that is per distinct
    /// (level, leading bits) at depths 24, 32, ... shorter than some route.
    fn groups_needed(routes: &[(u128, u8, u32)]) -> u32 {
        let mut nodes: Vec<(u8, u128)> = Vec::new();
        for &(addr, len, _) in routes {
            let mut depth = 24;
            while depth < len {
                nodes.push((depth, addr & mask6(depth)));
                depth += 8;
            }
        }
        nodes.sort_unstable();
        nodes.dedup();
        nodes.len() as u32
    }

    /// A table holding `routes` (network address in host order, prefix length 1..=128, next hop),
    /// with the tbl8 groups they need and a little more. A later duplicate prefix replaces an earlier
    /// one.
    pub fn new(eal: &Eal, routes: &[(u128, u8, u32)]) -> Result<Self, LpmError> {
        check_routes(routes, 128)?;
        let needed = Self::groups_needed(routes);
        let tbl8s = needed + needed / 16 + 16;
        let rules = routes.len().max(1) as u32;
        let before = heap_allocated(eal);
        let name = unique_name("lpm6_");
        // SAFETY: the EAL runs; `name` is a NUL-terminated string DPDK copies.
        let raw = unsafe { ws_lpm6_create(name.as_ptr(), rules, tbl8s) };
        let mut lpm = Lpm6 {
            raw: created(raw, "rte_lpm6", rules, tbl8s)?,
            tbl8s,
            heap_bytes: 0,
        };
        add_all("rte_lpm6", routes, |addr, len, hop| {
            let bytes = (addr & mask6(len)).to_be_bytes();
            // SAFETY: `raw` is a live table `lpm` owns; `bytes` is 16 readable bytes.
            unsafe { ws_lpm6_add(lpm.raw.as_ptr(), bytes.as_ptr(), len, hop) }
        })?;
        lpm.heap_bytes = heap_allocated(eal).saturating_sub(before);
        Ok(lpm)
    }

    /// Looks up `addrs[i]` (16 bytes in network order, as in a packet) into `hops[i]`, one
    /// `rte_lpm6_lookup` each, for `i` below the shorter length.
    pub fn lookup_each(&self, addrs: &[[u8; 16]], hops: &mut [u32]) {
        let n = addrs.len().min(hops.len());
        // SAFETY: both arrays hold at least `n` elements; the table is alive and only read.
        unsafe { ws_lpm6_lookup_each(self.raw.as_ptr(), addrs.as_ptr(), hops.as_mut_ptr(), n) }
    }

    /// [`Lpm6::lookup_each`] with `rte_lpm6_lookup_bulk_func`, 32 addresses per call.
    pub fn lookup_bulk(&self, addrs: &[[u8; 16]], hops: &mut [u32]) {
        let n = addrs.len().min(hops.len());
        // SAFETY: as in `lookup_each`.
        unsafe { ws_lpm6_lookup_bulk(self.raw.as_ptr(), addrs.as_ptr(), hops.as_mut_ptr(), n) }
    }

    /// Bytes of the arrays lookups read: tbl24 and the tbl8 groups reserved.
    pub fn memory_bytes(&self) -> usize {
        (TBL24_ENTRIES + self.tbl8s as usize * TBL8_ENTRIES) * ENTRY_BYTES
    }

    /// Bytes the table took from DPDK's heap: the lookup arrays and the rules (the heap's
    /// growth while it was built: exact when no other thread of the process builds or frees a
    /// table meanwhile, as in `bench fib --against`).
    pub fn heap_bytes(&self) -> usize {
        self.heap_bytes
    }
}

impl Drop for Lpm6 {
    fn drop(&mut self) {
        // SAFETY: `raw` came from rte_lpm6_create, is owned by this value and freed once here.
        unsafe { ws_lpm6_free(self.raw.as_ptr()) }
    }
}
