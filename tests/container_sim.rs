//! `container-sim [--block-namespaces] [--no-landlock] [--no-bwrap] [--uid N] -- COMMAND ARGS…`: runs COMMAND under the
//! restrictions a container runtime puts on it, so the sandbox suite can show which tier loom picks in each
//! (tests/sandbox/containers.rs, issue 24 item 8) without a container engine:
//!
//! - `--block-namespaces`: what Docker's and containerd's default seccomp profiles (Kubernetes' `RuntimeDefault`) do
//!   to a process without CAP_SYS_ADMIN: `unshare`, `clone` with any namespace flag and `setns` fail with EPERM,
//!   `clone3` with ENOSYS (so the C library falls back to `clone`, where the flags are visible);
//! - `--no-landlock`: a kernel without Landlock (or a profile denying it): the three `landlock_*` calls fail with
//!   ENOSYS;
//! - `--no-bwrap`: an image without bubblewrap: in a mount namespace of its own, `/dev/null` is bound over every
//!   `bwrap` loom looks for (needs root, as a container engine does);
//! - `--uid N`: then run as user N (groups dropped), as an image's non-root `USER` does.
//!
//! The filters are inherited by COMMAND and everything it starts, like a container's profile. A test aid, never
//! shipped.

use std::collections::BTreeMap;
use std::ffi::CString;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op,
    SeccompCondition as Cond, SeccompFilter, SeccompRule,
};

/// The namespace flags of `clone` and `unshare`.
const NAMESPACE_FLAGS: [u64; 8] = [
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWCGROUP as u64,
    0x80, // CLONE_NEWTIME
];

fn die(msg: &str) -> ! {
    eprintln!("container-sim: {msg}");
    std::process::exit(125);
}

/// A filter returning `errno` for each listed syscall when any of its rules matches (no rules: always).
fn install(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32) {
    let arch = std::env::consts::ARCH
        .try_into()
        .unwrap_or_else(|e| die(&format!("arch: {e:?}")));
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch,
    )
    .unwrap_or_else(|e| die(&format!("filter: {e}")));
    let prog: BpfProgram = filter
        .try_into()
        .unwrap_or_else(|e| die(&format!("compile: {e:?}")));
    seccompiler::apply_filter(&prog).unwrap_or_else(|e| die(&format!("apply: {e}")));
}

/// Rules matching a call whose argument `arg` has any namespace flag set.
fn any_namespace_flag(arg: u8) -> Vec<SeccompRule> {
    NAMESPACE_FLAGS
        .iter()
        .map(|&f| {
            let c = Cond::new(arg, Len::Qword, Op::MaskedEq(f), f)
                .unwrap_or_else(|e| die(&format!("condition: {e}")));
            SeccompRule::new(vec![c]).unwrap_or_else(|e| die(&format!("rule: {e}")))
        })
        .collect()
}

fn hide_bwrap() {
    // SAFETY: plain syscalls on constant, NUL-terminated arguments; nothing else runs in this process yet.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            die(&format!(
                "--no-bwrap needs a mount namespace (run as root): {}",
                std::io::Error::last_os_error()
            ));
        }
        let root = c"/";
        if libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            die(&format!(
                "make / private: {}",
                std::io::Error::last_os_error()
            ));
        }
        for p in ["/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"] {
            if std::path::Path::new(p).is_file() {
                let target = CString::new(p).unwrap_or_else(|_| die("path"));
                if libc::mount(
                    c"/dev/null".as_ptr(),
                    target.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND,
                    std::ptr::null(),
                ) != 0
                {
                    die(&format!("hide {p}: {}", std::io::Error::last_os_error()));
                }
            }
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(split) = args.iter().position(|a| a == "--") else {
        die("usage: container-sim [--block-namespaces] [--no-landlock] [--no-bwrap] -- COMMAND ARGS...");
    };
    let (mut opts, cmd) = (args[..split].to_vec(), &args[split + 1..]);
    if cmd.is_empty() {
        die("no command after --");
    }
    let mut uid: Option<libc::uid_t> = None;
    if let Some(i) = opts.iter().position(|o| o == "--uid") {
        let v = opts
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| die("--uid needs a number"));
        uid = Some(v);
        opts.drain(i..i + 2);
    }
    for o in &opts {
        if !matches!(
            o.as_str(),
            "--block-namespaces" | "--no-landlock" | "--no-bwrap"
        ) {
            die(&format!("unknown option {o}"));
        }
    }
    let has = |o: &str| opts.iter().any(|x| x == o);
    if has("--no-bwrap") {
        hide_bwrap();
    }
    if let Some(uid) = uid {
        // SAFETY: plain syscalls with integer arguments.
        let ok = unsafe {
            libc::setgroups(0, std::ptr::null()) == 0
                && libc::setgid(uid) == 0
                && libc::setuid(uid) == 0
        };
        if !ok {
            die(&format!(
                "cannot become uid {uid}: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    // SAFETY: prctl with constant arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        die(&format!(
            "no_new_privs: {}",
            std::io::Error::last_os_error()
        ));
    }
    if has("--block-namespaces") {
        let mut eperm = BTreeMap::new();
        eperm.insert(libc::SYS_unshare, any_namespace_flag(0));
        eperm.insert(libc::SYS_clone, any_namespace_flag(0));
        eperm.insert(libc::SYS_setns, Vec::new());
        install(eperm, libc::EPERM);
        let mut enosys = BTreeMap::new();
        enosys.insert(libc::SYS_clone3, Vec::new());
        install(enosys, libc::ENOSYS);
    }
    if has("--no-landlock") {
        let mut enosys = BTreeMap::new();
        enosys.insert(libc::SYS_landlock_create_ruleset, Vec::new());
        enosys.insert(libc::SYS_landlock_add_rule, Vec::new());
        enosys.insert(libc::SYS_landlock_restrict_self, Vec::new());
        install(enosys, libc::ENOSYS);
    }
    let argv: Vec<CString> = cmd
        .iter()
        .map(|a| CString::new(a.as_str()).unwrap_or_else(|_| die("NUL in an argument")))
        .collect();
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // SAFETY: argv is NUL-terminated C strings ending in a null pointer, alive across the call.
    unsafe { libc::execvp(ptrs[0], ptrs.as_ptr()) };
    die(&format!(
        "cannot run {}: {}",
        cmd[0],
        std::io::Error::last_os_error()
    ));
}
