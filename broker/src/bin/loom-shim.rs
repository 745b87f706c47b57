//! `loom-shim`: the stand-in for a brokered command inside the sandboxed shell.
//!
//! The broker installs one copy of this binary per brokered command, named after the command, in a read-only
//! directory first on the shell's PATH. It runs nothing itself: it connects to the broker's socket (`../sock`
//! next to its own directory, found through `/proc/self/exe`; `LOOM_BROKER_SOCKET` when `/proc` is unavailable),
//! sends its argv, working directory and environment, relays standard input up and standard output / error down,
//! and exits with the command's status (128 + signal number for a signal death).
//!
//! Exit codes of its own: 127 when the broker says the name is not a brokered command; 126 when the broker refuses
//! or cannot run the call, or cannot be reached; both with `loom-shim: <message>` on standard error.
//!
//! Standard library and libc only, so it stays small and starts fast.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

#[cfg_attr(
    not(test),
    expect(
        dead_code,
        reason = "frame.rs is shared with the broker, which uses the other half"
    )
)]
#[path = "../frame.rs"]
mod frame;

use std::ffi::OsString;
use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

use frame::{read_frame, write_frame, Request};

/// Exit code when the call was refused or could not run.
const REFUSED: i32 = 126;

fn socket_path() -> Option<PathBuf> {
    if let Ok(exe) = std::fs::read_link("/proc/self/exe") {
        if let Some(dir) = exe.parent().and_then(|bin| bin.parent()) {
            return Some(dir.join("sock"));
        }
    }
    std::env::var_os("LOOM_BROKER_SOCKET").map(PathBuf::from)
}

/// A standard stream as an unbuffered file that is never closed.
fn raw(fd: i32) -> ManuallyDrop<File> {
    // SAFETY: fds 0-2 belong to this process for its whole life; ManuallyDrop keeps us from closing them.
    ManuallyDrop::new(unsafe { File::from_raw_fd(fd) })
}

/// Dies of SIGPIPE, as the real command would when its reader went away.
fn die_of_sigpipe() -> i32 {
    // SAFETY: restoring the default disposition and raising a signal at ourselves.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    128 + libc::SIGPIPE
}

fn fail(message: &str) -> i32 {
    let mut err = raw(2);
    let _ = writeln!(err, "loom-shim: {message}");
    REFUSED
}

fn relay_stdin(mut up: UnixStream) {
    let mut input = raw(0);
    let mut buf = vec![0u8; frame::CHUNK];
    loop {
        match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if write_frame(&mut up, frame::T_STDIN, &buf[..n]).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            // A closed or unreadable stdin is an empty one.
            Err(_) => break,
        }
    }
    let _ = write_frame(&mut up, frame::T_STDIN_EOF, &[]);
}

fn run() -> i32 {
    let argv: Vec<OsString> = std::env::args_os().collect();
    if argv.is_empty() {
        return fail("started without an argv[0]; invoke a brokered command by its name");
    }
    let cwd = std::env::current_dir()
        .map(PathBuf::into_os_string)
        .unwrap_or_default();
    let env: Vec<OsString> = std::env::vars_os()
        .map(|(k, v)| {
            let mut e = k.into_vec();
            e.push(b'=');
            e.extend(v.into_vec());
            OsString::from_vec(e)
        })
        .collect();
    let request = Request { argv, cwd, env };
    let Some(sock) = socket_path() else {
        return fail(
            "cannot locate the loom broker's socket (no /proc/self/exe and no LOOM_BROKER_SOCKET)",
        );
    };
    let mut stream = match UnixStream::connect(&sock) {
        Ok(s) => s,
        Err(e) => {
            return fail(&format!(
                "cannot reach the loom broker at {}: {e}; brokered commands work only inside the shell loom started",
                sock.display()
            ))
        }
    };
    let sent = request
        .encode()
        .and_then(|p| write_frame(&mut stream, frame::T_REQUEST, &p));
    if let Err(e) = sent {
        return fail(&format!("cannot send the request to the broker: {e}"));
    }
    match stream.try_clone() {
        Ok(up) => {
            std::thread::spawn(move || relay_stdin(up));
        }
        Err(e) => return fail(&format!("cannot relay standard input: {e}")),
    }
    let mut out = raw(1);
    let mut err = raw(2);
    loop {
        let f = match read_frame(&mut stream) {
            Ok(Some(f)) => f,
            Ok(None) => {
                return fail("the broker closed the connection before the command finished")
            }
            Err(e) => return fail(&format!("the broker connection failed: {e}")),
        };
        match f.kind {
            frame::T_STDOUT => {
                if let Err(e) = out.write_all(&f.payload) {
                    if e.kind() == ErrorKind::BrokenPipe {
                        return die_of_sigpipe();
                    }
                    return fail(&format!("cannot write standard output: {e}"));
                }
            }
            frame::T_STDERR => {
                let _ = err.write_all(&f.payload);
            }
            frame::T_EXIT => {
                return frame::exit_status(&f.payload)
                    .unwrap_or_else(|e| fail(&format!("the broker sent a bad exit frame: {e}")))
            }
            frame::T_ERROR => {
                let (code, message) = frame::error_parts(&f.payload);
                let _ = fail(&message);
                return code;
            }
            k => return fail(&format!("the broker sent an unknown frame type {k:#04x}")),
        }
    }
}

fn main() {
    std::process::exit(run());
}
