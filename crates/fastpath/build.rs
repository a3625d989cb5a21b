//! Compiles the fast path's XDP program (bpf/fast_path.c) with `clang -target bpf` into
//! `$OUT_DIR/fast_path.o`, which the crate embeds. clang and the BPF headers (libbpf-dev) come
//! from Debian: `scripts/setup-debian.sh` installs them.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let source = "bpf/fast_path.c";
    println!("cargo:rerun-if-changed={source}");
    println!("cargo:rerun-if-changed=bpf/fast_path.h");
    println!("cargo:rerun-if-env-changed=CLANG");
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    // <asm/types.h>, which <linux/types.h> includes, lives in the multiarch directory.
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let multiarch = format!("/usr/include/{arch}-linux-gnu");
    let object = out.join("fast_path.o");
    let status = Command::new(&clang)
        .args(["-O2", "-g", "-target", "bpf", "-Wall", "-Werror"])
        .arg(format!("-I{multiarch}"))
        .args(["-c", source, "-o"])
        .arg(&object)
        .status();
    match status {
        Ok(status) if status.success() => {}
        Ok(status) => {
            panic!("{clang} failed to compile {source} ({status}); see its messages above")
        }
        Err(error) => panic!(
            "cannot run {clang} ({error}): the XDP fast path is compiled with clang -target bpf; \
             install clang and libbpf-dev (`sudo scripts/setup-debian.sh`) or set CLANG"
        ),
    }
}
