//! Helpers for tests and benchmarks: build frames, push them into ports, read them back.
#![deny(unsafe_code)]

pub mod routes;
