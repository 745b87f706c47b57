//! # loom-runtime
//!
//! Everything that does I/O to run an agent. Today: loading a manifest from disk (its text, the process env map,
//! the working and home directories), sub-manifests by path, git baselines for the CI gate, and per-agent storage
//! paths. It gathers facts and enforces the kernel's answers; it never decides authority on its own.
#![warn(missing_docs)]

mod baseline;
mod load;
mod storage;

pub use baseline::{git_show, BaselineSpec};
pub use load::{
    env_map, load_manifest, path_ctx, read_text, FsLoader, LoadError, Loaded, MAX_MANIFEST_BYTES,
};
pub use storage::storage_dir;
