//! Issue 24 item 8: the container tier matrix. `container-sim` (tests/container_sim.rs) runs loom under what a
//! container runtime imposes — Docker's default seccomp profile (no namespaces), no Landlock, no bubblewrap in the
//! image, a non-root user — and in each case loom picks by trial a tier that works (the same one `loom doctor`
//! reports), runs the agent's command in a checkout with `.git` kept read-only, or refuses with the reason and exits 69
//! when a tier is required and missing. In each, `loom doctor` also says whether the local model engine can confine
//! itself: only where the kernel's Landlock is reachable.

use std::path::{Path, PathBuf};
use std::process::Command;

use loom_tests::Scratch;

use crate::{is_root, loom};

const USER: &str = "loomtest";

/// The agent: one confined command in the checkout, one attack on its git metadata.
const AGENT: &str = r#"[agent]
name = "container"

[harness]
provider = "test"
script = [[
  { call = { tool = "bash", input = { command = "echo checkout-ok > src/out.txt && cat src/out.txt" } } },
  { call = { tool = "bash", input = { command = "echo evil >> .git/config" } } },
  { say = "done" },
]]

[session]
provider = "in-memory"

[tools]
bash = "builtin"

[capabilities]
bash = { commands = "*", paths = ["./"] }
"#;

fn sim() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_container-sim"))
}

/// The uid to run as: the unprivileged test user when this runs as root and it exists (a container's non-root
/// `USER`), else the current user.
fn unprivileged_uid() -> Option<String> {
    if !is_root() {
        return None;
    }
    let out = Command::new("id").args(["-u", USER]).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A checkout (`.git` with a config, a `src/` directory) with the agent, owned by `uid` when given.
fn checkout(uid: Option<&str>) -> Scratch {
    let s = Scratch::new();
    s.write("agent.toml", AGENT);
    s.write(".git/config", "[core]\n");
    s.write("src/lib.rs", "fn main() {}\n");
    std::fs::create_dir_all(s.path().join("home")).unwrap();
    if let Some(uid) = uid {
        assert!(Command::new("chown")
            .arg("-R")
            .arg(format!("{uid}:{uid}"))
            .arg(s.path())
            .status()
            .unwrap()
            .success());
    }
    s
}

/// `container-sim OPTS [--uid U] -- loom ARGS` in `dir`, with a clean environment.
fn loom_in(dir: &Path, opts: &[&str], uid: Option<&str>, args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(sim());
    cmd.args(opts);
    if let Some(uid) = uid {
        cmd.args(["--uid", uid]);
    }
    cmd.arg("--")
        .arg(loom())
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", dir.join("home"))
        .env("LOOM_DATA_HOME", dir.join(".loom-data"))
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// One case: doctor and the runtime agree on `want` (None: no tier), and the agent's commands run (or are refused).
fn case(name: &str, opts: &[&str], want: Option<&str>) {
    if opts.contains(&"--no-bwrap") && !is_root() {
        eprintln!("SKIPPED {name}: --no-bwrap needs root for its mount namespace (a container engine's part)");
        return;
    }
    let uid = unprivileged_uid();
    let s = checkout(uid.as_deref());
    let check = loom_in(s.path(), opts, uid.as_deref(), &["version"]);
    if !check.status.success() {
        eprintln!(
            "SKIPPED {name}: {} cannot run here as uid {uid:?} (a parent directory not world-executable?): {}",
            loom().display(),
            text(&check.stderr)
        );
        return;
    }
    eprintln!(
        "{name}: running as uid {}",
        uid.as_deref().unwrap_or("(current)")
    );
    let doctor = loom_in(s.path(), opts, uid.as_deref(), &["doctor", "--json"]);
    let d: serde_json::Value = serde_json::from_slice(&doctor.stdout)
        .unwrap_or_else(|e| panic!("{name}: doctor --json ({e}): {}", text(&doctor.stderr)));
    assert_eq!(
        d["tier"].as_str(),
        want,
        "{name}: doctor chose {}",
        d["tier"]
    );
    // the local model engine confines itself with Landlock whatever the tier: without it, it loads nothing
    let landlock = !opts.contains(&"--no-landlock");
    assert_eq!(d["engine"]["ok"], landlock, "{name}: {}", d["engine"]);
    if !landlock {
        let why = d["engine"]["detail"].as_str().unwrap_or("");
        assert!(
            why.contains("cannot confine itself here")
                && why.contains("the local model engine runs only inside a Landlock domain"),
            "{name}: {why}"
        );
    }

    let run = loom_in(
        s.path(),
        opts,
        uid.as_deref(),
        &["prompt", "agent.toml", "go", "--format", "jsonl"],
    );
    let out = text(&run.stdout);
    let first: serde_json::Value =
        serde_json::from_str(out.lines().next().unwrap_or("null")).unwrap();
    assert_eq!(
        first["sandbox"]["tier"].as_str(),
        want,
        "{name}: the runtime chose {} (doctor: {want:?})\n{out}",
        first["sandbox"]
    );
    let results: Vec<serde_json::Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] != "in_progress")
        .collect();
    assert_eq!(results.len(), 2, "{name}:\n{out}\n{}", text(&run.stderr));
    let config = std::fs::read_to_string(s.path().join(".git/config")).unwrap();
    assert_eq!(config, "[core]\n", "{name}: the git config was written");
    match want {
        Some(_) => {
            assert_eq!(run.status.code(), Some(0), "{name}: {}", text(&run.stderr));
            assert_eq!(results[0]["status"], "completed", "{name}: {}", results[0]);
            assert!(
                results[0].to_string().contains("checkout-ok"),
                "{name}: {}",
                results[0]
            );
            assert_eq!(
                std::fs::read_to_string(s.path().join("src/out.txt")).unwrap(),
                "checkout-ok\n"
            );
            assert_eq!(
                results[1]["status"], "failed",
                "{name}: .git/config was writable: {}",
                results[1]
            );
        }
        None => {
            // fail closed: nothing ran, and the refusal says how to fix it
            for r in &results {
                assert_eq!(r["status"], "failed", "{name}: {r}");
                assert!(r.to_string().contains("loom doctor"), "{name}: {r}");
            }
            assert!(!s.path().join("src/out.txt").exists());
            let required = loom_in(
                s.path(),
                opts,
                uid.as_deref(),
                &["prompt", "agent.toml", "go", "--require-tier", "b"],
            );
            assert_eq!(
                required.status.code(),
                Some(69),
                "{name}: {}",
                text(&required.stderr)
            );
        }
    }
}

#[test]
fn a_host_without_restrictions_gets_tier_a() {
    case("no restrictions", &[], Some("A"));
}

/// Docker's and containerd's default seccomp profile (Kubernetes RuntimeDefault), bubblewrap installed: the trial
/// of tier A fails and the runtime uses B — not a refusal, as when the tier was chosen from sysctl reads.
#[test]
fn a_default_container_profile_with_bwrap_installed_gets_tier_b() {
    case("docker default profile", &["--block-namespaces"], Some("B"));
}

#[test]
fn an_image_without_bwrap_gets_tier_b() {
    case("no bwrap", &["--no-bwrap"], Some("B"));
    case(
        "no bwrap, default profile",
        &["--no-bwrap", "--block-namespaces"],
        Some("B"),
    );
}

#[test]
fn a_kernel_without_landlock_gets_tier_c() {
    case("no landlock", &["--no-landlock"], Some("C"));
}

#[test]
fn no_namespaces_and_no_landlock_is_a_refusal_and_69_when_required() {
    case(
        "default profile, no landlock",
        &["--block-namespaces", "--no-landlock"],
        None,
    );
}
