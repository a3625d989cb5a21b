//! wirespeed's own generators as a [`Backend`]: a thread of this process, pinned to the
//! generator core, sends out of `t0` until it is stopped, either pre-filled frames over an
//! AF_XDP socket (copy mode, as veth allows) or an AF_PACKET socket (TX ring, qdisc bypass)
//! with [`blast`], its count being what the socket took, or the template's frame run by the
//! kernel itself with [`live`] (`xdp-live`: `BPF_PROG_TEST_RUN` with live frames, no socket and
//! no skb), its count being the frames the calls ran.
//!
//! The thread opens its socket inside the tester namespace and reports back once it is about
//! to send, so [`Backend::start`] returns with frames flowing or with the reason they do not.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use wirespeed_io::Port;
use wirespeed_io::afpacket::{AfPacketConfig, AfPacketPort};
use wirespeed_io::afxdp::{AfXdpConfig, AfXdpPort, Umem, interface_mtu};
use wirespeed_packet::FramePool;
use wirespeed_packet::pool::frame_size_for_mtu;

use super::backend::{Backend, Spec};
use super::live::{self, LiveConfig};
use super::{BlastConfig, Template, TemplateConfig, blast, prefill};
use crate::bench::placement::{Placed, place_this_thread};
use crate::dut::Wiring;

/// Frames in the generator's pool (as the forwarding benchmark's generator has).
const FRAMES: u32 = 16384;
/// Frames per TX batch (as the forwarding benchmark's generator sends).
const BATCH: usize = 64;
/// Sending lasts until the backend is stopped; this only bounds it.
const FOREVER: Duration = Duration::from_secs(24 * 3600);
/// After the stop, how long the socket is kicked so that the frames still in its TX ring
/// (up to 2048) leave before it closes, and the count of what the socket took is what `t0`
/// sent (2048 frames take about 2 ms at the generators' rates).
const DRAIN: Duration = Duration::from_millis(50);
/// Longest wait for the thread to open its socket.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// How the generator sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sender {
    /// [`blast`] through a socket.
    Socket(Socket),
    /// No socket: the in-kernel live-frame generator ([`live`]).
    XdpLive,
}

/// The kernel interface [`blast`] sends through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Socket {
    AfXdp,
    AfPacket,
}

/// The in-process generator backend.
#[derive(Debug)]
pub struct InProcess {
    sender: Sender,
    stop: Arc<AtomicBool>,
    /// The sending thread; it returns the frames its socket took.
    thread: Option<JoinHandle<Result<u64, String>>>,
}

impl InProcess {
    pub fn new(sender: Sender) -> Self {
        Self {
            sender,
            stop: Arc::new(AtomicBool::new(false)),
            thread: None,
        }
    }
}

impl Backend for InProcess {
    fn name(&self) -> String {
        match self.sender {
            Sender::Socket(Socket::AfXdp) => "afxdp",
            Sender::Socket(Socket::AfPacket) => "afpacket",
            Sender::XdpLive => "xdp-live",
        }
        .into()
    }

    fn description(&self) -> String {
        let socket = match self.sender {
            Sender::Socket(Socket::AfXdp) => "an AF_XDP socket (copy mode)",
            Sender::Socket(Socket::AfPacket) => "an AF_PACKET socket (TX ring, qdisc bypass)",
            Sender::XdpLive => {
                return "wirespeed's in-kernel generator (tester::generator::live) in a thread \
                        of this process: the template's frame run by BPF_PROG_TEST_RUN with \
                        live frames, an XDP program redirecting it out of the interface, calls \
                        of 0.25 s of frames"
                    .into();
            }
        };
        format!(
            "wirespeed's generator (tester::generator::blast) in a thread of this process, \
             batches of {BATCH} pre-filled frames through {socket}"
        )
    }

    fn start(&mut self, wiring: &Wiring, spec: &Spec) -> Result<Vec<Placed>, String> {
        self.stop()?;
        self.stop.store(false, Ordering::Relaxed);
        let template = Template::new(&TemplateConfig {
            frame_size: spec.frame_size,
            src_mac: wiring.ingress.tester_mac,
            dst_mac: spec.dst_mac,
            ..TemplateConfig::default()
        })
        .map_err(|error| error.to_string())?;
        let (ready, started) = mpsc::channel();
        let namespace = wiring.tester_ns.clone();
        let interface = wiring.ingress.tester_if.clone();
        let (sender, spec, stop) = (self.sender, spec.clone(), Arc::clone(&self.stop));
        let thread = std::thread::Builder::new()
            .name(format!("gen-{}", self.name()))
            .spawn(move || {
                let socket = match sender {
                    Sender::Socket(socket) => socket,
                    Sender::XdpLive => {
                        return run_live(&namespace, &interface, &spec, &template, &ready, &stop);
                    }
                };
                let opened = open(socket, &namespace, &interface, &spec, &template);
                let (mut port, mut pool, umem, placed) = match opened {
                    Ok(opened) => opened,
                    Err(error) => {
                        let _ = ready.send(Err(error.clone()));
                        return Err(error);
                    }
                };
                let _ = ready.send(Ok(placed));
                let config = BlastConfig {
                    batch: BATCH,
                    duration: FOREVER,
                    linger: DRAIN,
                    ..BlastConfig::default()
                };
                let result = blast(port.as_mut(), None, &mut pool, &template, &config, &stop);
                port.release_all(&mut pool);
                // The socket closes before its UMEM goes away.
                drop(port);
                drop(umem);
                Ok(result.sent)
            })
            .map_err(|error| format!("starting the generator thread: {error}"))?;
        self.thread = Some(thread);
        match started.recv_timeout(START_TIMEOUT) {
            Ok(Ok(placed)) => Ok(vec![placed]),
            Ok(Err(error)) => Err(error),
            Err(_) => Err(format!(
                "the generator thread did not open {} within {} s",
                wiring.ingress.tester_if,
                START_TIMEOUT.as_secs()
            )),
        }
    }

    fn stop(&mut self) -> Result<u64, String> {
        let Some(thread) = self.thread.take() else {
            return Ok(0);
        };
        self.stop.store(true, Ordering::Relaxed);
        thread
            .join()
            .map_err(|_| "the generator thread panicked".to_string())?
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// What the sending thread holds: the port, its pool, the UMEM an AF_XDP port needs alive
/// (dropped after the port), and the thread's placement.
type Opened = (Box<dyn Port>, FramePool, Umem, Placed);

/// Pins and renices the calling thread; returns it as read back.
fn pin(spec: &Spec) -> Result<Placed, String> {
    let core = spec.core;
    wirespeed_io::thread::pin_to_core(core)
        .map_err(|error| format!("pinning the generator to CPU {core}: {error}"))?;
    let placed = place_this_thread("generator", spec.nice).map_err(|error| error.to_string())?;
    if placed.cpus != core.to_string() {
        return Err(format!(
            "the generator should run on CPU {core} but may run on {}",
            placed.cpus
        ));
    }
    Ok(placed)
}

/// The sending thread of `xdp-live`: pins itself, loads the generator for `interface` inside
/// `namespace` (whose interfaces the kernel's redirect resolves in, so the thread stays there),
/// says it is ready and sends until `stop`; returns the frames its calls ran.
fn run_live(
    namespace: &str,
    interface: &str,
    spec: &Spec,
    template: &Template,
    ready: &mpsc::Sender<Result<Placed, String>>,
    stop: &AtomicBool,
) -> Result<u64, String> {
    let config = LiveConfig {
        duration: FOREVER,
        ..LiveConfig::default()
    };
    let opened = pin(spec).and_then(|placed| {
        let inside = wirespeed_lab::enter(namespace)
            .map_err(|error| format!("entering {namespace}: {error}"))?;
        let generator =
            live::open(interface, template, &config).map_err(|error| error.to_string())?;
        Ok((placed, inside, generator))
    });
    let (placed, _inside, generator) = match opened {
        Ok(opened) => opened,
        Err(error) => {
            let _ = ready.send(Err(error.clone()));
            return Err(error);
        }
    };
    let _ = ready.send(Ok(placed));
    live::send(&generator, &config, stop)
        .map(|result| result.sent)
        .map_err(|error| error.to_string())
}

/// Pins and renices the calling thread, fills a pool with `template` and opens `interface` in
/// `namespace` with `socket`.
fn open(
    socket: Socket,
    namespace: &str,
    interface: &str,
    spec: &Spec,
    template: &Template,
) -> Result<Opened, String> {
    let placed = pin(spec)?;
    let _inside = wirespeed_lab::enter(namespace)
        .map_err(|error| format!("entering {namespace}: {error}"))?;
    // Frames that hold what the interface's MTU allows (16 KiB ones for jumbo frames).
    let mtu = interface_mtu(interface).map_err(|error| error.to_string())?;
    let frame_size = frame_size_for_mtu(mtu)
        .ok_or_else(|| format!("{interface} has MTU {mtu}, more than the largest frames hold"))?;
    let mut pool =
        FramePool::new(FRAMES, frame_size).map_err(|error| format!("generator pool: {error}"))?;
    prefill(&mut pool, template);
    let umem = Umem::new(&pool);
    let port: Box<dyn Port> = match socket {
        Socket::AfXdp => {
            let config = AfXdpConfig {
                zero_copy: false,
                ..AfXdpConfig::default()
            };
            Box::new(
                AfXdpPort::open(interface, &config, &umem, &mut pool)
                    .map_err(|error| error.to_string())?,
            )
        }
        Socket::AfPacket => Box::new(
            AfPacketPort::open(
                "t0",
                interface,
                &AfPacketConfig {
                    frame_size,
                    ..AfPacketConfig::default()
                },
            )
            .map_err(|error| error.to_string())?,
        ),
    };
    Ok((port, pool, umem, placed))
}
