//! `loom job run [MANIFEST] --items FILE --index N [--count C] --out DIR`: one cell of a job, as an engine runs it.
//!
//! For each item of the cell, in its own directory `DIR/<item id>/`:
//! 1. claim the directory: a lock (a second process on the same cell fails at once) and `cell.json`, which names the
//!    run, the items and the index — a directory another run wrote is refused, a retry of the same cell is allowed;
//! 2. preflight: `loom doctor --json` into `doctor.json`; `--require-tier` unusable here exits 69;
//! 3. gate (with `--baseline`): `loom audit MANIFEST --baseline B --format json` with this job's environment into
//!    `gate.json`; a grown ceiling exits 3 and the turn does not run;
//! 4. the turn (run id `<base>-<index>`), every update into `updates.jsonl`, the run's state copied into `state/`;
//! 5. `result.json`, written whole (a temporary file renamed), last: a cell without one did not finish.
//!
//! The exit code is the first cell's that was not 0 (a cancelled cell stops the rest): 0, 1, 2, 3, 69, 75, 130.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use loom_protocol::SessionUpdate;
use loom_runtime::{prompt_blocking, BootOptions, Preamble, PromptSink};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::items::{hex, Item, Items};
use crate::exit;
use crate::output::fail;

/// Arguments of `loom job run`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The agent manifest (default ./agent.toml; a directory means its agent.toml).
    #[arg(value_name = "MANIFEST", default_value = super::super::manifest_arg::DEFAULT)]
    manifest: PathBuf,
    /// The items file (JSON Lines: {"id": "...", "prompt": "..."} per line).
    #[arg(long, value_name = "FILE")]
    items: PathBuf,
    /// The first item to run, from 0 (default: JOB_COMPLETION_INDEX, as a Kubernetes Indexed Job sets it).
    #[arg(long, value_name = "N")]
    index: Option<usize>,
    /// How many consecutive items to run from --index (a sharded matrix cell).
    #[arg(long, value_name = "C", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    count: u64,
    /// The results directory: each item writes DIR/<item id>/ (result.json, updates.jsonl, doctor.json, gate.json,
    /// state/).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Run the ceiling gate first, with this job's environment: a manifest path or git:REV. Growth exits 3.
    #[arg(long, value_name = "BASELINE")]
    baseline: Option<String>,
    #[command(flatten)]
    scope: super::super::scope::RunScope,
}

/// Runs `loom job run`.
pub fn run(args: Args) -> i32 {
    args.scope.apply();
    let manifest = match super::super::manifest_arg::resolve(&args.manifest) {
        Ok(m) => m,
        Err(e) => return fail(exit::FAILED, &e),
    };
    let items = match super::items::read(&args.items) {
        Ok(i) => i,
        Err(e) => return fail(exit::FAILED, &e),
    };
    let first = match args.index {
        Some(i) => i,
        None => match std::env::var("JOB_COMPLETION_INDEX") {
            Ok(v) => match v.trim().parse::<usize>() {
                Ok(i) => i,
                Err(_) => {
                    return fail(
                        exit::USAGE,
                        &format!("JOB_COMPLETION_INDEX = {v:?} is not an index; pass --index N"),
                    )
                }
            },
            Err(_) => {
                return fail(
                    exit::USAGE,
                    "which item? pass --index N (or run where JOB_COMPLETION_INDEX is set)",
                )
            }
        },
    };
    let n = items.items.len();
    let count = usize::try_from(args.count).unwrap_or(usize::MAX);
    let last = first.saturating_add(count).min(n);
    if first >= n {
        return fail(
            exit::USAGE,
            &format!(
                "--index {first} is out of range: {} holds {n} item{} (indexes 0 to {})",
                args.items.display(),
                if n == 1 { "" } else { "s" },
                n - 1
            ),
        );
    }
    if first.saturating_add(count) > n {
        return fail(
            exit::USAGE,
            &format!(
                "--index {first} --count {count} runs past the last item ({}): pass --count {}",
                n - 1,
                n - first
            ),
        );
    }
    let base = match base_run_id(&items) {
        Ok(b) => b,
        Err(e) => return fail(exit::USAGE, &e),
    };
    let manifest_sha = match std::fs::read(&manifest) {
        Ok(b) => hex(&Sha256::digest(&b)),
        Err(e) => {
            return fail(
                exit::FAILED,
                &format!("{}: cannot read the manifest: {e}", manifest.display()),
            )
        }
    };
    if let Err(e) = std::fs::create_dir_all(&args.out) {
        return fail(
            exit::FAILED,
            &format!(
                "{}: cannot create the results directory: {e}",
                args.out.display()
            ),
        );
    }
    let job = Job {
        parsed: loom_runtime::load_manifest(&manifest)
            .ok()
            .map(|l| l.manifest),
        manifest,
        manifest_sha,
        items_path: args.items.clone(),
        items_sha: items.sha256.clone(),
        out: args.out.clone(),
        baseline: args.baseline.clone(),
        base,
        doctor: std::cell::OnceCell::new(),
    };
    let mut code = exit::OK;
    for item in &items.items[first..last] {
        let c = job.cell(item, &args.scope);
        if code == exit::OK {
            code = c;
        }
        if c == exit::CANCELLED {
            return exit::CANCELLED;
        }
    }
    code
}

/// The run id the cells' ids start with: the runtime's run id (`--run-id`, which sets `LOOM_RUN_ID`, else
/// `LOOM_RUN_ID`, else GitHub's run id and attempt) without the Kubernetes index, which each cell's own index
/// replaces; else one made from the items file (the same items rerun resume the same cells).
fn base_run_id(items: &Items) -> Result<String, String> {
    let mut env = loom_runtime::env_map();
    env.remove("JOB_COMPLETION_INDEX");
    let base = match loom_runtime::run_id(&env) {
        Ok(Some(id)) => id,
        Ok(None) => format!("job-{}", &items.sha256[..12]),
        Err(e) => return Err(e.to_string()),
    };
    // room for "-<index>"
    let longest = format!("{base}-{}", items.items.len().saturating_sub(1));
    if loom_kernel::is_safe_id(&longest) {
        Ok(base)
    } else {
        Err(format!(
            "run id {base:?} cannot name a job's runs: with \"-<index>\" appended it must stay 1 to {} characters from \
             A-Z a-z 0-9 . _ -",
            loom_kernel::MAX_ID_LEN
        ))
    }
}

/// What every cell of this process shares.
struct Job {
    manifest: PathBuf,
    /// The manifest parsed once, for the run's storage (`None`: it does not load; each turn then fails at boot and
    /// says why in its result).
    parsed: Option<loom_kernel::Manifest>,
    manifest_sha: String,
    items_path: PathBuf,
    items_sha: String,
    out: PathBuf,
    baseline: Option<String>,
    base: String,
    /// `loom doctor --json`, once asked.
    doctor: std::cell::OnceCell<Vec<u8>>,
}

/// The fixed part of a cell's result.
struct Cell<'a> {
    job: &'a Job,
    item: &'a Item,
    run_id: String,
    dir: PathBuf,
    started: Instant,
}

impl Job {
    /// Runs one item; returns its exit code (after writing its result, when it got as far as its directory).
    fn cell(&self, item: &Item, scope: &super::super::scope::RunScope) -> i32 {
        let dir = self.out.join(&item.id);
        let run_id = format!("{}-{}", self.base, item.index);
        let marker = json!({
            "runId": run_id,
            "index": item.index,
            "id": item.id,
            "itemsSha256": self.items_sha,
        });
        let _lock = match claim(&dir, &marker) {
            Ok(l) => l,
            Err(e) => return fail(exit::FAILED, &e),
        };
        let cell = Cell {
            job: self,
            item,
            run_id,
            dir,
            started: Instant::now(),
        };
        // 1. preflight (the host's report, asked once per process: every cell here runs on the same host)
        let doctor = self
            .doctor
            .get_or_init(|| self.loom(&["doctor", "--json"]).stdout);
        let _ = write_whole(&cell.dir.join("doctor.json"), doctor);
        if let Some(why) = scope.required_tier_problem() {
            return cell.finish(exit::UNAVAILABLE, "unavailable", None, Some(why), None);
        }
        // 2. the gate, with this job's environment
        let gate = match &self.baseline {
            None => None,
            Some(b) => {
                let m = self.manifest.display().to_string();
                let run = self.loom(&["audit", &m, "--baseline", b, "--format", "json"]);
                let _ = write_whole(&cell.dir.join("gate.json"), &run.stdout);
                let (verdict, stop) = match run.code {
                    Some(0) => ("contained", None),
                    Some(3) => (
                        "grew",
                        Some((
                            exit::CEILING_GREW,
                            "ceiling-grew",
                            format!("the ceiling grew against the baseline {b} (gate.json); the turn did not run"),
                        )),
                    ),
                    _ => {
                        let why = String::from_utf8_lossy(&run.stderr).trim().to_string();
                        ("failed", Some((exit::FAILED, "failed", format!("the gate could not run: {why}"))))
                    }
                };
                let gate = json!({"baseline": b, "verdict": verdict});
                if let Some((code, outcome, why)) = stop {
                    return cell.finish(code, outcome, None, Some(why), Some(gate));
                }
                Some(gate)
            }
        };
        // 3. the turn, in a run of its own
        std::env::set_var("LOOM_RUN_ID", &cell.run_id);
        let updates = match std::fs::File::create(cell.dir.join("updates.jsonl")) {
            Ok(f) => f,
            Err(e) => {
                return cell.finish(
                    exit::FAILED,
                    "failed",
                    None,
                    Some(format!(
                        "cannot write {}: {e}",
                        cell.dir.join("updates.jsonl").display()
                    )),
                    gate,
                )
            }
        };
        let mut sink = Sink {
            updates: std::io::BufWriter::new(updates),
            requests: 0,
            last_usage: None,
            notes: Vec::new(),
        };
        // the results directory is out of the agent's reach: an authority file of this run
        let opts = BootOptions {
            job_results: Some(self.out.clone()),
            ..BootOptions::default()
        };
        let outcome = prompt_blocking(&self.manifest, &item.prompt, opts, &mut sink);
        let _ = sink.updates.flush();
        if let Some(m) = &self.parsed {
            // the run's state: its session log, compaction state, remembered answers; regular files only, so the
            // results directory carries the run to another machine
            let from = loom_runtime::storage_dir(m, &loom_runtime::env_map());
            copy_tree(&from, &cell.dir.join("state"), 0);
        }
        let usage = json!({
            "requests": sink.requests,
            "lastContextTokens": sink.last_usage.map(|u| u.used),
            "contextWindow": sink.last_usage.and_then(|u| u.size),
        });
        match outcome {
            Err(e) => cell.finish(exit::FAILED, "failed", None, Some(e.to_string()), gate),
            Ok(o) => {
                let (code, error) = super::super::prompt::exit_of(&o);
                let kind = match code {
                    exit::OK => "ok",
                    exit::TEMPFAIL => "transient",
                    exit::CANCELLED => "cancelled",
                    _ => "failed",
                };
                let stop = serde_json::to_value(o.stop).unwrap_or(Value::Null);
                let extra = json!({"stop": stop, "answer": o.final_text, "usage": usage, "notes": sink.notes});
                cell.finish(code, kind, Some(extra), error, gate)
            }
        }
    }

    /// Runs this loom binary with `args` (the job's environment), capturing its output.
    fn loom(&self, args: &[&str]) -> Captured {
        let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("loom"));
        match std::process::Command::new(exe)
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
        {
            Ok(o) => Captured {
                code: o.status.code(),
                stdout: o.stdout,
                stderr: o.stderr,
            },
            Err(e) => Captured {
                code: None,
                stdout: Vec::new(),
                stderr: format!("cannot run loom {}: {e}", args.join(" ")).into_bytes(),
            },
        }
    }
}

struct Captured {
    code: Option<i32>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

impl Cell<'_> {
    /// Writes `result.json` and returns `code`; a failure to write it is said and turns success into failure.
    fn finish(
        &self,
        code: i32,
        outcome: &str,
        turn: Option<Value>,
        error: Option<String>,
        gate: Option<Value>,
    ) -> i32 {
        let (tier, enforced) = match loom_sandbox::chosen_tier(None, None) {
            Ok((t, e)) => (json!(t.name()), json!(e)),
            Err(_) => (Value::Null, Value::Null),
        };
        let mut result = json!({
            "index": self.item.index,
            "id": self.item.id,
            "runId": self.run_id,
            "exit": code,
            "outcome": outcome,
            "error": error,
            "items": self.job.items_path.display().to_string(),
            "itemsSha256": self.job.items_sha,
            "manifest": self.job.manifest.display().to_string(),
            "manifestSha256": self.job.manifest_sha,
            "gate": gate,
            "tier": tier,
            "enforced": enforced,
            "durationMs": u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "loomVersion": env!("CARGO_PKG_VERSION"),
        });
        if let (Some(Value::Object(turn)), Some(r)) = (turn, result.as_object_mut()) {
            r.extend(turn);
        }
        let mut text = serde_json::to_string_pretty(&result).unwrap_or_default();
        text.push('\n');
        if let Err(e) = write_whole(&self.dir.join("result.json"), text.as_bytes()) {
            return fail(exit::FAILED, &e);
        }
        if let Some(e) = &result["error"].as_str() {
            eprintln!(
                "loom: item {} (index {}): {}",
                self.item.id,
                self.item.index,
                loom_runtime::terminal_safe(e)
            );
        }
        code
    }
}

/// Claims a cell's directory: creates it (or accepts it as a retry of the same cell), locks it for this process and
/// writes its `cell.json`. The lock is held while the returned file lives.
fn claim(dir: &Path, marker: &Value) -> Result<std::fs::File, String> {
    let shown = dir.display();
    match std::fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("{shown}: cannot create the cell's directory: {e}")),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|e| format!("{shown}: {e}"))?;
    if !meta.is_dir() {
        return Err(format!(
            "{shown}: is not a directory; pass another --out or remove it"
        ));
    }
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(".lock"))
        .map_err(|e| format!("{shown}: cannot lock the cell: {e}"))?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            return Err(format!(
                "{shown}: another loom job run is writing this cell now; each index runs in one process at a time"
            ))
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(format!("{shown}: cannot lock the cell: {e}")),
    }
    let cell_file = dir.join("cell.json");
    match std::fs::read(&cell_file) {
        Ok(bytes) => {
            let old: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            if &old != marker {
                return Err(format!(
                    "{shown}: holds a cell of another run (run id {}, index {}, items sha256 {}); this is run id {}, \
                     index {}: pass an empty --out, or remove the directory",
                    old["runId"], old["index"], old["itemsSha256"], marker["runId"], marker["index"], 
                ));
            }
            // a retry of this cell: the last attempt's result goes, so a crash now leaves no stale success behind
            match std::fs::remove_file(dir.join("result.json")) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(format!(
                        "{shown}: cannot remove the last attempt's result.json: {e}"
                    ))
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let others = std::fs::read_dir(dir)
                .map_err(|e| format!("{shown}: {e}"))?
                .filter_map(Result::ok)
                .any(|e| e.file_name() != ".lock");
            if others {
                return Err(format!(
                    "{shown}: is not empty and no loom job wrote it; pass an empty --out, or remove the directory"
                ));
            }
            let mut text = serde_json::to_string_pretty(marker).unwrap_or_default();
            text.push('\n');
            write_whole(&cell_file, text.as_bytes())?;
        }
        Err(e) => return Err(format!("{}: {e}", cell_file.display())),
    }
    Ok(lock)
}

/// Writes `path` whole: a temporary file beside it, synced, renamed over it.
fn write_whole(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let tmp = path.with_extension("tmp");
    let done = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    done.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot write {}: {e}", path.display())
    })
}

fn copy_tree(from: &Path, to: &Path, depth: usize) {
    let Ok(entries) = std::fs::read_dir(from) else {
        return;
    };
    if depth > 8 || std::fs::create_dir_all(to).is_err() {
        return;
    }
    for e in entries.filter_map(Result::ok) {
        let Ok(t) = e.file_type() else { continue };
        if t.is_file() {
            let _ = std::fs::copy(e.path(), to.join(e.file_name()));
        } else if t.is_dir() {
            copy_tree(&e.path(), &to.join(e.file_name()), depth + 1);
        }
    }
}

/// Writes every update of the turn as one JSON line.
struct Sink {
    updates: std::io::BufWriter<std::fs::File>,
    requests: u64,
    last_usage: Option<loom_protocol::UsageUpdate>,
    notes: Vec<String>,
}

impl PromptSink for Sink {
    fn note(&mut self, note: &str) {
        eprintln!("loom: note: {}", loom_runtime::terminal_safe(note));
        self.notes.push(note.to_string());
    }

    fn wants_preamble(&self) -> bool {
        false
    }

    fn preamble(&mut self, _: &Preamble) {}

    fn update(&mut self, u: &SessionUpdate) {
        if let SessionUpdate::UsageUpdate(usage) = u {
            self.requests += 1;
            self.last_usage = Some(*usage);
        }
        // line by line, so a watcher (or a crash) sees every update written so far
        if let Ok(line) = serde_json::to_string(u) {
            let _ = writeln!(self.updates, "{line}");
            let _ = self.updates.flush();
        }
    }
}
