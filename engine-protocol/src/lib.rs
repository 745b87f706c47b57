//! # loom-engine-protocol: what loom and the model engine process (`loom-engine`) say to each other: one JSON object per line on the engine's
//! stdin ([`Request`]) and stdout ([`Reply`]). The engine loads one model, then runs one job at a time, in the order
//! they arrive; a job's events are [`Reply::Event`] lines and its end is one [`Reply::End`]. loom ends the engine by
//! closing its stdin.
//!
//! A leaf crate both sides depend on, so the engine process links neither the model catalog nor the installer and
//! loom links no llama.cpp.
//!
//! ## What this crate must never do
//! Any I/O, or anything but the wire types and the one line format ([`line`]). No `unsafe`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The name of the start rule of every grammar loom sends with a job.
pub const ROOT: &str = "root";

/// How to load a model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineOptions {
    /// The GGUF file (already checked).
    pub model: PathBuf,
    /// What to call it in messages.
    pub label: String,
    /// CPU threads.
    pub threads: u32,
    /// The context window in tokens.
    pub context: u32,
}

/// Sampling settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    /// 0 = greedy.
    pub temperature: f32,
    /// Keep the k most likely tokens (0 = off).
    pub top_k: i32,
    /// Nucleus sampling (1.0 = off).
    pub top_p: f32,
    /// Seed of the random choice.
    pub seed: u32,
}

/// What a job reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum JobEvent {
    /// The prompt is processed: `tokens` in all, of which `reused` came from the cache.
    Prompt {
        /// Prompt tokens.
        tokens: usize,
        /// Tokens whose KV entries were kept from the previous job.
        reused: usize,
        /// Milliseconds spent on the new prompt tokens.
        millis: u64,
    },
    /// Generated text (whole UTF-8 characters).
    Text(String),
    /// The model opened a tool call (the job's [`Trigger`] appeared): the text from here on is the call, decoded
    /// under the job's grammar; the text before it was free.
    Call,
    /// The job ended.
    Done {
        /// Tokens generated.
        generated: usize,
        /// True when the output cap ended it.
        hit_limit: bool,
        /// True when the caller stopped it.
        cancelled: bool,
        /// Milliseconds from the first generated token to the end.
        millis: u64,
    },
}

/// The work of one generation job, as it crosses to the engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    /// The conversation as (role, content) pairs, rendered with the model's own chat template.
    pub messages: Vec<(String, String)>,
    /// The GBNF grammar the output must follow (start rule `root`); empty: free text.
    pub grammar: String,
    /// With a trigger, the grammar is lazy: the output is free text until the trigger's text appears, and the grammar
    /// (whose language begins with that text) applies from there; without one, from the first token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<Trigger>,
    /// Output cap in tokens.
    pub max_tokens: u32,
    /// Sampling settings.
    pub sampling: Sampling,
}

/// Where a lazy grammar starts to apply: the text that opens a tool call in the model's own format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trigger {
    /// The opening text, e.g. `<tool_call>`; the grammar's language begins with it.
    pub text: String,
    /// Only at the start of the output (after white space); otherwise anywhere in it.
    pub at_start: bool,
}

/// A line loom writes to the engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Request {
    /// Load the model (the first line, exactly once).
    Load(EngineOptions),
    /// Run a job after the ones before it.
    Job {
        /// loom's number for it.
        id: u64,
        /// The work.
        job: JobSpec,
    },
    /// Stop job `id` at its next token (it still ends with `Done { cancelled: true }`).
    Cancel {
        /// The job.
        id: u64,
    },
}

/// A line the engine writes to loom.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// The model is loaded.
    Ready {
        /// The chat template its GGUF file carries (the text loom recognises the model's tool-call format by).
        chat_template: String,
        /// How the engine confined itself before it loaded the model (`landlock=full seccomp=on no_new_privs=on,
        /// reading only …`). Empty from an engine that did not, which loom refuses.
        #[serde(default)]
        confinement: String,
    },
    /// The model could not be loaded; the engine exits after this line.
    LoadFailed(EngineError),
    /// An event of job `id`.
    Event {
        /// The job.
        id: u64,
        /// The event.
        event: JobEvent,
    },
    /// Job `id` ended: after its `Done` event, or with why it failed.
    End {
        /// The job.
        id: u64,
        /// Why it failed, if it did.
        error: Option<EngineError>,
    },
}

/// Why the engine could not load a model or run a job.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[non_exhaustive]
pub enum EngineError {
    /// llama.cpp could not start.
    #[error("the local model runtime (llama.cpp) could not start: {0}")]
    Backend(String),
    /// The model file did not load (truncated, unsupported architecture, …).
    #[error("llama.cpp could not load the model {model}: {why}; the file may be truncated or of an architecture this build does not support — reinstall it or pick another model")]
    Load {
        /// The model.
        model: String,
        /// What failed.
        why: String,
    },
    /// The engine could not confine itself (no Landlock on the host, …), so it loaded nothing.
    #[error("the local model engine could not confine itself, so it loaded nothing: {0}")]
    Confine(String),
    /// The model carries no chat template.
    #[error("the model {0} carries no chat template in its GGUF file, so loom cannot build its prompt; use an instruct/chat model")]
    NoTemplate(String),
    /// The prompt does not fit.
    #[error("the prompt is {prompt} tokens and the answer may take {answer} more, but {model} has a context of {context} (raise `context` under [harness], or drop some of its `examples`)")]
    ContextOverflow {
        /// The model.
        model: String,
        /// Prompt tokens.
        prompt: usize,
        /// Output cap.
        answer: u32,
        /// The context size.
        context: u32,
    },
    /// llama.cpp refused the grammar.
    #[error("llama.cpp refused the tool grammar for {0}; a tool's schema may be too complex — remove tools from [tools] until it loads")]
    Grammar(String),
    /// Evaluation failed.
    #[error("the local model failed while generating: {0}")]
    Decode(String),
    /// The engine process could not be started, or it ended, or it broke the protocol: what happened, with the
    /// end of its stderr.
    #[error("the local model engine {0}")]
    Process(String),
    /// The engine is gone.
    #[error("the local model engine has stopped; restart loom")]
    Stopped,
}

/// One protocol line (without the newline).
pub fn line<T: Serialize>(message: &T) -> String {
    // the protocol types hold only strings, numbers, paths and lists, which always serialise
    serde_json::to_string(message).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_survives_a_line() {
        let requests = vec![
            Request::Load(EngineOptions {
                model: "/m/x.gguf".into(),
                label: "x".into(),
                threads: 2,
                context: 1024,
            }),
            Request::Job {
                id: 3,
                job: JobSpec {
                    messages: vec![("user".into(), "hi\nthere \u{1F600}".into())],
                    grammar: "root ::= \"a\"".into(),
                    trigger: Some(Trigger {
                        text: "<tool_call>".into(),
                        at_start: false,
                    }),
                    max_tokens: 5,
                    sampling: Sampling {
                        temperature: 0.5,
                        top_k: 40,
                        top_p: 0.95,
                        seed: 7,
                    },
                },
            },
            Request::Cancel { id: 3 },
        ];
        assert_eq!(
            serde_json::from_str::<Reply>(r#"{"ready":{"chat_template":"t"}}"#).unwrap(),
            Reply::Ready {
                chat_template: "t".into(),
                confinement: String::new()
            }
        );
        for r in requests {
            let l = line(&r);
            assert!(!l.contains('\n'), "{l}");
            assert_eq!(serde_json::from_str::<Request>(&l).unwrap(), r);
        }
        let replies = vec![
            Reply::Ready {
                chat_template: "{% for m in messages %}<|im_start|>{{ m.role }}\n{% endfor %}"
                    .into(),
                confinement: "landlock=full seccomp=on no_new_privs=on, reading only /m/x.gguf"
                    .into(),
            },
            Reply::LoadFailed(EngineError::NoTemplate("x".into())),
            Reply::LoadFailed(EngineError::Confine("no Landlock".into())),
            Reply::Event {
                id: 1,
                event: JobEvent::Text("é".into()),
            },
            Reply::Event {
                id: 1,
                event: JobEvent::Call,
            },
            Reply::Event {
                id: 1,
                event: JobEvent::Done {
                    generated: 2,
                    hit_limit: false,
                    cancelled: true,
                    millis: 9,
                },
            },
            Reply::End {
                id: 1,
                error: Some(EngineError::ContextOverflow {
                    model: "x".into(),
                    prompt: 10,
                    answer: 5,
                    context: 12,
                }),
            },
            Reply::End { id: 2, error: None },
        ];
        for r in replies {
            let l = line(&r);
            assert!(!l.contains('\n'), "{l}");
            assert_eq!(serde_json::from_str::<Reply>(&l).unwrap(), r);
        }
    }
}
