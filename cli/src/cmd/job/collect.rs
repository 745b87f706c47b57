//! `loom job collect PATH... [--items FILE] [--format text|json|sarif]`: merges the cells' `result.json` files into
//! one report, and exits 1 when any cell failed, did not finish, or (with `--items`) never ran.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::items::Items;
use crate::exit;
use crate::output::{emit, fail};

/// How `loom job collect` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One line per cell and a summary.
    Text,
    /// `{"summary", "cells", "unfinished", "missing"}`.
    Json,
    /// SARIF 2.1.0: one result per failed, unfinished or missing cell, at its line of the items file.
    Sarif,
}

/// Arguments of `loom job collect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// result.json files, cell directories, or results directories (`--out` of `loom job run`; searched two levels
    /// deep, as an artifact download nests them).
    #[arg(value_name = "PATH", required = true)]
    paths: Vec<PathBuf>,
    /// The items file: every item without a result is reported missing, and results of other items are refused.
    #[arg(long, value_name = "FILE")]
    items: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

/// A cell found on disk.
struct Found {
    /// Its directory.
    dir: PathBuf,
    /// Its result, when it finished.
    result: Option<Value>,
    /// Its `cell.json` (run id, index, id, items).
    cell: Option<Value>,
}

/// Runs `loom job collect`.
pub fn run(args: Args) -> i32 {
    let items = match &args.items {
        Some(p) => match super::items::read(p) {
            Ok(i) => Some(i),
            Err(e) => return fail(exit::FAILED, &e),
        },
        None => None,
    };
    let mut found = Vec::new();
    for p in &args.paths {
        if let Err(e) = find(p, 0, &mut found) {
            return fail(exit::FAILED, &e);
        }
    }
    if found.is_empty() {
        return fail(
            exit::FAILED,
            "no results found: pass the --out directory of `loom job run`, cell directories or result.json files",
        );
    }
    let report = match merge(found, items.as_ref(), args.items.as_deref()) {
        Ok(r) => r,
        Err(e) => return fail(exit::FAILED, &e),
    };
    let text = match args.format {
        Format::Text => render_text(&report),
        Format::Json => pretty(&report.json()),
        Format::Sarif => pretty(&report.sarif(args.items.as_deref())),
    };
    if !emit(&text) {
        return exit::OK;
    }
    if report.failed() {
        exit::FAILED
    } else {
        exit::OK
    }
}

fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    s
}

/// Collects the cells under `p`.
fn find(p: &Path, depth: usize, out: &mut Vec<Found>) -> Result<(), String> {
    let meta = std::fs::metadata(p).map_err(|e| format!("{}: {e}", p.display()))?;
    if meta.is_file() {
        let dir = p.parent().unwrap_or(Path::new(".")).to_path_buf();
        out.push(Found {
            result: Some(read_json(p)?),
            cell: read_json(&dir.join("cell.json")).ok(),
            dir,
        });
        return Ok(());
    }
    let result = p.join("result.json");
    let cell = p.join("cell.json");
    if result.is_file() || cell.is_file() {
        out.push(Found {
            dir: p.to_path_buf(),
            result: if result.is_file() {
                Some(read_json(&result)?)
            } else {
                None
            },
            cell: read_json(&cell).ok(),
        });
        return Ok(());
    }
    if depth >= 2 {
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
        .map_err(|e| format!("{}: {e}", p.display()))?
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    entries.sort();
    for e in entries {
        find(&e, depth + 1, out)?;
    }
    Ok(())
}

fn read_json(p: &Path) -> Result<Value, String> {
    let bytes = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| format!("{}: not a loom job result: {e}", p.display()))
}

/// The merged cells.
struct Report {
    /// Finished cells by index.
    cells: BTreeMap<u64, Value>,
    /// Cells that started and left no result (crashed, killed, still running): (dir, cell.json).
    unfinished: Vec<(PathBuf, Value)>,
    /// Items with no cell at all (`--items`): (index, id, line).
    missing: Vec<(usize, String, usize)>,
    /// Item lines by index (`--items`), for SARIF locations.
    lines: BTreeMap<u64, usize>,
}

fn merge(
    found: Vec<Found>,
    items: Option<&Items>,
    items_path: Option<&Path>,
) -> Result<Report, String> {
    let mut cells: BTreeMap<u64, Value> = BTreeMap::new();
    let mut unfinished = Vec::new();
    for f in found {
        let from = |what: &Value| {
            if let Some(items) = items {
                let sha = what["itemsSha256"].as_str().unwrap_or_default();
                if sha != items.sha256 {
                    return Err(format!(
                        "{}: belongs to other items (sha256 {sha}) than {} ({}); collect each job's results with its \
                         own items file",
                        f.dir.display(),
                        items_path.map(|p| p.display().to_string()).unwrap_or_default(),
                        items.sha256
                    ));
                }
            }
            Ok(())
        };
        match (f.result, f.cell) {
            (Some(r), _) => {
                from(&r)?;
                let Some(index) = r["index"].as_u64() else {
                    return Err(format!("{}: result.json has no index", f.dir.display()));
                };
                if let Some(old) = cells.get(&index) {
                    if old["runId"] != r["runId"] || old["id"] != r["id"] {
                        return Err(format!(
                            "index {index} has two results ({} and {}, run ids {} and {}); collect one run at a time",
                            old["id"], r["id"], old["runId"], r["runId"]
                        ));
                    }
                }
                cells.insert(index, r);
            }
            (None, Some(c)) => {
                from(&c)?;
                unfinished.push((f.dir, c));
            }
            (None, None) => {}
        }
    }
    let mut missing = Vec::new();
    let mut lines = BTreeMap::new();
    if let Some(items) = items {
        for i in &items.items {
            lines.insert(i.index as u64, i.line);
            let started = unfinished
                .iter()
                .any(|(_, c)| c["index"].as_u64() == Some(i.index as u64));
            if !cells.contains_key(&(i.index as u64)) && !started {
                missing.push((i.index, i.id.clone(), i.line));
            }
        }
        if let Some((&index, _)) = cells.range(items.items.len() as u64..).next() {
            return Err(format!(
                "a result has index {index}, past the items file's last ({})",
                items.items.len() - 1
            ));
        }
    }
    Ok(Report {
        cells,
        unfinished,
        missing,
        lines,
    })
}

impl Report {
    fn failed_cells(&self) -> impl Iterator<Item = &Value> {
        self.cells
            .values()
            .filter(|c| c["exit"].as_i64() != Some(0))
    }

    fn failed(&self) -> bool {
        self.failed_cells().next().is_some()
            || !self.unfinished.is_empty()
            || !self.missing.is_empty()
    }

    fn summary(&self) -> Value {
        let mut by_outcome: BTreeMap<String, u64> = BTreeMap::new();
        for c in self.cells.values() {
            *by_outcome
                .entry(c["outcome"].as_str().unwrap_or("unknown").to_string())
                .or_default() += 1;
        }
        json!({
            "cells": self.cells.len(),
            "ok": self.cells.values().filter(|c| c["exit"].as_i64() == Some(0)).count(),
            "failed": self.failed_cells().count(),
            "unfinished": self.unfinished.len(),
            "missing": self.missing.len(),
            "byOutcome": by_outcome,
        })
    }

    fn json(&self) -> Value {
        json!({
            "summary": self.summary(),
            "cells": self.cells.values().collect::<Vec<_>>(),
            "unfinished": self.unfinished.iter().map(|(d, c)| json!({"dir": d.display().to_string(), "cell": c})).collect::<Vec<_>>(),
            "missing": self.missing.iter().map(|(i, id, _)| json!({"index": i, "id": id})).collect::<Vec<_>>(),
        })
    }

    fn sarif(&self, items: Option<&Path>) -> Value {
        let uri = items
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "items.jsonl".into());
        let location = |index: u64| {
            let mut loc = json!({"artifactLocation": {"uri": uri}});
            if let Some(line) = self.lines.get(&index) {
                loc["region"] = json!({"startLine": line});
            }
            json!([{"physicalLocation": loc}])
        };
        let mut results = Vec::new();
        for c in self.failed_cells() {
            let index = c["index"].as_u64().unwrap_or(0);
            let outcome = c["outcome"].as_str().unwrap_or("failed");
            results.push(json!({
                "ruleId": format!("loom-job/{outcome}"),
                "level": "error",
                "message": {"text": format!(
                    "item {} (index {index}) exited {}: {}",
                    c["id"].as_str().unwrap_or("?"),
                    c["exit"],
                    c["error"].as_str().unwrap_or(outcome)
                )},
                "locations": location(index),
            }));
        }
        for (dir, c) in &self.unfinished {
            let index = c["index"].as_u64().unwrap_or(0);
            results.push(json!({
                "ruleId": "loom-job/unfinished",
                "level": "error",
                "message": {"text": format!(
                    "item {} (index {index}) started and left no result in {}",
                    c["id"].as_str().unwrap_or("?"),
                    dir.display()
                )},
                "locations": location(index),
            }));
        }
        for (index, id, _) in &self.missing {
            results.push(json!({
                "ruleId": "loom-job/missing",
                "level": "error",
                "message": {"text": format!("item {id} (index {index}) has no result")},
                "locations": location(*index as u64),
            }));
        }
        let rules: Vec<Value> = [
            (
                "loom-job/failed",
                "A cell failed: a manifest, boot or turn error (exit 1 or 2)",
            ),
            (
                "loom-job/ceiling-grew",
                "The ceiling grew against the baseline (exit 3); the turn did not run",
            ),
            (
                "loom-job/unavailable",
                "The required sandbox tier is unusable on the node (exit 69)",
            ),
            (
                "loom-job/transient",
                "A transient provider error outlasted the retries (exit 75)",
            ),
            (
                "loom-job/cancelled",
                "The turn was cancelled (exit 130: a deadline or a signal)",
            ),
            ("loom-job/unfinished", "A cell started and left no result"),
            ("loom-job/missing", "An item has no cell"),
        ]
        .iter()
        .map(|(id, text)| json!({"id": id, "shortDescription": {"text": text}}))
        .collect();
        json!({
            "version": "2.1.0",
            "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
            "runs": [{
                "tool": {"driver": {"name": "loom", "version": env!("CARGO_PKG_VERSION"), "rules": rules}},
                "results": results,
            }],
        })
    }
}

fn render_text(r: &Report) -> String {
    let mut out = String::new();
    for c in r.cells.values() {
        let mut line = format!(
            "{:>5}  {:<24} exit {:<3} {}",
            c["index"].as_u64().unwrap_or(0),
            c["id"].as_str().unwrap_or("?"),
            c["exit"].as_i64().unwrap_or(-1),
            c["outcome"].as_str().unwrap_or("?")
        );
        if let Some(t) = c["tier"].as_str() {
            line.push_str(&format!("  tier {t}"));
        }
        if let Some(e) = c["error"].as_str() {
            line.push_str(&format!("  {}", first_line(e)));
        }
        out.push_str(&loom_runtime::terminal_safe(&line));
        out.push('\n');
    }
    for (dir, c) in &r.unfinished {
        out.push_str(&format!(
            "{:>5}  {:<24} no result: started in {} and did not finish\n",
            c["index"].as_u64().unwrap_or(0),
            c["id"].as_str().unwrap_or("?"),
            dir.display()
        ));
    }
    for (index, id, _) in &r.missing {
        out.push_str(&format!("{index:>5}  {id:<24} missing: no cell ran it\n"));
    }
    let s = r.summary();
    out.push_str(&format!(
        "{} cell{}: {} ok, {} failed, {} unfinished, {} missing\n",
        s["cells"],
        if s["cells"] == 1 { "" } else { "s" },
        s["ok"],
        s["failed"],
        s["unfinished"],
        s["missing"]
    ));
    out
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}
