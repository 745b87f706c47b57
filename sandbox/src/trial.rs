//! Choosing the tier by trial: a tier is used only after a real command (`true`, under a minimal profile, through
//! the production spawn path) ran under it on this host, so `loom doctor` and every confined command agree, and a
//! host that *looks* capable — root in a container whose seccomp profile blocks user namespaces, a gVisor-like
//! kernel without `/proc/sys/user` — is judged by what happens, not by what its `/proc/sys` says.
//!
//! Each tier is tried at most once per process; the result is kept. `LOOM_SANDBOX_TIER` (what `--tier` sets) names
//! the one tier to use: when its trial fails, nothing runs (no fallback to another tier). `LOOM_SANDBOX_DISABLE`
//! (`a,b`) removes tiers from the candidates — for a host where a tier is known to misbehave; it can only remove.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::env::EnvPolicy;
use crate::error::{memory_file, TrialError};
use crate::probe::{host_support, tier_status, BackendError, HostSupport, Tier};
use crate::profile::{Entry, Facts, Limits, Profile, SystemDir, SYSTEM_DIRS};
use crate::spawn::{spawn_sandboxed_io, Launch, Stream, Streams};

/// The variable naming the tier to use (`a`, `b` or `c`; `--tier` sets it).
pub const TIER_VAR: &str = "LOOM_SANDBOX_TIER";
/// The variable naming tiers never to use (`a,b`).
pub const DISABLE_VAR: &str = "LOOM_SANDBOX_DISABLE";

/// A minimal profile (no roots, network off, `true` only) for the trial of each tier.
pub fn trial_profile() -> Profile {
    let system = SYSTEM_DIRS
        .iter()
        .map(PathBuf::from)
        .filter_map(|p| {
            let entry = crate::facts::HostFs.entry(&p)?;
            Some(SystemDir {
                symlink: match entry {
                    Entry::Symlink(t) => Some(t),
                    Entry::Dir => None,
                    Entry::File => return None,
                },
                path: p,
            })
        })
        .collect();
    Profile {
        grant: "{ commands = [\"true\"] }".into(),
        readable: Vec::new(),
        writable: Vec::new(),
        protected: Vec::new(),
        masked: Vec::new(),
        absent: Vec::new(),
        pinned: Vec::new(),
        system,
        network: false,
        env: EnvPolicy::Allow {
            names: vec!["PATH".into()],
            prefixes: Vec::new(),
        },
        limits: Limits::default(),
        cwd: "/".into(),
        home: None,
    }
}

/// Runs `true` under `tier` (the inner stage `inner_exe`, else the one next to this executable) and returns what was
/// enforced, or why it could not run. Spawns every time.
pub fn try_tier(
    h: &HostSupport,
    tier: Tier,
    inner_exe: Option<&Path>,
) -> Result<String, TrialError> {
    tier_status(h, tier)?;
    let exe = match inner_exe {
        Some(p) => p.to_path_buf(),
        None => crate::locate::inner_exe_next_to_current_exe()
            .map_err(|e| TrialError::NoInnerExe(e.to_string()))?,
    };
    let profile = trial_profile();
    let argv: Vec<OsString> = vec!["true".into()];
    let launch = Launch {
        profile: &profile,
        tier,
        bwrap: h.bwrap.as_deref(),
        bwrap_features: h.bwrap_features,
        inner_exe: &exe,
        argv: &argv,
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        // the trial's profile watches nothing
        sweep_records: None,
    };
    // The trial holds none of the caller's streams: a process of it that outlived the caller (bubblewrap's child,
    // should the caller be killed while bubblewrap sets up and the guard not take it: SECURITY.md) would otherwise
    // keep the caller's pipes open and whoever reads them waiting. What it says on stderr goes to a memory file
    // (close-on-exec: the child gets its own descriptor of it as stderr), read once it ended (a file, not a pipe:
    // reading it never waits for a writer).
    let said = memory_file(c"loom-trial-stderr", 0)
        .map_err(|e| TrialError::Refused(format!("no file for its stderr: {e}")))?;
    let stderr = said
        .try_clone()
        .map_err(|e| TrialError::Refused(format!("no file for its stderr: {e}")))?;
    let streams = Streams {
        stdin: Stream::Null,
        stdout: Stream::Null,
        stderr: Stream::Fd(stderr.into()),
    };
    let outcome = spawn_sandboxed_io(&launch, streams, &mut |_| {});
    let said = what_it_said(said);
    match outcome {
        Ok(o) if o.code == 0 => Ok(o.enforced),
        Ok(o) => Err(TrialError::Exited(o.code, said)),
        Err(e) => Err(TrialError::Refused(format!("{e}{said}"))),
    }
}

/// The most of a trial's stderr [`what_it_said`] keeps.
const SAID_BYTES: u64 = 2048;

/// What the trial wrote on stderr, as `: <text>` for an error message (its first [`SAID_BYTES`] bytes, trimmed), or
/// nothing when it wrote nothing.
fn what_it_said(mut file: std::fs::File) -> String {
    let mut bytes = Vec::new();
    let read = file
        .seek(SeekFrom::Start(0))
        .and_then(|_| (&mut file).take(SAID_BYTES).read_to_end(&mut bytes));
    let text = String::from_utf8_lossy(&bytes);
    match read {
        Ok(_) if !text.trim().is_empty() => format!(": {}", text.trim()),
        _ => String::new(),
    }
}

/// [`try_tier`] on this host, once per process per tier and inner stage.
pub fn tried(tier: Tier, inner_exe: Option<&Path>) -> Result<String, TrialError> {
    type Trials = BTreeMap<(Tier, Option<PathBuf>), Result<String, TrialError>>;
    static TRIED: Mutex<Trials> = Mutex::new(BTreeMap::new());
    let key = (tier, inner_exe.map(Path::to_path_buf));
    if let Some(r) = TRIED.lock().ok().and_then(|m| m.get(&key).cloned()) {
        return r;
    }
    let r = try_tier(host_support(), tier, inner_exe);
    if let Ok(mut m) = TRIED.lock() {
        m.entry(key).or_insert_with(|| r.clone());
    }
    r
}

/// The tiers `env` removes (`LOOM_SANDBOX_DISABLE`), or an error naming a value that is not a tier.
fn disabled(env: &BTreeMap<String, String>) -> Result<Vec<Tier>, BackendError> {
    let Some(v) = env.get(DISABLE_VAR).filter(|v| !v.trim().is_empty()) else {
        return Ok(Vec::new());
    };
    v.split(',')
        .map(|t| {
            Tier::parse(t.trim()).ok_or_else(|| {
                BackendError::None(format!(
                    "{DISABLE_VAR}={v}: {t:?} is not a tier (a, b or c)"
                ))
            })
        })
        .collect()
}

/// The tier `env` asks for (`LOOM_SANDBOX_TIER`), or an error naming a value that is not a tier.
pub fn requested_tier(env: &BTreeMap<String, String>) -> Result<Option<Tier>, BackendError> {
    match env
        .get(TIER_VAR)
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
    {
        None => Ok(None),
        Some(v) => Tier::parse(v)
            .map(Some)
            .ok_or_else(|| BackendError::None(format!("{TIER_VAR}={v}: expected a, b or c"))),
    }
}

/// The tier to confine commands with, chosen by trial: `requested` (else `LOOM_SANDBOX_TIER`) when given — its
/// trial must pass, there is no fallback — else the first of A, B, C whose trial passes. `trial` runs (or recalls)
/// one tier's trial; [`tried`] in production.
pub fn choose_by_trial(
    requested: Option<Tier>,
    env: &BTreeMap<String, String>,
    trial: &mut dyn FnMut(Tier) -> Result<String, TrialError>,
) -> Result<(Tier, String), BackendError> {
    let off = disabled(env)?;
    let requested = match requested {
        Some(t) => Some(t),
        None => requested_tier(env)?,
    };
    if let Some(t) = requested {
        if off.contains(&t) {
            return Err(BackendError::TierUnavailable {
                tier: t.name(),
                what: t.describe(),
                why: format!("{DISABLE_VAR} removes it"),
            });
        }
        return trial(t)
            .map(|e| (t, e))
            .map_err(|why| BackendError::TierUnavailable {
                tier: t.name(),
                what: t.describe(),
                why: format!("its trial run failed: {why}"),
            });
    }
    let mut whys = Vec::new();
    for t in [Tier::A, Tier::B, Tier::C] {
        if off.contains(&t) {
            whys.push(format!("tier {}: {DISABLE_VAR} removes it", t.name()));
            continue;
        }
        match trial(t) {
            Ok(e) => return Ok((t, e)),
            Err(why) => whys.push(format!("tier {}: {why}", t.name())),
        }
    }
    Err(BackendError::None(whys.join("; ")))
}

/// [`choose_by_trial`] with this process's environment and the cached trials (of the inner stage `inner_exe`, else
/// the one next to this executable).
pub fn chosen_tier(
    requested: Option<Tier>,
    inner_exe: Option<&Path>,
) -> Result<(Tier, String), BackendError> {
    let env: BTreeMap<String, String> = std::env::vars().collect();
    choose_by_trial(requested, &env, &mut |t| tried(t, inner_exe))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_first_tier_whose_trial_passes_is_chosen_and_a_named_one_has_no_fallback() {
        // a container: tier A looks available but its trial fails (seccomp blocks user namespaces)
        let mut calls = Vec::new();
        let mut trial = |t: Tier| {
            calls.push(t);
            match t {
                Tier::A => Err(TrialError::Refused(
                    "bwrap: setting up uid map: Permission denied".to_string(),
                )),
                _ => Ok(format!("tier={}", t.name())),
            }
        };
        let (t, enforced) = choose_by_trial(None, &env(&[]), &mut trial).unwrap();
        assert_eq!((t, enforced.as_str()), (Tier::B, "tier=B"));
        assert_eq!(calls, [Tier::A, Tier::B]);
        // asked for by name: its trial decides, nothing else is tried
        let mut only_a = |t: Tier| {
            assert_eq!(t, Tier::A);
            Err(TrialError::Refused("no".to_string()))
        };
        let e = choose_by_trial(Some(Tier::A), &env(&[]), &mut only_a).unwrap_err();
        assert!(e.to_string().contains("its trial run failed: no"), "{e}");
        // the variable names it the same way; a bad value is an error
        let mut ok = |t: Tier| Ok::<_, TrialError>(t.name().to_string());
        assert_eq!(
            choose_by_trial(None, &env(&[(TIER_VAR, "c")]), &mut ok)
                .unwrap()
                .0,
            Tier::C
        );
        assert!(choose_by_trial(None, &env(&[(TIER_VAR, "z")]), &mut ok).is_err());
        // disabling only removes
        let (t, _) = choose_by_trial(None, &env(&[(DISABLE_VAR, "a, b")]), &mut ok).unwrap();
        assert_eq!(t, Tier::C);
        assert!(choose_by_trial(None, &env(&[(DISABLE_VAR, "a,b,c")]), &mut ok).is_err());
        assert!(choose_by_trial(Some(Tier::A), &env(&[(DISABLE_VAR, "a")]), &mut ok).is_err());
        assert!(choose_by_trial(None, &env(&[(DISABLE_VAR, "x")]), &mut ok).is_err());
    }

    /// The trial gives the sandbox none of the caller's streams (stdin and stdout are /dev/null), so nothing of it
    /// that outlives the caller keeps the caller's pipes open; what it says on stderr is in the error. A stand-in
    /// for bubblewrap records its streams and fails.
    #[test]
    fn a_trial_holds_none_of_the_caller_s_streams_and_its_stderr_is_in_the_error() {
        let host = host_support();
        if let Err(e) = tier_status(host, Tier::A) {
            eprintln!("SKIPPED: tier A is not available on this host ({e})");
            return;
        }
        let dir = std::env::temp_dir().join(format!("loom-trial-streams-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let seen = dir.join("streams");
        let fake = dir.join("bwrap");
        std::fs::write(
            &fake,
            format!(
                "#!/bin/sh\nin=$(readlink /proc/$$/fd/0); out=$(readlink /proc/$$/fd/1)\necho \"$in $out\" > '{}'\necho 'bwrap: no user namespaces here' >&2\nexit 1\n",
                seen.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let mut h = host.clone();
        h.bwrap = Some(fake);
        let e = try_tier(&h, Tier::A, Some(Path::new("/bin/true"))).unwrap_err();
        assert!(
            e.to_string().contains("bwrap: no user namespaces here"),
            "{e}"
        );
        let streams = std::fs::read_to_string(&seen).unwrap();
        assert_eq!(streams, "/dev/null /dev/null\n");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
