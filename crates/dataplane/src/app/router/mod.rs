//! The IPv4/IPv6 router: interfaces with addresses, static routes (ECMP included), a neighbour
//! table fed by ARP and NDP, ICMP errors, and the per-packet forwarding of DPDK's l3fwd or VPP's
//! ip4-lookup/ip4-rewrite, as a pipeline of stages:
//!
//! 1. [`Parse`] fills metadata and flow keys (the flow hash picks ECMP members).
//! 2. VLAN-tagged frames are dropped ([`DropReason::VlanFiltered`]): router ports are untagged.
//! 3. [`Discovery`] answers ARP requests and neighbour solicitations for the router's addresses
//!    in place and learns from replies, releasing the packets that waited.
//! 4. [`Route`] checks (header checksum, options policy, martian source), looks up the whole
//!    batch in the FIBs and decides: local, forward to a neighbour, or an ICMP error.
//! 5. [`IcmpError`] emits time-exceeded / unreachable errors, rate-limited.
//! 6. [`Local`] answers pings to the router; other local traffic is consumed and counted.
//! 7. [`Resolve`] rewrites MACs and TTL for known neighbours and holds the rest while it asks.
//!
//! Stages 3, 5 and 6 run over a batch only when one of its packets needs them (an ARP or
//! ICMPv6 frame, an error due, a packet for the router): plain forwarded traffic skips their
//! passes. Traced batches run every pass.
//!
//! Before all of them, [`FastPath`] forwards the common IPv4 packet (valid, routed to a gateway
//! whose adjacency is current) in one fused pass straight from the frame: a batch of such
//! packets never reaches the stages, not even the parse. Packets it leaves (every exception)
//! take the stages exactly as they would without it; it leaves every packet of a batch in
//! which discovery may learn a neighbour, and it is off while tracing or with an ACL.
//!
//! An optional [`Acl`] stage runs right after parse (the "Linux router with firewall" case):
//! without one configured the router does not even test for it per packet, only per batch.
//!
//! Every table is changed between batches through the methods of [`Router`]: `add_route`,
//! `remove_route`, `set_routes` (a bulk rebuild), `adopt_routes` (FIBs built off the worker),
//! `add_neighbour`, `remove_neighbour`, `set_acl`; [`App::command`] maps the control socket's
//! commands onto them. The interfaces' addresses
//! become connected routes (their subnets) and local routes (/32, /128) in the same FIBs, so one
//! lookup tells a packet for the router from one to forward.
//!
//! Tracing: with [`Router::set_trace`] the stages run their `TRACE` variants and the router
//! keeps one [`RouterTrace`] per packet (every stage's line) in a ring allocated only then;
//! untraced batches never touch it.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use wirespeed_packet::wire::EthernetAddress;
use wirespeed_packet::{Batch, DropReason, FramePool, MAX_BATCH};

use crate::app::router_mirror::{RouteMirror, RouteSync};
use crate::app::trace::{Arrival, Disposition, TraceRing};
use crate::app::{App, CommandContext, Context, MAX_SHOW_ROWS};
use crate::command::{AppCommand, AppReply, Routes, Table};
use crate::stage::Parse;
use crate::stage::acl::{Acl, AclConfig, AclRule};
use crate::stage::discovery::{Discovered, Discovery};
use crate::stage::fast_path::{Coverage, FastPath};
use crate::stage::icmp_error::{IcmpError, IcmpKind, Signalled};
use crate::stage::local::{Delivered, Local};
use crate::stage::neighbour::{Resolution, Resolve};
use crate::stage::route::{Hop, Next, Route};
use crate::table::fib::{FibError, FibKind, Ipv4Prefix, Ipv6Prefix, NextHop};
use crate::table::interfaces::Interfaces;
use crate::table::neighbour::{Neighbour, NeighbourKey, NeighbourState, NeighbourTable, Timers};

pub use crate::stage::route::OptionsPolicy;
pub use crate::table::interfaces::Interface;

mod commands;
mod fills;

/// An IPv4 or IPv6 prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Prefix {
    V4(Ipv4Prefix),
    V6(Ipv6Prefix),
}

impl Prefix {
    /// `addr/len` (host bits cleared).
    pub fn new(addr: IpAddr, len: u8) -> Result<Prefix, FibError> {
        match addr {
            IpAddr::V4(a) => Ipv4Prefix::new(a.to_bits(), len).map(Prefix::V4),
            IpAddr::V6(a) => Ipv6Prefix::new(a.to_bits(), len).map(Prefix::V6),
        }
    }
}

impl std::fmt::Display for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Prefix::V4(p) => p.fmt(f),
            Prefix::V6(p) => p.fmt(f),
        }
    }
}

/// A next-hop router.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Gateway {
    pub addr: IpAddr,
    /// The port it is on; `None`: the port whose subnet holds `addr` (link-local IPv6 gateways
    /// need the port).
    pub port: Option<u16>,
}

impl Gateway {
    /// A gateway on whichever port's subnet holds `addr`.
    pub fn new(addr: IpAddr) -> Gateway {
        Gateway { addr, port: None }
    }
}

/// A static route: a prefix and one gateway, or several for ECMP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaticRoute {
    pub prefix: Prefix,
    pub via: Vec<Gateway>,
}

/// A configured neighbour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StaticNeighbour {
    pub port: u16,
    pub addr: IpAddr,
    pub mac: EthernetAddress,
}

/// Everything the router is configured with.
#[derive(Clone, Debug)]
pub struct RouterConfig {
    pub interfaces: Vec<Interface>,
    pub routes: Vec<StaticRoute>,
    pub neighbours: Vec<StaticNeighbour>,
    /// Most neighbour entries (ARP and NDP together).
    pub neighbour_capacity: usize,
    /// A learned neighbour not confirmed for this long is forgotten.
    pub neighbour_aging: Duration,
    /// Time between two requests for the same unresolved neighbour.
    pub resolve_retry: Duration,
    /// Requests sent before an unresolved neighbour is given up (its packets dropped).
    pub resolve_attempts: u32,
    /// Packets held per unresolved neighbour.
    pub hold_per_neighbour: u16,
    /// Packets held over all neighbours.
    pub hold_total: usize,
    /// ICMP errors per second (0: none), and the burst allowed.
    pub icmp_rate: u32,
    pub icmp_burst: u32,
    pub ipv4_options: OptionsPolicy,
    /// An ACL in front of routing; `None`: no ACL stage (until one is loaded at run time).
    pub acl: Option<AclConfig>,
    /// The FIBs' lookup structures (`[router] fib`).
    pub fib: FibKind,
}

impl Default for RouterConfig {
    fn default() -> Self {
        RouterConfig {
            interfaces: Vec::new(),
            routes: Vec::new(),
            neighbours: Vec::new(),
            neighbour_capacity: 4096,
            neighbour_aging: Duration::from_secs(300),
            resolve_retry: Duration::from_secs(1),
            resolve_attempts: 3,
            hold_per_neighbour: 4,
            hold_total: 1024,
            icmp_rate: 1000,
            icmp_burst: 50,
            ipv4_options: OptionsPolicy::Drop,
            acl: None,
            fib: FibKind::default(),
        }
    }
}

/// Why a configuration change was refused; the router is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouterError {
    #[error(transparent)]
    Fib(#[from] FibError),
    #[error(
        "route {prefix}: gateway {gateway} is in no interface's subnet; give its port or add an \
         interface address whose subnet holds it"
    )]
    GatewayUnreachable { prefix: String, gateway: IpAddr },
    #[error("route {prefix}: gateway {gateway} is not of the prefix's address family")]
    FamilyMismatch { prefix: String, gateway: IpAddr },
    #[error("route {prefix} has no gateway; give at least one")]
    NoGateway { prefix: String },
    #[error("port {port} has no interface; add it to RouterConfig::interfaces first")]
    UnknownPort { port: u16 },
    #[error("neighbour table full ({capacity} entries); raise RouterConfig::neighbour_capacity")]
    NeighbourTableFull { capacity: usize },
    #[error(
        "route load: gateway {gateway} is in no interface's subnet; fix the route file or add \
         an interface address whose subnet holds it"
    )]
    LoadedGatewayUnreachable { gateway: IpAddr },
    #[error(
        "route load: the FIBs are shared with another holder; the sender must give each worker \
         its own copy"
    )]
    SharedFib,
}

/// A prefix and the FIB's next hop for it.
type RouteEntry = (Prefix, NextHop);

/// The router app. See the module documentation.
pub struct Router {
    interfaces: Interfaces,
    parse: Parse,
    acl: Option<Acl>,
    fast_path: FastPath,
    /// Whether `fast_path` runs (see [`Router::set_fast_path`]).
    fast_path_on: bool,
    /// Packets of batches the fast path forwarded whole, which the parse never saw: counted as
    /// parsed, since the parse would have parsed them.
    parse_skipped: u64,
    discovery: Discovery,
    route: Route,
    icmp: IcmpError,
    local: Local,
    resolve: Resolve,
    neighbours: NeighbourTable,
    timers: Timers,
    next: Box<[Next; MAX_BATCH]>,
    errors: Box<[Option<IcmpKind>; MAX_BATCH]>,
    /// Entries made static between batches while packets waited for them.
    resolved_between: Vec<u32>,
    /// Frames that waited for a neighbour removed between batches: freed with the next batch.
    orphans: Vec<u32>,
    /// Held packets dropped because their neighbour never answered or was aged out.
    hold_expired: u64,
    neighbours_aged: u64,
    /// The copy of the IPv4 forwarding state in the XDP fast path, if any.
    mirror: Option<RouteMirror>,
    trace: TraceRing<RouterTrace>,
    /// Each packet of the current batch as it arrived; written only while tracing.
    arrivals: Box<[Arrival; MAX_BATCH]>,
}

fn cycles(duration: Duration, hz: u64) -> u64 {
    let cycles = duration.as_secs_f64() * hz as f64;
    if cycles >= u64::MAX as f64 {
        u64::MAX
    } else {
        cycles as u64
    }
}

impl Router {
    /// A router as configured. Reads the TSC rate once (about 20 ms the first time in a process).
    pub fn new(config: RouterConfig) -> Result<Router, RouterError> {
        let hz = wirespeed_packet::cpu::tsc_hz();
        let timers = Timers {
            aging: cycles(config.neighbour_aging, hz),
            retry: cycles(config.resolve_retry, hz),
            attempts: config.resolve_attempts,
        };
        let mut router = Router {
            interfaces: Interfaces::new(config.interfaces.clone()),
            parse: Parse::new(),
            acl: config.acl.as_ref().map(Acl::new),
            fast_path: FastPath::new(),
            fast_path_on: true,
            parse_skipped: 0,
            discovery: Discovery::new(),
            route: Route::new(config.ipv4_options, config.fib),
            icmp: IcmpError::new(config.icmp_rate, config.icmp_burst, hz),
            local: Local::new(),
            resolve: Resolve::new(timers),
            neighbours: NeighbourTable::new(
                config.neighbour_capacity,
                config.hold_per_neighbour,
                config.hold_total,
            ),
            timers,
            next: Box::new([Next::Skip; MAX_BATCH]),
            errors: Box::new([None; MAX_BATCH]),
            resolved_between: Vec::new(),
            orphans: Vec::new(),
            hold_expired: 0,
            neighbours_aged: 0,
            mirror: None,
            trace: TraceRing::default(),
            arrivals: Box::new([Arrival::default(); MAX_BATCH]),
        };
        router.set_routes(&config.routes)?;
        for neighbour in &config.neighbours {
            router.add_neighbour(neighbour)?;
        }
        Ok(router)
    }

    /// The hops of a static route.
    fn hops(&self, route: &StaticRoute) -> Result<Vec<Hop>, RouterError> {
        if route.via.is_empty() {
            return Err(RouterError::NoGateway {
                prefix: route.prefix.to_string(),
            });
        }
        route
            .via
            .iter()
            .map(|gateway| {
                let unreachable = || RouterError::GatewayUnreachable {
                    prefix: route.prefix.to_string(),
                    gateway: gateway.addr,
                };
                match (route.prefix, gateway.addr) {
                    (Prefix::V4(_), IpAddr::V4(addr)) => {
                        let port = gateway
                            .port
                            .or_else(|| self.interfaces.port_for_v4(addr))
                            .ok_or_else(unreachable)?;
                        self.known_port(port)?;
                        Ok(Hop::Gateway(NeighbourKey::v4(addr, port)))
                    }
                    (Prefix::V6(_), IpAddr::V6(addr)) => {
                        let port = gateway
                            .port
                            .or_else(|| self.interfaces.port_for_v6(addr))
                            .ok_or_else(unreachable)?;
                        self.known_port(port)?;
                        Ok(Hop::Gateway(NeighbourKey::v6(addr, port)))
                    }
                    _ => Err(RouterError::FamilyMismatch {
                        prefix: route.prefix.to_string(),
                        gateway: gateway.addr,
                    }),
                }
            })
            .collect()
    }

    fn known_port(&self, port: u16) -> Result<(), RouterError> {
        match self.interfaces.get(port) {
            Some(_) => Ok(()),
            None => Err(RouterError::UnknownPort { port }),
        }
    }

    /// The connected (subnet) and local (own address) routes of the interfaces.
    fn interface_routes(&mut self) -> Result<(Vec<RouteEntry>, Vec<RouteEntry>), RouterError> {
        let mut connected = Vec::new();
        let mut local = Vec::new();
        let own = self.route.next_hop(&[Hop::Local])?;
        let interfaces: Vec<Interface> = self.interfaces.iter().cloned().collect();
        for interface in interfaces {
            let hop = self.route.next_hop(&[Hop::Connected(interface.port)])?;
            for (addr, len) in interface.ipv4 {
                connected.push((Prefix::new(IpAddr::V4(addr), len)?, hop));
                local.push((Prefix::new(IpAddr::V4(addr), 32)?, own));
            }
            for (addr, len) in interface.ipv6 {
                connected.push((Prefix::new(IpAddr::V6(addr), len)?, hop));
                local.push((Prefix::new(IpAddr::V6(addr), 128)?, own));
            }
        }
        Ok((connected, local))
    }

    /// Replaces every static route by `routes` in one bulk build (connected and local routes of
    /// the interfaces are kept; a static route for the same prefix as a connected one wins).
    /// Nothing changes when it fails.
    pub fn set_routes(&mut self, routes: &[StaticRoute]) -> Result<(), RouterError> {
        let (connected, local) = self.interface_routes()?;
        let mut statics = Vec::with_capacity(routes.len());
        let mut memo: HashMap<Vec<Hop>, NextHop> = HashMap::new();
        for route in routes {
            let hops = self.hops(route)?;
            let next_hop = match memo.get(&hops) {
                Some(&next_hop) => next_hop,
                None => {
                    let next_hop = self.route.next_hop(&hops)?;
                    memo.insert(hops, next_hop);
                    next_hop
                }
            };
            statics.push((route.prefix, next_hop));
        }
        let all = || connected.iter().chain(&statics).chain(&local).copied();
        let v4 = all().filter_map(|(p, h)| match p {
            Prefix::V4(p) => Some((p, h)),
            Prefix::V6(_) => None,
        });
        let v6 = all().filter_map(|(p, h)| match p {
            Prefix::V6(p) => Some((p, h)),
            Prefix::V4(_) => None,
        });
        self.route.replace(v4, v6)?;
        if let Some(mirror) = &mut self.mirror {
            mirror.all_routes(&self.route);
        }
        Ok(())
    }

    /// Adds or replaces one static route.
    pub fn add_route(&mut self, route: &StaticRoute) -> Result<(), RouterError> {
        let hops = self.hops(route)?;
        match route.prefix {
            Prefix::V4(p) => self.route.insert_v4(p, &hops)?,
            Prefix::V6(p) => self.route.insert_v6(p, &hops)?,
        }
        if let Some(mirror) = &mut self.mirror {
            mirror.route_changed(&self.route, route.prefix);
        }
        Ok(())
    }

    /// Deletes the route for exactly `prefix`; whether there was one.
    pub fn remove_route(&mut self, prefix: Prefix) -> bool {
        let found = match prefix {
            Prefix::V4(p) => self.route.remove_v4(p),
            Prefix::V6(p) => self.route.remove_v6(p),
        };
        if let Some(mirror) = &mut self.mirror {
            mirror.route_changed(&self.route, prefix);
        }
        found
    }

    /// Makes `sync` a copy of the forwarding state (every route, the rewrites of the
    /// resolved gateways) and tells it of every change from now on: the XDP fast path's maps.
    pub fn mirror_routes(&mut self, sync: Box<dyn RouteSync>) {
        let mut mirror = RouteMirror::new(sync, &self.route);
        mirror.sync_rewrites(&self.route, &self.neighbours, &self.interfaces);
        self.mirror = Some(mirror);
    }

    /// Brings the copy's rewrites up to date with the neighbour table (when it changed).
    fn sync_mirror(&mut self) {
        if let Some(mirror) = &mut self.mirror {
            mirror.sync_rewrites(&self.route, &self.neighbours, &self.interfaces);
        }
    }

    /// Adds or replaces a static neighbour. Packets waiting for it leave with the next batch.
    pub fn add_neighbour(&mut self, neighbour: &StaticNeighbour) -> Result<(), RouterError> {
        self.known_port(neighbour.port)?;
        let key = match neighbour.addr {
            IpAddr::V4(a) => NeighbourKey::v4(a, neighbour.port),
            IpAddr::V6(a) => NeighbourKey::v6(a, neighbour.port),
        };
        let slot = self
            .neighbours
            .set_static(key, neighbour.mac)
            .map_err(|_| RouterError::NeighbourTableFull {
                capacity: self.neighbours.capacity(),
            })?;
        let waiting = self.neighbours.entry(slot).is_some_and(|e| e.held > 0);
        if waiting && !self.resolved_between.contains(&slot) {
            self.resolved_between.push(slot);
        }
        Ok(())
    }

    /// Every neighbour entry ("show neighbours").
    pub fn neighbours(&self) -> impl Iterator<Item = &Neighbour> {
        self.neighbours.iter()
    }

    /// The interfaces.
    pub fn interfaces(&self) -> &Interfaces {
        &self.interfaces
    }

    /// Switches the fused IPv4 forwarding loop ([`FastPath`]) on (the default) or off; off, every
    /// packet takes the stage passes. Between batches. For tests and benchmarks that hold the
    /// two paths against each other: the output is the same either way.
    pub fn set_fast_path(&mut self, on: bool) {
        self.fast_path_on = on;
    }

    /// The route stage (FIBs, for sizes and route listings).
    pub fn routes(&self) -> &Route {
        &self.route
    }

    /// Takes over FIBs built off the worker (see [`Routes`]): every static route is replaced by
    /// theirs, the interfaces' connected and local routes are added to them (a loaded route for
    /// exactly a connected prefix wins, as in [`Router::set_routes`]). Returns the replaced FIBs
    /// to be freed by the sender. Nothing changes when it fails. Between batches: the work is
    /// one resolution per distinct gateway and one insert per interface route.
    pub fn adopt_routes(&mut self, routes: Routes) -> Result<Routes, RouterError> {
        let Routes { v4, v6, gateways } = routes;
        let (Ok(mut fib4), Ok(mut fib6)) = (Arc::try_unwrap(v4), Arc::try_unwrap(v6)) else {
            return Err(RouterError::SharedFib);
        };
        let mut hops = Vec::with_capacity(gateways.len() + 1 + self.interfaces.iter().count());
        for &gateway in gateways.iter() {
            let unreachable = RouterError::LoadedGatewayUnreachable { gateway };
            let key = match gateway {
                IpAddr::V4(a) => self
                    .interfaces
                    .port_for_v4(a)
                    .map(|port| NeighbourKey::v4(a, port)),
                IpAddr::V6(a) => self
                    .interfaces
                    .port_for_v6(a)
                    .map(|port| NeighbourKey::v6(a, port)),
            };
            hops.push(Hop::Gateway(key.ok_or(unreachable)?));
        }
        let hop = |id: usize| {
            NextHop::hop(id as u32).ok_or(FibError::EcmpGroupsFull {
                count: id,
                max: NextHop::MAX_ID,
            })
        };
        let own = hop(hops.len())?;
        hops.push(Hop::Local);
        let interfaces: Vec<Interface> = self.interfaces.iter().cloned().collect();
        for interface in &interfaces {
            let connected = hop(hops.len())?;
            hops.push(Hop::Connected(interface.port));
            for &(addr, len) in &interface.ipv4 {
                let subnet = Ipv4Prefix::new(addr.to_bits(), len)?;
                if fib4.route(subnet).is_none() {
                    fib4.insert(subnet, connected)?;
                }
            }
            for &(addr, len) in &interface.ipv6 {
                let subnet = Ipv6Prefix::new(addr.to_bits(), len)?;
                if fib6.route(subnet).is_none() {
                    fib6.insert(subnet, connected)?;
                }
            }
        }
        for interface in &interfaces {
            for &(addr, _) in &interface.ipv4 {
                fib4.insert(Ipv4Prefix::new(addr.to_bits(), 32)?, own)?;
            }
            for &(addr, _) in &interface.ipv6 {
                fib6.insert(Ipv6Prefix::new(addr.to_bits(), 128)?, own)?;
            }
        }
        let (old4, old6) = self.route.adopt(fib4, fib6, hops);
        if let Some(mirror) = &mut self.mirror {
            mirror.all_routes(&self.route);
        }
        Ok(Routes {
            v4: Arc::new(old4),
            v6: Arc::new(old6),
            gateways: Arc::from(Vec::new()),
        })
    }

    /// Deletes every neighbour entry of `addr` (on any port); returns how many. Packets that
    /// waited for it are freed with the next batch.
    pub fn remove_neighbour(&mut self, addr: IpAddr) -> usize {
        let keys: Vec<NeighbourKey> = self
            .neighbours
            .iter()
            .filter(|n| n.key.addr() == addr)
            .map(|n| n.key)
            .collect();
        let orphans = &mut self.orphans;
        for key in &keys {
            self.neighbours
                .remove_key(key, |desc| orphans.push(desc.frame));
        }
        keys.len()
    }

    /// Replaces the ACL's rules, keeping its default action (permit when no ACL was
    /// configured: the stage is created then). Between batches.
    pub fn set_acl(&mut self, rules: &[AclRule]) {
        crate::stage::acl::replace_rules(&mut self.acl, rules);
        // Only user space applies an ACL: the fast path stops forwarding before the reply.
        if let Some(mirror) = self.mirror.take() {
            mirror.stop_forwarding();
        }
    }

    /// The ACL stage, when there is one.
    pub fn acl(&self) -> Option<&Acl> {
        self.acl.as_ref()
    }

    /// "show routes": prefix, next hop, port; at most [`MAX_SHOW_ROWS`] rows.
    fn route_table(&self, ctx: &CommandContext<'_>) -> Table {
        let describe = |next_hop: NextHop| -> (String, String) {
            if next_hop.is_ecmp() {
                return (format!("ecmp group {}", next_hop.id()), "-".into());
            }
            match self.route.hop(next_hop.id()) {
                Some(Hop::Local) => ("local".into(), "-".into()),
                Some(Hop::Connected(port)) => ("connected".into(), ctx.port_name(port)),
                Some(Hop::Gateway(key)) => (key.addr().to_string(), ctx.port_name(key.port())),
                None => (format!("hop {}", next_hop.id()), "-".into()),
            }
        };
        let v4 = self.route.fib_v4();
        let v6 = self.route.fib_v6();
        let all = v4
            .routes()
            .map(|(p, h)| (Prefix::V4(p), h))
            .chain(v6.routes().map(|(p, h)| (Prefix::V6(p), h)));
        let mut rows: Vec<Vec<String>> = all
            .take(MAX_SHOW_ROWS)
            .map(|(prefix, next_hop)| {
                let (via, port) = describe(next_hop);
                vec![prefix.to_string(), via, port]
            })
            .collect();
        let total = v4.len() + v6.len();
        if total > rows.len() {
            rows.push(vec![
                format!("... {} more", total - rows.len()),
                String::new(),
                String::new(),
            ]);
        }
        Table {
            columns: vec!["prefix".into(), "via".into(), "port".into()],
            rows,
        }
    }

    /// "show neighbours": address, MAC, port, state, packets waiting.
    fn neighbour_table(&self, ctx: &CommandContext<'_>) -> Table {
        let mut rows: Vec<Vec<String>> = self
            .neighbours
            .iter()
            .take(MAX_SHOW_ROWS)
            .map(|n| {
                let state = match n.state {
                    NeighbourState::Incomplete => "incomplete",
                    NeighbourState::Reachable => "reachable",
                    NeighbourState::Static => "static",
                };
                vec![
                    n.key.addr().to_string(),
                    n.mac.to_string(),
                    ctx.port_name(n.key.port()),
                    state.into(),
                    n.held.to_string(),
                ]
            })
            .collect();
        rows.sort();
        Table {
            columns: ["address", "mac", "port", "state", "waiting"]
                .map(String::from)
                .to_vec(),
            rows,
        }
    }

    /// Ages the neighbour table a step and sends what waited for neighbours made static.
    fn housekeeping(&mut self, ctx: &mut Context<'_>) {
        let pool = &mut *ctx.pool;
        let mut expired = 0;
        self.neighbours_aged += self.neighbours.sweep(ctx.now, &self.timers, |desc| {
            pool.release(desc.frame);
            expired += 1;
        }) as u64;
        self.hold_expired += expired;
        for frame in self.orphans.drain(..) {
            pool.release(frame);
        }
        self.sync_mirror();
        while let Some(slot) = self.resolved_between.pop() {
            if let Some(entry) = self.neighbours.entry(slot).copied() {
                self.discovery.release(
                    ctx,
                    &mut self.neighbours,
                    slot,
                    entry.mac,
                    entry.key.port(),
                );
            }
        }
    }
}

impl App for Router {
    fn name(&self) -> &'static str {
        "router"
    }

    fn process(&mut self, ctx: &mut Context<'_>, batch: &mut Batch) {
        if self.trace.is_on() {
            self.run::<true>(ctx, batch);
        } else {
            self.run::<false>(ctx, batch);
        }
        // A neighbour this batch taught (or changed) reaches the fast path now: the next batch
        // may be long in coming while the kernel forwards everything else.
        self.sync_mirror();
    }

    fn tables(&self, out: &mut Vec<crate::app::TableFill>) {
        self.append_tables(out);
    }

    fn caches(&self, out: &mut Vec<crate::app::CacheLookups>) {
        self.append_caches(out);
    }

    fn counters(&self, out: &mut Vec<(&'static str, u64)>) {
        let parse = self.parse.counters();
        out.push(("parse.parsed", parse.parsed + self.parse_skipped));
        out.push(("parse.malformed", parse.malformed));
        let fast = self.fast_path.counters();
        out.push(("fast_path.forwarded", fast.forwarded()));
        out.push(("fast_path.forwarded_ipv6", fast.forwarded_ipv6));
        out.push(("fast_path.declined", fast.declined));
        let r = self.route.counters();
        out.push(("route.ipv4", r.ipv4 + fast.forwarded_ipv4));
        out.push(("route.ipv6", r.ipv6 + fast.forwarded_ipv6));
        out.push(("route.local", r.local));
        out.push(("route.no_route", r.no_route));
        out.push(("route.not_routable", r.not_routable));
        out.push(("route.ttl_expired", r.ttl_expired));
        out.push(("route.bad_checksum", r.bad_checksum));
        out.push(("route.martian_source", r.martian));
        out.push(("route.ipv4_options", r.options));
        let n = self.resolve.counters();
        out.push(("neighbour.forwarded", n.forwarded + fast.forwarded()));
        out.push(("neighbour.held", n.held));
        out.push(("neighbour.hold_full", n.hold_full));
        out.push(("neighbour.table_full", n.table_full));
        out.push(("neighbour.hold_expired", self.hold_expired));
        out.push(("neighbour.aged", self.neighbours_aged));
        out.push(("neighbour.entries", self.neighbours.len() as u64));
        out.push(("neighbour.waiting", self.neighbours.held_packets() as u64));
        let d = self.discovery.counters();
        out.push(("arp.replied", d.arp_replied));
        out.push(("arp.learned", d.arp_learned));
        out.push(("arp.requests", d.arp_requests));
        out.push(("arp.ignored", d.arp_ignored));
        out.push(("arp.malformed", d.arp_malformed));
        out.push(("nd.replied", d.nd_replied));
        out.push(("nd.learned", d.nd_learned));
        out.push(("nd.solicits", d.nd_solicits));
        out.push(("nd.ignored", d.nd_ignored));
        out.push(("nd.malformed", d.nd_malformed));
        out.push(("discovery.refused", d.refused));
        out.push(("discovery.released", d.released));
        out.push(("discovery.no_source", d.no_source));
        out.push(("discovery.pool_empty", d.pool_empty));
        out.push(("discovery.emit_overflow", d.emit_overflow));
        let i = self.icmp.counters();
        out.push(("icmp.time_exceeded", i.time_exceeded));
        out.push(("icmp.unreachable", i.unreachable));
        out.push(("icmp.rate_limited", i.rate_limited));
        out.push(("icmp.suppressed", i.suppressed));
        out.push(("icmp.no_source", i.no_source));
        out.push(("icmp.pool_empty", i.pool_empty));
        out.push(("icmp.emit_overflow", i.emit_overflow));
        let l = self.local.counters();
        out.push(("local.echo_replies", l.echo_replies));
        out.push(("local.unhandled", l.unhandled));
        if let Some(mirror) = &self.mirror {
            out.push(("route.fast_path_refused", mirror.refused()));
        }
        if let Some(acl) = &self.acl {
            acl.append_counters(out);
        }
    }

    fn release_all(&mut self, pool: &mut FramePool) {
        self.neighbours.release_all(|desc| pool.release(desc.frame));
        for frame in self.orphans.drain(..) {
            pool.release(frame);
        }
    }

    fn command(&mut self, command: AppCommand, ctx: &CommandContext<'_>) -> AppReply {
        let reply = self.apply(command, ctx);
        // A changed neighbour reaches the fast path before the reply.
        self.sync_mirror();
        reply
    }
}

/// One packet as the router's stages decided it; its `Display` is a trace line naming every
/// stage that acted on the packet, e.g. `port 0 len 60 10.0.0.2 -> 10.1.0.2 | route forward
/// 10.1.0.2 port 1 | neighbour rewrite 02:00:00:00:00:c1 | out port 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouterTrace {
    /// The batch's TSC.
    pub now: u64,
    pub arrival: Arrival,
    pub discovery: Discovered,
    pub route: Next,
    pub icmp: Signalled,
    pub local: Delivered,
    pub neighbour: Resolution,
    pub disposition: Disposition,
}

impl std::fmt::Display for RouterTrace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.arrival)?;
        if self.discovery != Discovered::Skipped {
            write!(f, " | {}", self.discovery)?;
        }
        if self.route != Next::Skip {
            write!(f, " | route {}", self.route)?;
        }
        if self.icmp != Signalled::Skipped {
            write!(f, " | icmp {}", self.icmp)?;
        }
        if self.local != Delivered::Skipped {
            write!(f, " | local {}", self.local)?;
        }
        if self.neighbour != Resolution::Skipped {
            write!(f, " | neighbour {}", self.neighbour)?;
        }
        write!(f, " | {}", self.disposition)
    }
}

/// Tracing, and the pipeline with and without it.
impl Router {
    /// Keeps the decisions of the last `records` packets (0: tracing off, the default). Between
    /// batches.
    pub fn set_trace(&mut self, records: usize) {
        let blank = RouterTrace {
            now: 0,
            arrival: Arrival::default(),
            discovery: Discovered::Skipped,
            route: Next::Skip,
            icmp: Signalled::Skipped,
            local: Delivered::Skipped,
            neighbour: Resolution::Skipped,
            disposition: Disposition::Held,
        };
        self.trace = TraceRing::new(records, blank);
    }

    /// The traced packets, oldest first.
    pub fn trace(&self) -> Vec<RouterTrace> {
        self.trace.records()
    }

    /// The stages over one batch; with `TRACE` their `TRACE` variants, and a record per packet.
    fn run<const TRACE: bool>(&mut self, ctx: &mut Context<'_>, batch: &mut Batch) {
        let fast_path = !TRACE
            && self.fast_path_on
            && self.acl.is_none()
            && FastPath::prefetch(ctx.pool, batch, self.route.fib_v4());
        // Before the fast path, so that it sees the neighbour table the stages would see.
        self.housekeeping(ctx);
        if fast_path {
            let coverage = self.fast_path.process(
                ctx.pool,
                batch,
                (self.route.fib_v4(), self.route.fib_v6()),
                self.route.adjacencies(),
                self.neighbours.generation(),
            );
            if coverage == Coverage::All {
                self.parse_skipped += batch.len() as u64;
                return;
            }
        }
        // The flow hash is computed only when a stage reads it (the ACL's cache, ECMP).
        self.parse
            .set_flow_hash(self.acl.is_some() || self.route.uses_flow_hash());
        self.parse.process(ctx.pool, batch, ctx.keys);
        self.route.prefetch(ctx.pool, batch);
        if TRACE {
            for ((arrival, desc), key) in
                self.arrivals.iter_mut().zip(batch.descs()).zip(&*ctx.keys)
            {
                *arrival = Arrival::new(desc, key);
            }
        }
        // The passes of discovery, ICMP errors and local delivery run only over batches that
        // hold a packet for them (traced batches run every pass, so each stage keeps its line):
        // a batch of plain forwarded traffic pays one flag test per packet for all three.
        let mut any_discovery = false;
        for meta in batch.meta_mut() {
            if meta.drop.is_none() && meta.vlan_depth != 0 {
                meta.drop = Some(DropReason::VlanFiltered);
            }
            any_discovery |= Discovery::may_handle(meta);
        }
        if let Some(acl) = &mut self.acl {
            acl.process(batch, ctx.keys);
        }
        if any_discovery || TRACE {
            self.discovery
                .process::<TRACE>(ctx, &self.interfaces, &mut self.neighbours, batch);
        }
        let len = batch.len();
        let next = &mut self.next[..len];
        self.route.process(ctx.pool, batch, next);

        let (mut any_error, mut any_local) = (false, false);
        for (error, next) in self.errors.iter_mut().zip(next.iter()) {
            *error = match *next {
                Next::Error(kind) => {
                    any_error = true;
                    Some(kind)
                }
                Next::Local => {
                    any_local = true;
                    None
                }
                _ => None,
            };
        }
        if any_error || TRACE {
            self.icmp
                .process::<TRACE>(ctx, &self.interfaces, batch, &self.errors[..len]);
        }
        if any_local || TRACE {
            self.local
                .process::<TRACE>(ctx, &self.interfaces, batch, next);
        }
        self.resolve.process::<TRACE>(
            ctx,
            &self.interfaces,
            &mut self.neighbours,
            self.route.adjacencies_mut(),
            &mut self.discovery,
            batch,
            next,
        );
        if TRACE {
            self.record(ctx.now, len, batch);
        }
    }

    /// Appends a record per packet of the batch just processed (`len` packets before held ones
    /// left it) to the trace ring.
    fn record(&mut self, now: u64, len: usize, batch: &Batch) {
        let mut kept = batch.meta().iter();
        let stages = self
            .arrivals
            .iter()
            .zip(self.discovery.trace(len))
            .zip(self.next.iter())
            .zip(self.icmp.trace(len))
            .zip(self.local.trace(len))
            .zip(self.resolve.trace(len));
        for (((((&arrival, &discovery), &route), &icmp), &local), &neighbour) in stages {
            let disposition = match neighbour {
                Resolution::Held { .. } => Disposition::Held,
                _ => kept
                    .next()
                    .map_or(Disposition::Dropped(DropReason::NoOutput), Disposition::of),
            };
            self.trace.push(RouterTrace {
                now,
                arrival,
                discovery,
                route,
                icmp,
                local,
                neighbour,
                disposition,
            });
        }
    }
}
