//! The learning bridge: an 802.1Q VLAN-aware Ethernet switch.
//!
//! Its pipeline is four stages, each in its own file: [`Parse`] (headers and flow keys),
//! [`Vlans::classify`] (the VLAN of every frame, or `VlanFiltered`), [`Learn`] (sources into
//! the [`MacTable`]) and [`BridgeForward`] (known unicast to the learned port, everything else
//! flooded to the VLAN's other ports, then the output port's tag pushed or popped in place).
//!
//! All memory is taken in [`Bridge::new`]: the MAC table's buckets, the per-VLAN port lists
//! and the stages' per-batch arrays. Processing a batch allocates nothing, whatever arrives.
//!
//! The age is given in seconds and turned into TSC cycles once, here, with the measured TSC
//! rate; the stages only compare cycle counts against the batch's `now`.
//!
//! An optional [`Acl`] stage ([`Bridge::with_acl`], [`Bridge::set_acl`]) filters IP packets
//! after VLAN classification, before learning: a denied packet is neither learned nor
//! forwarded. Without one the bridge pays a single test per batch.
//!
//! [`Bridge::flush_macs`], [`Bridge::flush_port`], [`Bridge::macs`], [`Bridge::set_acl`] and
//! [`Bridge::set_trace`] are control-path calls: the worker that owns the bridge makes them
//! between batches; [`App::command`] maps the control socket's `mac flush`, `show macs` and
//! `acl load` onto them.
//!
//! Tracing: with [`Bridge::set_trace`] the stages run their `TRACE` variants and the bridge
//! keeps the last N packets' decisions (one [`TraceRecord`] per packet, written into a ring
//! allocated when tracing is switched on); untraced batches never touch it.

use std::fmt;

use wirespeed_packet::cpu::tsc_hz;
use wirespeed_packet::{Batch, DropReason, MAX_BATCH, Meta};

use crate::app::trace::TraceRing;
use crate::app::{App, CacheLookups, CommandContext, Context, MAX_SHOW_ROWS, TableFill, fields};
use crate::command::{AppCommand, AppReply, Retired, Table};
use crate::stage::Parse;
use crate::stage::acl::{Acl, AclConfig, AclRule};
use crate::stage::bridge_forward::{BridgeForward, ForwardCounters, Forwarding};
use crate::stage::learn::{Learn, LearnCounters, Learning};
use crate::stage::parse::ParseCounters;
use crate::stage::vlan::{BatchVlans, Classified, VlanCounters, VlanError, VlanMode, Vlans};
use crate::table::mac::{MacEntry, MacSync, MacTable, MacTableError};

/// One port of the bridge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BridgePort {
    /// The port's index in the worker's port list.
    pub port: u16,
    pub mode: VlanMode,
}

/// How a bridge is set up.
#[derive(Clone, Debug, PartialEq)]
pub struct BridgeConfig {
    pub ports: Vec<BridgePort>,
    /// Most (VLAN, MAC) entries the table holds; new sources beyond are refused and counted.
    pub mac_capacity: usize,
    /// Seconds after which a source not seen again is forgotten (`f64::INFINITY`: never).
    pub age_seconds: f64,
}

impl Default for BridgeConfig {
    /// No ports, 8192 MACs, 300 s (the 802.1Q default age).
    fn default() -> Self {
        BridgeConfig {
            ports: Vec::new(),
            mac_capacity: 8192,
            age_seconds: 300.0,
        }
    }
}

/// What [`Bridge::new`] refuses.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum BridgeError {
    #[error("bridge: {0}")]
    Vlan(#[from] VlanError),
    #[error("bridge: {0}")]
    MacTable(#[from] MacTableError),
    #[error("bridge: age {0} s is not a positive number of seconds: give e.g. 300")]
    Age(f64),
}

/// `seconds` in TSC cycles at `hz`; an error unless it is a positive number. Saturates for
/// very long ages (and infinity): never aged.
fn age_cycles(seconds: f64, hz: u64) -> Result<u64, BridgeError> {
    if seconds.is_nan() || seconds <= 0.0 {
        return Err(BridgeError::Age(seconds));
    }
    Ok((seconds * hz as f64) as u64)
}

/// Every counter of the bridge, stage by stage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BridgeCounters {
    pub parse: ParseCounters,
    pub vlan: VlanCounters,
    pub learn: LearnCounters,
    pub forward: ForwardCounters,
    /// MAC entries that aged out (cleared by the sweep or reused).
    pub aged: u64,
    /// MAC entries moved to their other bucket to make room for a new one.
    pub displaced: u64,
    /// MAC entries in the table now (aged ones not yet swept included).
    pub macs: u64,
}

/// One packet as the bridge's stages decided it; its `Display` is a trace line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceRecord {
    /// The batch's TSC.
    pub now: u64,
    pub in_port: u16,
    /// Length as the packet leaves (after any tag push or pop).
    pub len: u16,
    pub vlan: Classified,
    pub learning: Learning,
    pub forwarding: Forwarding,
    pub out_port: u16,
    pub drop: Option<DropReason>,
}

impl fmt::Display for TraceRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} port {} len {}: {}; learn: {}; forward: {}; ",
            self.now, self.in_port, self.len, self.vlan, self.learning, self.forwarding
        )?;
        match self.drop {
            Some(reason) => write!(f, "dropped ({})", reason.name()),
            None => write!(f, "out port {}", self.out_port),
        }
    }
}

/// The learning bridge app.
pub struct Bridge {
    parse: Parse,
    acl: Option<Acl>,
    /// TSC ticks per second, for the ages `show macs` prints.
    hz: u64,
    vlans: Vlans,
    learn: Learn,
    forward: BridgeForward,
    table: MacTable,
    /// Each packet's VLAN for the current batch.
    batch_vlans: Box<BatchVlans>,
    trace: TraceRing<TraceRecord>,
}

impl fmt::Debug for Bridge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bridge")
            .field("vlans", &self.vlans)
            .field("macs", &self.table.len())
            .field("acl_rules", &self.acl.as_ref().map(Acl::len))
            .finish_non_exhaustive()
    }
}

impl Bridge {
    /// Builds the bridge with the TSC rate of this machine.
    pub fn new(config: BridgeConfig) -> Result<Bridge, BridgeError> {
        Self::with_tsc_hz(config, tsc_hz())
    }

    /// As [`Bridge::new`] with a given clock rate: `ctx.now` is read in units of `hz`.
    pub fn with_tsc_hz(config: BridgeConfig, hz: u64) -> Result<Bridge, BridgeError> {
        let age_cycles = age_cycles(config.age_seconds, hz)?;
        let ports: Vec<(u16, VlanMode)> = config
            .ports
            .iter()
            .map(|p| (p.port, p.mode.clone()))
            .collect();
        Ok(Bridge {
            parse: Parse::new(),
            acl: None,
            hz: hz.max(1),
            vlans: Vlans::new(&ports)?,
            learn: Learn::new(),
            forward: BridgeForward::new(),
            table: MacTable::new(config.mac_capacity, age_cycles)?,
            batch_vlans: Box::new([0; MAX_BATCH]),
            trace: TraceRing::default(),
        })
    }

    /// Changes the MAC ageing time (`[bridge] age_seconds` of a reloaded configuration).
    /// Between batches.
    pub fn set_age(&mut self, seconds: f64) -> Result<(), BridgeError> {
        self.table.set_age_cycles(age_cycles(seconds, self.hz)?);
        Ok(())
    }

    /// The bridge with an ACL in front of learning and forwarding.
    pub fn with_acl(mut self, config: &AclConfig) -> Bridge {
        self.acl = Some(Acl::new(config));
        self
    }

    /// Replaces the ACL's rules, keeping its default action (permit when there was no ACL:
    /// the stage is created then). Between batches.
    pub fn set_acl(&mut self, rules: &[AclRule]) {
        crate::stage::acl::replace_rules(&mut self.acl, rules);
        // The kernel's fast path knows no ACL: from now on every frame comes to user space.
        self.table.stop_mirroring();
    }

    /// Keeps `mirror` (the XDP fast path's MAC map) equal to the MAC table from TSC time `now`
    /// on, so the kernel forwards known unicast. Not for a bridge with an ACL, which only user
    /// space applies: then the mirror is left empty.
    pub fn mirror_macs(&mut self, mirror: Box<dyn MacSync>, now: u64) {
        if self.acl.is_none() {
            self.table.mirror_into(mirror, now);
        }
    }

    /// The ACL stage, when there is one.
    pub fn acl(&self) -> Option<&Acl> {
        self.acl.as_ref()
    }

    /// "show macs": VLAN, MAC, port name, seconds since last seen; sorted.
    fn mac_table(&self, ctx: &CommandContext<'_>) -> Table {
        let macs = self.macs(ctx.now);
        let mut rows: Vec<Vec<String>> = macs
            .iter()
            .take(MAX_SHOW_ROWS)
            .map(|e| {
                vec![
                    e.vlan.to_string(),
                    e.mac.to_string(),
                    ctx.port_name(e.port),
                    format!("{:.1}", e.idle_cycles as f64 / self.hz as f64),
                ]
            })
            .collect();
        if macs.len() > rows.len() {
            let more = macs.len() - rows.len();
            rows.push(vec![
                format!("... {more} more"),
                String::new(),
                String::new(),
                String::new(),
            ]);
        }
        Table {
            columns: ["vlan", "mac", "port", "age s"].map(String::from).to_vec(),
            rows,
        }
    }

    /// Keeps the decisions of the last `records` packets (0: tracing off, the default).
    pub fn set_trace(&mut self, records: usize) {
        let blank = TraceRecord {
            now: 0,
            in_port: 0,
            len: 0,
            vlan: Classified::Skipped,
            learning: Learning::Skipped,
            forwarding: Forwarding::Undecided,
            out_port: Meta::NO_PORT,
            drop: None,
        };
        self.trace = TraceRing::new(records, blank);
    }

    /// The traced packets, oldest first.
    pub fn trace(&self) -> Vec<TraceRecord> {
        self.trace.records()
    }

    fn run<const TRACE: bool>(&mut self, ctx: &mut Context<'_>, batch: &mut Batch) {
        // Only the ACL's cache reads the flow hash.
        self.parse.set_flow_hash(self.acl.is_some());
        self.parse.process(ctx.pool, batch, ctx.keys);
        self.vlans
            .classify::<TRACE>(ctx.pool, batch, &mut self.batch_vlans);
        if let Some(acl) = &mut self.acl {
            acl.process(batch, ctx.keys);
        }
        self.learn
            .process::<TRACE>(&mut self.table, batch, ctx.keys, &self.batch_vlans, ctx.now);
        self.forward
            .process(&self.table, &mut self.vlans, ctx, batch, &self.batch_vlans);
    }

    /// Appends the stages' decisions on the batch just processed to the trace ring.
    fn record(&mut self, now: u64, batch: &Batch) {
        let len = batch.len();
        let stages = self
            .vlans
            .trace(len)
            .iter()
            .zip(self.learn.trace(len))
            .zip(self.forward.trace(len));
        for ((desc, meta), ((&vlan, &learning), &forwarding)) in
            batch.descs().iter().zip(batch.meta()).zip(stages)
        {
            self.trace.push(TraceRecord {
                now,
                in_port: desc.port,
                len: desc.len,
                vlan,
                learning,
                forwarding,
                out_port: meta.out_port,
                drop: meta.drop,
            });
        }
    }

    /// Forgets every learned MAC.
    pub fn flush_macs(&mut self) {
        self.table.flush();
    }

    /// Forgets the MACs learned on `port` (e.g. when it goes down); returns how many.
    pub fn flush_port(&mut self, port: u16) -> usize {
        self.table.flush_port(port)
    }

    /// The live MAC entries at TSC time `now` ("show mac table"), sorted by VLAN then MAC.
    pub fn macs(&self, now: u64) -> Vec<MacEntry> {
        let mut entries: Vec<MacEntry> = self.table.entries(now).collect();
        entries.sort_by_key(|e| (e.vlan, e.mac));
        entries
    }

    /// Bytes of MAC table memory, fixed at construction.
    pub fn mac_table_memory(&self) -> usize {
        self.table.memory()
    }

    pub fn bridge_counters(&self) -> BridgeCounters {
        BridgeCounters {
            parse: self.parse.counters(),
            vlan: self.vlans.counters(),
            learn: self.learn.counters(),
            forward: self.forward.counters(),
            aged: self.table.aged(),
            displaced: self.table.displaced(),
            macs: self.table.len() as u64,
        }
    }
}

/// Buckets of the MAC table swept each time the worker goes to sleep (at least every idle
/// timeout while nothing arrives): a 1M-entry table's 2^18 buckets in about 1000 sleeps.
const IDLE_SWEEP_BUCKETS: usize = 256;

impl App for Bridge {
    fn name(&self) -> &'static str {
        "bridge"
    }

    fn process(&mut self, ctx: &mut Context<'_>, batch: &mut Batch) {
        if self.trace.is_on() {
            self.run::<true>(ctx, batch);
            self.record(ctx.now, batch);
        } else {
            self.run::<false>(ctx, batch);
        }
    }

    /// Sweeps aged MACs while no batch comes: with the fast path forwarding known unicast in
    /// the kernel, the batches that sweep may stop coming, and an entry user space has aged
    /// must leave the kernel's copy all the same.
    fn idle(&mut self, now: u64) {
        self.table.sweep(now, IDLE_SWEEP_BUCKETS);
    }

    fn counters(&self, out: &mut Vec<(&'static str, u64)>) {
        let c = self.bridge_counters();
        out.extend([
            ("parse.parsed", c.parse.parsed),
            ("parse.malformed", c.parse.malformed),
            ("vlan.tagged_in", c.vlan.tagged_in),
            ("vlan.untagged_in", c.vlan.untagged_in),
            ("vlan.filtered", c.vlan.filtered),
            ("vlan.pushed", c.vlan.pushed),
            ("vlan.popped", c.vlan.popped),
            ("vlan.rewritten", c.vlan.rewritten),
            ("vlan.no_room", c.vlan.no_room),
            ("learn.learned", c.learn.learned),
            ("learn.refreshed", c.learn.refreshed),
            ("learn.moved", c.learn.moved),
            ("learn.refused", c.learn.refused),
            ("learn.invalid_source", c.learn.invalid_source),
            ("mac.aged", c.aged),
            ("mac.displaced", c.displaced),
            ("mac.entries", c.macs),
            ("forward.unicast", c.forward.unicast),
            ("forward.flooded", c.forward.flooded),
            ("forward.flood_copies", c.forward.flood_copies),
            ("forward.flood_pool_empty", c.forward.flood_pool_empty),
            ("forward.flood_emit_overflow", c.forward.flood_emit_overflow),
            ("forward.same_segment", c.forward.same_segment),
            ("forward.control", c.forward.control),
            ("forward.no_member", c.forward.no_member),
        ]);
        if let Some(acl) = &self.acl {
            acl.append_counters(out);
        }
        if let Some(refused) = self.table.mirror_refused() {
            out.push(("mac.fast_path_refused", refused));
        }
    }

    fn tables(&self, out: &mut Vec<TableFill>) {
        out.push(TableFill::new(
            "mac",
            self.table.len(),
            Some(self.table.capacity()),
        ));
        if let Some(acl) = &self.acl {
            acl.append_tables(out);
        }
    }

    fn caches(&self, out: &mut Vec<CacheLookups>) {
        if let Some(acl) = &self.acl {
            acl.append_caches(out);
        }
    }

    fn command(&mut self, command: AppCommand, ctx: &CommandContext<'_>) -> AppReply {
        match command {
            AppCommand::MacFlush => {
                self.flush_macs();
                AppReply::Done
            }
            AppCommand::ShowMacs => AppReply::Table(self.mac_table(ctx)),
            AppCommand::SetMacAge(seconds) => match self.set_age(seconds) {
                Ok(()) => AppReply::Done,
                Err(error) => AppReply::Refused(error.to_string()),
            },
            AppCommand::ReplaceAcl(rules) => match fields::acl_rules(&rules) {
                Ok(typed) => {
                    self.set_acl(&typed);
                    AppReply::Retired(Retired::Acl(rules))
                }
                Err(error) => AppReply::Refused(format!("acl: {error}")),
            },
            _ => AppReply::Unsupported,
        }
    }
}
