//! How full the OpenFlow app's tables are and how its two caches answer, for the metrics: the
//! flow tables, the megaflows and the exact-match cache, each against its capacity; the exact
//! cache's hits against its misses, and the megaflows' hits against the slow path's walks.

use super::OpenFlow;
use crate::app::{CacheLookups, TableFill};

impl OpenFlow {
    /// [`App::tables`](crate::app::App::tables).
    pub(super) fn append_tables(&self, out: &mut Vec<TableFill>) {
        let flows = &self.pipeline.tables;
        let megaflows = self.lookup.classifier();
        let cache = self.lookup.cache();
        out.extend([
            TableFill::new(
                "flows",
                flows.iter().map(|t| t.len()).sum(),
                Some(flows.iter().map(|t| t.capacity()).sum()),
            ),
            TableFill::new("megaflows", megaflows.len(), Some(megaflows.capacity())),
            TableFill::new("flow_cache", cache.len(), Some(cache.capacity())),
        ]);
    }

    /// [`App::caches`](crate::app::App::caches): a packet the exact cache misses is answered
    /// by a megaflow or walks the tables (the three never overlap).
    pub(super) fn append_caches(&self, out: &mut Vec<CacheLookups>) {
        let c = self.counters();
        out.extend([
            CacheLookups {
                cache: "flow_cache",
                hits: c.cache_hits,
                misses: c.classifier_hits + c.slow_path,
            },
            CacheLookups {
                cache: "megaflows",
                hits: c.classifier_hits,
                misses: c.slow_path,
            },
        ]);
    }
}
