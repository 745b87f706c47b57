//! What a confined command gets right before exec, in two halves: [`Confinement::prepare`] does everything that
//! allocates or touches the filesystem (compiles the seccomp programs, builds the Landlock ruleset and opens its
//! paths), and [`Confinement::enforce`] applies it with raw system calls only. The enforcing half is
//! async-signal-safe, so the same code runs inside the inner stage (tiers A and C, inside bwrap's view) and between
//! clone and exec of the command itself (tier B, which needs no second executable; see `clone_exec`).

use std::fmt;

use seccompiler::BpfProgram;

use crate::landlock::{prepare_landlock, LandlockRule, PreparedLandlock};
use crate::seccomp::{apply_seccomp, seccomp_programs, SeccompPolicy};

/// The step of [`Confinement::enforce`] that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Step {
    NewSession = 1,
    RlimitNproc,
    RlimitFsize,
    Capabilities,
    NoNewPrivs,
    Landlock,
    Seccomp,
    CloseFds,
    Stdio,
    Chdir,
    Exec,
    Guard,
    Parent,
}

impl Step {
    const ALL: [Step; 13] = [
        Step::NewSession,
        Step::RlimitNproc,
        Step::RlimitFsize,
        Step::Capabilities,
        Step::NoNewPrivs,
        Step::Landlock,
        Step::Seccomp,
        Step::CloseFds,
        Step::Stdio,
        Step::Chdir,
        Step::Exec,
        Step::Guard,
        Step::Parent,
    ];

    fn name(self) -> &'static str {
        match self {
            Step::NewSession => "setsid",
            Step::RlimitNproc => "RLIMIT_NPROC",
            Step::RlimitFsize => "RLIMIT_FSIZE",
            Step::Capabilities => "capset (clearing every capability set)",
            Step::NoNewPrivs => "no_new_privs",
            Step::Landlock => "landlock_restrict_self",
            Step::Seccomp => "seccomp",
            Step::CloseFds => "close_range",
            Step::Stdio => "dup2 (standard streams)",
            Step::Chdir => "chdir",
            Step::Exec => "execve",
            Step::Guard => "telling the session's guard (tier B) the command's pid",
            Step::Parent => "loom ended before the command started",
        }
    }
}

/// A failed enforcement step and the OS error. Building one allocates nothing.
#[derive(Debug)]
pub(crate) struct EnforceError {
    pub(crate) step: Step,
    pub(crate) error: std::io::Error,
}

impl fmt::Display for EnforceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.step.name(), self.error)
    }
}

impl EnforceError {
    pub(crate) fn last(step: Step) -> EnforceError {
        EnforceError {
            step,
            error: std::io::Error::last_os_error(),
        }
    }

    /// Five bytes for a pipe, written between fork and exec: the step, then the errno (native endian).
    pub(crate) fn to_bytes(&self) -> [u8; 5] {
        let errno = self.error.raw_os_error().unwrap_or(0).to_ne_bytes();
        [self.step as u8, errno[0], errno[1], errno[2], errno[3]]
    }

    /// Reads what [`EnforceError::to_bytes`] wrote.
    pub(crate) fn from_bytes(b: &[u8]) -> Option<EnforceError> {
        let (&step, errno) = b.split_first()?;
        let step = Step::ALL.into_iter().find(|s| *s as u8 == step)?;
        let errno: [u8; 4] = errno.get(..4)?.try_into().ok()?;
        Some(EnforceError {
            step,
            error: std::io::Error::from_raw_os_error(i32::from_ne_bytes(errno)),
        })
    }
}

/// A prepared confinement: seccomp programs compiled, Landlock ruleset built, limits decided.
#[derive(Debug)]
pub(crate) struct Confinement {
    landlock: Option<PreparedLandlock>,
    /// Compiled once per process (see [`seccomp_programs`]).
    seccomp: &'static [BpfProgram],
    new_session: bool,
    max_procs: Option<u64>,
    max_file_size: Option<u64>,
}

fn set_rlimit(
    resource: libc::__rlimit_resource_t,
    value: u64,
    step: Step,
) -> Result<(), EnforceError> {
    let lim = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    // SAFETY: `lim` is a valid rlimit on the stack.
    if unsafe { libc::setrlimit(resource, &lim) } != 0 {
        return Err(EnforceError::last(step));
    }
    Ok(())
}

impl Confinement {
    /// Compiles the seccomp programs for `policy` and, unless `landlock` is `None` (tier C), builds the Landlock
    /// ruleset and opens its paths. Refuses when Landlock would enforce nothing.
    pub(crate) fn prepare(
        landlock: Option<&[LandlockRule]>,
        policy: SeccompPolicy,
        new_session: bool,
        max_procs: Option<u64>,
        max_file_size: Option<u64>,
    ) -> Result<Confinement, String> {
        let seccomp = seccomp_programs(policy).map_err(|e| e.to_string())?;
        let landlock = landlock
            .map(|rules| prepare_landlock(rules, policy.network))
            .transpose()
            .map_err(|e| e.to_string())?;
        Ok(Confinement {
            landlock,
            seccomp,
            new_session,
            max_procs,
            max_file_size,
        })
    }

    /// The same confinement with `landlock` as its ruleset (for tests).
    #[cfg(test)]
    pub(crate) fn with_landlock(mut self, landlock: PreparedLandlock) -> Confinement {
        self.landlock = Some(landlock);
        self
    }

    /// What [`Confinement::enforce`] enforces, as the status line reports it: `landlock=full seccomp=on
    /// no_new_privs=on` (`landlock=off` for tier C).
    pub(crate) fn describe(&self) -> String {
        let landlock = self
            .landlock
            .as_ref()
            .map_or("off", |l| l.enforcement().as_str());
        format!("landlock={landlock} seccomp=on no_new_privs=on")
    }

    /// Starts a new session (when asked), sets the resource limits, drops every capability from the bounding and
    /// ambient sets and empties the effective, permitted and inheritable sets, sets `no_new_privs`, restricts the
    /// calling thread with Landlock, then installs the seccomp programs. Descriptors are the caller's business.
    ///
    /// Async-signal-safe: raw system calls on prepared data, no allocation, no lock, no panic — safe between fork
    /// (or a `CLONE_VM` clone) and exec.
    pub(crate) fn enforce(&self) -> Result<(), EnforceError> {
        // SAFETY: setsid has no memory-safety preconditions.
        if self.new_session && unsafe { libc::setsid() } < 0 {
            return Err(EnforceError::last(Step::NewSession));
        }
        if let Some(n) = self.max_procs {
            set_rlimit(libc::RLIMIT_NPROC, n, Step::RlimitNproc)?;
        }
        if let Some(n) = self.max_file_size {
            set_rlimit(libc::RLIMIT_FSIZE, n, Step::RlimitFsize)?;
        }
        // Drop every capability from the bounding and ambient sets. Failures mean we hold no CAP_SETPCAP, i.e. no
        // capabilities to drop. Only capabilities still in the bounding set are
        // dropped: reading is cheap, while each drop replaces the process's credentials (after bwrap's
        // `--cap-drop ALL` there is nothing left to drop). Capabilities are numbered densely from 0, so the first
        // number the kernel does not know (EINVAL: past `cap_last_cap`) ends the walk.
        // SAFETY: plain prctl calls with integer arguments.
        unsafe {
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL,
                0,
                0,
                0,
            );
            for cap in 0..64 {
                match libc::prctl(libc::PR_CAPBSET_READ, cap, 0, 0, 0) {
                    0 => {}
                    -1 if *libc::__errno_location() == libc::EINVAL => break,
                    _ => {
                        libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
                    }
                }
            }
        }
        // Then empty the effective, permitted and inheritable sets (lowering them needs no privilege, so this never
        // fails for want of one). With the inheritable set left as it was, a uid-0 command would get it back as
        // permitted and effective at exec (root's file sets are full; `no_new_privs` does not stop it, nothing is
        // gained over the old permitted set) — as when loom itself was started with inheritable capabilities (old
        // container runtimes, `capsh --inh`, pam_cap). With all of them empty, bounding and ambient included, a uid-0
        // command execs with none.
        clear_capability_sets()?;
        // SAFETY: plain prctl call.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(EnforceError::last(Step::NoNewPrivs));
        }
        if let Some(l) = &self.landlock {
            l.restrict_self().map_err(|error| EnforceError {
                step: Step::Landlock,
                error,
            })?;
        }
        apply_seccomp(self.seccomp).map_err(|e| EnforceError {
            step: Step::Seccomp,
            error: match e {
                crate::seccomp::SeccompError::Install(error) => error,
                crate::seccomp::SeccompError::Build(_) => {
                    std::io::Error::from_raw_os_error(libc::EINVAL)
                }
            },
        })
    }
}

/// `capset(2)` with every set empty, for the calling thread. Async-signal-safe (one system call on stack data).
fn clear_capability_sets() -> Result<(), EnforceError> {
    /// `struct __user_cap_header_struct`.
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    /// `struct __user_cap_data_struct`.
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    /// `_LINUX_CAPABILITY_VERSION_3`: two `Data` elements, 64 capabilities.
    const VERSION_3: u32 = 0x2008_0522;
    let header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let empty = Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    };
    let data = [empty; 2];
    // SAFETY: a valid header and two data elements, as version 3 requires; the kernel only reads them.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &header as *const Header, data.as_ptr()) };
    if rc != 0 {
        return Err(EnforceError::last(Step::Capabilities));
    }
    Ok(())
}

/// Marks every descriptor from 3 up close-on-exec, so the command starts with only its standard streams while
/// whatever reports a failed exec (a close-on-exec pipe) keeps working until then. Async-signal-safe.
pub(crate) fn cloexec_above_stderr() -> Result<(), EnforceError> {
    // SAFETY: close_range only changes descriptor flags here.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if rc != 0 {
        return Err(EnforceError::last(Step::CloseFds));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_step_survives_the_pipe() {
        for step in Step::ALL {
            let e = EnforceError {
                step,
                error: std::io::Error::from_raw_os_error(libc::EPERM),
            };
            let back = EnforceError::from_bytes(&e.to_bytes()).unwrap();
            assert_eq!(back.step, step);
            assert_eq!(back.error.raw_os_error(), Some(libc::EPERM));
            assert!(back.to_string().starts_with(step.name()));
        }
        assert!(EnforceError::from_bytes(&[0, 1, 0, 0, 0]).is_none());
        assert!(EnforceError::from_bytes(&[1, 1]).is_none());
    }

    #[test]
    fn tier_c_prepares_no_landlock() {
        let c = Confinement::prepare(None, SeccompPolicy::default(), false, None, None).unwrap();
        assert_eq!(c.describe(), "landlock=off seccomp=on no_new_privs=on");
        assert_eq!(c.seccomp.len(), 1);
    }
}
