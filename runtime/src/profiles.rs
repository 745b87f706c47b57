//! Finding subagent profiles on disk: `.loom/agents/*.md` in the working directory (project) and
//! `<data>/agents/*.md` (user; a project profile of the same name wins). loom reads only regular files in real
//! directories (a link is never followed) and at most [`MAX_PROFILE_BYTES`] of each; both places are out of the
//! agent's reach (`.loom` is a protected name, loom's data directory an authority area), so an agent cannot write
//! the profiles its delegations would use. What a profile may do is the kernel's [`loom_kernel::judge_profile`].

use std::path::{Path, PathBuf};

use loom_kernel::{judge_profile, parse_profile, Manifest, Profile, ProfileVerdict, PROFILES_DIR};

use crate::guidance::{md_files, real_dir};

/// The largest profile file read.
pub const MAX_PROFILE_BYTES: u64 = 64 * 1024;

/// One profile file found.
#[derive(Debug, Clone)]
pub struct FoundProfile {
    /// Its path.
    pub path: PathBuf,
    /// `project` or `user`.
    pub scope: &'static str,
    /// The profile and the kernel's verdict on it, or why it does not parse.
    pub result: Result<(Profile, ProfileVerdict), String>,
    /// A project profile of the same name hides this one.
    pub shadowed: bool,
}

fn read(path: &Path) -> Result<String, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| format!("cannot be read ({e})"))?;
    if !f.metadata().is_ok_and(|m| m.is_file()) {
        return Err("is not a regular file".into());
    }
    let mut text = String::new();
    f.take(MAX_PROFILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot be read as UTF-8 text ({e})"))?;
    if text.len() as u64 > MAX_PROFILE_BYTES {
        return Err(format!("is longer than {MAX_PROFILE_BYTES} bytes"));
    }
    Ok(text)
}

/// The profiles of an agent with `manifest` working in `cwd`, loom's data directory being `data_home`: project
/// ones first, each judged against `manifest`.
pub fn discover_profiles(manifest: &Manifest, cwd: &Path, data_home: &Path) -> Vec<FoundProfile> {
    let mut out: Vec<FoundProfile> = Vec::new();
    for (scope, dir) in [
        ("project", cwd.join(PROFILES_DIR)),
        ("user", data_home.join("agents")),
    ] {
        // a project's .loom must itself be a real directory, as for project rules
        if scope == "project" && !real_dir(&cwd.join(".loom")) {
            continue;
        }
        for path in md_files(&dir).into_iter().map(|n| dir.join(n)) {
            let stem = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_string();
            let shadowed = out
                .iter()
                .any(|f| f.path.file_stem().and_then(|s| s.to_str()) == Some(stem.as_str()));
            let result = read(&path).and_then(|t| parse_profile(&t, &stem)).map(|p| {
                let v = judge_profile(manifest, &p);
                (p, v)
            });
            out.push(FoundProfile {
                path,
                scope,
                result,
                shadowed,
            });
        }
    }
    out
}

/// What the user is told about the profiles at boot: one line per profile that cannot be used.
pub(crate) fn profile_notes(found: &[FoundProfile]) -> Vec<String> {
    found
        .iter()
        .filter(|f| !f.shadowed)
        .filter_map(|f| match &f.result {
            Err(e) => Some(format!(
                "{}: not a subagent profile ({e}); it cannot be delegated to",
                f.path.display()
            )),
            Ok((p, v)) if !v.problems.is_empty() => Some(format!(
                "{}: subagent profile {} cannot be used: {}",
                f.path.display(),
                p.name,
                v.problems.join("; ")
            )),
            Ok(_) => None,
        })
        .collect()
}
