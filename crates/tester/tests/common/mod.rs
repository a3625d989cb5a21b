//! What the tester's lab tests share: their two-pair lab, and the forwarding switch of a DuT
//! namespace, which the router drivers must set and restore.
#![allow(dead_code)] // each test file uses its own part of this module

use wirespeed_lab::{Testbed, TestbedConfig, run};

/// A fresh lab of two port pairs with one queue each, named `prefix` (see
/// [`wirespeed_lab::up_for_test`]: `None`, after printing why, where it cannot be built).
pub fn lab(prefix: &str) -> Option<Testbed> {
    wirespeed_lab::up_for_test(&TestbedConfig {
        prefix: prefix.into(),
        ..TestbedConfig::default()
    })
}

/// `net.ipv4.ip_forward` inside namespace `ns` ("0" or "1"): the router drivers must restore it.
pub fn ip_forward(ns: &str) -> String {
    run(
        "ip",
        &["netns", "exec", ns, "sysctl", "-n", "net.ipv4.ip_forward"],
    )
    .unwrap()
    .trim()
    .to_string()
}
