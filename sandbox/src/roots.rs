//! Grant roots opened by descriptor, so a symlink planted after the profile was built cannot redirect a bind.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::profile::Profile;
use crate::spawn::SpawnError;

/// Opens `path` with `O_PATH | O_NOFOLLOW | O_CLOEXEC`.
pub(crate) fn open_nofollow(path: &Path) -> std::io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a valid NUL-terminated string.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is freshly opened and owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens every grant root and protected path with `O_PATH | O_NOFOLLOW` and checks, through `/proc/self/fd`, that
/// the descriptor is the path itself (no symlink in any component). bwrap then binds the descriptors, so a symlink
/// planted after this check cannot redirect a bind.
pub fn open_roots(profile: &Profile) -> Result<Vec<(PathBuf, OwnedFd)>, SpawnError> {
    let mut out = Vec::new();
    let paths = profile
        .roots()
        .into_iter()
        .map(|(p, _)| p.to_path_buf())
        .chain(profile.protected.iter().cloned())
        .chain(profile.pinned.iter().cloned());
    for path in paths {
        let changed = |why: String| SpawnError::RootChanged {
            grant: profile.grant.clone(),
            path: path.clone(),
            why,
        };
        let fd = open_nofollow(&path).map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => changed("it is now a symlink".into()),
            _ => changed(e.to_string()),
        })?;
        let seen = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            .map_err(|e| changed(e.to_string()))?;
        if seen != path {
            return Err(changed(format!("it now resolves to {}", seen.display())));
        }
        out.push((path, fd));
    }
    Ok(out)
}
