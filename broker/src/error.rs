//! Why a broker could not be started. Nothing runs when one of these is returned.

use std::path::PathBuf;

/// Why [`crate::Broker::start`] (or [`crate::run_bash`]) refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BrokerError {
    /// The `loom-shim` binary is missing.
    #[error("cannot start the command broker: {path}: {why}; loom-shim must be installed next to the loom binary (cargo build -p loom-broker --bin loom-shim)")]
    NoShim {
        /// Where it was looked for.
        path: PathBuf,
        /// What went wrong.
        why: String,
    },
    /// A filesystem or socket operation failed.
    #[error("cannot start the command broker: {what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The grant brokers nothing (no general row, or no per-command row).
    #[error("the grant brokers no commands: a broker needs a commands = \"*\" row and at least one row naming commands")]
    NothingToBroker,
}
