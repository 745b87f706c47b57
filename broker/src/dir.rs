//! The per-invocation broker directory on the host:
//!
//! ```text
//! <tmp>/loom-broker-<pid>-<n>/     0700, owned by loom's user
//!     sock                         the broker's listening socket (the trust boundary)
//!     bin/                         0500: one copy (or hard link) of loom-shim per brokered command
//!     cwd/                         0500, empty: where a call starts when its row does not contain the caller's cwd
//! ```
//!
//! The whole directory is bound read-only into the shell's sandbox at its host path. The shims are regular files,
//! never symlinks, so there is nothing inside the sandbox that could be re-pointed.

use std::fs::DirBuilder;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::BrokerError;

/// The file name of the shim binary, installed next to the `loom` executable.
pub const SHIM_NAME: &str = "loom-shim";

/// Where `loom-shim` is: next to the running executable. Fails closed when it is missing.
///
/// # Ambient authority
/// Reads the path of the running executable.
pub fn shim_next_to_current_exe() -> Result<PathBuf, BrokerError> {
    let exe = std::env::current_exe().map_err(|e| BrokerError::NoShim {
        path: PathBuf::from(SHIM_NAME),
        why: format!("cannot locate the running executable: {e}"),
    })?;
    let shim = exe
        .parent()
        .map(|d| d.join(SHIM_NAME))
        .unwrap_or_else(|| PathBuf::from(SHIM_NAME));
    match std::fs::metadata(&shim) {
        Ok(m) if m.is_file() => Ok(shim),
        Ok(_) => Err(BrokerError::NoShim {
            path: shim,
            why: "it is not a regular file".into(),
        }),
        Err(e) => Err(BrokerError::NoShim {
            path: shim,
            why: e.to_string(),
        }),
    }
}

/// A created broker directory; removed on drop.
#[derive(Debug)]
pub struct BrokerDir {
    /// The directory (canonical).
    pub root: PathBuf,
}

impl BrokerDir {
    /// The socket path.
    pub fn socket(&self) -> PathBuf {
        self.root.join("sock")
    }
    /// The shim directory.
    pub fn bin(&self) -> PathBuf {
        self.root.join("bin")
    }
    /// The empty directory calls start in when their row does not contain the caller's cwd.
    pub fn neutral_cwd(&self) -> PathBuf {
        self.root.join("cwd")
    }

    /// Creates a fresh 0700 directory under `tmp` with one shim per name in `commands` and an empty `cwd/`.
    pub fn create(tmp: &Path, shim: &Path, commands: &[String]) -> Result<BrokerDir, BrokerError> {
        static N: AtomicU64 = AtomicU64::new(0);
        let io = |what: &str, p: &Path, e: std::io::Error| BrokerError::Io {
            what: format!("{what} {}", p.display()),
            source: e,
        };
        let tmp = std::fs::canonicalize(tmp).map_err(|e| io("cannot resolve", tmp, e))?;
        let mut root = None;
        for _ in 0..64 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or_default();
            let candidate = tmp.join(format!(
                "loom-broker-{}-{}-{nanos:x}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            match DirBuilder::new().mode(0o700).create(&candidate) {
                Ok(()) => {
                    root = Some(candidate);
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io("cannot create", &candidate, e)),
            }
        }
        let Some(root) = root else {
            return Err(BrokerError::Io {
                what: format!("cannot create a fresh directory under {}", tmp.display()),
                source: std::io::ErrorKind::AlreadyExists.into(),
            });
        };
        let dir = BrokerDir { root };
        let bin = dir.bin();
        DirBuilder::new()
            .mode(0o700)
            .create(&bin)
            .map_err(|e| io("cannot create", &bin, e))?;
        for name in commands {
            let dest = bin.join(name);
            if std::fs::hard_link(shim, &dest).is_err() {
                std::fs::copy(shim, &dest)
                    .map_err(|e| io("cannot install the shim as", &dest, e))?;
                std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o555))
                    .map_err(|e| io("cannot set permissions on", &dest, e))?;
            }
        }
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o500))
            .map_err(|e| io("cannot set permissions on", &bin, e))?;
        let cwd = dir.neutral_cwd();
        DirBuilder::new()
            .mode(0o500)
            .create(&cwd)
            .map_err(|e| io("cannot create", &cwd, e))?;
        Ok(dir)
    }
}

impl BrokerDir {
    /// Removes the directory and everything in it (idempotent; errors are ignored).
    pub fn remove(&self) {
        // The read-only subdirectories must become writable again before their entries can go.
        for sub in [self.bin(), self.neutral_cwd()] {
            let _ = std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o700));
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

impl Drop for BrokerDir {
    fn drop(&mut self) {
        self.remove();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_permissions_and_cleanup() {
        let tmp = std::env::temp_dir();
        let shim = std::env::current_exe().unwrap();
        let dir = BrokerDir::create(&tmp, &shim, &["gcalcli".into(), "jq".into()]).unwrap();
        let root = dir.root.clone();
        let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&root), 0o700);
        assert_eq!(mode(&dir.bin()), 0o500);
        let g = std::fs::symlink_metadata(dir.bin().join("gcalcli")).unwrap();
        assert!(
            g.file_type().is_file(),
            "a shim is a real file, never a symlink"
        );
        assert!(dir.bin().join("jq").is_file());
        assert!(std::fs::read_dir(dir.neutral_cwd())
            .unwrap()
            .next()
            .is_none());
        drop(dir);
        assert!(!root.exists());
    }
}
