//! The XDP programs of this crate, C sources in `bpf/` compiled by the build script with
//! `clang -target bpf` (wirespeed-bpf-build) and embedded, loaded with aya.
//!
//! aya parses the object, creates its maps (with the sizes and read-only globals the caller
//! sets on the [`EbpfLoader`] first), relocates, and loads the program with its BTF (which a
//! `bpf_loop` callback needs). What the rest of this module's users need is plain descriptors:
//! the program's, to attach it by a link of our own (`program`) or run it (`live`), and the
//! maps' that user space reads or fills (`bpf`'s map operations), so [`Loaded`] hands those
//! out and the aya object itself is dropped once they are taken: the kernel keeps a program
//! and its maps alive for as long as a descriptor (or a program using the map) holds them.

use std::os::fd::{AsFd, OwnedFd};

use aya::maps::Map;
use aya::programs::Xdp;
use aya::{Ebpf, EbpfError, EbpfLoader};

use super::program::ProgramError;

/// The object compiled from `bpf/NAME.c`.
macro_rules! object {
    ($name:literal) => {
        include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".o"))
    };
}
pub(crate) use object;

/// A program loaded from an object, and the object's maps until they are taken.
pub(crate) struct Loaded {
    ebpf: Ebpf,
    program: OwnedFd,
    name: &'static str,
}

impl std::fmt::Debug for Loaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loaded")
            .field("program", &self.name)
            .finish_non_exhaustive()
    }
}

/// Loads XDP program `program` of `object` with the settings of `loader` (map sizes, read-only
/// globals). A verifier refusal is [`ProgramError::Load`] with the program's name and the
/// verifier's last lines.
pub(crate) fn load(
    loader: &mut EbpfLoader<'_>,
    object: &[u8],
    program: &'static str,
) -> Result<Loaded, ProgramError> {
    let mut ebpf = loader
        .load(object)
        .map_err(|error| object_error(program, error))?;
    let fd = load_program(&mut ebpf, program)?;
    Ok(Loaded {
        ebpf,
        program: fd,
        name: program,
    })
}

/// [`load`] for a program defined twice (`bpf/xdp_twins.h`): frags-aware `program`, or where
/// the kernel does not know that flag (EINVAL, before 5.18) the plain `single`.
pub(crate) fn load_twin(
    loader: &mut EbpfLoader<'_>,
    object: &[u8],
    program: &'static str,
    single: &'static str,
) -> Result<Loaded, ProgramError> {
    let mut ebpf = loader
        .load(object)
        .map_err(|error| object_error(program, error))?;
    let (fd, name) = match load_program(&mut ebpf, program) {
        Ok(fd) => (fd, program),
        Err(ProgramError::Load { source, .. }) if source.raw_os_error() == Some(libc::EINVAL) => {
            (load_program(&mut ebpf, single)?, single)
        }
        Err(error) => return Err(error),
    };
    Ok(Loaded {
        ebpf,
        program: fd,
        name,
    })
}

/// Loads XDP program `program` of the object aya has prepared; returns its descriptor.
fn load_program(ebpf: &mut Ebpf, program: &'static str) -> Result<OwnedFd, ProgramError> {
    let xdp: &mut Xdp = ebpf
        .program_mut(program)
        .and_then(|found| found.try_into().ok())
        .ok_or_else(|| ProgramError::Load {
            program,
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
            log: "the object has no XDP program of that name".into(),
        })?;
    xdp.load().map_err(|error| refused(program, error))?;
    xdp.fd()
        .map_err(|error| refused(program, error))?
        .as_fd()
        .try_clone_to_owned()
        .map_err(|source| ProgramError::Load {
            program,
            source,
            log: "duplicating the program's descriptor".into(),
        })
}

impl Loaded {
    /// The program, for attaching or running it; the maps not taken before are freed with the
    /// object unless the program uses them.
    pub(crate) fn into_program(self) -> OwnedFd {
        self.program
    }

    /// A descriptor of map `name` (an array, a per-CPU array or an XSKMAP), for `bpf`'s map
    /// operations.
    pub(crate) fn map(&self, name: &'static str) -> Result<OwnedFd, ProgramError> {
        let data = match self.ebpf.map(name) {
            Some(Map::Array(data) | Map::PerCpuArray(data) | Map::XskMap(data)) => data,
            _ => {
                return Err(ProgramError::Map(std::io::Error::other(format!(
                    "program {}: its object has no array or XSKMAP `{name}`",
                    self.name
                ))));
            }
        };
        data.fd()
            .as_fd()
            .try_clone_to_owned()
            .map_err(ProgramError::Map)
    }
}

/// An object aya could not set up: a map the kernel refused is [`ProgramError::Map`] (so a
/// missing privilege is reported as such), anything else a load failure of `program`.
fn object_error(program: &'static str, error: EbpfError) -> ProgramError {
    match error {
        EbpfError::MapError(aya::maps::MapError::CreateError { io_error, .. }) => {
            ProgramError::Map(io_error)
        }
        other => ProgramError::Load {
            program,
            source: std::io::Error::other("aya could not prepare the object"),
            log: other.to_string(),
        },
    }
}

/// The kernel's refusal of `program`, with the verifier's last lines.
fn refused(program: &'static str, error: aya::programs::ProgramError) -> ProgramError {
    let log = verifier_refusal(&error);
    let source = match error {
        aya::programs::ProgramError::LoadError { io_error, .. } => io_error,
        _ => std::io::Error::other("aya could not load the program"),
    };
    ProgramError::Load {
        program,
        source,
        log,
    }
}

/// What the verifier said when it refused a program: its last lines (the instruction it
/// stopped at and why), or aya's error when the kernel gave no log.
pub fn verifier_refusal(error: &aya::programs::ProgramError) -> String {
    match error {
        aya::programs::ProgramError::LoadError {
            io_error,
            verifier_log,
        } => {
            let log = verifier_log.to_string();
            let lines: Vec<&str> = log.lines().filter(|line| !line.trim().is_empty()).collect();
            let tail = lines[lines.len().saturating_sub(8)..].join("\n  ");
            format!("{io_error}; the verifier's last lines:\n  {tail}")
        }
        other => other.to_string(),
    }
}
