//! The host implementation of [`Facts`]: reads the filesystem (`lstat`, `realpath`).

use std::path::{Path, PathBuf};

use crate::profile::{Entry, Facts};

/// Facts read from the host filesystem.
///
/// # Ambient Authority
/// Reads metadata of any path it is asked about; it never opens or changes files.
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
}
