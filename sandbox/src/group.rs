//! Process groups. Every process loom starts — a bash command, a hook, an MCP server or provider, a brokered command —
//! leads a group of its own (`process_group(0)` at spawn), so stopping it stops everything it started, background
//! children included. [`ProcessGroup`] is the one place that group is killed, [`GroupSlot`] the one way to kill a
//! group that may not have started yet (with [`KillOnDrop`] for callers that may go away), and [`exit_code`] the one
//! place an exit status becomes a shell-style code.
//!
//! No parent-death signal for those: `PR_SET_PDEATHSIG` fires when the *thread* that spawned the child exits, and
//! loom starts servers and hooks from pooled threads that come and go, so it would kill a healthy server. The confined
//! spawn sets it only for its short-lived stages, whose spawning thread waits for them; and [`spawn_tied`] starts a
//! long-lived child (the local model engine) from a thread that lives as long as loom, so its parent-death signal
//! fires only when loom itself ends, however it ends.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use rustix::process::{kill_process, kill_process_group, Pid, Signal};

/// Spawns `cmd` with SIGKILL as its parent-death signal, from a thread that lives as long as this process, so the
/// child dies when loom ends — a SIGKILL of loom included, which runs no clean-up — and never because a thread that
/// happened to start it went away. A child that finds loom already gone when its signal is armed does not exec. (A
/// child may clear the signal itself; the local model engine's seccomp filter keeps it from doing so.)
pub fn spawn_tied(mut cmd: std::process::Command) -> std::io::Result<std::process::Child> {
    use std::os::unix::process::CommandExt;
    use std::sync::mpsc::{channel, Sender};
    use std::sync::OnceLock;

    type Job = (
        std::process::Command,
        Sender<std::io::Result<std::process::Child>>,
    );
    static SPAWNER: OnceLock<Option<Sender<Job>>> = OnceLock::new();
    let loom = rustix::process::getpid();
    // SAFETY: only async-signal-safe calls (prctl, getppid) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != loom.as_raw_nonzero().get() {
                return Err(std::io::Error::other(
                    "loom ended while the process was starting",
                ));
            }
            Ok(())
        });
    }
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = channel::<Job>();
        std::thread::Builder::new()
            .name("loom-tied-spawner".into())
            .spawn(move || {
                // ends only with the process: the sender lives in a static
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .ok()
            .map(|_| tx)
    });
    let Some(spawner) = spawner else {
        return Err(std::io::Error::other(
            "the thread that starts long-lived processes could not be created",
        ));
    };
    let (reply, answer) = channel();
    spawner
        .send((cmd, reply))
        .map_err(|_| std::io::Error::other("the process spawner has stopped"))?;
    answer
        .recv()
        .map_err(|_| std::io::Error::other("the process spawner has stopped"))?
}

/// The process group a child leads (it was started with `process_group(0)`, so its pid is the group id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessGroup(Pid);

impl ProcessGroup {
    /// The group `pid` leads; `None` for a pid that cannot be a child's (0, 1, or out of range), so a kill can never
    /// reach every process of the system or loom's own group.
    pub fn led_by(pid: u32) -> Option<ProcessGroup> {
        let pid = i32::try_from(pid).ok().filter(|p| *p > 1)?;
        Pid::from_raw(pid).map(ProcessGroup)
    }

    /// The group id (the leader's pid).
    pub fn id(&self) -> i32 {
        self.0.as_raw_nonzero().get()
    }

    /// Sends SIGKILL to every process of the group, and to the leader itself (which may have left it). A group that
    /// is already gone is not an error.
    pub fn kill(&self) {
        let _ = kill_process_group(self.0, Signal::KILL);
        let _ = kill_process(self.0, Signal::KILL);
    }
}

/// A process group that may not have started yet, shared between the thread that starts and waits for its leader
/// and whoever may have to stop it (a cancel, a timeout, a peer that hung up). Whichever comes second — the start or
/// the kill — does the kill, so a kill requested while the command is still being set up is never lost. Once the
/// waiter marks the slot [finished](GroupSlot::finish) (its leader reaped), kills do nothing: the pid may be reused.
#[derive(Debug, Default)]
pub struct GroupSlot {
    pid: AtomicU32,
    kill_requested: AtomicBool,
    finished: AtomicBool,
}

impl GroupSlot {
    /// An empty slot.
    pub fn new() -> GroupSlot {
        GroupSlot::default()
    }

    /// The leader `pid` exists (it leads its own group); killed at once when a kill was already requested.
    pub fn started(&self, pid: u32) {
        self.pid.store(pid, Ordering::SeqCst);
        if self.kill_requested.load(Ordering::SeqCst) {
            self.kill_now();
        }
    }

    /// Kills the whole group now if it has started (and is not finished), else as soon as it starts.
    pub fn kill(&self) {
        self.kill_requested.store(true, Ordering::SeqCst);
        self.kill_now();
    }

    /// True once [`GroupSlot::kill`] was called.
    pub fn kill_requested(&self) -> bool {
        self.kill_requested.load(Ordering::SeqCst)
    }

    /// The leader was reaped: from now on kills do nothing.
    pub fn finish(&self) {
        self.finished.store(true, Ordering::SeqCst);
    }

    fn kill_now(&self) {
        if !self.finished.load(Ordering::SeqCst) {
            kill_group(self.pid.load(Ordering::SeqCst));
        }
    }
}

/// Kills its slot's group when dropped (unless the slot is finished): a caller that goes away — a tool call's future
/// dropped mid-run — takes its command's whole tree with it instead of leaving it running.
#[derive(Debug)]
pub struct KillOnDrop(pub Arc<GroupSlot>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        self.0.kill();
    }
}

/// Kills the group `pid` leads, when `pid` can be a child's (see [`ProcessGroup::led_by`]): a `u32` from
/// `Child::id`, or an `i32` a caller keeps in an atomic (0 or negative: nothing started, nothing killed).
pub fn kill_group(pid: impl TryInto<u32>) {
    if let Some(group) = pid.try_into().ok().and_then(ProcessGroup::led_by) {
        group.kill();
    }
}

/// The shell's exit code for `status`: the process's own code, or 128 + the signal that ended it (1 if neither is
/// known).
pub fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

/// Waits up to `limit` for `child` to end (a short-lived helper program that must not hang its caller): its status,
/// or `Ok(None)` when it did not end in time — it is then killed and reaped. Its output pipes are the caller's to
/// read afterwards, so it must print less than a pipe holds.
pub fn wait_within(
    child: &mut std::process::Child,
    limit: std::time::Duration,
) -> std::io::Result<Option<ExitStatus>> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    #[test]
    fn a_tied_child_outlives_the_thread_that_asked_for_it() {
        let sleeper = || {
            let mut cmd = Command::new("sleep");
            cmd.arg("30");
            cmd
        };
        let mut tied = std::thread::spawn(move || spawn_tied(sleeper()).unwrap())
            .join()
            .unwrap();
        // the control, started after it: a parent-death signal armed in a child spawned by a thread that then ends
        // kills the child — so by the time it is dead, an earlier thread's end has signalled its children too
        let mut control = std::thread::spawn(move || {
            let mut cmd = sleeper();
            // SAFETY: prctl only.
            unsafe {
                cmd.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
                    Ok(())
                });
            }
            cmd.spawn().unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(control.wait().unwrap().signal(), Some(libc::SIGKILL));
        // the tied child is the spawner thread's, which lives on
        assert!(tied.try_wait().unwrap().is_none());
        tied.kill().unwrap();
        assert_eq!(tied.wait().unwrap().signal(), Some(libc::SIGKILL));
    }

    #[test]
    fn a_child_that_does_not_end_in_time_is_killed_and_reaped() {
        let mut quick = Command::new("/bin/true").spawn().unwrap();
        let status = wait_within(&mut quick, std::time::Duration::from_secs(60)).unwrap();
        assert!(status.is_some_and(|s| s.success()));
        let mut stuck = Command::new("sleep").arg("600").spawn().unwrap();
        assert_eq!(
            wait_within(&mut stuck, std::time::Duration::from_millis(50)).unwrap(),
            None
        );
        // reaped: nothing left to wait for
        assert!(stuck.try_wait().unwrap().is_some());
    }

    #[test]
    fn killing_the_group_ends_the_leader_and_its_background_children() {
        let mut child = Command::new("/bin/sh")
            .args(["-c", "sleep 30 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let grandchild: i32 = line.trim().parse().unwrap();
        let group = ProcessGroup::led_by(child.id()).unwrap();
        assert_eq!(group.id(), child.id() as i32);
        group.kill();
        let status = child.wait().unwrap();
        assert_eq!(exit_code(status), 128 + 9);
        // the background sleep was in the group too: gone, or a zombie about to be reaped by init
        let alive = || {
            std::fs::read_to_string(format!("/proc/{grandchild}/stat"))
                .map(|s| !s.contains(") Z "))
                .unwrap_or(false)
        };
        let mut polls = 0;
        while alive() && polls < 500 {
            std::thread::sleep(std::time::Duration::from_millis(10));
            polls += 1;
        }
        assert!(
            !alive(),
            "the background child {grandchild} outlived its group"
        );
    }

    fn sleeper() -> std::process::Child {
        Command::new("/bin/sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap()
    }

    #[test]
    fn a_kill_requested_before_the_start_is_done_by_the_start() {
        let slot = GroupSlot::new();
        slot.kill();
        assert!(slot.kill_requested());
        let mut child = sleeper();
        slot.started(child.id());
        assert_eq!(exit_code(child.wait().unwrap()), 128 + 9);
    }

    #[test]
    fn dropping_the_guard_kills_a_running_group_but_not_a_finished_one() {
        let slot = Arc::new(GroupSlot::new());
        let mut child = sleeper();
        slot.started(child.id());
        drop(KillOnDrop(slot.clone()));
        assert_eq!(exit_code(child.wait().unwrap()), 128 + 9);

        // finished: the pid is not signalled again (here: a live process standing in for a reused pid)
        let slot = Arc::new(GroupSlot::new());
        let mut child = sleeper();
        slot.started(child.id());
        slot.finish();
        drop(KillOnDrop(slot));
        assert_eq!(child.try_wait().unwrap(), None);
        ProcessGroup::led_by(child.id()).unwrap().kill();
        child.wait().unwrap();
    }

    #[test]
    fn no_group_for_pids_that_are_not_a_child_s() {
        // 0 would signal loom's own group and 1 (after -1) every process: never
        assert_eq!(ProcessGroup::led_by(0), None);
        assert_eq!(ProcessGroup::led_by(1), None);
        assert_eq!(ProcessGroup::led_by(u32::MAX), None);
        kill_group(0);
        kill_group(-5);
    }

    #[test]
    fn exit_codes_are_the_shell_s() {
        let code = |script: &str| {
            exit_code(
                Command::new("/bin/sh")
                    .args(["-c", script])
                    .status()
                    .unwrap(),
            )
        };
        assert_eq!(code("exit 3"), 3);
        assert_eq!(code("kill -TERM $$"), 128 + 15);
    }
}
