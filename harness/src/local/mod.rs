//! The `local` harness: a GGUF model run by llama.cpp in the engine process `loom-engine` (crates `loom-local`, the
//! client and protocol, and `loom-engine`, the process), started when the harness is built and ended with it.
//!
//! Each request renders the conversation with the model's own chat template, with the tools, earlier calls and their
//! results in the tool-call format of the model's family (recognised from the template when the engine starts;
//! [`loom_local::Family`]). The response is free text until the model opens a call the way its format does, and from
//! there it is decoded under a grammar built from the request's tools, so a call always names one of them with input
//! of its schema's shape (for a template loom does not recognise: loom's own protocol, a call or an answer from the
//! first token). On the last request a turn allows (`maxTurnRequests`), only an answer. The engine keeps its KV cache
//! between requests, so the next request of a turn only processes the new messages. A decoded call is a proposal
//! like any model's: the kernel decides it and the sandbox confines it.
//!
//! With `tool_choice = "required"` every response is a call and the turn ends with a call to the answer step; a
//! request after a result recalls the turn's task at its end, and a response that repeats the call just made is
//! drawn again (hotter, another seed) before anything of it is sent — small-model aids, not authority.

mod config;
mod examples;
mod prompt;
#[cfg(test)]
mod tests;

pub use config::DEFAULT_CONTEXT;
pub(crate) use config::{LocalConfig, ModelChoice};
pub(crate) use examples::example_messages;
pub(crate) use prompt::{chat_messages, grammar_for, previous_call, AnswerStep};

pub use engine_harness::LocalHarness;

mod engine_harness {
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    use futures::future::BoxFuture;
    use loom_local::{
        call_in_text, check_gguf_header, engine_program, install, installed_path, parse_response,
        possible_call_start, stderr_progress, verify_known, Engine, EngineError, EngineOptions,
        Family, Job, JobEvent, KnownModel, Respond, Response, Sampling, ToolFormat,
    };
    use tokio::sync::mpsc;
    use tokio_util::sync::CancellationToken;

    use super::{
        chat_messages, example_messages, grammar_for, previous_call, AnswerStep, LocalConfig,
        ModelChoice,
    };
    use crate::model::{ModelEvent, ModelRequest, StopReason, Usage};
    use crate::{EventStream, Harness, HarnessConfigError, HarnessError};

    /// The local harness: the engine and the settings of `[harness]`.
    pub struct LocalHarness {
        engine: Engine,
        family: Family,
        config: LocalConfig,
        max_turn_requests: u32,
        calls: AtomicU64,
    }

    impl std::fmt::Debug for LocalHarness {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("LocalHarness")
                .field("engine", &self.engine)
                .finish()
        }
    }

    fn engine_err(e: EngineError) -> HarnessConfigError {
        HarnessConfigError::Invalid(e.to_string())
    }

    impl LocalHarness {
        /// Builds the harness from `[harness]`: resolves the model (installing a known one that is missing, with a
        /// progress display on stderr), checks the file, and loads it in a new engine process.
        pub fn from_config(
            config: &toml::Table,
            manifest_dir: &Path,
            models: Option<&Path>,
            env: &BTreeMap<String, String>,
            max_turn_requests: u32,
        ) -> Result<LocalHarness, HarnessConfigError> {
            let config = LocalConfig::parse(config, manifest_dir)?;
            let (path, label) = match &config.model {
                ModelChoice::Known(k) => known_file(k, models, env)?,
                ModelChoice::Auto {
                    recommended,
                    fallback,
                } => match models {
                    Some(m) if installed_path(m, recommended).is_file() => {
                        known_file(recommended, models, env)?
                    }
                    _ => {
                        eprintln!(
                            "loom: model = \"auto\": using {} — {}; the recommended {} is not installed: `loom \
                             model install {}` gets it ({} MB)",
                            fallback.name,
                            fallback.tool_use,
                            recommended.name,
                            recommended.name,
                            recommended.size / 1_000_000
                        );
                        known_file(fallback, models, env)?
                    }
                },
                ModelChoice::Path(p) => {
                    check_gguf_header(p).map_err(|e| HarnessConfigError::Invalid(e.to_string()))?;
                    (p.clone(), p.display().to_string())
                }
            };
            let program = engine_program(env).map_err(engine_err)?;
            let engine = Engine::start(
                &program,
                EngineOptions {
                    model: path,
                    label,
                    threads: config.threads,
                    context: config.context,
                },
            )
            .map_err(engine_err)?;
            let family = Family::recognise(engine.chat_template());
            if family == Family::Unrecognised {
                // named once, at start: the model still works, in a format it was not trained on
                eprintln!(
                    "loom: the chat template of {} is not one loom recognises (Qwen 2.5, Hermes/ChatML, SmolLM, \
                     Llama 3.x), so its tools are described and called in loom's own JSON protocol (README: Local \
                     models)",
                    engine.label()
                );
            }
            Ok(LocalHarness {
                engine,
                family,
                config,
                max_turn_requests,
                calls: AtomicU64::new(0),
            })
        }
    }

    /// The file of known model `k` in `models`, checked, or installed first when it is missing; and its label.
    fn known_file(
        k: &'static KnownModel,
        models: Option<&Path>,
        env: &BTreeMap<String, String>,
    ) -> Result<(PathBuf, String), HarnessConfigError> {
        let models = models.ok_or_else(|| {
            HarnessConfigError::Invalid(format!(
                "model = {:?} is a known model, but no models directory was given to find it in; build the \
                 harness through loom's boot (it passes $LOOM_DATA_HOME/models)",
                k.name
            ))
        })?;
        let path = installed_path(models, k);
        if path.is_file() {
            verify_known(k, &path).map_err(|e| HarnessConfigError::Invalid(e.to_string()))?;
        } else {
            let python = env
                .get("LOOM_PYTHON")
                .cloned()
                .unwrap_or_else(|| "python3".into());
            install(models, k, &python, false, &mut stderr_progress(k.name))
                .map_err(|e| HarnessConfigError::Invalid(e.to_string()))?;
        }
        Ok((path, k.name.to_string()))
    }

    impl LocalHarness {
        /// The model's family, recognised from its chat template.
        pub fn family(&self) -> Family {
            self.family
        }
    }

    /// Turns the engine's text into model events. An answer streams as it comes, except from a line that may open a
    /// call written as text (```` ``` ```` or `{`), which is held until the response is complete: the grammar's call
    /// form, or a call the model wrote in prose ([`call_in_text`]; not on a turn's last request, when only an answer
    /// can follow), becomes a tool call and is never shown as the answer; anything else is then streamed.
    pub(super) struct Decoder {
        pub(super) tx: mpsc::UnboundedSender<Result<ModelEvent, HarnessError>>,
        pub(super) text: String,
        /// How much of `text` was streamed.
        pub(super) sent: usize,
        pub(super) final_only: bool,
        pub(super) prompt_tokens: u64,
        pub(super) call_id: String,
        pub(super) format: ToolFormat,
        /// The request's tool names (a fenced call followed by prose counts only for one of these).
        pub(super) granted: Vec<String>,
        /// Where the call the model opened in its own format (the engine's [`JobEvent::Call`]) begins in `text`
        /// (0 when the response must be a call).
        pub(super) call_from: Option<usize>,
        /// The answer step (`tool_choice = "required"`): a call to it is the turn's answer, not a tool call.
        pub(super) answer: Option<AnswerStep>,
        /// The call just made ([`previous_call`]), when a response repeating it is to be drawn again: such a
        /// response sends nothing, and the tokens it took go to `repeated`.
        pub(super) avoid: Option<(String, serde_json::Value)>,
        /// Set, to the output tokens it took, when this response repeated `avoid` — read by the request once the
        /// engine's job is done (the decoder lives in the job's event callback, out of the request's reach).
        pub(super) repeated: Arc<Mutex<Option<u64>>>,
        /// Output tokens of earlier draws of this response that repeated that call (counted in its usage).
        pub(super) discarded: u64,
    }

    impl Decoder {
        fn send(&self, e: ModelEvent) -> bool {
            self.tx.send(Ok(e)).is_ok()
        }

        /// Streams `text` up to `to` (what is not yet sent).
        fn stream_to(&mut self, to: usize) -> bool {
            if to <= self.sent {
                return !self.tx.is_closed();
            }
            let part = self.text[self.sent..to].to_string();
            self.sent = to;
            self.send(ModelEvent::TextDelta(part))
        }

        fn call(&self, tool: String, input: &serde_json::Value) {
            self.send(ModelEvent::ToolUseStart {
                id: self.call_id.clone(),
                name: tool,
            });
            self.send(ModelEvent::ToolUseInputDelta {
                id: self.call_id.clone(),
                partial_json: serde_json::to_string(input).unwrap_or_else(|_| "{}".into()),
            });
            self.send(ModelEvent::ToolUseEnd {
                id: self.call_id.clone(),
            });
        }

        pub(super) fn on(&mut self, e: JobEvent) -> bool {
            match e {
                JobEvent::Prompt { tokens, .. } => {
                    self.prompt_tokens = tokens as u64;
                    true
                }
                JobEvent::Text(t) => {
                    self.text.push_str(&t);
                    if self.call_from.is_some() {
                        // the call's own text, decoded under the grammar: never shown
                        return !self.tx.is_closed();
                    }
                    let to = possible_call_start(&self.text, self.sent).unwrap_or(self.text.len());
                    self.stream_to(to)
                }
                JobEvent::Call => {
                    self.call_from = Some(self.text.len());
                    !self.tx.is_closed()
                }
                JobEvent::Done {
                    generated,
                    hit_limit,
                    cancelled,
                    ..
                } => {
                    if cancelled {
                        let _ = self.tx.send(Err(HarnessError::Cancelled));
                        return false;
                    }
                    let grammar_call = match self.call_from {
                        // a call opened in the model's own format: whole unless the output cap cut it off
                        Some(from) => self
                            .format
                            .parse_call(&self.text[from..])
                            .map(|(tool, input)| (from, tool, input)),
                        None if self.format == ToolFormat::Loom => match parse_response(&self.text)
                        {
                            Some(Response::Call { tool, input }) if self.sent == 0 => {
                                Some((0, tool, input))
                            }
                            _ => None,
                        },
                        None => None,
                    };
                    let written = || {
                        let granted = |t: &str| self.granted.iter().any(|g| g == t);
                        call_in_text(&self.text, &granted)
                            .filter(|c| !self.final_only && !hit_limit && c.start >= self.sent)
                            .map(|c| (c.start, c.tool, c.input))
                    };
                    let found = grammar_call.or_else(written);
                    if let (Some((_, tool, input)), Some((t, i))) = (&found, &self.avoid) {
                        if tool == t && input == i {
                            if let Ok(mut r) = self.repeated.lock() {
                                *r = Some(generated as u64);
                            }
                            return true;
                        }
                    }
                    self.send(ModelEvent::Usage(Usage {
                        input_tokens: self.prompt_tokens,
                        output_tokens: generated as u64 + self.discarded,
                        ..Usage::default()
                    }));
                    let stop = match found {
                        Some((start, tool, input)) => {
                            self.stream_to(start);
                            match self
                                .answer
                                .as_ref()
                                .and_then(|a| a.answer_of(&tool, &input))
                            {
                                Some(text) => {
                                    self.send(ModelEvent::TextDelta(text));
                                    StopReason::EndTurn
                                }
                                None => {
                                    self.call(tool, &input);
                                    StopReason::ToolUse
                                }
                            }
                        }
                        None => {
                            self.stream_to(self.text.len());
                            if hit_limit {
                                StopReason::MaxTokens
                            } else {
                                StopReason::EndTurn
                            }
                        }
                    };
                    self.send(ModelEvent::MessageEnd { stop_reason: stop })
                }
            }
        }
    }

    impl Harness for LocalHarness {
        fn name(&self) -> &str {
            "local"
        }

        fn context_window(&self) -> Option<u64> {
            Some(u64::from(self.config.context))
        }

        fn stream(
            &self,
            request: ModelRequest,
            cancel: CancellationToken,
        ) -> BoxFuture<'_, Result<EventStream, HarnessError>> {
            Box::pin(async move {
                let final_only = request.tools.is_empty()
                    || request.request_in_turn + 1 >= self.max_turn_requests;
                let format = self.family.format();
                let answer = self
                    .config
                    .required
                    .then(|| AnswerStep::for_request(&request));
                let respond = if final_only {
                    Respond::Answer
                } else if self.config.required {
                    Respond::Call
                } else {
                    Respond::Either
                };
                // the first request of a turn looks before it answers
                let may_answer = answer.as_ref().filter(|_| request.request_in_turn > 0);
                let (grammar, trigger) = grammar_for(&request, respond, format, may_answer)
                    .map_err(|e| HarnessError::Protocol {
                        message: e.to_string(),
                    })?;
                let examples = example_messages(&self.config.examples, &request);
                let messages =
                    chat_messages(&request, final_only, format, answer.as_ref(), &examples);
                let n = self.calls.fetch_add(1, Ordering::Relaxed);
                // a response that must be a call is shown only once whole, so one that repeats the call just made
                // can be drawn again, hotter, before anything is sent
                let avoid = (respond == Respond::Call)
                    .then(|| previous_call(&request))
                    .flatten();
                let granted: Vec<String> = request.tools.iter().map(|t| t.name.clone()).collect();
                let c = &self.config;
                let mut discarded = 0;
                let mut draw = 0;
                loop {
                    let last = avoid.is_none() || draw == REDRAWS;
                    let (tx, mut rx) = mpsc::unbounded_channel();
                    let _ = tx.send(Ok(ModelEvent::MessageStart {
                        message_id: format!("local-{n}"),
                    }));
                    let repeated = Arc::new(Mutex::new(None));
                    let mut decoder = Decoder {
                        tx: tx.clone(),
                        text: String::new(),
                        sent: 0,
                        final_only,
                        prompt_tokens: 0,
                        call_id: format!(
                            "call_local_{}_{}_{n}",
                            request.turn, request.request_in_turn
                        ),
                        format,
                        granted: granted.clone(),
                        call_from: (respond == Respond::Call).then_some(0),
                        answer: answer.clone(),
                        avoid: if last { None } else { avoid.clone() },
                        repeated: repeated.clone(),
                        discarded,
                    };
                    let stop = cancel.clone();
                    let fail = tx.clone();
                    let (ended, finished) = tokio::sync::oneshot::channel();
                    self.engine
                        .submit(Job {
                            messages: messages.clone(),
                            grammar: grammar.clone(),
                            trigger: trigger.clone(),
                            max_tokens: c.max_tokens,
                            sampling: redraw_sampling(c, draw),
                            events: Box::new(move |e| !stop.is_cancelled() && decoder.on(e)),
                            done: Box::new(move |r| {
                                if let Err(e) = r {
                                    let _ = fail.send(Err(match e {
                                        EngineError::ContextOverflow { .. } => {
                                            HarnessError::ContextOverflow {
                                                message: e.to_string(),
                                            }
                                        }
                                        other => HarnessError::Protocol {
                                            message: other.to_string(),
                                        },
                                    }));
                                }
                                let _ = ended.send(());
                            }),
                        })
                        .map_err(|e| HarnessError::Protocol {
                            message: e.to_string(),
                        })?;
                    drop(tx);
                    if !last {
                        let _ = finished.await;
                        let again = repeated.lock().ok().and_then(|mut r| r.take());
                        if let Some(tokens) = again {
                            discarded += tokens;
                            draw += 1;
                            continue;
                        }
                    }
                    let stream: EventStream =
                        Box::pin(futures::stream::poll_fn(move |cx| rx.poll_recv(cx)));
                    return Ok(stream);
                }
            })
        }
    }

    /// How many more times a response that repeats the call just made is drawn.
    const REDRAWS: u32 = 2;

    /// The sampling of draw `draw` of a response: the configured one first; a redraw (of a response that repeated
    /// the call just made) with another seed, and at least [`REDRAW_TEMPERATURE`], so even greedy decoding can differ.
    fn redraw_sampling(c: &LocalConfig, draw: u32) -> Sampling {
        let mut s = Sampling {
            temperature: c.temperature,
            top_k: c.top_k,
            top_p: c.top_p,
            seed: c.seed,
        };
        if draw > 0 {
            s.temperature = s.temperature.max(REDRAW_TEMPERATURE);
            s.seed = s.seed.wrapping_add(draw);
        }
        s
    }

    /// The least temperature of a redraw.
    const REDRAW_TEMPERATURE: f32 = 1.0;
}
