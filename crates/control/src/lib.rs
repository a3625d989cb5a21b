//! The control plane: what the operator says, checked before anything runs.
//!
//! [`config`] parses and validates the TOML configuration of `wirespeed switch`. Every error
//! names the file, line, column and key, says what was expected and how to fix it, and nothing is
//! started from a configuration with any error in it.
//!
//! At run time, [`socket`] serves the control socket: [`protocol`] parses each request line,
//! [`dispatch`] turns it into commands for the workers (built off their hot path, see
//! `wirespeed_dataplane::command`) and their replies into one JSON reply, and [`tables`] builds
//! tables from files (a route file into FIBs) on the control thread. [`reload`] reads the
//! configuration file again and applies what changed through the same commands. [`openflow`] is
//! the OpenFlow 1.3 agent, whose flow mods reach the app through the same dispatcher.
#![deny(unsafe_code)]
// Config errors are built once, on the control path, and carry the whole place; boxing them buys
// nothing.
#![allow(clippy::result_large_err)]

pub mod config;
pub mod dispatch;
pub mod openflow;
pub mod protocol;
pub mod reload;
pub mod socket;
pub mod tables;

pub use config::{Config, ConfigError};
