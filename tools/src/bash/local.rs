//! A bash call run by loom itself: the process started (unconfined for the grant `"*"`, else through the row's
//! sandbox), its group id kept so the tree can be killed.

use super::*;

/// Where the running process's group id goes, and whether a kill was already requested.
pub(super) struct Slot {
    pub(super) pid: Arc<AtomicI32>,
    pub(super) kill_req: Arc<AtomicBool>,
}

impl Slot {
    fn store(&self, p: u32) {
        let p = i32::try_from(p).unwrap_or(0);
        self.pid.store(p, Ordering::SeqCst);
        if self.kill_req.load(Ordering::SeqCst) {
            kill_group(p);
        }
    }
}

/// Starts the process (blocking until it ends) and returns its exit code and whether the sandbox's own timeout
/// fired. The pid (a process-group leader) is stored as soon as it exists so the caller can kill the tree.
pub(super) fn start(
    plan: Plan,
    cwd: &std::path::Path,
    env: &ToolEnv,
    sandbox: &SandboxEnv,
    timeout: Duration,
    writer: std::io::PipeWriter,
    slot: &Slot,
) -> Result<(i32, bool, Option<loom_sandbox::SandboxStatus>), String> {
    let err_writer = writer.try_clone().map_err(|e| e.to_string())?;
    match plan {
        Plan::Unconfined(argv) => {
            let Some((prog, args)) = argv.split_first() else {
                return Err("no command".into());
            };
            let mut cmd = std::process::Command::new(prog);
            cmd.args(args)
                .env_clear()
                .envs(unconfined_env(std::env::vars_os(), &sandbox.secrets))
                .current_dir(cwd)
                .stdin(Stdio::null())
                .stdout(Stdio::from(writer))
                .stderr(Stdio::from(err_writer))
                .process_group(0);
            let mut child = cmd
                .spawn()
                .map_err(|e| format!("{}: {e}", prog.to_string_lossy()))?;
            drop(cmd);
            slot.store(child.id());
            let status = child.wait().map_err(|e| e.to_string())?;
            Ok((exit_code(status), false, None))
        }
        Plan::Sandboxed { row, argv } => {
            // the one path shared with `loom sandbox run`: profile, backend, and the broker for a general row
            let run = RowRun {
                tool: &env.instance,
                grant: &env.grant,
                row: &row,
                ctx: &env.ctx,
                cwd,
                home: std::env::var_os("HOME")
                    .map(PathBuf::from)
                    .filter(|h| h.is_absolute()),
                argv: &argv,
                limits: Limits {
                    timeout: Some(timeout),
                    accept: sandbox.accept.clone(),
                    ..Limits::default()
                },
                tier: None,
                inner_exe: sandbox.inner_exe.clone(),
                shim: sandbox.shim.clone(),
                broker: BrokerLimits::default(),
                secrets: &sandbox.secrets,
                authority: &sandbox.authority,
            };
            let streams = Streams {
                stdin: Stream::Null,
                stdout: Stream::from(writer),
                stderr: Stream::from(err_writer),
            };
            let o = run_row(run, streams, &mut |p| slot.store(p)).map_err(|e| e.to_string())?;
            // The sandbox refuses before running when it would withhold less than the row requires; a status that
            // says otherwise (a command confined less than the manifest accepts) fails the call all the same.
            if let Some(missing) = o
                .status
                .as_ref()
                .map(|s| s.missing())
                .filter(|m| !m.is_empty())
            {
                let names: Vec<&str> = missing.iter().map(|r| r.name()).collect();
                return Err(format!(
                    "the sandbox did not withhold {}; the result is discarded (`loom doctor`)",
                    names.join(", ")
                ));
            }
            Ok((o.code, o.timed_out, o.status))
        }
    }
}
