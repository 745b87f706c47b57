//! The inner stage of tiers A and C (the `loom-sandbox-exec` binary): runs inside bwrap's view, applies the
//! [`Confinement`] (resource limits, capabilities dropped, `no_new_privs`, Landlock for tier A, seccomp), closes every
//! descriptor above 2, then execs the command. It reports one status line on a pipe before exec so the parent knows
//! exactly what was enforced. (Tier B needs no inner stage: the same confinement runs between fork and exec.)
//!
//! The spec travels as arguments (`encode`/`decode`, pure) after the [`INNER_ARG`] marker.

use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use crate::confine::Confinement;
use crate::landlock::{AccessClass, LandlockRule};

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

fn setup(spec: &InnerSpec) -> Result<String, String> {
    let confinement = Confinement::prepare(
        spec.landlock.as_deref(),
        spec.network,
        spec.new_session,
        spec.max_procs,
        spec.max_file_size,
    )?;
    confinement.enforce().map_err(|e| e.to_string())?;
    let status = confinement.describe();
    drop(confinement);
    // Close every descriptor above 2 except the status pipe, which closes itself on exec.
    let fd = spec.status_fd as libc::c_uint;
    // SAFETY: close_range only closes descriptors; none of them is in use by Rust objects past this point.
    unsafe {
        if fd > 3 {
            libc::syscall(libc::SYS_close_range, 3u32, fd - 1, 0u32);
        }
        libc::syscall(libc::SYS_close_range, fd + 1, u32::MAX, 0u32);
        libc::fcntl(spec.status_fd, libc::F_SETFD, libc::FD_CLOEXEC);
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
