//! For build scripts: compiles a crate's XDP programs, C sources in its `bpf/` directory, with
//! `clang -target bpf` into `$OUT_DIR/NAME.o`, which the crate embeds with
//! `include_bytes!(concat!(env!("OUT_DIR"), "/NAME.o"))` and loads with aya.
//!
//! Every crate with XDP programs (the fast path, the AF_XDP ports and the tester's programs in
//! the io crate) compiles them the same way, so the flags and the header set-up live here once.
//! clang and the BPF headers (libbpf-dev) come from Debian: `scripts/setup-debian.sh` installs
//! them; `CLANG` names another clang.

use std::path::PathBuf;
use std::process::Command;

/// Compiles `bpf/NAME.c` for each of `programs` into `$OUT_DIR/NAME.o`; `headers` are the
/// crate's own headers under `bpf/` the sources include (a change to one rebuilds). Panics, as
/// a build script does, with what to install when clang is missing or a source does not compile.
pub fn compile(programs: &[&str], headers: &[&str]) {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    for header in headers {
        println!("cargo:rerun-if-changed=bpf/{header}");
    }
    println!("cargo:rerun-if-env-changed=CLANG");
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    // <asm/types.h>, which <linux/types.h> includes, lives in the multiarch directory.
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let multiarch = format!("/usr/include/{arch}-linux-gnu");
    for program in programs {
        let source = format!("bpf/{program}.c");
        println!("cargo:rerun-if-changed={source}");
        let status = Command::new(&clang)
            .args(["-O2", "-g", "-target", "bpf", "-Wall", "-Werror"])
            .arg(format!("-I{multiarch}"))
            .args(["-c", &source, "-o"])
            .arg(out.join(format!("{program}.o")))
            .status();
        match status {
            Ok(status) if status.success() => {}
            Ok(status) => {
                panic!("{clang} failed to compile {source} ({status}); see its messages above")
            }
            Err(error) => panic!(
                "cannot run {clang} ({error}): the XDP programs are compiled with clang -target \
                 bpf; install clang and libbpf-dev (`sudo scripts/setup-debian.sh`) or set CLANG"
            ),
        }
    }
}
