//! The control plane: what the operator says, checked before anything runs.
//!
//! [`config`] parses and validates the TOML configuration of `wirespeed switch`. Every error
//! names the file, line, column and key, says what was expected and how to fix it, and nothing is
//! started from a configuration with any error in it.
#![deny(unsafe_code)]
// Config errors are built once, on the control path, and carry the whole place; boxing them buys
// nothing.
#![allow(clippy::result_large_err)]

pub mod config;

pub use config::{Config, ConfigError};
