//! The `skills` session layer: discovers Agent Skills folders, contributes each skill's tool group (compiled by the
//! kernel) and the session's own `read_skill`, puts a catalog of the active skills in the system prompt, and rescans
//! before each turn — subtractively: a skill that disappears, stops parsing or now needs more than boot judged is
//! dropped; nothing new appears mid-session.
//!
//! This module only gathers facts (directory listings, canonical paths, file text). What a skill may do is decided
//! by the kernel: [`loom_kernel::compile_skill`], the judge at boot, [`loom_kernel::rescan_keeps`], and the call
//! decision for `read_skill` (a Files-algebra read under a grant of the active skills' directories, checked again
//! here against the one named skill's directory).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::future::BoxFuture;
use loom_kernel::{
    compile_skill, parse_skill_md, path_within, Access, CallFacts, Grant, Request, Row, SkillFacts,
    ToolGroup, Value, READ_SKILL,
};
use serde_json::json;

use super::{Layer, SessionError};
use crate::model::ToolSpec;
use crate::tools::beneath::{open_read, read_capped, run_blocking, size_of, Target};
use crate::tools::{check_fields, Prepared, Tool, ToolOutput};
use crate::update::{Location, SessionUpdate, ToolKind};

/// The label of the session's own group (`read_skill = { provider = "session" }`).
pub const SKILLS_SESSION_GROUP: &str = "skills session";
/// The largest SKILL.md or loom.toml read (1 MiB).
pub const MAX_SKILL_FILE: u64 = 1024 * 1024;
/// The largest bundled file `read_skill` returns (256 KiB).
pub const MAX_BUNDLED_READ: u64 = 256 * 1024;
/// Bundled files listed on activation.
pub const MAX_LISTED: usize = 50;

/// What discovery needs besides the layer's config.
#[derive(Debug, Clone, Default)]
pub struct SkillsEnv {
    /// The OS home directory (`~`), when known.
    pub home: Option<PathBuf>,
    /// The root manifest's `[providers]` handles.
    pub root_handles: BTreeSet<String>,
}

/// One discovered, well-formed skill.
#[derive(Debug, Clone)]
pub struct FoundSkill {
    /// Its name (= its folder's).
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its canonical directory.
    pub dir: PathBuf,
    /// Its compiled tool group (`skill <name>`).
    pub group: ToolGroup,
}

/// What a scan found.
#[derive(Debug, Clone, Default)]
pub struct Discovery {
    /// Well-formed skills, by name (the first root that has a name wins).
    pub skills: BTreeMap<String, FoundSkill>,
    /// Skipped skills, each with its path, what is wrong and the fix.
    pub warnings: Vec<String>,
}

/// The roots the skills layer scans, in precedence order: `root` / `roots` from its config (default `~/.skills`;
/// relative to the manifest's directory, `~` is home), then `.loom/skills` and `.agents/skills` in the manifest's
/// directory, then in home. Missing roots are skipped at scan time.
pub fn skill_roots(config: &toml::Table, manifest_dir: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let configured: Vec<String> = match (config.get("root"), config.get("roots")) {
        (Some(toml::Value::String(r)), _) => vec![r.clone()],
        (_, Some(toml::Value::Array(rs))) => rs
            .iter()
            .filter_map(|r| r.as_str().map(String::from))
            .collect(),
        _ => vec!["~/.skills".into()],
    };
    let mut roots: Vec<PathBuf> = Vec::new();
    for r in configured {
        let p = if r == "~" {
            home.map(Path::to_path_buf)
        } else if let Some(rest) = r.strip_prefix("~/") {
            home.map(|h| h.join(rest))
        } else if Path::new(&r).is_absolute() {
            Some(PathBuf::from(r))
        } else {
            Some(manifest_dir.join(r))
        };
        roots.extend(p);
    }
    for base in std::iter::once(manifest_dir).chain(home) {
        roots.push(base.join(".loom/skills"));
        roots.push(base.join(".agents/skills"));
    }
    roots
}

/// What the skills layer of `manifest` (at `manifest_dir`) would find, for `loom audit`: `None` when its chain has no
/// skills layer.
pub fn manifest_skills(
    manifest: &loom_kernel::Manifest,
    manifest_dir: &Path,
    env: &SkillsEnv,
) -> Option<Discovery> {
    let spec = manifest
        .session
        .layers
        .iter()
        .find(|l| l.provider == "skills")?;
    let roots = skill_roots(&spec.config, manifest_dir, env.home.as_deref());
    Some(discover(&roots, env))
}

/// Scans `roots` for skill folders and compiles each (see the module docs).
pub fn discover(roots: &[PathBuf], env: &SkillsEnv) -> Discovery {
    let mut out = Discovery::default();
    let mut seen_roots = BTreeSet::new();
    for root in roots {
        let Ok(canon) = std::fs::canonicalize(root) else {
            continue;
        };
        if !seen_roots.insert(canon.clone()) {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&canon) else {
            continue;
        };
        let mut folders: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        folders.sort();
        for folder in folders {
            let hidden = folder
                .file_name()
                .and_then(|n| n.to_str())
                .is_none_or(|n| n.starts_with('.'));
            if hidden || !folder.join("SKILL.md").exists() && !is_symlink(&folder.join("SKILL.md"))
            {
                continue;
            }
            match load_skill(&folder, env) {
                Ok(skill) => {
                    if let Some(first) = out.skills.get(&skill.name) {
                        out.warnings.push(format!(
                            "{}: skipped: a skill named {:?} was already found at {} (the first root wins); rename \
                             one of them",
                            skill.dir.display(),
                            skill.name,
                            first.dir.display()
                        ));
                    } else {
                        out.skills.insert(skill.name.clone(), skill);
                    }
                }
                Err(w) => out.warnings.push(w),
            }
        }
    }
    out
}

fn is_symlink(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink())
}

/// Reads one skill folder. `Err` is the warning: the file, the key, what is wrong and the fix.
pub fn load_skill(folder: &Path, env: &SkillsEnv) -> Result<FoundSkill, String> {
    let skipped = |m: String| format!("{m}; the skill is skipped");
    let name = folder
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    let dir =
        std::fs::canonicalize(folder).map_err(|e| skipped(format!("{}: {e}", folder.display())))?;
    let skill_md = folder.join("SKILL.md");
    let text = read_contained(&dir, &skill_md).map_err(skipped)?;
    let origin = skill_md.display().to_string();
    let doc = parse_skill_md(&text, &name, &origin).map_err(|e| skipped(e.to_string()))?;
    let sidecar_path = folder.join("loom.toml");
    let sidecar = if sidecar_path.exists() || is_symlink(&sidecar_path) {
        Some(read_contained(&dir, &sidecar_path).map_err(skipped)?)
    } else {
        None
    };
    let sidecar_origin = sidecar_path.display().to_string();
    let dir_text = dir.display().to_string();
    let group = compile_skill(
        SkillFacts {
            doc: &doc,
            origin: &origin,
            dir: &dir_text,
            sidecar: sidecar.as_deref().map(|t| (t, sidecar_origin.as_str())),
        },
        &env.root_handles,
    )
    .map_err(|e| skipped(e.to_string()))?;
    Ok(FoundSkill {
        name: doc.name,
        description: doc.description,
        dir,
        group,
    })
}

/// Reads a skill file that must resolve inside the skill's canonical `dir` (a symlink out of it is refused).
fn read_contained(dir: &Path, file: &Path) -> Result<String, String> {
    let shown = file.display();
    let real = std::fs::canonicalize(file).map_err(|e| format!("{shown}: {e}"))?;
    if !within(dir, &real) {
        return Err(format!(
            "{shown}: it is a symlink to {}, outside the skill's folder {}; loom reads a skill only from inside its \
             folder — copy the file into the folder instead of linking it",
            real.display(),
            dir.display()
        ));
    }
    // opened beneath the skill's folder, never through a symlink, a regular file only (a FIFO never blocks)
    let target = Target::within(dir, &real).map_err(|e| format!("{shown}: {e}"))?;
    let (mut f, _) = open_read(&target, "a skill's SKILL.md and loom.toml are files")
        .map_err(|e| format!("{shown}: {e}"))?;
    let bytes = read_capped(&mut f, MAX_SKILL_FILE).map_err(|e| format!("{shown}: {e}"))?;
    if bytes.len() as u64 > MAX_SKILL_FILE {
        return Err(format!("{shown}: larger than {MAX_SKILL_FILE} bytes; keep it short and move detail into bundled files"));
    }
    String::from_utf8(bytes).map_err(|_| format!("{shown}: not UTF-8 text; save it as UTF-8"))
}

fn within(dir: &Path, p: &Path) -> bool {
    match (dir.to_str(), p.to_str()) {
        (Some(d), Some(p)) => path_within(d, p),
        _ => false,
    }
}

/// The state the layer and its `read_skill` tool share.
struct State {
    env: SkillsEnv,
    /// Everything discovered at boot.
    found: BTreeMap<String, FoundSkill>,
    /// Warnings from the boot scan.
    warnings: Vec<String>,
    /// The skills the model sees: accepted at boot and still kept by every rescan.
    active: BTreeSet<String>,
    /// Decides whether a rescanned group may stay (the kernel's subtractive rule, bound at boot).
    keeps: Option<Keeper>,
    /// Why skills were dropped mid-session.
    dropped: Vec<String>,
    /// Drops not yet told to the user.
    pending: Vec<String>,
}

/// The kernel's subtractive rule with the manifest and path facts bound: `(boot group, rescanned group)`.
pub type Keeper = Arc<dyn Fn(&ToolGroup, &ToolGroup) -> Result<(), String> + Send + Sync>;

/// The `skills` layer.
pub struct SkillsLayer {
    state: Arc<Mutex<State>>,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

impl SkillsLayer {
    /// Scans `roots` once. No skill is active until [`Layer::bind`] says which groups boot accepted.
    pub fn new(roots: Vec<PathBuf>, env: SkillsEnv) -> SkillsLayer {
        let found = discover(&roots, &env);
        SkillsLayer {
            state: Arc::new(Mutex::new(State {
                env,
                found: found.skills,
                warnings: found.warnings,
                active: BTreeSet::new(),
                keeps: None,
                dropped: Vec::new(),
                pending: Vec::new(),
            })),
        }
    }

    /// The active skills' names.
    pub fn active(&self) -> Vec<String> {
        lock(&self.state).active.iter().cloned().collect()
    }

    /// Why skills were dropped by rescans.
    pub fn dropped(&self) -> Vec<String> {
        lock(&self.state).dropped.clone()
    }
}

/// The session's own group: `read_skill = { provider = "session" }`.
pub fn session_group() -> ToolGroup {
    let mut tools = BTreeMap::new();
    tools.insert(
        READ_SKILL.to_string(),
        loom_kernel::ToolEntry {
            provider: loom_kernel::ProviderRef::Session,
            tool: None,
            capabilities: None,
        },
    );
    ToolGroup {
        label: SKILLS_SESSION_GROUP.into(),
        origin: "session.skills".into(),
        tools,
        providers: BTreeMap::new(),
    }
}

impl Layer for SkillsLayer {
    fn name(&self) -> &str {
        "skills"
    }

    fn stores(&self) -> bool {
        false
    }

    fn push(&mut self, events: Vec<SessionUpdate>) -> Result<Vec<SessionUpdate>, SessionError> {
        Ok(events)
    }

    fn pull(&self, below: Vec<SessionUpdate>) -> Result<Vec<SessionUpdate>, SessionError> {
        Ok(below)
    }

    fn system_prompt_section(&self) -> Option<String> {
        let st = lock(&self.state);
        if st.active.is_empty() {
            return None;
        }
        let mut s = String::from(
            "# Skills\n\nSkills are folders of instructions, scripts and resources for particular tasks. When a task \
             matches a skill's description, activate it first by calling read_skill with {\"skill\": \"<name>\"}, \
             then follow its instructions; read one of its bundled files with {\"skill\": \"<name>\", \"path\": \
             \"<relative path>\"}.\n",
        );
        for name in &st.active {
            if let Some(k) = st.found.get(name) {
                s.push_str(&format!(
                    "\n- {} ({}): {}",
                    k.name,
                    k.dir.display(),
                    k.description
                ));
            }
        }
        Some(s)
    }

    fn tools(&self) -> Vec<ToolGroup> {
        let st = lock(&self.state);
        std::iter::once(session_group())
            .chain(st.found.values().map(|k| k.group.clone()))
            .collect()
    }

    fn notes(&self) -> Vec<String> {
        lock(&self.state).warnings.clone()
    }

    fn bind(&mut self, accepted: &BTreeSet<String>, keeps: Keeper) {
        let mut st = lock(&self.state);
        st.active = st
            .found
            .values()
            .filter(|k| accepted.contains(&k.group.label))
            .map(|k| k.name.clone())
            .collect();
        st.keeps = Some(keeps);
    }

    fn session_tool(&self, name: &str) -> Option<Arc<dyn Tool>> {
        (name == READ_SKILL).then(|| {
            Arc::new(ReadSkill {
                state: self.state.clone(),
            }) as Arc<dyn Tool>
        })
    }

    fn session_tool_grant(&self, name: &str) -> Option<Grant> {
        if name != READ_SKILL {
            return None;
        }
        let st = lock(&self.state);
        let rows = st
            .active
            .iter()
            .filter_map(|n| st.found.get(n))
            .map(|k| Row::from_pairs([("read_paths", Value::strs([k.dir.display().to_string()]))]))
            .collect();
        Some(Grant::set(rows))
    }

    fn take_notices(&mut self) -> Vec<String> {
        std::mem::take(&mut lock(&self.state).pending)
    }

    fn prepare_turn(&mut self) -> BoxFuture<'_, Result<(), SessionError>> {
        let state = self.state.clone();
        Box::pin(async move {
            // file reads: off the async workers
            let _ = tokio::task::spawn_blocking(move || rescan(&state)).await;
            Ok(())
        })
    }
}

/// Re-reads every active skill; drops the ones that are gone, malformed, or need more than boot judged.
fn rescan(state: &Mutex<State>) {
    let (active, found, env, keeps) = {
        let st = lock(state);
        let Some(keeps) = st.keeps.clone() else {
            return;
        };
        (st.active.clone(), st.found.clone(), st.env.clone(), keeps)
    };
    let mut dropped = Vec::new();
    for name in active {
        let Some(boot) = found.get(&name) else {
            continue;
        };
        let verdict = load_skill(&boot.dir, &env).and_then(|now| {
            if now.dir != boot.dir {
                return Err(format!(
                    "{}: the folder now resolves to {}",
                    boot.dir.display(),
                    now.dir.display()
                ));
            }
            keeps(&boot.group, &now.group).map_err(|why| format!("{}: {why}", boot.group.origin))
        });
        if let Err(why) = verdict {
            dropped.push((name, why));
        }
    }
    if dropped.is_empty() {
        return;
    }
    let mut st = lock(state);
    for (name, why) in dropped {
        st.active.remove(&name);
        let note = format!("skill {name} is no longer available this session: {why}");
        st.dropped.push(note.clone());
        st.pending.push(note);
    }
}

/// `read_skill`: activates a skill (its SKILL.md body in `<skill>` tags plus a listing of bundled files) or reads one
/// bundled file by `path`. Runs as session code; containment is checked here (realpath of both sides) and by the
/// kernel's decision under a grant of the active skills' directories.
struct ReadSkill {
    state: Arc<Mutex<State>>,
}

impl Tool for ReadSkill {
    fn name(&self) -> &str {
        READ_SKILL
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: READ_SKILL.into(),
            description: "Activate a skill from the Skills catalog: returns its instructions and a list of its \
                          bundled files. Pass `path` (relative to the skill's folder) to read one bundled file."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "skill": { "type": "string", "description": "The skill's name, as in the catalog." },
                    "path": { "type": "string", "description": "A bundled file, relative to the skill's folder." },
                },
                "required": ["skill"],
            }),
        }
    }

    fn prepare(&self, input: &serde_json::Value) -> Result<Prepared, String> {
        check_fields(input, READ_SKILL, &["skill", "path"])?;
        let name = crate::tools::str_field(input, READ_SKILL, "skill")?.to_string();
        let path = match input.get("path") {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(p)) => Some(p.clone()),
            Some(_) => return Err("read_skill: path must be a string".into()),
        };
        let skill = {
            let st = lock(&self.state);
            match st.found.get(&name).filter(|_| st.active.contains(&name)) {
                Some(k) => k.clone(),
                None => {
                    let names: Vec<&str> = st.active.iter().map(String::as_str).collect();
                    return Err(format!(
                        "read_skill: there is no skill named {name:?}; the skills are: {}",
                        if names.is_empty() {
                            "(none)".to_string()
                        } else {
                            names.join(", ")
                        }
                    ));
                }
            }
        };
        let target = match &path {
            None => skill.dir.join("SKILL.md"),
            Some(p) => resolve_bundled(&skill, p)?,
        };
        let shown = target.display().to_string();
        Ok(Prepared {
            request: Request::File {
                path: shown.clone(),
                access: Access::Read,
            },
            facts: CallFacts {
                tool: READ_SKILL.into(),
                path: Some(shown.clone()),
                ..CallFacts::default()
            },
            locations: vec![Location { path: shown }],
            run: Box::new(move |_auth, ctx| {
                Box::pin(async move {
                    match run_blocking(&ctx.cancel, None, move || {
                        run_read(&skill, path.as_deref(), &target)
                    })
                    .await
                    {
                        Ok(text) => ToolOutput::ok(text),
                        Err(e) => ToolOutput::error(e),
                    }
                })
            }),
        })
    }
}

/// Resolves a bundled `path` to its canonical file inside the skill's folder, or says why not.
fn resolve_bundled(skill: &FoundSkill, path: &str) -> Result<PathBuf, String> {
    let dir = &skill.dir;
    if Path::new(path).is_absolute() {
        return Err(format!(
            "read_skill: path {path:?} is absolute; give it relative to the skill's folder {} (e.g. \
             \"scripts/run.sh\")",
            dir.display()
        ));
    }
    let joined = dir.join(path);
    let real = std::fs::canonicalize(&joined).map_err(|e| {
        format!(
            "read_skill: {path:?} in skill {} ({}): {e}; activate the skill (read_skill without path) to list its \
             files",
            skill.name,
            dir.display()
        )
    })?;
    if !within(dir, &real) {
        return Err(format!(
            "read_skill: {path:?} resolves to {}, outside the skill's folder {}; read_skill reads only files inside \
             the skill's folder — give a path inside it",
            real.display(),
            dir.display()
        ));
    }
    Ok(real)
}

fn run_read(skill: &FoundSkill, path: Option<&str>, target: &Path) -> Result<String, String> {
    match path {
        None => {
            let text = read_contained(&skill.dir, target)?;
            let body = parse_skill_md(&text, &skill.name, &target.display().to_string())
                .map(|d| d.body)
                .map_err(|e| format!("read_skill: {e}"))?;
            let (files, more) = bundled_files(&skill.dir);
            let dir = skill.dir.display();
            let mut out = format!(
                "<skill name=\"{}\" directory=\"{dir}\">\n{}\n</skill>\n\nRelative paths in these instructions \
                 resolve against {dir}.",
                skill.name,
                body.trim()
            );
            if files.is_empty() {
                out.push_str("\nThis skill bundles no other files.");
            } else {
                out.push_str(&format!(
                    "\nBundled files (read one with read_skill {{\"skill\": \"{}\", \"path\": \"<path>\"}}):",
                    skill.name
                ));
                for f in &files {
                    out.push_str(&format!("\n- {f}"));
                }
                if more > 0 {
                    out.push_str(&format!("\n… and {more} more (not listed)"));
                }
            }
            Ok(out)
        }
        Some(p) => {
            // opened beneath the skill's folder, never through a symlink: a folder swapped for a link after the
            // check above is refused, not followed
            let t =
                Target::within(&skill.dir, target).map_err(|e| format!("read_skill: {p}: {e}"))?;
            let (mut f, meta) = match open_read(&t, "") {
                Ok(opened) => opened,
                Err(e) if e.starts_with("is a directory") => {
                    let (files, _) = bundled_files(&skill.dir);
                    return Err(format!(
                        "read_skill: {p} is a folder; pass one of the skill's files: {}",
                        files.join(", ")
                    ));
                }
                Err(e) => return Err(format!("read_skill: {p}: {e}")),
            };
            let size = size_of(&meta);
            let mut bytes = Vec::new();
            f.by_ref()
                .take(MAX_BUNDLED_READ)
                .read_to_end(&mut bytes)
                .map_err(|e| format!("read_skill: {p}: {e}"))?;
            let mut text = String::from_utf8(bytes).map_err(|_| {
                format!("read_skill: {p} is not UTF-8 text ({size} bytes); read_skill returns text only")
            })?;
            if size > MAX_BUNDLED_READ {
                text.push_str(&format!(
                    "\n[truncated: {p} is {size} bytes; the first {MAX_BUNDLED_READ} are shown]"
                ));
            }
            Ok(text)
        }
    }
}

/// Up to [`MAX_LISTED`] bundled files (relative paths, sorted, SKILL.md and hidden entries left out, symlinks that
/// leave the folder never listed), and how many more there are.
fn bundled_files(dir: &Path) -> (Vec<String>, usize) {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    let mut total = 0usize;
    let mut visited = 0usize;
    while let Some(d) = stack.pop() {
        // a bounded walk: a skill folder with a huge tree is listed in part
        visited += 1;
        if visited > 1000 {
            break;
        }
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        entries.sort();
        for p in entries.into_iter().rev() {
            let hidden = p
                .file_name()
                .and_then(|n| n.to_str())
                .is_none_or(|n| n.starts_with('.'));
            if hidden || p == dir.join("SKILL.md") {
                continue;
            }
            let Ok(meta) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            if meta.file_type().is_symlink() {
                match std::fs::canonicalize(&p) {
                    Ok(real) if within(dir, &real) && real.is_file() => {}
                    _ => continue,
                }
            } else if meta.is_dir() {
                stack.push(p);
                continue;
            }
            total += 1;
            if let Ok(rel) = p.strip_prefix(dir) {
                files.push(rel.display().to_string());
            }
        }
    }
    files.sort();
    files.truncate(MAX_LISTED);
    (files.clone(), total.saturating_sub(files.len()))
}

#[cfg(test)]
mod tests;
