//! One turn: the user message, then requests while the model ends with tool calls; compaction before each request
//! and once more on a context overflow; the turn's hooks; a refused turn.

use super::*;

impl Agent {
    /// Runs one prompt turn. `cancel` is the turn's root token.
    pub async fn prompt(&self, text: &str, cancel: CancellationToken) -> TurnOutcome {
        let mut session = self.session.lock().await;
        let turn = self.turns.fetch_add(1, Ordering::SeqCst);
        let mut final_text = String::new();
        // hooks before the prompt enters the history: SessionStart once, then UserPromptSubmit (which can block it)
        let mut context = Vec::new();
        if turn == 0 {
            let started = self.hook(HookEvent::SessionStart, None, Map::new()).await;
            context.extend(started.into_iter().filter_map(|o| o.verdict.context));
        }
        let mut fields = Map::new();
        fields.insert("prompt".into(), Value::String(text.to_string()));
        let submitted = self.hook(HookEvent::UserPromptSubmit, None, fields).await;
        if let Some(blocked) = submitted
            .iter()
            .find(|o| o.verdict.decision == Some(Verdict::Deny))
        {
            let why = format!(
                "the prompt was blocked by a UserPromptSubmit hook ({}): {}",
                blocked.what,
                blocked
                    .verdict
                    .reason
                    .as_deref()
                    .unwrap_or("no reason given")
            );
            return self.refused_turn(&mut session, why).await;
        }
        context.extend(submitted.into_iter().filter_map(|o| o.verdict.context));
        let text = if context.is_empty() {
            text.to_string()
        } else {
            format!(
                "{text}\n\n<hook-context>\n{}\n</hook-context>",
                context.join("\n")
            )
        };
        let result = self
            .turn(&mut session, turn, &text, &cancel, &mut final_text)
            .await;
        if let Err(Stop::Failed(e) | Stop::Transient(e)) = &result {
            let mut fields = Map::new();
            fields.insert("error".into(), Value::String(e.clone()));
            self.hook(HookEvent::StopFailure, None, fields).await;
        }
        let transient = matches!(result, Err(Stop::Transient(_)));
        let (stop, error) = match result {
            Ok(s) => (s, None),
            Err(Stop::Cancelled) => (TurnStop::Cancelled, None),
            Err(Stop::MaxTurnRequests(e)) => (TurnStop::MaxTurnRequests, Some(e)),
            Err(Stop::Failed(e) | Stop::Transient(e)) => (TurnStop::Error, Some(e)),
        };
        let end = SessionUpdate::Frame(Frame {
            frame: FrameKind::TurnEnd,
            role: None,
            message_id: None,
            stop_reason: Some(stop),
            text: None,
        });
        // a failing store must not hide the outcome: the frame still reaches subscribers
        let _ = self.emit(&mut session, end).await;
        TurnOutcome {
            stop,
            final_text,
            error,
            transient,
        }
    }

    pub(super) async fn turn(
        &self,
        session: &mut Chain,
        turn: u64,
        text: &str,
        cancel: &CancellationToken,
        final_text: &mut String,
    ) -> Result<TurnStop, Stop> {
        self.emit(
            session,
            SessionUpdate::frame(FrameKind::TurnStart, None, None),
        )
        .await?;
        self.drain_steering(session, turn).await?;
        self.user_message(
            session,
            format!("user-{}-{turn}", self.nonce),
            text.to_string(),
        )
        .await?;
        session.prepare_turn().await?;
        // a skill dropped by the rescan: the user is told why it left the catalog
        for notice in session.take_notices() {
            self.bus.publish(&SessionUpdate::notice(notice));
        }
        // the project guidance is read fresh each turn (an edit by the user between turns is seen)
        // in a fixed order: the environment, the agent's prompt, the project guidance, then the session's sections
        // (the skills catalog)
        let mut system: Vec<String> = self.environment_block(cancel).await.into_iter().collect();
        system.extend(self.system.iter().cloned());
        system.extend(self.guidance_sections(true));
        system.extend(session.system_prompt_sections());
        let mut doom = DoomGuard::default();
        let mut stop_hooks_ran = false;
        let mut rounds = super::supervise::Rounds::default();
        for request_in_turn in 0u32.. {
            if cancel.is_cancelled() {
                return Err(Stop::Cancelled);
            }
            if request_in_turn >= self.max_turn_requests {
                return Err(Stop::MaxTurnRequests(format!(
                    "maxTurnRequests ({}) reached: the model kept calling tools; raise [harness] maxTurnRequests or \
                     ask for a smaller step",
                    self.max_turn_requests
                )));
            }
            let ctx = CompactCtx {
                harness: self.harness.as_ref(),
                cancel,
            };
            // a failed automatic compaction keeps the history and pauses itself; the request goes ahead, and the
            // user is told why the history was not shortened
            let reports = session.compact(CompactMode::Auto, &ctx).await?;
            self.after_compaction(&reports);
            for report in reports {
                if let Compaction::Failed { .. } = report {
                    self.bus.publish(&SessionUpdate::notice(format!(
                        "{report}; the turn goes on with the full history, and automatic compaction pauses \
                         for {} s",
                        crate::session::PAUSE_AFTER_FAILURE.as_secs()
                    )));
                }
            }
            // a context overflow gets one forced compaction and one retry of the request
            let mut compacted: Option<String> = None;
            let (mut stream, first) = loop {
                let request = ModelRequest {
                    system: system.clone(),
                    messages: to_messages(&self.model_history(session)?),
                    // per request: a tool loaded by tool_search is offered from the next request on
                    tools: self.tool_specs(),
                    turn,
                    request_in_turn,
                };
                match self.start(request, cancel).await {
                    Ok(s) => break s,
                    Err(HarnessError::Cancelled) => return Err(Stop::Cancelled),
                    Err(e @ HarnessError::ContextOverflow { .. }) => {
                        if let Some(done) = compacted {
                            return Err(Stop::Failed(format!(
                                "{}: {e} (it still did not fit after compaction ({done}) and one retry)",
                                self.harness.name()
                            )));
                        }
                        compacted = Some(self.compact_for_overflow(session, &e, cancel).await?);
                    }
                    Err(e) => return Err(failed(self.harness.name(), &e)),
                }
            };
            let mut next = Some(first);
            let mut message_id = format!("assistant-{}-{turn}-{request_in_turn}", self.nonce);
            let mut started = false;
            let mut calls: Vec<PendingCall> = Vec::new();
            let mut text_now = String::new();
            let stop_reason = loop {
                let event = match next.take() {
                    Some(e) => e,
                    None => {
                        let item = tokio::select! {
                            item = stream.next() => item,
                            _ = cancel.cancelled() => None,
                        };
                        if cancel.is_cancelled() {
                            if started {
                                self.end_message(session, &message_id).await?;
                            }
                            return Err(Stop::Cancelled);
                        }
                        match item {
                            Some(Ok(e)) => e,
                            Some(Err(e)) => {
                                if started {
                                    self.end_message(session, &message_id).await?;
                                }
                                return Err(failed(self.harness.name(), &e));
                            }
                            None => {
                                if started {
                                    self.end_message(session, &message_id).await?;
                                }
                                return Err(Stop::Failed(format!(
                                    "{}: the response ended before the message was complete",
                                    self.harness.name()
                                )));
                            }
                        }
                    }
                };
                if !started {
                    started = true;
                    if let ModelEvent::MessageStart { message_id: id } = &event {
                        message_id = id.clone();
                    }
                    self.emit(
                        session,
                        SessionUpdate::frame(
                            FrameKind::MessageStart,
                            Some(Role::Assistant),
                            Some(message_id.clone()),
                        ),
                    )
                    .await?;
                }
                match event {
                    ModelEvent::MessageStart { .. } => {}
                    ModelEvent::TextDelta(t) => {
                        text_now.push_str(&t);
                        self.emit(
                            session,
                            SessionUpdate::AgentMessageChunk(Chunk {
                                content: Content::text(t),
                                message_id: Some(message_id.clone()),
                            }),
                        )
                        .await?;
                    }
                    ModelEvent::ThinkingDelta(t) => {
                        self.emit(
                            session,
                            SessionUpdate::AgentThoughtChunk(ThoughtChunk::text(
                                t,
                                Some(message_id.clone()),
                            )),
                        )
                        .await?;
                    }
                    // replay data rides on an empty thought chunk of the same message, in stream order, so the
                    // history rebuilds each thinking block with its own signature
                    ModelEvent::ThinkingSignature(signature) => {
                        let meta = ThoughtMeta {
                            signature: Some(signature),
                            ..ThoughtMeta::default()
                        };
                        self.emit(session, thought_meta(meta, &message_id)).await?;
                    }
                    ModelEvent::RedactedThinking(data) => {
                        let meta = ThoughtMeta {
                            redacted: Some(data),
                            ..ThoughtMeta::default()
                        };
                        self.emit(session, thought_meta(meta, &message_id)).await?;
                    }
                    ModelEvent::ProviderItem(item) => {
                        let meta = ThoughtMeta {
                            provider_item: Some(item),
                            ..ThoughtMeta::default()
                        };
                        self.emit(session, thought_meta(meta, &message_id)).await?;
                    }
                    ModelEvent::ToolUseStart { id, name } => calls.push(PendingCall {
                        id,
                        name,
                        json: String::new(),
                    }),
                    ModelEvent::ToolUseInputDelta { id, partial_json } => {
                        if let Some(c) = calls.iter_mut().rev().find(|c| c.id == id) {
                            c.json.push_str(&partial_json);
                        }
                    }
                    ModelEvent::ToolUseEnd { .. } => {}
                    ModelEvent::Usage(u) => {
                        self.emit(
                            session,
                            SessionUpdate::UsageUpdate(UsageUpdate {
                                used: u.input_tokens + u.output_tokens,
                                size: self.harness.context_window(),
                                meta: (u.cache_read_tokens + u.cache_write_tokens > 0).then_some(
                                    loom_protocol::update::UsageMeta {
                                        cache_read_tokens: u.cache_read_tokens,
                                        cache_write_tokens: u.cache_write_tokens,
                                    },
                                ),
                            }),
                        )
                        .await?;
                    }
                    ModelEvent::MessageEnd { stop_reason: r } => break r,
                }
            };
            // the barrier: the assistant message is complete before any of its tools runs
            self.end_message(session, &message_id).await?;
            *final_text = text_now;
            if calls.is_empty() && stop_reason == StopReason::PauseTurn {
                // the provider paused its own server tools mid-turn: the next request carries the paused message
                // back as it is, so the model goes on (still bounded by maxTurnRequests)
                continue;
            }
            if calls.is_empty() {
                let stop = match stop_reason {
                    StopReason::MaxTokens => TurnStop::MaxTokens,
                    StopReason::Refusal => TurnStop::Refusal,
                    _ => TurnStop::EndTurn,
                };
                // a Stop hook may send the agent back to work with its reason (bounded by maxTurnRequests)
                let mut fields = Map::new();
                fields.insert("stop_hook_active".into(), Value::Bool(stop_hooks_ran));
                fields.insert(
                    "last_assistant_message".into(),
                    Value::String(final_text.clone()),
                );
                let stopping = if stop == TurnStop::EndTurn {
                    self.hook(HookEvent::Stop, None, fields).await
                } else {
                    Vec::new()
                };
                stop_hooks_ran = true;
                let reasons: Vec<String> = stopping
                    .into_iter()
                    .filter_map(|o| o.verdict.continue_with)
                    .collect();
                if reasons.is_empty() {
                    // the supervisor may send the model back while its working record has unfinished work
                    if stop == TurnStop::EndTurn {
                        if let Some(back) =
                            self.supervise(turn, final_text, &mut rounds, cancel).await
                        {
                            self.user_message(
                                session,
                                format!("user-{}-{turn}-supervisor-{request_in_turn}", self.nonce),
                                back,
                            )
                            .await?;
                            continue;
                        }
                    }
                    return Ok(stop);
                }
                self.user_message(
                    session,
                    format!("user-{}-{turn}-stop-{request_in_turn}", self.nonce),
                    reasons.join("\n"),
                )
                .await?;
                continue;
            }
            for call in calls {
                if cancel.is_cancelled() {
                    self.announce(
                        session,
                        &call,
                        &serde_json::Value::Null,
                        ToolKind::Other,
                        vec![],
                    )
                    .await?;
                    self.finish(
                        session,
                        &call.id,
                        ToolOutput::interrupted("not started: the turn was cancelled"),
                    )
                    .await?;
                    continue;
                }
                self.call(session, call, &mut doom, cancel).await?;
            }
            if cancel.is_cancelled() {
                return Err(Stop::Cancelled);
            }
            self.drain_steering(session, turn).await?;
        }
        Err(Stop::Failed("the turn loop ended unexpectedly".into()))
    }

    /// The forced compaction after a context overflow: what it did, or why the turn must end (nothing compacted).
    pub(super) async fn compact_for_overflow(
        &self,
        session: &mut Chain,
        overflow: &HarnessError,
        cancel: &CancellationToken,
    ) -> Result<String, Stop> {
        let ctx = CompactCtx {
            harness: self.harness.as_ref(),
            cancel,
        };
        let reports = session.compact(CompactMode::Forced, &ctx).await?;
        self.after_compaction(&reports);
        if cancel.is_cancelled() {
            return Err(Stop::Cancelled);
        }
        let done: Vec<String> = reports
            .iter()
            .filter(|r| matches!(r, Compaction::Compacted { .. }))
            .map(Compaction::to_string)
            .collect();
        if !done.is_empty() {
            return Ok(done.join("; "));
        }
        let why = if !reports.is_empty() {
            reports
                .iter()
                .map(Compaction::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        } else if session.compacts() {
            "compacting: the history is no longer than the events compaction keeps".to_string()
        } else {
            "the session has no compacting layer (add \"compacting\" to [session] layers)"
                .to_string()
        };
        Err(Stop::Failed(format!(
            "{}: {overflow} (compaction could not shorten it: {why})",
            self.harness.name()
        )))
    }

    /// After a compaction that shortened the history, the scoped guidance shown in tool results may be gone from
    /// what the model sees: forget what was shown, so the next result touching those paths carries it again.
    fn after_compaction(&self, reports: &[Compaction]) {
        if reports
            .iter()
            .any(|r| matches!(r, Compaction::Compacted { .. }))
        {
            if let Ok(mut seen) = self.scoped_seen.lock() {
                seen.clear();
            }
        }
    }

    /// Compacts the session now, regardless of thresholds or a pause after a failed summary (the `/compact`
    /// command). Returns what each compacting layer did.
    pub async fn compact_now(
        &self,
        cancel: CancellationToken,
    ) -> Result<Vec<Compaction>, SessionError> {
        let mut session = self.session.lock().await;
        let ctx = CompactCtx {
            harness: self.harness.as_ref(),
            cancel: &cancel,
        };
        let mut fields = Map::new();
        fields.insert("trigger".into(), Value::String("manual".into()));
        self.hook(HookEvent::PreCompact, None, fields.clone()).await;
        let reports = session.compact(CompactMode::Forced, &ctx).await?;
        self.after_compaction(&reports);
        if reports
            .iter()
            .any(|r| matches!(r, Compaction::Compacted { .. }))
        {
            self.hook(HookEvent::PostCompact, None, fields).await;
        }
        Ok(reports)
    }

    /// Runs the hooks of `event` (for `tool`) and publishes a notice for each problem worth the user's attention
    /// (a post hook that failed, output that is not JSON). No hooks: nothing.
    pub(super) async fn hook(
        &self,
        event: HookEvent,
        tool: Option<&str>,
        fields: Map<String, Value>,
    ) -> Vec<HookOutcome> {
        let Some(hooks) = &self.hooks else {
            return Vec::new();
        };
        let outcomes = hooks.run(event, tool, fields).await;
        for o in &outcomes {
            if let Some(problem) = &o.verdict.problem {
                self.bus.publish(&SessionUpdate::notice(format!(
                    "hook {}: {problem}",
                    o.what
                )));
            }
        }
        outcomes
    }

    /// A turn that ends before the prompt enters the history (a UserPromptSubmit hook blocked it).
    pub(super) async fn refused_turn(&self, session: &mut Chain, why: String) -> TurnOutcome {
        let _ = self
            .emit(
                session,
                SessionUpdate::frame(FrameKind::TurnStart, None, None),
            )
            .await;
        let end = SessionUpdate::Frame(Frame {
            frame: FrameKind::TurnEnd,
            role: None,
            message_id: None,
            stop_reason: Some(TurnStop::Refusal),
            text: None,
        });
        let _ = self.emit(session, end).await;
        TurnOutcome {
            stop: TurnStop::Refusal,
            final_text: String::new(),
            error: Some(why),
            transient: false,
        }
    }

    /// The tokens the last request used, as the session's compacting layer knows them (none before the first
    /// response or right after a compaction).
    pub async fn tokens_in_context(&self) -> Option<u64> {
        self.session.lock().await.tokens_in_context()
    }
}
