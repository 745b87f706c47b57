//! The host implementation of [`Facts`]: reads the filesystem (`lstat`, `realpath`).

use std::path::{Path, PathBuf};

use crate::profile::{Entry, Facts};

/// Facts read from the host filesystem.
///
/// # Ambient Authority
/// Reads metadata of any path it is asked about and lists directories; it never opens or changes files.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostFs;

impl Facts for HostFs {
    fn entry(&self, path: &Path) -> Option<Entry> {
        let meta = std::fs::symlink_metadata(path).ok()?;
        Some(if meta.file_type().is_symlink() {
            Entry::Symlink(std::fs::read_link(path).ok()?)
        } else if meta.is_dir() {
            Entry::Dir
        } else {
            Entry::File
        })
    }

    fn canonical(&self, path: &Path) -> Option<PathBuf> {
        std::fs::canonicalize(path).ok()
    }

    fn subdirs(&self, dir: &Path) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        entries
            .take(crate::profile::LIST_LIMIT)
            .filter_map(Result::ok)
            // the entry's own type: a symlink to a directory is not followed
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect()
    }
}
