//! The XDP fast path: the kernel forwards what user space has decided.
//!
//! On veth, in containers and on every NIC without zero-copy AF_XDP, the kernel copies each
//! frame into and out of the UMEM, and that copy, not wirespeed's pipeline, limits an AF_XDP
//! forwarder. So the decisions user space has already made are also written into BPF maps, and
//! one XDP program (`bpf/fast_path.c`, compiled with `clang -target bpf` by this crate's build
//! script and loaded with aya) applies them to the traffic it knows, redirecting each frame
//! straight to its output interface; every other frame goes to the port's AF_XDP socket, where
//! the whole pipeline runs as before. User space stays the owner of every table: the program
//! only reads the maps and counts.
//!
//! What the kernel forwards, per app:
//! * cross-connect: every frame, to its port's peer;
//! * bridge: a known unicast destination (MAC and VLAN) from a source known on the very port it
//!   arrived on, with the tag pushed or popped for the output port. Unknown or moved sources
//!   (learning), unknown destinations, broadcast and multicast, priority tags and every other
//!   VLAN case go to user space, which learns, ages and floods as before and mirrors its MAC
//!   table into the kernel's ([`MacMirror`]);
//! * router: the frames its user-space forwarding loop would forward through a resolved
//!   gateway (plain UDP or TCP over IPv4 without options and a valid checksum, or over IPv6
//!   without extension headers; TTL or hop limit above 1, no martian address, a route to one
//!   gateway whose neighbour is resolved), rewritten the same way. ARP and NDP, tagged frames,
//!   packets for the router, TTL expiry, no route, unresolved neighbours, ECMP and every
//!   malformed case go to user space, which mirrors its FIBs and its gateways' rewrites into
//!   the kernel's maps ([`RouterMirror`]);
//! * openflow: the flows of the app's exact-match cache whose actions the kernel can apply (one
//!   output, or none: a drop; after MAC, IP address and TCP/UDP port rewrites with their
//!   checksums, a TTL decrement and an 802.1Q tag pushed, popped or given a new id), for
//!   plain UDP and TCP over IPv4 or IPv6, untagged or behind one 802.1Q tag; misses, other
//!   frames and every other action go to user space, which fills the kernel's cache as its
//!   own fills and counts what the kernel forwarded or dropped per flow ([`FlowMirror`]).
//!
//! One [`FastPath`] serves a switch: one program attached to every port's interface. Each port
//! is a *slot* (its index in the configuration); the [`XdpAttachment`] of slot *s* puts its
//! sockets into slots `s * QUEUES_PER_PORT + queue` of the program's XSKMAP, so the AF_XDP
//! ports open on it exactly as on an attachment of their own.

mod dir24;
mod flows;
mod maps;
mod router;

use std::fmt;
use std::os::fd::AsFd;
use std::sync::{Arc, Mutex};

use aya::maps::lpm_trie::LpmTrie;
use aya::maps::{Array, DevMap, HashMap, Map, MapData, PerCpuArray};
use aya::programs::{ProgramError, Xdp};
use aya::{Ebpf, EbpfLoader};
use wirespeed_dataplane::table::mac::{MacKey as SyncedKey, MacSync};
use wirespeed_io::afxdp::{AfXdpError, XdpAttachment, XdpMode, interface_index, verifier_refusal};

use dir24::KernelRoutes4;
pub use flows::FlowMirror;
pub use maps::{Count, MAX_PORTS, QUEUES_PER_PORT};
use maps::{Counts, MacEntry, MacKey, PortEntry};
pub use router::RouterMirror;
use router::Tries;

/// The compiled program (see the build script).
static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/fast_path.o"));

/// The program's name in the object (its function's).
const PROGRAM: &str = "fast_path";

/// What the kernel does with one port's frames.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortPlan {
    /// Every frame leaves by the port of slot `peer`.
    Xconnect { peer: u16 },
    /// The bridge's known unicast is forwarded; the port's VLAN setting as the bridge has it.
    Bridge(BridgeVlan),
    /// IP routed through a resolved gateway is forwarded (the router, one worker).
    Router,
    /// The flows of the openflow app's cache the kernel can apply are forwarded (one worker).
    OpenFlow,
    /// Every frame goes to user space.
    User,
}

/// The sizes of the kernel's tables, set at load time.
#[derive(Clone, Copy, Debug)]
pub struct Capacity {
    /// Entries of the bridge's MAC table.
    pub macs: u32,
    /// Routes of the router's IPv6 table (an LPM trie, allocated as it fills). The IPv4
    /// table is DIR-24-8 arrays of fixed size (`dir24::TBL8_GROUPS` groups for routes longer
    /// than /24).
    pub routes: u32,
    /// Entries of the openflow app's flow cache in the kernel (an LRU map).
    pub flows: u32,
    /// Stored results the openflow app keeps (its megaflows): the kernel counts per result.
    pub flow_results: u32,
}

/// A bridge port's VLAN setting, as the kernel needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BridgeVlan {
    /// Untagged frames belong to this VLAN and leave untagged.
    Access(u16),
    /// Tagged frames of `allowed`; untagged ones belong to `native`, if any.
    Trunk {
        allowed: Vec<u16>,
        native: Option<u16>,
    },
}

/// One port of the switch: its interface and what the kernel does with its frames.
#[derive(Clone, Debug)]
pub struct PortSpec {
    /// The port's name in the configuration (for messages).
    pub name: String,
    /// The interface, in the calling thread's network namespace.
    pub interface: String,
    pub plan: PortPlan,
    /// How the program is attached to the interface.
    pub mode: XdpMode,
}

/// Why the fast path could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum FastPathError {
    #[error(
        "the XDP fast path takes at most {MAX_PORTS} ports; this switch has {0}: set \
         fast_path = \"off\""
    )]
    TooManyPorts(usize),
    #[error("port {port}: interface {interface}: {source}")]
    NoInterface {
        port: String,
        interface: String,
        source: AfXdpError,
    },
    #[error(
        "port {port}: {interface} has {queues} queues; the fast path serves at most \
         {QUEUES_PER_PORT} per port: reduce them (`ethtool -L {interface} combined \
         {QUEUES_PER_PORT}`) or set fast_path = \"off\""
    )]
    TooManyQueues {
        port: String,
        interface: String,
        queues: u16,
    },
    #[error(
        "port {port}: interface {interface} has index {index}; the fast path's port table \
         covers indexes below {}: set fast_path = \"off\"",
        maps::MAX_IFINDEX
    )]
    IfindexTooLarge {
        port: String,
        interface: String,
        index: u32,
    },
    #[error("the kernel refused the fast path's maps: {0}")]
    Load(#[source] aya::EbpfError),
    #[error("the kernel's verifier refused the fast path program {PROGRAM}: {reason}")]
    Verifier { reason: String },
    #[error("the fast path's map {map}: {source}")]
    Map {
        map: &'static str,
        source: aya::maps::MapError,
    },
    #[error(
        "cannot map the fast path's {map} array into this process: {source}; the kernel needs \
         BPF_F_MMAPABLE arrays (Linux 5.5 or later)"
    )]
    Mapping {
        map: &'static str,
        source: std::io::Error,
    },
    #[error("the fast path's map tx_ports: {0}")]
    DevMap(#[source] aya::maps::xdp::XdpMapError),
    #[error("the fast path's object is not as this build expects: map {map} {what}")]
    ObjectMap {
        map: &'static str,
        what: &'static str,
    },
    #[error(transparent)]
    Attach(#[from] AfXdpError),
    #[error("cannot start the thread that mirrors route loads into the kernel: {source}")]
    Thread { source: std::io::Error },
}

/// The program, its maps, and its attachment to every port's interface. Dropping it detaches
/// the program from every interface (once the ports opened on the attachments are gone too).
pub struct FastPath {
    /// Keeps the program and the maps it did not hand out.
    _ebpf: Ebpf,
    /// Index = slot.
    attachments: Vec<Arc<XdpAttachment>>,
    plans: Vec<PortPlan>,
    names: Vec<String>,
    ifindexes: Vec<u32>,
    counters: PerCpuArray<MapData, Counts>,
    macs: MapData,
    /// The IPv4 routes' arrays (mapped by the router's mirror).
    tbl24: MapData,
    tbl8: MapData,
    routes6: MapData,
    adjacencies: MapData,
    routes_ready: MapData,
    flows: MapData,
    flow_generation: MapData,
    flow_counts: MapData,
    flow_results: u32,
}

impl fmt::Debug for FastPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FastPath")
            .field("ports", &self.names)
            .field("plans", &self.plans)
            .finish_non_exhaustive()
    }
}

impl FastPath {
    /// Loads the program with tables of `capacity`, fills the port maps from `ports` (slot =
    /// position), and attaches the program to every port's interface.
    pub fn attach(ports: &[PortSpec], capacity: Capacity) -> Result<FastPath, FastPathError> {
        if ports.len() > MAX_PORTS {
            return Err(FastPathError::TooManyPorts(ports.len()));
        }
        let ifindexes = ports
            .iter()
            .map(|port| {
                let index = interface_index(&port.interface).map_err(|source| {
                    FastPathError::NoInterface {
                        port: port.name.clone(),
                        interface: port.interface.clone(),
                        source,
                    }
                })?;
                if index >= maps::MAX_IFINDEX {
                    return Err(FastPathError::IfindexTooLarge {
                        port: port.name.clone(),
                        interface: port.interface.clone(),
                        index,
                    });
                }
                Ok(index)
            })
            .collect::<Result<Vec<u32>, _>>()?;
        // The IPv4 arrays take memory when made (96 MiB): only a router gets them whole.
        let routes = ports.iter().any(|port| port.plan == PortPlan::Router);
        let (tbl24_blocks, tbl8_groups) = if routes {
            (maps::TBL24_BLOCKS, dir24::TBL8_GROUPS)
        } else {
            (1, 1)
        };
        let mut ebpf = EbpfLoader::new()
            .map_max_entries("macs", capacity.macs.max(1))
            .map_max_entries("tbl24", tbl24_blocks)
            .map_max_entries("tbl8", tbl8_groups)
            .map_max_entries("routes6", capacity.routes.max(1))
            .map_max_entries("flows", capacity.flows.max(1))
            .map_max_entries("flow_counts", capacity.flow_results.max(1))
            .load(OBJECT)
            .map_err(FastPathError::Load)?;
        let program: &mut Xdp = ebpf
            .program_mut(PROGRAM)
            .and_then(|program| program.try_into().ok())
            .ok_or(FastPathError::Verifier {
                reason: format!("the object has no XDP program {PROGRAM}"),
            })?;
        program.load().map_err(verifier_error)?;
        let program_fd = program
            .fd()
            .map_err(verifier_error)?
            .as_fd()
            .try_clone_to_owned()
            .map_err(|error| FastPathError::Verifier {
                reason: format!("duplicating the program's descriptor: {error}"),
            })?;

        // The maps first, so that the program finds every port from its first frame.
        let map = |ebpf: &mut Ebpf, name: &'static str| -> Result<Map, FastPathError> {
            ebpf.take_map(name).ok_or(FastPathError::ObjectMap {
                map: name,
                what: "is missing from the object",
            })
        };
        let map_error = |map: &'static str| move |source| FastPathError::Map { map, source };
        let mut tx_ports =
            DevMap::try_from(map(&mut ebpf, "tx_ports")?).map_err(map_error("tx_ports"))?;
        let mut port_map: Array<_, PortEntry> =
            Array::try_from(map(&mut ebpf, "ports")?).map_err(map_error("ports"))?;
        let mut trunk_vlans: Array<_, u64> =
            Array::try_from(map(&mut ebpf, "trunk_vlans")?).map_err(map_error("trunk_vlans"))?;
        for (slot, (port, &ifindex)) in ports.iter().zip(&ifindexes).enumerate() {
            let slot = slot as u32;
            tx_ports
                .set(slot, ifindex, None, 0)
                .map_err(FastPathError::DevMap)?;
            let entry = port_entry(slot, &port.plan);
            if let PortPlan::Bridge(BridgeVlan::Trunk { allowed, .. }) = &port.plan {
                let mut words = [0u64; 64];
                for &vlan in allowed {
                    words[usize::from(vlan / 64) % 64] |= 1 << (vlan % 64);
                }
                for (word, bits) in words.iter().enumerate() {
                    trunk_vlans
                        .set(slot * 64 + word as u32, bits, 0)
                        .map_err(map_error("trunk_vlans"))?;
                }
            }
            port_map
                .set(ifindex, entry, 0)
                .map_err(map_error("ports"))?;
        }
        let counters =
            PerCpuArray::try_from(map(&mut ebpf, "counters")?).map_err(map_error("counters"))?;
        let Map::HashMap(macs) = map(&mut ebpf, "macs")? else {
            return Err(FastPathError::ObjectMap {
                map: "macs",
                what: "is not a hash map",
            });
        };
        let tbl24 = map_data(map(&mut ebpf, "tbl24")?, "tbl24")?;
        let tbl8 = map_data(map(&mut ebpf, "tbl8")?, "tbl8")?;
        let routes6 = map_data(map(&mut ebpf, "routes6")?, "routes6")?;
        let adjacencies = map_data(map(&mut ebpf, "adjacencies")?, "adjacencies")?;
        let routes_ready = map_data(map(&mut ebpf, "routes_ready")?, "routes_ready")?;
        let flows = map_data(map(&mut ebpf, "flows")?, "flows")?;
        let flow_generation = map_data(map(&mut ebpf, "flow_generation")?, "flow_generation")?;
        let flow_counts = map_data(map(&mut ebpf, "flow_counts")?, "flow_counts")?;
        let Some(Map::XskMap(xsks)) = ebpf.map("xsks") else {
            return Err(FastPathError::ObjectMap {
                map: "xsks",
                what: "is missing or not an XSKMAP",
            });
        };
        let xsks_fd = xsks.fd().as_fd();

        let mut attachments = Vec::with_capacity(ports.len());
        for (slot, port) in ports.iter().enumerate() {
            let attachment = XdpAttachment::attach_loaded(
                &port.interface,
                program_fd.as_fd(),
                xsks_fd,
                slot as u32 * QUEUES_PER_PORT,
                port.mode,
            )?;
            if u32::from(attachment.queues()) > QUEUES_PER_PORT {
                return Err(FastPathError::TooManyQueues {
                    port: port.name.clone(),
                    interface: port.interface.clone(),
                    queues: attachment.queues(),
                });
            }
            attachments.push(Arc::new(attachment));
        }
        drop(program_fd);
        Ok(FastPath {
            _ebpf: ebpf,
            attachments,
            plans: ports.iter().map(|port| port.plan.clone()).collect(),
            names: ports.iter().map(|port| port.name.clone()).collect(),
            ifindexes,
            counters,
            macs,
            tbl24,
            tbl8,
            routes6,
            adjacencies,
            routes_ready,
            flows,
            flow_generation,
            flow_counts,
            flow_results: capacity.flow_results.max(1),
        })
    }

    /// The attachment of the port in `slot`, on which its AF_XDP ports open
    /// ([`AfXdpPort::open_shared`](wirespeed_io::afxdp::AfXdpPort::open_shared)).
    pub fn attachment(&self, slot: usize) -> Option<&Arc<XdpAttachment>> {
        self.attachments.get(slot)
    }

    /// What the kernel does with the frames of the port in `slot`.
    pub fn plan(&self, slot: usize) -> Option<&PortPlan> {
        self.plans.get(slot)
    }

    /// A handle through which a bridge keeps the kernel's MAC table equal to its own.
    pub fn mac_mirror(&self) -> Result<MacMirror, FastPathError> {
        let data = duplicate(&self.macs, "macs")?;
        let map = HashMap::try_from(Map::HashMap(data)).map_err(|source| FastPathError::Map {
            map: "macs",
            source,
        })?;
        Ok(MacMirror {
            map,
            ifindexes: self.ifindexes.clone(),
            refused: 0,
        })
    }

    /// A handle through which a router keeps the kernel's routes and gateway rewrites equal to
    /// its own (one router: the fast path serves a router of one worker).
    pub fn router_mirror(&self) -> Result<RouterMirror, FastPathError> {
        let error = |map: &'static str| move |source| FastPathError::Map { map, source };
        let v4 =
            KernelRoutes4::map(&self.tbl24, &self.tbl8, dir24::TBL8_GROUPS).map_err(|source| {
                FastPathError::Mapping {
                    map: "tbl24",
                    source,
                }
            })?;
        let v4 = Arc::new(Mutex::new(v4));
        let routes = || -> Result<Tries, FastPathError> {
            Ok(Tries {
                v4: Arc::clone(&v4),
                v6: LpmTrie::try_from(Map::LpmTrie(duplicate(&self.routes6, "routes6")?))
                    .map_err(error("routes6"))?,
            })
        };
        let adjacencies =
            HashMap::try_from(Map::HashMap(duplicate(&self.adjacencies, "adjacencies")?))
                .map_err(error("adjacencies"))?;
        let ready = Array::try_from(Map::Array(duplicate(&self.routes_ready, "routes_ready")?))
            .map_err(error("routes_ready"))?;
        RouterMirror::new(routes()?, routes()?, adjacencies, ready, self.names.len())
    }

    /// A handle through which the openflow app keeps the kernel's flow cache a part of its
    /// own (one app: the fast path serves an openflow app of one worker).
    pub fn flow_mirror(&self) -> Result<FlowMirror, FastPathError> {
        let error = |map: &'static str| move |source| FastPathError::Map { map, source };
        let flows = HashMap::try_from(Map::LruHashMap(duplicate(&self.flows, "flows")?))
            .map_err(error("flows"))?;
        let generation = Array::try_from(Map::Array(duplicate(
            &self.flow_generation,
            "flow_generation",
        )?))
        .map_err(error("flow_generation"))?;
        FlowMirror::new(
            flows,
            generation,
            &self.flow_counts,
            self.flow_results,
            self.names.len(),
        )
    }

    /// Whether the kernel forwards by the router's routes (the router's mirror opens the
    /// `routes_ready` gate once a loaded table is written in full and no route was refused;
    /// until then every routed frame goes to user space); `None` where no port routes. A
    /// benchmark waits for it after a bulk load, or it would measure the user-space path.
    pub fn routes_ready(&self) -> Option<bool> {
        if !self.plans.contains(&PortPlan::Router) {
            return None;
        }
        let ready = duplicate(&self.routes_ready, "routes_ready")
            .ok()
            .and_then(|map| Array::<MapData, u32>::try_from(Map::Array(map)).ok());
        Some(ready.is_some_and(|ready| matches!(ready.get(&0, 0), Ok(1))))
    }

    /// Every port's counters, summed over the CPUs, index = slot.
    pub fn counters(&self) -> Vec<PortCounters> {
        let slots = self.names.len();
        let mut ports = vec![PortCounters::default(); slots];
        for slot in 0..slots {
            let Ok(per_cpu) = self.counters.get(&(slot as u32), 0) else {
                continue;
            };
            for counts in per_cpu.iter() {
                for (reason, count) in counts.to_user.iter().enumerate() {
                    ports[slot].to_user[reason].add(*count);
                }
                for (out, count) in counts.forwarded.iter().enumerate().take(slots) {
                    ports[slot].rx_forwarded.add(*count);
                    ports[out].tx_forwarded.add(*count);
                }
                ports[slot].dropped.add(counts.dropped);
            }
        }
        ports
    }

    /// The ports' names, index = slot.
    pub fn port_names(&self) -> &[String] {
        &self.names
    }
}

/// The data of a map the object declares (the loader hands every map out as an enum).
fn map_data(map: Map, name: &'static str) -> Result<MapData, FastPathError> {
    match map {
        Map::LpmTrie(data) | Map::HashMap(data) | Map::LruHashMap(data) | Map::Array(data) => {
            Ok(data)
        }
        _ => Err(FastPathError::ObjectMap {
            map: name,
            what: "is not of the type the program declares",
        }),
    }
}

/// A second handle on `map` (its descriptor duplicated), for a mirror that writes it.
fn duplicate(map: &MapData, name: &'static str) -> Result<MapData, FastPathError> {
    let error = |source| FastPathError::Map { map: name, source };
    let fd = map.fd().as_fd().try_clone_to_owned().map_err(|io_error| {
        error(aya::maps::MapError::SyscallError(aya::sys::SyscallError {
            call: "dup",
            io_error,
        }))
    })?;
    MapData::from_fd(fd).map_err(error)
}

/// A port's entry in the `ports` map.
fn port_entry(slot: u32, plan: &PortPlan) -> PortEntry {
    let mut entry = PortEntry {
        slot,
        app: maps::APP_USER,
        peer: 0,
        vlan_mode: maps::VLAN_ACCESS,
        untagged_vlan: maps::NO_VLAN,
    };
    match plan {
        PortPlan::Xconnect { peer } => {
            entry.app = maps::APP_XCONNECT;
            entry.peer = u32::from(*peer);
        }
        PortPlan::Bridge(BridgeVlan::Access(vlan)) => {
            entry.app = maps::APP_BRIDGE;
            entry.untagged_vlan = *vlan;
        }
        PortPlan::Bridge(BridgeVlan::Trunk { native, .. }) => {
            entry.app = maps::APP_BRIDGE;
            entry.vlan_mode = maps::VLAN_TRUNK;
            entry.untagged_vlan = native.unwrap_or(maps::NO_VLAN);
        }
        PortPlan::Router => entry.app = maps::APP_ROUTER,
        PortPlan::OpenFlow => entry.app = maps::APP_OPENFLOW,
        PortPlan::User => {}
    }
    entry
}

/// The verifier's refusal, with the last lines of its log.
fn verifier_error(error: ProgramError) -> FastPathError {
    FastPathError::Verifier {
        reason: verifier_refusal(&error),
    }
}

/// Why the program handed a frame to user space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToUser {
    /// An unknown or moved source: learning is user space's.
    Learn,
    /// An unknown destination, broadcast or multicast: flooding.
    Flood,
    /// A VLAN case the kernel leaves to the pipeline.
    Vlan,
    /// Anything else (ports without a fast path, short frames, ARP, IPv6, options, ...).
    Other,
    /// Router: to one of the router's own addresses.
    Local,
    /// Router: TTL at most 1 (user space sends Time Exceeded).
    Ttl,
    /// Router: no route (user space sends Unreachable).
    NoRoute,
    /// Router: an unresolved neighbour, a connected subnet or an ECMP route.
    NextHop,
    /// Router: a route load is being mirrored into the kernel.
    Sync,
    /// OpenFlow: the flow is not (or no longer) in the kernel's cache, or its actions are
    /// user space's.
    FlowMiss,
}

impl ToUser {
    /// Every reason, in the `counters` map's order.
    pub const ALL: [ToUser; maps::TO_USER_REASONS] = [
        ToUser::Learn,
        ToUser::Flood,
        ToUser::Vlan,
        ToUser::Other,
        ToUser::Local,
        ToUser::Ttl,
        ToUser::NoRoute,
        ToUser::NextHop,
        ToUser::Sync,
        ToUser::FlowMiss,
    ];

    /// The reason's name in counter names (`to_user.NAME`).
    pub fn name(self) -> &'static str {
        match self {
            ToUser::Learn => "learn",
            ToUser::Flood => "flood",
            ToUser::Vlan => "vlan",
            ToUser::Other => "other",
            ToUser::Local => "local",
            ToUser::Ttl => "ttl",
            ToUser::NoRoute => "no_route",
            ToUser::NextHop => "next_hop",
            ToUser::Sync => "sync",
            ToUser::FlowMiss => "flow_miss",
        }
    }

    /// The constant's name in `bpf/fast_path.h`.
    #[cfg(test)]
    fn c_name(self) -> &'static str {
        match self {
            ToUser::Learn => "FP_TO_USER_LEARN",
            ToUser::Flood => "FP_TO_USER_FLOOD",
            ToUser::Vlan => "FP_TO_USER_VLAN",
            ToUser::Other => "FP_TO_USER_OTHER",
            ToUser::Local => "FP_TO_USER_LOCAL",
            ToUser::Ttl => "FP_TO_USER_TTL",
            ToUser::NoRoute => "FP_TO_USER_NO_ROUTE",
            ToUser::NextHop => "FP_TO_USER_NEXT_HOP",
            ToUser::Sync => "FP_TO_USER_SYNC",
            ToUser::FlowMiss => "FP_TO_USER_FLOW_MISS",
        }
    }
}

/// One port's fast-path counters, summed over the CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortCounters {
    /// Frames received on the port and forwarded by the kernel.
    pub rx_forwarded: Count,
    /// Frames the kernel forwarded out of the port (received on another).
    pub tx_forwarded: Count,
    /// Frames received on the port and handed to user space, per [`ToUser`] reason.
    pub to_user: [Count; maps::TO_USER_REASONS],
    /// Frames received on the port and dropped by the kernel (an OpenFlow flow without an
    /// output; user space counts these as `no_output` drops).
    pub dropped: Count,
}

impl PortCounters {
    /// Frames handed to user space for `reason`.
    pub fn to_user(&self, reason: ToUser) -> u64 {
        self.to_user[reason as usize].packets
    }

    /// Frames handed to user space, for every reason.
    pub fn to_user_total(&self) -> u64 {
        self.to_user.iter().map(|count| count.packets).sum()
    }
}

/// The bridge's hand on the kernel's MAC table: every entry its own table learns, moves or
/// forgets is written here at once, on the worker's thread, so that the kernel never forwards
/// by an entry user space no longer has. A write is a `bpf(2)` call, made only when the table
/// changes (a new or moved source, an aged or flushed entry), never for a refresh.
pub struct MacMirror {
    map: HashMap<MapData, MacKey, MacEntry>,
    /// Slot -> interface index.
    ifindexes: Vec<u32>,
    /// Entries the kernel's table refused (full): their frames keep going to user space.
    refused: u64,
}

impl fmt::Debug for MacMirror {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MacMirror")
            .field("refused", &self.refused)
            .finish_non_exhaustive()
    }
}

impl MacSync for MacMirror {
    fn learned(&mut self, key: SyncedKey, port: u16) {
        let Some(&ifindex) = self.ifindexes.get(usize::from(port)) else {
            return;
        };
        let entry = MacEntry {
            slot: u32::from(port),
            ifindex,
        };
        if self.map.insert(kernel_key(key), entry, 0).is_err() {
            self.refused += 1;
        }
    }

    fn forgotten(&mut self, key: SyncedKey) {
        // Absent already is fine: the kernel refused it, or it was never mirrored.
        let _ = self.map.remove(&kernel_key(key));
    }

    fn cleared(&mut self) {
        let keys: Vec<MacKey> = self.map.keys().filter_map(Result::ok).collect();
        for key in keys {
            let _ = self.map.remove(&key);
        }
    }

    fn refused(&self) -> u64 {
        self.refused
    }
}

/// The kernel's key for a key of the bridge's table.
fn kernel_key(key: SyncedKey) -> MacKey {
    MacKey {
        mac: key.mac().0,
        vlan: key.vlan(),
    }
}
