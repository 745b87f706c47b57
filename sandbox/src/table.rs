//! The "What is enforced, and by what" table of SECURITY.md, rendered from the data the sandbox itself uses: the
//! rows about what Landlock does not always withhold come from [`crate::coverage`] (the same decision tier B takes
//! at spawn, evaluated at old and new Landlock ABIs), the metadata syscalls from the seccomp rules; the other rows
//! are fixed text kept here, beside the code, rather than in the document. `loom doctor --table` prints it, and a
//! test fails when SECURITY.md's copy differs.

use crate::coverage::{tier_b_rights, By, Right};
use crate::seccomp::METADATA_SYSCALLS;

/// Rows that no decision function computes: threat, tier A, tier B, tier C (an empty cell continues the one before).
const FIXED: &[[&str; 4]] = &[
    [
        r#"Writes outside `paths` (plain, `O_TRUNC`, through a symlink, via `/proc/self/root`, hard links, rename)"#,
        r#"read-only binds (EROFS) + Landlock"#,
        r#"Landlock"#,
        r#"read-only binds"#,
    ],
    [
        r#"Reads outside roots and system dirs (`~/.ssh`, other projects)"#,
        r#"not in the view (private tmpfs over home, `/tmp`, `/run`, `/var/tmp`) + Landlock"#,
        r#"Landlock"#,
        r#"not in the view"#,
    ],
    [
        r#"System dirs (`/usr`, `/etc`, `/bin`, `/lib*`, `/opt`)"#,
        r#"read-only binds + Landlock read rules"#,
        r#"Landlock read rules"#,
        r#"read-only binds"#,
    ],
    [
        r#"Protected names inside writable roots and the home directory (`.git`, `.loom`, `.mcp.json`, shell start-up files, `.gitconfig`, `.config/git`, `.ssh`, `.config/autostart`, `.config/systemd`, `.config/loom`, `.local/bin`, `.npmrc`, `.pypirc`, `.netrc`, `.envrc`, `.vscode`, `.idea`, `.claude`, `.agents`, `.cargo/config.toml`; `loom doctor` lists them), a nested repository's `.git`, and the agent's authority files"#,
        r#"re-bound read-only; the directories between them and their root re-bound onto themselves so they cannot be renamed or removed (EBUSY)"#,
        r#"the writable root granted entry by entry: the root and the directories on the way read-only, every other existing entry writable on its own (nothing new directly in them)"#,
        r#"as A"#,
    ],
    [
        r#"The same protected names when they do not exist yet (in the writable root, the home directory, `.git` in a directory the root holds), and absent authority files such as `AGENTS.md`"#,
        r#"cannot be bound: when the command and everything it started have ended, loom moves what stands there aside (`NAME.loom-moved`; a link planted on the way is moved, never its target) and says so in the result; it exists while the command runs"#,
        r#"as A, where the root is not granted entry by entry (a root holding a protected path lets nothing new be created directly in it)"#,
        r#"as A"#,
    ],
    [
        r#"Secret stores inside any root"#,
        r#"masked by `/dev/null`, read-only"#,
        r#"no Landlock rule: reading is denied (the root granted entry by entry)"#,
        r#"as A"#,
    ],
    [
        r#"Grant roots swapped for symlinks"#,
        r#"roots opened `O_PATH\|O_NOFOLLOW`, checked with `fstat` (not a symlink) and through `/proc/self/fd` (no symlinked parent), bound by descriptor (`--bind-fd`); a root that is or passes through a symlink is refused with the real path to write"#,
        r#"Landlock opens roots `O_NOFOLLOW`"#,
        r#"as A"#,
    ],
    [
        r#"Network off"#,
        r#"`--unshare-net` + seccomp (only `AF_UNIX` sockets) + Landlock TCP bind/connect"#,
        r#"seccomp + Landlock TCP"#,
        r#"`--unshare-net` + seccomp"#,
    ],
    [
        r#"Network on (`network = "*"`)"#,
        r#"host network; seccomp allows only `AF_UNIX`, `AF_INET`, `AF_INET6` and `AF_NETLINK` with `NETLINK_ROUTE` (no `AF_PACKET`, `AF_VSOCK`, `AF_ALG`, `AF_TIPC`, `AF_CAN`, `AF_BLUETOOTH`, ...)"#,
        r#"same"#,
        r#"same"#,
    ],
    [
        r#"Other processes (`/proc/<pid>/environ`, `kill`, `ptrace`, `process_vm_*`)"#,
        r#"pid namespace + seccomp (ptrace, process_vm_*) + Landlock signal scoping"#,
        r#"seccomp (ptrace, process_vm_*); signals as above; `/proc/<pid>/cmdline` and `status` of same-uid processes stay readable (`environ`, `maps`: Landlock's ptrace scoping denies them)"#,
        r#"pid namespace + seccomp"#,
    ],
    [
        r#"Secret environment variables"#,
        r#"env cleared to tier 1 + the row's allowlist, minus every secret the row is not granted (all tiers, done by loom before spawn; see Runtime)"#,
        r#""#,
        r#""#,
    ],
    [
        r#"Kernel knobs under `/proc` (`/proc/sys`: `core_pattern`, `modprobe`, `net.*`; `/proc/sysrq-trigger`; `/proc/<pid>/mem`), also for uid 0"#,
        r#"fresh `/proc` remounted read-only (EROFS) + Landlock read-only `/proc`; `/sys` is not in the view unless a root holds it"#,
        r#"Landlock read-only `/proc`; no rule for `/sys` unless a root holds it"#,
        r#"fresh `/proc` remounted read-only (EROFS); `/sys` as A"#,
    ],
    [
        r#"bwrap's pid 1 (the pid namespace's reaper, same uid as the command)"#,
        r#"under the same seccomp filter (`--seccomp`; checked by the inner stage, which refuses otherwise); `/proc/1/mem` read-only; Landlock ptrace scoping"#,
        r#"(no bwrap)"#,
        r#"as A, without Landlock"#,
    ],
    [
        r#"SysV IPC (shared memory, message queues, semaphores)"#,
        r#"private IPC namespace"#,
        r#"seccomp (EPERM): there is no IPC namespace"#,
        r#"private IPC namespace"#,
    ],
    [
        r#"Watches on host files (inotify, fanotify)"#,
        r#"fanotify denied (seccomp); inotify sees only the view"#,
        r#"inotify and fanotify denied (seccomp): Landlock does not mediate watches, which would reveal names in directories it does not let the command list"#,
        r#"as A"#,
    ],
    [
        r#"Inherited descriptors"#,
        r#"every fd above 2 closed before exec (all tiers; where `close_range` is missing, one by one via `/proc/self/fd` or up to `RLIMIT_NOFILE`, never skipped)"#,
        r#""#,
        r#""#,
    ],
    [
        r#"Privilege gain (setuid binaries, file capabilities)"#,
        r#"`no_new_privs`, every capability set emptied (bounding, ambient, inheritable, permitted, effective), `--cap-drop ALL`, uid-mapped user namespace"#,
        r#"`no_new_privs`, every capability set emptied"#,
        r#"as A"#,
    ],
    [
        r#"Nested user namespaces, mounts"#,
        r#"seccomp (clone/unshare with `CLONE_NEWUSER`, clone3 -> ENOSYS, mount, setns, pivot_root) + `--disable-userns`"#,
        r#"seccomp + Landlock (no mounts)"#,
        r#"as A"#,
    ],
    [
        r#"io_uring, `TIOCSTI` / `TIOCLINUX` terminal injection (compared on the low 32 bits), bpf, perf_event_open, userfaultfd, keyrings, `open_by_handle_at`, module/kexec loading, the new mount API (`open_tree`, `move_mount`, `fsopen`, `fsconfig`, `fsmount`, `fspick`, `mount_setattr`), rarely legitimate calls (`modify_ldt`, `iopl`/`ioperm`, `uselib`, `_sysctl`, `acct`, `quotactl`, `swapon`/`swapoff`, `syslog`, `vhangup`, `lookup_dcookie`, `reboot`, `sethostname`/`setdomainname`, `chroot`, `pidfd_getfd`)"#,
        r#"seccomp (EPERM), all tiers; `--new-session` as well"#,
        r#""#,
        r#""#,
    ],
    [
        r#"Syscalls newer than loom knows (above `mseal`, e.g. `open_tree_attr`, `file_setattr`)"#,
        r#"seccomp (ENOSYS), all tiers"#,
        r#""#,
        r#""#,
    ],
    [
        r#"Non-native syscall ABIs (x32, i386 on x86_64)"#,
        r#"seccomp kills the process, all tiers"#,
        r#""#,
        r#""#,
    ],
    [
        r#"Orphans, timeouts, cancel"#,
        r#"pid namespace torn down with bwrap; process group killed; a guard process leads the group and, when loom dies (`PR_SET_PDEATHSIG`), kills it and bwrap's first process, also in bwrap's setup"#,
        r#"the command's whole session killed when the call ends (seccomp denies `setsid`, so every descendant stays in it); process group killed on timeout; `PR_SET_PDEATHSIG` on the command, and a guard process that kills the session when loom dies"#,
        r#"as A"#,
    ],
    [
        r#"Fork bombs, huge files"#,
        r#"`RLIMIT_NPROC` (default 4096), `RLIMIT_FSIZE` (default 16 GiB)"#,
        r#"same"#,
        r#"same"#,
    ],
];

/// The newest Landlock ABI loom knows about (the crate's).
const NEWEST_ABI: i32 = 9;

/// Tier A's and tier C's mechanism for a right (the bwrap view and its namespaces).
fn view_cells(right: Right) -> [&'static str; 2] {
    match right {
        Right::Truncate => ["read-only binds (EROFS) + Landlock", "read-only binds (EROFS)"],
        Right::Signals => [
            "pid namespace + Landlock signal scoping",
            "pid namespace",
        ],
        Right::AbstractSockets => [
            "separate network namespace (network off); Landlock scoping (ABI 6+)",
            "separate network namespace (network off only)",
        ],
        Right::PathnameSockets => [
            "not in the view: only sockets inside granted roots are reachable (Landlock mediates them only from ABI 9)",
            "as A",
        ],
        Right::Metadata => ["read-only binds (EROFS)", "read-only binds (EROFS)"],
    }
}

/// Tier B's cell for a right: who withholds it on a new kernel and on an old one, and what that costs.
fn tier_b_cell(right: Right) -> String {
    let by = |abi: i32, accept: &[loom_kernel::AcceptedGap]| {
        tier_b_rights(abi, accept)
            .into_iter()
            .find(|r| r.right == right)
    };
    let (Some(new), Some(old)) = (by(NEWEST_ABI, &[]), by(1, &[])) else {
        return String::new();
    };
    let mechanism = |s: crate::coverage::RightStatus| -> String {
        match s.by {
            By::Landlock => match right.landlock_abi() {
                Some(v) => format!("Landlock (ABI {v}+)"),
                None => "Landlock".into(),
            },
            By::Seccomp => match right {
                Right::Metadata => format!(
                    "seccomp denies {} (EPERM)",
                    METADATA_SYSCALLS.map(|n| format!("`{n}`")).join(", ")
                ),
                Right::PathnameSockets | Right::AbstractSockets => {
                    "seccomp denies `socket(AF_UNIX)` (EPERM)".into()
                }
                Right::Truncate => "seccomp denies `truncate(2)` (EPERM)".into(),
                _ => "seccomp".into(),
            },
            By::Missing => match right.acceptable_as() {
                Some(g) => format!(
                    "**refused** unless the manifest accepts it (`[sandbox] accept = [\"{}\"]`)",
                    g.name()
                ),
                None => "**refused**".into(),
            },
            By::Accepted | By::View => s.by.name().into(),
        }
    };
    let mut cell = mechanism(new);
    if old.by != new.by {
        if let Some(v) = right.landlock_abi() {
            cell.push_str(&format!("; below ABI {v}: {}", mechanism(old)));
        }
    }
    for s in [new, old] {
        if let Some(cost) = s.cost() {
            cell.push_str(&format!(" — costs: {cost}"));
            break;
        }
    }
    cell
}

/// Every row: the fixed ones, with one row per [`Right`] after the first.
pub fn enforcement_rows() -> Vec<[String; 4]> {
    let mut rows: Vec<[String; 4]> = FIXED.iter().map(|r| r.map(str::to_string)).collect();
    let generated = Right::ALL.into_iter().map(|right| {
        let [a, c] = view_cells(right);
        [
            right.title().to_string(),
            a.to_string(),
            tier_b_cell(right),
            c.to_string(),
        ]
    });
    let at = rows.len().min(1);
    rows.splice(at..at, generated);
    rows
}

/// The table as Markdown, header included (what SECURITY.md holds between its table markers).
pub fn enforcement_table() -> String {
    let mut out =
        String::from("| Threat / grant kind | Tier A | Tier B | Tier C |\n|---|---|---|---|\n");
    for row in enforcement_rows() {
        out.push('|');
        for cell in row {
            if !cell.is_empty() {
                out.push(' ');
                out.push_str(&cell);
            }
            out.push_str(" |");
        }
        out.push('\n');
    }
    out
}

/// The markers around the generated table in SECURITY.md.
pub const TABLE_BEGIN: &str =
    "<!-- enforcement table: generated by `loom doctor --table`; edit sandbox/src/table.rs -->";
/// See [`TABLE_BEGIN`].
pub const TABLE_END: &str = "<!-- end of the enforcement table -->";

#[cfg(test)]
mod tests {
    use super::*;

    /// SECURITY.md's table is the generated one: a claim changed in one place and not the other fails here.
    #[test]
    fn security_md_holds_the_generated_table() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../SECURITY.md");
        let doc = std::fs::read_to_string(&path).unwrap();
        let begin = doc
            .find(TABLE_BEGIN)
            .expect("SECURITY.md has the table's begin marker");
        let end = doc
            .find(TABLE_END)
            .expect("SECURITY.md has the table's end marker");
        let held = doc[begin + TABLE_BEGIN.len()..end].trim_start_matches('\n');
        assert!(
            held == enforcement_table(),
            "SECURITY.md's enforcement table differs from the generated one; replace it with `loom doctor --table`"
        );
    }

    #[test]
    fn tier_b_cells_say_what_each_abi_gets() {
        let rows = enforcement_rows();
        let cell = |what: &str| {
            rows.iter()
                .find(|r| r[0].starts_with(what))
                .map(|r| r[2].clone())
                .unwrap()
        };
        assert!(cell("Signals").contains("Landlock (ABI 6+); below ABI 6: **refused** unless"));
        assert!(cell("`truncate`").contains("below ABI 3: seccomp denies `truncate(2)`"));
        let metadata = cell("Metadata");
        assert!(metadata.contains("`fchmodat2`") && metadata.contains("chmod +x"));
        assert!(cell("Host unix sockets by path").contains("`socket(AF_UNIX)`"));
        // No cell is empty but the "as above" continuations of the fixed rows.
        assert!(rows.iter().all(|r| !r[0].is_empty()));
    }
}
