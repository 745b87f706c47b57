//! The seccomp stage: pure rule construction (`build_*`) and the applier (`apply_seccomp`).
//!
//! Denied (EPERM) for every sandbox: socket families AF_VSOCK and AF_PACKET, netlink other than NETLINK_ROUTE,
//! io_uring, ptrace and process_vm_*, ioctl TIOCSTI / TIOCLINUX (compared on the low 32 bits, as the kernel does),
//! new user namespaces through clone/unshare, open_by_handle_at, bpf, perf_event_open, userfaultfd, the kernel
//! keyring, setns, mount/umount/pivot_root and module/kexec loading. With the network off, every socket family other
//! than AF_UNIX. clone3 fails with ENOSYS (its flags live in memory seccomp cannot read), so libc falls back to
//! clone, whose flags are checked. All of it is one program (one filter to install per exec). Syscalls of a non-native ABI (x32, i386 on x86_64) kill the process.

use std::collections::BTreeMap;

use seccompiler::{
    sock_filter, BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op,
    SeccompCondition as Cond, SeccompFilter, SeccompRule, TargetArch,
};

/// Why a seccomp filter could not be built or installed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SeccompError {
    /// The rules did not compile (a bug, or an unsupported architecture).
    #[error("seccomp: cannot build the filter: {0}")]
    Build(String),
    /// The kernel refused the filter.
    #[error("seccomp: cannot install the filter: {0}")]
    Install(std::io::Error),
}

const AF_UNIX: u64 = libc::AF_UNIX as u64;
const AF_NETLINK: u64 = libc::AF_NETLINK as u64;
const AF_PACKET: u64 = libc::AF_PACKET as u64;
const AF_VSOCK: u64 = libc::AF_VSOCK as u64;
const NETLINK_ROUTE: u64 = libc::NETLINK_ROUTE as u64;
/// `ioctl` request pushing a byte into the terminal's input queue.
pub const TIOCSTI: u64 = 0x5412;
/// `ioctl` request for Linux console subcommands (including selection paste).
pub const TIOCLINUX: u64 = 0x541C;
const CLONE_NEWUSER: u64 = libc::CLONE_NEWUSER as u64;

fn cond(arg: u8, len: Len, op: Op, value: u64) -> Result<Cond, SeccompError> {
    Cond::new(arg, len, op, value).map_err(|e| SeccompError::Build(e.to_string()))
}

fn rule(conds: Vec<Cond>) -> Result<SeccompRule, SeccompError> {
    SeccompRule::new(conds).map_err(|e| SeccompError::Build(e.to_string()))
}

/// The EPERM rules: syscall number -> rules (any matching rule denies; an empty list denies unconditionally).
pub fn build_seccomp_rules(network: bool) -> Result<BTreeMap<i64, Vec<SeccompRule>>, SeccompError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let socket = if network {
        vec![
            rule(vec![cond(0, Len::Dword, Op::Eq, AF_PACKET)?])?,
            rule(vec![cond(0, Len::Dword, Op::Eq, AF_VSOCK)?])?,
            rule(vec![
                cond(0, Len::Dword, Op::Eq, AF_NETLINK)?,
                cond(2, Len::Dword, Op::Ne, NETLINK_ROUTE)?,
            ])?,
        ]
    } else {
        vec![rule(vec![cond(0, Len::Dword, Op::Ne, AF_UNIX)?])?]
    };
    rules.insert(libc::SYS_socket, socket.clone());
    rules.insert(libc::SYS_socketpair, socket);
    rules.insert(
        libc::SYS_ioctl,
        vec![
            rule(vec![cond(1, Len::Dword, Op::Eq, TIOCSTI)?])?,
            rule(vec![cond(1, Len::Dword, Op::Eq, TIOCLINUX)?])?,
        ],
    );
    let new_user = || -> Result<Vec<SeccompRule>, SeccompError> {
        Ok(vec![rule(vec![cond(
            0,
            Len::Qword,
            Op::MaskedEq(CLONE_NEWUSER),
            CLONE_NEWUSER,
        )?])?])
    };
    rules.insert(libc::SYS_clone, new_user()?);
    rules.insert(libc::SYS_unshare, new_user()?);
    for nr in [
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_open_by_handle_at,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_setns,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_kexec_load,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
    ] {
        rules.insert(nr, Vec::new());
    }
    Ok(rules)
}

fn arch() -> Result<TargetArch, SeccompError> {
    std::env::consts::ARCH
        .try_into()
        .map_err(|e: seccompiler::BackendError| SeccompError::Build(e.to_string()))
}

/// Instructions placed before a compiled filter: on x86_64, kill any x32 syscall (numbers with bit 30 set), which
/// the architecture check alone lets through. Empty elsewhere.
pub fn build_abi_guard() -> Vec<sock_filter> {
    if cfg!(target_arch = "x86_64") {
        const BPF_LD_W_ABS: u16 = 0x20;
        const BPF_JMP_JGE_K: u16 = 0x35;
        const BPF_RET_K: u16 = 0x06;
        vec![
            sock_filter {
                code: BPF_LD_W_ABS,
                jt: 0,
                jf: 0,
                k: 0,
            },
            sock_filter {
                code: BPF_JMP_JGE_K,
                jt: 0,
                jf: 1,
                k: 0x4000_0000,
            },
            sock_filter {
                code: BPF_RET_K,
                jt: 0,
                jf: 0,
                k: libc::SECCOMP_RET_KILL_PROCESS,
            },
        ]
    } else {
        Vec::new()
    }
}

/// The program to install: the ABI guard, the architecture check (a foreign architecture kills the process), clone3
/// -> ENOSYS, then the EPERM deny list. One program rather than a deny program plus a separate clone3 program: what
/// is denied is the same (the kernel would take ENOSYS from the clone3 program, as the deny list allows clone3), but
/// the kernel checks, converts and JIT-compiles one filter per exec instead of two.
pub fn build_seccomp_programs(network: bool) -> Result<Vec<BpfProgram>, SeccompError> {
    let deny = SeccompFilter::new(
        build_seccomp_rules(network)?,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch()?,
    )
    .map_err(|e| SeccompError::Build(e.to_string()))?;
    let compiled: BpfProgram = deny
        .try_into()
        .map_err(|e: seccompiler::BackendError| SeccompError::Build(e.to_string()))?;
    let mut prog = build_abi_guard();
    prog.extend(with_clone3_enosys(compiled)?);
    Ok(vec![prog])
}

/// Inserts `clone3 -> ENOSYS` into a compiled deny program right after its architecture check and syscall-number
/// load (seccompiler's layout: `ld arch; jeq arch, 1, 0; ret KILL_PROCESS; ld nr; <syscall chains>`). No jump of
/// those first four instructions crosses the insertion point, so the chains after it need no adjustment. Any other
/// layout is refused (a newer seccompiler), rather than spliced blindly.
fn with_clone3_enosys(compiled: BpfProgram) -> Result<BpfProgram, SeccompError> {
    const BPF_LD_W_ABS: u16 = 0x20;
    const BPF_JMP_JEQ_K: u16 = 0x15;
    const BPF_RET_K: u16 = 0x06;
    const SECCOMP_DATA_NR: u32 = 0;
    const SECCOMP_DATA_ARCH: u32 = 4;
    let layout_ok = matches!(
        compiled.get(..4),
        Some([ld_arch, check, kill, ld_nr])
            if ld_arch.code == BPF_LD_W_ABS && ld_arch.k == SECCOMP_DATA_ARCH
            && check.code == BPF_JMP_JEQ_K && check.jt == 1 && check.jf == 0
            && kill.code == BPF_RET_K && kill.k == libc::SECCOMP_RET_KILL_PROCESS
            && ld_nr.code == BPF_LD_W_ABS && ld_nr.k == SECCOMP_DATA_NR
    );
    if !layout_ok {
        return Err(SeccompError::Build(
            "unexpected layout of the compiled seccomp program (cannot add the clone3 check)"
                .into(),
        ));
    }
    let clone3 = u32::try_from(libc::SYS_clone3)
        .map_err(|_| SeccompError::Build("clone3's syscall number does not fit".into()))?;
    let mut out = compiled;
    out.splice(
        4..4,
        [
            sock_filter {
                code: BPF_JMP_JEQ_K,
                jt: 0,
                jf: 1,
                k: clone3,
            },
            sock_filter {
                code: BPF_RET_K,
                jt: 0,
                jf: 0,
                k: libc::SECCOMP_RET_ERRNO | (libc::ENOSYS as u32 & libc::SECCOMP_RET_DATA),
            },
        ],
    );
    Ok(out)
}

/// Installs the programs on the calling thread, in order. `no_new_privs` must already be set.
///
/// Async-signal-safe: raw `seccomp(2)` calls on prepared programs, no allocation (an error carries only the OS
/// error code), so it may run between fork and exec.
pub fn apply_seccomp(programs: &[BpfProgram]) -> Result<(), SeccompError> {
    for p in programs {
        let len = u16::try_from(p.len())
            .ok()
            .filter(|n| *n > 0)
            .ok_or(SeccompError::Install(std::io::Error::from_raw_os_error(
                libc::EINVAL,
            )))?;
        let prog = libc::sock_fprog {
            len,
            filter: p.as_ptr().cast_mut().cast(),
        };
        // SAFETY: `prog` points at a live program of `len` instructions; the kernel copies it.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0u32,
                &prog as *const libc::sock_fprog,
            )
        };
        if rc != 0 {
            return Err(SeccompError::Install(std::io::Error::last_os_error()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_off_denies_every_family_but_unix() {
        let r = build_seccomp_rules(false).unwrap();
        let socket = &r[&libc::SYS_socket];
        assert_eq!(socket.len(), 1);
        assert_eq!(
            socket[0],
            rule(vec![cond(0, Len::Dword, Op::Ne, AF_UNIX).unwrap()]).unwrap()
        );
    }

    #[test]
    fn network_on_still_denies_packet_vsock_and_non_route_netlink() {
        let r = build_seccomp_rules(true).unwrap();
        let socket = &r[&libc::SYS_socket];
        assert_eq!(socket.len(), 3);
        assert!(
            socket.contains(&rule(vec![cond(0, Len::Dword, Op::Eq, AF_PACKET).unwrap()]).unwrap())
        );
        assert!(
            socket.contains(&rule(vec![cond(0, Len::Dword, Op::Eq, AF_VSOCK).unwrap()]).unwrap())
        );
        assert!(socket.contains(
            &rule(vec![
                cond(0, Len::Dword, Op::Eq, AF_NETLINK).unwrap(),
                cond(2, Len::Dword, Op::Ne, NETLINK_ROUTE).unwrap(),
            ])
            .unwrap()
        ));
    }

    #[test]
    fn terminal_injection_is_matched_on_the_low_32_bits() {
        let r = build_seccomp_rules(false).unwrap();
        let ioctl = &r[&libc::SYS_ioctl];
        assert!(ioctl.contains(&rule(vec![cond(1, Len::Dword, Op::Eq, TIOCSTI).unwrap()]).unwrap()));
        assert!(
            ioctl.contains(&rule(vec![cond(1, Len::Dword, Op::Eq, TIOCLINUX).unwrap()]).unwrap())
        );
    }

    #[test]
    fn always_denied_syscalls_are_unconditional() {
        let r = build_seccomp_rules(true).unwrap();
        for nr in [
            libc::SYS_io_uring_setup,
            libc::SYS_ptrace,
            libc::SYS_process_vm_readv,
            libc::SYS_process_vm_writev,
        ] {
            assert!(r[&nr].is_empty(), "syscall {nr}");
        }
        assert_eq!(r[&libc::SYS_unshare].len(), 1);
    }

    #[test]
    fn programs_compile_with_the_abi_guard_first() {
        let progs = build_seccomp_programs(false).unwrap();
        assert_eq!(progs.len(), 1);
        let guard = build_abi_guard();
        let p = &progs[0];
        assert_eq!(&p[..guard.len()], &guard[..]);
        assert!(p.len() > guard.len() + 6);
        if cfg!(target_arch = "x86_64") {
            assert_eq!(guard[2].k, libc::SECCOMP_RET_KILL_PROCESS);
        }
        // After the guard: the architecture check, the number load, then clone3 -> ENOSYS.
        let at = guard.len() + 4;
        assert_eq!(p[at].k, libc::SYS_clone3 as u32);
        assert_eq!(p[at + 1].k, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32);
    }

    /// The installed program, in a forked child: clone3 fails with ENOSYS (so libc falls back to clone), a new user
    /// namespace through unshare and an AF_INET socket fail with EPERM, and a harmless unshare(0) still works.
    #[test]
    fn the_installed_program_denies_as_documented() {
        let progs = build_seccomp_programs(false).unwrap();
        // SAFETY: the child only makes raw system calls on data prepared before the fork, then _exits.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let errno = || std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            // SAFETY: plain system calls; the clone3 argument is a valid, zeroed clone_args of the size passed.
            let code = unsafe {
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                    || apply_seccomp(&progs).is_err()
                {
                    10
                } else {
                    let args = [0u64; 11];
                    let r = libc::syscall(
                        libc::SYS_clone3,
                        args.as_ptr(),
                        std::mem::size_of_val(&args),
                    );
                    if r != -1 || errno() != libc::ENOSYS {
                        if r == 0 {
                            libc::_exit(0);
                        }
                        11
                    } else if libc::unshare(libc::CLONE_NEWUSER) != -1 || errno() != libc::EPERM {
                        12
                    } else if libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) != -1
                        || errno() != libc::EPERM
                    {
                        13
                    } else if libc::unshare(0) != 0 {
                        14
                    } else {
                        0
                    }
                }
            };
            // SAFETY: leaving the forked child without running the parent's destructors.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status), "status {status}");
        assert_eq!(libc::WEXITSTATUS(status), 0, "failed check (see the code)");
    }
}
