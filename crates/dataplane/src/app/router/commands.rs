//! The router's control commands: what `wirespeed ctl` and the control socket ask of a running
//! router (routes, neighbours, the ACL, the tables to show), applied between batches.

use std::net::IpAddr;

use wirespeed_packet::wire::EthernetAddress;

use super::{Gateway, Prefix, Router, RouterError, StaticNeighbour, StaticRoute};
use crate::app::{CommandContext, fields};
use crate::command::{AppCommand, AppReply, Retired};

impl Router {
    /// One control command ([`App::command`]).
    pub(super) fn apply(&mut self, command: AppCommand, ctx: &CommandContext<'_>) -> AppReply {
        let done = |result: Result<(), RouterError>| match result {
            Ok(()) => AppReply::Done,
            Err(error) => AppReply::Refused(error.to_string()),
        };
        let removed = |found: bool, prefix: &dyn std::fmt::Display| {
            if found {
                AppReply::Done
            } else {
                AppReply::Refused(format!(
                    "no route for exactly {prefix}; `show routes` lists them"
                ))
            }
        };
        match command {
            AppCommand::RouteAddV4 { prefix, via } => done(self.add_route(&StaticRoute {
                prefix: Prefix::V4(prefix),
                via: vec![Gateway::new(IpAddr::V4(via))],
            })),
            AppCommand::RouteAddV6 { prefix, via } => done(self.add_route(&StaticRoute {
                prefix: Prefix::V6(prefix),
                via: vec![Gateway::new(IpAddr::V6(via))],
            })),
            AppCommand::RouteSet(route) => done(self.add_route(&route)),
            AppCommand::RouteRemoveV4(prefix) => {
                removed(self.remove_route(Prefix::V4(prefix)), &prefix)
            }
            AppCommand::RouteRemoveV6(prefix) => {
                removed(self.remove_route(Prefix::V6(prefix)), &prefix)
            }
            AppCommand::ReplaceFib(routes) => match self.adopt_routes(routes) {
                Ok(old) => AppReply::Retired(Retired::Fib(old)),
                Err(error) => AppReply::Refused(error.to_string()),
            },
            AppCommand::NeighbourAdd(neighbour) => {
                let Some(port) = ctx.port_index(&neighbour.port) else {
                    return AppReply::Refused(format!(
                        "no port named {}; the ports are: {}",
                        neighbour.port,
                        ctx.port_names()
                    ));
                };
                done(self.add_neighbour(&StaticNeighbour {
                    port,
                    addr: neighbour.addr,
                    mac: EthernetAddress(neighbour.mac),
                }))
            }
            AppCommand::NeighbourRemove(addr) => {
                if self.remove_neighbour(addr) > 0 {
                    AppReply::Done
                } else {
                    AppReply::Refused(format!("no neighbour {addr}; `show neighbours` lists them"))
                }
            }
            AppCommand::ShowRoutes => AppReply::Table(self.route_table(ctx)),
            AppCommand::ShowNeighbours => AppReply::Table(self.neighbour_table(ctx)),
            AppCommand::ReplaceAcl(rules) => match fields::acl_rules(&rules) {
                Ok(typed) => {
                    self.set_acl(&typed);
                    AppReply::Retired(Retired::Acl(rules))
                }
                Err(error) => AppReply::Refused(format!("acl: {error}")),
            },
            _ => AppReply::Unsupported,
        }
    }
}
