//! Fuzz target for the flow-rule conversion (`fields::flow_rule`), which the configuration, the
//! control socket and the OpenFlow app all use. The input is a rule as `ctl flow add` writes one:
//! `FIELD=VALUE` words, an optional `priority=N`, and `actions=A,B,...`. No rule panics the
//! conversion, and a rule it takes, written back with `match_text` and `actions_text` (what
//! `show flows` prints), converts to the same match and actions.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wirespeed_dataplane::app::fields::{self, ParsedFlow};
use wirespeed_dataplane::app::openflow::Action;
use wirespeed_dataplane::command::FlowRule;

/// Ports are named `p0`, `p1`, ... as in the lab; `fields::flow_rule` takes bare numbers too.
fn port(name: &str) -> Option<u16> {
    name.strip_prefix('p')?.parse().ok()
}

fn port_name(index: u16) -> String {
    format!("p{index}")
}

/// Splits `FIELD=VALUE` words into a rule; `None` for words that are not `FIELD=VALUE`.
fn rule_of(words: &str) -> Option<FlowRule> {
    let mut rule = FlowRule {
        priority: 0,
        fields: Vec::new(),
        actions: Vec::new(),
    };
    for word in words.split_whitespace() {
        let (name, value) = word.split_once('=')?;
        match name {
            "priority" => rule.priority = value.parse().ok()?,
            "actions" => rule.actions = value.split(',').map(str::to_string).collect(),
            _ => rule.fields.push((name.to_string(), value.to_string())),
        }
    }
    Some(rule)
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
    let actions = fields::actions_text(&entry.actions, &port_name);
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
    // No actions is written as `drop`: the same thing in OpenFlow.
    let expected = if entry.actions.is_empty() {
        vec![Action::Drop]
    } else {
        entry.actions
    };
    assert_eq!(expected, again.entry.actions, "{rule:?} -> {written:?}");
});
