//! Grant roots opened by descriptor, so a symlink planted after the profile was built cannot redirect a bind.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::error::SpawnError;
use crate::profile::Profile;

/// The `S_IFMT` bits of an open descriptor.
pub(crate) fn file_type(fd: &OwnedFd) -> Option<libc::mode_t> {
    // SAFETY: an all-zero stat is a valid out-parameter; fstat only writes into it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is a live descriptor and `st` a valid stat buffer.
    let rc = unsafe { libc::fstat(fd.as_raw_fd(), &mut st) };
    (rc == 0).then_some(st.st_mode & libc::S_IFMT)
}

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
        // With O_PATH, O_NOFOLLOW opens a final symlink itself instead of failing: look at what was opened.
        if file_type(&fd) == Some(libc::S_IFLNK) {
            return Err(changed("it is now a symlink".into()));
        }
        let seen = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            .map_err(|e| changed(e.to_string()))?;
        if seen != path {
            return Err(changed(format!("it now resolves to {}", seen.display())));
        }
        out.push((path, fd));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{build_profile, Limits, Place};
    use crate::HostFs;
    use loom_kernel::PathCtx;

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);
    impl TempDir {
        fn new(tag: &str) -> TempDir {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos();
            let p = std::env::temp_dir()
                .join(format!("loom-sandbox-{tag}-{}-{nanos}", std::process::id()));
            std::fs::create_dir_all(&p).unwrap();
            TempDir(std::fs::canonicalize(p).unwrap())
        }
        fn path(&self) -> &Path {
            &self.0
        }
    }
    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn profile_for(root: &Path) -> Profile {
        let row = crate::profile::tests::row(&format!(
            r#"{{ commands = "*", paths = ["{}"] }}"#,
            root.display()
        ));
        let place = Place {
            cwd: root.to_path_buf(),
            home: None,
            ..Place::default()
        };
        build_profile(
            &row,
            &PathCtx::new("/", None),
            &place,
            Limits::default(),
            &HostFs,
        )
        .unwrap()
    }

    #[test]
    fn roots_open_as_themselves() {
        let dir = TempDir::new("open");
        let root = dir.path().join("proj");
        std::fs::create_dir(&root).unwrap();
        let opened = open_roots(&profile_for(&root)).unwrap();
        assert_eq!(opened.len(), 1);
        assert_eq!(opened[0].0, root);
    }

    #[test]
    fn a_root_swapped_for_a_symlink_after_the_profile_is_refused() {
        let dir = TempDir::new("swap");
        let base = dir.path().to_path_buf();
        let root = base.join("proj");
        let elsewhere = base.join("elsewhere");
        std::fs::create_dir(&root).unwrap();
        std::fs::create_dir(&elsewhere).unwrap();
        let profile = profile_for(&root);
        // An earlier, unconfined step replaces the root with a symlink to somewhere else.
        std::fs::remove_dir(&root).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &root).unwrap();
        let err = open_roots(&profile).unwrap_err().to_string();
        assert!(err.contains("it is now a symlink"), "{err}");
        // And a symlinked parent directory is caught by the /proc/self/fd check.
        std::fs::remove_file(&root).unwrap();
        let real_parent = base.join("real");
        std::fs::create_dir_all(real_parent.join("proj")).unwrap();
        let nested = base.join("nest");
        std::fs::create_dir(&nested).unwrap();
        let inner = nested.join("proj");
        std::fs::create_dir(&inner).unwrap();
        let profile = profile_for(&inner);
        std::fs::remove_dir(&inner).unwrap();
        std::fs::remove_dir(&nested).unwrap();
        std::os::unix::fs::symlink(&real_parent, &nested).unwrap();
        let err = open_roots(&profile).unwrap_err().to_string();
        assert!(err.contains("now resolves to"), "{err}");
    }
}
