//! `loom-sandbox-exec`: the sandbox's inner stage (tiers A and C) as a small executable of its own, so each confined
//! command pays the start of this binary rather than a second start of the whole `loom` CLI. It runs
//! [`loom_sandbox::inner_main`] and nothing else: no argument parser, no async runtime.
//!
//! It also skips the Rust runtime's start-up (`#![no_main]`): that reads `/proc/self/maps` to place a stack guard
//! and sets SIGPIPE to "ignored", which the command would then inherit across exec. What the runtime does that
//! matters here — standard descriptors 0–2 always open, so nothing the stage opens lands on them — is done below.
//! Installed next to `loom` (see README.md); loom refuses to run a confined command when it is missing.
#![no_main]

use std::ffi::OsString;

/// Opens `/dev/null` on any of descriptors 0–2 that is closed.
fn sanitize_standard_fds() -> bool {
    for fd in 0..3 {
        // SAFETY: F_GETFD on a small integer only reads descriptor flags.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } != -1 {
            continue;
        }
        // SAFETY: opening a constant NUL-terminated path; the lowest free descriptor is `fd`.
        let opened = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
        if opened != fd {
            return false;
        }
    }
    true
}

/// The C entry point (see the module documentation for why not Rust's `main`).
#[no_mangle]
pub extern "C" fn main(_argc: libc::c_int, _argv: *const *const libc::c_char) -> libc::c_int {
    if !sanitize_standard_fds() {
        return loom_sandbox::SETUP_FAILED;
    }
    // std captures the arguments before `main` on Linux, also without Rust's runtime.
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    loom_sandbox::inner_main(&args)
}
