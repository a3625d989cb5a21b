//! The OpenFlow 1.3 agent: controllers (and `ovs-ofctl`) drive the openflow app over TCP.
//!
//! One control-plane thread, never a worker, serves every connection: the listener
//! (`ptcp:6653` on 127.0.0.1 unless configured) and the configured controllers, reconnected
//! with an exponential back-off. Sockets are non-blocking and polled in turn, so no peer can
//! hold up another, and nothing here touches a worker except through the control socket's
//! own [`Handler`]: a FLOW_MOD reaches the app exactly as `wirespeed ctl flow add/del` does
//! (`switch`), after `translate` has refused, with the specification's error, whatever the
//! app cannot do. The codec is `wirespeed-openflow`.

pub mod connection;
pub mod groups;
pub mod links;
pub mod packet_out;
pub mod standalone;
pub mod switch;
pub mod translate;

use std::cell::Cell;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use connection::{Closed, Connection, Counts, Event, Timers};
use links::{Link, Links};
use standalone::Standalone;
use switch::Switch;
use translate::Ports;
use wirespeed_dataplane::app::openflow::{packet_in, removed};
use wirespeed_dataplane::table::classifier::FlowMatch;
use wirespeed_openflow::Message;
use wirespeed_openflow::message::role;

use crate::dispatch::{Handler, OpenFlowView};

/// The port OpenFlow controllers and switches listen on (IANA).
pub const DEFAULT_PORT: u16 = 6653;

/// What the switch does while no controller takes its PACKET_INs (none connected, or the
/// last one closed after its echo went unanswered).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailMode {
    /// Keep forwarding by the flows it has; frames for the controller are dropped, misses
    /// without a table-miss flow entry do what `[openflow] miss` says.
    Secure,
    /// As secure, but frames for the controller are switched by the agent's learning switch
    /// ([`standalone`]).
    Standalone,
}

/// The `[openflow]` section's agent keys, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentConfig {
    /// Where to accept connections (`listen = "ptcp:PORT[:ADDR]"`), `None` for nowhere.
    pub listen: Option<SocketAddr>,
    /// Controllers to connect to (`controllers = ["tcp:ADDR:PORT"]`).
    pub controllers: Vec<SocketAddr>,
    pub datapath_id: u64,
    pub fail_mode: FailMode,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            listen: Some(SocketAddr::new(
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                DEFAULT_PORT,
            )),
            controllers: Vec::new(),
            datapath_id: 1,
            fail_mode: FailMode::Secure,
        }
    }
}

/// `ptcp:PORT` (on 127.0.0.1) or `ptcp:PORT:ADDR`, as Open vSwitch writes a passive target;
/// `none` for no listener.
pub fn parse_listen(text: &str) -> Option<Option<SocketAddr>> {
    if text == "none" {
        return Some(None);
    }
    let rest = text.strip_prefix("ptcp:")?;
    let (port, addr) = match rest.split_once(':') {
        Some((port, addr)) => (port, addr.trim_start_matches('[').trim_end_matches(']')),
        None => (rest, "127.0.0.1"),
    };
    Some(Some(SocketAddr::new(
        addr.parse().ok()?,
        port.parse().ok()?,
    )))
}

/// `tcp:ADDR:PORT` (`tcp:[V6ADDR]:PORT` for IPv6), or `tcp:ADDR` for port 6653.
pub fn parse_controller(text: &str) -> Option<SocketAddr> {
    let rest = text.strip_prefix("tcp:")?;
    if let Ok(addr) = rest.parse::<SocketAddr>() {
        return Some(addr);
    }
    let addr: IpAddr = rest
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()?;
    Some(SocketAddr::new(addr, DEFAULT_PORT))
}

/// The switch as the agent serves it.
pub struct SwitchInfo {
    pub handler: Arc<dyn Handler>,
    /// Port names in configuration order: OpenFlow port `n` is `ports[n - 1]`.
    pub ports: Vec<String>,
    /// The interface of each port whose link PORT_STATUS reports (`None`: no link, always up).
    pub interfaces: Vec<Option<String>>,
    pub tables: u8,
    pub flows_per_table: u32,
    pub rings: Rings,
}

/// The agent's ends of the rings from each worker's app: frames for the controller, flows
/// removed by timeout.
#[derive(Default)]
pub struct Rings {
    pub packet_ins: Vec<packet_in::Receiver>,
    pub removed: Vec<removed::Receiver>,
}

/// One connection as `show openflow` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionStatus {
    pub peer: String,
    /// `passive`, `active`, or `active (down: why, retry in N s)`.
    pub kind: String,
    pub state: String,
    pub role: &'static str,
    pub counts: Counts,
}

fn role_name(role: u32) -> &'static str {
    match role {
        role::MASTER => "master",
        role::SLAVE => "slave",
        _ => "equal",
    }
}

/// A configured controller's connection attempts.
struct Controller {
    addr: SocketAddr,
    connected: bool,
    next_attempt: Instant,
    backoff: Duration,
    last_error: Option<String>,
}

/// First and largest wait between two attempts to reach a controller.
const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// How long one connection attempt may hold the agent's thread.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(200);
/// Frames taken from one worker's ring per turn, so the connections are served between
/// bursts.
const PACKET_INS_PER_TURN: usize = 256;
/// The thread's longest wait when nothing moved (the workers' rings have no descriptor).
const IDLE_SLEEP: Duration = Duration::from_millis(5);
/// For this long after a frame for the controller, the wait is [`STORM_SLEEP`] instead: a
/// ring of 256 frames fills in 2 ms at 128 000 frames a second, and a 5 ms wait dropped the
/// rest (PACKET_IN measured 40 000 a second).
const STORM: Duration = Duration::from_millis(100);
const STORM_SLEEP: Duration = Duration::from_micros(500);
/// For this long after a turn that moved anything, the thread yields instead of sleeping: a
/// controller's next request (the BARRIER after a FLOW_MOD, the next FLOW_MOD after a
/// BARRIER_REPLY) comes within about a hundred microseconds, and a sleep costs a wake-up.
const LINGER: Duration = Duration::from_micros(100);

/// The running agent; dropping it stops its thread and closes every connection.
pub struct Agent {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    status: Arc<Mutex<Vec<ConnectionStatus>>>,
    local: Option<SocketAddr>,
}

impl Agent {
    /// Binds the listener (an error names the address) and starts the agent's thread, which
    /// runs `setup` first (the switch drops the thread's capabilities there) and serves no one
    /// if it fails.
    pub fn start(
        config: AgentConfig,
        info: SwitchInfo,
        timers: Timers,
        setup: impl FnOnce() -> std::io::Result<()> + Send + 'static,
    ) -> std::io::Result<Agent> {
        let listener = match config.listen {
            Some(addr) => {
                let listener = TcpListener::bind(addr).map_err(|e| {
                    std::io::Error::new(
                        e.kind(),
                        format!(
                            "openflow.listen: cannot listen on {addr}: {e}; choose another \
                             port (listen = \"ptcp:PORT\") or stop what uses it"
                        ),
                    )
                })?;
                listener.set_nonblocking(true)?;
                Some(listener)
            }
            None => None,
        };
        let local = listener.as_ref().and_then(|l| l.local_addr().ok());
        let stop = Arc::new(AtomicBool::new(false));
        let status = Arc::new(Mutex::new(Vec::new()));
        let thread = {
            let (stop, status) = (Arc::clone(&stop), Arc::clone(&status));
            std::thread::Builder::new()
                .name("openflow".into())
                .spawn(move || match setup() {
                    Ok(()) => run(config, info, timers, listener, &stop, &status),
                    Err(error) => eprintln!("openflow agent: not started: {error}"),
                })?
        };
        Ok(Agent {
            stop,
            thread: Some(thread),
            status,
            local,
        })
    }

    /// The address the listener took (its port when configured as 0).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local
    }

    /// The connections now.
    pub fn status(&self) -> Vec<ConnectionStatus> {
        self.status
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// The connections for `show openflow`, as the dispatcher asks for them.
    pub fn view(&self) -> Box<dyn OpenFlowView> {
        Box::new(StatusView(Arc::clone(&self.status)))
    }
}

/// The agent's published status, read by `show openflow`.
struct StatusView(Arc<Mutex<Vec<ConnectionStatus>>>);

impl OpenFlowView for StatusView {
    fn rows(&self) -> Vec<Vec<String>> {
        let rows = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        rows.iter()
            .map(|c| {
                vec![
                    c.peer.clone(),
                    c.kind.clone(),
                    c.state.clone(),
                    c.role.to_string(),
                    c.counts.received.to_string(),
                    c.counts.sent.to_string(),
                    c.counts.refused.to_string(),
                    c.counts.flow_mods.to_string(),
                    c.counts.async_dropped.to_string(),
                ]
            })
            .collect()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The agent's thread: accept, connect, poll every connection, publish the status.
fn run(
    config: AgentConfig,
    mut info: SwitchInfo,
    timers: Timers,
    listener: Option<TcpListener>,
    stop: &AtomicBool,
    status: &Mutex<Vec<ConnectionStatus>>,
) {
    let ports = Ports {
        names: info.ports.clone(),
    };
    let link_state = vec![Cell::new(Link::default()); ports.names.len()];
    let mut links = Links::new(std::mem::take(&mut info.interfaces));
    let mut standalone = (config.fail_mode == FailMode::Standalone).then(Standalone::default);
    let switch = Switch {
        handler: info.handler.as_ref(),
        ports: &ports,
        links: &link_state,
        tables: info.tables,
        flows_per_table: info.flows_per_table,
        datapath_id: config.datapath_id,
    };
    let now = Instant::now();
    let mut controllers: Vec<Controller> = config
        .controllers
        .iter()
        .map(|&addr| Controller {
            addr,
            connected: false,
            next_attempt: now,
            backoff: BACKOFF_FIRST,
            last_error: None,
        })
        .collect();
    let mut connections: Vec<Connection> = Vec::new();
    let mut expiring = HashMap::new();
    let mut last_packet_in = Instant::now() - STORM;
    let mut last_busy = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        let mut busy = false;
        if let Some(listener) = &listener {
            while let Ok((stream, peer)) = listener.accept() {
                if let Ok(connection) = Connection::new(stream, peer, false, now) {
                    connections.push(connection);
                    busy = true;
                }
            }
        }
        for controller in controllers
            .iter_mut()
            .filter(|c| !c.connected && now >= c.next_attempt)
        {
            match TcpStream::connect_timeout(&controller.addr, CONNECT_TIMEOUT)
                .and_then(|stream| Connection::new(stream, controller.addr, true, now))
            {
                Ok(connection) => {
                    connections.push(connection);
                    controller.connected = true;
                    controller.backoff = BACKOFF_FIRST;
                    controller.last_error = None;
                }
                Err(error) => {
                    controller.last_error = Some(error.to_string());
                    controller.next_attempt = now + controller.backoff;
                    controller.backoff = (controller.backoff * 2).min(BACKOFF_MAX);
                }
            }
        }
        let mut index = 0;
        while index < connections.len() {
            match connections[index].poll(now, &timers, &switch) {
                Ok((moved, event)) => {
                    busy |= moved;
                    if event == Event::BecameMaster {
                        // §6.3.7: one master at a time; the others that were become slaves,
                        // before any of them is heard again.
                        for (i, other) in connections.iter_mut().enumerate() {
                            if i != index && other.role == role::MASTER {
                                other.role = role::SLAVE;
                            }
                        }
                    }
                    index += 1;
                }
                Err(why) => {
                    close(&mut connections, index, &mut controllers, &why, now);
                    busy = true;
                }
            }
        }
        for index in links.changes(&link_state) {
            let message = Message::PortStatus {
                reason: links::REASON_MODIFY,
                port: switch.port_desc(index),
            };
            for connection in &mut connections {
                connection.notify(&message);
            }
            busy = true;
        }
        if packet_ins(
            &mut info.rings.packet_ins,
            &mut connections,
            standalone.as_mut().map(|s| (s, &switch)),
            now,
        ) {
            busy = true;
            last_packet_in = now;
        }
        flows_removed(&mut connections);
        flows_expired(&mut info.rings.removed, &mut expiring, &mut connections);
        publish(status, &connections, &controllers, now);
        // The replies leave after the status that reflects them is out: a controller that
        // holds a reply finds its effect in `show openflow`.
        let mut index = 0;
        let mut closed_any = false;
        while index < connections.len() {
            match connections[index].flush() {
                Ok(wrote) => {
                    busy |= wrote;
                    index += 1;
                }
                Err(why) => {
                    close(&mut connections, index, &mut controllers, &why, now);
                    closed_any = true;
                }
            }
        }
        if closed_any {
            publish(status, &connections, &controllers, now);
        }
        if busy {
            last_busy = now;
        } else if now.duration_since(last_busy) < LINGER {
            std::thread::yield_now();
        } else {
            // Until a peer sends or connects, a link changes, or the rings may have filled: a
            // controller's request is answered at once, not after a fixed sleep (which held
            // FLOW_MOD and BARRIER round trips to one per sleep).
            let mut fds: Vec<RawFd> = connections.iter().map(Connection::fd).collect();
            fds.extend(listener.as_ref().map(AsRawFd::as_raw_fd));
            fds.extend(links.fd());
            let wait = if now.duration_since(last_packet_in) < STORM {
                STORM_SLEEP
            } else {
                IDLE_SLEEP
            };
            let _ = wirespeed_io::wait::wait_readable(&fds, wait);
        }
    }
}

/// Turns the frames the workers sent for the controller into PACKET_INs for every connection
/// that takes them; a frame none takes is switched by `standalone` when the fail mode is
/// standalone, dropped otherwise (fail secure). Whether there were any.
fn packet_ins(
    rings: &mut [packet_in::Receiver],
    connections: &mut [Connection],
    mut standalone: Option<(&mut Standalone, &Switch<'_>)>,
    now: Instant,
) -> bool {
    let mut any = false;
    for ring in rings {
        for _ in 0..PACKET_INS_PER_TURN {
            let Some(record) = ring.pop() else { break };
            any = true;
            let message = Message::PacketIn(translate::packet_in(&record));
            let mut taken = false;
            for connection in connections.iter_mut() {
                taken |= connection.notify(&message);
            }
            if let Some((learning, switch)) = standalone.as_mut() {
                if taken {
                    learning.forget();
                } else {
                    learning.forward(&record, switch, now);
                }
            }
        }
    }
    any
}

/// Sends the FLOW_REMOVED messages a connection's deletes caused to every other connection
/// that takes them.
fn flows_removed(connections: &mut [Connection]) {
    for index in 0..connections.len() {
        for message in std::mem::take(&mut connections[index].removed) {
            for (other, connection) in connections.iter_mut().enumerate() {
                if other != index {
                    connection.notify(&message);
                }
            }
        }
    }
}

/// A flow some workers removed by timeout: how many, and the flow as their reports sum it.
type Expiring = HashMap<(u8, u16, FlowMatch), (usize, switch::Flow, u8)>;

/// Reports the flows with SEND_FLOW_REM the workers removed by timeout: each worker keeps a
/// copy of every flow and removes its own, so a flow is gone, and its FLOW_REMOVED (counts
/// summed, the oldest copy's duration) sent to every connection that takes it, once every
/// worker's report is in.
fn flows_expired(
    rings: &mut [removed::Receiver],
    expiring: &mut Expiring,
    connections: &mut [Connection],
) {
    let workers = rings.len();
    for ring in rings {
        while let Ok(report) = ring.pop() {
            let key = (report.table, report.entry.priority, report.entry.matcher);
            let (seen, flow, _) = expiring.entry(key).or_insert_with(|| {
                let flow = switch::Flow {
                    table: report.table,
                    entry: report.entry.clone(),
                    packets: 0,
                    bytes: 0,
                    age: report.age,
                };
                (0, flow, report.timeout.code())
            });
            *seen += 1;
            flow.packets += report.packets;
            flow.bytes += report.bytes;
            flow.age = flow.age.max(report.age);
        }
    }
    expiring.retain(|_, (seen, flow, reason)| {
        if *seen < workers {
            return true;
        }
        let message = Message::FlowRemoved(connection::flow_removed(flow, *reason));
        for connection in connections.iter_mut() {
            connection.notify(&message);
        }
        false
    });
}

/// Forgets a closed connection; an active one's controller is tried again after its back-off.
fn close(
    connections: &mut Vec<Connection>,
    index: usize,
    controllers: &mut [Controller],
    why: &Closed,
    now: Instant,
) {
    let closed = connections.swap_remove(index);
    if closed.active {
        lost_controller(controllers, closed.peer, why, now);
    }
}

fn lost_controller(controllers: &mut [Controller], peer: SocketAddr, why: &Closed, now: Instant) {
    if let Some(controller) = controllers.iter_mut().find(|c| c.addr == peer) {
        controller.connected = false;
        controller.last_error = Some(why.to_string());
        controller.next_attempt = now + controller.backoff;
        controller.backoff = (controller.backoff * 2).min(BACKOFF_MAX);
    }
}

fn publish(
    status: &Mutex<Vec<ConnectionStatus>>,
    connections: &[Connection],
    controllers: &[Controller],
    now: Instant,
) {
    let mut rows: Vec<ConnectionStatus> = connections
        .iter()
        .map(|c| ConnectionStatus {
            peer: c.peer.to_string(),
            kind: if c.active { "active" } else { "passive" }.into(),
            state: if c.negotiated {
                "connected"
            } else {
                "handshake"
            }
            .into(),
            role: role_name(c.role),
            counts: c.counts,
        })
        .collect();
    rows.extend(
        controllers
            .iter()
            .filter(|c| !c.connected)
            .map(|c| ConnectionStatus {
                peer: c.addr.to_string(),
                kind: "active".into(),
                state: format!(
                    "down ({}), retry in {} s",
                    c.last_error.as_deref().unwrap_or("not yet tried"),
                    c.next_attempt.saturating_duration_since(now).as_secs()
                ),
                role: "-",
                counts: Counts::default(),
            }),
    );
    *status
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner()) = rows;
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_async;
#[cfg(test)]
mod tests_bundles;
#[cfg(test)]
mod tests_groups;
#[cfg(test)]
mod tests_pipeline;
#[cfg(test)]
mod tests_standalone;
