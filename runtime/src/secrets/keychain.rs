//! The OS keychain store of the secrets chain (cargo feature `keychain`, on by default). On Linux it is the Secret
//! Service, reached through the `secret-tool` command (libsecret): a secret `NAME` is the item with the attributes
//! `service = loom`, `account = NAME` (store one with `secret-tool store --label "loom NAME" service loom account
//! NAME`). When `secret-tool` is not installed, or fails, the keychain is **unavailable**: the chain goes on to the
//! next store, and a secret found nowhere is reported with the reason the keychain could not be asked — never
//! silently as merely missing.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use loom_protocol::Secret;

/// How long one lookup may take (a locked keyring that prompts, a hung D-Bus).
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// The keychain: the `secret-tool` to run, or why there is none; and the last failure, for the missing-secret error.
#[derive(Debug, Clone)]
pub struct Keychain {
    program: Result<PathBuf, String>,
    failure: Arc<Mutex<Option<String>>>,
}

impl Keychain {
    /// The keychain reached through `secret-tool` on `path` (a `PATH` value; relative entries are skipped).
    pub fn on_path(path: Option<&str>) -> Keychain {
        let found = path.and_then(|p| {
            std::env::split_paths(p)
                .filter(|d| d.is_absolute())
                .map(|d| d.join("secret-tool"))
                .find(|c| is_executable(c))
        });
        Keychain {
            program: found.ok_or_else(|| {
                "`secret-tool` is not installed (install libsecret-tools for the Secret Service keychain)"
                    .to_string()
            }),
            failure: Arc::new(Mutex::new(None)),
        }
    }

    /// Looks `name` up. `Ok(None)`: the keychain holds no such item. `Err`: the keychain is unavailable (the reason
    /// is also kept for [`Keychain::unavailable`]).
    pub fn lookup(&self, name: &str) -> Result<Option<Secret>, String> {
        let result = match &self.program {
            Ok(p) => run_lookup(p, name),
            Err(why) => Err(why.clone()),
        };
        if let Err(why) = &result {
            if let Ok(mut f) = self.failure.lock() {
                *f = Some(why.clone());
            }
        }
        result
    }

    /// Why there is no keychain to ask at all (`secret-tool` is not on `PATH`), before any lookup.
    pub fn not_installed(&self) -> Option<String> {
        self.program.as_ref().err().cloned()
    }

    /// Why the keychain could not be asked, if a lookup found it unavailable.
    pub fn unavailable(&self) -> Option<String> {
        self.failure.lock().ok().and_then(|f| f.clone())
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn run_lookup(program: &Path, name: &str) -> Result<Option<Secret>, String> {
    let mut child = Command::new(program)
        .args(["lookup", "service", "loom", "account", name])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    let status = match loom_sandbox::wait_within(&mut child, LOOKUP_TIMEOUT) {
        Ok(Some(s)) => s,
        Ok(None) => {
            return Err(format!(
                "{} did not answer within {} s (is the keyring locked?)",
                program.display(),
                LOOKUP_TIMEOUT.as_secs()
            ))
        }
        Err(e) => return Err(format!("{}: {e}", program.display())),
    };
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut s) = child.stdout.take() {
        let _ = s.read_to_string(&mut out);
    }
    if let Some(mut s) = child.stderr.take() {
        let _ = s.read_to_string(&mut err);
    }
    let value = out.strip_suffix('\n').unwrap_or(&out);
    match status.code() {
        Some(0) if !value.is_empty() => Ok(Some(Secret::new(value))),
        // secret-tool exits 1, silently, when no item matches
        Some(0) | Some(1) if err.trim().is_empty() => Ok(None),
        // its stderr names the failure (no Secret Service on the bus, …); it never holds the value
        _ => Err(format!(
            "{} failed ({status}): {}",
            program.display(),
            err.trim().lines().next().unwrap_or("no message")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A fake `secret-tool` in a fresh directory: `script` is its body (sh).
    fn fake(script: &str) -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("secret-tool");
        std::fs::write(&p, format!("#!/bin/sh\n{script}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = dir.path().display().to_string();
        (dir, path)
    }

    #[test]
    fn a_stored_item_is_found_by_service_and_account() {
        let (_d, path) = fake(
            r#"[ "$1 $2 $3 $4 $5" = "lookup service loom account GH_TOKEN" ] && printf 'gh-from-keyring' && exit 0
exit 1"#,
        );
        let k = Keychain::on_path(Some(&path));
        assert_eq!(
            k.lookup("GH_TOKEN")
                .unwrap()
                .map(|s| s.expose().to_string()),
            Some("gh-from-keyring".into())
        );
        assert_eq!(k.lookup("OTHER").unwrap(), None);
        assert_eq!(k.unavailable(), None);
    }

    #[test]
    fn absent_or_failing_is_unavailable_with_the_reason() {
        let k = Keychain::on_path(Some("/nonexistent-dir"));
        let e = k.lookup("X").unwrap_err();
        assert!(e.contains("secret-tool` is not installed"), "{e}");
        assert_eq!(k.unavailable(), Some(e));
        let (_d, path) = fake("echo 'Cannot autolaunch D-Bus without X11 $DISPLAY' >&2; exit 1");
        let e = Keychain::on_path(Some(&path)).lookup("X").unwrap_err();
        assert!(e.contains("Cannot autolaunch D-Bus"), "{e}");
    }
}
