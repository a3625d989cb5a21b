//! The ACL stage: an ordered list of 5-tuple rules (source and destination prefixes, protocol,
//! source and destination port ranges), each permitting or denying; the first rule that matches
//! decides, a default action decides the rest. It goes in front of any app's forwarding
//! decision (the seeds' "Linux router with firewall" case): call [`Acl::process`] after the parse
//! stage, as the bridge and router call [`Parse`](crate::stage::Parse).
//!
//! Anatomy:
//! * counters: `permitted`, `denied`, `cache_hits`, `scans`, plus one hit counter per rule and
//!   one for the default action;
//! * dispositions: a denied packet gets [`DropReason::AclDenied`]; a permitted one is left as it
//!   was for the next stage; packets already dropped are skipped, and so are frames that are not
//!   IP (ARP, LLDP...): the ACL filters IP traffic, as a firewall's `ip`/`ip6` tables do, so a
//!   default deny never cuts a router off from address resolution;
//! * one batch function: prefetch every packet's cache slot, then decide;
//! * a trace format: [`Acl::trace`] says which rule (or the default) decides a flow key.
//!
//! Port ranges and prefixes do not map onto one mask per rule, so the rules are scanned in
//! order; an exact-match [`FlowCache`] keyed by the flow key remembers which rule (or the
//! default) decided a flow, so a flow pays the scan once (with the cache's insertion
//! probability) and the per-rule hit counters stay exact. Replacing the rules invalidates the
//! cache by generation.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::ops::RangeInclusive;

use wirespeed_packet::flow_key::FlowKey;
use wirespeed_packet::{Batch, DropReason, Meta};

use crate::app::{CacheLookups, TableFill};
use crate::table::flow_cache::FlowCache;

/// An address prefix over the flow key's 16-byte addresses (IPv4 is IPv4-mapped).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpPrefix {
    addr: u128,
    mask: u128,
}

impl IpPrefix {
    /// Every address, of any family (and the zero address of non-IP frames).
    pub const ANY: IpPrefix = IpPrefix { addr: 0, mask: 0 };

    fn new(addr: u128, len: u32) -> Self {
        let mask = u128::MAX.checked_shl(128 - len.min(128)).unwrap_or(0);
        Self {
            addr: addr & mask,
            mask,
        }
    }

    /// `addr/len` for IPv4 (`len` clamped to 32); matches IPv4 packets only.
    pub fn v4(addr: Ipv4Addr, len: u8) -> Self {
        Self::new(
            u128::from_be_bytes(FlowKey::map_ipv4(addr)),
            96 + u32::from(len.min(32)),
        )
    }

    /// `addr/len` for IPv6 (`len` clamped to 128).
    pub fn v6(addr: Ipv6Addr, len: u8) -> Self {
        Self::new(u128::from(addr), u32::from(len))
    }

    #[inline]
    fn contains(&self, addr: &[u8; 16]) -> bool {
        u128::from_be_bytes(*addr) & self.mask == self.addr
    }
}

/// What a rule does with the packets it matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AclAction {
    Permit,
    Deny,
}

/// One rule. A port range narrower than `0..=65535` matches TCP and UDP packets only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclRule {
    pub src: IpPrefix,
    pub dst: IpPrefix,
    /// IP protocol, or any.
    pub protocol: Option<u8>,
    pub src_ports: RangeInclusive<u16>,
    pub dst_ports: RangeInclusive<u16>,
    pub action: AclAction,
}

impl AclRule {
    /// A rule matching everything, doing `action`: refine it with the fields.
    pub fn any(action: AclAction) -> Self {
        Self {
            src: IpPrefix::ANY,
            dst: IpPrefix::ANY,
            protocol: None,
            src_ports: 0..=u16::MAX,
            dst_ports: 0..=u16::MAX,
            action,
        }
    }
}

/// The ACL's configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclConfig {
    /// In order: the first match decides.
    pub rules: Vec<AclRule>,
    /// What happens to packets no rule matches.
    pub default: AclAction,
    /// Slots of the decision cache.
    pub cache_entries: usize,
    /// The cache inserts one miss in this many (0: no cache).
    pub cache_insert_one_in: u32,
}

impl Default for AclConfig {
    fn default() -> Self {
        Self {
            rules: Vec::new(),
            default: AclAction::Permit,
            cache_entries: 4096,
            cache_insert_one_in: 8,
        }
    }
}

/// Counters of the ACL stage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AclCounters {
    pub permitted: u64,
    pub denied: u64,
    /// Decisions taken from the cache.
    pub cache_hits: u64,
    /// Decisions taken by scanning the rules.
    pub scans: u64,
}

/// A rule in the form the scan compares.
#[derive(Clone, Copy, Debug)]
struct Compiled {
    src: IpPrefix,
    dst: IpPrefix,
    protocol: Option<u8>,
    src_ports: (u16, u16),
    dst_ports: (u16, u16),
    ports_only_tcp_udp: bool,
    deny: bool,
}

impl Compiled {
    fn new(rule: &AclRule) -> Self {
        let range = |r: &RangeInclusive<u16>| (*r.start(), *r.end());
        let full = |r: &RangeInclusive<u16>| *r.start() == 0 && *r.end() == u16::MAX;
        Self {
            src: rule.src,
            dst: rule.dst,
            protocol: rule.protocol,
            src_ports: range(&rule.src_ports),
            dst_ports: range(&rule.dst_ports),
            ports_only_tcp_udp: !full(&rule.src_ports) || !full(&rule.dst_ports),
            deny: rule.action == AclAction::Deny,
        }
    }

    #[inline]
    fn matches(&self, key: &FlowKey) -> bool {
        if let Some(protocol) = self.protocol
            && key.ip_proto != protocol
        {
            return false;
        }
        if self.ports_only_tcp_udp {
            let tcp_udp = key.ip_proto == 6 || key.ip_proto == 17;
            if !tcp_udp
                || !(self.src_ports.0..=self.src_ports.1).contains(&key.l4_src)
                || !(self.dst_ports.0..=self.dst_ports.1).contains(&key.l4_dst)
            {
                return false;
            }
        }
        self.src.contains(&key.ip_src) && self.dst.contains(&key.ip_dst)
    }
}

/// What the ACL decides for one flow key, for tracing: `acl: rule 3 deny` or
/// `acl: default permit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AclTrace {
    /// The deciding rule's index; `None` for the default action.
    pub rule: Option<usize>,
    pub action: AclAction,
}

impl std::fmt::Display for AclTrace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let action = match self.action {
            AclAction::Permit => "permit",
            AclAction::Deny => "deny",
        };
        match self.rule {
            Some(rule) => write!(f, "acl: rule {rule} {action}"),
            None => write!(f, "acl: default {action}"),
        }
    }
}

/// The decision cached for a flow: a rule index, or this for the default action.
const DEFAULT_RULE: u32 = u32::MAX;

/// Ordered permit/deny rules with a decision cache.
pub struct Acl {
    rules: Vec<Compiled>,
    hits: Vec<u64>,
    default_hits: u64,
    default_deny: bool,
    cache: FlowCache<u32>,
    counters: AclCounters,
}

impl Acl {
    pub fn new(config: &AclConfig) -> Self {
        let mut acl = Self {
            rules: Vec::new(),
            hits: Vec::new(),
            default_hits: 0,
            default_deny: false,
            cache: FlowCache::new(config.cache_entries, config.cache_insert_one_in),
            counters: AclCounters::default(),
        };
        acl.set_rules(&config.rules, config.default);
        acl
    }

    /// Replaces the rules and the default action; resets the per-rule hit counters and
    /// invalidates the cache. Called between batches.
    pub fn set_rules(&mut self, rules: &[AclRule], default: AclAction) {
        self.rules = rules.iter().map(Compiled::new).collect();
        self.hits = vec![0; rules.len()];
        self.default_hits = 0;
        self.default_deny = default == AclAction::Deny;
        self.cache.invalidate();
    }

    /// The action for packets no rule matches.
    pub fn default_action(&self) -> AclAction {
        if self.default_deny {
            AclAction::Deny
        } else {
            AclAction::Permit
        }
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether there are no rules (the default action decides everything).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The index of the first rule matching `key`, or `None` for the default action.
    pub fn decide(&self, key: &FlowKey) -> Option<usize> {
        self.rules.iter().position(|rule| rule.matches(key))
    }

    /// The decision for `key` and why (no counter moves, the cache is not consulted).
    pub fn trace(&self, key: &FlowKey) -> AclTrace {
        let rule = self.decide(key);
        let deny = rule
            .and_then(|i| self.rules.get(i))
            .map_or(self.default_deny, |r| r.deny);
        AclTrace {
            rule,
            action: if deny {
                AclAction::Deny
            } else {
                AclAction::Permit
            },
        }
    }

    /// Marks every denied packet of `batch` with [`DropReason::AclDenied`].
    pub fn process(&mut self, batch: &mut Batch, keys: &[FlowKey]) {
        let metas = batch.meta_mut();
        for meta in metas.iter() {
            self.cache.prefetch(meta.flow_hash);
        }
        for (meta, key) in metas.iter_mut().zip(keys) {
            if meta.drop.is_some() || meta.flags & (Meta::FLAG_IPV4 | Meta::FLAG_IPV6) == 0 {
                continue;
            }
            let rule = match self.cache.lookup(meta.flow_hash, key) {
                Some(rule) => {
                    self.counters.cache_hits += 1;
                    rule
                }
                None => {
                    self.counters.scans += 1;
                    let rule = self.decide(key).map_or(DEFAULT_RULE, |i| i as u32);
                    self.cache.insert(meta.flow_hash, key, rule);
                    rule
                }
            };
            let deny = match self.rules.get(rule as usize) {
                Some(compiled) => {
                    self.hits[rule as usize] += 1;
                    compiled.deny
                }
                None => {
                    self.default_hits += 1;
                    self.default_deny
                }
            };
            if deny {
                meta.drop = Some(DropReason::AclDenied);
                self.counters.denied += 1;
            } else {
                self.counters.permitted += 1;
            }
        }
    }

    /// Packets each rule decided, index for index with the rules.
    pub fn rule_hits(&self) -> &[u64] {
        &self.hits
    }

    /// Packets the default action decided.
    pub fn default_hits(&self) -> u64 {
        self.default_hits
    }

    pub fn counters(&self) -> AclCounters {
        self.counters
    }

    /// Appends its rules (an ACL has no fixed capacity) for the metrics.
    pub fn append_tables(&self, out: &mut Vec<TableFill>) {
        out.push(TableFill::new("acl_rules", self.len(), None));
    }

    /// Appends its cache's lookups: a miss is a scan of the rules.
    pub fn append_caches(&self, out: &mut Vec<CacheLookups>) {
        out.push(CacheLookups {
            cache: "acl",
            hits: self.counters.cache_hits,
            misses: self.counters.scans,
        });
    }

    /// Appends the stage's counters under `acl.*` names.
    pub fn append_counters(&self, out: &mut Vec<(&'static str, u64)>) {
        out.push(("acl.permitted", self.counters.permitted));
        out.push(("acl.denied", self.counters.denied));
        out.push(("acl.cache_hits", self.counters.cache_hits));
        out.push(("acl.scans", self.counters.scans));
        out.push(("acl.default_hits", self.default_hits));
    }
}

/// Replaces the rules of the ACL in `slot`, keeping its default action; with no ACL yet, creates
/// one that permits what no rule matches. What `acl load` does for every app that has an ACL.
pub fn replace_rules(slot: &mut Option<Acl>, rules: &[AclRule]) {
    match slot {
        Some(acl) => {
            let default = acl.default_action();
            acl.set_rules(rules, default);
        }
        None => {
            *slot = Some(Acl::new(&AclConfig {
                rules: rules.to_vec(),
                default: AclAction::Permit,
                ..AclConfig::default()
            }))
        }
    }
}
