//! `LOOM_SECRETS_DIR`: secrets an engine hands loom as a directory of files, one per secret — the layout of
//! Kubernetes Secret volumes and Docker/Compose `/run/secrets`. The file name is the secret's name, the contents its
//! value (one trailing newline trimmed).
//!
//! A Kubernetes volume holds each secret as a symlink into a timestamped directory (`NAME -> ..data/NAME`,
//! `..data -> ..2026_12_03…`), so links are followed — but only while they stay inside the directory; an entry
//! that leads out of it, is not a regular file, or is larger than the secrets-file limit stops loom with the entry's
//! name and the reason, never its value. Names starting with `.` (the volume's own bookkeeping) are skipped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use loom_protocol::Secret;

use super::file::{read_secrets_file, SecretsFileError};

/// The variable that names the directory.
pub const SECRETS_DIR_VAR: &str = "LOOM_SECRETS_DIR";

/// At most this many secrets are read from the directory.
pub const MAX_DIR_SECRETS: usize = 1024;

/// The directory `env` names, when it names one (an absolute path; anything else is an error naming the variable).
pub fn secrets_dir(env: &BTreeMap<String, String>) -> Result<Option<PathBuf>, SecretsFileError> {
    match env.get(SECRETS_DIR_VAR).filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) if v.starts_with('/') => Ok(Some(PathBuf::from(v))),
        Some(v) => Err(SecretsFileError {
            path: format!("{SECRETS_DIR_VAR}={v}"),
            reason:
                "must be an absolute path (the directory of secret files an engine mounts, such as \
                     /run/secrets)"
                    .into(),
        }),
    }
}

/// Reads every secret of `dir` (module doc).
pub fn read_secrets_dir(dir: &Path) -> Result<BTreeMap<String, Secret>, SecretsFileError> {
    let err = |path: &Path, reason: String| SecretsFileError {
        path: path.display().to_string(),
        reason,
    };
    let real_dir = std::fs::canonicalize(dir).map_err(|e| {
        err(
            dir,
            format!("({SECRETS_DIR_VAR}) cannot be opened as a directory of secrets: {e}"),
        )
    })?;
    if !real_dir.is_dir() {
        return Err(err(dir, format!("({SECRETS_DIR_VAR}) is not a directory")));
    }
    let entries = std::fs::read_dir(&real_dir)
        .map_err(|e| err(dir, format!("({SECRETS_DIR_VAR}) cannot be listed: {e}")))?;
    let mut out = BTreeMap::new();
    for entry in entries {
        let entry = entry.map_err(|e| err(dir, format!("cannot be listed: {e}")))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue; // `..data` and the volume's timestamped directories
        }
        if out.len() == MAX_DIR_SECRETS {
            return Err(err(
                dir,
                format!("holds more than {MAX_DIR_SECRETS} secrets; mount only the ones this agent needs"),
            ));
        }
        let path = real_dir.join(&name);
        let real = std::fs::canonicalize(&path)
            .map_err(|e| err(&path, format!("cannot be resolved: {e}")))?;
        if !real.starts_with(&real_dir) {
            return Err(err(
                &path,
                format!(
                    "leads out of {} (to {}); a secret in {SECRETS_DIR_VAR} must be a file inside it",
                    dir.display(),
                    real.display()
                ),
            ));
        }
        let Some(text) = read_secrets_file(&real, false)? else {
            continue; // removed while being read
        };
        let value = text
            .strip_suffix("\r\n")
            .or_else(|| text.strip_suffix('\n'))
            .unwrap_or(&text);
        out.insert(name, Secret::new(value.to_string()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kubernetes_volume_reads_through_its_links_and_nothing_leads_out() {
        let d = tempfile::tempdir().unwrap();
        let vol = d.path().join("vol");
        let stamp = vol.join("..2026_12_03_01");
        std::fs::create_dir_all(&stamp).unwrap();
        std::fs::write(stamp.join("API_KEY"), "sk-volume\n").unwrap();
        std::fs::write(stamp.join("TOKEN"), "two\nlines\r\n").unwrap();
        std::os::unix::fs::symlink("..2026_12_03_01", vol.join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/API_KEY", vol.join("API_KEY")).unwrap();
        std::os::unix::fs::symlink("..data/TOKEN", vol.join("TOKEN")).unwrap();
        let got = read_secrets_dir(&vol).unwrap();
        assert_eq!(got.keys().collect::<Vec<_>>(), ["API_KEY", "TOKEN"]);
        assert_eq!(got["API_KEY"].expose(), "sk-volume");
        assert_eq!(got["TOKEN"].expose(), "two\nlines");
        // a link out of the directory is refused, naming the entry, never a value
        std::fs::write(d.path().join("outside"), "elsewhere-value").unwrap();
        std::os::unix::fs::symlink(d.path().join("outside"), vol.join("ESCAPE")).unwrap();
        let e = read_secrets_dir(&vol).unwrap_err().to_string();
        assert!(e.contains("ESCAPE") && e.contains("leads out of"), "{e}");
        assert!(!e.contains("elsewhere-value"), "{e}");
        std::fs::remove_file(vol.join("ESCAPE")).unwrap();
        // not a regular file, too large
        std::fs::create_dir(vol.join("SUBDIR")).unwrap();
        assert!(read_secrets_dir(&vol)
            .unwrap_err()
            .to_string()
            .contains("is a directory"));
        std::fs::remove_dir(vol.join("SUBDIR")).unwrap();
        std::fs::write(vol.join("BIG"), vec![b'x'; 2 << 20]).unwrap();
        assert!(read_secrets_dir(&vol)
            .unwrap_err()
            .to_string()
            .contains("at most"));
    }

    #[test]
    fn the_variable_must_name_an_absolute_directory() {
        let env = |v: &str| BTreeMap::from([(SECRETS_DIR_VAR.to_string(), v.to_string())]);
        assert_eq!(secrets_dir(&BTreeMap::new()).unwrap(), None);
        assert_eq!(
            secrets_dir(&env("/run/secrets")).unwrap(),
            Some(PathBuf::from("/run/secrets"))
        );
        assert!(secrets_dir(&env("run/secrets"))
            .unwrap_err()
            .to_string()
            .contains("absolute"));
        let e = read_secrets_dir(Path::new("/nonexistent/loom-secrets"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("LOOM_SECRETS_DIR"), "{e}");
    }
}
