//! The seccomp stage: pure rule construction (`build_seccomp_rules`), the program compiler
//! (`build_seccomp_programs`) and the applier (`apply_seccomp`).
//!
//! Denied (EPERM) for every sandbox: io_uring, ptrace and process_vm_*, ioctl TIOCSTI / TIOCLINUX (compared on the
//! low 32 bits, as the kernel does), new user namespaces through clone/unshare, open_by_handle_at, bpf,
//! perf_event_open, userfaultfd, the kernel keyring, setns, mount/umount/pivot_root and the new mount API
//! (open_tree, move_mount, fsopen, fsconfig, fsmount, fspick, mount_setattr), module/kexec loading, fanotify, and
//! calls no sandboxed command has a use for (modify_ldt, iopl/ioperm, uselib, _sysctl, acct, quotactl, swapon/swapoff,
//! syslog, vhangup, lookup_dcookie, reboot, sethostname/setdomainname, chroot, pidfd_getfd). Socket families are an
//! allowlist: with the network off AF_UNIX only; with it on AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK with
//! NETLINK_ROUTE only. When the command shares the host's namespaces (tier B: no IPC namespace, the host's mount
//! view), SysV IPC (shm*, msg*, sem*) and inotify are denied too (see [`SeccompPolicy`]). clone3 fails with ENOSYS
//! (its flags live in memory seccomp cannot read), so libc falls back to clone, whose flags are checked; so does every
//! syscall newer than [`NEWEST_ALLOWED_SYSCALL`] (libc falls back from ENOSYS; unknown new kernel surface stays
//! closed). All of it is one program (one filter to install per exec). Syscalls of a non-native ABI (x32, i386 on
//! x86_64) kill the process.
//!
//! The local model engine, which confines itself, gets tier B's program without the network and, besides, no exec
//! and no signal to another process ([`build_engine_rules`]), compiled the same way.
//!
//! The program finds a syscall's rules by binary search over the syscall numbers instead of comparing the number
//! with every listed syscall in turn: the kernel runs the program once per syscall number of each ABI when the
//! filter is installed (to learn which numbers are always allowed, so it can skip the filter for them), and every
//! such run walks about a dozen instructions instead of about seventy. The decisions are those of a linear program
//! compiled by seccompiler from the same rules (a test compares both on every syscall number, architecture and a
//! set of arguments).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use seccompiler::{sock_filter, BpfProgram};

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
const AF_INET: u64 = libc::AF_INET as u64;
const AF_INET6: u64 = libc::AF_INET6 as u64;
const AF_NETLINK: u64 = libc::AF_NETLINK as u64;
const NETLINK_ROUTE: u64 = libc::NETLINK_ROUTE as u64;
/// `ioctl` request pushing a byte into the terminal's input queue.
pub const TIOCSTI: u64 = 0x5412;
/// `ioctl` request for Linux console subcommands (including selection paste).
pub const TIOCLINUX: u64 = 0x541C;
const CLONE_NEWUSER: u64 = libc::CLONE_NEWUSER as u64;

/// How much of a (64-bit) syscall argument a check compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ArgWidth {
    /// The low 32 bits (an `int` argument, or what the kernel itself compares, as for ioctl requests).
    Low32,
    /// All 64 bits.
    Full64,
}

/// A comparison of one syscall argument (of the width the check names) with a constant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ArgOp {
    /// Equal to the value.
    Eq(u64),
    /// Not equal to the value.
    Ne(u64),
    /// `arg & mask == value & mask`.
    MaskedEq {
        /// The bits compared.
        mask: u64,
        /// Their expected value.
        value: u64,
    },
}

/// One check of a deny rule: argument `arg` (0–5) compared by `op`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ArgCheck {
    /// The argument's index (0–5).
    pub arg: u8,
    /// How much of it is compared.
    pub width: ArgWidth,
    /// The comparison.
    pub op: ArgOp,
}

impl ArgCheck {
    /// Argument `arg`'s low 32 bits compared by `op`.
    pub const fn low32(arg: u8, op: ArgOp) -> ArgCheck {
        ArgCheck {
            arg,
            width: ArgWidth::Low32,
            op,
        }
    }

    /// All 64 bits of argument `arg` compared by `op`.
    pub const fn full64(arg: u8, op: ArgOp) -> ArgCheck {
        ArgCheck {
            arg,
            width: ArgWidth::Full64,
            op,
        }
    }
}

/// A deny rule: the syscall fails with EPERM when every check holds.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct DenyRule(pub Vec<ArgCheck>);

/// What the program depends on besides the architecture: three bits, so at most eight programs per process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SeccompPolicy {
    /// The network is granted: inet, inet6 and route netlink sockets are allowed besides unix ones.
    pub network: bool,
    /// The command runs in the host's IPC namespace and mount view (tier B, which creates no namespaces): SysV IPC
    /// would reach other processes' shared memory, message queues and semaphores, and inotify would report names
    /// and activity in directories Landlock does not let it list, so both are denied. Tiers A and C have an IPC
    /// namespace and a view of their own, where both stay allowed.
    ///
    /// Tier B also closes here what Landlock does not mediate on the host's filesystem (see
    /// `coverage.rs`): `socket(AF_UNIX)` (so no `connect(2)` to the host's pathname or abstract unix
    /// sockets: D-Bus, ssh-agent, X11, docker; `socketpair` stays allowed), the metadata calls (`chmod`, `chown`,
    /// `utime*`, `*setxattr`, `*removexattr` and their fd/at variants, which Landlock does not check at all), and
    /// `setsid` (so every descendant stays in the command's session, which loom kills when the call ends).
    pub host_namespaces: bool,
    /// `truncate(2)` by path is denied: Landlock below ABI 3 does not mediate it (tier B on an old kernel).
    pub deny_truncate: bool,
}

impl SeccompPolicy {
    fn slot(self) -> usize {
        usize::from(self.network)
            | (usize::from(self.host_namespaces) << 1)
            | (usize::from(self.deny_truncate) << 2)
    }
}

/// The newest syscall number the program lets through (Linux 6.10's mseal, the same number on x86_64, aarch64 and
/// riscv64): anything newer fails with ENOSYS, as on an older kernel, so libc falls back and kernel surface loom does
/// not know about (e.g. `open_tree_attr`, `file_setattr`) stays closed.
pub const NEWEST_ALLOWED_SYSCALL: u32 = 462;

/// Syscalls denied unconditionally, in every sandbox.
fn always_denied() -> Vec<i64> {
    let mut v = vec![
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
        libc::SYS_kexec_file_load,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        // The new mount API: detached mounts and mount attribute changes.
        libc::SYS_open_tree,
        libc::SYS_move_mount,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_mount_setattr,
        // Whole-filesystem watches.
        libc::SYS_fanotify_init,
        libc::SYS_fanotify_mark,
        // Rarely legitimate: old or administrative interfaces no sandboxed command needs.
        libc::SYS_acct,
        libc::SYS_quotactl,
        libc::SYS_quotactl_fd,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_syslog,
        libc::SYS_vhangup,
        libc::SYS_lookup_dcookie,
        libc::SYS_reboot,
        libc::SYS_sethostname,
        libc::SYS_setdomainname,
        libc::SYS_chroot,
        libc::SYS_pidfd_getfd,
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([
        libc::SYS_modify_ldt,
        libc::SYS_iopl,
        libc::SYS_ioperm,
        libc::SYS_uselib,
        libc::SYS__sysctl,
    ]);
    v
}

/// Syscalls denied when the command shares the host's namespaces (see [`SeccompPolicy::host_namespaces`]).
fn host_namespace_denied() -> Vec<i64> {
    let mut v = vec![
        libc::SYS_shmget,
        libc::SYS_shmat,
        libc::SYS_shmctl,
        libc::SYS_msgget,
        libc::SYS_msgsnd,
        libc::SYS_msgrcv,
        libc::SYS_msgctl,
        libc::SYS_semget,
        libc::SYS_semop,
        libc::SYS_semtimedop,
        libc::SYS_semctl,
        libc::SYS_inotify_init1,
        libc::SYS_inotify_add_watch,
    ];
    #[cfg(target_arch = "x86_64")]
    v.push(libc::SYS_inotify_init);
    v
}

/// Metadata calls Landlock does not mediate (tier B denies them whatever the path; see
/// [`SeccompPolicy::host_namespaces`]). Their names, for messages and the enforcement table, are
/// [`METADATA_SYSCALLS`].
fn metadata_denied() -> Vec<i64> {
    let mut v = vec![
        libc::SYS_fchmod,
        libc::SYS_fchmodat,
        libc::SYS_fchmodat2,
        libc::SYS_fchown,
        libc::SYS_fchownat,
        libc::SYS_utimensat,
        libc::SYS_setxattr,
        libc::SYS_lsetxattr,
        libc::SYS_fsetxattr,
        libc::SYS_removexattr,
        libc::SYS_lremovexattr,
        libc::SYS_fremovexattr,
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([
        libc::SYS_chmod,
        libc::SYS_chown,
        libc::SYS_lchown,
        libc::SYS_utime,
        libc::SYS_utimes,
        libc::SYS_futimesat,
    ]);
    v
}

/// The metadata calls tier B denies (the union over architectures; newer ones such as `setxattrat` fail with
/// ENOSYS as every syscall after [`NEWEST_ALLOWED_SYSCALL`]).
pub const METADATA_SYSCALLS: [&str; 18] = [
    "chmod",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "chown",
    "lchown",
    "fchown",
    "fchownat",
    "utime",
    "utimes",
    "futimesat",
    "utimensat",
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
];

/// The EPERM rules: syscall number -> rules (any matching rule denies; an empty list denies unconditionally).
pub fn build_seccomp_rules(policy: SeccompPolicy) -> BTreeMap<i64, Vec<DenyRule>> {
    use ArgOp::{Eq, MaskedEq, Ne};
    let mut rules: BTreeMap<i64, Vec<DenyRule>> = BTreeMap::new();
    let socket = if policy.network {
        vec![
            // An allowlist: every family but these four ...
            DenyRule(vec![
                ArgCheck::low32(0, Ne(AF_UNIX)),
                ArgCheck::low32(0, Ne(AF_INET)),
                ArgCheck::low32(0, Ne(AF_INET6)),
                ArgCheck::low32(0, Ne(AF_NETLINK)),
            ]),
            // ... and of netlink, only the routing protocol.
            DenyRule(vec![
                ArgCheck::low32(0, Eq(AF_NETLINK)),
                ArgCheck::low32(2, Ne(NETLINK_ROUTE)),
            ]),
        ]
    } else {
        vec![DenyRule(vec![ArgCheck::low32(0, Ne(AF_UNIX))])]
    };
    if policy.host_namespaces {
        // Tier B: no unix socket can be created, so none can connect(2) to a path or an abstract name of the
        // host (Landlock below ABI 9 does not mediate pathname sockets). A connected pair has no address:
        // socketpair keeps AF_UNIX.
        let inet = if policy.network {
            let mut inet = socket.clone();
            if let Some(first) = inet.first_mut() {
                first.0.retain(|c| c.op != Ne(AF_UNIX));
            }
            inet
        } else {
            // an empty list: denied whatever the arguments
            Vec::new()
        };
        rules.insert(libc::SYS_socket, inet);
    } else {
        rules.insert(libc::SYS_socket, socket.clone());
    }
    rules.insert(libc::SYS_socketpair, socket);
    rules.insert(
        libc::SYS_ioctl,
        vec![
            DenyRule(vec![ArgCheck::low32(1, Eq(TIOCSTI))]),
            DenyRule(vec![ArgCheck::low32(1, Eq(TIOCLINUX))]),
        ],
    );
    let new_user = vec![DenyRule(vec![ArgCheck::full64(
        0,
        MaskedEq {
            mask: CLONE_NEWUSER,
            value: CLONE_NEWUSER,
        },
    )])];
    rules.insert(libc::SYS_clone, new_user.clone());
    rules.insert(libc::SYS_unshare, new_user);
    for nr in always_denied() {
        rules.insert(nr, Vec::new());
    }
    if policy.host_namespaces {
        for nr in host_namespace_denied().into_iter().chain(metadata_denied()) {
            rules.insert(nr, Vec::new());
        }
        rules.insert(libc::SYS_setsid, Vec::new());
    }
    if policy.deny_truncate {
        rules.insert(libc::SYS_truncate, Vec::new());
    }
    rules
}

// Classic BPF opcodes (linux/bpf_common.h) and `struct seccomp_data` offsets.
const LD_W_ABS: u16 = 0x20;
const JMP_JA: u16 = 0x05;
const JMP_JEQ_K: u16 = 0x15;
const JMP_JGE_K: u16 = 0x35;
const ALU_AND_K: u16 = 0x54;
const RET_K: u16 = 0x06;
const DATA_NR: u32 = 0;
const DATA_ARCH: u32 = 4;
const DATA_ARGS: u32 = 16;
/// Syscall numbers from here up are x32's on x86_64 (`__X32_SYSCALL_BIT`).
const X32_SYSCALL_BIT: u32 = 0x4000_0000;
const RET_ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const RET_KILL: u32 = libc::SECCOMP_RET_KILL_PROCESS;
const RET_EPERM: u32 = libc::SECCOMP_RET_ERRNO | (libc::EPERM as u32 & libc::SECCOMP_RET_DATA);
const RET_ENOSYS: u32 = libc::SECCOMP_RET_ERRNO | (libc::ENOSYS as u32 & libc::SECCOMP_RET_DATA);
/// At most this many syscall numbers are compared one by one at the end of a binary search.
const LINEAR_LEAF: usize = 3;

/// The native architecture's `AUDIT_ARCH_*` value (what `seccomp_data.arch` holds for a native syscall).
fn audit_arch() -> Result<u32, SeccompError> {
    // EM_* | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE (linux/audit.h)
    const ARCH64_LE: u32 = 0x8000_0000 | 0x4000_0000;
    match std::env::consts::ARCH {
        "x86_64" => Ok(62 | ARCH64_LE),
        "aarch64" => Ok(183 | ARCH64_LE),
        "riscv64" => Ok(243 | ARCH64_LE),
        other => Err(SeccompError::Build(format!(
            "no seccomp filter for the {other} architecture"
        ))),
    }
}

/// Offsets of the low and high 32-bit halves of syscall argument `arg` in `struct seccomp_data`.
fn arg_halves(arg: u8) -> Result<(u32, u32), SeccompError> {
    if arg > 5 {
        return Err(SeccompError::Build(format!("no syscall argument {arg}")));
    }
    let at = DATA_ARGS + 8 * u32::from(arg);
    Ok(if cfg!(target_endian = "little") {
        (at, at + 4)
    } else {
        (at + 4, at)
    })
}

/// A jump target while assembling: the next instruction, or a label bound later (always further on: classic BPF
/// only jumps forward).
#[derive(Clone, Copy)]
enum To {
    Next,
    Label(usize),
}

enum Insn {
    Stmt(sock_filter),
    Jump { code: u16, k: u32, jt: To, jf: To },
    Ja(usize),
}

/// A tiny assembler: instructions with symbolic forward jumps, resolved into offsets by [`Asm::finish`].
#[derive(Default)]
struct Asm {
    code: Vec<Insn>,
    labels: Vec<Option<usize>>,
}

impl Asm {
    fn label(&mut self) -> usize {
        self.labels.push(None);
        self.labels.len() - 1
    }

    fn bind(&mut self, label: usize) {
        if let Some(slot) = self.labels.get_mut(label) {
            *slot = Some(self.code.len());
        }
    }

    fn stmt(&mut self, code: u16, k: u32) {
        self.code.push(Insn::Stmt(sock_filter {
            code,
            jt: 0,
            jf: 0,
            k,
        }));
    }

    fn ret(&mut self, k: u32) {
        self.stmt(RET_K, k);
    }

    fn jump(&mut self, code: u16, k: u32, jt: To, jf: To) {
        self.code.push(Insn::Jump { code, k, jt, jf });
    }

    fn finish(self) -> Result<BpfProgram, SeccompError> {
        let offset = |from: usize, to: To| -> Result<usize, SeccompError> {
            match to {
                To::Next => Ok(0),
                To::Label(l) => self
                    .labels
                    .get(l)
                    .copied()
                    .flatten()
                    .and_then(|at| at.checked_sub(from + 1))
                    .ok_or_else(|| SeccompError::Build("a jump goes backwards or nowhere".into())),
            }
        };
        let short = |n: usize| {
            u8::try_from(n)
                .map_err(|_| SeccompError::Build("a conditional jump is too long".into()))
        };
        let mut out = Vec::with_capacity(self.code.len());
        for (at, insn) in self.code.iter().enumerate() {
            out.push(match *insn {
                Insn::Stmt(ref s) => s.clone(),
                Insn::Jump { code, k, jt, jf } => sock_filter {
                    code,
                    jt: short(offset(at, jt)?)?,
                    jf: short(offset(at, jf)?)?,
                    k,
                },
                Insn::Ja(l) => sock_filter {
                    code: JMP_JA,
                    jt: 0,
                    jf: 0,
                    k: u32::try_from(offset(at, To::Label(l))?)
                        .map_err(|_| SeccompError::Build("a jump is too long".into()))?,
                },
            });
        }
        if out.len() > usize::from(u16::MAX) || out.last().map(|i| i.code) != Some(RET_K) {
            return Err(SeccompError::Build("malformed program".into()));
        }
        Ok(out)
    }

    /// Jumps to `fail` unless `check` holds for the syscall's arguments (clobbers the accumulator).
    fn check(&mut self, check: &ArgCheck, fail: usize) -> Result<(), SeccompError> {
        let (lo_at, hi_at) = arg_halves(check.arg)?;
        let halves = |v: u64| (v as u32, (v >> 32) as u32);
        let fail = To::Label(fail);
        let full = check.width == ArgWidth::Full64;
        match check.op {
            ArgOp::Eq(v) => {
                let (lo, hi) = halves(v);
                if full {
                    self.stmt(LD_W_ABS, hi_at);
                    self.jump(JMP_JEQ_K, hi, To::Next, fail);
                }
                self.stmt(LD_W_ABS, lo_at);
                self.jump(JMP_JEQ_K, lo, To::Next, fail);
            }
            ArgOp::Ne(v) => {
                let (lo, hi) = halves(v);
                let holds = self.label();
                if full {
                    self.stmt(LD_W_ABS, hi_at);
                    self.jump(JMP_JEQ_K, hi, To::Next, To::Label(holds));
                }
                self.stmt(LD_W_ABS, lo_at);
                self.jump(JMP_JEQ_K, lo, fail, To::Next);
                self.bind(holds);
            }
            ArgOp::MaskedEq { mask, value } => {
                let (mask_lo, mask_hi) = halves(mask);
                let (lo, hi) = halves(value & mask);
                // With no high bits in the mask, the high half always matches.
                if full && mask_hi != 0 {
                    self.stmt(LD_W_ABS, hi_at);
                    self.stmt(ALU_AND_K, mask_hi);
                    self.jump(JMP_JEQ_K, hi, To::Next, fail);
                }
                self.stmt(LD_W_ABS, lo_at);
                self.stmt(ALU_AND_K, mask_lo);
                self.jump(JMP_JEQ_K, lo, To::Next, fail);
            }
        }
        Ok(())
    }

    /// A binary search for the loaded syscall number among `keys` (sorted), jumping to the key's block, or to
    /// `allow` when it is none of them.
    fn search(&mut self, keys: &[(u32, usize)], allow: usize) {
        if keys.len() <= LINEAR_LEAF {
            for (i, (nr, block)) in keys.iter().enumerate() {
                let miss = if i + 1 == keys.len() {
                    To::Label(allow)
                } else {
                    To::Next
                };
                self.jump(JMP_JEQ_K, *nr, To::Label(*block), miss);
            }
            if keys.is_empty() {
                self.code.push(Insn::Ja(allow));
            }
            return;
        }
        let mid = keys.len() / 2;
        let upper = self.label();
        self.jump(JMP_JGE_K, keys[mid].0, To::Label(upper), To::Next);
        self.search(&keys[..mid], allow);
        self.bind(upper);
        self.search(&keys[mid..], allow);
    }
}

/// What the program does for one listed syscall.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Block {
    /// clone3: ENOSYS, so libc falls back to clone.
    NoSys,
    /// EPERM when a rule matches (always, for an empty list).
    Deny(Vec<DenyRule>),
}

/// The x32 guard: instructions placed before the architecture check. On x86_64, any syscall number with bit 30 set
/// (x32's), which the architecture check alone lets through, kills the process. Empty elsewhere.
pub fn build_abi_guard() -> Vec<sock_filter> {
    if cfg!(target_arch = "x86_64") {
        vec![
            sock_filter {
                code: LD_W_ABS,
                jt: 0,
                jf: 0,
                k: DATA_NR,
            },
            sock_filter {
                code: JMP_JGE_K,
                jt: 0,
                jf: 1,
                k: X32_SYSCALL_BIT,
            },
            sock_filter {
                code: RET_K,
                jt: 0,
                jf: 0,
                k: RET_KILL,
            },
        ]
    } else {
        Vec::new()
    }
}

/// The program to install: the x32 guard ([`build_abi_guard`]), the architecture check (a foreign architecture,
/// e.g. i386 on x86_64, kills the process), ENOSYS for every syscall newer than [`NEWEST_ALLOWED_SYSCALL`], then a
/// binary search over the syscall numbers that have rules: clone3 -> ENOSYS, and the EPERM deny list of
/// [`build_seccomp_rules`]; everything else is allowed. One program rather than a deny program plus a separate
/// clone3 program, so the kernel checks, converts and JIT-compiles one filter per exec.
pub fn build_seccomp_programs(policy: SeccompPolicy) -> Result<Vec<BpfProgram>, SeccompError> {
    compile_rules(build_seccomp_rules(policy))
}

/// The EPERM rules of the local model engine ([`crate::confine_engine`]): tier B's rules without the network (no
/// socket of any family, SysV IPC, inotify, the metadata calls, `setsid`, `truncate`), and besides them what a
/// process that only computes never needs: `execve` and `execveat`, and signalling any process but itself (`kill`,
/// `tkill`, `rt_sigqueueinfo`, `pidfd_send_signal` denied outright; `tgkill` and `rt_tgsigqueueinfo` unless the
/// target is the engine `pid`, as `raise` and `abort` do), and any process of its own: `fork` and `vfork` denied,
/// `clone` without `CLONE_THREAD` denied (threads stay possible), so nothing it starts escapes the parent-death
/// signal loom gave it ([`crate::spawn_tied`]), which `prctl(PR_SET_PDEATHSIG)` cannot clear either.
pub fn build_engine_rules(pid: u32) -> BTreeMap<i64, Vec<DenyRule>> {
    let mut rules = build_seccomp_rules(SeccompPolicy {
        network: false,
        host_namespaces: true,
        deny_truncate: true,
    });
    for nr in [
        libc::SYS_execve,
        libc::SYS_execveat,
        libc::SYS_kill,
        libc::SYS_tkill,
        libc::SYS_rt_sigqueueinfo,
        libc::SYS_pidfd_send_signal,
        libc::SYS_fork,
        libc::SYS_vfork,
    ] {
        rules.insert(nr, Vec::new());
    }
    let not_self = vec![DenyRule(vec![ArgCheck::low32(
        0,
        ArgOp::Ne(u64::from(pid)),
    )])];
    rules.insert(libc::SYS_tgkill, not_self.clone());
    rules.insert(libc::SYS_rt_tgsigqueueinfo, not_self);
    rules
        .entry(libc::SYS_clone)
        .or_default()
        .push(DenyRule(vec![ArgCheck::low32(
            0,
            ArgOp::MaskedEq {
                mask: libc::CLONE_THREAD as u64,
                value: 0,
            },
        )]));
    rules.insert(
        libc::SYS_prctl,
        vec![DenyRule(vec![ArgCheck::low32(
            0,
            ArgOp::Eq(libc::PR_SET_PDEATHSIG as u64),
        )])],
    );
    rules
}

/// The program for `rules` ([`build_seccomp_programs`] describes its shape).
pub(crate) fn compile_rules(
    rules: BTreeMap<i64, Vec<DenyRule>>,
) -> Result<Vec<BpfProgram>, SeccompError> {
    let arch = audit_arch()?;
    let mut listed: BTreeMap<u32, Block> = BTreeMap::new();
    let number = |nr: i64| {
        u32::try_from(nr).map_err(|_| SeccompError::Build(format!("syscall number {nr}")))
    };
    for (nr, rules) in rules {
        listed.insert(number(nr)?, Block::Deny(rules));
    }
    listed.insert(number(libc::SYS_clone3)?, Block::NoSys);

    let mut asm = Asm::default();
    for insn in build_abi_guard() {
        asm.code.push(Insn::Stmt(insn));
    }
    let native = asm.label();
    asm.stmt(LD_W_ABS, DATA_ARCH);
    asm.jump(JMP_JEQ_K, arch, To::Label(native), To::Next);
    asm.ret(RET_KILL);
    asm.bind(native);
    asm.stmt(LD_W_ABS, DATA_NR);
    let known = asm.label();
    asm.jump(
        JMP_JGE_K,
        NEWEST_ALLOWED_SYSCALL + 1,
        To::Next,
        To::Label(known),
    );
    asm.ret(RET_ENOSYS);
    asm.bind(known);
    // One block per distinct action (socket and socketpair share one, as do clone and unshare).
    let mut blocks: BTreeMap<&Block, usize> = BTreeMap::new();
    let mut keys = Vec::with_capacity(listed.len());
    for (nr, block) in &listed {
        let label = match blocks.get(block) {
            Some(l) => *l,
            None => {
                let l = asm.label();
                blocks.insert(block, l);
                l
            }
        };
        keys.push((*nr, label));
    }
    let allow = asm.label();
    asm.search(&keys, allow);
    for (block, label) in blocks {
        asm.bind(label);
        match block {
            Block::NoSys => asm.ret(RET_ENOSYS),
            Block::Deny(rules) if rules.is_empty() => asm.ret(RET_EPERM),
            Block::Deny(rules) => {
                for rule in rules {
                    let next_rule = asm.label();
                    for check in &rule.0 {
                        asm.check(check, next_rule)?;
                    }
                    asm.ret(RET_EPERM);
                    asm.bind(next_rule);
                }
                asm.ret(RET_ALLOW);
            }
        }
    }
    asm.bind(allow);
    asm.ret(RET_ALLOW);
    Ok(vec![asm.finish()?])
}

/// The programs of [`build_seccomp_programs`] for `policy`, compiled once per process (they depend on nothing
/// else: the rules are constants and the architecture is this binary's).
pub(crate) fn seccomp_programs(
    policy: SeccompPolicy,
) -> Result<&'static [BpfProgram], SeccompError> {
    static PROGRAMS: [OnceLock<Result<Vec<BpfProgram>, String>>; 8] = [
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
    ];
    let slot = &PROGRAMS[policy.slot()];
    match slot.get_or_init(|| build_seccomp_programs(policy).map_err(|e| e.to_string())) {
        Ok(p) => Ok(p),
        Err(e) => Err(SeccompError::Build(e.clone())),
    }
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
    use ArgOp::{Eq, MaskedEq, Ne};

    const AF_PACKET: u64 = libc::AF_PACKET as u64;
    const AF_VSOCK: u64 = libc::AF_VSOCK as u64;

    const fn policy(network: bool, host_namespaces: bool, deny_truncate: bool) -> SeccompPolicy {
        SeccompPolicy {
            network,
            host_namespaces,
            deny_truncate,
        }
    }

    /// Every policy: network off/on, own namespaces / the host's, truncate allowed / denied.
    const POLICIES: [SeccompPolicy; 8] = [
        policy(false, false, false),
        policy(true, false, false),
        policy(false, true, false),
        policy(true, true, false),
        policy(false, false, true),
        policy(true, false, true),
        policy(false, true, true),
        policy(true, true, true),
    ];

    fn net(network: bool) -> SeccompPolicy {
        policy(network, false, false)
    }

    /// Tier B (the host's namespaces): no unix socket can be created (so none connects to a host socket), a pair
    /// can; the metadata calls and setsid are denied; truncate only when asked.
    #[test]
    fn tier_b_denies_unix_sockets_metadata_and_setsid() {
        let native = audit_arch().unwrap();
        for network in [false, true] {
            let p = policy(network, true, false);
            let prog = &build_seccomp_programs(p).unwrap()[0];
            let run = |nr: i64, args: [u64; 6]| eval(prog, nr as u32, native, args).0;
            assert_eq!(run(libc::SYS_socket, [AF_UNIX, 1, 0, 0, 0, 0]), RET_EPERM);
            assert_eq!(
                run(libc::SYS_socketpair, [AF_UNIX, 1, 0, 0, 0, 0]),
                RET_ALLOW
            );
            assert_eq!(
                run(libc::SYS_socket, [AF_INET, 1, 0, 0, 0, 0]),
                if network { RET_ALLOW } else { RET_EPERM }
            );
            for nr in metadata_denied() {
                assert_eq!(run(nr, [0; 6]), RET_EPERM, "nr {nr}");
            }
            assert_eq!(run(libc::SYS_setsid, [0; 6]), RET_EPERM);
            assert_eq!(run(libc::SYS_setpgid, [0; 6]), RET_ALLOW);
            assert_eq!(run(libc::SYS_truncate, [0; 6]), RET_ALLOW);
            let old = &build_seccomp_programs(policy(network, true, true)).unwrap()[0];
            assert_eq!(
                eval(old, libc::SYS_truncate as u32, native, [0; 6]).0,
                RET_EPERM
            );
            assert_eq!(
                eval(old, libc::SYS_ftruncate as u32, native, [0; 6]).0,
                RET_ALLOW
            );
            // Tiers A and C keep all of it.
            let view = &build_seccomp_programs(policy(network, false, false)).unwrap()[0];
            for nr in [libc::SYS_fchmodat, libc::SYS_setsid, libc::SYS_fsetxattr] {
                assert_eq!(eval(view, nr as u32, native, [0; 6]).0, RET_ALLOW);
            }
            assert_eq!(
                eval(
                    view,
                    libc::SYS_socket as u32,
                    native,
                    [AF_UNIX, 1, 0, 0, 0, 0]
                )
                .0,
                RET_ALLOW
            );
        }
        assert!(METADATA_SYSCALLS.len() >= metadata_denied().len());
    }

    /// The engine's program: no socket, no exec, no signal but to itself; what computing needs stays allowed.
    #[test]
    fn the_engine_program_leaves_computing_and_signalling_itself() {
        let native = audit_arch().unwrap();
        let me = 4242u64;
        let prog = &compile_rules(build_engine_rules(4242)).unwrap()[0];
        let run = |nr: i64, args: [u64; 6]| eval(prog, nr as u32, native, args).0;
        for family in [AF_UNIX, AF_INET, AF_INET6, AF_NETLINK] {
            assert_eq!(run(libc::SYS_socket, [family, 1, 0, 0, 0, 0]), RET_EPERM);
        }
        for nr in [
            libc::SYS_execve,
            libc::SYS_execveat,
            libc::SYS_kill,
            libc::SYS_tkill,
            libc::SYS_rt_sigqueueinfo,
            libc::SYS_pidfd_send_signal,
            libc::SYS_ptrace,
            libc::SYS_setsid,
            libc::SYS_truncate,
            libc::SYS_fchmodat,
        ] {
            assert_eq!(run(nr, [me, 0, 0, 0, 0, 0]), RET_EPERM, "nr {nr}");
        }
        for nr in [libc::SYS_tgkill, libc::SYS_rt_tgsigqueueinfo] {
            assert_eq!(run(nr, [me, me, 6, 0, 0, 0]), RET_ALLOW, "nr {nr}");
            assert_eq!(run(nr, [me + 1, me + 1, 9, 0, 0, 0]), RET_EPERM, "nr {nr}");
            // the pid is compared on its low 32 bits, as the kernel reads an int
            assert_eq!(
                run(nr, [me | 1 << 32, me, 6, 0, 0, 0]),
                RET_ALLOW,
                "nr {nr}"
            );
        }
        for nr in [
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_mmap,
            libc::SYS_munmap,
            libc::SYS_futex,
            libc::SYS_openat,
            libc::SYS_sched_yield,
        ] {
            assert_eq!(run(nr, [0; 6]), RET_ALLOW, "nr {nr}");
        }
        // threads: clone without namespace flags, clone3 falling back to it
        let thread = (libc::CLONE_VM | libc::CLONE_THREAD | libc::CLONE_SIGHAND) as u64;
        assert_eq!(run(libc::SYS_clone, [thread, 0, 0, 0, 0, 0]), RET_ALLOW);
        assert_eq!(run(libc::SYS_clone3, [0; 6]), RET_ENOSYS);
        // but no process: fork, vfork, and clone as glibc's fork and posix_spawn call it
        for nr in [libc::SYS_fork, libc::SYS_vfork] {
            assert_eq!(run(nr, [0; 6]), RET_EPERM, "nr {nr}");
        }
        let fork =
            (libc::CLONE_CHILD_SETTID | libc::CLONE_CHILD_CLEARTID) as u64 | libc::SIGCHLD as u64;
        let spawn = (libc::CLONE_VM | libc::CLONE_VFORK) as u64 | libc::SIGCHLD as u64;
        for flags in [fork, spawn, thread | libc::CLONE_NEWUSER as u64] {
            assert_eq!(
                run(libc::SYS_clone, [flags, 0, 0, 0, 0, 0]),
                RET_EPERM,
                "{flags:#x}"
            );
        }
        // and its parent-death signal stays; other prctl calls (thread names) work
        assert_eq!(
            run(
                libc::SYS_prctl,
                [libc::PR_SET_PDEATHSIG as u64, 0, 0, 0, 0, 0]
            ),
            RET_EPERM
        );
        assert_eq!(
            run(libc::SYS_prctl, [libc::PR_SET_NAME as u64, 0, 0, 0, 0, 0]),
            RET_ALLOW
        );
        // tier B's own rules are unchanged by the engine's
        let tier_b = &compile_rules(build_seccomp_rules(SeccompPolicy {
            network: false,
            host_namespaces: true,
            deny_truncate: true,
        }))
        .unwrap()[0];
        assert_eq!(
            eval(
                tier_b,
                libc::SYS_clone as u32,
                native,
                [fork, 0, 0, 0, 0, 0]
            )
            .0,
            RET_ALLOW
        );
    }

    #[test]
    fn network_off_denies_every_family_but_unix() {
        let r = build_seccomp_rules(net(false));
        assert_eq!(
            r[&libc::SYS_socket],
            [DenyRule(vec![ArgCheck::low32(0, Ne(AF_UNIX))])]
        );
        assert_eq!(r[&libc::SYS_socketpair], r[&libc::SYS_socket]);
    }

    #[test]
    fn network_on_allows_only_unix_inet_inet6_and_route_netlink() {
        let r = build_seccomp_rules(net(true));
        let socket = &r[&libc::SYS_socket];
        assert_eq!(socket.len(), 2);
        assert!(socket.contains(&DenyRule(vec![
            ArgCheck::low32(0, Ne(AF_UNIX)),
            ArgCheck::low32(0, Ne(AF_INET)),
            ArgCheck::low32(0, Ne(AF_INET6)),
            ArgCheck::low32(0, Ne(AF_NETLINK)),
        ])));
        assert!(socket.contains(&DenyRule(vec![
            ArgCheck::low32(0, Eq(AF_NETLINK)),
            ArgCheck::low32(2, Ne(NETLINK_ROUTE)),
        ])));
        // What the program decides, per family (AF_ALG, AF_TIPC, AF_RDS, AF_CAN, AF_BLUETOOTH, ... are denied).
        let prog = &build_seccomp_programs(net(true)).unwrap()[0];
        let native = audit_arch().unwrap();
        let socket_nr = libc::SYS_socket as u32;
        for family in 0..64u64 {
            let allowed = [AF_UNIX, AF_INET, AF_INET6, AF_NETLINK].contains(&family);
            let (action, _) = eval(prog, socket_nr, native, [family, 1, 0, 0, 0, 0]);
            assert_eq!(action == RET_ALLOW, allowed, "family {family}");
        }
        let netlink = |proto: u64| eval(prog, socket_nr, native, [AF_NETLINK, 3, proto, 0, 0, 0]).0;
        assert_eq!(netlink(NETLINK_ROUTE), RET_ALLOW);
        assert_eq!(netlink(libc::NETLINK_AUDIT as u64), RET_EPERM);
        // The family is an int: high bits do not smuggle a denied one past the allowlist.
        let (action, _) = eval(
            prog,
            socket_nr,
            native,
            [AF_VSOCK | (1 << 32), 1, 0, 0, 0, 0],
        );
        assert_eq!(action, RET_EPERM);
    }

    /// SysV IPC and inotify are denied only where the command shares the host's namespaces (tier B); the rarely
    /// legitimate calls and the new mount API everywhere.
    #[test]
    fn host_namespaces_add_sysv_ipc_and_inotify_and_rare_calls_are_denied_everywhere() {
        let native = audit_arch().unwrap();
        let sysv = [
            libc::SYS_shmget,
            libc::SYS_shmat,
            libc::SYS_shmctl,
            libc::SYS_msgget,
            libc::SYS_msgsnd,
            libc::SYS_msgrcv,
            libc::SYS_msgctl,
            libc::SYS_semget,
            libc::SYS_semop,
            libc::SYS_semtimedop,
            libc::SYS_semctl,
            libc::SYS_inotify_init1,
            libc::SYS_inotify_add_watch,
        ];
        let rare = [
            libc::SYS_open_tree,
            libc::SYS_move_mount,
            libc::SYS_fsopen,
            libc::SYS_fsconfig,
            libc::SYS_fsmount,
            libc::SYS_fspick,
            libc::SYS_mount_setattr,
            libc::SYS_fanotify_init,
            libc::SYS_acct,
            libc::SYS_quotactl,
            libc::SYS_swapon,
            libc::SYS_swapoff,
            libc::SYS_syslog,
            libc::SYS_vhangup,
            libc::SYS_kexec_file_load,
        ];
        for policy in POLICIES {
            let prog = &build_seccomp_programs(policy).unwrap()[0];
            let action = |nr: i64| eval(prog, nr as u32, native, [0; 6]).0;
            for nr in sysv {
                let want = if policy.host_namespaces {
                    RET_EPERM
                } else {
                    RET_ALLOW
                };
                assert_eq!(action(nr), want, "{policy:?} nr {nr}");
            }
            for nr in rare {
                assert_eq!(action(nr), RET_EPERM, "{policy:?} nr {nr}");
            }
            #[cfg(target_arch = "x86_64")]
            for nr in [
                libc::SYS_modify_ldt,
                libc::SYS_iopl,
                libc::SYS_ioperm,
                libc::SYS_uselib,
            ] {
                assert_eq!(action(nr), RET_EPERM, "{policy:?} nr {nr}");
            }
            // Syscalls newer than the last one loom knows fail as on an older kernel; the newest known one runs.
            assert_eq!(action(i64::from(NEWEST_ALLOWED_SYSCALL)), RET_ALLOW);
            for nr in [
                NEWEST_ALLOWED_SYSCALL + 1,
                467,
                469,
                1023,
                X32_SYSCALL_BIT - 1,
            ] {
                assert_eq!(eval(prog, nr, native, [0; 6]).0, RET_ENOSYS, "nr {nr}");
            }
        }
    }

    #[test]
    fn terminal_injection_is_matched_on_the_low_32_bits() {
        let r = build_seccomp_rules(net(false));
        let ioctl = &r[&libc::SYS_ioctl];
        assert!(ioctl.contains(&DenyRule(vec![ArgCheck::low32(1, Eq(TIOCSTI))])));
        assert!(ioctl.contains(&DenyRule(vec![ArgCheck::low32(1, Eq(TIOCLINUX))])));
    }

    #[test]
    fn always_denied_syscalls_are_unconditional() {
        let r = build_seccomp_rules(net(true));
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

    /// A classic-BPF interpreter for the instructions seccomp programs use here: runs `prog` on a `seccomp_data`
    /// and returns the action and how many instructions it executed. Panics on anything else (an instruction the
    /// compiler should not emit, a jump out of the program, running off its end).
    fn eval(prog: &[sock_filter], nr: u32, arch: u32, args: [u64; 6]) -> (u32, usize) {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&nr.to_ne_bytes());
        data[4..8].copy_from_slice(&arch.to_ne_bytes());
        for (i, a) in args.iter().enumerate() {
            data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_ne_bytes());
        }
        let (mut pc, mut acc, mut steps) = (0usize, 0u32, 0usize);
        loop {
            let i = &prog[pc];
            steps += 1;
            pc += 1;
            match i.code {
                LD_W_ABS => {
                    let k = i.k as usize;
                    assert!(k.is_multiple_of(4) && k + 4 <= data.len(), "load at {k}");
                    acc = u32::from_ne_bytes(data[k..k + 4].try_into().unwrap());
                }
                ALU_AND_K => acc &= i.k,
                JMP_JA => pc += i.k as usize,
                JMP_JEQ_K | JMP_JGE_K | 0x25 | 0x45 => {
                    let taken = match i.code {
                        JMP_JEQ_K => acc == i.k,
                        JMP_JGE_K => acc >= i.k,
                        0x25 => acc > i.k,
                        _ => acc & i.k != 0,
                    };
                    pc += usize::from(if taken { i.jt } else { i.jf });
                }
                RET_K => return (i.k, steps),
                other => panic!("unexpected instruction {other:#x}"),
            }
        }
    }

    /// The program before the binary search: seccompiler's linear chain for the same rules, the x32 guard in front
    /// and, after the architecture check and the syscall-number load, ENOSYS for syscalls newer than
    /// [`NEWEST_ALLOWED_SYSCALL`] and for clone3 spliced in.
    fn seccompiler_program(policy: SeccompPolicy) -> BpfProgram {
        use seccompiler::{
            SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op, SeccompCondition,
            SeccompFilter, SeccompRule,
        };
        let rules = build_seccomp_rules(policy)
            .into_iter()
            .map(|(nr, rules)| {
                let rules = rules
                    .into_iter()
                    .map(|DenyRule(checks)| {
                        let conds = checks
                            .into_iter()
                            .map(|c| {
                                let len = match c.width {
                                    ArgWidth::Low32 => Len::Dword,
                                    ArgWidth::Full64 => Len::Qword,
                                };
                                let (op, value) = match c.op {
                                    Eq(v) => (Op::Eq, v),
                                    Ne(v) => (Op::Ne, v),
                                    MaskedEq { mask, value } => (Op::MaskedEq(mask), value),
                                };
                                SeccompCondition::new(c.arg, len, op, value).unwrap()
                            })
                            .collect();
                        SeccompRule::new(conds).unwrap()
                    })
                    .collect();
                (nr, rules)
            })
            .collect();
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EPERM as u32),
            std::env::consts::ARCH.try_into().unwrap(),
        )
        .unwrap();
        let compiled: BpfProgram = filter.try_into().unwrap();
        // seccompiler's layout: ld arch; jeq arch, 1, 0; ret KILL_PROCESS; ld nr; <syscall chains>
        assert_eq!(compiled[3].code, LD_W_ABS);
        assert_eq!(compiled[3].k, DATA_NR);
        let mut prog = build_abi_guard();
        prog.extend_from_slice(&compiled[..4]);
        prog.push(sock_filter {
            code: 0x25, // jgt
            jt: 0,
            jf: 1,
            k: NEWEST_ALLOWED_SYSCALL,
        });
        prog.push(sock_filter {
            code: RET_K,
            jt: 0,
            jf: 0,
            k: RET_ENOSYS,
        });
        prog.push(sock_filter {
            code: JMP_JEQ_K,
            jt: 0,
            jf: 1,
            k: libc::SYS_clone3 as u32,
        });
        prog.push(sock_filter {
            code: RET_K,
            jt: 0,
            jf: 0,
            k: RET_ENOSYS,
        });
        prog.extend_from_slice(&compiled[4..]);
        prog
    }

    /// Argument vectors that exercise every check: each interesting value in each argument position, the netlink
    /// family with each protocol, high bits set above a matching low half, and pseudo-random vectors.
    fn argument_vectors() -> Vec<[u64; 6]> {
        let interesting: Vec<u64> = [
            0,
            1,
            2,
            AF_UNIX,
            AF_INET,
            AF_INET6,
            AF_NETLINK,
            AF_PACKET,
            AF_VSOCK,
            libc::AF_ALG as u64,
            libc::AF_TIPC as u64,
            NETLINK_ROUTE,
            libc::NETLINK_AUDIT as u64,
            TIOCSTI,
            TIOCLINUX,
            0x5413,
            CLONE_NEWUSER,
            CLONE_NEWUSER | libc::SIGCHLD as u64,
            u64::from(u32::MAX),
            u64::MAX,
        ]
        .into_iter()
        .flat_map(|v| [v, v | (1 << 32), v | (0xffff_ffff << 32)])
        .collect();
        let mut out = vec![[0u64; 6]];
        for &v in &interesting {
            for pos in 0..6 {
                let mut a = [0u64; 6];
                a[pos] = v;
                out.push(a);
            }
        }
        for &proto in &interesting {
            out.push([AF_NETLINK, 0, proto, 0, 0, 0]);
        }
        // xorshift64*: deterministic, mixing the interesting values with random bits.
        let mut s: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            s.wrapping_mul(0x2545_F491_4F6C_DD1D)
        };
        for _ in 0..64 {
            let mut a = [0u64; 6];
            for slot in &mut a {
                let r = next();
                *slot = if r & 1 == 0 {
                    interesting[(r >> 8) as usize % interesting.len()]
                } else {
                    r
                };
            }
            out.push(a);
        }
        out
    }

    /// The binary-search program decides exactly as the linear one did: same action for every syscall number
    /// 0..=1023, the x32 range and the extremes, under the native architecture and foreign ones, for every argument
    /// vector of [`argument_vectors`].
    #[test]
    fn the_binary_search_program_decides_as_the_linear_one() {
        let native = audit_arch().unwrap();
        let arches = [native, 0x4000_0003, 0xC000_00B7, 0xC000_003E, 0, u32::MAX];
        let mut numbers: Vec<u32> = (0..=1023).collect();
        numbers.extend((0..=600).map(|n| X32_SYSCALL_BIT + n));
        numbers.extend([
            0x3fff_ffff,
            0x7fff_ffff,
            0x8000_0000,
            u32::MAX - 1,
            u32::MAX,
        ]);
        let vectors = argument_vectors();
        for policy in POLICIES {
            let rules = build_seccomp_rules(policy);
            let old = seccompiler_program(policy);
            let new = build_seccomp_programs(policy).unwrap().remove(0);
            assert!(new.len() < old.len(), "{} vs {}", new.len(), old.len());
            let mut denied = 0;
            for &arch in &arches {
                for &nr in &numbers {
                    // Arguments only matter for a syscall with rules: all vectors there, two elsewhere.
                    let conditional =
                        arch == native && rules.get(&i64::from(nr)).is_some_and(|r| !r.is_empty());
                    let some = [[0; 6], vectors[vectors.len() - 1]];
                    for args in if conditional { &vectors[..] } else { &some[..] } {
                        let (want, _) = eval(&old, nr, arch, *args);
                        let (got, _) = eval(&new, nr, arch, *args);
                        assert_eq!(
                            got, want,
                            "{policy:?}, arch {arch:#x}, nr {nr}, args {args:x?}"
                        );
                        if got != RET_ALLOW {
                            denied += 1;
                        }
                    }
                }
            }
            // The comparison saw denials of every kind (not two programs that allow everything).
            assert!(denied > 1000, "{denied}");
            for (nr, arch, args, action) in [
                (libc::SYS_clone3 as u32, native, [0; 6], RET_ENOSYS),
                (libc::SYS_ptrace as u32, native, [0; 6], RET_EPERM),
                (libc::SYS_getpid as u32, native, [0; 6], RET_ALLOW),
                (libc::SYS_getpid as u32, 0x4000_0003, [0; 6], RET_KILL),
                (
                    libc::SYS_ioctl as u32,
                    native,
                    [0, TIOCSTI | (1 << 32), 0, 0, 0, 0],
                    RET_EPERM,
                ),
                (
                    libc::SYS_unshare as u32,
                    native,
                    [CLONE_NEWUSER, 0, 0, 0, 0, 0],
                    RET_EPERM,
                ),
            ] {
                assert_eq!(eval(&new, nr, arch, args).0, action, "nr {nr}");
            }
            if cfg!(target_arch = "x86_64") {
                assert_eq!(eval(&new, X32_SYSCALL_BIT + 39, native, [0; 6]).0, RET_KILL);
            }
        }
    }

    /// What makes the program cheap to install: for a syscall without rules, the kernel's emulation (which it runs
    /// for every syscall number at install time) reaches ALLOW through a short path of number and architecture
    /// loads only, so the number is cached as always allowed.
    #[test]
    fn an_unlisted_syscall_is_allowed_on_a_short_constant_path() {
        let native = audit_arch().unwrap();
        for policy in POLICIES {
            let rules = build_seccomp_rules(policy);
            let prog = &build_seccomp_programs(policy).unwrap()[0];
            let old = seccompiler_program(policy);
            let (mut longest, mut old_longest) = (0, 0);
            for nr in 0..=NEWEST_ALLOWED_SYSCALL {
                if nr == libc::SYS_clone3 as u32 || rules.contains_key(&i64::from(nr)) {
                    continue;
                }
                // Arguments that no check would look at without loading them: ALLOW with any.
                let (action, steps) = eval(prog, nr, native, [u64::MAX; 6]);
                assert_eq!(action, RET_ALLOW, "nr {nr}");
                assert_eq!(eval(prog, nr, native, [0; 6]), (action, steps), "nr {nr}");
                longest = longest.max(steps);
                old_longest = old_longest.max(eval(&old, nr, native, [0; 6]).1);
            }
            assert!(longest <= 16, "{longest} instructions");
            assert!(old_longest > 4 * longest, "{old_longest} vs {longest}");
        }
    }

    #[test]
    fn programs_start_with_the_abi_guard_and_are_cached() {
        let progs = build_seccomp_programs(net(false)).unwrap();
        assert_eq!(progs.len(), 1);
        let guard = build_abi_guard();
        assert_eq!(&progs[0][..guard.len()], &guard[..]);
        if cfg!(target_arch = "x86_64") {
            assert_eq!(guard[2].k, libc::SECCOMP_RET_KILL_PROCESS);
        }
        for policy in POLICIES {
            let cached = seccomp_programs(policy).unwrap();
            assert_eq!(cached, &build_seccomp_programs(policy).unwrap()[..]);
            assert!(std::ptr::eq(cached, seccomp_programs(policy).unwrap()));
        }
        for (i, a) in POLICIES.iter().enumerate() {
            for b in &POLICIES[i + 1..] {
                assert_ne!(seccomp_programs(*a).unwrap(), seccomp_programs(*b).unwrap());
            }
        }
    }

    /// The installed program, in a forked child: clone3 fails with ENOSYS (so libc falls back to clone), a new user
    /// namespace through unshare and an AF_INET socket fail with EPERM, and a harmless unshare(0) still works.
    #[test]
    fn the_installed_program_denies_as_documented() {
        let progs = build_seccomp_programs(net(false)).unwrap();
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
