//! The Linux IPv4 router behind an nftables firewall as a DuT (seed 002's Linux-with-firewall
//! case): [`LinuxRouter`](super::LinuxRouter)'s forwarding plus a forward chain of N rules that
//! do not match the test traffic, then a counted accept.
//!
//! The rules form one linear chain on purpose: every forwarded frame is compared with all N of
//! them before it reaches the accept, which is the cost a firewall adds and the figure the
//! benchmark is after (a set lookup would hide it). Each rule drops one source address in
//! 100.64.0.0/10 (shared address space), which no lab address (198.18.0.0/15) is in. The chain's
//! policy is drop, so a frame that reaches `t1` has passed the final accept, and that rule's
//! counter shows how many did.
//!
//! The rule set goes in as one generated file with `nft -f`, one transaction: 10,000 rules load
//! in well under a second, where one `nft add rule` per rule would take minutes. The table is
//! created first and deleted at teardown with everything the router did.

use std::fmt::Write as _;
use std::path::PathBuf;

use super::linux_router::{Router, RouterAddition};
use super::{DutError, Steps, Wiring};

/// Name of the nftables table the driver creates in the DuT namespace.
pub const TABLE: &str = "wirespeed";

/// The forward chain of N non-matching rules, what [`LinuxRouterNft`] adds to the router.
#[derive(Debug)]
pub struct Firewall {
    rules: u32,
}

/// The router-with-firewall driver.
pub type LinuxRouterNft = Router<Firewall>;

impl LinuxRouterNft {
    pub const NAME: &'static str = "linux-router-nft";
    /// Rules in the forward chain when no size is given.
    pub const DEFAULT_RULES: u32 = 1000;
    /// The most rules a chain may be given (about a million, a 40 MB rule file; every rule
    /// keeps its own address in 100.64.0.0/10).
    pub const MAX_RULES: u32 = 1 << 20;

    /// A router whose forward chain has `rules` non-matching rules before the accept.
    pub fn new(rules: u32) -> Self {
        Self::with(Firewall {
            rules: rules.min(Self::MAX_RULES),
        })
    }

    /// `linux-router-nft` for the default size, `linux-router-nft:N` otherwise (the form the
    /// command line accepts).
    pub fn name_for(rules: u32) -> String {
        if rules == Self::DEFAULT_RULES {
            Self::NAME.into()
        } else {
            format!("{}:{rules}", Self::NAME)
        }
    }

    /// Number of non-matching rules in the chain.
    pub fn rules(&self) -> u32 {
        self.addition().rules
    }

    /// The rule set file for `nft -f`.
    pub fn ruleset(&self) -> String {
        self.addition().ruleset()
    }
}

impl Firewall {
    fn ruleset(&self) -> String {
        let mut out = String::with_capacity(48 * self.rules as usize + 256);
        let _ = writeln!(out, "table inet {TABLE} {{");
        out.push_str("  chain forward {\n");
        out.push_str("    type filter hook forward priority filter; policy drop;\n");
        for rule in 0..self.rules {
            let _ = writeln!(out, "    ip saddr {} drop", rule_address(rule));
        }
        out.push_str("    counter accept\n  }\n}\n");
        out
    }
}

/// The source address rule `rule` drops: 100.64.0.0 + rule + 1, inside 100.64.0.0/10.
fn rule_address(rule: u32) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::from(u32::from_be_bytes([100, 64, 0, 0]) + (rule % (1 << 22)) + 1)
}

impl RouterAddition for Firewall {
    fn name(&self) -> String {
        LinuxRouterNft::name_for(self.rules)
    }

    fn description(&self) -> String {
        format!(
            "Linux IPv4 router with an nftables forward chain of {} non-matching rules, then \
             an accept (policy drop)",
            self.rules
        )
    }

    fn setup(&self, steps: &mut Steps, wiring: &Wiring) -> Result<(), DutError> {
        steps.require("nft", "nftables")?;
        let ns = wiring.dut_ns.as_str();
        let path: PathBuf = std::env::temp_dir().join(format!(
            "wirespeed-{}-nft-{}.nft",
            wiring.prefix(),
            std::process::id()
        ));
        let path_text = path.to_string_lossy().to_string();
        steps.write(
            "write the nftables rule set",
            &path_text,
            &self.ruleset(),
            (
                5,
                &format!(
                    "    ... {} rules `ip saddr 100.64.x.y drop` in all, then `counter accept`",
                    self.rules
                ),
            ),
        )?;
        steps.run(
            &format!("load {} nftables rules", self.rules),
            &["ip", "netns", "exec", ns, "nft", "-f", &path_text],
            Some(&[
                "ip", "netns", "exec", ns, "nft", "delete", "table", "inet", TABLE,
            ]),
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dut::Dut;

    #[test]
    fn the_rule_set_has_n_distinct_non_matching_rules_then_the_accept() {
        let dut = LinuxRouterNft::new(300);
        let ruleset = dut.ruleset();
        let rules: Vec<&str> = ruleset
            .lines()
            .filter(|l| l.trim_start().starts_with("ip saddr"))
            .collect();
        assert_eq!(rules.len(), 300);
        assert_eq!(rules[0].trim(), "ip saddr 100.64.0.1 drop");
        assert_eq!(rules[299].trim(), "ip saddr 100.64.1.44 drop");
        let mut unique = rules.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 300);
        assert!(
            !ruleset.contains("198.18."),
            "no rule matches a lab address"
        );
        let last = ruleset.lines().rev().nth(2).unwrap();
        assert_eq!(last.trim(), "counter accept");
        assert!(ruleset.contains("policy drop"));
        assert_eq!(dut.name(), "linux-router-nft:300");
        assert_eq!(
            LinuxRouterNft::new(LinuxRouterNft::DEFAULT_RULES).name(),
            "linux-router-nft"
        );
        assert_eq!(rule_address(LinuxRouterNft::MAX_RULES - 1).octets()[0], 100);
    }
}
