//! # loom-audit
//!
//! Renders the kernel's capability objects as a tree (text), JSON and SARIF, and compares ceilings for the CI gate.
//! It never computes authority itself: every grant, verdict and law result it prints comes from loom-kernel, so what
//! audit prints is what runs. It does no I/O; the CLI passes it the facts the runtime gathered.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod gate;
mod json;
mod report;
mod text;

pub use gate::{
    render_gate_json, render_gate_sarif, render_gate_text, run_gate, GateEnv, GateResult,
};
pub use json::{render_json, render_load_error_json, shipped_json, JSON_VERSION};
pub use report::{
    add_authority, build_report, BootChecks, Facts, Finding, LawOutcome, Level, Report,
    SkillsSummary,
};
pub use text::{provider_label, render_text};
