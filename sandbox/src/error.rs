//! Why a confined spawn failed ([`SpawnError`]) or a tier's trial run did ([`TrialError`]), and the raw helpers the
//! stages of a spawn share: a pipe whose ends close on exec, and a close-on-exec file in memory.

use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;

use crate::bwrap::BwrapError;

/// Why a command could not be run confined. Nothing ran when this is returned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpawnError {
    /// The chosen tier cannot express the profile.
    #[error("sandbox tier {tier} cannot enforce grant {grant}: {why}")]
    Inexpressible {
        /// The tier.
        tier: &'static str,
        /// The grant row.
        grant: String,
        /// What it cannot do, and the fix.
        why: String,
    },
    /// A root changed between building the profile and spawning (for example a symlink was planted).
    #[error("grant {grant}: {path} changed before the sandbox started ({why}); nothing ran")]
    RootChanged {
        /// The grant row.
        grant: String,
        /// The root.
        path: PathBuf,
        /// What happened.
        why: String,
    },
    /// bwrap argument construction failed.
    #[error(transparent)]
    Bwrap(#[from] BwrapError),
    /// The inner stage refused or failed before exec.
    #[error("sandbox setup failed: {0}")]
    Setup(String),
    /// The command does not exist inside the sandbox.
    #[error("command not found inside the sandbox: {0} (the sandbox sees the system directories and the granted roots; check PATH and the grant's paths)")]
    NotFound(String),
    /// An operating-system error while spawning.
    #[error("cannot start the sandbox: {0}")]
    Io(#[from] std::io::Error),
}

impl SpawnError {
    /// The exit code `loom sandbox run` uses for this error (127 for a missing command, else 1).
    pub fn exit_code(&self) -> i32 {
        match self {
            SpawnError::NotFound(_) => 127,
            _ => 1,
        }
    }
}

/// Why a tier's trial run failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TrialError {
    /// The host lacks what the tier needs; each entry says what, and the fix.
    #[error("{}", .0.join("; "))]
    HostLacks(Vec<String>),
    /// The sandbox's inner stage is not installed next to the running executable.
    #[error("{0}")]
    NoInnerExe(String),
    /// The sandbox refused or failed to start `true`.
    #[error("{0}")]
    Refused(String),
    /// `true` ran, and exited with this code; then what it said on stderr (`: ...`, or nothing).
    #[error("`true` exited {0} inside the sandbox{1}")]
    Exited(i32, String),
    /// The tier was not tried.
    #[error("not tried")]
    NotTried,
}

/// An anonymous file in memory named `name`, close-on-exec, with `flags` (`MFD_*`) besides.
pub(crate) fn memory_file(
    name: &std::ffi::CStr,
    flags: libc::c_uint,
) -> std::io::Result<std::fs::File> {
    // SAFETY: a NUL-terminated name and flags; the result is checked before it is owned.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | flags) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and is owned by nobody else.
    Ok(std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// A pipe, both ends close-on-exec.
pub(crate) fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}
