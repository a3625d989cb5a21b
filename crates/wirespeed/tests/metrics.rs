//! `wirespeed switch --metrics`: Prometheus scrapes the switch while it forwards, the
//! exposition passes `promtool check metrics` (Debian's prometheus package), and its counters
//! agree with `ctl show counters`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use wirespeed_packet::FramePool;
use wirespeed_testkit::ports::send;

mod common;
use common::*;

/// Where the switch serves, inside the lab's DuT namespace.
const METRICS: &str = "127.0.0.1:19417";

/// `GET /metrics` from inside namespace `ns`, asking for OpenMetrics as Prometheus does or for
/// the older text format as `promtool` reads it; returns the body.
fn scrape(ns: &str, openmetrics: bool) -> String {
    let _inside = wirespeed_lab::enter(ns).unwrap();
    let mut stream = TcpStream::connect(METRICS).expect("the metrics endpoint listens");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let accept = if openmetrics {
        "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
    } else {
        "text/plain"
    };
    write!(
        stream,
        "GET /metrics HTTP/1.0\r\nHost: wirespeed\r\nAccept: {accept}\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "{head}"
    );
    let content_type = if openmetrics {
        "application/openmetrics-text"
    } else {
        "text/plain; version=0.0.4"
    };
    assert!(head.contains(content_type), "{head}");
    body.to_string()
}

/// The value of the sample `series` (name and labels exactly as exposed).
fn sample(body: &str, series: &str) -> u64 {
    body.lines()
        // Histogram sums are written as floats (`301.0`).
        .find_map(|line| Some(line.strip_prefix(series)?.trim().parse::<f64>().ok()? as u64))
        .unwrap_or_else(|| panic!("no sample {series} in\n{body}"))
}

/// A port's `tx packets` as the `ctl show counters` table prints it.
fn ctl_tx_packets(socket: &std::path::Path, port: &str) -> u64 {
    let out = Command::new(env!("CARGO_BIN_EXE_wirespeed"))
        .args(["ctl", "--socket"])
        .arg(socket)
        .args(["show", "ports"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}");
    // Columns are right-aligned under their headings (the mode column holds spaces).
    let header = text.lines().next().unwrap_or_default();
    let end = header.find("tx packets").expect("a tx packets column") + "tx packets".len();
    let row = text
        .lines()
        .find(|line| line.split_whitespace().nth(1) == Some(port))
        .unwrap_or_else(|| panic!("no row for {port} in\n{text}"));
    row[..end]
        .split_whitespace()
        .last()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn prometheus_scrapes_a_forwarding_switch_and_its_counters_agree_with_ctl() {
    let prefix = "wstmx";
    let Some((lab, dir)) = lab(prefix, 1) else {
        return;
    };
    // A bridge with an ACL, for tables and a cache to show; the frames flood from p0 to p1.
    let config = xconnect_config(&lab, "backend = \"afpacket\"")
        .replace("app = \"xconnect\"", "app = \"bridge\"")
        .replace(
            "[xconnect]\npairs = [[\"p0\", \"p1\"]]\n",
            "[acl]\n[[acl.rule]]\naction = \"deny\"\nproto = \"udp\"\ndst_port = 53\n",
        );
    let mut switch = Switch::start_with(&lab, &config, &dir, &["--metrics", METRICS]);
    let socket = std::path::PathBuf::from(format!("/run/wirespeed/{}.sock", lab.dut_ns));
    let mut pool = FramePool::new(4096, 2048).unwrap();
    let (mut t0, mut t1) = (tester_port(&lab, 0), tester_port(&lab, 1));
    wait_until_forwarding(&mut t0, &mut t1, &mut pool);
    let burst = frames(300);
    for chunk in burst.chunks(50) {
        send(&mut t0, &mut pool, chunk);
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(
        receive_all(&mut t1, &mut pool, burst.len(), TEST_PORT).len(),
        burst.len()
    );
    // The workers publish every few milliseconds; then the scrape and ctl see the same state.
    std::thread::sleep(Duration::from_millis(300));

    let series = "wirespeed_port_tx_packets_total{worker=\"0\",port=\"p1\"}";
    let before = scrape(&lab.dut_ns, true);
    let ctl = ctl_tx_packets(&socket, "p1");
    let after = scrape(&lab.dut_ns, true);
    let (first, second) = (sample(&before, series), sample(&after, series));
    assert!(first >= 301, "{first}");
    assert!(
        first <= ctl && ctl <= second,
        "scrape {first}, ctl {ctl}, scrape {second}"
    );
    for expected in [
        "# TYPE wirespeed_worker_drops counter",
        "wirespeed_worker_drops_total{worker=\"0\",reason=\"tx_full\"}",
        "wirespeed_worker_cycles_total{worker=\"0\",part=\"process\"}",
        "wirespeed_port_rx_bytes_total{worker=\"0\",port=\"p0\"}",
        "wirespeed_port_up{worker=\"0\",port=\"p0\"} 1",
        "wirespeed_build_info{version=",
        "# TYPE wirespeed_worker_rx_batch_size histogram",
        "wirespeed_worker_rx_batch_size_bucket{le=\"256.0\",worker=\"0\"}",
        "wirespeed_table_entries{worker=\"0\",table=\"mac\"}",
        "wirespeed_table_capacity{worker=\"0\",table=\"mac\"} 8192",
        "wirespeed_table_entries{worker=\"0\",table=\"acl_rules\"} 1",
        "wirespeed_cache_hits_total{worker=\"0\",cache=\"acl\"}",
        "wirespeed_cache_misses_total{worker=\"0\",cache=\"acl\"}",
        "wirespeed_pool_frames{worker=\"0\"}",
        "wirespeed_pool_free_frames{worker=\"0\"}",
    ] {
        assert!(
            before.contains(expected),
            "{expected} missing from\n{before}"
        );
    }

    // The batch histogram counts every frame received once: its sum is the worker's frames,
    // its count the batches, its +Inf bucket all of them.
    let received = sample(&before, "wirespeed_worker_rx_packets_total{worker=\"0\"}");
    let batches = sample(
        &before,
        "wirespeed_worker_rx_batch_size_count{worker=\"0\"}",
    );
    assert_eq!(
        sample(&before, "wirespeed_worker_rx_batch_size_sum{worker=\"0\"}"),
        received
    );
    assert!(
        0 < batches && batches <= received,
        "{batches} batches of {received}"
    );
    assert_eq!(
        sample(
            &before,
            "wirespeed_worker_rx_batch_size_bucket{le=\"+Inf\",worker=\"0\"}"
        ),
        batches
    );
    // Every frame the ACL saw was a cache hit or a scan.
    let looked = sample(
        &before,
        "wirespeed_cache_hits_total{worker=\"0\",cache=\"acl\"}",
    ) + sample(
        &before,
        "wirespeed_cache_misses_total{worker=\"0\",cache=\"acl\"}",
    );
    assert!(looked >= 301, "{looked}");

    // Every metric the Grafana dashboard in docs/ queries is one the switch exposes (the fast
    // path's only where a fast path is in force, which this switch has not).
    let dashboard = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/grafana/wirespeed.json"
    ))
    .unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&dashboard).unwrap();
    let mut queried = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            for (start, _) in expr.match_indices("wirespeed_") {
                let name: String = expr[start..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                queried.push(name);
            }
        }
    }
    assert!(queried.len() >= 10, "{queried:?}");
    for name in queried {
        let fast_path = name.starts_with("wirespeed_fast_path_");
        assert!(
            fast_path || before.contains(&format!("\n{name}{{")),
            "the dashboard queries {name}, which the switch does not expose"
        );
    }

    // Prometheus's own linter accepts the exposition (it reads the older text format).
    let text = scrape(&lab.dut_ns, false);
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool (Debian's prometheus package, installed by `make setup`)");
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let checked = promtool.wait_with_output().unwrap();
    assert!(
        checked.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );

    let (success, out) = switch.interrupt();
    assert!(success, "switch failed:\n{out}");
    assert!(
        out.contains("metrics at http://127.0.0.1:19417/metrics"),
        "{out}"
    );
    drop(lab);
    wirespeed_lab::assert_gone_for_test(prefix);
}
