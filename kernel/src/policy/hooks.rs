//! Lifecycle hooks (seed 000, compatible with the Claude Code hook protocol): what is declared, which hooks a
//! moment runs, and what a hook's run means. Running them (a process, an HTTP request) is the runtime's; what the
//! answer means — and that a hook can deny or ask but never grant past a denial — is decided here.

use serde_json::Value;

use crate::policy::rules::Verdict;

/// The moments a hook can run at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HookEvent {
    /// The agent's first turn is about to start.
    SessionStart,
    /// The agent is closing.
    SessionEnd,
    /// A user prompt is about to be sent (a hook can block it, or add context).
    UserPromptSubmit,
    /// A tool call is about to be decided and run (a hook can deny, ask, or rewrite the input).
    PreToolUse,
    /// A tool call succeeded.
    PostToolUse,
    /// A tool call failed (or was refused).
    PostToolUseFailure,
    /// The turn ended normally (a hook can block the stop: the agent goes on with the hook's reason).
    Stop,
    /// The turn failed.
    StopFailure,
    /// The session is about to be compacted.
    PreCompact,
    /// The session was compacted.
    PostCompact,
}

impl HookEvent {
    /// Every event, in declaration order.
    pub const ALL: [HookEvent; 10] = [
        HookEvent::SessionStart,
        HookEvent::SessionEnd,
        HookEvent::UserPromptSubmit,
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::PostToolUseFailure,
        HookEvent::Stop,
        HookEvent::StopFailure,
        HookEvent::PreCompact,
        HookEvent::PostCompact,
    ];

    /// The name used in `[[hooks.<Event>]]` and as `hook_event_name`.
    pub fn name(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "SessionStart",
            HookEvent::SessionEnd => "SessionEnd",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::PostToolUseFailure => "PostToolUseFailure",
            HookEvent::Stop => "Stop",
            HookEvent::StopFailure => "StopFailure",
            HookEvent::PreCompact => "PreCompact",
            HookEvent::PostCompact => "PostCompact",
        }
    }

    /// The event named `name`.
    pub fn named(name: &str) -> Option<HookEvent> {
        HookEvent::ALL.into_iter().find(|e| e.name() == name)
    }

    /// True for events about a tool call (the matcher is matched against the tool name).
    pub fn is_tool_event(self) -> bool {
        matches!(
            self,
            HookEvent::PreToolUse | HookEvent::PostToolUse | HookEvent::PostToolUseFailure
        )
    }

    /// True for events a hook can stop (a failing or timed-out hook stops them too: fail closed).
    pub fn is_gate(self) -> bool {
        matches!(self, HookEvent::PreToolUse | HookEvent::UserPromptSubmit)
    }
}

/// What a hook runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookAction {
    /// A shell command (`sh -c`), run from the manifest's directory; the event's JSON on stdin.
    Command(String),
    /// An HTTP(S) URL the event's JSON is POSTed to (redirects are not followed).
    Url(String),
}

impl std::fmt::Display for HookAction {
    /// `command "./check.sh"` or `url https://...`: as audit, explain and hook notices show it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HookAction::Command(c) => write!(f, "command {c:?}"),
            HookAction::Url(u) => write!(f, "url {u}"),
        }
    }
}

/// One declared hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookSpec {
    /// Tool names it applies to (tool events only): exact names, `*`, or `|`-separated names; `None`: all.
    pub matcher: Option<String>,
    /// What runs.
    pub action: HookAction,
    /// How long it may take before it is killed and counts as failed.
    pub timeout_secs: u64,
}

/// The default hook timeout (seed 000).
pub const DEFAULT_HOOK_TIMEOUT_SECS: u64 = 15;

/// The hooks of one agent, by event, in declaration order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Hooks(pub Vec<(HookEvent, HookSpec)>);

impl Hooks {
    /// The hooks to run at `event`, in declaration order. For a tool event, those whose matcher matches one of the
    /// names the tool answers to: its instance name and, for a renamed instance, its underlying tool (`run = {
    /// provider = "builtin", tool = "bash" }` answers to `run` and `bash`); `tool` is empty for other events.
    pub fn at(&self, event: HookEvent, tool: &[&str]) -> Vec<&HookSpec> {
        self.0
            .iter()
            .filter(|(e, h)| {
                *e == event
                    && (!event.is_tool_event() || matcher_matches(h.matcher.as_deref(), tool))
            })
            .map(|(_, h)| h)
            .collect()
    }

    /// True when no hook is declared.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Does `matcher` match a tool answering to `names` (its instance name, and its underlying tool's when renamed)?
/// Absent, empty or `*` matches every tool; otherwise one of the `|`-separated names must equal one of `names`
/// exactly. No names (not a tool event) match only the match-all forms.
pub fn matcher_matches(matcher: Option<&str>, names: &[&str]) -> bool {
    match matcher.map(str::trim) {
        None | Some("") | Some("*") => true,
        Some(m) => m.split('|').any(|name| names.contains(&name.trim())),
    }
}

/// How a hook's run ended, as the runtime observed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookExit {
    /// It ran to the end with this exit code (HTTP: 2xx is 0; any other status is a failure).
    Code(i32),
    /// It did not finish in time and was killed.
    TimedOut,
    /// It could not be started (or the request could not be sent); why.
    Failed(String),
}

/// One hook's run: how it ended and what it printed (already bounded by the runtime).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookRun {
    /// How it ended.
    pub exit: HookExit,
    /// Its standard output (HTTP: the response body).
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

/// What one hook's run means for the moment it ran at.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HookVerdict {
    /// For gates: `Deny` (exit 2, `permissionDecision: "deny"`, `decision: "block"`, a failure or a timeout), `Ask`
    /// (`permissionDecision: "ask"`), or `Allow` — which never lifts anything (see [`combine_hooks`]).
    pub decision: Option<Verdict>,
    /// Why (for the model and the user).
    pub reason: Option<String>,
    /// Text to add to the model's context (`additionalContext`, or plain stdout on exit 0).
    pub context: Option<String>,
    /// `updatedInput` of a PreToolUse hook: the call goes on with this input, decided by the kernel afresh.
    pub updated_input: Option<Value>,
    /// A Stop hook blocked the stop: the agent goes on with this reason as the next user message.
    pub continue_with: Option<String>,
    /// A problem worth reporting that changes nothing (a post hook failed, output that is not JSON).
    pub problem: Option<String>,
}

/// What a hook's run means at `event` (seed 000): exit 2 blocks gates and stops (stderr is the reason); exit 0 may
/// print JSON with `hookSpecificOutput.permissionDecision` (`deny` / `ask` / `allow`), `permissionDecisionReason`,
/// `additionalContext`, `updatedInput`, or `decision: "block"` with `reason`; any other stdout on exit 0 is context.
/// A gate's hook that fails, times out or cannot start blocks (fail closed); any other event's only reports it.
pub fn interpret_hook(event: HookEvent, run: &HookRun) -> HookVerdict {
    let mut v = HookVerdict::default();
    let failure = match &run.exit {
        HookExit::Code(0) => None,
        HookExit::Code(2) => {
            let reason =
                nonempty(&run.stderr).unwrap_or_else(|| "blocked by a hook (exit 2)".into());
            if event.is_gate() {
                v.decision = Some(Verdict::Deny);
                v.reason = Some(reason);
            } else if event == HookEvent::Stop {
                v.continue_with = Some(reason);
            } else {
                v.problem = Some(format!(
                    "exit 2 has no effect at {}: {reason}",
                    event.name()
                ));
            }
            return v;
        }
        HookExit::Code(n) => Some(format!("exited with {n}{}", stderr_tail(&run.stderr))),
        HookExit::TimedOut => Some("timed out and was killed".to_string()),
        HookExit::Failed(why) => Some(format!("could not run: {why}")),
    };
    if let Some(failure) = failure {
        if event.is_gate() {
            v.decision = Some(Verdict::Deny);
            v.reason = Some(format!(
                "a {} hook {failure}, so the operation is blocked",
                event.name()
            ));
        } else {
            v.problem = Some(format!("a {} hook {failure}", event.name()));
        }
        return v;
    }
    let out = run.stdout.trim();
    let json: Option<serde_json::Map<String, Value>> = if out.starts_with('{') {
        match serde_json::from_str::<Value>(out) {
            Ok(Value::Object(map)) => Some(map),
            _ => {
                if event.is_gate() {
                    v.decision = Some(Verdict::Deny);
                    v.reason = Some(format!(
                        "a {} hook printed output that looks like JSON but is not a JSON object, so the operation is \
                         blocked",
                        event.name()
                    ));
                } else {
                    v.problem = Some(format!("a {} hook printed malformed JSON", event.name()));
                }
                return v;
            }
        }
    } else {
        None
    };
    let Some(map) = json else {
        v.context = nonempty(out);
        return v;
    };
    let specific = map.get("hookSpecificOutput").and_then(Value::as_object);
    let field = |key: &str| -> Option<&Value> {
        specific.and_then(|s| s.get(key)).or_else(|| map.get(key))
    };
    if let Some(d) = field("permissionDecision").and_then(Value::as_str) {
        v.decision = match d {
            "deny" => Some(Verdict::Deny),
            "ask" => Some(Verdict::Ask),
            "allow" => Some(Verdict::Allow),
            other => {
                // an unknown decision from a gate is not consent
                if event.is_gate() {
                    v.reason = Some(format!(
                        "a {} hook answered the unknown permissionDecision {other:?}",
                        event.name()
                    ));
                    Some(Verdict::Deny)
                } else {
                    None
                }
            }
        };
        if v.reason.is_none() {
            v.reason = field("permissionDecisionReason")
                .and_then(Value::as_str)
                .map(str::to_string);
        }
    }
    if map.get("decision").and_then(Value::as_str) == Some("block") {
        let reason = map
            .get("reason")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| "blocked by a hook".into());
        match event {
            HookEvent::Stop => v.continue_with = Some(reason),
            e if e.is_gate() => {
                v.decision = Some(Verdict::Deny);
                v.reason = Some(reason);
            }
            _ => {}
        }
    }
    v.context = field("additionalContext")
        .and_then(Value::as_str)
        .and_then(nonempty);
    if event == HookEvent::PreToolUse {
        v.updated_input = field("updatedInput").filter(|u| u.is_object()).cloned();
    }
    v
}

/// The strictest of the hooks' decisions, or `Allow` when none decided. Folded with the rules' verdict by
/// [`crate::combine`], so a hook's "allow" never lifts a rule's ask or deny, and nothing lifts a grant denial.
pub fn combine_hooks(verdicts: &[HookVerdict]) -> Verdict {
    verdicts
        .iter()
        .filter_map(|v| v.decision)
        .fold(Verdict::Allow, Verdict::max)
}

fn nonempty(s: &str) -> Option<String> {
    let t = s.trim();
    (!t.is_empty()).then(|| t.to_string())
}

fn stderr_tail(stderr: &str) -> String {
    match nonempty(stderr) {
        Some(s) => {
            let tail: String = s
                .chars()
                .rev()
                .take(400)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            format!(": {tail}")
        }
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::decide::{Authorization, Decision, Denial, DenialKind, Exec, Request};
    use crate::policy::rules::combine;
    use crate::Row;

    fn ran(code: i32, stdout: &str, stderr: &str) -> HookRun {
        HookRun {
            exit: HookExit::Code(code),
            stdout: stdout.into(),
            stderr: stderr.into(),
        }
    }

    #[test]
    fn matchers() {
        assert!(matcher_matches(None, &["bash"]));
        assert!(matcher_matches(Some("*"), &["bash"]));
        assert!(matcher_matches(Some("read_file|bash"), &["bash"]));
        assert!(!matcher_matches(Some("read_file|bash"), &["bas"]));
        assert!(!matcher_matches(Some("bash"), &["bash2"]));
        assert!(!matcher_matches(Some("bash"), &[]));
    }

    #[test]
    fn a_renamed_instance_answers_to_its_underlying_tool_too() {
        // (matcher, the names the tool answers to, matches?)
        let cases: &[(&str, &[&str], bool)] = &[
            ("bash", &["run", "bash"], true),
            ("run", &["run", "bash"], true),
            ("read_file| bash", &["run", "bash"], true),
            ("bash", &["run"], false),
            ("write_file", &["run", "bash"], false),
            ("bas", &["run", "bash"], false),
        ];
        for (matcher, names, want) in cases {
            assert_eq!(
                matcher_matches(Some(matcher), names),
                *want,
                "{matcher} {names:?}"
            );
        }
        let hooks = Hooks(vec![(
            HookEvent::PreToolUse,
            HookSpec {
                matcher: Some("bash".into()),
                action: HookAction::Command("./check.sh".into()),
                timeout_secs: DEFAULT_HOOK_TIMEOUT_SECS,
            },
        )]);
        assert_eq!(hooks.at(HookEvent::PreToolUse, &["run", "bash"]).len(), 1);
        assert!(hooks.at(HookEvent::PreToolUse, &["run"]).is_empty());
        assert!(hooks
            .at(HookEvent::PostToolUse, &["run", "bash"])
            .is_empty());
    }

    #[test]
    fn exit_codes_and_failures() {
        let pre = HookEvent::PreToolUse;
        let v = interpret_hook(pre, &ran(2, "", "use the staging bucket"));
        assert_eq!(
            (v.decision, v.reason.as_deref()),
            (Some(Verdict::Deny), Some("use the staging bucket"))
        );
        // a failing, hanging or missing gate hook blocks; the same at a post event only reports
        for exit in [
            HookExit::Code(1),
            HookExit::TimedOut,
            HookExit::Failed("no such file".into()),
        ] {
            let run = HookRun {
                exit,
                stdout: String::new(),
                stderr: "boom".into(),
            };
            assert_eq!(interpret_hook(pre, &run).decision, Some(Verdict::Deny));
            assert_eq!(
                interpret_hook(HookEvent::UserPromptSubmit, &run).decision,
                Some(Verdict::Deny)
            );
            let post = interpret_hook(HookEvent::PostToolUse, &run);
            assert_eq!(post.decision, None);
            assert!(post.problem.is_some());
        }
        // exit 2 at Stop continues the agent
        let v = interpret_hook(HookEvent::Stop, &ran(2, "", "tests still fail"));
        assert_eq!(v.continue_with.as_deref(), Some("tests still fail"));
        // plain stdout is context
        let v = interpret_hook(HookEvent::SessionStart, &ran(0, "branch: main\n", ""));
        assert_eq!(v.context.as_deref(), Some("branch: main"));
    }

    #[test]
    fn json_answers() {
        let pre = HookEvent::PreToolUse;
        let v = interpret_hook(
            pre,
            &ran(
                0,
                r#"{"hookSpecificOutput":{"permissionDecision":"deny","permissionDecisionReason":"Explain the permitted alternative","additionalContext":"Project-specific guidance"}}"#,
                "",
            ),
        );
        assert_eq!(v.decision, Some(Verdict::Deny));
        assert_eq!(
            v.reason.as_deref(),
            Some("Explain the permitted alternative")
        );
        assert_eq!(v.context.as_deref(), Some("Project-specific guidance"));
        let v = interpret_hook(
            pre,
            &ran(
                0,
                r#"{"hookSpecificOutput":{"permissionDecision":"allow","updatedInput":{"command":"ls -la"}}}"#,
                "",
            ),
        );
        assert_eq!(v.decision, Some(Verdict::Allow));
        assert_eq!(
            v.updated_input,
            Some(serde_json::json!({"command": "ls -la"}))
        );
        let v = interpret_hook(
            pre,
            &ran(
                0,
                r#"{"hookSpecificOutput":{"permissionDecision":"sure"}}"#,
                "",
            ),
        );
        assert_eq!(
            v.decision,
            Some(Verdict::Deny),
            "an unknown decision is not consent"
        );
        let v = interpret_hook(pre, &ran(0, "{not json", ""));
        assert_eq!(
            v.decision,
            Some(Verdict::Deny),
            "garbage from a gate blocks"
        );
        let v = interpret_hook(
            HookEvent::Stop,
            &ran(
                0,
                r#"{"decision":"block","reason":"Tests still fail; repair them"}"#,
                "",
            ),
        );
        assert_eq!(
            v.continue_with.as_deref(),
            Some("Tests still fail; repair them")
        );
        // updatedInput only means something before a tool runs
        let v = interpret_hook(
            HookEvent::PostToolUse,
            &ran(0, r#"{"updatedInput":{"command":"x"}}"#, ""),
        );
        assert_eq!(v.updated_input, None);
    }

    #[test]
    fn a_hook_never_grants_past_a_denial_or_an_ask() {
        let allow = HookVerdict {
            decision: Some(Verdict::Allow),
            ..Default::default()
        };
        let ask = HookVerdict {
            decision: Some(Verdict::Ask),
            ..Default::default()
        };
        assert_eq!(combine_hooks(&[]), Verdict::Allow);
        assert_eq!(combine_hooks(&[allow.clone(), ask]), Verdict::Ask);
        let granted = Decision::Allow(Authorization::new(None, Exec::InProcess));
        let denied = Decision::Deny(Denial::new(
            "t",
            &Request::Args(Row::default()),
            None,
            DenialKind::ArgsOutsideGrant,
        ));
        let hooks = combine_hooks(&[allow]);
        assert_eq!(combine(&denied, Verdict::Allow, &[hooks]), Verdict::Deny);
        assert_eq!(combine(&granted, Verdict::Ask, &[hooks]), Verdict::Ask);
        assert_eq!(combine(&granted, Verdict::Deny, &[hooks]), Verdict::Deny);
    }
}
