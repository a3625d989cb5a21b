//! Compiles `src/shim.c` against Debian's `libdpdk-dev` (found with `pkg-config libdpdk`, which
//! `scripts/setup-debian.sh` installs) and links the two DPDK libraries it calls: rte_lpm (the
//! tables, which brings its own dependencies as a shared library) and rte_eal (the memory).

use std::process::Command;

fn pkg_config(arg: &str) -> Vec<String> {
    let output = Command::new("pkg-config")
        .args([arg, "libdpdk"])
        .output()
        .unwrap_or_else(|e| panic!("pkg-config {arg} libdpdk: {e}; run scripts/setup-debian.sh"));
    assert!(
        output.status.success(),
        "pkg-config {arg} libdpdk failed ({}): install libdpdk-dev (scripts/setup-debian.sh)",
        String::from_utf8_lossy(&output.stderr).trim()
    );
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

fn main() {
    println!("cargo:rerun-if-changed=src/shim.c");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let mut build = cc::Build::new();
    build.file("src/shim.c").opt_level(3).warnings(true);
    // The include paths, `-include rte_config.h` and the -march DPDK was built for.
    let cflags = pkg_config("--cflags");
    let mut flags = cflags.iter();
    while let Some(flag) = flags.next() {
        if flag == "-include" {
            if let Some(file) = flags.next() {
                build.flag("-include").flag(file);
            }
        } else {
            build.flag(flag);
        }
    }
    build.compile("wirespeed_dpdk_lpm_shim");
    for flag in pkg_config("--libs-only-L") {
        if let Some(dir) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
        }
    }
    println!("cargo:rustc-link-lib=dylib=rte_lpm");
    println!("cargo:rustc-link-lib=dylib=rte_eal");
}
