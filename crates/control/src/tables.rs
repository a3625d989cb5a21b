//! Tables built from files on the control thread: a route file becomes finished FIBs, an ACL file
//! a rule list, before anything is sent to a worker. The files come as content (`ctl` reads them
//! with its user's rights and sends them over the control socket): nothing here opens a path.
//!
//! This is how loading a million routes does not stall forwarding: reading, parsing and the
//! DIR-24-8 build (`Ipv4Fib::from_routes`, one pass, shortest prefixes first) all happen here,
//! once per worker ([`RouteList::build`]: each worker owns its FIB); a worker receives finished
//! tables, adds its interfaces' few routes and swaps them in between two batches. Gateways of
//! both families share one id space (`Routes::gateways`), so one hop table serves both FIBs.
//!
//! Route file: one route per line, `PREFIX via ADDRESS` (or `PREFIX ADDRESS`); `#` starts a
//! comment. A route means what it says: a prefix with host bits set, a prefix routed twice and
//! (checked against the router, [`RouteList::check_gateways`]) a gateway that is the router's
//! own address are refused, each naming its line. ACL file: one rule per line, `permit|deny FIELD=VALUE...`, first match wins, every
//! field checked here with the apps' own conversion (`fields::acl_rule`). Files are
//! hostile input too: size, line length and entry counts are bounded, and every error names the
//! file and line.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::net::IpAddr;
use std::sync::Arc;

use wirespeed_dataplane::app::fields;
use wirespeed_dataplane::command::{AclAction, AclRule, Routes};
use wirespeed_dataplane::table::fib::{Fib4, Fib6, FibKind, Ipv4Prefix, Ipv6Prefix, NextHop};

use crate::protocol::{LineEvent, LineSplitter, Prefix, parse_addr, parse_prefix};

/// Largest route or ACL file read (bytes); also the most a client may send for one.
pub const MAX_FILE_BYTES: u64 = 1 << 30;
/// Longest line of a route or ACL file.
pub const MAX_FILE_LINE: usize = 1024;
/// Most routes one file may hold.
pub const MAX_ROUTES: usize = 16 << 20;
/// Most ACL rules one file may hold.
pub const MAX_ACL_RULES: usize = 1 << 16;

/// Why a gateway that is one of the router's own addresses is refused (a route via the router
/// itself would send its packets back to it), and the fix: route files, the configuration and
/// `route add` say it alike.
pub fn own_gateway(gateway: IpAddr) -> (String, &'static str) {
    (
        format!("gateway {gateway} is an address of the router itself"),
        "route via a neighbouring router's address on that subnet, not the router's own",
    )
}

/// An error in a table file: where, what, how to fix it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct FileError {
    pub file: String,
    /// 1-based; 0 when the error is about the whole file.
    pub line: usize,
    pub message: String,
    pub fix: String,
}

/// The routes of a file, parsed and checked, ready to be built into FIBs.
#[derive(Clone, Debug)]
pub struct RouteList {
    file: String,
    v4: Vec<(Ipv4Prefix, NextHop)>,
    v6: Vec<(Ipv6Prefix, NextHop)>,
    gateways: Vec<IpAddr>,
    /// The line of the first route via each gateway, for errors found later.
    gateway_lines: Vec<usize>,
}

impl RouteList {
    /// IPv4 routes.
    pub fn v4_len(&self) -> usize {
        self.v4.len()
    }

    /// IPv6 routes.
    pub fn v6_len(&self) -> usize {
        self.v6.len()
    }

    /// Distinct gateways; next hop *i* is the *i*-th.
    pub fn gateways(&self) -> &[IpAddr] {
        &self.gateways
    }

    /// Refuses a gateway that is one of `own` (the router's interface addresses, see
    /// [`own_gateway`]), naming the first line that uses it.
    pub fn check_gateways(&self, own: &[IpAddr]) -> Result<(), FileError> {
        let Some((gateway, line)) = self
            .gateways
            .iter()
            .zip(&self.gateway_lines)
            .filter(|(gateway, _)| own.contains(gateway))
            .min_by_key(|(_, line)| **line)
        else {
            return Ok(());
        };
        let (message, fix) = own_gateway(*gateway);
        Err(FileError {
            file: self.file.clone(),
            line: *line,
            message,
            fix: fix.into(),
        })
    }

    /// Builds the FIBs, of `kind` (`[router] fib`; one copy: call once per worker).
    pub fn build(&self, kind: FibKind) -> Result<Routes, FileError> {
        let whole = |e: wirespeed_dataplane::table::fib::FibError| FileError {
            file: self.file.clone(),
            line: 0,
            message: e.to_string(),
            fix: "reduce or aggregate the routes".into(),
        };
        let fib4 = Fib4::from_routes(kind, self.v4.iter().copied()).map_err(whole)?;
        let fib6 = Fib6::from_routes(kind, self.v6.iter().copied()).map_err(whole)?;
        Ok(Routes {
            v4: Arc::new(fib4),
            v6: Arc::new(fib6),
            gateways: Arc::from(self.gateways.as_slice()),
        })
    }
}

/// Reads the lines of `reader`, calling `each(line number, text)` for every line that is not
/// blank or a comment.
fn each_line(
    file: &str,
    reader: impl Read,
    mut each: impl FnMut(usize, &str) -> Result<(), FileError>,
) -> Result<(), FileError> {
    let error = |line: usize, message: String, fix: &str| FileError {
        file: file.to_string(),
        line,
        message,
        fix: fix.to_string(),
    };
    let mut reader = BufReader::new(reader.take(MAX_FILE_BYTES + 1));
    let mut splitter = LineSplitter::new(MAX_FILE_LINE);
    let mut events = Vec::new();
    let mut number = 0;
    let mut total = 0u64;
    loop {
        let chunk = reader
            .fill_buf()
            .map_err(|e| error(number, format!("cannot read: {e}"), "check the file"))?;
        let eof = chunk.is_empty();
        total += chunk.len() as u64;
        if total > MAX_FILE_BYTES {
            return Err(error(
                0,
                format!("larger than {MAX_FILE_BYTES} bytes"),
                "split the file",
            ));
        }
        if eof {
            // A last line without its newline.
            splitter.feed(b"\n", &mut events);
        } else {
            splitter.feed(chunk, &mut events);
            let len = chunk.len();
            reader.consume(len);
        }
        for event in events.drain(..) {
            number += 1;
            let bytes = match event {
                LineEvent::Line(bytes) => bytes,
                LineEvent::TooLong => {
                    return Err(error(
                        number,
                        format!("line longer than {MAX_FILE_LINE} bytes"),
                        "one entry per line",
                    ));
                }
            };
            let text = std::str::from_utf8(&bytes)
                .map_err(|_| error(number, "not UTF-8 text".into(), "the file is plain text"))?;
            let text = text.split('#').next().unwrap_or("").trim();
            if !text.is_empty() {
                each(number, text)?;
            }
        }
        if eof {
            return Ok(());
        }
    }
}

/// Hop ids for gateway addresses, in first-seen order.
struct Gateways<A> {
    ids: HashMap<A, u32>,
    list: Vec<A>,
    /// The line each was first used on.
    lines: Vec<usize>,
}

impl<A: Copy + Eq + std::hash::Hash> Gateways<A> {
    fn new() -> Self {
        Gateways {
            ids: HashMap::new(),
            list: Vec::new(),
            lines: Vec::new(),
        }
    }

    /// The hop of `addr`; a new one is first used on `line`.
    fn hop(&mut self, addr: A, line: usize) -> Option<NextHop> {
        let next = self.list.len() as u32;
        let id = *self.ids.entry(addr).or_insert(next);
        if id == next {
            self.list.push(addr);
            self.lines.push(line);
        }
        NextHop::hop(id)
    }
}

/// Parses route lines from `reader` (`file` names it in errors).
pub fn parse_routes(file: &str, reader: impl Read) -> Result<RouteList, FileError> {
    let mut v4: Vec<(Ipv4Prefix, NextHop)> = Vec::new();
    let mut v6: Vec<(Ipv6Prefix, NextHop)> = Vec::new();
    let mut gateways = Gateways::<IpAddr>::new();
    // The line of every prefix routed so far, by family (an IPv4 entry is 16 bytes: a million
    // routes cost some 20 MB here, for as long as the parse): a prefix routed twice would be
    // one of its two lines silently lost, as the FIB keeps one route per prefix.
    let mut routed4: HashMap<Ipv4Prefix, usize> = HashMap::new();
    let mut routed6: HashMap<Ipv6Prefix, usize> = HashMap::new();
    let error = |line: usize, message: String, fix: &str| FileError {
        file: file.to_string(),
        line,
        message,
        fix: fix.to_string(),
    };
    each_line(file, reader, |number, text| {
        let words: Vec<&str> = text.split_whitespace().collect();
        let (prefix, via) = match words.as_slice() {
            [prefix, "via", via] | [prefix, via] => (*prefix, *via),
            _ => {
                return Err(error(
                    number,
                    format!("{text:?} is not a route"),
                    "write PREFIX via ADDRESS, e.g. 10.0.0.0/8 via 198.18.1.1",
                ));
            }
        };
        let prefix = parse_prefix(prefix).map_err(|e| error(number, e.error, &e.fix))?;
        let via = parse_addr(via).map_err(|e| error(number, e.error, &e.fix))?;
        if v4.len() + v6.len() >= MAX_ROUTES {
            return Err(error(
                number,
                format!("more than {MAX_ROUTES} routes"),
                "aggregate the routes",
            ));
        }
        let too_many = || {
            error(
                number,
                format!("more than {} distinct gateways", NextHop::MAX_ID),
                "use fewer gateway addresses",
            )
        };
        let first = match prefix {
            Prefix::V4(prefix) => routed4.insert(prefix, number),
            Prefix::V6(prefix) => routed6.insert(prefix, number),
        };
        if let Some(first) = first {
            return Err(error(
                number,
                format!(
                    "{} is routed twice: line {first} routes it already",
                    words[0]
                ),
                "keep one route per prefix (the FIB holds one next hop per prefix)",
            ));
        }
        match (prefix, via) {
            (Prefix::V4(prefix), IpAddr::V4(_)) => {
                v4.push((prefix, gateways.hop(via, number).ok_or_else(too_many)?));
            }
            (Prefix::V6(prefix), IpAddr::V6(_)) => {
                v6.push((prefix, gateways.hop(via, number).ok_or_else(too_many)?));
            }
            _ => {
                return Err(error(
                    number,
                    "the prefix and the gateway are of different IP versions".into(),
                    "route IPv4 prefixes via IPv4 addresses and IPv6 via IPv6",
                ));
            }
        }
        Ok(())
    })?;
    Ok(RouteList {
        file: file.to_string(),
        v4,
        v6,
        gateways: gateways.list,
        gateway_lines: gateways.lines,
    })
}

/// Parses ACL lines from `reader`.
pub fn parse_acl(file: &str, reader: impl Read) -> Result<Arc<[AclRule]>, FileError> {
    let mut rules = Vec::new();
    let error = |line: usize, message: String, fix: &str| FileError {
        file: file.to_string(),
        line,
        message,
        fix: fix.to_string(),
    };
    each_line(file, reader, |number, text| {
        let mut words = text.split_whitespace();
        let action = match words.next() {
            Some("permit") => AclAction::Permit,
            Some("deny") => AclAction::Deny,
            _ => {
                return Err(error(
                    number,
                    format!("{text:?} does not start with permit or deny"),
                    "write permit|deny FIELD=VALUE..., e.g. deny ip_src=10.0.0.0/8",
                ));
            }
        };
        let mut fields = Vec::new();
        for word in words {
            let Some((name, value)) = word
                .split_once('=')
                .filter(|(n, v)| !n.is_empty() && !v.is_empty())
            else {
                return Err(error(
                    number,
                    format!("{word:?} is not FIELD=VALUE"),
                    "write permit|deny FIELD=VALUE...",
                ));
            };
            fields.push((name.to_string(), value.to_string()));
        }
        if rules.len() >= MAX_ACL_RULES {
            return Err(error(
                number,
                format!("more than {MAX_ACL_RULES} rules"),
                "merge rules",
            ));
        }
        let rule = AclRule { action, fields };
        // Checked here, with the line at hand, by the same conversion the apps apply.
        if let Err(e) = fields::acl_rule(&rule) {
            return Err(error(
                number,
                format!("{}: {}", e.place, e.problem),
                &format!("use {}", e.accepted),
            ));
        }
        rules.push(rule);
        Ok(())
    })?;
    Ok(rules.into())
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use super::*;

    #[test]
    fn a_route_file_becomes_fibs_with_gateways() {
        let text = "# routes\n10.0.0.0/8 via 198.18.1.1\n\n10.1.0.0/16 198.18.1.2 # more\n\
                    192.0.2.0/24 via 198.18.1.1\n2001:db8::/32 via 2001:db8::1";
        let list = parse_routes("r.txt", text.as_bytes()).unwrap();
        assert_eq!((list.v4_len(), list.v6_len()), (3, 1));
        // Either FIB structure ([router] fib) answers alike.
        for kind in [FibKind::Dir24, FibKind::Trie] {
            let routes = list.build(kind).unwrap();
            assert_eq!(routes.v4.len(), 3);
            assert_eq!(routes.v6.len(), 1);
            let gateways: Vec<IpAddr> = ["198.18.1.1", "198.18.1.2", "2001:db8::1"]
                .iter()
                .map(|a| a.parse().unwrap())
                .collect();
            assert_eq!(&*routes.gateways, gateways.as_slice());
            let hop = routes.v4.lookup(Ipv4Addr::new(10, 1, 2, 3).to_bits());
            assert_eq!(hop, NextHop::hop(1));
            let hop = routes.v4.lookup(Ipv4Addr::new(192, 0, 2, 9).to_bits());
            assert_eq!(hop, NextHop::hop(0));
            // Both families share the id space: the IPv6 gateway is the third.
            let hop = routes
                .v6
                .lookup("2001:db8::5".parse::<Ipv6Addr>().unwrap().to_bits());
            assert_eq!(hop, NextHop::hop(2));
            // Each build is a copy of its own.
            let again = list.build(kind).unwrap();
            assert!(!Arc::ptr_eq(&routes.v4, &again.v4));
            assert_eq!(routes.v4.kind(), kind);
        }
    }

    #[test]
    fn route_file_errors_name_the_line() {
        let error = |text: &str| parse_routes("r.txt", text.as_bytes()).err().unwrap();
        let e = error("10.0.0.0/8 via 1.1.1.1\nnonsense\n");
        assert_eq!((e.line, e.file.as_str()), (2, "r.txt"));
        let e = error("10.0.0.0/8 via 1.1.1.1\n\n10.0.0.0/40 via 1.1.1.1\n");
        assert_eq!(e.line, 3);
        assert!(e.message.contains("/40"), "{e}");
        let e = error("10.0.0.0/8 via ::1\n");
        assert!(e.message.contains("IP versions"), "{e}");
        let e = error(&format!("10.0.0.0/8 via 1.1.1.1 {}\n", "x".repeat(5000)));
        assert!(e.message.contains("longer than"), "{e}");
        let e = parse_routes("r.txt", &b"10.0.0.0/8 via \xff\n"[..])
            .err()
            .unwrap();
        assert!(e.message.contains("UTF-8"), "{e}");
    }

    #[test]
    fn routes_mean_what_they_say() {
        let error = |text: &str| parse_routes("routes.txt", text.as_bytes()).err().unwrap();
        let e = error("10.0.0.0/8 via 1.1.1.1\n# a comment\n10.0.0.1/8 via 1.1.1.1\n");
        assert_eq!(
            e.to_string(),
            "routes.txt:3: `10.0.0.1/8` has host bits set"
        );
        assert_eq!(
            e.fix,
            "write the network, 10.0.0.0/8, or the host route, 10.0.0.1/32"
        );
        // The same prefix twice, with the same or another gateway.
        for text in [
            "10.0.0.0/8 via 1.1.1.1\n192.0.2.0/24 via 1.1.1.1\n10.0.0.0/8 via 1.1.1.1\n",
            "10.0.0.0/8 via 1.1.1.1\n192.0.2.0/24 via 1.1.1.1\n10.0.0.0/8 1.1.1.2\n",
        ] {
            let e = error(text);
            assert_eq!(
                e.to_string(),
                "routes.txt:3: 10.0.0.0/8 is routed twice: line 1 routes it already"
            );
            assert!(e.fix.contains("one route per prefix"), "{e:?}");
        }
        let e = error("2001:db8::/32 via 2001:db8::1\n2001:db8::/32 via 2001:db8::2\n");
        assert_eq!(e.line, 2);
        // Same address, other length, or other family: different prefixes.
        let list = parse_routes(
            "routes.txt",
            "10.0.0.0/8 via 1.1.1.1\n10.0.0.0/16 via 1.1.1.1\n::/0 via ::1\n0.0.0.0/0 via 1.1.1.1\n"
                .as_bytes(),
        )
        .unwrap();
        assert_eq!((list.v4_len(), list.v6_len()), (3, 1));
    }

    #[test]
    fn a_gateway_that_is_the_routers_own_address_names_its_first_line() {
        let list = parse_routes(
            "routes.txt",
            "10.0.0.0/8 via 198.18.0.1\n10.1.0.0/16 via 198.18.0.254\n\
             10.2.0.0/16 via 198.18.0.1\n10.3.0.0/16 via 198.18.0.254\n"
                .as_bytes(),
        )
        .unwrap();
        let own: Vec<IpAddr> = ["198.18.0.254", "2001:2::fe"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        let e = list.check_gateways(&own).unwrap_err();
        assert_eq!(
            e.to_string(),
            "routes.txt:2: gateway 198.18.0.254 is an address of the router itself"
        );
        assert!(e.fix.contains("neighbouring router"), "{e:?}");
        assert_eq!(list.check_gateways(&own[1..]), Ok(()));
        assert_eq!(list.check_gateways(&[]), Ok(()));
    }

    #[test]
    fn an_acl_file_line_that_could_never_match_names_its_line() {
        let e = parse_acl(
            "a.txt",
            "permit proto=tcp\ndeny proto=icmp dst_port=53\n".as_bytes(),
        )
        .err()
        .unwrap();
        assert_eq!(
            e.to_string(),
            "a.txt:2: field dst_port: protocol 1 has no ports; the rule could never match"
        );
        let e = parse_acl(
            "a.txt",
            "deny src=10.0.0.0/8 dst=2001:db8::/32\n".as_bytes(),
        )
        .err()
        .unwrap();
        assert_eq!((e.line, e.fix.contains("one family")), (1, true), "{e:?}");
    }

    #[test]
    fn an_acl_file_becomes_rules() {
        let rules = parse_acl(
            "a.txt",
            "deny ip_src=10.0.0.0/8 l4_dst=22\npermit\n".as_bytes(),
        )
        .unwrap();
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[0].action, AclAction::Deny);
        assert_eq!(rules[0].fields[1], ("l4_dst".into(), "22".into()));
        let e = parse_acl("a.txt", "allow all\n".as_bytes()).err().unwrap();
        assert!(e.message.contains("permit or deny"), "{e}");
        let e = parse_acl("a.txt", "deny x\n".as_bytes()).err().unwrap();
        assert!(e.message.contains("FIELD=VALUE"), "{e}");
        let e = parse_acl(
            "a.txt",
            "permit\n\ndeny proto=udp dst_port=9-1\n".as_bytes(),
        )
        .err()
        .unwrap();
        assert_eq!(e.line, 3);
        assert!(e.message.contains("field dst_port"), "{e}");
        assert!(e.fix.contains("src (or ip_src)"), "{e:?}");
        let e = parse_acl("a.txt", "deny colour=red\n".as_bytes())
            .err()
            .unwrap();
        assert!(e.message.contains("not an ACL field"), "{e}");
    }
}
