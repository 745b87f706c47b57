//! The inner stage of tiers A and C (the `loom-sandbox-exec` binary): runs inside bwrap's view, checks that bwrap's
//! pid 1 runs under seccomp, applies the [`Confinement`] (resource limits, capabilities dropped, `no_new_privs`,
//! Landlock for tier A, seccomp), closes every descriptor above 2, then execs the command. It reports one status line
//! on a pipe before exec so the parent knows what was enforced — read back from the kernel (`/proc/self/status`)
//! after enforcing, not taken from what it was asked to do. (Tier B needs no inner stage: the same confinement runs
//! between fork and exec.)
//!
//! The spec travels as arguments (`encode`/`decode`, pure) after the [`INNER_ARG`] marker.

use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use crate::confine::Confinement;
use crate::landlock::{AccessClass, LandlockRule};
use crate::seccomp::SeccompPolicy;

/// The first argument of the inner stage (`loom-sandbox-exec __sandbox-exec ...`).
pub const INNER_ARG: &str = "__sandbox-exec";

/// Exit code of the inner stage when it refuses or fails before exec.
pub const SETUP_FAILED: i32 = 125;

/// What the inner stage must do before exec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InnerSpec {
    /// The descriptor of the status pipe's write end.
    pub status_fd: i32,
    /// Landlock rules; `None` when the tier applies no Landlock (Tier C).
    pub landlock: Option<Vec<LandlockRule>>,
    /// Whether the network is granted (selects the seccomp socket rules, Landlock TCP handling).
    pub network: bool,
    /// Start a new session (bwrap's `--new-session` already does it in tiers A and C).
    pub new_session: bool,
    /// `RLIMIT_NPROC`.
    pub max_procs: Option<u64>,
    /// `RLIMIT_FSIZE`.
    pub max_file_size: Option<u64>,
    /// The command and its arguments.
    pub argv: Vec<OsString>,
}

fn class_code(c: AccessClass) -> &'static str {
    match c {
        AccessClass::List => "l",
        AccessClass::Read => "r",
        AccessClass::ReadFile => "f",
        AccessClass::Device => "d",
        AccessClass::Write => "w",
    }
}

impl InnerSpec {
    /// The arguments after the executable: `__sandbox-exec --status-fd N ... -- CMD ARGS`.
    pub fn encode(&self) -> Vec<OsString> {
        let mut a: Vec<OsString> = vec![
            INNER_ARG.into(),
            "--status-fd".into(),
            self.status_fd.to_string().into(),
        ];
        a.push("--net".into());
        a.push(if self.network { "on" } else { "off" }.into());
        if self.new_session {
            a.push("--new-session".into());
        }
        if let Some(n) = self.max_procs {
            a.push("--nproc".into());
            a.push(n.to_string().into());
        }
        if let Some(n) = self.max_file_size {
            a.push("--fsize".into());
            a.push(n.to_string().into());
        }
        match &self.landlock {
            None => {
                a.push("--no-landlock".into());
            }
            Some(rules) => {
                for r in rules {
                    let mut v = OsString::from(class_code(r.access));
                    if r.required {
                        v.push("!");
                    }
                    v.push(":");
                    v.push(&r.path);
                    a.push("--rule".into());
                    a.push(v);
                }
            }
        }
        a.push("--".into());
        a.extend(self.argv.iter().cloned());
        a
    }

    /// Reads the arguments after the executable (starting with [`INNER_ARG`]).
    pub fn decode(args: &[OsString]) -> Result<InnerSpec, String> {
        let mut it = args.iter();
        if it.next().map(OsString::as_os_str) != Some(OsStr::new(INNER_ARG)) {
            return Err(format!("the first argument must be {INNER_ARG}"));
        }
        let mut spec = InnerSpec {
            status_fd: -1,
            landlock: Some(Vec::new()),
            network: false,
            new_session: false,
            max_procs: None,
            max_file_size: None,
            argv: Vec::new(),
        };
        let num = |v: Option<&OsString>, what: &str| -> Result<u64, String> {
            v.and_then(|s| s.to_str())
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| format!("{what} needs a number"))
        };
        while let Some(arg) = it.next() {
            match arg.to_str() {
                Some("--status-fd") => {
                    spec.status_fd = i32::try_from(num(it.next(), "--status-fd")?)
                        .map_err(|_| "--status-fd is out of range".to_string())?
                }
                Some("--net") => {
                    spec.network = match it.next().and_then(|s| s.to_str()) {
                        Some("on") => true,
                        Some("off") => false,
                        _ => return Err("--net needs on or off".into()),
                    }
                }
                Some("--new-session") => spec.new_session = true,
                Some("--nproc") => spec.max_procs = Some(num(it.next(), "--nproc")?),
                Some("--fsize") => spec.max_file_size = Some(num(it.next(), "--fsize")?),
                Some("--no-landlock") => spec.landlock = None,
                Some("--rule") => {
                    let v = it.next().ok_or("--rule needs a value")?.as_bytes();
                    let colon = v
                        .iter()
                        .position(|b| *b == b':')
                        .ok_or("--rule needs CLASS:PATH")?;
                    let (code, path) = (&v[..colon], &v[colon + 1..]);
                    let (code, required) = match code.strip_suffix(b"!") {
                        Some(c) => (c, true),
                        None => (code, false),
                    };
                    let access = match code {
                        b"l" => AccessClass::List,
                        b"r" => AccessClass::Read,
                        b"f" => AccessClass::ReadFile,
                        b"d" => AccessClass::Device,
                        b"w" => AccessClass::Write,
                        _ => return Err("--rule class must be l, r, d or w".into()),
                    };
                    let rule = LandlockRule {
                        path: PathBuf::from(OsString::from_vec(path.to_vec())),
                        access,
                        required,
                    };
                    spec.landlock
                        .as_mut()
                        .ok_or("--rule conflicts with --no-landlock")?
                        .push(rule);
                }
                Some("--") => {
                    spec.argv = it.cloned().collect();
                    break;
                }
                _ => return Err(format!("unknown argument {arg:?}")),
            }
        }
        if spec.status_fd < 3 {
            return Err("--status-fd is required (and above 2)".into());
        }
        if spec.argv.is_empty() {
            return Err("no command after --".into());
        }
        Ok(spec)
    }
}

fn write_status(fd: i32, line: &str) {
    let bytes = line.as_bytes();
    let mut off = 0;
    while off < bytes.len() {
        // SAFETY: writing from a valid slice to a descriptor we were given; errors end the loop.
        let n = unsafe { libc::write(fd, bytes[off..].as_ptr().cast(), bytes.len() - off) };
        if n <= 0 {
            break;
        }
        off += n as usize;
    }
}

/// Finds `cmd` on `PATH` the way execvp would (a name with a slash is taken as is).
fn resolve(cmd: &OsStr) -> Option<PathBuf> {
    let is_exe = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            // SAFETY: `c` is a valid NUL-terminated path.
            .map(|c| unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0 && !p.is_dir())
            .unwrap_or(false)
    };
    if cmd.as_bytes().contains(&b'/') {
        let p = PathBuf::from(cmd);
        return is_exe(&p).then_some(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|d| d.join(cmd))
        .find(|p| is_exe(p))
}

/// The fields of a `/proc/<pid>/status` text that say how the process is confined.
#[derive(Debug, Default, PartialEq, Eq)]
struct StatusFields {
    no_new_privs: Option<u64>,
    seccomp: Option<u64>,
    /// CapInh, CapPrm, CapEff, CapAmb (hexadecimal masks).
    caps: [Option<u64>; 4],
}

fn parse_status(text: &str) -> StatusFields {
    let mut f = StatusFields::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        let dec = || value.parse::<u64>().ok();
        let hex = || u64::from_str_radix(value, 16).ok();
        match key {
            "NoNewPrivs" => f.no_new_privs = dec(),
            "Seccomp" => f.seccomp = dec(),
            "CapInh" => f.caps[0] = hex(),
            "CapPrm" => f.caps[1] = hex(),
            "CapEff" => f.caps[2] = hex(),
            "CapAmb" => f.caps[3] = hex(),
            _ => {}
        }
    }
    f
}

/// `Seccomp: 2` means a filter is installed.
const SECCOMP_MODE_FILTER: u64 = 2;

/// Refuses unless bwrap's pid 1 (the reaper of the view's pid namespace, which shares the command's uid) runs under a
/// seccomp filter: without it, the command could take it over through `/proc/1/mem` and run unfiltered. bwrap
/// installs the filter it is given with `--seccomp` on pid 1 too, right after forking the inner stage's process, so
/// the check waits for it (backing off) before refusing; a bubblewrap that never does is refused.
fn check_pid1() -> Result<(), String> {
    // SAFETY: getpid cannot fail.
    if unsafe { libc::getpid() } == 1 {
        return Ok(());
    }
    let mut pause_us: u64 = 50;
    let mut waited_us: u64 = 0;
    loop {
        let text = std::fs::read_to_string("/proc/1/status")
            .map_err(|e| format!("cannot read /proc/1/status to check bwrap's pid 1: {e}"))?;
        if parse_status(&text).seccomp == Some(SECCOMP_MODE_FILTER) {
            return Ok(());
        }
        if waited_us >= PID1_WAIT_US {
            return Err(
                "bwrap's pid 1 runs without the seccomp filter (this bubblewrap does not apply --seccomp to it); \
                 install a newer bubblewrap (0.8 is known to)"
                    .into(),
            );
        }
        std::thread::sleep(std::time::Duration::from_micros(pause_us));
        waited_us += pause_us;
        pause_us = (pause_us * 2).min(100_000);
    }
}

/// How long [`check_pid1`] waits for bwrap's pid 1 to install its filter (it only closes its descriptors first).
const PID1_WAIT_US: u64 = 10_000_000;

/// Reads back from the kernel what is in force for this process after enforcing, and refuses on any mismatch (see
/// [`check_confined`]).
fn verify_enforced() -> Result<(), String> {
    let text = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("cannot read /proc/self/status to check the confinement: {e}"))?;
    check_confined(&text)
}

/// Checks a `/proc/<pid>/status` text for what every confined command has: a seccomp filter, `no_new_privs`, and no
/// capability in the inheritable, permitted, effective or ambient set.
pub(crate) fn check_confined(status: &str) -> Result<(), String> {
    let f = parse_status(status);
    if f.seccomp != Some(SECCOMP_MODE_FILTER) {
        return Err(format!(
            "the kernel reports no seccomp filter in force (Seccomp: {:?})",
            f.seccomp
        ));
    }
    if f.no_new_privs != Some(1) {
        return Err("the kernel reports no_new_privs unset".into());
    }
    if f.caps.iter().any(|c| *c != Some(0)) {
        return Err(format!(
            "capabilities remain (inheritable, permitted, effective, ambient: {:x?})",
            f.caps
        ));
    }
    Ok(())
}

/// Closes every descriptor above 2 except `keep`: `close_range` where the kernel has it (5.9+), else one by one,
/// listing `/proc/self/fd`, else every number below `RLIMIT_NOFILE`. Never leaves one open silently.
fn close_inherited(keep: i32) -> Result<(), String> {
    let keep = u32::try_from(keep).map_err(|_| "bad status descriptor".to_string())?;
    let range = |from: u32, to: u32| -> bool {
        // SAFETY: close_range only closes descriptors; none is in use by a Rust object past this point.
        from > to || unsafe { libc::syscall(libc::SYS_close_range, from, to, 0u32) } == 0
    };
    if range(3, keep.saturating_sub(1)) && range(keep.saturating_add(1), u32::MAX) {
        return Ok(());
    }
    close_one_by_one(keep)
}

/// The fallback of [`close_inherited`].
fn close_one_by_one(keep: u32) -> Result<(), String> {
    let close = |fd: u32| {
        if fd > 2 && fd != keep {
            // SAFETY: closing a descriptor number; EBADF (not open) is harmless.
            unsafe { libc::close(fd as libc::c_int) };
        }
    };
    if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
        // Collected first: the listing holds a descriptor of its own while it runs.
        let fds: Vec<u32> = dir
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
            .collect();
        fds.into_iter().for_each(close);
        return Ok(());
    }
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid rlimit on the stack.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(format!(
            "cannot close inherited descriptors: close_range failed, /proc/self/fd is unreadable and RLIMIT_NOFILE \
             is unknown ({})",
            std::io::Error::last_os_error()
        ));
    }
    let end = u32::try_from(lim.rlim_cur).map_err(|_| {
        "cannot close inherited descriptors: close_range failed, /proc/self/fd is unreadable and RLIMIT_NOFILE is \
         unlimited"
            .to_string()
    })?;
    (3..end).for_each(close);
    Ok(())
}

fn setup(spec: &InnerSpec) -> Result<String, String> {
    check_pid1()?;
    let policy = SeccompPolicy {
        network: spec.network,
        host_namespaces: false,
        deny_truncate: false,
    };
    let confinement = Confinement::prepare(
        spec.landlock.as_deref(),
        policy,
        spec.new_session,
        spec.max_procs,
        spec.max_file_size,
    )?;
    confinement.enforce().map_err(|e| e.to_string())?;
    let status = confinement.describe();
    drop(confinement);
    verify_enforced()?;
    // Close every descriptor above 2 except the status pipe, which closes itself on exec.
    close_inherited(spec.status_fd)?;
    // SAFETY: setting a flag on our own descriptor.
    if unsafe { libc::fcntl(spec.status_fd, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
        return Err(format!(
            "cannot mark the status pipe close-on-exec: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(status)
}

/// Runs the inner stage with `args` (starting with [`INNER_ARG`]). Returns only on failure, with the exit code.
pub fn inner_main(args: &[OsString]) -> i32 {
    let spec = match InnerSpec::decode(args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("loom: sandbox inner stage: {e}");
            return SETUP_FAILED;
        }
    };
    let fd = spec.status_fd;
    let status = match setup(&spec) {
        Ok(s) => s,
        Err(e) => {
            write_status(fd, &format!("err {e}\n"));
            return SETUP_FAILED;
        }
    };
    let Some(path) = resolve(&spec.argv[0]) else {
        write_status(
            fd,
            &format!("notfound {}\n", spec.argv[0].to_string_lossy()),
        );
        return 127;
    };
    let cpath = CString::new(path.as_os_str().as_bytes());
    let cargs: Result<Vec<CString>, _> = spec
        .argv
        .iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect();
    let (Ok(cpath), Ok(cargs)) = (cpath, cargs) else {
        write_status(fd, "err an argument contains a NUL byte\n");
        return SETUP_FAILED;
    };
    let mut ptrs: Vec<*const libc::c_char> = cargs.iter().map(|c| c.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    write_status(fd, &format!("ok {status}\n"));
    // SAFETY: `cpath` and every pointer in `ptrs` point into live CStrings; the array is NULL-terminated.
    unsafe { libc::execv(cpath.as_ptr(), ptrs.as_ptr()) };
    let e = std::io::Error::last_os_error();
    write_status(fd, &format!("execfailed {}: {e}\n", path.display()));
    126
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn spec_round_trips_through_arguments() {
        let spec = InnerSpec {
            status_fd: 7,
            landlock: Some(vec![
                LandlockRule {
                    path: "/usr".into(),
                    access: AccessClass::Read,
                    required: false,
                },
                LandlockRule {
                    path: "/work/a:b".into(),
                    access: AccessClass::Write,
                    required: true,
                },
                LandlockRule {
                    path: "/m/x.gguf".into(),
                    access: AccessClass::ReadFile,
                    required: true,
                },
            ]),
            network: true,
            new_session: true,
            max_procs: Some(64),
            max_file_size: Some(1 << 20),
            argv: vec!["sh".into(), "-c".into(), "--rule".into()],
        };
        let mut args = spec.encode();
        assert_eq!(args[0], INNER_ARG);
        assert_eq!(InnerSpec::decode(&args).unwrap(), spec);
        let off = InnerSpec {
            landlock: None,
            ..spec.clone()
        };
        assert_eq!(InnerSpec::decode(&off.encode()).unwrap(), off);
        args.insert(1, "--bogus".into());
        assert!(InnerSpec::decode(&args).is_err());
    }

    #[test]
    fn status_fields_are_read_as_the_kernel_writes_them() {
        let text = "Name:\tsh\nCapInh:\t0000000000000000\nCapPrm:\t00000000082020a2\nCapEff:\t0000000000000000\n\
                    CapBnd:\t000001ffffffffff\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\n\
                    Seccomp_filters:\t2\n";
        let f = parse_status(text);
        assert_eq!(f.no_new_privs, Some(1));
        assert_eq!(f.seccomp, Some(2));
        assert_eq!(f.caps, [Some(0), Some(0x82020a2), Some(0), Some(0)]);
        assert_eq!(parse_status("Seccomp:\t0\n").seccomp, Some(0));
        assert_eq!(parse_status("").caps, [None; 4]);
        let e = check_confined(text).unwrap_err();
        assert!(e.contains("capabilities remain"), "{e}");
        let clean = text.replace("00000000082020a2", "0000000000000000");
        assert_eq!(check_confined(&clean), Ok(()));
        let e = check_confined(&clean.replace("Seccomp:\t2", "Seccomp:\t0")).unwrap_err();
        assert!(e.contains("no seccomp filter"), "{e}");
        assert!(check_confined(&clean.replace("NoNewPrivs:\t1", "NoNewPrivs:\t0")).is_err());
    }

    /// The fallback closes what close_range would have (here run in a forked child, so the test process keeps its
    /// own descriptors).
    #[test]
    fn the_one_by_one_fallback_closes_every_descriptor_but_the_kept_one() {
        let (keep_r, keep_w) = crate::error::pipe().unwrap();
        let (other_r, _other_w) = crate::error::pipe().unwrap();
        let (keep, other) = (keep_w.as_raw_fd(), other_r.as_raw_fd());
        // SAFETY: the child only calls the fallback (allocation is fine after fork in this single-purpose child) and
        // fcntl, then _exits.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let ok = close_one_by_one(keep as u32).is_ok();
            // SAFETY: F_GETFD only reads descriptor flags.
            let code = unsafe {
                match (
                    ok,
                    libc::fcntl(other, libc::F_GETFD),
                    libc::fcntl(keep, libc::F_GETFD),
                    libc::fcntl(keep_r.as_raw_fd(), libc::F_GETFD),
                    libc::fcntl(1, libc::F_GETFD),
                ) {
                    (true, -1, k, -1, s) if k >= 0 && s >= 0 => 0,
                    _ => 1,
                }
            };
            // SAFETY: leaving the forked child.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "{status}"
        );
    }

    #[test]
    fn a_spec_needs_a_status_fd_and_a_command() {
        let a: Vec<OsString> = [INNER_ARG, "--net", "off", "--", "ls"]
            .iter()
            .map(OsString::from)
            .collect();
        assert!(InnerSpec::decode(&a).unwrap_err().contains("status-fd"));
        let a: Vec<OsString> = [INNER_ARG, "--status-fd", "5", "--"]
            .iter()
            .map(OsString::from)
            .collect();
        assert!(InnerSpec::decode(&a).unwrap_err().contains("no command"));
    }
}
