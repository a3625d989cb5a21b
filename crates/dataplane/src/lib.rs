//! The data plane: ports -> worker -> pipeline stages -> ports.
//!
//! * [`worker`]: the one run-to-completion loop a worker thread runs.
//! * [`stage`]: one file per pipeline stage, each with the same anatomy (counters, dispositions,
//!   one batch function).
//! * [`table`]: the lookup structures stages consult (FIB, MAC table, flow cache, classifier).
//! * [`app`]: configured pipelines (xconnect, and later bridge, router, openflow).
//! * [`command`]: the lock-free channel that brings run-time changes to a worker between
//!   batches.
#![deny(unsafe_code)]

pub mod app;
pub mod command;
pub mod stage;
pub mod table;
pub mod worker;
