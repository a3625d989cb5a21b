//! A Prometheus stand-in for benchmarks: scrapes a DuT's metrics endpoint at a fixed interval
//! from inside its namespace for as long as it runs, so that `bench forwarding` can measure what
//! being watched costs the DuT (a DuT `NAME+scrape` beside `NAME`, interleaved).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Scrapes until dropped.
#[derive(Debug)]
pub struct Scraper {
    stop: Arc<AtomicBool>,
    counts: Arc<[AtomicU64; 2]>,
    thread: Option<JoinHandle<()>>,
}

impl Scraper {
    /// Starts scraping `http://addr/metrics` in network namespace `ns` every `every`.
    pub fn start(ns: &str, addr: SocketAddr, every: Duration) -> Result<Scraper, String> {
        let stop = Arc::new(AtomicBool::new(false));
        // Scrapes that answered with a body, and those that failed.
        let counts: Arc<[AtomicU64; 2]> = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let (ns, thread_stop, thread_counts) =
            (ns.to_string(), Arc::clone(&stop), Arc::clone(&counts));
        let (ready, entered) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("scraper".into())
            .spawn(move || {
                let inside =
                    wirespeed_lab::enter(&ns).map_err(|error| format!("entering {ns}: {error}"));
                let failed = inside.is_err();
                let _ = ready.send(inside.as_ref().map(|_| ()).map_err(Clone::clone));
                if failed {
                    return;
                }
                let mut next = Instant::now();
                while !thread_stop.load(Ordering::Relaxed) {
                    let index = usize::from(scrape(addr).is_err());
                    thread_counts[index].fetch_add(1, Ordering::Relaxed);
                    next += every;
                    std::thread::sleep(next.saturating_duration_since(Instant::now()));
                }
            })
            .map_err(|error| format!("starting the scraper: {error}"))?;
        entered
            .recv()
            .map_err(|_| "the scraper thread ended at once".to_string())??;
        Ok(Scraper {
            stop,
            counts,
            thread: Some(thread),
        })
    }

    /// Scrapes that answered, and those that failed, so far.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.counts[0].load(Ordering::Relaxed),
            self.counts[1].load(Ordering::Relaxed),
        )
    }
}

impl Drop for Scraper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One `GET /metrics`, the whole answer read.
fn scrape(addr: SocketAddr) -> std::io::Result<usize> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.write_all(
        b"GET /metrics HTTP/1.0\r\nAccept: application/openmetrics-text;version=1.0.0\r\n\r\n",
    )?;
    let mut body = Vec::new();
    stream.read_to_end(&mut body)?;
    if body.starts_with(b"HTTP/1.0 200") || body.starts_with(b"HTTP/1.1 200") {
        Ok(body.len())
    } else {
        Err(std::io::Error::other("not a 200 answer"))
    }
}
