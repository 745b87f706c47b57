//! Per-exec overhead of the production spawn path, in process: what the runtime's bash tool (and the broker) pays
//! per call, without loom's own process start. `/bin/true` runs, side by side and interleaved round-robin (so load
//! on a shared machine hits every configuration alike):
//!
//! - bare: `std::process::Command` spawn + wait (posix_spawn);
//! - bare, forked: the same with a no-op `pre_exec` hook (std then forks);
//! - bare, forked, new session: the hook calls `setsid`, as every confined spawn must (on a kernel with
//!   `sched_autogroup_enabled`, a new session is also a new scheduling group, which shows under load);
//! - bwrap alone: user + pid + net namespaces, `/` read-only, fresh `/dev` and `/proc`;
//! - bwrap, tier A's view: the exact bwrap argv tier A builds for the grant, running `/bin/true` with no inner stage;
//! - tier A, B, C: `loom_broker::run_bash`, the function the bash tool and `loom sandbox run` call; and again with
//!   each command's owed sweep recorded first (`sweep recorded`), as the bash tool does in loom's data directory.
//!
//! The grant is `{ commands = "*", paths = ["<a temp dir>"] }` (network off), the limits those of the bash tool (a
//! timeout). Prints a markdown table (mean, median, 90th percentile, min, and the mean and median over bare's) and the
//! load average before and after. Not a timed test: see benches/README.md, "Sandbox exec overhead".
//!
//! ```sh
//! cargo bench -p loom-benches --bench sandbox_spawn     # RUNS=500: more rounds; ONLY="bare,tier B": some of them
//! INNER_EXE=target/release/loom cargo bench ...            # compare another inner stage (loom runs it too)
//! BWRAP_BREAKDOWN=1 cargo bench ...                         # also bwrap built up one namespace / mount group at a time
//! BASELINE_INNER=/tmp/old/loom cargo bench ...               # tiers A and C again with an older inner stage
//! ```

use std::ffi::OsString;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use loom_broker::{run_bash, BashPlan, BashRun, BrokerLimits};
use loom_kernel::{decide, AlgebraKind, Grant, PathCtx, Request, Row};
use loom_sandbox::{
    build_bwrap_args, build_profile, build_seccomp_programs, host_support, open_roots, parse_grant,
    HostFs, Limits, PathFds, Place, SeccompPolicy, StageFds, Stream, Streams, Tier,
};

type Run = Box<dyn FnMut() -> Result<(), String>>;

fn fail<E: std::fmt::Display>(what: &str) -> impl Fn(E) -> String + '_ {
    move |e| format!("{what}: {e}")
}

fn status_ok(s: std::io::Result<std::process::ExitStatus>, what: &str) -> Result<(), String> {
    match s {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("{what}: {s}")),
        Err(e) => Err(format!("{what}: {e}")),
    }
}

fn quiet(cmd: &mut Command) -> &mut Command {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
}

/// The inner-stage binary: built into this bench's profile directory (`target/release/` under `cargo bench`).
fn inner_exe() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("INNER_EXE") {
        // another inner stage to compare (e.g. `target/release/loom`, which also runs it)
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(fail("current exe"))?;
    // target/release/deps/<bench>
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .ok_or("no profile directory")?;
    let target_dir = profile_dir.parent().ok_or("no target directory")?;
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("no workspace")?;
    let mut cargo = Command::new(env!("CARGO"));
    cargo.args(["build", "-q"]);
    if profile_dir.ends_with("release") {
        cargo.arg("--release");
    }
    let status = cargo
        .args([
            "-p",
            "loom-sandbox",
            "--bin",
            loom_sandbox::INNER_EXE_NAME,
            "--target-dir",
        ])
        .arg(target_dir)
        .current_dir(workspace)
        .status();
    status_ok(status, "building the inner stage")?;
    Ok(profile_dir.join(loom_sandbox::INNER_EXE_NAME))
}

struct Case {
    grant: Grant,
    row: Row,
    ctx: PathCtx,
    cwd: PathBuf,
    home: Option<PathBuf>,
    argv: Vec<OsString>,
}

impl Case {
    fn new(work: &Path) -> Result<Case, String> {
        let cwd = std::fs::canonicalize(work).map_err(fail("temp dir"))?;
        let grant = parse_grant(&format!(
            "{{ commands = \"*\", paths = [{:?}] }}",
            cwd.display().to_string()
        ))
        .map_err(fail("grant"))?;
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|h| h.is_absolute());
        let ctx = PathCtx::new(
            cwd.to_string_lossy().into_owned(),
            home.as_ref().map(|h| h.to_string_lossy().into_owned()),
        );
        let request = Request::BashArgv {
            argv: vec!["/bin/true".into()],
            cwd: ctx.base.clone(),
        };
        let Some((_, row)) = decide("bash", AlgebraKind::Bash, &ctx, &grant, &request).into_row()
        else {
            return Err("the kernel did not pick a row for /bin/true".into());
        };
        Ok(Case {
            grant,
            row,
            ctx,
            cwd,
            home,
            argv: vec!["/bin/true".into()],
        })
    }

    /// `/bin/true` through `run_bash` under `tier`; with `records`, each command's owed sweep is recorded there first
    /// (what the bash tool does, in loom's data directory).
    fn run(&self, tier: Tier, inner: &Path, records: Option<&Path>) -> Result<(), String> {
        let plan = BashPlan::Confined {
            row: self.row.clone(),
            argv: self.argv.clone(),
        };
        let run = BashRun {
            tool: "bash",
            grant: &self.grant,
            ctx: &self.ctx,
            cwd: &self.cwd,
            home: self.home.clone(),
            limits: Limits {
                timeout: Some(Duration::from_secs(120)),
                ..Limits::default()
            },
            tier: Some(tier),
            inner_exe: Some(inner.to_path_buf()),
            shim: None,
            broker: BrokerLimits::default(),
            secrets: &loom_sandbox::SecretFacts::default(),
            authority: &loom_sandbox::AuthorityPaths::default(),
            fills: None,
            sweep_records: records,
        };
        let streams = Streams {
            stdin: Stream::Null,
            stdout: Stream::Null,
            stderr: Stream::Null,
        };
        match run_bash(plan, run, streams, &mut |_| {}) {
            Ok(o) if o.code == 0 => Ok(()),
            Ok(o) => Err(format!("tier {}: exit {}", tier.name(), o.code)),
            Err(e) => Err(format!("tier {}: {e}", tier.name())),
        }
    }

    /// bwrap with tier A's exact view for this grant (its seccomp program on pid 1 included), running a copy of
    /// `/bin/true` where the inner stage would be (no inner stage).
    fn bwrap_view(&self) -> Result<(), String> {
        let h = host_support();
        let bwrap = h.bwrap.as_deref().ok_or("no bwrap")?;
        let place = Place {
            cwd: self.cwd.clone(),
            home: self.home.clone(),
            ..Place::default()
        };
        let profile = build_profile(&self.row, &self.ctx, &place, Limits::default(), &HostFs)
            .map_err(fail("profile"))?;
        let roots = open_roots(&profile).map_err(fail("roots"))?;
        let fds: PathFds = roots
            .iter()
            .map(|(p, fd)| (p.clone(), fd.as_raw_fd()))
            .collect();
        let exe = std::fs::File::open("/bin/true").map_err(fail("/bin/true"))?;
        let programs = build_seccomp_programs(SeccompPolicy::default()).map_err(fail("seccomp"))?;
        let bytes: Vec<u8> = programs[0]
            .iter()
            .flat_map(|i| {
                let mut b = i.code.to_ne_bytes().to_vec();
                b.extend([i.jt, i.jf]);
                b.extend(i.k.to_ne_bytes());
                b
            })
            .collect();
        // The program, from a file bwrap reads to its end.
        let path = std::env::temp_dir().join(format!("loom-bench-seccomp-{}", std::process::id()));
        std::fs::write(&path, &bytes).map_err(fail("seccomp file"))?;
        let seccomp = std::fs::File::open(&path).map_err(fail("seccomp file"))?;
        let _ = std::fs::remove_file(&path);
        let stage = StageFds {
            inner_exe: exe.as_raw_fd(),
            seccomp: seccomp.as_raw_fd(),
        };
        let mut keep: Vec<i32> = fds.values().copied().collect();
        keep.extend([stage.inner_exe, stage.seccomp]);
        let args = build_bwrap_args(&profile, &fds, h.bwrap_features, stage, &[])
            .map_err(fail("bwrap args"))?;
        let mut cmd = Command::new(bwrap);
        quiet(cmd.args(args).current_dir("/"));
        // SAFETY: only fcntl on integers between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                for fd in &keep {
                    if libc::fcntl(*fd, libc::F_SETFD, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        status_ok(cmd.status(), "bwrap (tier A's view)")
    }
}

/// bwrap built up one step at a time towards tier A's view (`BWRAP_BREAKDOWN=1`): what each namespace, flag and
/// mount group costs on this host.
fn bwrap_breakdown() -> Vec<(&'static str, Vec<&'static str>)> {
    let steps: [(&str, &[&str]); 8] = [
        ("bwrap: mount ns, ro /", &["--ro-bind", "/", "/"]),
        ("  + user ns", &["--unshare-user"]),
        ("  + pid ns", &["--unshare-pid"]),
        (
            "  + ipc, uts, cgroup ns",
            &["--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"],
        ),
        ("  + net ns", &["--unshare-net"]),
        (
            "  + die-with-parent, new-session, cap-drop",
            &["--die-with-parent", "--new-session", "--cap-drop", "ALL"],
        ),
        ("  + disable-userns", &["--disable-userns"]),
        (
            "  + fresh /dev and /proc",
            &["--dev", "/dev", "--proc", "/proc"],
        ),
    ];
    let mut args: Vec<&str> = Vec::new();
    steps
        .into_iter()
        .map(|(name, more)| {
            args.extend_from_slice(more);
            (name, args.clone())
        })
        .collect()
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// Mean, median, 90th percentile and minimum, in milliseconds.
fn stats(samples: &mut [Duration]) -> (f64, f64, f64, f64) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mean = samples.iter().map(|d| ms(*d)).sum::<f64>() / samples.len().max(1) as f64;
    let at = |q: usize| {
        samples
            .get(samples.len() * q / 100)
            .map(|d| ms(*d))
            .unwrap_or(0.0)
    };
    let min = samples.first().map(|d| ms(*d)).unwrap_or(0.0);
    (mean, at(50), at(90), min)
}

fn main() -> Result<(), String> {
    // `cargo bench` passes `--bench`; without it (`cargo test --benches`) every configuration runs once, as a check.
    let measuring = std::env::args().any(|a| a == "--bench");
    let runs: usize = match std::env::var("RUNS").ok().and_then(|s| s.parse().ok()) {
        Some(n) if measuring => n,
        _ if measuring => 200,
        _ => 1,
    };
    let warmup = if measuring { 10 } else { 0 };
    let inner = inner_exe()?;
    let work = std::env::temp_dir().join(format!("loom-bench-spawn-{}", std::process::id()));
    std::fs::create_dir_all(&work).map_err(fail("temp dir"))?;
    let case = std::rc::Rc::new(Case::new(&work)?);
    let h = host_support();

    let mut cases: Vec<(String, Run)> = vec![
        (
            "bare `/bin/true` (Command, posix_spawn)".into(),
            Box::new(|| status_ok(quiet(&mut Command::new("/bin/true")).status(), "bare")),
        ),
        (
            "bare, forked (no-op pre_exec)".into(),
            Box::new(|| {
                let mut cmd = Command::new("/bin/true");
                // SAFETY: the hook does nothing.
                unsafe { quiet(&mut cmd).pre_exec(|| Ok(())) };
                status_ok(cmd.status(), "bare, forked")
            }),
        ),
        (
            "bare, forked, new session (setsid)".into(),
            Box::new(|| {
                let mut cmd = Command::new("/bin/true");
                // SAFETY: the hook only calls setsid, which is async-signal-safe.
                unsafe {
                    quiet(&mut cmd).pre_exec(|| {
                        libc::setsid();
                        Ok(())
                    })
                };
                status_ok(cmd.status(), "bare, new session")
            }),
        ),
    ];
    if let Some(bwrap) = h.bwrap.clone() {
        cases.push((
            "bwrap alone (userns+pidns+netns, ro /)".into(),
            Box::new({
                let bwrap = bwrap.clone();
                move || {
                    let mut cmd = Command::new(&bwrap);
                    cmd.args([
                        "--unshare-user",
                        "--unshare-pid",
                        "--unshare-net",
                        "--die-with-parent",
                        "--new-session",
                        "--ro-bind",
                        "/",
                        "/",
                        "--dev",
                        "/dev",
                        "--proc",
                        "/proc",
                        "/bin/true",
                    ]);
                    status_ok(quiet(&mut cmd).status(), "bwrap alone")
                }
            }),
        ));
        if std::env::var_os("BWRAP_BREAKDOWN").is_some() {
            for (name, args) in bwrap_breakdown() {
                let bwrap = bwrap.clone();
                cases.push((
                    name.into(),
                    Box::new(move || {
                        let mut cmd = Command::new(&bwrap);
                        cmd.args(&args).arg("/bin/true");
                        status_ok(quiet(&mut cmd).status(), name)
                    }),
                ));
            }
        }
        let c = case.clone();
        cases.push((
            "bwrap, tier A's view, no inner stage".into(),
            Box::new(move || c.bwrap_view()),
        ));
    }
    // where the "sweep recorded" rows write their records: beside the granted directory, out of its reach, as loom's
    // data directory is
    let records = work.with_extension("records");
    for tier in [Tier::A, Tier::B, Tier::C] {
        let c = case.clone();
        let unrecorded = inner.clone();
        cases.push((
            format!("tier {} (`run_bash`)", tier.name()),
            Box::new(move || c.run(tier, &unrecorded, None)),
        ));
        let c = case.clone();
        let inner = inner.clone();
        let records = records.clone();
        cases.push((
            format!("tier {} (`run_bash`, sweep recorded)", tier.name()),
            Box::new(move || c.run(tier, &inner, Some(&records))),
        ));
    }
    // `BASELINE_INNER=path/to/loom`: tiers A and C again with another inner stage (an older loom runs it too).
    if let Some(other) = std::env::var_os("BASELINE_INNER").map(PathBuf::from) {
        for tier in [Tier::A, Tier::C] {
            let c = case.clone();
            let other = other.clone();
            cases.push((
                format!("tier {}, inner stage {}", tier.name(), other.display()),
                Box::new(move || c.run(tier, &other, None)),
            ));
        }
    }
    // `ONLY=tier` keeps the configurations whose name contains it (for profiling one of them); `ONLY="bare,tier B"`
    // those whose name contains any of the comma-separated parts.
    let only = std::env::var("ONLY").unwrap_or_default();
    cases.retain(|(name, _)| only.split(',').any(|part| name.contains(part)));
    // Drop what this host cannot run, saying why.
    cases.retain_mut(|(name, run)| match run() {
        Ok(()) => true,
        Err(e) => {
            eprintln!("sandbox_spawn: skipped {name}: {e}");
            false
        }
    });
    let before = loadavg();
    for _ in 0..warmup {
        for (_, run) in cases.iter_mut() {
            run()?;
        }
    }
    let mut samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(runs); cases.len()];
    for _ in 0..runs {
        for (i, (_, run)) in cases.iter_mut().enumerate() {
            let t = Instant::now();
            run()?;
            samples[i].push(t.elapsed());
        }
    }
    let after = loadavg();
    let _ = std::fs::remove_dir_all(&work);
    let _ = std::fs::remove_dir_all(&records);

    println!(
        "{runs} rounds, interleaved; {} cores; load average before {before}, after {after}",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!();
    println!(
        "| in process | mean [ms] | median [ms] | p90 [ms] | min [ms] | mean − bare [ms] | mean / bare | median / bare |"
    );
    println!("|:---|---:|---:|---:|---:|---:|---:|---:|");
    let mut bare = None;
    for ((name, _), s) in cases.iter().zip(samples.iter_mut()) {
        let (mean, median, p90, min) = stats(s);
        let (base, base_median) = *bare.get_or_insert((mean, median));
        println!(
            "| {name} | {mean:.2} | {median:.2} | {p90:.2} | {min:.2} | {:+.2} | {:.2}× | {:.2}× |",
            mean - base,
            mean / base,
            median / base_median
        );
    }
    Ok(())
}
