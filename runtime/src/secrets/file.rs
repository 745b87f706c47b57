//! Secrets files: how loom reads one (a regular file of at most [`MAX_SECRETS_FILE_BYTES`], never blocking on a
//! FIFO, a device or a socket) and the two formats (`.loom-secrets` lines or JSON, the user's TOML).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use loom_protocol::Secret;

/// The largest secrets file loom reads.
pub const MAX_SECRETS_FILE_BYTES: u64 = 1 << 20;

/// Why a secrets file could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct SecretsFileError {
    /// The file.
    pub path: String,
    /// What was wrong (never a value).
    pub reason: String,
}

/// Reads the secrets file `p` if it exists: without blocking on a FIFO, a device or a socket (opened non-blocking,
/// then only a regular file is read), without following a final symbolic link unless `follow`, and at most
/// [`MAX_SECRETS_FILE_BYTES`]. An error names the file and the fix, never a value.
pub fn read_secrets_file(p: &Path, follow: bool) -> Result<Option<String>, SecretsFileError> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let err = |reason: String| SecretsFileError {
        path: p.display().to_string(),
        reason,
    };
    let mut flags = libc::O_NONBLOCK | libc::O_NOCTTY;
    if !follow {
        flags |= libc::O_NOFOLLOW;
    }
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(p)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) && !follow => {
            return Err(err(
                "is a symbolic link; loom reads a project secrets file only as a regular file: replace the link \
                 with the file, or better, move the secrets to your user secrets file"
                    .into(),
            ))
        }
        Err(e) => return Err(err(format!("cannot be opened: {e}"))),
    };
    let meta = file
        .metadata()
        .map_err(|e| err(format!("cannot be inspected: {e}")))?;
    let ft = meta.file_type();
    if !ft.is_file() {
        let kind = if ft.is_fifo() {
            "a FIFO (named pipe)"
        } else if ft.is_socket() {
            "a socket"
        } else if ft.is_char_device() || ft.is_block_device() {
            "a device"
        } else if ft.is_dir() {
            "a directory"
        } else {
            "not a regular file"
        };
        return Err(err(format!(
            "is {kind}; a secrets file must be a regular file: remove it and write the secrets into a plain file"
        )));
    }
    if meta.len() > MAX_SECRETS_FILE_BYTES {
        return Err(err(format!(
            "is {} bytes; a secrets file may hold at most {MAX_SECRETS_FILE_BYTES} bytes",
            meta.len()
        )));
    }
    let mut bytes = Vec::new();
    file.take(MAX_SECRETS_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| err(format!("cannot be read: {e}")))?;
    if bytes.len() as u64 > MAX_SECRETS_FILE_BYTES {
        return Err(err(format!(
            "grew past {MAX_SECRETS_FILE_BYTES} bytes while being read; a secrets file may hold at most that"
        )));
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| err("is not UTF-8 text".into()))
}

/// Parses a `.loom-secrets` file: `KEY=value` lines (`#` comments, optional `export `, optional quotes) or a JSON
/// object of strings.
pub fn parse_dotfile(p: &Path, text: &str) -> Result<BTreeMap<String, Secret>, SecretsFileError> {
    let err = |reason: String| SecretsFileError {
        path: p.display().to_string(),
        reason,
    };
    if text.trim_start().starts_with('{') {
        let v: BTreeMap<String, serde_json::Value> =
            serde_json::from_str(text).map_err(|_| err("not a JSON object of strings".into()))?;
        return v
            .into_iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => Ok((k, Secret::new(s))),
                _ => Err(err(format!("{k}: the value must be a string"))),
            })
            .collect();
    }
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((k, v)) = line.split_once('=') else {
            // the line may hold a value: never echo it
            return Err(err(format!("line {}: expected KEY=value", i + 1)));
        };
        let v = v.trim();
        let v = v
            .strip_prefix('"')
            .and_then(|x| x.strip_suffix('"'))
            .or_else(|| v.strip_prefix('\'').and_then(|x| x.strip_suffix('\'')))
            .unwrap_or(v);
        out.insert(k.trim().to_string(), Secret::new(v));
    }
    Ok(out)
}

pub fn parse_toml_file(p: &Path, text: &str) -> Result<BTreeMap<String, Secret>, SecretsFileError> {
    let err = |reason: String| SecretsFileError {
        path: p.display().to_string(),
        reason,
    };
    let t: toml::Table =
        toml::from_str(text).map_err(|_| err("not valid TOML (KEY = \"value\" lines)".into()))?;
    t.into_iter()
        .map(|(k, v)| match v {
            toml::Value::String(s) => Ok((k, Secret::new(s))),
            _ => Err(err(format!("{k}: the value must be a string"))),
        })
        .collect()
}
