//! Checking a model file before llama.cpp reads it: the GGUF header, and for a known model its pinned sha256.
//!
//! Hashing a large file at every start would cost seconds, so a full check leaves a stamp beside the file (device,
//! inode, size, modification and change times). A later start that finds the same stamp skips the hash; any write to
//! the file changes its change time, so a tampered file is hashed again and refused.

use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::catalog::KnownModel;

/// Why a model file cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelFileError {
    /// The file is missing or unreadable.
    #[error("model file {path}: {source}; check [harness] model, or install a known model with `loom model install NAME`")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Not a GGUF file, or a GGUF version this build cannot read.
    #[error(
        "model file {path} is not a GGUF model file ({why}); point [harness] model at a .gguf file"
    )]
    NotGguf {
        /// The file.
        path: PathBuf,
        /// What the header said.
        why: String,
    },
    /// A known model's file does not match its pinned hash or size.
    #[error("model file {path} does not match the pinned sha256 of {name} ({why}); it was changed or damaged after install — reinstall it with `loom model install --force {name}`")]
    Tampered {
        /// The file.
        path: PathBuf,
        /// The known model.
        name: String,
        /// Size or hash difference.
        why: String,
    },
}

/// GGUF versions llama.cpp reads.
const GGUF_VERSIONS: std::ops::RangeInclusive<u32> = 2..=3;

/// Checks that `path` starts like a GGUF file llama.cpp can read.
pub fn check_gguf_header(path: &Path) -> Result<(), ModelFileError> {
    let unreadable = |source| ModelFileError::Unreadable {
        path: path.to_path_buf(),
        source,
    };
    let mut f = File::open(path).map_err(unreadable)?;
    let mut head = [0u8; 8];
    let mut got = 0;
    while got < head.len() {
        match f.read(&mut head[got..]).map_err(unreadable)? {
            0 => break,
            n => got += n,
        }
    }
    let not = |why: String| ModelFileError::NotGguf {
        path: path.to_path_buf(),
        why,
    };
    if got < 8 {
        return Err(not(format!("only {got} bytes")));
    }
    if &head[..4] != b"GGUF" {
        return Err(not("no GGUF magic at the start".into()));
    }
    let version = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
    if !GGUF_VERSIONS.contains(&version) {
        return Err(not(format!("GGUF version {version}, expected 2 or 3")));
    }
    Ok(())
}

/// The sha256 of the file at `path`, reporting bytes read so far to `progress`.
pub fn sha256_file(path: &Path, progress: &mut dyn FnMut(u64)) -> std::io::Result<String> {
    let mut r = BufReader::with_capacity(1 << 20, File::open(path)?);
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = r.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        total += n as u64;
        progress(total);
    }
    Ok(hex(&h.finalize()))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn stamp_path(path: &Path) -> PathBuf {
    let mut name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".verified");
    path.with_file_name(name)
}

fn stamp_of(path: &Path, sha256: &str) -> std::io::Result<String> {
    let m = std::fs::metadata(path)?;
    Ok(format!(
        "{} {} {} {}.{} {}.{} {sha256}\n",
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec()
    ))
}

/// Checks a known model's installed file: header, size, and sha256 (or a stamp left by an earlier full check of this
/// very file). A passing full check leaves a new stamp.
pub fn verify_known(model: &KnownModel, path: &Path) -> Result<(), ModelFileError> {
    check_gguf_header(path)?;
    let unreadable = |source| ModelFileError::Unreadable {
        path: path.to_path_buf(),
        source,
    };
    let tampered = |why: String| ModelFileError::Tampered {
        path: path.to_path_buf(),
        name: model.name.to_string(),
        why,
    };
    let size = std::fs::metadata(path).map_err(unreadable)?.len();
    if size != model.size {
        return Err(tampered(format!("{size} bytes, expected {}", model.size)));
    }
    let stamp = stamp_of(path, model.sha256).map_err(unreadable)?;
    if std::fs::read_to_string(stamp_path(path)).is_ok_and(|s| s == stamp) {
        return Ok(());
    }
    let sum = sha256_file(path, &mut |_| {}).map_err(unreadable)?;
    if sum != model.sha256 {
        let _ = std::fs::remove_file(stamp_path(path));
        return Err(tampered(format!("sha256 {sum}, expected {}", model.sha256)));
    }
    // a stamp that cannot be written only costs the next start a full hash
    let _ = write_atomic(&stamp_path(path), stamp.as_bytes());
    Ok(())
}

/// Writes `bytes` to `path` through a temporary file and a rename, so `path` is either old or new, never partial.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_os_string();
    tmp.push(format!(".tmp-{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let mut f = File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_checked() {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = d.path().join("m.gguf");
        std::fs::write(&p, b"GGUF\x03\x00\x00\x00rest").unwrap_or_else(|e| panic!("{e}"));
        assert!(check_gguf_header(&p).is_ok());
        std::fs::write(&p, b"GGU").unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            check_gguf_header(&p),
            Err(ModelFileError::NotGguf { .. })
        ));
        std::fs::write(&p, b"PK\x03\x04\x00\x00\x00\x00").unwrap_or_else(|e| panic!("{e}"));
        let e = check_gguf_header(&p)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("no GGUF magic"), "{e}");
        std::fs::write(&p, b"GGUF\x09\x00\x00\x00").unwrap_or_else(|e| panic!("{e}"));
        let e = check_gguf_header(&p)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("GGUF version 9"), "{e}");
        let e = check_gguf_header(&d.path().join("none.gguf"))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("loom model install"), "{e}");
    }

    #[test]
    fn a_known_model_file_is_hashed_then_stamped_and_a_change_is_caught() {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = d.path().join("m.gguf");
        let body = b"GGUF\x03\x00\x00\x00payload".to_vec();
        std::fs::write(&p, &body).unwrap_or_else(|e| panic!("{e}"));
        let sum = sha256_file(&p, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
        let sha: &'static str = Box::leak(sum.into_boxed_str());
        let model = KnownModel {
            name: "tiny",
            description: "",
            license: "",
            provenance: "",
            parts: &[],
            file: "m.gguf",
            sha256: sha,
            size: body.len() as u64,
            recommended: false,
            tool_use: "",
        };
        verify_known(&model, &p).unwrap_or_else(|e| panic!("{e}"));
        assert!(stamp_path(&p).exists());
        verify_known(&model, &p).unwrap_or_else(|e| panic!("{e}"));
        // same size, one byte changed
        let mut bad = body.clone();
        bad[10] ^= 1;
        std::fs::write(&p, &bad).unwrap_or_else(|e| panic!("{e}"));
        let e = verify_known(&model, &p)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            e.contains("does not match the pinned sha256 of tiny"),
            "{e}"
        );
        assert!(e.contains("loom model install --force tiny"), "{e}");
    }
}
