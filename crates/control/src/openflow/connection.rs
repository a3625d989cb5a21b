//! One OpenFlow connection: its bytes cut into messages, the handshake, keep-alive, and the
//! answer to every request.
//!
//! The agent's thread polls every connection in turn with non-blocking sockets, so a peer
//! that sends nothing, sends slowly or does not read only ever costs its own connection: it
//! is cut off when the handshake does not finish within [`Timers::handshake`], when an echo
//! request goes unanswered for [`Timers::echo_timeout`] after [`Timers::echo_idle`] of
//! silence, when it has sent [`MAX_REFUSED`] messages the switch refused, or when more than
//! [`MAX_OUTPUT`] bytes wait for it to read them.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use wirespeed_dataplane::command::FlowEdit;
use wirespeed_openflow::message::{
    ALL_TABLES, AsyncConfig, Features, FlowModCommand, FlowRemoved, HEADER_LEN, Role, SwitchConfig,
    flow_flags, role,
};
use wirespeed_openflow::multipart::{
    Desc, FlowStats, MORE, MultipartReply, MultipartRequest, PortStats, ReplyBody, RequestBody,
    TableFeatureProperty, TableFeatures, TableStats, property,
};
use wirespeed_openflow::{Header, Match, Message, OfError, VERSION};

use super::groups;
use super::switch::{self, Cursor, Flow, Selection, Switch};
use super::translate;

mod bundles;

pub use bundles::{MAX_BUNDLE_BYTES, MAX_BUNDLES};

/// How long a connection may take for what.
#[derive(Clone, Copy, Debug)]
pub struct Timers {
    /// From connect to the peer's HELLO.
    pub handshake: Duration,
    /// Silence after which the switch sends an ECHO_REQUEST.
    pub echo_idle: Duration,
    /// Time the peer then has to send anything.
    pub echo_timeout: Duration,
}

impl Default for Timers {
    fn default() -> Self {
        Timers {
            handshake: Duration::from_secs(5),
            echo_idle: Duration::from_secs(5),
            echo_timeout: Duration::from_secs(10),
        }
    }
}

/// FLOW_REMOVED's reason for a flow a FLOW_MOD deleted (OFPRR_DELETE).
const REMOVED_DELETE: u8 = 2;

/// The whole seconds of `flow`'s age, as a duration_sec field holds them.
fn seconds(flow: &Flow) -> u32 {
    u32::try_from(flow.age.as_secs()).unwrap_or(u32::MAX)
}

/// The FLOW_REMOVED of `flow`, gone for `reason`.
pub fn flow_removed(flow: &Flow, reason: u8) -> FlowRemoved {
    FlowRemoved {
        cookie: flow.entry.cookie,
        priority: flow.entry.priority,
        reason,
        table_id: flow.table,
        duration_sec: seconds(flow),
        duration_nsec: flow.age.subsec_nanos(),
        idle_timeout: flow.entry.idle_timeout,
        hard_timeout: flow.entry.hard_timeout,
        packet_count: flow.packets,
        byte_count: flow.bytes,
        matcher: translate::entry_match(&flow.entry),
    }
}

/// The FLOW statistics entry of `flow`.
fn flow_stats(flow: &Flow) -> FlowStats {
    FlowStats {
        table_id: flow.table,
        duration_sec: seconds(flow),
        duration_nsec: flow.age.subsec_nanos(),
        priority: flow.entry.priority,
        idle_timeout: flow.entry.idle_timeout,
        hard_timeout: flow.entry.hard_timeout,
        flags: if flow.entry.send_flow_removed {
            flow_flags::SEND_FLOW_REM
        } else {
            0
        },
        cookie: flow.entry.cookie,
        packet_count: flow.packets,
        byte_count: flow.bytes,
        matcher: translate::entry_match(&flow.entry),
        instructions: translate::entry_instructions(&flow.entry),
    }
}

/// Refused messages after which a connection is closed (a peer speaking garbage).
pub const MAX_REFUSED: u32 = 32;
/// Bytes waiting for the peer to read, beyond which it is closed.
pub const MAX_OUTPUT: usize = 4 << 20;
/// Bytes waiting for the peer beyond which asynchronous messages to it are dropped (counted),
/// well below [`MAX_OUTPUT`], so that replies still fit.
pub const ASYNC_BACKLOG: usize = MAX_OUTPUT / 4;
/// Flow entries per MULTIPART_REPLY part (each at most about 1 KiB: 16 actions and a match).
const FLOWS_PER_REPLY: usize = 48;
/// Bytes of a refused message copied into the ERROR (§7.4.4: at least 64).
const ERROR_DATA: usize = 64;
/// FLOW_MOD adds sent to the workers as one run at most: a bound on what a peer that sends a
/// million of them makes the agent hold, and on how long one run pauses a worker's
/// forwarding (a few milliseconds).
pub const RUN_MAX: usize = 1024;
/// Bytes waiting for the peer below which a FLOW statistics reply goes on with its next page:
/// a dump of any number of flows holds about one page and this much.
const DUMP_BACKLOG: usize = 256 << 10;

/// A FLOW statistics reply being sent page by page, between the peer's reads.
struct Dump {
    xid: u32,
    /// The request's first bytes, for an ERROR should a page fail.
    head: Vec<u8>,
    selection: Selection,
    /// The next page, `None` after the last.
    cursor: Option<Cursor>,
    /// Entries read but not yet sent: a part goes out once a later one is known to follow.
    carry: Vec<FlowStats>,
}

/// Why a connection ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Closed {
    PeerClosed,
    Io(String),
    NoHello,
    Incompatible,
    EchoTimeout,
    Garbage,
    NotReading,
}

impl std::fmt::Display for Closed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Closed::PeerClosed => write!(f, "closed by the peer"),
            Closed::Io(error) => write!(f, "I/O error: {error}"),
            Closed::NoHello => write!(f, "no HELLO in time"),
            Closed::Incompatible => write!(f, "no common OpenFlow version (1.3 needed)"),
            Closed::EchoTimeout => write!(f, "echo request not answered in time"),
            Closed::Garbage => write!(f, "too many refused messages"),
            Closed::NotReading => write!(f, "the peer does not read its replies"),
        }
    }
}

/// Messages counted per connection, for `show openflow`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub received: u64,
    pub sent: u64,
    pub refused: u64,
    pub flow_mods: u64,
    /// PACKET_IN and FLOW_REMOVED messages not sent because the peer had not read
    /// [`ASYNC_BACKLOG`] bytes already.
    pub async_dropped: u64,
}

/// What handling a message asks of the agent beyond this connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    None,
    /// This connection became master: the others that were master become slaves.
    BecameMaster,
}

/// One connection, passive (accepted) or active (to a configured controller).
pub struct Connection {
    stream: TcpStream,
    pub peer: SocketAddr,
    pub active: bool,
    input: Vec<u8>,
    output: Vec<u8>,
    opened: Instant,
    last_heard: Instant,
    echo_sent: Option<Instant>,
    pub negotiated: bool,
    pub role: u32,
    pub counts: Counts,
    config: SwitchConfig,
    /// Which asynchronous messages the peer wants (SET_ASYNC), by role.
    asynchronous: AsyncConfig,
    next_xid: u32,
    /// FLOW_REMOVED messages this connection's deletes caused (and sent it at once), for the
    /// other controllers: the agent takes them after the turn.
    pub removed: Vec<Message>,
    /// FLOW_MOD adds read but not yet applied, with each one's xid and first bytes for its
    /// ERROR: consecutive adds go to the workers as one run (OpenFlow 1.3 §6.2: messages
    /// between barriers may be processed in any order, but each error names its own xid).
    /// Any other message applies them first, so everything before it, a barrier's request
    /// too, has taken effect in every worker when it is answered.
    pending: Vec<(FlowEdit, (u32, Vec<u8>))>,
    /// The FLOW statistics reply under way: the peer's later messages wait until it is out.
    dump: Option<Dump>,
    /// The bundles open ([`bundles`]).
    bundles: Vec<bundles::Bundle>,
}

impl Connection {
    /// A connection over `stream` (made non-blocking here); the switch's HELLO goes first.
    pub fn new(
        stream: TcpStream,
        peer: SocketAddr,
        active: bool,
        now: Instant,
    ) -> std::io::Result<Self> {
        stream.set_nonblocking(true)?;
        stream.set_nodelay(true)?;
        let mut connection = Connection {
            stream,
            peer,
            active,
            input: Vec::new(),
            output: Vec::new(),
            opened: now,
            last_heard: now,
            echo_sent: None,
            negotiated: false,
            role: role::EQUAL,
            counts: Counts::default(),
            config: SwitchConfig {
                flags: 0,
                miss_send_len: 128,
            },
            asynchronous: AsyncConfig::default(),
            next_xid: 1,
            removed: Vec::new(),
            pending: Vec::new(),
            dump: None,
            bundles: Vec::new(),
        };
        let hello = Message::Hello {
            bitmap: Some(vec![1 << VERSION]),
        };
        connection.send(&hello, 0);
        Ok(connection)
    }

    /// The socket's descriptor, to wait on.
    pub fn fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(&self.stream)
    }

    fn send(&mut self, message: &Message, xid: u32) {
        if let Some(bytes) = message.encode(xid) {
            self.output.extend_from_slice(&bytes);
            self.counts.sent += 1;
        }
    }

    /// Whether this connection takes the asynchronous `message` (PACKET_IN, FLOW_REMOVED,
    /// PORT_STATUS): once negotiated, when its SET_ASYNC mask for its role (§7.3.10; slave, or
    /// master and equal alike) has the bit of the message's reason. With the defaults a
    /// master or equal takes all of them and a slave only PORT_STATUS (§6.3.7).
    pub fn wants(&self, message: &Message) -> bool {
        let (masks, reason) = match message {
            Message::PacketIn(p) => (self.asynchronous.packet_in, p.reason),
            Message::FlowRemoved(f) => (self.asynchronous.flow_removed, f.reason),
            Message::PortStatus { reason, .. } => (self.asynchronous.port_status, *reason),
            _ => return false,
        };
        let mask = masks[usize::from(self.role == role::SLAVE)];
        self.negotiated && reason < 32 && mask & (1 << reason) != 0
    }

    /// Sends an asynchronous message if this connection [wants](Connection::wants) it;
    /// whether it was taken (sent, or dropped because the peer reads too slowly).
    pub fn notify(&mut self, message: &Message) -> bool {
        if !self.wants(message) {
            return false;
        }
        if self.output.len() > ASYNC_BACKLOG {
            // A storm of table misses must not cost the connection (MAX_OUTPUT closes it):
            // the controller misses some, as it would behind a full switch buffer.
            self.counts.async_dropped += 1;
            return true;
        }
        let xid = self.xid();
        self.send(message, xid);
        true
    }

    fn refuse(&mut self, error: OfError, xid: u32, request: &[u8]) {
        self.counts.refused += 1;
        let data = request[..request.len().min(ERROR_DATA)].to_vec();
        self.send(&Message::Error { error, data }, xid);
    }

    /// Reads what arrived, answers it into the output, checks the timers. `Ok(true)` when
    /// anything moved. The answers leave with [`Connection::flush`].
    pub fn poll(
        &mut self,
        now: Instant,
        timers: &Timers,
        switch: &Switch<'_>,
    ) -> Result<(bool, Event), Closed> {
        let mut busy = false;
        let mut event = Event::None;
        let mut chunk = [0u8; 16 * 1024];
        // A bounded number of reads per turn, so one fast peer cannot starve the others.
        for _ in 0..8 {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(Closed::PeerClosed),
                Ok(n) => {
                    self.input.extend_from_slice(&chunk[..n]);
                    busy = true;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(Closed::Io(e.to_string())),
            }
        }
        busy |= self.dump_more(switch);
        let mut used = 0;
        while self.dump.is_none()
            && let Some(header) = Header::peek(&self.input[used..])
        {
            let len = usize::from(header.length);
            if len < HEADER_LEN {
                // The stream cannot be cut any further.
                let mut head = [0u8; HEADER_LEN];
                head.copy_from_slice(&self.input[used..used + HEADER_LEN]);
                self.refuse(OfError::BAD_REQUEST_LEN, header.xid, &head);
                self.flush()?;
                return Err(Closed::Garbage);
            }
            if self.input.len() - used < len {
                break;
            }
            let bytes = self.input[used..used + len].to_vec();
            used += len;
            self.counts.received += 1;
            // Only a whole message counts as hearing from the peer: one that trickles a
            // message byte by byte still meets the echo's deadline.
            self.last_heard = now;
            self.echo_sent = None;
            if self.handle(&bytes, switch, &mut event)? == Handled::Refused
                && self.counts.refused > u64::from(MAX_REFUSED)
            {
                self.flush()?;
                return Err(Closed::Garbage);
            }
        }
        self.input.drain(..used);
        if self.apply_pending(switch) == Handled::Refused
            && self.counts.refused > u64::from(MAX_REFUSED)
        {
            self.flush()?;
            return Err(Closed::Garbage);
        }
        if !self.negotiated && now.duration_since(self.opened) > timers.handshake {
            return Err(Closed::NoHello);
        }
        match self.echo_sent {
            Some(sent) if now.duration_since(sent) > timers.echo_timeout => {
                return Err(Closed::EchoTimeout);
            }
            None if self.negotiated && now.duration_since(self.last_heard) > timers.echo_idle => {
                let xid = self.xid();
                self.send(&Message::EchoRequest(Vec::new()), xid);
                self.echo_sent = Some(now);
            }
            _ => {}
        }
        Ok((busy, event))
    }

    fn xid(&mut self) -> u32 {
        self.next_xid = self.next_xid.wrapping_add(1);
        self.next_xid
    }

    /// Writes what the socket takes; whether it took anything.
    pub fn flush(&mut self) -> Result<bool, Closed> {
        let mut written = 0;
        while written < self.output.len() {
            match self.stream.write(&self.output[written..]) {
                Ok(0) => return Err(Closed::PeerClosed),
                Ok(n) => written += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(Closed::Io(e.to_string())),
            }
        }
        self.output.drain(..written);
        if self.output.len() > MAX_OUTPUT {
            return Err(Closed::NotReading);
        }
        Ok(written > 0)
    }

    /// Applies the pending FLOW_MOD adds as one run; each refused one gets its ERROR.
    fn apply_pending(&mut self, switch: &Switch<'_>) -> Handled {
        if self.pending.is_empty() {
            return Handled::Done;
        }
        let (edits, requests): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.pending).into_iter().unzip();
        let mut handled = Handled::Done;
        for (result, (xid, head)) in switch
            .apply(edits, switch::refusal)
            .into_iter()
            .zip(requests)
        {
            if let Err(error) = result {
                self.refuse(error, xid, &head);
                handled = Handled::Refused;
            }
        }
        handled
    }

    /// Sends the next pages of the FLOW statistics reply under way while the peer keeps
    /// up; whether anything moved.
    fn dump_more(&mut self, switch: &Switch<'_>) -> bool {
        let Some(mut dump) = self.dump.take() else {
            return false;
        };
        let mut moved = false;
        while self.output.len() < DUMP_BACKLOG {
            let Some(cursor) = dump.cursor else { break };
            moved = true;
            match switch.select_page(&dump.selection, cursor) {
                Ok((flows, next)) => {
                    dump.carry.extend(flows.iter().map(flow_stats));
                    dump.cursor = next;
                }
                Err(error) => {
                    // Parts may have gone already: the ERROR ends the reply.
                    self.refuse(error, dump.xid, &dump.head);
                    return true;
                }
            }
            while dump.carry.len() > FLOWS_PER_REPLY || dump.cursor.is_none() {
                let len = dump.carry.len().min(FLOWS_PER_REPLY);
                let part: Vec<FlowStats> = dump.carry.drain(..len).collect();
                let last = dump.cursor.is_none() && dump.carry.is_empty();
                let flags = if last { 0 } else { MORE };
                let body = ReplyBody::Flow(part);
                self.send(
                    &Message::MultipartReply(MultipartReply { flags, body }),
                    dump.xid,
                );
                if last {
                    return true;
                }
            }
        }
        self.dump = Some(dump);
        moved
    }

    fn handle(
        &mut self,
        bytes: &[u8],
        switch: &Switch<'_>,
        event: &mut Event,
    ) -> Result<Handled, Closed> {
        let (header, message) = match Message::decode(bytes) {
            Ok(decoded) => decoded,
            Err(refused) => {
                if !self.negotiated {
                    return Err(Closed::Incompatible);
                }
                self.refuse(refused.error, refused.xid, bytes);
                return Ok(Handled::Refused);
            }
        };
        let pipelined = matches!(&message, Message::FlowMod(m) if m.command == FlowModCommand::Add);
        let earlier = if pipelined {
            Handled::Done
        } else {
            self.apply_pending(switch)
        };
        let handled = self.handle_message(header, message, bytes, switch, event)?;
        Ok(if earlier == Handled::Refused {
            Handled::Refused
        } else {
            handled
        })
    }

    /// Answers one decoded message (FLOW_MOD adds join the pending run).
    fn handle_message(
        &mut self,
        header: Header,
        message: Message,
        bytes: &[u8],
        switch: &Switch<'_>,
        event: &mut Event,
    ) -> Result<Handled, Closed> {
        let xid = header.xid;
        if !self.negotiated {
            let Message::Hello { bitmap } = message else {
                return Err(Closed::NoHello);
            };
            let speaks_13 = match bitmap {
                Some(words) => words.first().is_some_and(|w| w & (1 << VERSION) != 0),
                None => header.version >= VERSION,
            };
            if !speaks_13 {
                self.send(
                    &Message::Error {
                        error: OfError::HELLO_INCOMPATIBLE,
                        data: b"wirespeed speaks OpenFlow 1.3 (0x04) only".to_vec(),
                    },
                    xid,
                );
                let _ = self.flush();
                return Err(Closed::Incompatible);
            }
            self.negotiated = true;
            return Ok(Handled::Done);
        }
        let slave = self.role == role::SLAVE;
        match message {
            Message::Hello { .. } | Message::EchoReply(_) | Message::BarrierReply => {}
            Message::EchoRequest(data) => self.send(&Message::EchoReply(data), xid),
            Message::Error { .. } => {}
            Message::FeaturesRequest => {
                let reply = Message::FeaturesReply(Features {
                    datapath_id: switch.datapath_id,
                    n_buffers: 0,
                    n_tables: switch.tables,
                    auxiliary_id: 0,
                    // FLOW_STATS | TABLE_STATS | PORT_STATS.
                    capabilities: 1 | 2 | 4,
                });
                self.send(&reply, xid);
            }
            Message::GetConfigRequest => self.send(&Message::GetConfigReply(self.config), xid),
            Message::GetAsyncRequest => {
                self.send(&Message::GetAsyncReply(self.asynchronous), xid);
            }
            // Any masks are taken (bits for reasons the switch never sends do nothing).
            Message::SetAsync(config) => self.asynchronous = config,
            Message::SetConfig(config) => self.config = config,
            Message::BarrierRequest => self.send(&Message::BarrierReply, xid),
            Message::RoleRequest(request) => {
                if request.role != role::NOCHANGE {
                    self.role = request.role;
                    if request.role == role::MASTER {
                        *event = Event::BecameMaster;
                    }
                }
                let reply = Role {
                    role: self.role,
                    generation_id: request.generation_id,
                };
                self.send(&Message::RoleReply(reply), xid);
            }
            Message::FlowMod(_) | Message::GroupMod(_) | Message::PacketOut(_) if slave => {
                self.refuse(OfError::BAD_REQUEST_IS_SLAVE, xid, bytes);
                return Ok(Handled::Refused);
            }
            Message::FlowMod(flow_mod) if flow_mod.command == FlowModCommand::Add => {
                self.counts.flow_mods += 1;
                match switch.add_rule(&flow_mod) {
                    Ok(rule) => {
                        let head = bytes[..bytes.len().min(ERROR_DATA)].to_vec();
                        self.pending.push((FlowEdit::Add(rule), (xid, head)));
                        if self.pending.len() >= RUN_MAX {
                            return Ok(self.apply_pending(switch));
                        }
                    }
                    Err(error) => {
                        self.refuse(error, xid, bytes);
                        return Ok(Handled::Refused);
                    }
                }
            }
            Message::FlowMod(flow_mod) => {
                self.counts.flow_mods += 1;
                match switch.flow_mod(&flow_mod) {
                    Ok(removed) => {
                        for flow in &removed {
                            // Here before any later reply (a barrier's), to the others after
                            // the turn.
                            let message = Message::FlowRemoved(flow_removed(flow, REMOVED_DELETE));
                            self.notify(&message);
                            self.removed.push(message);
                        }
                    }
                    Err(error) => {
                        self.refuse(error, xid, bytes);
                        return Ok(Handled::Refused);
                    }
                }
            }
            Message::BundleControl(request) => {
                return Ok(self.bundle_control(request, xid, bytes, switch));
            }
            Message::BundleAdd(add) => return Ok(self.bundle_add(add, xid, bytes, switch)),
            Message::GroupMod(group_mod) => match switch.group_mod(&group_mod) {
                Ok(removed) => {
                    for flow in &removed {
                        let reason = groups::REMOVED_GROUP_DELETE;
                        let message = Message::FlowRemoved(flow_removed(flow, reason));
                        self.notify(&message);
                        self.removed.push(message);
                    }
                }
                Err(error) => {
                    self.refuse(error, xid, bytes);
                    return Ok(Handled::Refused);
                }
            },
            Message::PacketOut(packet_out) => {
                if let Err(error) = switch.packet_out(&packet_out) {
                    self.refuse(error, xid, bytes);
                    return Ok(Handled::Refused);
                }
            }
            Message::MultipartRequest(request) => {
                if let Err(error) = self.multipart(&request, xid, switch) {
                    self.refuse(error, xid, bytes);
                    return Ok(Handled::Refused);
                }
                if let Some(dump) = &mut self.dump {
                    dump.head = bytes[..bytes.len().min(ERROR_DATA)].to_vec();
                    self.dump_more(switch);
                }
            }
            // Messages only a switch sends.
            Message::FeaturesReply(_)
            | Message::GetConfigReply(_)
            | Message::PacketIn(_)
            | Message::FlowRemoved(_)
            | Message::PortStatus { .. }
            | Message::MultipartReply(_)
            | Message::GetAsyncReply(_)
            | Message::RoleReply(_) => {
                self.refuse(OfError::BAD_REQUEST_TYPE, xid, bytes);
                return Ok(Handled::Refused);
            }
        }
        Ok(Handled::Done)
    }

    fn reply(&mut self, body: ReplyBody, xid: u32) {
        self.send(
            &Message::MultipartReply(MultipartReply { flags: 0, body }),
            xid,
        );
    }

    fn multipart(
        &mut self,
        request: &MultipartRequest,
        xid: u32,
        switch: &Switch<'_>,
    ) -> Result<(), OfError> {
        match &request.body {
            RequestBody::Desc => self.reply(
                ReplyBody::Desc(Desc {
                    manufacturer: "wirespeed".into(),
                    hardware: "user-space packet forwarder".into(),
                    software: env!("CARGO_PKG_VERSION").into(),
                    serial: "none".into(),
                    datapath: "wirespeed openflow app".into(),
                }),
                xid,
            ),
            RequestBody::Flow(request) => {
                let selection = switch.stats_selection(request)?;
                self.dump = Some(Dump {
                    xid,
                    head: Vec::new(),
                    cursor: Some(selection.first()),
                    selection,
                    carry: Vec::new(),
                });
            }
            RequestBody::Aggregate(request) => {
                let selection = switch.stats_selection(request)?;
                let (mut packet_count, mut byte_count, mut flow_count) = (0u64, 0u64, 0u32);
                switch.select_each(&selection, |flows| {
                    for flow in &flows {
                        packet_count += flow.packets;
                        byte_count += flow.bytes;
                    }
                    flow_count = flow_count.saturating_add(flows.len() as u32);
                    Ok(())
                })?;
                self.reply(
                    ReplyBody::Aggregate {
                        packet_count,
                        byte_count,
                        flow_count,
                    },
                    xid,
                );
            }
            RequestBody::Table => {
                let mut tables: Vec<TableStats> = (0..switch.tables)
                    .map(|table| TableStats {
                        table_id: table,
                        active_count: 0,
                        lookup_count: 0,
                        matched_count: 0,
                    })
                    .collect();
                let all = switch.selection(
                    ALL_TABLES,
                    &Match::default(),
                    wirespeed_openflow::action::port::ANY,
                    None,
                    (0, 0),
                )?;
                switch.select_each(&all, |flows| {
                    for flow in flows {
                        if let Some(table) = tables.get_mut(usize::from(flow.table)) {
                            table.active_count += 1;
                            table.matched_count += flow.packets;
                        }
                    }
                    Ok(())
                })?;
                self.reply(ReplyBody::Table(tables), xid);
            }
            RequestBody::PortDesc => self.reply(ReplyBody::PortDesc(switch.port_descs()), xid),
            RequestBody::PortStats(number) => {
                let stats: Vec<PortStats> = switch
                    .port_stats()
                    .into_iter()
                    .filter(|s| {
                        *number == wirespeed_openflow::action::port::ANY || s.port_no == *number
                    })
                    .collect();
                if stats.is_empty() {
                    return Err(OfError::BAD_REQUEST_PORT);
                }
                self.reply(ReplyBody::PortStats(stats), xid);
            }
            RequestBody::Group(id) => self.reply(ReplyBody::Group(switch.group_stats(*id)?), xid),
            RequestBody::GroupDesc => self.reply(ReplyBody::GroupDesc(switch.group_descs()?), xid),
            RequestBody::GroupFeatures => {
                self.reply(ReplyBody::GroupFeatures(groups::group_features()), xid);
            }
            RequestBody::TableFeatures(change) => {
                if !change.is_empty() {
                    return Err(OfError::TABLE_FEATURES_EPERM);
                }
                self.reply(ReplyBody::TableFeatures(table_features(switch)), xid);
            }
        }
        Ok(())
    }
}

/// Whether a message was carried out or refused with an ERROR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Handled {
    Done,
    Refused,
}

/// What each table can do, as TABLE_FEATURES describes it: the match fields of the flow key,
/// apply-actions and goto-table, the actions of `translate`.
fn table_features(switch: &Switch<'_>) -> Vec<TableFeatures> {
    // (OXM field, maskable, payload bytes) of the fields `translate::match_fields` takes.
    let fields: &[(u8, bool, u8)] = &[
        (0, false, 4),
        (2, true, 8),
        (3, true, 6),
        (4, true, 6),
        (5, false, 2),
        (6, true, 2),
        (7, false, 1),
        (8, false, 1),
        (9, false, 1),
        (10, false, 1),
        (11, true, 4),
        (12, true, 4),
        (13, false, 2),
        (14, false, 2),
        (15, false, 2),
        (16, false, 2),
        (19, false, 1),
        (20, false, 1),
        (21, false, 2),
        (22, true, 4),
        (23, true, 4),
        (26, true, 16),
        (27, true, 16),
        (29, false, 1),
        (30, false, 1),
    ];
    let set_fields: &[(u8, bool, u8)] = &[
        (3, false, 6),
        (4, false, 6),
        (6, false, 2),
        (11, false, 4),
        (12, false, 4),
        (13, false, 2),
        (14, false, 2),
        (15, false, 2),
        (16, false, 2),
        (26, false, 16),
        (27, false, 16),
    ];
    // OUTPUT, PUSH_VLAN, POP_VLAN, GROUP, DEC_NW_TTL, SET_FIELD.
    let actions: &[u16] = &[0, 17, 18, 22, 24, 25];
    (0..switch.tables)
        .map(|table| {
            let later: Vec<u8> = (table + 1..switch.tables).collect();
            // WRITE_METADATA, WRITE_ACTIONS, APPLY_ACTIONS, CLEAR_ACTIONS, and GOTO_TABLE
            // where a later table exists.
            let mut instructions = vec![2, 3, 4, 5];
            if !later.is_empty() {
                instructions.insert(0, 1);
            }
            TableFeatures {
                table_id: table,
                name: format!("table{table}"),
                metadata_match: u64::MAX,
                metadata_write: u64::MAX,
                config: 0,
                max_entries: switch.flows_per_table,
                properties: vec![
                    TableFeatureProperty::types(property::INSTRUCTIONS, &instructions),
                    TableFeatureProperty::types(property::INSTRUCTIONS_MISS, &instructions),
                    TableFeatureProperty::next_tables(property::NEXT_TABLES, &later),
                    TableFeatureProperty::next_tables(property::NEXT_TABLES_MISS, &later),
                    TableFeatureProperty::types(property::WRITE_ACTIONS, actions),
                    TableFeatureProperty::types(property::WRITE_ACTIONS_MISS, actions),
                    TableFeatureProperty::types(property::APPLY_ACTIONS, actions),
                    TableFeatureProperty::types(property::APPLY_ACTIONS_MISS, actions),
                    TableFeatureProperty::fields(property::MATCH, fields),
                    TableFeatureProperty::fields(property::WILDCARDS, fields),
                    TableFeatureProperty::fields(property::WRITE_SETFIELD, set_fields),
                    TableFeatureProperty::fields(property::WRITE_SETFIELD_MISS, set_fields),
                    TableFeatureProperty::fields(property::APPLY_SETFIELD, set_fields),
                    TableFeatureProperty::fields(property::APPLY_SETFIELD_MISS, set_fields),
                ],
            }
        })
        .collect()
}
