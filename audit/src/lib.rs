//! # loom-audit
//!
//! Renders the kernel's capability objects as a tree (text, JSON, SARIF) and compares ceilings for the CI gate. It
//! never computes authority itself: every verdict it prints comes from loom-kernel.
#![warn(missing_docs)]
