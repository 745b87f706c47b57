//! `loom doctor`: what the host can enforce, which tier loom uses, and the fix for anything missing.
//!
//! Exit codes: 0 when some sandbox tier works, 1 when none does (loom would refuse every sandboxed command).

use std::path::PathBuf;

use loom_sandbox::{
    choose_by_trial, loom_install_dir, probe_bwrap_works, probe_host, try_tier, Tier, TrialError,
    Userns, TARGET_ABI,
};

use crate::exit;

/// Arguments of `loom doctor`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Print SECURITY.md's "What is enforced, and by what" table (Markdown), rendered from the data the sandbox
    /// uses, and exit.
    #[arg(long, conflicts_with = "json")]
    table: bool,
}

/// Where loom's own executables are, and a warning when a typical grant (`~`, `./`) would let a command replace them.
fn install_dir_check() -> Result<String, String> {
    let dir = loom_install_dir().map_err(|e| format!("cannot locate loom's executables: {e}"))?;
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
        .and_then(|h| std::fs::canonicalize(h).ok());
    let cwd = std::env::current_dir()
        .ok()
        .and_then(|c| std::fs::canonicalize(c).ok());
    let mut covered = Vec::new();
    if home.as_ref().is_some_and(|h| dir.starts_with(h)) {
        covered.push("paths = [\"~\"]");
    }
    if cwd.as_ref().is_some_and(|c| dir.starts_with(c)) {
        covered.push("paths = [\"./\"] from here");
    }
    if covered.is_empty() {
        return Ok(format!(
            "{} (loom, loom-sandbox-exec, loom-shim, loom-engine); the inner stage runs from a sealed copy",
            dir.display()
        ));
    }
    Err(format!(
        "{} holds loom, loom-sandbox-exec, loom-shim and loom-engine, and a grant of {} would let a confined command \
         replace them for the next session (loom runs unconfined, and a replaced loom-engine would not confine \
         itself); install loom outside every granted root (e.g. /usr/local/bin), and run `loom audit` on a manifest \
         to check its grants",
        dir.display(),
        covered.join(" or ")
    ))
}

/// How long `loom doctor` waits for the engine's confinement check.
const ENGINE_CHECK_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Whether the local model engine confines itself here: `loom-engine --check-confinement` on its own executable
/// (the file it may read), which runs the confinement the engine runs before it loads a model and tries what it must
/// not do.
fn engine_check() -> Result<String, String> {
    let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    let program = loom_local::engine_program(&env).map_err(|e| e.to_string())?;
    let mut child = std::process::Command::new(&program)
        .arg("--check-confinement")
        .arg(&program)
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("{} could not be run: {e}", program.display()))?;
    // the check takes milliseconds and prints a few lines (well under a pipe's buffer); a program that does not
    // end is not left to hang doctor
    match loom_sandbox::wait_within(&mut child, ENGINE_CHECK_LIMIT) {
        Ok(Some(_)) => {}
        Ok(None) => {
            return Err(format!(
                "{} did not finish its confinement check within {} s",
                program.display(),
                ENGINE_CHECK_LIMIT.as_secs()
            ))
        }
        Err(e) => return Err(format!("{} could not be run: {e}", program.display())),
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("{} could not be run: {e}", program.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if out.status.success() {
        let how = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("confined: "))
            .and_then(|l| l.split(", reading only").next())
            .unwrap_or("confined");
        return Ok(format!(
            "{} confines itself before it loads a model ({how}; it reads only the model file)",
            program.display()
        ));
    }
    let failed: Vec<&str> = text.lines().filter(|l| l.starts_with("FAIL")).collect();
    let why = if failed.is_empty() {
        String::from_utf8_lossy(&out.stderr).trim().to_string()
    } else {
        failed.join("; ")
    };
    // what the program printed is shown, never obeyed by the terminal
    Err(format!(
        "{} cannot confine itself here, so the local harness refuses to load a model: {}",
        program.display(),
        loom_runtime::terminal_safe(&why)
    ))
}

fn json_str(s: &str) -> String {
    serde_json::Value::String(s.into()).to_string()
}

/// Runs `loom doctor`.
pub fn run(args: Args) -> i32 {
    if args.table {
        print!("{}", loom_sandbox::enforcement_table());
        return exit::OK;
    }
    let h = probe_host();
    // What tier B withholds on this host beyond the roots, and who does it (the decision tier B takes at spawn).
    let tier_b = h
        .landlock_abi
        .as_ref()
        .ok()
        .map(|abi| loom_sandbox::tier_b_status(*abi, &[]));
    let bwrap = match &h.bwrap {
        None => Err("not installed; fix: apt-get install bubblewrap (or your distribution's bubblewrap package)".to_string()),
        Some(b) => probe_bwrap_works(b)
            .map(|v| format!("{} ({v})", b.display()))
            .map_err(|e| e.to_string()),
    };
    let userns = match &h.userns {
        Userns::Available => Ok("available".to_string()),
        Userns::Unavailable(why) => Err(why.clone()),
    };
    let landlock = match &h.landlock_abi {
        Ok(v) => {
            let target = TARGET_ABI as i32;
            if *v >= target {
                Ok(format!(
                    "ABI {v} (loom asks for ABI {target}: fully enforced)"
                ))
            } else {
                Ok(format!(
                    "ABI {v} (loom asks for ABI {target}: partially enforced; newer kernels add TCP, truncate, ioctl and scoping rules)"
                ))
            }
        }
        Err(why) => Err(why.clone()),
    };
    let install = install_dir_check();
    let engine = engine_check();
    let seccomp = if h.seccomp {
        Ok("available".to_string())
    } else {
        Err("not available; fix: a kernel with CONFIG_SECCOMP_FILTER".to_string())
    };
    let tiers: Vec<(Tier, Result<String, TrialError>)> = [Tier::A, Tier::B, Tier::C]
        .into_iter()
        .map(|t| (t, try_tier(&h, t, None)))
        .collect();
    // the runtime's own choice over these very trials (LOOM_SANDBOX_TIER and LOOM_SANDBOX_DISABLE included)
    let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    let chosen = choose_by_trial(None, &env, &mut |t| {
        tiers
            .iter()
            .find(|(u, _)| *u == t)
            .map_or_else(|| Err(TrialError::NotTried), |(_, r)| r.clone())
    })
    .ok()
    .map(|(t, _)| t);
    let has_view = matches!(chosen, Some(Tier::A | Tier::C));
    let has_landlock = matches!(chosen, Some(Tier::A | Tier::B));
    let kinds: Vec<(&str, String)> = vec![
        (
            "commands",
            "loom picks the row naming argv[0], else the commands = \"*\" row; the broker re-sandboxes named commands".into(),
        ),
        (
            "paths",
            match (has_view, has_landlock) {
                (true, true) => "bwrap binds the roots (by descriptor) + Landlock write rules; protected subpaths re-bound read-only".into(),
                (true, false) => "bwrap binds the roots (by descriptor); protected subpaths re-bound read-only (no Landlock layer)".into(),
                (false, true) => "Landlock rules only; a writable root holding protected subpaths is granted entry by entry (nothing new directly in it)".into(),
                (false, false) => "NOT ENFORCED: no backend".into(),
            },
        ),
        (
            "read_paths",
            match (has_view, has_landlock) {
                (true, true) => "read-only bwrap binds + Landlock read rules".into(),
                (true, false) => "read-only bwrap binds".into(),
                (false, true) => "Landlock read rules".into(),
                (false, false) => "NOT ENFORCED: no backend".into(),
            },
        ),
        (
            "network",
            match (has_view, has_landlock) {
                (true, true) => "off: --unshare-net + seccomp (AF_UNIX only) + Landlock TCP; on: host network, seccomp allows only unix/inet/inet6/route-netlink sockets".into(),
                (true, false) => "off: --unshare-net + seccomp (AF_UNIX only); on: host network, seccomp allows only unix/inet/inet6/route-netlink sockets".into(),
                (false, true) => "off: seccomp (no socket at all but socketpair: unix sockets are denied in tier B) + Landlock TCP; on: seccomp allows only inet/inet6/route-netlink sockets".into(),
                (false, false) => "NOT ENFORCED: no backend".into(),
            },
        ),
        (
            "env",
            "loom clears the environment to tier 1 + the row's allowlist (tier 2 when env is absent)".into(),
        ),
        (
            "kernel",
            match chosen {
                Some(Tier::B) => "seccomp on every command (no mount, keyring, io_uring, bpf, SysV IPC, inotify, rare syscalls); every capability set emptied; /proc read-only by Landlock".into(),
                Some(_) => "seccomp on every process of the view, bwrap's pid 1 included (no mount, keyring, io_uring, bpf, rare syscalls); every capability set emptied; /proc mounted read-only (no sysctl, core_pattern or /proc/<pid>/mem writes, also as root)".into(),
                None => "NOT ENFORCED: no backend".into(),
            },
        ),
        (
            "limits",
            format!(
                "RLIMIT_NPROC and RLIMIT_FSIZE{}; the timeout kills the process group{}",
                if h.root { " (uid 0 is exempt from RLIMIT_NPROC: run loom as an unprivileged user)" } else { "" },
                if has_view {
                    " and the pid namespace"
                } else {
                    "; the end of each call kills the command's whole session (setsid denied)"
                }
            ),
        ),
    ];

    let ok = chosen.is_some();
    if args.json {
        let mut out = String::from("{\"version\":1");
        out.push_str(&format!(
            ",\"tier\":{}",
            chosen
                .map(|t| json_str(t.name()))
                .unwrap_or_else(|| "null".into())
        ));
        for (name, r) in [
            ("bwrap", &bwrap),
            ("userns", &userns),
            ("landlock", &landlock),
            ("seccomp", &seccomp),
            ("install", &install),
            ("engine", &engine),
        ] {
            out.push_str(&format!(
                ",{}:{{\"ok\":{},\"detail\":{}}}",
                json_str(name),
                r.is_ok(),
                json_str(r.as_ref().unwrap_or_else(|e| e))
            ));
        }
        out.push_str(",\"tiers\":{");
        let parts: Vec<String> = tiers
            .iter()
            .map(|(t, r)| {
                format!(
                    "{}:{{\"ok\":{},\"detail\":{}}}",
                    json_str(t.name()),
                    r.is_ok(),
                    json_str(&r.as_ref().map_or_else(ToString::to_string, String::clone))
                )
            })
            .collect();
        out.push_str(&parts.join(","));
        out.push_str("},\"tierB\":");
        match &tier_b {
            Some(st) => {
                let rights: Vec<String> = st
                    .rights
                    .iter()
                    .map(|r| {
                        format!(
                            "{}:{{\"by\":{},\"cost\":{}}}",
                            json_str(r.right.name()),
                            json_str(r.by.name()),
                            r.cost().map_or("null".into(), json_str)
                        )
                    })
                    .collect();
                out.push_str(&format!(
                    "{{\"landlockAbi\":{},\"rights\":{{{}}},\"refusal\":{}}}",
                    st.landlock_abi.unwrap_or(0),
                    rights.join(","),
                    loom_sandbox::tier_b_refusal(st).map_or("null".into(), |w| json_str(&w))
                ));
            }
            None => out.push_str("null"),
        }
        out.push_str(",\"accept\":[");
        let names: Vec<String> = loom_kernel::AcceptedGap::ALL
            .iter()
            .map(|g| json_str(g.name()))
            .collect();
        out.push_str(&names.join(","));
        out.push_str("],\"kinds\":{");
        let parts: Vec<String> = kinds
            .iter()
            .map(|(k, v)| format!("{}:{}", json_str(k), json_str(v)))
            .collect();
        out.push_str(&parts.join(","));
        out.push_str("},\"protectedNames\":[");
        let names: Vec<String> = loom_kernel::PROTECTED_NAMES
            .iter()
            .map(|n| json_str(n))
            .collect();
        out.push_str(&names.join(","));
        out.push_str("]}");
        println!("{out}");
        return if ok { exit::OK } else { exit::FAILED };
    }

    let mark = |r: &Result<String, String>| match r {
        Ok(s) => format!("ok       {s}"),
        Err(e) => format!("MISSING  {e}"),
    };
    let mut text = String::new();
    match chosen {
        Some(t) => text.push_str(&format!("sandbox tier: {} ({})\n", t.name(), t.describe())),
        None => text
            .push_str("sandbox tier: NONE — loom refuses every sandboxed command on this host\n"),
    }
    text.push_str("\nfacilities:\n");
    text.push_str(&format!("  bubblewrap       {}\n", mark(&bwrap)));
    text.push_str(&format!("  user namespaces  {}\n", mark(&userns)));
    text.push_str(&format!("  landlock         {}\n", mark(&landlock)));
    text.push_str(&format!("  seccomp          {}\n", mark(&seccomp)));
    text.push_str(&format!(
        "  loom's binaries  {}\n",
        match &install {
            Ok(s) => format!("ok       {s}"),
            Err(e) => format!("WARNING  {e}"),
        }
    ));
    text.push_str(&format!("  local models     {}\n", mark(&engine)));
    text.push_str("\ntiers (each checked by running `true` inside it):\n");
    for (t, r) in &tiers {
        text.push_str(&format!(
            "  {} {:<36} {}\n",
            t.name(),
            t.describe(),
            mark(&r.clone().map_err(|e| e.to_string()))
        ));
    }
    text.push_str("\nwho enforces each bash grant kind here:\n");
    for (k, v) in &kinds {
        text.push_str(&format!("  {k:<11} {v}\n"));
    }
    if let Some(st) = &tier_b {
        text.push_str(&format!(
            "\ntier B beyond the roots (Landlock ABI {} here; the same decision runs at every spawn):\n",
            st.landlock_abi.unwrap_or(0)
        ));
        for r in &st.rights {
            text.push_str(&format!(
                "  {:<17} {:<9} {}\n",
                r.right.name(),
                r.by.name(),
                r.right.what()
            ));
            if let Some(cost) = r.cost() {
                text.push_str(&format!("  {:<27} cost: {cost}\n", ""));
            }
        }
        if let Some(why) = loom_sandbox::tier_b_refusal(st) {
            text.push_str(&format!("  tier B REFUSES every command here: {why}\n"));
        }
        let names: Vec<&str> = loom_kernel::AcceptedGap::ALL
            .iter()
            .map(|g| g.name())
            .collect();
        text.push_str(&format!(
            "  a manifest may accept a gap by name ([sandbox] accept = [...]; `loom audit` shows it): {}\n",
            names.join(", ")
        ));
    }
    text.push_str(&format!(
        "\nread-only inside every writable root (and the home directory), whatever the grant — code that git, shells, \
         editors, desktop sessions and agents run on their own (a `.git` named as a root of its own is writable but \
         for {}):\n  {}\n",
        loom_sandbox::GIT_AUTORUN.join(", "),
        loom_kernel::PROTECTED_NAMES.join(" ")
    ));
    text.push_str(
        "plus each agent's authority files (manifest, hook and server programs, sub-manifests, skill roots, .loom/, \
         loom's data directory and executables; secret stores masked) — `loom audit` lists them; what a command \
         creates at one of these that did not exist is moved aside to NAME.loom-moved when it ends\n",
    );
    if userns.is_err() {
        text.push_str(
            "\nhint: on Ubuntu 23.10+ unprivileged user namespaces are restricted by AppArmor \
             (kernel.apparmor_restrict_unprivileged_userns=1); allow them for bwrap with an AppArmor profile, or \
             `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`\n",
        );
    }
    print!("{text}");
    if ok {
        exit::OK
    } else {
        exit::FAILED
    }
}
