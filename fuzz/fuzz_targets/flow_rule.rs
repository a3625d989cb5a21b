//! Fuzz target for the flow-rule conversion (`fields::flow_rule`), which the configuration, the
//! control socket and the OpenFlow app all use. The input is what follows `flow add` on the
//! control socket: `FIELD=VALUE` words, an optional `priority=N`, and `actions=A,B,...`. No rule
//! panics the conversion, and a rule it takes, written back with `match_text` and
//! `entry_actions_text` (what `show flows` prints), converts to the same match, actions and
//! instructions (clear_actions, write:ACTION, write_metadata).
#![no_main]

use libfuzzer_sys::fuzz_target;
use wirespeed_control::protocol::{self, Request};
use wirespeed_dataplane::app::fields::{self, ParsedFlow};
use wirespeed_dataplane::command::FlowRule;

/// Ports are named `p0`, `p1`, ... as in the lab; `fields::flow_rule` takes bare numbers too.
fn port(name: &str) -> Option<u16> {
    name.strip_prefix('p')?.parse().ok()
}

fn port_name(index: u16) -> String {
    format!("p{index}")
}

/// The rule `ctl flow add WORDS` sends, read by the control protocol's own parser.
fn rule_of(words: &str) -> Option<FlowRule> {
    match protocol::parse(format!("flow add {words}").as_bytes()) {
        Ok(Request::FlowAdd(rule)) => Some(rule),
        _ => None,
    }
}

fuzz_target!(|data: &[u8]| {
    let Some(rule) = std::str::from_utf8(data).ok().and_then(rule_of) else {
        return;
    };
    let parsed = match fields::flow_rule(&rule, &port) {
        Ok(parsed) => parsed,
        Err(error) => {
            assert!(
                !error.place.is_empty() && !error.accepted.is_empty(),
                "{error:?}"
            );
            return;
        }
    };
    let ParsedFlow { entry, .. } = parsed;
    let matcher = fields::match_text(&entry.matcher, &port_name);
    let actions = fields::entry_actions_text(&entry, &port_name);
    // `*` (match everything) is no field at all.
    let matcher = if matcher == "*" {
        String::new()
    } else {
        matcher.replace(',', " ")
    };
    let written = format!("{matcher} actions={actions}");
    let again = rule_of(&written)
        .and_then(|rule| fields::flow_rule(&rule, &port).ok())
        .unwrap_or_else(|| panic!("{rule:?} was written as {written:?}, which is refused"));
    assert_eq!(
        entry.matcher, again.entry.matcher,
        "{rule:?} -> {written:?}"
    );
    assert_eq!(
        entry.actions, again.entry.actions,
        "{rule:?} -> {written:?}"
    );
    assert_eq!(
        (
            entry.clear_actions,
            &entry.write_actions,
            entry.write_metadata
        ),
        (
            again.entry.clear_actions,
            &again.entry.write_actions,
            again.entry.write_metadata
        ),
        "{rule:?} -> {written:?}"
    );
});
