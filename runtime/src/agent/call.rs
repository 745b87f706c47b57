//! One tool call: parse, look up, gather facts, the kernel's decision, then the narrowing of an allowed call
//! (`[permissions]` rules, hooks, plan mode, the doom-loop guard) and its asks, and only then the run.

use super::*;
use loom_kernel::{narrow, Narrowed};

impl Agent {
    /// Runs one call: parse, look up, gather facts, decide, then (only when allowed) run.
    pub(super) async fn call(
        &self,
        session: &mut Chain,
        call: PendingCall,
        doom: &mut DoomGuard,
        cancel: &CancellationToken,
    ) -> Result<(), SessionError> {
        let text = if call.json.trim().is_empty() {
            "{}"
        } else {
            call.json.as_str()
        };
        let parsed: Result<serde_json::Value, _> = serde_json::from_str(text);
        let slot = self.tools.get(&call.name);
        let kind = slot.map_or(ToolKind::Other, |s| s.tool.kind());
        let input = match parsed {
            Ok(v) => v,
            Err(e) => {
                self.announce(
                    session,
                    &call,
                    &serde_json::Value::String(call.json.clone()),
                    kind,
                    vec![],
                )
                .await?;
                let out = ToolOutput::error(format!(
                    "{}: the input is not valid JSON ({e}); send the arguments as one JSON object",
                    call.name
                ));
                return self.finish(session, &call.id, out).await;
            }
        };
        let Some(slot) = slot else {
            self.announce(session, &call, &input, kind, vec![]).await?;
            let names: Vec<&str> = self.tools.keys().map(String::as_str).collect();
            let out = ToolOutput::error(format!(
                "there is no tool named {:?} in this agent; the tools are: {}",
                call.name,
                if names.is_empty() {
                    "(none)".to_string()
                } else {
                    names.join(", ")
                }
            ));
            return self.finish(session, &call.id, out).await;
        };
        // PreToolUse hooks see the call first: they can deny it, ask about it, add context, or rewrite its input
        // (which the kernel then decides afresh, like any input)
        let mut fields = Map::new();
        fields.insert("tool_name".into(), Value::String(call.name.clone()));
        fields.insert("tool_input".into(), input.clone());
        let pre = self
            .hook(HookEvent::PreToolUse, Some(&call.name), fields)
            .await;
        let hooked = combine_hooks(&pre.iter().map(|o| o.verdict.clone()).collect::<Vec<_>>());
        let mut input = input;
        if let Some(updated) = pre
            .iter()
            .rev()
            .find_map(|o| o.verdict.updated_input.clone())
        {
            input = updated;
        }
        let pre_context: Vec<String> = pre
            .iter()
            .filter_map(|o| o.verdict.context.clone())
            .collect();
        if hooked == Verdict::Deny {
            self.announce(session, &call, &input, kind, vec![]).await?;
            let why = pre
                .iter()
                .find(|o| o.verdict.decision == Some(Verdict::Deny))
                .map(|o| {
                    format!(
                        "{}: refused by a PreToolUse hook ({}): {}",
                        call.name,
                        o.what,
                        o.verdict.reason.as_deref().unwrap_or("no reason given")
                    )
                })
                .unwrap_or_default();
            return self.finish(session, &call.id, ToolOutput::error(why)).await;
        }
        let prepared = match slot.tool.prepare(&input) {
            Ok(p) => p,
            Err(e) => {
                self.announce(session, &call, &input, kind, vec![]).await?;
                return self.finish(session, &call.id, ToolOutput::error(e)).await;
            }
        };
        self.announce(session, &call, &input, kind, prepared.locations.clone())
            .await?;
        let Judged {
            decision,
            judged,
            more,
            asking,
        } = self.judge_all(&call.name, slot, &prepared);
        let stuck = doom.check(&call.name, &input);
        let plan = if self.plan_mode() {
            plan_mode_verdict(effect_of(kind))
        } else {
            Verdict::Allow
        };
        let narrowing = narrow(&decision, &judged, stuck, plan, hooked);
        let mut remember_failed = None;
        let auth = match (decision, narrowing.why) {
            (Decision::Deny(d), _) => {
                return self
                    .finish(session, &call.id, ToolOutput::error(d.to_string()))
                    .await
            }
            (Decision::Allow(a), Narrowed::Runs) => a,
            (Decision::Allow(_), Narrowed::PlanMode) => {
                let out = ToolOutput::error(format!(
                    "{}: refused in plan mode — it can change the workspace, and the user is planning; describe \
                     the change instead (only the user can leave plan mode)",
                    call.name
                ));
                return self.finish(session, &call.id, out).await;
            }
            (Decision::Allow(_), Narrowed::DenyRule { rule, matched }) => {
                let which = match rule {
                    Some((kind, index)) => format!(
                        " ({}{})",
                        loom_kernel::position(kind.key(), index),
                        matched
                            .as_ref()
                            .map(|m| format!(", which matched {m}"))
                            .unwrap_or_default()
                    ),
                    None => String::new(),
                };
                let out = ToolOutput::error(format!(
                    "{}: refused by a [permissions] deny rule{which}",
                    call.name
                ));
                return self.finish(session, &call.id, out).await;
            }
            (Decision::Allow(a), why) => {
                let rememberable = narrowing.rememberable;
                let reason = match why {
                    Narrowed::HookAsks => {
                        let o = pre
                            .iter()
                            .find(|o| o.verdict.decision == Some(Verdict::Ask));
                        format!(
                            "{}: a PreToolUse hook ({}) asks for the user's approval: {}",
                            call.name,
                            o.map_or("", |o| o.what.as_str()),
                            o.and_then(|o| o.verdict.reason.as_deref())
                                .unwrap_or("no reason given")
                        )
                    }
                    Narrowed::Stuck => format!(
                        "{}: this is the same call with the same input {} times in a row — the model appears stuck \
                         repeating it; it needs the user's approval",
                        call.name,
                        loom_kernel::DOOM_LOOP_THRESHOLD
                    ),
                    Narrowed::AskRule { rule: (kind, index) } => format!(
                        "{}: a [permissions] ask rule ({}) needs the user's approval for this call",
                        call.name,
                        loom_kernel::position(kind.key(), index)
                    ),
                    other => {
                        // the arms above take every other narrowing; refuse rather than run on a surprise
                        let out = ToolOutput::error(format!(
                            "{}: refused: the kernel narrowed the call to {other:?}",
                            call.name
                        ));
                        return self.finish(session, &call.id, out).await;
                    }
                };
                let Some(asker) = &self.asker else {
                    let why = if stuck == Verdict::Ask {
                        format!("{reason} and {HEADLESS}. Try a different approach")
                    } else {
                        format!("{reason}; {HEADLESS}")
                    };
                    return self.finish(session, &call.id, ToolOutput::error(why)).await;
                };
                let ask = PermissionAsk {
                    call: ToolCall {
                        tool_call_id: call.id.clone(),
                        title: call.name.clone(),
                        kind,
                        status: ToolStatus::Pending,
                        raw_input: input.clone(),
                        content: vec![],
                        locations: prepared.locations.clone(),
                    },
                    reason: reason.clone(),
                    rememberable,
                };
                // a cancelled turn stops waiting even when an answer is ready too
                let answer = tokio::select! {
                    biased;
                    _ = cancel.cancelled() => {
                        let out = ToolOutput::interrupted("not started: the turn was cancelled while waiting for the user's approval");
                        return self.finish(session, &call.id, out).await;
                    }
                    answer = asker.ask(ask) => answer,
                };
                match answer {
                    AskAnswer::AllowOnce => a,
                    AskAnswer::AllowAlways if rememberable => {
                        // every path of the call that an ask rule stopped is remembered, not only the first
                        if let Some(store) = &self.approvals {
                            let facts: Vec<&CallFacts> = if asking.is_empty() {
                                vec![&prepared.facts]
                            } else {
                                asking.iter().collect()
                            };
                            for f in facts {
                                if let Err(e) = store.remember(Approval::for_call(f), now_secs()) {
                                    remember_failed = Some(e);
                                }
                            }
                        }
                        a
                    }
                    AskAnswer::AllowAlways => a,
                    AskAnswer::Reject(why) => {
                        let out = ToolOutput::error(format!("{reason}, and it was refused: {why}"));
                        return self.finish(session, &call.id, out).await;
                    }
                }
            }
        };
        let history = if slot.tool.wants_history() {
            Some(self.model_history(session)?)
        } else {
            None
        };
        let bus = self.bus.clone();
        let id = call.id.clone();
        let ctx = ToolCtx {
            more,
            history,
            client_fs: self.client_fs.clone(),
            terminals: self.terminals.clone(),
            cancel: cancel.child_token(),
            progress: Arc::new(move |p: Progress| {
                bus.publish(&SessionUpdate::ToolCallUpdate(ToolCallUpdate {
                    tool_call_id: id.clone(),
                    status: Some(ToolStatus::InProgress),
                    content: Some(vec![match p.terminal {
                        Some(terminal_id) => ToolCallContent::Terminal { terminal_id },
                        None => ToolCallContent::Content {
                            content: Content::text(p.content),
                        },
                    }]),
                    raw_output: p.raw_output,
                }));
            }),
        };
        // tools honour ctx.cancel themselves (bash kills its process tree), so the call is never dropped mid-way
        let mut out = (prepared.run)(auth, ctx).await;
        // scoped guidance for the paths the call touched (only a call that ran and succeeded: a refusal reads nothing)
        if !out.is_error {
            out.text
                .push_str(&self.scoped_guidance(&call.name, &prepared.locations));
        }
        if cancel.is_cancelled() && !out.interrupted {
            out.interrupted = true;
            out.is_error = true;
            out.text = format!("interrupted\n{}", out.text);
        }
        if let Some(e) = remember_failed {
            out.text = format!(
                "{}\n(the user answered \"always\", but loom could not remember it, so the next such call is asked \
                 about again: {e})",
                out.text
            );
        }
        // PostToolUse (or PostToolUseFailure) hooks see the result; what they add is model-visible, and they
        // cannot undo the call
        let event = if out.is_error {
            HookEvent::PostToolUseFailure
        } else {
            HookEvent::PostToolUse
        };
        let mut fields = Map::new();
        fields.insert("tool_name".into(), Value::String(call.name.clone()));
        fields.insert("tool_input".into(), input.clone());
        fields.insert(
            "tool_response".into(),
            serde_json::json!({"text": out.text, "is_error": out.is_error}),
        );
        let post = self.hook(event, Some(&call.name), fields).await;
        let context: Vec<String> = pre_context
            .into_iter()
            .chain(post.into_iter().filter_map(|o| o.verdict.context))
            .collect();
        if !context.is_empty() {
            out.text = format!(
                "{}\n\n<hook-context>\n{}\n</hook-context>",
                out.text,
                context.join("\n")
            );
        }
        self.finish(session, &call.id, out).await
    }

    /// The kernel's decision on a prepared call, and the `[permissions]` rules' verdict inside it (remembered
    /// "always" answers included). The turn loop and [`Agent::explain`] both decide through here.
    pub(super) fn judge(
        &self,
        name: &str,
        slot: &ToolSlot,
        prepared: &Prepared,
    ) -> (Decision, RulesVerdict) {
        let j = self.judge_all(name, slot, prepared);
        (j.decision, j.judged)
    }

    /// [`Agent::judge`] of every request of the call — [`Prepared::request`], then each of [`Prepared::more`]: the
    /// first denial is the call's decision; the strongest rules verdict (deny over ask over allow) is the call's;
    /// and, when all are allowed, the authorisations of the further requests in order.
    pub(super) fn judge_all(&self, name: &str, slot: &ToolSlot, prepared: &Prepared) -> Judged {
        // an authority file is refused whatever the grant says (the kernel's one set; the sandbox enforces the same)
        let decide_one = |request: &loom_kernel::Request| {
            authority_denial(name, request, &self.authority)
                .unwrap_or_else(|| decide(name, slot.algebra, &self.ctx, &slot.grant, request))
        };
        let approvals = self
            .approvals
            .as_ref()
            .map(|s| s.approvals())
            .unwrap_or_default();
        let builtin = slot.tool.builtin().map(str::to_string);
        let judge_one = |facts: &CallFacts| {
            let mut facts = facts.clone();
            facts.builtin = builtin.clone();
            self.permissions.judge(&facts, Verdict::Allow, &approvals)
        };
        let mut decision = decide_one(&prepared.request);
        let mut judged = judge_one(&prepared.facts);
        let mut asking = Vec::new();
        if judged.verdict == Verdict::Ask {
            asking.push(prepared.facts.clone());
        }
        let mut more = Vec::with_capacity(prepared.more.len());
        for (request, facts) in &prepared.more {
            match decide_one(request) {
                Decision::Allow(a) => more.push(a),
                denied => {
                    if decision.is_allowed() {
                        decision = denied;
                    }
                }
            }
            let j = judge_one(facts);
            if j.verdict == Verdict::Ask {
                asking.push(facts.clone());
            }
            if j.verdict > judged.verdict {
                judged = j;
            }
        }
        Judged {
            decision,
            judged,
            more,
            asking,
        }
    }
}

/// What [`Agent::judge_all`] found for a call.
pub(super) struct Judged {
    /// The kernel's decision: the first denial among the call's requests, else the first request's allowance.
    pub decision: Decision,
    /// The strongest `[permissions]` verdict among the requests.
    pub judged: RulesVerdict,
    /// The authorisations of the further requests ([`Prepared::more`]), in order, when all are allowed.
    pub more: Vec<loom_kernel::Authorization>,
    /// The facts of each request an ask rule stopped: an "always" answer remembers each of them.
    pub asking: Vec<CallFacts>,
}

/// The facts `[permissions]` rules read for a call: the tool's own, and the built-in it is (a rule written for
/// `bash` also judges a built-in renamed `run`).
pub(super) fn rule_facts(slot: &ToolSlot, prepared: &Prepared) -> CallFacts {
    let mut facts = prepared.facts.clone();
    facts.builtin = slot.tool.builtin().map(str::to_string);
    facts
}

/// What a tool of `kind` does, for plan mode: only reads, searches and the working record's bookkeeping (`Think`:
/// built-in record tools, which change nothing outside the session) are known to change nothing.
pub(super) fn effect_of(kind: ToolKind) -> Effect {
    match kind {
        ToolKind::Read | ToolKind::Search | ToolKind::Think => Effect::Reads,
        ToolKind::Edit | ToolKind::Execute | ToolKind::Other => Effect::Changes,
    }
}
