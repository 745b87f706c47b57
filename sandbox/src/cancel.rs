//! Cancellation: a signal to the supervising process kills the supervised command's whole process group.

use std::sync::atomic::{AtomicI32, Ordering};

/// The process group of the command being supervised (0: none), for [`kill_tree_on_signals`].
static CURRENT_GROUP: AtomicI32 = AtomicI32::new(0);

/// The cancel target while a supervised command runs. The first command claims it and clears it when it is reaped;
/// a command started while another holds it (a brokered call inside the shell) never displaces it, so after the
/// call ends the target never points at a dead group whose pid could be reused by an unrelated process.
pub(crate) struct CancelTarget(i32);

impl CancelTarget {
    /// Makes `pid`'s process group the cancel target, unless another command already is.
    pub(crate) fn claim(pid: u32) -> Option<CancelTarget> {
        let pid = i32::try_from(pid).ok().filter(|p| *p > 0)?;
        CURRENT_GROUP
            .compare_exchange(0, pid, Ordering::SeqCst, Ordering::SeqCst)
            .ok()?;
        Some(CancelTarget(pid))
    }
}

impl Drop for CancelTarget {
    fn drop(&mut self) {
        let _ = CURRENT_GROUP.compare_exchange(self.0, 0, Ordering::SeqCst, Ordering::SeqCst);
    }
}

extern "C" fn on_cancel(sig: libc::c_int) {
    let pgid = CURRENT_GROUP.load(Ordering::SeqCst);
    // SAFETY: kill and _exit are async-signal-safe.
    unsafe {
        if pgid > 0 {
            libc::kill(-pgid, libc::SIGKILL);
        }
        libc::_exit(128 + sig);
    }
}

/// Makes SIGINT, SIGTERM and SIGHUP (a cancel) kill the supervised command's whole process group before this
/// process exits with 128 + the signal number. For a front end such as `loom sandbox run`; the sandbox's pid
/// namespace (tiers A and C) and `PR_SET_PDEATHSIG` take care of the rest of the tree.
pub fn kill_tree_on_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: an all-zero sigaction is valid; the handler only calls async-signal-safe functions.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_cancel as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}
