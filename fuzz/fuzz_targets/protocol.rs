//! Fuzz target for the control protocol's request decoding: the line splitter that cuts the
//! socket's byte stream into requests, and `protocol::parse` for each line. Everything a client
//! sends is hostile, so: no input panics; the splitter gives the same lines however the stream is
//! cut and never holds more than its limit; every refusal becomes one JSON line with `ok: false`
//! and a fix; requests whose parts have a text form (prefixes, addresses, MACs, flow rules, groups)
//! written back as a request line parse to the same request.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wirespeed_control::protocol::{self, LineEvent, LineSplitter, Prefix, Request, Response};
use wirespeed_dataplane::command::{FlowRule, GroupEdit, GroupRule};
use wirespeed_packet::wire::EthernetAddress;

/// A limit far below the socket's (`protocol::MAX_LINE`), so that the fuzzer reaches the
/// too-long path with short inputs, yet above every request in the seeds.
const MAX: usize = 128;

fn prefix_text(prefix: &Prefix) -> String {
    match prefix {
        Prefix::V4(prefix) => prefix.to_string(),
        Prefix::V6(prefix) => prefix.to_string(),
    }
}

fn flow_text(rule: &FlowRule, actions: bool) -> String {
    let mut words = vec![format!("priority={}", rule.priority)];
    words.extend(
        rule.fields
            .iter()
            .map(|(name, value)| format!("{name}={value}")),
    );
    if actions {
        words.push(format!("actions={}", rule.actions.join(",")));
    }
    words.join(" ")
}

fn group_text(rule: &GroupRule) -> String {
    let mut words = vec![format!("id={}", rule.id), format!("type={}", rule.kind)];
    words.extend(
        rule.buckets
            .iter()
            .map(|bucket| format!("bucket={}", bucket.join(","))),
    );
    words.join(" ")
}

/// The request as a line `parse` reads, for the requests built from words with a text form.
fn request_text(request: &Request) -> Option<String> {
    Some(match request {
        Request::RouteAdd { prefix, via } => format!("route add {} via {via}", prefix_text(prefix)),
        Request::RouteDel(prefix) => format!("route del {}", prefix_text(prefix)),
        Request::NeighbourAdd(neighbour) => format!(
            "neighbour add {} {} {}",
            neighbour.addr,
            EthernetAddress(neighbour.mac),
            neighbour.port
        ),
        Request::NeighbourDel(addr) => format!("neighbour del {addr}"),
        Request::FlowAdd(rule) => format!("flow add {}", flow_text(rule, true)),
        Request::FlowDel(rule) => format!("flow del {}", flow_text(rule, false)),
        Request::GroupEdit(GroupEdit::Add(rule)) => format!("group add {}", group_text(rule)),
        Request::GroupEdit(GroupEdit::Modify(rule)) => format!("group mod {}", group_text(rule)),
        Request::GroupEdit(GroupEdit::Remove(id)) => format!("group del id={id}"),
        Request::GroupEdit(GroupEdit::RemoveAll) => "group del".into(),
        _ => return None,
    })
}

fn check_line(line: &[u8]) {
    match protocol::parse(line) {
        Ok(request) => {
            if let Some(text) = request_text(&request) {
                let again = protocol::parse(text.as_bytes());
                assert_eq!(again.as_ref(), Ok(&request), "{text:?}");
            }
        }
        Err(error) => {
            assert!(
                !error.error.is_empty() && !error.fix.is_empty(),
                "{error:?}"
            );
            let reply = Response::from(error).to_line();
            let (json, end) = reply.split_at(reply.len() - 1);
            assert!(end == "\n" && !json.contains('\n'), "{reply:?}");
            let value: serde_json::Value = serde_json::from_str(json).expect("a reply is JSON");
            assert_eq!(value["ok"], false, "{reply}");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut whole = Vec::new();
    let mut splitter = LineSplitter::new(MAX);
    splitter.feed(data, &mut whole);
    // The same stream cut where its first byte says.
    let cut = data
        .first()
        .map_or(0, |&byte| usize::from(byte) % (data.len() + 1));
    let (head, tail) = data.split_at(cut);
    let mut pieces = Vec::new();
    let mut again = LineSplitter::new(MAX);
    again.feed(head, &mut pieces);
    again.feed(tail, &mut pieces);
    assert_eq!(whole, pieces);
    assert_eq!(splitter.in_line(), again.in_line());
    for event in &whole {
        match event {
            LineEvent::Line(line) => {
                assert!(line.len() <= MAX && !line.contains(&b'\n'));
                check_line(line);
            }
            LineEvent::TooLong => {}
        }
    }
    // A whole input as one line too, past the splitter's limit.
    check_line(data);
});
