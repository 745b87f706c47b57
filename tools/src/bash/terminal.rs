//! A bash call run in an ACP client's terminal: the confined form the kernel decides (`loom sandbox run` with the
//! chosen row), or why the call stays with loom.

use super::*;

impl Call {
    /// The command and arguments a client terminal runs for this call, or why the call stays with loom (see
    /// [`terminal_plan`]).
    pub(super) fn terminal_form(
        &self,
        auth: &Authorization,
        terminals: &dyn ClientTerminals,
    ) -> Result<(String, Vec<String>), String> {
        let cwd = self.cwd.display().to_string();
        let argv: Vec<String> = match (auth.exec(), &self.argv) {
            (Exec::Argv(v), _) => v.clone(),
            (Exec::Unconfined, Some(a)) => a.clone(),
            _ => vec!["/bin/bash".into(), "-c".into(), self.command.clone()],
        };
        let names = self.sandbox.secrets.env_names();
        let plan = terminal_plan(&TerminalFacts {
            grant: &self.env.grant,
            auth,
            ctx: &self.env.ctx,
            cwd: &cwd,
            argv: &argv,
            secret_env_names: &names,
            shareable: self.sandbox.secrets.shareable(),
        });
        match plan {
            TerminalPlan::Unconfined => match argv.split_first() {
                Some((c, rest)) => Ok((c.clone(), rest.to_vec())),
                None => Err("no command".into()),
            },
            TerminalPlan::Confined { grant } => {
                let loom = terminals.loom_exe()?;
                let mut args: Vec<String> = [
                    "sandbox",
                    "run",
                    "--grant",
                    &grant,
                    "--cwd",
                    &cwd,
                    "--timeout-ms",
                    &self.timeout.as_millis().to_string(),
                    "--",
                ]
                .iter()
                .map(|s| s.to_string())
                .collect();
                // the agent's authority files stay read-only (secret stores masked) in the terminal's view too
                let dashdash = args.len() - 1;
                let mut carried: Vec<String> = Vec::new();
                for p in &self.sandbox.authority.protect {
                    carried.push("--protect".into());
                    carried.push(p.display().to_string());
                }
                for p in &self.sandbox.authority.mask {
                    carried.push("--mask".into());
                    carried.push(p.display().to_string());
                }
                args.splice(dashdash..dashdash, carried);
                args.extend(argv);
                Ok((loom.display().to_string(), args))
            }
            TerminalPlan::Local(why) => Err(why),
        }
    }

    /// Runs the call in a client terminal: `terminal/create` with the confined form, the terminal embedded in the
    /// call's update, `terminal/wait_for_exit` (or `terminal/kill` on cancel or timeout), `terminal/output`, and
    /// always `terminal/release`.
    pub(super) async fn run_in_terminal(
        &self,
        terminals: &dyn ClientTerminals,
        command: String,
        args: Vec<String>,
        ctx: &ToolCtx,
    ) -> ToolOutput {
        let cap = if self.sandbox.tail_bytes == 0 {
            DEFAULT_TAIL_BYTES
        } else {
            self.sandbox.tail_bytes
        };
        let started = Instant::now();
        let created = terminals
            .terminal(
                "terminal/create",
                json!({"command": command, "args": args, "env": [],
                    "cwd": self.cwd.display().to_string(), "outputByteLimit": cap}),
            )
            .await
            .and_then(|v| match v["terminalId"].as_str() {
                Some(id) => Ok(id.to_string()),
                None => Err(format!("its answer has no terminalId: {v}")),
            });
        let id = match created {
            Ok(id) => id,
            Err(e) => {
                return ToolOutput::error(format!(
                    "bash: the client could not create a terminal: {e}"
                ))
            }
        };
        (ctx.progress)(Progress {
            content: String::new(),
            raw_output: Some(json!({ "terminalId": id })),
            terminal: Some(id.clone()),
        });
        let tid = json!({ "terminalId": id });
        let wait = terminals.terminal("terminal/wait_for_exit", tid.clone());
        tokio::pin!(wait);
        let deadline = tokio::time::sleep(self.timeout);
        tokio::pin!(deadline);
        let (mut cancelled, mut timed_out) = (false, false);
        let exited = tokio::select! {
            r = &mut wait => Some(r),
            _ = ctx.cancel.cancelled() => { cancelled = true; None }
            _ = &mut deadline => { timed_out = true; None }
        };
        let mut problems = Vec::new();
        if exited.is_none() {
            if let Err(e) = terminals.terminal("terminal/kill", tid.clone()).await {
                problems.push(format!("terminal/kill: {e}"));
            }
        }
        let output = terminals.terminal("terminal/output", tid.clone()).await;
        if let Err(e) = terminals.terminal("terminal/release", tid.clone()).await {
            problems.push(format!("terminal/release: {e}"));
        }
        let (mut text, truncated, status) = match output {
            Ok(o) => (
                o["output"].as_str().unwrap_or("").to_string(),
                o["truncated"] == true,
                o["exitStatus"].clone(),
            ),
            Err(e) => {
                problems.push(format!("terminal/output: {e}"));
                (String::new(), false, Value::Null)
            }
        };
        let status = match exited {
            Some(Ok(s)) => s,
            Some(Err(e)) => {
                problems.push(format!("terminal/wait_for_exit: {e}"));
                status
            }
            None => status,
        };
        if truncated {
            text = format!(
                "[output truncated by the client's terminal to its last {cap} bytes]\n{text}"
            );
        }
        let mut raw = json!({
            "terminalId": id,
            "durationMs": u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        });
        let content = vec![ToolCallContent::Terminal { terminal_id: id }];
        for p in &problems {
            text.push_str(&format!("\n[the client's terminal: {p}]"));
        }
        if cancelled {
            let mut out = ToolOutput::interrupted(&text);
            raw["interrupted"] = json!(true);
            out.raw_output = Some(raw);
            out.content = content;
            return out;
        }
        let code = status["exitCode"].as_i64();
        let signal = status["signal"].as_str();
        raw["exitCode"] = json!(code);
        if text.is_empty() && code == Some(0) && !timed_out {
            text = "(no output)".to_string();
        }
        if timed_out {
            raw["timedOut"] = json!(true);
            text.push_str(&format!(
                "\n[timed out after {} ms; the terminal was killed]",
                self.timeout.as_millis()
            ));
        } else if let Some(s) = signal {
            text.push_str(&format!("\n[killed by signal {s}]"));
        } else if let Some(c) = code.filter(|c| *c != 0) {
            text.push_str(&format!("\n[exit code {c}]"));
        } else if code.is_none() {
            text.push_str("\n[the client reported no exit status]");
        }
        ToolOutput {
            text,
            is_error: timed_out || code != Some(0),
            raw_output: Some(raw),
            content,
            ..ToolOutput::default()
        }
    }
}
