//! The router's hand on the kernel's routing maps ([`RouterMirror`]): the IPv4 routes
//! (DIR-24-8 arrays, [`KernelRoutes4`]) and `routes6` (an LPM trie), every route with its hop
//! id; `adjacencies` (hop id -> the rewrite of a resolved gateway) and `routes_ready` (whether
//! the kernel's routes equal the router's FIBs).
//!
//! A single route change (`ctl route add/del`) and every rewrite change are written at once on
//! the worker's thread, so they are in the kernel before the command's reply: one `bpf(2)` call
//! per change, none per packet. A bulk replacement (the configuration's routes, `ctl route
//! load` of a million) is not: writing a million entries takes seconds, which the worker must
//! not spend. The worker only lists the routes (one pass over its FIB: with a million, the
//! longest gap in forwarding the lab test saw was 17–70 ms in a debug build), closes
//! `routes_ready` (one call; from then on every routed frame goes to user space, which has the
//! new routes: no frame is forwarded by a stale route), then hands the routes to the mirror's
//! own thread, which writes them, deletes the routes they replace, and opens `routes_ready`
//! again once no other replacement is waiting. Changes made while one is waiting follow it
//! through the thread, in order. A router that gains an ACL (which only user space applies)
//! closes `routes_ready` for good.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use aya::maps::lpm_trie::{Key, LpmTrie};
use aya::maps::{Array, HashMap as BpfHashMap, MapData};
use wirespeed_dataplane::app::router::Prefix;
use wirespeed_dataplane::app::router_mirror::{GatewayRewrite, RouteSync, RouteTarget};

use crate::FastPathError;
use crate::dir24::KernelRoutes4;
use crate::maps::{self, AdjacencyEntry};

/// The kernel's two route tables, as one thread (the worker's, or the mirror's own) reaches
/// them: the IPv4 arrays are shared (their lock is taken on changes only, and by one side at
/// a time: the worker writes while no replacement waits, the thread while one does), the
/// IPv6 trie is a handle of each side's own.
pub(crate) struct Tries {
    pub(crate) v4: Arc<Mutex<KernelRoutes4>>,
    pub(crate) v6: LpmTrie<MapData, [u8; 16], u32>,
}

impl Tries {
    /// Sets the route; false when the kernel's table could not take it.
    fn insert(&mut self, prefix: Prefix, value: u32) -> bool {
        match prefix {
            Prefix::V4(p) => self.v4().insert(p, value),
            Prefix::V6(p) => self
                .v6
                .insert(&Key::new(p.len().into(), p.addr().to_be_bytes()), value, 0)
                .is_ok(),
        }
    }

    /// Removes the route for exactly `prefix`; absent already is fine (the kernel refused it).
    fn remove(&mut self, prefix: Prefix) {
        match prefix {
            Prefix::V4(p) => self.v4().remove(p),
            Prefix::V6(p) => {
                let _ = self
                    .v6
                    .remove(&Key::new(p.len().into(), p.addr().to_be_bytes()));
            }
        }
    }

    fn v4(&self) -> std::sync::MutexGuard<'_, KernelRoutes4> {
        self.v4.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The kernel's value for `target`.
fn value(target: RouteTarget) -> u32 {
    match target {
        RouteTarget::Hop(id) => id,
        RouteTarget::Local => maps::ROUTE_LOCAL,
        RouteTarget::Ecmp => maps::ROUTE_ECMP,
    }
}

/// Work for the mirror's thread, in the order the router made the changes.
enum Job {
    /// Every route replaced by these.
    Replace(Vec<(Prefix, u32)>),
    /// One route set (`Some`) or removed (`None`); `written`: the worker wrote it already and
    /// the thread only notes it.
    One {
        prefix: Prefix,
        value: Option<u32>,
        written: bool,
    },
}

/// What the worker and the thread share, under a lock taken only on changes.
struct Gate {
    /// Replacements handed to the thread and not finished.
    pending: u32,
    /// The kernel refused a route (its map is full): a longest match there could pick a
    /// shorter prefix than user space, so `routes_ready` stays closed until a replacement fits
    /// and the router stays on the user-space path (counted in `refused`).
    broken: bool,
    /// The router stopped mirroring (it has an ACL): `routes_ready` stays closed for good.
    stopped: bool,
    routes_ready: Array<MapData, u32>,
}

impl Gate {
    /// Closes `routes_ready`, or opens it when no replacement waits and no route was refused.
    fn update(&mut self, refused: &AtomicU64) {
        let ready = self.pending == 0 && !self.broken && !self.stopped;
        if self.routes_ready.set(0, u32::from(ready), 0).is_err() {
            refused.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A route the kernel refused: closes the gate for good.
    fn refuse(&mut self, refused: &AtomicU64) {
        refused.fetch_add(1, Ordering::Relaxed);
        self.broken = true;
        self.update(refused);
    }
}

/// See the module documentation.
pub struct RouterMirror {
    routes: Tries,
    adjacencies: BpfHashMap<MapData, u32, AdjacencyEntry>,
    /// Ports of the switch: a rewrite to a port beyond them is not written.
    slots: usize,
    /// The rewrites in the kernel, by hop id.
    installed: HashMap<u32, AdjacencyEntry>,
    gate: Arc<Mutex<Gate>>,
    /// `None` once dropped (so that `drop` can close the channel before joining).
    jobs: Option<Sender<Job>>,
    thread: Option<JoinHandle<()>>,
    /// Set when the mirror is dropped: the thread leaves a replacement half written (the
    /// program goes with the switch) instead of holding the switch's exit for seconds.
    stop: Arc<AtomicBool>,
    /// Entries the kernel refused (a full map), by the worker or the thread.
    refused: Arc<AtomicU64>,
}

impl fmt::Debug for RouterMirror {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RouterMirror")
            .field("adjacencies", &self.installed.len())
            .field("refused", &self.refused.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl RouterMirror {
    /// A mirror writing through `routes` (the worker's handles), `thread_routes` (the
    /// thread's), `adjacencies` and `routes_ready`, for a switch of `slots` ports.
    pub(crate) fn new(
        routes: Tries,
        thread_routes: Tries,
        adjacencies: BpfHashMap<MapData, u32, AdjacencyEntry>,
        routes_ready: Array<MapData, u32>,
        slots: usize,
    ) -> Result<RouterMirror, FastPathError> {
        let gate = Arc::new(Mutex::new(Gate {
            pending: 0,
            broken: false,
            stopped: false,
            routes_ready,
        }));
        let refused = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (jobs, receiver) = channel();
        let thread = {
            let gate = Arc::clone(&gate);
            let refused = Arc::clone(&refused);
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("fast-path-routes".into())
                .spawn(move || run(thread_routes, receiver, &gate, &refused, &stop))
                .map_err(|source| FastPathError::Thread { source })?
        };
        Ok(RouterMirror {
            routes,
            adjacencies,
            slots,
            installed: HashMap::new(),
            gate,
            jobs: Some(jobs),
            thread: Some(thread),
            stop,
            refused,
        })
    }

    /// One route set or removed: written now unless a replacement is waiting, then after it.
    fn one(&mut self, prefix: Prefix, value: Option<u32>) {
        let mut gate = self.gate.lock().unwrap_or_else(PoisonError::into_inner);
        let written = gate.pending == 0;
        if written {
            let taken = match value {
                Some(value) => self.routes.insert(prefix, value),
                None => {
                    self.routes.remove(prefix);
                    true
                }
            };
            if !taken {
                gate.refuse(&self.refused);
            }
        }
        self.send(Job::One {
            prefix,
            value,
            written,
        });
        drop(gate);
    }

    fn send(&self, job: Job) {
        // The thread ends only when the sender is dropped, so a send cannot fail.
        if let Some(jobs) = &self.jobs {
            let _ = jobs.send(job);
        }
    }
}

impl RouteSync for RouterMirror {
    fn route_set(&mut self, prefix: Prefix, target: RouteTarget) {
        self.one(prefix, Some(value(target)));
    }

    fn route_removed(&mut self, prefix: Prefix) {
        self.one(prefix, None);
    }

    fn routes_replaced(&mut self, routes: Vec<(Prefix, RouteTarget)>) {
        let routes = routes
            .into_iter()
            .map(|(prefix, target)| (prefix, value(target)))
            .collect();
        let mut gate = self.gate.lock().unwrap_or_else(PoisonError::into_inner);
        gate.pending += 1;
        gate.update(&self.refused);
        self.send(Job::Replace(routes));
        drop(gate);
    }

    fn rewrites(&mut self, rewrites: &[GatewayRewrite]) {
        let wanted: HashMap<u32, AdjacencyEntry> = rewrites
            .iter()
            .filter(|rewrite| usize::from(rewrite.port) < self.slots)
            .map(|rewrite| {
                let entry = AdjacencyEntry {
                    slot: u32::from(rewrite.port),
                    dst: rewrite.dst.0,
                    src: rewrite.src.0,
                };
                (rewrite.hop, entry)
            })
            .collect();
        // Removals first: a hop never forwards by a rewrite user space no longer has.
        let gone: Vec<u32> = self
            .installed
            .keys()
            .filter(|hop| !wanted.contains_key(hop))
            .copied()
            .collect();
        for hop in gone {
            let _ = self.adjacencies.remove(&hop);
            self.installed.remove(&hop);
        }
        for (hop, entry) in wanted {
            if self.installed.get(&hop) == Some(&entry) {
                continue;
            }
            if self.adjacencies.insert(hop, entry, 0).is_ok() {
                self.installed.insert(hop, entry);
            } else {
                self.refused.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn stop_forwarding(&mut self) {
        let mut gate = self.gate.lock().unwrap_or_else(PoisonError::into_inner);
        gate.stopped = true;
        gate.update(&self.refused);
    }

    fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

/// How long dropping the mirror waits for its thread: one step of a replacement (building a
/// million routes' IPv4 table) cannot be cut short and takes seconds in a debug build or on a
/// loaded machine, and a switch that stops must not wait for it.
const STOP_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

impl Drop for RouterMirror {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            let deadline = std::time::Instant::now() + STOP_WAIT;
            while !thread.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            // Still busy: left to end on its own (it returns at its next check of `stop`, or
            // when the process exits); it only writes the kernel's maps, which die with the
            // program once nothing holds them.
            if thread.is_finished() {
                let _ = thread.join();
            }
        }
    }
}

/// The mirror's thread: applies the jobs in order, keeping the set of routes in the kernel so
/// that a replacement deletes exactly the routes it does not keep.
fn run(
    mut routes: Tries,
    jobs: Receiver<Job>,
    gate: &Mutex<Gate>,
    refused: &AtomicU64,
    stop: &AtomicBool,
) {
    let mut installed: HashSet<Prefix> = HashSet::new();
    let lock = || gate.lock().unwrap_or_else(PoisonError::into_inner);
    for job in jobs {
        match job {
            Job::One {
                prefix,
                value,
                written,
            } => {
                let taken = match (value, written) {
                    (_, true) => true,
                    (Some(value), false) => routes.insert(prefix, value),
                    (None, false) => {
                        routes.remove(prefix);
                        true
                    }
                };
                // Only the IPv6 routes are listed: a replacement rebuilds the IPv4 table whole.
                let v6 = matches!(prefix, Prefix::V6(_));
                match (value, taken) {
                    (_, false) => lock().refuse(refused),
                    (Some(_), true) if v6 => {
                        installed.insert(prefix);
                    }
                    (None, true) if v6 => {
                        installed.remove(&prefix);
                    }
                    _ => {}
                }
            }
            Job::Replace(new) => {
                // IPv4 whole, built and copied at once; IPv6 route by route into its trie.
                let v4: Vec<_> = new
                    .iter()
                    .filter_map(|&(prefix, value)| match prefix {
                        Prefix::V4(p) => Some((p, value)),
                        Prefix::V6(_) => None,
                    })
                    .collect();
                let mut failed = !routes.v4().replace(&v4);
                let mut kept = HashSet::with_capacity(new.len() - v4.len());
                for (prefix, value) in new {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    if matches!(prefix, Prefix::V4(_)) {
                        continue;
                    }
                    if routes.insert(prefix, value) {
                        kept.insert(prefix);
                    } else {
                        failed = true;
                    }
                }
                for prefix in installed.difference(&kept) {
                    routes.remove(*prefix);
                }
                installed = kept;
                let mut gate = lock();
                gate.pending = gate.pending.saturating_sub(1);
                if failed {
                    gate.refuse(refused);
                } else {
                    // The kernel's routes are the router's again.
                    gate.broken = false;
                    gate.update(refused);
                }
            }
        }
    }
}
