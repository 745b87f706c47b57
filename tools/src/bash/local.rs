//! A bash call run by loom itself, through `loom_broker::run_bash` (the entry `loom sandbox run` uses too): the
//! process started unconfined for the grant `"*"`, else through the row's sandbox, its group kept in a
//! [`GroupSlot`] so the tree can be killed.

use super::*;

/// Starts the process (blocking until it ends) and returns its exit code, whether the sandbox's own timeout fired,
/// and what the sandbox enforced. The group is stored in `slot` as soon as it exists, and the slot is finished once
/// the leader is reaped.
pub(super) fn start(
    plan: BashPlan,
    cwd: &std::path::Path,
    env: &ToolEnv,
    sandbox: &SandboxEnv,
    timeout: Duration,
    writer: std::io::PipeWriter,
    slot: &GroupSlot,
) -> Result<(i32, bool, Option<loom_sandbox::SandboxStatus>), String> {
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
    };
    let streams = Streams {
        stdin: Stream::Null,
        stdout: Stream::from(writer),
        stderr: Stream::from(err_writer),
    };
    let outcome = run_bash(plan, run, streams, &mut |p| slot.started(p));
    slot.finish();
    let o = outcome.map_err(|e| e.to_string())?;
    Ok((o.code, o.timed_out, o.status))
}
