//! The router's forwarding state as a copy elsewhere needs it (the XDP fast path's maps):
//! every route with what it designates, and the rewrite of every gateway whose neighbour is
//! resolved. The copy ([`RouteSync`]) is told of changes only, between batches, so the hot
//! path pays nothing while nothing changes.
//!
//! Routes are told as they change (`ctl route add/del`: one call each); a bulk change (the
//! configuration's routes, a `ctl route load` of a million) is handed over whole, and the copy
//! takes it in off the worker's thread ([`RouteSync::routes_replaced`]). Rewrites follow the
//! neighbour table: when its generation (which advances on every change of a resolved answer)
//! or the hop table changed since the last look, the rewrites of every gateway hop are read
//! again from the table, as the neighbour stage would read them, and given to the copy whole;
//! it writes the difference. The work is one probe per gateway in use, on changes only.
//!
use wirespeed_packet::wire::EthernetAddress;

use crate::app::router::Prefix;
use crate::stage::route::{Hop, Route};
use crate::table::fib::NextHop;
use crate::table::interfaces::Interfaces;
use crate::table::neighbour::{Lookup, NeighbourTable};

/// What a route designates, as a copy needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteTarget {
    /// One hop (a gateway, or a connected subnet): its id, the key of its rewrite.
    Hop(u32),
    /// One of the router's own addresses.
    Local,
    /// Several gateways: the flow hash picks one, in user space.
    Ecmp,
}

/// A resolved gateway's rewrite: its packets leave by `port` from `src` to `dst`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GatewayRewrite {
    pub hop: u32,
    pub port: u16,
    pub dst: EthernetAddress,
    pub src: EthernetAddress,
}

/// A copy of the router's forwarding state (see the module documentation).
pub trait RouteSync: Send + std::fmt::Debug {
    /// The route for exactly `prefix` now designates `target` (new or replaced).
    fn route_set(&mut self, prefix: Prefix, target: RouteTarget);
    /// The route for exactly `prefix` is gone (a shorter one may now match).
    fn route_removed(&mut self, prefix: Prefix);
    /// Every route is replaced by `routes`, which may be a million: the copy must not take
    /// them in on the caller's thread, and must not forward by the old ones meanwhile.
    fn routes_replaced(&mut self, routes: Vec<(Prefix, RouteTarget)>);
    /// The rewrites of every resolved gateway hop now, replacing the last set.
    fn rewrites(&mut self, rewrites: &[GatewayRewrite]);
    /// The copy must forward nothing more, for good: the router's decisions now need what it
    /// cannot apply (an ACL loaded at run time). No other call follows.
    fn stop_forwarding(&mut self);
    /// Entries the copy could not take (it was full); their packets stay on the user-space path.
    fn refused(&self) -> u64 {
        0
    }
}

/// The router's side of a [`RouteSync`]: what it last told it.
#[derive(Debug)]
pub(crate) struct RouteMirror {
    sync: Box<dyn RouteSync>,
    /// The neighbour-table generation the rewrites were read under; `None`: read them again.
    generation: Option<u64>,
    /// Scratch for the rewrites (kept to avoid an allocation per change).
    rewrites: Vec<GatewayRewrite>,
}

impl RouteMirror {
    /// Makes `sync` a copy of the router's current state.
    pub(crate) fn new(sync: Box<dyn RouteSync>, route: &Route) -> RouteMirror {
        let mut mirror = RouteMirror {
            sync,
            generation: None,
            rewrites: Vec::new(),
        };
        mirror.all_routes(route);
        mirror
    }

    /// Tells the copy to forward nothing more (see [`RouteSync::stop_forwarding`]).
    pub(crate) fn stop_forwarding(mut self) {
        self.sync.stop_forwarding();
    }

    /// The copy's count of refused entries.
    pub(crate) fn refused(&self) -> u64 {
        self.sync.refused()
    }

    /// Tells the copy of every route (after a bulk change) and to read the rewrites again.
    pub(crate) fn all_routes(&mut self, route: &Route) {
        let v4 = route
            .fib_v4()
            .routes()
            .map(|(prefix, next_hop)| (Prefix::V4(prefix), next_hop));
        let v6 = route
            .fib_v6()
            .routes()
            .map(|(prefix, next_hop)| (Prefix::V6(prefix), next_hop));
        let routes = v4
            .chain(v6)
            .map(|(prefix, next_hop)| (prefix, target(route, next_hop)))
            .collect();
        self.sync.routes_replaced(routes);
        self.generation = None;
    }

    /// Tells the copy what the FIB now holds for exactly `prefix` (after an add or a remove),
    /// and to read the rewrites again (the hop may be new).
    pub(crate) fn route_changed(&mut self, route: &Route, prefix: Prefix) {
        let now = match prefix {
            Prefix::V4(p) => route.fib_v4().route(p),
            Prefix::V6(p) => route.fib_v6().route(p),
        };
        match now {
            Some(next_hop) => self.sync.route_set(prefix, target(route, next_hop)),
            None => self.sync.route_removed(prefix),
        }
        self.generation = None;
    }

    /// Gives the copy the gateways' rewrites when the neighbour table or the hop table changed
    /// since the last time. Between batches: two compares when nothing changed.
    pub(crate) fn sync_rewrites(
        &mut self,
        route: &Route,
        neighbours: &NeighbourTable,
        interfaces: &Interfaces,
    ) {
        let generation = neighbours.generation();
        if self.generation == Some(generation) {
            return;
        }
        self.generation = Some(generation);
        self.rewrites.clear();
        for id in 0.. {
            let Some(hop) = route.hop(id) else {
                break;
            };
            let Hop::Gateway(key) = hop else {
                continue;
            };
            if let Lookup::Resolved(dst) = neighbours.lookup(&key) {
                let port = key.port();
                self.rewrites.push(GatewayRewrite {
                    hop: id,
                    port,
                    dst,
                    // As the neighbour stage writes it.
                    src: interfaces.mac(port).unwrap_or(EthernetAddress([0; 6])),
                });
            }
        }
        self.sync.rewrites(&self.rewrites);
    }
}

/// What `next_hop` designates, as the copy needs it.
fn target(route: &Route, next_hop: NextHop) -> RouteTarget {
    if next_hop.is_ecmp() {
        return RouteTarget::Ecmp;
    }
    match route.hop(next_hop.id()) {
        Some(Hop::Local) => RouteTarget::Local,
        _ => RouteTarget::Hop(next_hop.id()),
    }
}
