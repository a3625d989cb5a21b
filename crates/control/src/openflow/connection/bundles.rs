//! A connection's bundles (ONF extension 230, [`wirespeed_openflow::bundle`]): FLOW_MODs
//! collected without a round trip each, then committed all or nothing.
//!
//! Each message is checked when it is added (decoded, a FLOW_MOD, its match and instructions
//! translated), so a bad one is refused at once with its own xid, as `ovs-ofctl --bundle` expects before
//! it commits. The bundle keeps the message's bytes (about 100 per flow), not the rule: a
//! connection's open bundles hold at most [`MAX_BUNDLE_BYTES`]. A commit sends the edits to
//! the workers as one transaction in parts of at most [`RUN_MAX`](super::RUN_MAX) adds or one
//! page of a delete's or modify's flows (each part holds a worker for a few milliseconds
//! only); when an edit is refused, the workers undo that part,
//! then the earlier ones in bounded steps (`TransactionStep::Abort`), and the peer gets the
//! edit's ERROR with its xid, then BUNDLE_FAILED/MSG_FAILED for the commit. Packets
//! forwarded while a commit of more than one part is under way may see part of it; the
//! tables at the end are the old ones or the new ones.
//!
//! FLOW_MODs are taken (adds, modifies, deletes: `ovs-ofctl --bundle add-flows`,
//! `mod-flows`, `del-flows`, `replace-flows`); other messages are refused with
//! BUNDLE_FAILED/MSG_UNSUP when added.

use wirespeed_dataplane::command::{FlowEdit, TransactionStep};
use wirespeed_openflow::bundle::{control, flags};
use wirespeed_openflow::message::{FlowModCommand, role};
use wirespeed_openflow::{BundleAdd, BundleControl, Header, Message, OfError};

use super::{Connection, Handled, REMOVED_DELETE, RUN_MAX, flow_removed};
use crate::openflow::switch::{self, Change, Switch};

/// Bundles a connection may have open at once.
pub const MAX_BUNDLES: usize = 16;
/// Bytes of added messages a connection's open bundles hold together at most: about 600 000
/// flows.
pub const MAX_BUNDLE_BYTES: usize = 64 << 20;

/// An open bundle.
pub(super) struct Bundle {
    id: u32,
    flags: u16,
    closed: bool,
    /// The messages added, whole, one after another.
    messages: Vec<u8>,
}

impl Connection {
    /// Answers a BUNDLE_CONTROL request.
    pub(super) fn bundle_control(
        &mut self,
        request: BundleControl,
        xid: u32,
        bytes: &[u8],
        switch: &Switch<'_>,
    ) -> Handled {
        let found = self.bundles.iter().position(|b| b.id == request.bundle_id);
        let result = match (request.kind, found) {
            (control::OPEN_REQUEST, Some(_)) => Err(OfError::BUNDLE_EXIST),
            (control::OPEN_REQUEST, None) => self.open_bundle(request.bundle_id, request.flags),
            (control::CLOSE_REQUEST | control::COMMIT_REQUEST | control::DISCARD_REQUEST, None) => {
                Err(OfError::BUNDLE_BAD_ID)
            }
            (_, Some(at)) if self.bundles[at].flags != request.flags => {
                Err(OfError::BUNDLE_BAD_FLAGS)
            }
            (control::CLOSE_REQUEST, Some(at)) if self.bundles[at].closed => {
                Err(OfError::BUNDLE_CLOSED)
            }
            (control::CLOSE_REQUEST, Some(at)) => {
                self.bundles[at].closed = true;
                Ok(())
            }
            (control::DISCARD_REQUEST, Some(at)) => {
                self.bundles.swap_remove(at);
                Ok(())
            }
            // A slave changes no flow (§6.3.5), also not by a bundle it filled as master.
            (control::COMMIT_REQUEST, Some(_)) if self.role == role::SLAVE => {
                Err(OfError::BAD_REQUEST_IS_SLAVE)
            }
            (control::COMMIT_REQUEST, Some(at)) => {
                let bundle = self.bundles.swap_remove(at);
                return self.commit(&bundle, xid, bytes, &request, switch);
            }
            _ => Err(OfError::BUNDLE_BAD_TYPE),
        };
        match result {
            Ok(()) => {
                self.send(&Message::BundleControl(request.reply()), xid);
                Handled::Done
            }
            Err(error) => {
                self.refuse(error, xid, bytes);
                Handled::Refused
            }
        }
    }

    fn open_bundle(&mut self, id: u32, flags: u16) -> Result<(), OfError> {
        if flags & !(flags::ATOMIC | flags::ORDERED) != 0 {
            return Err(OfError::BUNDLE_BAD_FLAGS);
        }
        if self.bundles.len() >= MAX_BUNDLES {
            return Err(OfError::BUNDLE_OUT_OF_BUNDLES);
        }
        self.bundles.push(Bundle {
            id,
            flags,
            closed: false,
            messages: Vec::new(),
        });
        Ok(())
    }

    /// Takes a message into its bundle (opened here if it is not, §7.3.9.6 of 1.4), or
    /// refuses it with the error its defect names.
    pub(super) fn bundle_add(
        &mut self,
        add: BundleAdd,
        xid: u32,
        bytes: &[u8],
        switch: &Switch<'_>,
    ) -> Handled {
        match self.take_into_bundle(&add, xid, switch) {
            Ok(()) => Handled::Done,
            Err(error) => {
                self.refuse(error, xid, bytes);
                Handled::Refused
            }
        }
    }

    fn take_into_bundle(
        &mut self,
        add: &BundleAdd,
        xid: u32,
        switch: &Switch<'_>,
    ) -> Result<(), OfError> {
        if self.role == role::SLAVE {
            return Err(OfError::BAD_REQUEST_IS_SLAVE);
        }
        let (header, message) = Message::decode(&add.message).map_err(|e| e.error)?;
        if header.xid != xid {
            return Err(OfError::BUNDLE_MSG_BAD_XID);
        }
        bundled(&message, switch)?;
        let held: usize = self.bundles.iter().map(|b| b.messages.len()).sum();
        if held + add.message.len() > MAX_BUNDLE_BYTES {
            return Err(OfError::BUNDLE_MSG_TOO_MANY);
        }
        let at = match self.bundles.iter().position(|b| b.id == add.bundle_id) {
            Some(at) => at,
            None => {
                self.open_bundle(add.bundle_id, add.flags)?;
                self.bundles.len() - 1
            }
        };
        let bundle = &mut self.bundles[at];
        if bundle.closed {
            return Err(OfError::BUNDLE_CLOSED);
        }
        if bundle.flags != add.flags {
            return Err(OfError::BUNDLE_BAD_FLAGS);
        }
        self.counts.flow_mods += 1;
        bundle.messages.extend_from_slice(&add.message);
        Ok(())
    }

    /// Applies a bundle's messages as one transaction; COMMIT_REPLY when all applied, else
    /// the refused message's ERROR and BUNDLE_FAILED/MSG_FAILED, nothing applied. Adds go to
    /// the workers in parts of up to [`RUN_MAX`]; a delete or modify selects its flows from
    /// the tables as the messages before it left them (those are applied first), so each
    /// message acts as it would have alone, in order.
    fn commit(
        &mut self,
        bundle: &Bundle,
        xid: u32,
        bytes: &[u8],
        request: &BundleControl,
        switch: &Switch<'_>,
    ) -> Handled {
        let mut adds = Vec::with_capacity(RUN_MAX);
        let mut sources = Vec::with_capacity(RUN_MAX);
        let mut removed = Vec::new();
        // Whether some part went to the workers: a failure then undoes it.
        let mut applied = false;
        for message in Messages(&bundle.messages) {
            // Checked when added: the same checks pass again, or the commit fails here.
            let decoded = match Message::decode(message) {
                Ok((_, decoded)) => decoded,
                Err(e) => {
                    return self.commit_failed(e.error, message, applied, switch, (xid, bytes));
                }
            };
            let outcome = match bundled(&decoded, switch) {
                Err(error) => Err((error, message)),
                Ok(Bundled::Add(edit)) => {
                    adds.push(edit);
                    sources.push(message);
                    if adds.len() < RUN_MAX {
                        Ok(())
                    } else {
                        applied = true;
                        apply_adds(&mut adds, &mut sources, TransactionStep::Part, switch)
                    }
                }
                Ok(Bundled::Change(change)) => {
                    applied = true;
                    let part = |edits| {
                        switch
                            .apply_part(edits, TransactionStep::Part, switch::refusal)
                            .into_iter()
                            .collect()
                    };
                    apply_adds(&mut adds, &mut sources, TransactionStep::Part, switch).and_then(
                        |()| {
                            let flows = switch.carry_out(&change, part);
                            flows
                                .map(|flows| removed.extend(flows))
                                .map_err(|e| (e, message))
                        },
                    )
                }
            };
            if let Err((error, failed)) = outcome {
                return self.commit_failed(error, failed, applied, switch, (xid, bytes));
            }
        }
        if let Err((error, failed)) =
            apply_adds(&mut adds, &mut sources, TransactionStep::Last, switch)
        {
            return self.commit_failed(error, failed, true, switch, (xid, bytes));
        }
        for flow in &removed {
            let message = Message::FlowRemoved(flow_removed(flow, REMOVED_DELETE));
            self.notify(&message);
            self.removed.push(message);
        }
        self.send(&Message::BundleControl(request.reply()), xid);
        Handled::Done
    }

    /// Ends a failed commit: the workers that applied parts undo them, and the peer gets
    /// the message's ERROR (its xid) and the commit's.
    fn commit_failed(
        &mut self,
        error: OfError,
        message: &[u8],
        applied: bool,
        switch: &Switch<'_>,
        (xid, bytes): (u32, &[u8]),
    ) -> Handled {
        if applied {
            // A worker that refused undid that part; the earlier ones, and the parts of the
            // workers that took it, are undone now. Should the workers not answer, the
            // commit fails all the same, and the switch says so on its standard error.
            if let Err(why) = switch.abort_transaction() {
                eprintln!("openflow agent: a failed bundle commit not undone everywhere: {why}");
            }
        }
        let inner = Header::peek(message).map_or(xid, |header| header.xid);
        self.refuse(error, inner, message);
        self.refuse(OfError::BUNDLE_MSG_FAILED, xid, bytes);
        Handled::Refused
    }
}

/// Sends the adds collected to the workers as one part of the transaction (`Part` only when
/// there are some; `Last` always, as it ends the transaction); the first refused add's error
/// and message.
fn apply_adds<'m>(
    adds: &mut Vec<FlowEdit>,
    sources: &mut Vec<&'m [u8]>,
    step: TransactionStep,
    switch: &Switch<'_>,
) -> Result<(), (OfError, &'m [u8])> {
    if adds.is_empty() && step == TransactionStep::Part {
        return Ok(());
    }
    let results = switch.apply_part(std::mem::take(adds), step, switch::refusal);
    let refused = results
        .into_iter()
        .zip(sources.drain(..))
        .find_map(|(result, message)| result.err().map(|error| (error, message)));
    refused.map_or(Ok(()), Err)
}

/// What a bundled message does, checked as the workers will take it: a FLOW_MOD add
/// becomes its edit, a delete or modify the [`Change`] it makes to the flows it selects.
enum Bundled<'r> {
    Add(FlowEdit),
    Change(Change<'r>),
}

/// The message of a bundle as it will apply, or the error that refuses it; only FLOW_MODs
/// are taken.
fn bundled<'r>(message: &'r Message, switch: &Switch<'_>) -> Result<Bundled<'r>, OfError> {
    match message {
        Message::FlowMod(flow_mod) if flow_mod.command == FlowModCommand::Add => switch
            .add_rule(flow_mod)
            .map(|rule| Bundled::Add(FlowEdit::Add(rule))),
        Message::FlowMod(flow_mod) => switch.change(flow_mod).map(Bundled::Change),
        _ => Err(OfError::BUNDLE_MSG_UNSUP),
    }
}

/// The whole messages of a bundle's bytes, in order.
struct Messages<'a>(&'a [u8]);

impl<'a> Iterator for Messages<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let length = usize::from(Header::peek(self.0)?.length);
        if length == 0 || length > self.0.len() {
            return None;
        }
        let (message, rest) = self.0.split_at(length);
        self.0 = rest;
        Some(message)
    }
}
