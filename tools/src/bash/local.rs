//! A bash call run by loom itself, through `loom_broker::run_bash` (the entry `loom sandbox run` uses too): the
//! process started unconfined for the grant `"*"`, else through the row's sandbox, its group kept in a
//! [`GroupSlot`] so the tree can be killed.

use super::*;

/// How a command loom ran ended.
pub(super) struct Ended {
    /// Its exit code.
    pub code: i32,
    /// Whether the sandbox's own timeout fired.
    pub timed_out: bool,
    /// What the sandbox enforced (`None` when unconfined).
    pub status: Option<loom_sandbox::SandboxStatus>,
    /// What it created at protected paths, moved aside.
    pub swept: Vec<loom_sandbox::Swept>,
}

/// Starts the process (blocking until it ends) and returns how it ended. The group is stored in `slot` as soon as it
/// exists, and the slot is finished once the leader is reaped.
pub(super) fn start(
    plan: BashPlan,
    cwd: &std::path::Path,
    env: &ToolEnv,
    sandbox: &SandboxEnv,
    timeout: Duration,
    writer: std::io::PipeWriter,
    slot: &GroupSlot,
) -> Result<Ended, String> {
    let err_writer = writer.try_clone().map_err(|e| e.to_string())?;
    let run = BashRun {
        tool: &env.instance,
        grant: &env.grant,
        ctx: &env.ctx,
        cwd,
        home: std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|h| h.is_absolute()),
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
        fills: None,
        sweep_records: sandbox.sweep_records.as_deref(),
    };
    let streams = Streams {
        stdin: Stream::Null,
        stdout: Stream::from(writer),
        stderr: Stream::from(err_writer),
    };
    let outcome = run_bash(plan, run, streams, &mut |p| slot.started(p));
    slot.finish();
    let o = outcome.map_err(|e| e.to_string())?;
    Ok(Ended {
        code: o.code,
        timed_out: o.timed_out,
        status: o.status,
        swept: o.swept,
    })
}
