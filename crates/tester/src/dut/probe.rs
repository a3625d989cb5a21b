//! Proving a DuT forwards before it is measured: probe frames sent on `t0` must arrive on `t1`
//! byte for byte as the DuT's driver predicts.
//!
//! The tester's ports are AF_XDP sockets on `t0` and `t1` sharing one UMEM, opened from the
//! tester namespace: the same ports the measurement uses, so a DuT that passes the probe is
//! reachable the way the generator will reach it. Probes are IPv4/UDP frames to
//! [`PROBE_PORT`]; readiness frames (sent repeatedly until the DuT forwards one, as a program
//! needs a moment to open its ports) go to [`READY_PORT`]. Everything else arriving on `t1` (the
//! lab kernels' own IPv6 neighbour discovery and MLD frames) is ignored.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wirespeed_io::Port;
use wirespeed_io::afxdp::{
    AfXdpConfig, AfXdpPort, DEFAULT_RING_SIZE, Umem, XdpAttachment, interface_mtu,
};
use wirespeed_packet::pool::frame_size_for_mtu;
use wirespeed_packet::{Batch, FramePool, MAX_BATCH};

use super::{Dut, DutError, Wiring};
use crate::generator::{Template, TemplateConfig};

/// UDP destination port of the frames [`verify`] compares.
pub const PROBE_PORT: u16 = 8;
/// UDP destination port of the frames [`verify`] sends until the DuT forwards one.
pub const READY_PORT: u16 = 7;

/// RX and fill ring size of the receiving port of a paced trial ([`crate::trial`]): the
/// generator thread also receives, so between two of its receive calls (a TX batch, a
/// preemption) the kernel must be able to park this many frames; with the default 2048 a
/// 0.3 Mpps stream filled the ring in a 7 ms gap, and the tester counted its own drops as the
/// DuT's loss.
pub const RECEIVER_RING: u32 = 8192;

/// The tester's two AF_XDP ports (`t0` sends, `t1` receives) on one UMEM.
pub struct TesterPorts {
    pub t0: AfXdpPort,
    pub t1: AfXdpPort,
    // Dropped after the ports: the sockets are closed before their UMEM goes away.
    _umem: Umem,
    pub pool: FramePool,
}

impl TesterPorts {
    /// Opens `t0` and `t1` of `wiring` from the tester namespace with a pool of `frames`
    /// 2048-byte frames and the default ring sizes; the calling thread returns to its namespace
    /// afterwards. The rings take 8192 frames, so `frames` must be at least that.
    pub fn open(wiring: &Wiring, frames: u32) -> Result<TesterPorts, String> {
        Self::open_interfaces(
            &wiring.tester_ns,
            &wiring.ingress.tester_if,
            &wiring.egress.tester_if,
            frames,
            DEFAULT_RING_SIZE,
        )
    }

    /// Opens `sender` (as `t0`) and `receiver` (as `t1`) in namespace `ns`, as [`open`] does
    /// (the calibration uses the looped-back pair this way), with RX and fill rings of
    /// `receiver_ring` frames on `t1`; `frames` must cover both fill rings and `t0`'s TX and
    /// completion rings.
    ///
    /// [`open`]: TesterPorts::open
    pub fn open_interfaces(
        ns: &str,
        sender: &str,
        receiver: &str,
        frames: u32,
        receiver_ring: u32,
    ) -> Result<TesterPorts, String> {
        Self::open_with(ns, sender, Receiver::Own(receiver), frames, receiver_ring)
    }

    /// [`TesterPorts::open_interfaces`] with `t1` opened on `samples`, the attachment of a
    /// sampling probe counter ([`XdpProbeCounter::sample_sockets`]): `t1` receives only the
    /// probes the counter samples ([`crate::trial::run_counted`] with samples).
    ///
    /// [`XdpProbeCounter::sample_sockets`]: wirespeed_io::afxdp::XdpProbeCounter::sample_sockets
    pub fn open_sampled(
        ns: &str,
        sender: &str,
        samples: &Arc<XdpAttachment>,
        frames: u32,
        receiver_ring: u32,
    ) -> Result<TesterPorts, String> {
        Self::open_with(ns, sender, Receiver::Shared(samples), frames, receiver_ring)
    }

    fn open_with(
        ns: &str,
        sender: &str,
        receiver: Receiver<'_>,
        frames: u32,
        receiver_ring: u32,
    ) -> Result<TesterPorts, String> {
        let sender_config = sender_config();
        let receiver_config = AfXdpConfig {
            rx_size: receiver_ring,
            fill_size: receiver_ring,
            ..sender_config.clone()
        };
        // Both fill rings are filled at once; the sender needs its TX and completion rings' worth
        // on top.
        let least = sender_config.fill_size
            + receiver_config.fill_size
            + sender_config.tx_size
            + sender_config.completion_size;
        let _inside =
            wirespeed_lab::enter(ns).map_err(|error| format!("entering {ns}: {error}"))?;
        let (mut pool, umem) = tester_pool(
            frames,
            least,
            "the fill rings of t0 and t1 and the frames in flight on t0",
            sender,
        )?;
        let t0 = AfXdpPort::open(sender, &sender_config, &umem, &mut pool)
            .map_err(|error| error.to_string())?;
        let t1 = match receiver {
            Receiver::Own(name) => AfXdpPort::open(name, &receiver_config, &umem, &mut pool),
            Receiver::Shared(attachment) => {
                AfXdpPort::open_shared(attachment, &receiver_config, &umem, &mut pool)
            }
        }
        .map_err(|error| error.to_string())?;
        Ok(TesterPorts {
            t0,
            t1,
            _umem: umem,
            pool,
        })
    }

    /// Sends `frames` on `t0`; returns how many the port took.
    pub fn send(&mut self, frames: &[Vec<u8>]) -> usize {
        send_frames(&mut self.t0, &mut self.pool, frames)
    }

    /// Receives what waits on `t1` and returns the IPv4/UDP frames to `dst_port`.
    pub fn receive(&mut self, dst_port: u16) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut batch = Batch::new(MAX_BATCH);
        self.t0.poll(&mut self.pool);
        self.t1.poll(&mut self.pool);
        while self.t1.rx(0, &mut self.pool, &mut batch) > 0 {
            for desc in batch.descs() {
                let start = desc.offset as usize;
                let frame = self
                    .pool
                    .frame(desc.frame)
                    .get(start..start + desc.len as usize)
                    .unwrap_or_default();
                if is_udp_to(frame, dst_port) {
                    out.push(frame.to_vec());
                }
                self.pool.release(desc.frame);
            }
            batch.clear();
            self.t1.poll(&mut self.pool);
        }
        out
    }

    /// Returns every frame the ports hold to the pool (before they are dropped).
    pub fn release_all(&mut self) {
        self.t0.release_all(&mut self.pool);
        self.t1.release_all(&mut self.pool);
    }
}

/// The tester's pool of `frames` frames and its UMEM, its frames as large as `interface`'s MTU
/// needs (2048 bytes up to an MTU of 1770, 16384 for jumbo frames; the caller is in the
/// interface's namespace); refused with the fix when it is smaller than `least`, the frames
/// that `needs` (the rings to fill, the frames in flight) take.
fn tester_pool(
    frames: u32,
    least: u32,
    needs: &str,
    interface: &str,
) -> Result<(FramePool, Umem), String> {
    if frames < least {
        return Err(format!(
            "a tester pool of {frames} frames is too small: {needs} take {least}; use {least} \
             or more"
        ));
    }
    let mtu = interface_mtu(interface).map_err(|error| error.to_string())?;
    let frame_size = frame_size_for_mtu(mtu).ok_or_else(|| {
        format!("{interface} has MTU {mtu}, more than the largest frames hold; lower it")
    })?;
    let pool = FramePool::new(frames, frame_size)
        .map_err(|error| format!("tester frame pool: {error}"))?;
    let umem = Umem::new(&pool);
    Ok((pool, umem))
}

/// Where the tester's receiving socket comes from.
enum Receiver<'a> {
    /// The interface of this name, with its own XDP program.
    Own(&'a str),
    /// An XDP program already attached (a sampling probe counter's).
    Shared(&'a Arc<XdpAttachment>),
}

/// The tester's sending port (`t0`) alone, for trials that count on the receiving interface
/// with an XDP program instead of a socket ([`crate::trial::run_counted`]).
pub struct TesterSender {
    pub t0: AfXdpPort,
    // Dropped after the port: the socket is closed before its UMEM goes away.
    _umem: Umem,
    pub pool: FramePool,
}

impl TesterSender {
    /// Opens `sender` in namespace `ns` as [`TesterPorts::open_interfaces`] opens its `t0`,
    /// with a pool of `frames` frames (at least its rings' worth) sized for its MTU.
    pub fn open(ns: &str, sender: &str, frames: u32) -> Result<TesterSender, String> {
        let config = sender_config();
        let least = config.fill_size + config.tx_size + config.completion_size;
        let _inside =
            wirespeed_lab::enter(ns).map_err(|error| format!("entering {ns}: {error}"))?;
        let (mut pool, umem) =
            tester_pool(frames, least, "t0's fill ring and frames in flight", sender)?;
        let t0 = AfXdpPort::open(sender, &config, &umem, &mut pool)
            .map_err(|error| error.to_string())?;
        Ok(TesterSender {
            t0,
            _umem: umem,
            pool,
        })
    }

    /// Sends `frames` on `t0`; returns how many the port took.
    pub fn send(&mut self, frames: &[Vec<u8>]) -> usize {
        send_frames(&mut self.t0, &mut self.pool, frames)
    }

    /// Returns every frame the port holds to the pool (before it is dropped).
    pub fn release_all(&mut self) {
        self.t0.release_all(&mut self.pool);
    }
}

/// Sends copies of `frames` on `port`, from `pool`; returns how many the port took.
fn send_frames(port: &mut AfXdpPort, pool: &mut FramePool, frames: &[Vec<u8>]) -> usize {
    let mut taken = 0;
    for chunk in frames.chunks(MAX_BATCH) {
        let mut batch = Batch::new(chunk.len());
        for bytes in chunk {
            // Out of frames (or a frame longer than one): send what the chunk has so far.
            let Some(desc) = pool.alloc_copy(bytes, 0) else {
                break;
            };
            batch.push(desc);
        }
        taken += port.tx(0, pool, &mut batch);
        for desc in batch.descs() {
            pool.release(desc.frame);
        }
    }
    port.poll(pool);
    taken
}

/// The sending port's configuration: copy mode, the default rings.
/// The tester's sending socket: copy mode, and a send buffer large enough that the DuT's own
/// queues, not the socket's accounting of the frames inside them, push back (with the default
/// 212 992 B, about 280 frames of 64 B held by a shaper's queue stopped the sender; the
/// completion ring, 2048 frames, bounds them now).
fn sender_config() -> AfXdpConfig {
    AfXdpConfig {
        zero_copy: false,
        send_buffer: Some(SENDER_BUFFER),
        ..AfXdpConfig::default()
    }
}

/// [`sender_config`]'s send buffer: 64 MiB, far more than 2048 skbs of any frame size take.
const SENDER_BUFFER: u32 = 64 << 20;

/// Whether `frame` is an untagged IPv4/UDP frame to `dst_port` (no IP options).
pub fn is_udp_to(frame: &[u8], dst_port: u16) -> bool {
    frame.len() >= 38
        && frame[12..14] == [0x08, 0x00]
        && frame[14] == 0x45
        && frame[23] == 17
        && frame[36..38] == dst_port.to_be_bytes()
}

/// `count` 64-byte probe frames (one flow each) addressed as `dut` needs, to UDP `dst_port`.
pub fn probe_frames(dut: &dyn Dut, wiring: &Wiring, count: u32, dst_port: u16) -> Vec<Vec<u8>> {
    let config = TemplateConfig {
        frame_size: 64,
        src_mac: wiring.ingress.tester_mac,
        dst_mac: dut.destination_mac(wiring),
        src_ip: wiring.ingress.tester_ipv4.into(),
        dst_port,
        flows: count.max(1),
        ..TemplateConfig::default()
    };
    let Ok(template) = Template::new(&config) else {
        return Vec::new();
    };
    (0..count).map(|flow| template.frame(flow)).collect()
}

/// Waits (up to `timeout`) until `dut` forwards a readiness frame, then sends `count` probe
/// frames on `t0` and checks that all arrive on `t1`, in order, exactly as
/// [`Dut::forwarded`] says. Returns the number of probes checked.
pub fn verify(
    dut: &mut dyn Dut,
    wiring: &Wiring,
    count: u32,
    timeout: Duration,
) -> Result<usize, DutError> {
    let fail = |dut: &dyn Dut, detail: String| DutError::Verify {
        dut: dut.name(),
        detail,
    };
    let mut ports = TesterPorts::open(wiring, 16384)
        .map_err(|error| fail(dut, format!("tester ports: {error}")))?;
    let result = verify_with(dut, wiring, &mut ports, count, timeout);
    ports.release_all();
    result.map_err(|detail| fail(dut, detail))
}

fn verify_with(
    dut: &mut dyn Dut,
    wiring: &Wiring,
    ports: &mut TesterPorts,
    count: u32,
    timeout: Duration,
) -> Result<usize, String> {
    let ready = probe_frames(dut, wiring, 1, READY_PORT);
    let deadline = Instant::now() + timeout;
    let arrived = loop {
        dut.check().map_err(|error| error.to_string())?;
        ports.send(&ready);
        std::thread::sleep(Duration::from_millis(20));
        let got = ports.receive(READY_PORT);
        if let Some(first) = got.into_iter().next() {
            break first;
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "no frame sent on {} arrived on {} within {timeout:?}",
                wiring.ingress.tester_if, wiring.egress.tester_if
            ));
        }
    };
    compare(&arrived, &dut.forwarded(wiring, &ready[0]), 0)?;
    let probes = probe_frames(dut, wiring, count, PROBE_PORT);
    for chunk in probes.chunks(16) {
        ports.send(chunk);
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(2);
    while got.len() < probes.len() && Instant::now() < deadline {
        got.extend(ports.receive(PROBE_PORT));
        std::thread::sleep(Duration::from_millis(2));
    }
    if got.len() != probes.len() {
        return Err(format!(
            "{} of {} probe frames arrived on {}",
            got.len(),
            probes.len(),
            wiring.egress.tester_if
        ));
    }
    for (index, (got, sent)) in got.iter().zip(&probes).enumerate() {
        compare(got, &dut.forwarded(wiring, sent), index)?;
    }
    Ok(got.len())
}

fn compare(got: &[u8], want: &[u8], index: usize) -> Result<(), String> {
    if got == want {
        return Ok(());
    }
    Err(format!(
        "probe {index} arrived changed:\n got  {got:02x?}\n want {want:02x?}"
    ))
}
