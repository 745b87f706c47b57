//! What tiers A and C hand to bwrap besides the view: the inner stage's executable as a sealed in-memory copy, and
//! the compiled seccomp program (effectful).
//!
//! The inner stage is never executed from where it is installed. That file may lie inside a writable grant root
//! (loom installed in `~/.cargo/bin`, `~/.local/bin`, or run from a project's `target/`), where a command could
//! replace it — and a replaced stage would skip Landlock and seccomp while reporting them applied. Instead, loom
//! copies it once per process into a sealed memfd (no write, grow, shrink or further seals: its bytes can never change
//! again) and bwrap copies that read-only into each view (`--ro-bind-data`). Replacing the installed file during a
//! session changes nothing that runs; the copy is checked to be an ELF executable that did not change while it was
//! read. Only what the program loader maps is copied (up to the end of the last segment, without the section
//! headers): a debug build's debug information (tens of megabytes) would otherwise be copied into every view.

use std::ffi::CString;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use seccompiler::BpfProgram;

use crate::error::SpawnError;

/// The sealed copies made by this process, by installed path (usually one).
static SEALED: Mutex<Vec<(PathBuf, std::sync::Arc<OwnedFd>)>> = Mutex::new(Vec::new());

fn setup(why: String) -> SpawnError {
    SpawnError::Setup(why)
}

/// A fresh read-only descriptor, at offset 0, of this process's sealed copy of the executable at `path` (made on
/// first use).
pub(crate) fn sealed_copy(path: &Path) -> Result<OwnedFd, SpawnError> {
    let sealed = {
        let mut cache = SEALED.lock().unwrap_or_else(|e| e.into_inner());
        match cache.iter().find(|(p, _)| p == path) {
            Some((_, fd)) => fd.clone(),
            None => {
                let fd = std::sync::Arc::new(seal(path)?);
                cache.push((path.to_path_buf(), fd.clone()));
                fd
            }
        }
    };
    reopen_read_only(&sealed)
}

/// A new open file description of `fd` (its own offset, read-only, close-on-exec).
fn reopen_read_only(fd: &OwnedFd) -> Result<OwnedFd, SpawnError> {
    let path = CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map_err(|_| setup("a descriptor path holds a NUL byte".into()))?;
    // SAFETY: opening a NUL-terminated path; the result is checked.
    let raw = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if raw < 0 {
        return Err(setup(format!(
            "cannot reopen loom's copy of the sandbox's inner stage: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: the descriptor was just opened and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// The part of an ELF executable the program loader uses: everything up to the end of the program header table and
/// of the last segment's file contents, with the section header fields cleared (the sections past that point —
/// debug information, symbol tables — are not copied). Refuses anything that is not a native ELF executable.
fn loadable_image(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let end = loadable_end(bytes)?;
    let mut image = bytes
        .get(..end)
        .ok_or_else(|| "a truncated ELF file".to_string())?
        .to_vec();
    // e_shoff, then e_shnum and e_shstrndx: no section header table.
    image[0x28..0x30].fill(0);
    image[0x3c..0x40].fill(0);
    Ok(image)
}

/// How many bytes from the start of an ELF executable the loader uses (see [`loadable_image`]), read from its header
/// and program header table, which `bytes` (a prefix of the file) must hold.
fn loadable_end(bytes: &[u8]) -> Result<usize, String> {
    let u16_at = |at: usize| -> Option<u64> {
        Some(u64::from(u16::from_ne_bytes(
            bytes.get(at..at + 2)?.try_into().ok()?,
        )))
    };
    let u64_at = |at: usize| -> Option<u64> {
        Some(u64::from_ne_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
    };
    let native_data = if cfg!(target_endian = "little") { 1 } else { 2 };
    // ELF magic, 64-bit class, this machine's byte order, an executable or PIE type.
    if bytes.get(..4) != Some(b"\x7fELF".as_slice())
        || bytes.get(4) != Some(&2)
        || bytes.get(5) != Some(&native_data)
        || !matches!(u16_at(0x10), Some(2 | 3))
    {
        return Err("not an ELF executable for this machine".into());
    }
    let bad = || "a malformed ELF header".to_string();
    let (phoff, phentsize, phnum) = (
        u64_at(0x20).ok_or_else(bad)?,
        u16_at(0x36).ok_or_else(bad)?,
        u16_at(0x38).ok_or_else(bad)?,
    );
    if phentsize < 56 || phnum == 0 || phnum == 0xffff {
        return Err(bad());
    }
    let mut end = phoff.checked_add(phentsize * phnum).ok_or_else(bad)?;
    for i in 0..phnum {
        let at = usize::try_from(phoff + i * phentsize).map_err(|_| bad())?;
        let offset = u64_at(at + 8).ok_or_else(bad)?;
        let filesz = u64_at(at + 32).ok_or_else(bad)?;
        end = end.max(offset.checked_add(filesz).ok_or_else(bad)?);
    }
    let end = usize::try_from(end).map_err(|_| bad())?;
    if end < 0x40 {
        return Err(bad());
    }
    Ok(end)
}

/// Copies the loadable part of the executable at `path` ([`loadable_image`]) into a sealed memfd, checking that the
/// file did not change while it was read.
fn seal(path: &Path) -> Result<OwnedFd, SpawnError> {
    let what = |e: std::io::Error| {
        setup(format!(
            "cannot copy the sandbox's inner stage {}: {e}",
            path.display()
        ))
    };
    let mut src = std::fs::File::open(path).map_err(what)?;
    let before = src.metadata().map_err(what)?;
    if !before.is_file() {
        return Err(setup(format!(
            "the sandbox's inner stage {} is not a regular file",
            path.display()
        )));
    }
    // Only the loaded part is read: the header and program header table first (within the first 64 KiB, as every
    // linker places them), then up to the end of the last segment.
    let refuse = |why: String| {
        setup(format!(
            "the sandbox's inner stage {} is {why} (was it replaced?); reinstall loom-sandbox-exec next to loom",
            path.display()
        ))
    };
    let head =
        usize::try_from(before.len().min(64 * 1024)).map_err(|_| refuse("too large".into()))?;
    let mut bytes = vec![0u8; head];
    std::io::Read::read_exact(&mut src, &mut bytes).map_err(what)?;
    let end = loadable_end(&bytes).map_err(refuse)?;
    if end > bytes.len() {
        let mut rest = vec![0u8; end - bytes.len()];
        std::io::Read::read_exact(&mut src, &mut rest).map_err(what)?;
        bytes.extend_from_slice(&rest);
    }
    let after = src.metadata().map_err(what)?;
    let same = |m: &std::fs::Metadata| {
        (
            m.dev(),
            m.ino(),
            m.len(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
        )
    };
    if same(&before) != same(&after) {
        return Err(setup(format!(
            "the sandbox's inner stage {} changed while loom copied it; nothing ran",
            path.display()
        )));
    }
    let image = loadable_image(&bytes).map_err(refuse)?;
    let mut dst =
        crate::error::memory_file(c"loom-sandbox-exec", libc::MFD_ALLOW_SEALING).map_err(what)?;
    dst.write_all(&image).map_err(what)?;
    let seals = libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;
    // SAFETY: adding seals to our own memfd.
    if unsafe { libc::fcntl(dst.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
        return Err(what(std::io::Error::last_os_error()));
    }
    Ok(OwnedFd::from(dst))
}

/// The raw `struct sock_filter` array of `program`, as bwrap's `--seccomp` reads it.
pub(crate) fn program_bytes(program: &BpfProgram) -> Vec<u8> {
    let mut out = Vec::with_capacity(program.len() * 8);
    for insn in program {
        out.extend_from_slice(&insn.code.to_ne_bytes());
        out.push(insn.jt);
        out.push(insn.jf);
        out.extend_from_slice(&insn.k.to_ne_bytes());
    }
    out
}

/// A pipe holding `bytes` with its write end closed: a descriptor bwrap reads to the end. `bytes` must fit in the
/// pipe's buffer (a seccomp program is far below the 64 KiB of a default pipe).
pub(crate) fn pipe_with(bytes: &[u8]) -> Result<OwnedFd, SpawnError> {
    if bytes.len() > 16 * 1024 {
        return Err(setup("the seccomp program is too large for a pipe".into()));
    }
    let (r, w) = crate::error::pipe()?;
    let mut w = std::fs::File::from(w);
    w.write_all(bytes)?;
    drop(w);
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn the_sealed_copy_is_immutable_and_survives_the_file_being_replaced() {
        let dir = crate::spawn::PrivateTmp::create().unwrap();
        let exe = dir.0.join("stage");
        std::fs::copy("/bin/true", &exe).unwrap();
        let original = loadable_image(&std::fs::read(&exe).unwrap()).unwrap();
        drop(sealed_copy(&exe).unwrap());
        // Rewritten in place: later descriptors still read the first copy, from its start.
        std::fs::write(&exe, b"#!/bin/sh\necho evil\n").unwrap();
        for _ in 0..2 {
            let mut bytes = Vec::new();
            std::fs::File::from(sealed_copy(&exe).unwrap())
                .read_to_end(&mut bytes)
                .unwrap();
            assert_eq!(bytes, original);
        }
        // The copy cannot be written, even through a writable reopen.
        let sealed = SEALED
            .lock()
            .unwrap()
            .iter()
            .find(|(p, _)| p == &exe)
            .unwrap()
            .1
            .clone();
        let path = format!("/proc/self/fd/{}", sealed.as_raw_fd());
        let written = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|mut f| f.write_all(b"evil"));
        assert!(written.is_err());
    }

    #[test]
    fn a_stage_that_is_not_an_elf_file_is_refused() {
        let dir = crate::spawn::PrivateTmp::create().unwrap();
        let exe = dir.0.join("evil");
        std::fs::write(&exe, b"#!/bin/sh\necho 'ok landlock=full seccomp=on'\n").unwrap();
        let e = sealed_copy(&exe).unwrap_err().to_string();
        assert!(e.contains("not an ELF executable"), "{e}");
        assert!(loadable_image(b"\x7fELF").is_err());
        assert!(loadable_image(b"").is_err());
    }

    /// The image keeps every segment and drops what lies past them; the copy still runs.
    #[test]
    fn the_loadable_image_runs_without_its_sections() {
        let full = std::fs::read("/bin/true").unwrap();
        let image = loadable_image(&full).unwrap();
        assert!(image.len() <= full.len());
        assert_eq!(&image[..0x28], &full[..0x28]);
        assert_eq!(&image[0x28..0x30], &[0; 8]);
        let dir = crate::spawn::PrivateTmp::create().unwrap();
        let exe = dir.0.join("true");
        std::fs::write(&exe, &image).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        // another test's fork may briefly hold the descriptor the file was written through (until its exec closes
        // it): exec then fails with ETXTBSY, which says nothing about the image, so that one error is retried
        let mut tries = 0;
        let status = loop {
            match std::process::Command::new(&exe).status() {
                Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 100 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                other => break other.unwrap(),
            }
        };
        assert!(status.success());
    }

    #[test]
    fn the_program_reaches_bwrap_as_raw_sock_filters() {
        let progs = crate::seccomp::build_seccomp_programs(Default::default()).unwrap();
        let bytes = program_bytes(&progs[0]);
        assert_eq!(bytes.len(), progs[0].len() * 8);
        let mut back = Vec::new();
        std::fs::File::from(pipe_with(&bytes).unwrap())
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, bytes);
        assert_eq!(&bytes[..2], &progs[0][0].code.to_ne_bytes());
        assert_eq!(&bytes[4..8], &progs[0][0].k.to_ne_bytes());
    }
}
