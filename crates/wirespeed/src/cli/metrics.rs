//! `wirespeed switch --metrics ADDR:PORT`: the switch's counters for Prometheus.
//!
//! A thread of its own serves `GET /metrics` in the OpenMetrics text format (the official
//! client's encoder, `prometheus-client`). Every scrape reads the snapshots the workers publish
//! for `ctl` and the `--stats-interval` lines ([`StatsCell`], which a worker fills only when it
//! gets the lock at once, so a scrape never stalls one) and the XDP fast path's per-CPU
//! counters, and encodes them afresh: the figures are the ones `ctl show counters` prints.
//!
//! Metrics (all counters end in `_total`; labels `worker`, `port`, `reason`, `part`):
//! * `wirespeed_port_{rx,tx}_packets_total`, `wirespeed_port_{rx,tx}_bytes_total`,
//!   `wirespeed_port_rx_dropped_total` (the kernel had no room), `wirespeed_port_tx_refused_total`
//!   (the TX ring had no room), `wirespeed_port_rx_errors_total`, `wirespeed_port_up` (0 once
//!   the port failed: its interface deleted, its capture unwritable);
//! * `wirespeed_worker_{rx,tx}_packets_total`, `wirespeed_worker_drops_total{reason}` (every
//!   drop reason, zeros included, so a rate query never misses a series),
//!   `wirespeed_worker_cycles_total{part}` (TSC cycles in rx, process, tx and idle),
//!   `wirespeed_worker_empty_polls_total`, `wirespeed_worker_sleeps_total`,
//!   `wirespeed_worker_iterations_total`;
//! * `wirespeed_worker_rx_batch_size` (a histogram of the receive batches' sizes, buckets at
//!   the powers of two up to the largest batch; the worker counts a batch in a fixed array,
//!   once per batch, and its `_sum` is the frames received);
//! * `wirespeed_app_value{counter}`: the app's own counters and table fills, by the names
//!   `ctl show counters` uses (a gauge: some are table sizes);
//! * `wirespeed_table_entries{table}` and `wirespeed_table_capacity{table}` (MAC, neighbours,
//!   routes per family and what limits them, flows, megaflows, the flow cache, ACL rules; a
//!   table without a fixed capacity has no capacity series),
//!   `wirespeed_cache_{hits,misses}_total{cache}` (the flow cache, the megaflows, the ACL's
//!   cache), `wirespeed_pool_frames` and `wirespeed_pool_free_frames` (the worker's frames);
//! * `wirespeed_fast_path_{rx,tx}_forwarded_packets_total` and
//!   `wirespeed_fast_path_to_user_packets_total{reason}` when the XDP fast path is in force;
//! * `wirespeed_build_info{version}`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{Context, Result};
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::{Registry, Unit};
use wirespeed_dataplane::worker::{BATCH_BUCKETS, StatsCell, WorkerSnapshot};
use wirespeed_fastpath::{FastPath, ToUser};
use wirespeed_packet::DropReason;

use super::privileges;

type Labels = Vec<(&'static str, String)>;

/// What a scrape reads.
pub struct Source {
    /// One per worker, the cells the workers publish into.
    pub cells: Vec<Arc<StatsCell>>,
    pub fast_path: Option<Arc<FastPath>>,
}

/// The endpoint's thread; dropping it stops the server and joins the thread.
pub struct MetricsServer {
    server: Arc<tiny_http::Server>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Listens on `addr` now (so a port in use is an error at start-up) and serves from a
    /// thread that first keeps only the capabilities `kept`.
    pub fn start(addr: SocketAddr, source: Source, kept: privileges::Kept) -> Result<Self> {
        let server = tiny_http::Server::http(addr)
            .map_err(|error| anyhow::anyhow!("{error}"))
            .with_context(|| {
                format!("--metrics {addr}: cannot listen there (another process on the port?)")
            })?;
        let server = Arc::new(server);
        let serving = Arc::clone(&server);
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || {
                if let Err(error) = kept.drop_the_rest() {
                    eprintln!("{}", error.in_thread("metrics"));
                    return;
                }
                serve(&serving, &source);
            })
            .context("starting the metrics thread")?;
        Ok(MetricsServer {
            server,
            thread: Some(thread),
        })
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The content type of OpenMetrics, which Prometheus asks for first.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of Prometheus's older text format, for every other client.
const TEXT_0_0_4: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Answers requests until the server is unblocked: `/metrics` with the exposition (OpenMetrics
/// when the client accepts it, as Prometheus does, else the older text format that `promtool`,
/// `curl` users and older scrapers read), anything else with 404. A client that goes away
/// mid-answer costs nothing but its own answer.
fn serve(server: &tiny_http::Server, source: &Source) {
    for request in server.incoming_requests() {
        let path = request.url().split('?').next().unwrap_or_default();
        let response = if path == "/metrics" && *request.method() == tiny_http::Method::Get {
            let openmetrics = request.headers().iter().any(|header| {
                header.field.equiv("Accept")
                    && header
                        .value
                        .as_str()
                        .contains("application/openmetrics-text")
            });
            let text = exposition(source);
            let (body, content_type) = if openmetrics {
                (text, OPENMETRICS)
            } else {
                (text_format_0_0_4(&text), TEXT_0_0_4)
            };
            let mut response = tiny_http::Response::from_string(body);
            if let Ok(header) = tiny_http::Header::from_bytes("Content-Type", content_type) {
                response.add_header(header);
            }
            response
        } else {
            tiny_http::Response::from_string("wirespeed serves GET /metrics only\n")
                .with_status_code(404)
        };
        let _ = request.respond(response);
    }
}

/// The whole exposition, read from `source` now.
pub fn exposition(source: &Source) -> String {
    let snapshots: Vec<WorkerSnapshot> = source
        .cells
        .iter()
        .map(|cell| cell.lock().map(|s| s.clone()).unwrap_or_default())
        .collect();
    let mut registry = Registry::with_prefix("wirespeed");
    // A gauge of 1, as exporters write build information in the text format promtool and
    // older scrapers read (OpenMetrics' info type is newer).
    gauges(
        &mut registry,
        "build_info",
        "The wirespeed build serving these metrics",
    )
    .get_or_create(&vec![("version", env!("CARGO_PKG_VERSION").to_string())])
    .set(1);
    register_ports(&mut registry, &snapshots);
    register_workers(&mut registry, &snapshots);
    register_batches(&mut registry, &snapshots);
    register_tables(&mut registry, &snapshots);
    if let Some(fast_path) = &source.fast_path {
        register_fast_path(&mut registry, fast_path);
    }
    let mut text = String::new();
    encode(&mut text, &registry).expect("encoding into a String cannot fail");
    text
}

/// `openmetrics` (this module's exposition) in Prometheus's text format 0.0.4: a counter's
/// HELP and TYPE name its samples (`x_total`, where OpenMetrics names the family `x`), and the
/// UNIT and EOF lines, which that format lacks, go.
fn text_format_0_0_4(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut help: Option<(&str, &str)> = None;
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = rest.split_once(' ').or(Some((rest, "")));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let suffix = if kind == "counter" { "_total" } else { "" };
            if let Some((help_name, text)) = help.take() {
                out.push_str(&format!("# HELP {help_name}{suffix} {text}\n"));
            }
            out.push_str(&format!("# TYPE {name}{suffix} {kind}\n"));
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// A counter family registered under `name`; `unit` makes Prometheus's unit suffix.
fn counters(
    registry: &mut Registry,
    name: &str,
    help: &str,
    unit: Option<Unit>,
) -> Family<Labels, Counter> {
    let family = Family::<Labels, Counter>::default();
    match unit {
        Some(unit) => registry.register_with_unit(name, help, unit, family.clone()),
        None => registry.register(name, help, family.clone()),
    }
    family
}

fn gauges(registry: &mut Registry, name: &str, help: &str) -> Family<Labels, Gauge> {
    let family = Family::<Labels, Gauge>::default();
    registry.register(name, help, family.clone());
    family
}

fn set(family: &Family<Labels, Counter>, labels: Labels, value: u64) {
    family.get_or_create(&labels).inc_by(value);
}

fn register_ports(registry: &mut Registry, snapshots: &[WorkerSnapshot]) {
    let rx_packets = counters(registry, "port_rx_packets", "Frames received", None);
    let tx_packets = counters(registry, "port_tx_packets", "Frames transmitted", None);
    let rx_bytes = counters(registry, "port_rx", "Bytes received", Some(Unit::Bytes));
    let tx_bytes = counters(registry, "port_tx", "Bytes transmitted", Some(Unit::Bytes));
    let rx_dropped = counters(
        registry,
        "port_rx_dropped",
        "Frames the kernel dropped for want of room toward the port",
        None,
    );
    let tx_refused = counters(
        registry,
        "port_tx_refused",
        "Frames the port's TX ring had no room for",
        None,
    );
    let rx_errors = counters(registry, "port_rx_errors", "Receive errors", None);
    let up = gauges(
        registry,
        "port_up",
        "1 while the port works, 0 once it failed",
    );
    for (worker, snapshot) in snapshots.iter().enumerate() {
        for (info, stats) in &snapshot.ports {
            let labels = || vec![("worker", worker.to_string()), ("port", info.name.clone())];
            set(&rx_packets, labels(), stats.rx_packets);
            set(&tx_packets, labels(), stats.tx_packets);
            set(&rx_bytes, labels(), stats.rx_bytes);
            set(&tx_bytes, labels(), stats.tx_bytes);
            set(&rx_dropped, labels(), stats.rx_dropped);
            set(&tx_refused, labels(), stats.tx_refused);
            set(&rx_errors, labels(), stats.rx_errors);
            // Worker::faults says "port NAME: why".
            let prefix = format!("port {}:", info.name);
            let failed = snapshot
                .faults
                .iter()
                .any(|fault| fault.starts_with(&prefix));
            up.get_or_create(&labels()).set(i64::from(!failed));
        }
    }
}

fn register_workers(registry: &mut Registry, snapshots: &[WorkerSnapshot]) {
    let rx = counters(
        registry,
        "worker_rx_packets",
        "Frames the worker received",
        None,
    );
    let tx = counters(
        registry,
        "worker_tx_packets",
        "Frames the worker sent",
        None,
    );
    let drops = counters(
        registry,
        "worker_drops",
        "Frames the worker dropped, by reason",
        None,
    );
    let cycles = counters(
        registry,
        "worker_cycles",
        "TSC cycles by part of the loop (rx, process, tx, idle)",
        None,
    );
    let empty = counters(
        registry,
        "worker_empty_polls",
        "Receive polls that found nothing",
        None,
    );
    let sleeps = counters(registry, "worker_sleeps", "Sleeps in poll(2)", None);
    let iterations = counters(registry, "worker_iterations", "Loop iterations", None);
    let app = gauges(
        registry,
        "app_value",
        "The app's counters and table fills, as ctl show counters names them",
    );
    for (worker, snapshot) in snapshots.iter().enumerate() {
        let id = worker.to_string();
        let labels = || vec![("worker", id.clone())];
        let c = &snapshot.counters;
        set(&rx, labels(), c.rx_packets);
        set(&tx, labels(), c.tx_packets);
        set(&empty, labels(), c.empty_polls);
        set(&sleeps, labels(), c.sleeps);
        set(&iterations, labels(), c.iterations);
        for reason in DropReason::ALL {
            let mut labels = labels();
            labels.push(("reason", reason.name().to_string()));
            set(&drops, labels, c.drops[reason as usize]);
        }
        for (part, value) in [
            ("rx", c.cycles.rx),
            ("process", c.cycles.process),
            ("tx", c.cycles.tx),
            ("idle", c.cycles.idle),
        ] {
            let mut labels = labels();
            labels.push(("part", part.to_string()));
            set(&cycles, labels, value);
        }
        for (name, value) in &snapshot.app {
            let mut labels = labels();
            labels.push(("counter", (*name).to_string()));
            app.get_or_create(&labels)
                .set(i64::try_from(*value).unwrap_or(i64::MAX));
        }
    }
}

/// A histogram a worker counted itself: counts per bucket of [`BATCH_BUCKETS`] and their
/// sum, set once per scrape (the client's own histogram observes values one by one).
#[derive(Debug, Default)]
struct Counted(std::sync::OnceLock<([u64; BATCH_BUCKETS.len()], u64)>);

impl TypedMetric for Counted {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for Counted {
    fn encode(&self, mut encoder: MetricEncoder) -> std::fmt::Result {
        let (counts, sum) = self.0.get().copied().unwrap_or_default();
        // Per bucket, not cumulative: the encoder sums them; +Inf holds nothing more.
        let buckets: Vec<(f64, u64)> = BATCH_BUCKETS
            .iter()
            .zip(counts)
            .map(|(&le, count)| (le as f64, count))
            .chain([(f64::INFINITY, 0)])
            .collect();
        encoder.encode_histogram::<NoLabelSet>(sum as f64, counts.iter().sum(), &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

fn register_batches(registry: &mut Registry, snapshots: &[WorkerSnapshot]) {
    let family = Family::<Labels, Counted>::default();
    registry.register(
        "worker_rx_batch_size",
        "Sizes of the receive batches (packets per poll that returned any)",
        family.clone(),
    );
    for (worker, snapshot) in snapshots.iter().enumerate() {
        let c = &snapshot.counters;
        let _ = family
            .get_or_create(&vec![("worker", worker.to_string())])
            .0
            .set((c.batch_sizes, c.rx_packets));
    }
}

fn register_tables(registry: &mut Registry, snapshots: &[WorkerSnapshot]) {
    let entries = gauges(
        registry,
        "table_entries",
        "Entries in use in the app's tables",
    );
    let capacity = gauges(
        registry,
        "table_capacity",
        "The most entries the app's tables hold (tables without a fixed capacity have none)",
    );
    let hits = counters(
        registry,
        "cache_hits",
        "Lookups the app's caches answered",
        None,
    );
    let misses = counters(
        registry,
        "cache_misses",
        "Lookups the app's caches passed on to the tables behind them",
        None,
    );
    let pool = gauges(registry, "pool_frames", "Frames of the worker's pool");
    let free = gauges(
        registry,
        "pool_free_frames",
        "Frames of the worker's pool that are free (neither in a ring nor in a batch)",
    );
    let gauge = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
    for (worker, snapshot) in snapshots.iter().enumerate() {
        let id = worker.to_string();
        let labels = |name: &'static str, value: &str| {
            vec![("worker", id.clone()), (name, value.to_string())]
        };
        for fill in &snapshot.tables {
            let labels = || labels("table", fill.table);
            entries.get_or_create(&labels()).set(gauge(fill.entries));
            if let Some(most) = fill.capacity {
                capacity.get_or_create(&labels()).set(gauge(most));
            }
        }
        for cache in &snapshot.caches {
            set(&hits, labels("cache", cache.cache), cache.hits);
            set(&misses, labels("cache", cache.cache), cache.misses);
        }
        let labels = vec![("worker", id.clone())];
        pool.get_or_create(&labels)
            .set(i64::from(snapshot.pool_total));
        free.get_or_create(&labels)
            .set(i64::from(snapshot.pool_free));
    }
}

fn register_fast_path(registry: &mut Registry, fast_path: &FastPath) {
    let rx = counters(
        registry,
        "fast_path_rx_forwarded_packets",
        "Frames received on the port that the kernel forwarded (XDP fast path)",
        None,
    );
    let tx = counters(
        registry,
        "fast_path_tx_forwarded_packets",
        "Frames the kernel forwarded out of the port (XDP fast path)",
        None,
    );
    let to_user = counters(
        registry,
        "fast_path_to_user_packets",
        "Frames the fast path handed to user space, by reason",
        None,
    );
    let dropped = counters(
        registry,
        "fast_path_dropped_packets",
        "Frames received on the port that the kernel dropped (an OpenFlow flow without an output)",
        None,
    );
    for (name, port) in fast_path.port_names().iter().zip(fast_path.counters()) {
        let labels = || vec![("port", name.clone())];
        set(&rx, labels(), port.rx_forwarded.packets);
        set(&tx, labels(), port.tx_forwarded.packets);
        set(&dropped, labels(), port.dropped.packets);
        for reason in ToUser::ALL {
            let mut labels = labels();
            labels.push(("reason", reason.name().to_string()));
            set(&to_user, labels, port.to_user(reason));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::text_format_0_0_4;

    #[test]
    fn the_older_text_format_names_counters_by_their_samples() {
        let openmetrics = "# HELP x_rx_bytes Bytes received.\n# TYPE x_rx_bytes counter\n\
                           # UNIT x_rx_bytes bytes\n\
                           x_rx_bytes_total{port=\"p0\"} 5\n# HELP x_up Up.\n# TYPE x_up gauge\n\
                           x_up 1\n# EOF\n";
        assert_eq!(
            text_format_0_0_4(openmetrics),
            "# HELP x_rx_bytes_total Bytes received.\n# TYPE x_rx_bytes_total counter\n\
             x_rx_bytes_total{port=\"p0\"} 5\n# HELP x_up Up.\n# TYPE x_up gauge\nx_up 1\n"
        );
    }
}
