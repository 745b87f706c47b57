//! End-to-end tests of the real `loom` binary.

mod version;
