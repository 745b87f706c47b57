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
    compile_skill, parse_skill_md, path_within, Access, Grant, Row, SkillFacts, ToolGroup, Value,
    READ_SKILL,
};
use serde_json::json;

use super::{Layer, SessionError};
use crate::model::ToolSpec;
use crate::tools::beneath::{open_read, read_capped, run_blocking, size_of, BeneathError, Target};
use crate::tools::{check_fields, Prepared, Tool, ToolOutput};
use crate::update::{SessionUpdate, ToolKind};

/// The label of the session's own group (`read_skill = { provider = "session" }`).
pub const SKILLS_SESSION_GROUP: &str = "skills session";
/// The largest SKILL.md or loom.toml read (1 MiB).
pub const MAX_SKILL_FILE: u64 = 1024 * 1024;
/// The largest bundled file `read_skill` returns (256 KiB).
pub const MAX_BUNDLED_READ: u64 = 256 * 1024;
/// Bundled files listed on activation.
pub const MAX_LISTED: usize = 50;

/// The most skills re-injected after a compaction (the oldest loaded goes first).
pub const MAX_KEPT_SKILLS: usize = 8;
/// The most characters of one skill's activation text re-injected after a compaction.
pub const MAX_KEPT_CHARS: usize = 8000;

/// What discovery needs besides the layer's config.
#[derive(Debug, Clone, Default)]
pub struct SkillsEnv {
    /// The OS home directory (`~`), when known.
    pub home: Option<PathBuf>,
    /// The root manifest's `[providers]` handles.
    pub root_handles: BTreeSet<String>,
    /// loom's data directory, where the bundled skills are written out (`None`: no bundled skills).
    pub data_home: Option<PathBuf>,
}

impl SkillsEnv {
    /// The facts discovery needs for `manifest`: the home directory, its `[providers]` handles, and loom's data
    /// directory from `env` (where the bundled skills are written out).
    pub fn for_manifest(
        manifest: &loom_kernel::Manifest,
        home: Option<PathBuf>,
        env: &BTreeMap<String, String>,
    ) -> SkillsEnv {
        SkillsEnv {
            home,
            root_handles: manifest.providers.keys().cloned().collect(),
            data_home: Some(crate::storage::data_home(env)),
        }
    }
}

/// Where a skill was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SkillSource {
    /// The project: a root the manifest names relative to itself, or `.loom/skills` / `.agents/skills` beside it.
    Workspace,
    /// The user's: `~/.skills` (the default root), `~/.loom/skills`, `~/.agents/skills`, a `~/…` root.
    User,
    /// An absolute root the manifest names.
    Root,
    /// Built into loom (the lowest root; `[session.skills] bundled = false` turns it off).
    Bundled,
}

impl SkillSource {
    /// Its name in `loom skills list` and `loom audit`.
    pub fn name(self) -> &'static str {
        match self {
            SkillSource::Workspace => "workspace",
            SkillSource::User => "user",
            SkillSource::Root => "root",
            SkillSource::Bundled => "bundled",
        }
    }
}

/// A bundled skill not used because a skill of the same name in a higher root overrides it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Override {
    /// The name.
    pub name: String,
    /// The folder of the skill used instead.
    pub by: PathBuf,
    /// Where that one comes from.
    pub by_source: SkillSource,
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
    /// Where it was found.
    pub source: SkillSource,
}

/// What a scan found.
#[derive(Debug, Clone, Default)]
pub struct Discovery {
    /// Well-formed skills, by name (the first root that has a name wins).
    pub skills: BTreeMap<String, FoundSkill>,
    /// Skipped skills, each with its path, what is wrong and the fix.
    pub warnings: Vec<String>,
    /// Bundled skills a higher root overrides, by name.
    pub overrides: Vec<Override>,
}

/// The roots the skills layer scans, in precedence order: `root` / `roots` from its config (default `~/.skills`;
/// relative to the manifest's directory, `~` is home), then `.loom/skills` and `.agents/skills` in the manifest's
/// directory, then in home. Missing roots are skipped at scan time.
pub fn skill_roots(config: &toml::Table, manifest_dir: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    tagged_skill_roots(config, manifest_dir, home)
        .into_iter()
        .map(|(p, _)| p)
        .collect()
}

/// [`skill_roots`], each with where its skills come from.
pub fn tagged_skill_roots(
    config: &toml::Table,
    manifest_dir: &Path,
    home: Option<&Path>,
) -> Vec<(PathBuf, SkillSource)> {
    let configured: Vec<String> = match (config.get("root"), config.get("roots")) {
        (Some(toml::Value::String(r)), _) => vec![r.clone()],
        (_, Some(toml::Value::Array(rs))) => rs
            .iter()
            .filter_map(|r| r.as_str().map(String::from))
            .collect(),
        _ => vec!["~/.skills".into()],
    };
    let mut roots: Vec<(PathBuf, SkillSource)> = Vec::new();
    for r in configured {
        let p = if r == "~" {
            home.map(|h| (h.to_path_buf(), SkillSource::User))
        } else if let Some(rest) = r.strip_prefix("~/") {
            home.map(|h| (h.join(rest), SkillSource::User))
        } else if Path::new(&r).is_absolute() {
            Some((PathBuf::from(r), SkillSource::Root))
        } else {
            Some((manifest_dir.join(r), SkillSource::Workspace))
        };
        roots.extend(p);
    }
    for (base, source) in std::iter::once((manifest_dir, SkillSource::Workspace))
        .chain(home.map(|h| (h, SkillSource::User)))
    {
        roots.push((base.join(".loom/skills"), source));
        roots.push((base.join(".agents/skills"), source));
    }
    roots
}

/// The roots a skills layer with `config` scans, in precedence order, the bundled skills last (unless `bundled =
/// false`), and a note when the bundled skills cannot be written out.
pub fn layer_roots(
    config: &toml::Table,
    manifest_dir: &Path,
    env: &SkillsEnv,
) -> (Vec<(PathBuf, SkillSource)>, Option<String>) {
    let mut roots = tagged_skill_roots(config, manifest_dir, env.home.as_deref());
    let wanted = config.get("bundled").and_then(toml::Value::as_bool) != Some(false);
    let Some(data) = env.data_home.as_deref().filter(|_| wanted) else {
        return (roots, None);
    };
    match bundled::root(data) {
        Ok(Some(root)) => {
            roots.push((root, SkillSource::Bundled));
            (roots, None)
        }
        Ok(None) => (roots, None),
        Err(e) => (
            roots,
            Some(format!(
                "the bundled skills are not available: {e}; set [session.skills] bundled = false to do without them"
            )),
        ),
    }
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
    let (roots, note) = layer_roots(&spec.config, manifest_dir, env);
    let mut found = discover_tagged(&roots, env);
    found.warnings.extend(note);
    Some(found)
}

#[cfg(test)]
/// Scans `roots` for skill folders and compiles each (see the module docs).
pub fn discover(roots: &[PathBuf], env: &SkillsEnv) -> Discovery {
    let tagged: Vec<(PathBuf, SkillSource)> = roots
        .iter()
        .map(|r| (r.clone(), SkillSource::Root))
        .collect();
    discover_tagged(&tagged, env)
}

/// [`discover`] over roots that say where their skills come from. A bundled skill that a higher root's skill of the
/// same name overrides is recorded as overridden; one whose overriding skill is broken is not used either (the
/// warning says which applies).
pub fn discover_tagged(roots: &[(PathBuf, SkillSource)], env: &SkillsEnv) -> Discovery {
    let mut out = Discovery::default();
    let mut seen_roots = BTreeSet::new();
    // folders whose SKILL.md was skipped, by folder name: they still hold the name against the bundled skills
    let mut broken: BTreeMap<String, PathBuf> = BTreeMap::new();
    for (root, source) in roots {
        let source = *source;
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
            let folder_name = folder
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_string();
            if source == SkillSource::Bundled {
                if let Some(first) = out.skills.get(&folder_name) {
                    out.overrides.push(Override {
                        name: folder_name,
                        by: first.dir.clone(),
                        by_source: first.source,
                    });
                    continue;
                }
                if let Some(bad) = broken.get(&folder_name) {
                    out.warnings.push(format!(
                        "the bundled skill {folder_name} is not used: {} (skipped above) overrides it; fix that SKILL.md, or remove the folder to use the bundled one",
                        bad.display()
                    ));
                    continue;
                }
            }
            match load_skill(&folder, env) {
                Ok(mut skill) => {
                    skill.source = source;
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
                Err(w) => {
                    broken.entry(folder_name).or_insert(folder.clone());
                    out.warnings.push(w);
                }
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
        source: SkillSource::Root,
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
    /// The skills this session activated, oldest first: (name, the activation text, capped), at most
    /// [`MAX_KEPT_SKILLS`]; re-injected after a compaction.
    loaded: Vec<(String, String)>,
    /// Where `loaded` is kept between processes (the agent's storage), so a resumed session keeps it too.
    loaded_file: Option<PathBuf>,
}

/// The kernel's subtractive rule with the manifest and path facts bound: `(boot group, rescanned group)`.
pub type Keeper =
    Arc<dyn Fn(&ToolGroup, &ToolGroup) -> Result<(), loom_kernel::RescanDrop> + Send + Sync>;

/// The `skills` layer.
pub struct SkillsLayer {
    state: Arc<Mutex<State>>,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

impl SkillsLayer {
    #[cfg(test)]
    /// Scans `roots` once. No skill is active until [`Layer::bind`] says which groups boot accepted.
    pub fn new(roots: Vec<PathBuf>, env: SkillsEnv) -> SkillsLayer {
        let tagged: Vec<(PathBuf, SkillSource)> =
            roots.into_iter().map(|r| (r, SkillSource::Root)).collect();
        SkillsLayer::tagged(&tagged, env, None)
    }

    /// Scans `roots` (with where each comes from) once; `note` (the bundled skills' trouble) joins the warnings.
    pub fn tagged(
        roots: &[(PathBuf, SkillSource)],
        env: SkillsEnv,
        note: Option<String>,
    ) -> SkillsLayer {
        let mut found = discover_tagged(roots, &env);
        found.warnings.extend(note);
        SkillsLayer {
            state: Arc::new(Mutex::new(State {
                env,
                found: found.skills,
                warnings: found.warnings,
                active: BTreeSet::new(),
                keeps: None,
                dropped: Vec::new(),
                pending: Vec::new(),
                loaded: Vec::new(),
                loaded_file: None,
            })),
        }
    }

    /// Keeps the list of loaded skills in `file` (read now when it exists: a resumed session), so they are
    /// re-injected after a compaction in this process and the next. A file that cannot be read is a note.
    pub fn keeping_loaded_in(self, file: PathBuf) -> SkillsLayer {
        {
            let mut st = lock(&self.state);
            match std::fs::read(&file) {
                Ok(bytes) => match serde_json::from_slice::<Vec<(String, String)>>(&bytes) {
                    Ok(list) => {
                        st.loaded = list
                            .into_iter()
                            .filter(|(n, _)| st.found.contains_key(n))
                            .collect();
                    }
                    Err(e) => st.warnings.push(format!(
                        "{}: the list of loaded skills is not readable ({e}); it starts empty",
                        file.display()
                    )),
                },
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => st.warnings.push(format!(
                    "{}: cannot read the list of loaded skills: {e}",
                    file.display()
                )),
            }
            st.loaded_file = Some(file);
        }
        self
    }

    #[cfg(test)]
    /// The skills loaded this session, oldest first.
    pub fn loaded(&self) -> Vec<String> {
        lock(&self.state)
            .loaded
            .iter()
            .map(|(n, _)| n.clone())
            .collect()
    }

    #[cfg(test)]
    /// The active skills' names.
    pub fn active(&self) -> Vec<String> {
        lock(&self.state).active.iter().cloned().collect()
    }

    #[cfg(test)]
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
        let st = lock(&self.state);
        Ok(reinject(below, &st.loaded))
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

/// After a compaction (the history starts with the compaction's summary), the loaded skills whose activation is no
/// longer in the history are appended to the summary message, so their instructions stay in force.
fn reinject(mut below: Vec<SessionUpdate>, loaded: &[(String, String)]) -> Vec<SessionUpdate> {
    use crate::session::compactor::opening_summary;
    if loaded.is_empty() || opening_summary(&mut below).is_none() {
        return below;
    }
    // one pass over the history: the tool results' text, in which kept activations show their `<skill name=…>` tag
    let results: Vec<String> = below
        .iter()
        .filter_map(|e| match e {
            SessionUpdate::ToolCallUpdate(t) => Some(t.text()),
            _ => None,
        })
        .collect();
    let missing: Vec<&(String, String)> = loaded
        .iter()
        .filter(|(name, _)| {
            let tag = format!("<skill name=\"{name}\"");
            !results.iter().any(|t| t.contains(&tag))
        })
        .collect();
    if missing.is_empty() {
        return below;
    }
    if let Some(first) = opening_summary(&mut below) {
        let mut text = first.content.as_text().to_string();
        text.push_str(
            "\n\nSkills activated earlier in this session (kept through the compaction; their instructions still apply):",
        );
        for (_, activation) in missing {
            text.push_str("\n\n");
            text.push_str(activation);
        }
        first.content = crate::update::Content::text(text);
    }
    below
}

/// Records an activation: the skill goes to the end of the loaded list (the oldest beyond [`MAX_KEPT_SKILLS`] is
/// dropped, with a notice), and the list is saved when the layer keeps it.
fn remember(state: &Mutex<State>, name: &str, activation: &str) {
    let mut kept: String = activation.chars().take(MAX_KEPT_CHARS).collect();
    if kept.len() < activation.len() {
        kept.push_str(&format!(
            "\n[cut at {MAX_KEPT_CHARS} characters; read_skill {{\"skill\": \"{name}\"}} has the rest]"
        ));
    }
    let mut st = lock(state);
    st.loaded.retain(|(n, _)| n != name);
    st.loaded.push((name.to_string(), kept));
    while st.loaded.len() > MAX_KEPT_SKILLS {
        let (old, _) = st.loaded.remove(0);
        st.pending.push(format!(
            "skill {old} is no longer kept through compactions: at most {MAX_KEPT_SKILLS} loaded skills are, the \
             oldest goes first"
        ));
    }
    if let Some(file) = st.loaded_file.clone() {
        let text = serde_json::to_vec(&st.loaded).unwrap_or_default();
        let tmp = file.with_extension("tmp");
        let saved = file
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&tmp, &text))
            .and_then(|()| std::fs::rename(&tmp, &file));
        if let Err(e) = saved {
            st.pending.push(format!(
                "cannot save the list of loaded skills to {}: {e}; a resumed session will not re-inject them",
                file.display()
            ));
        }
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
        let state = self.state.clone();
        let shown = target.display().to_string();
        Ok(
            crate::tools::CallHead::one_path(READ_SKILL, &shown, Access::Read).then(Box::new(
                move |_auth, ctx| {
                    Box::pin(async move {
                        // the read and, for an activation, saving the loaded list: off the async workers
                        match run_blocking(&ctx.cancel, None, move || {
                            let text = run_read(&skill, path.as_deref(), &target)?;
                            if path.is_none() {
                                remember(&state, &skill.name, &text);
                            }
                            Ok(text)
                        })
                        .await
                        {
                            Ok(text) => ToolOutput::ok(text),
                            Err(e) => ToolOutput::error(e),
                        }
                    })
                },
            )),
        )
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
                Err(BeneathError::Directory { .. }) => {
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

pub mod bundled;
#[cfg(test)]
mod tests;
