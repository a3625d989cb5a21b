//! How full the router's tables are, for the metrics: neighbours against their capacity, the
//! routes of each family (connected and local ones included), and what limits a FIB's size,
//! its memory for prefixes longer than /24 (IPv4's tbl8 groups) or its trie nodes (IPv6);
//! and the ACL's rules and cache where there is one.

use super::Router;
use crate::app::{CacheLookups, TableFill};

impl Router {
    /// [`App::tables`](crate::app::App::tables).
    pub(super) fn append_tables(&self, out: &mut Vec<TableFill>) {
        let (v4, v6) = (self.route.fib_v4(), self.route.fib_v6());
        out.extend([
            TableFill {
                table: "neighbours",
                entries: self.neighbours.len() as u64,
                capacity: Some(self.neighbours.capacity() as u64),
            },
            TableFill {
                table: "routes_v4",
                entries: v4.len() as u64,
                capacity: None,
            },
            TableFill {
                table: "routes_v4_tbl8_groups",
                entries: v4.tbl8_groups_in_use() as u64,
                capacity: Some(u64::from(v4.tbl8_limit())),
            },
            TableFill {
                table: "routes_v6",
                entries: v6.len() as u64,
                capacity: None,
            },
            TableFill {
                table: "routes_v6_nodes",
                entries: v6.nodes_in_use() as u64,
                capacity: Some(u64::from(v6.node_limit())),
            },
        ]);
        if let Some(acl) = &self.acl {
            acl.append_tables(out);
        }
    }

    /// [`App::caches`](crate::app::App::caches): the ACL's, where there is one.
    pub(super) fn append_caches(&self, out: &mut Vec<CacheLookups>) {
        if let Some(acl) = &self.acl {
            acl.append_caches(out);
        }
    }
}
