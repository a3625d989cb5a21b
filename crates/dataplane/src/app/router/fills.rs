//! How full the router's tables are, for the metrics: neighbours against their capacity, the
//! routes of each family (connected and local ones included), and what limits a FIB's size,
//! its memory for prefixes longer than /24 (IPv4's tbl8 groups) or its trie nodes (IPv6, and
//! Poptrie's for both with `[router] fib = "trie"`);
//! and the ACL's rules and cache where there is one.

use super::Router;
use crate::app::{CacheLookups, TableFill};

impl Router {
    /// [`App::tables`](crate::app::App::tables).
    pub(super) fn append_tables(&self, out: &mut Vec<TableFill>) {
        let (v4, v6) = (self.route.fib_v4(), self.route.fib_v6());
        let (usage4, usage6) = (v4.usage(), v6.usage());
        out.extend([
            TableFill::new(
                "neighbours",
                self.neighbours.len(),
                Some(self.neighbours.capacity()),
            ),
            TableFill::new("routes_v4", v4.len(), None),
            TableFill::new(usage4.0, usage4.1, Some(usage4.2)),
            TableFill::new("routes_v6", v6.len(), None),
            TableFill::new(usage6.0, usage6.1, Some(usage6.2)),
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
