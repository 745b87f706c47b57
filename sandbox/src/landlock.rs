//! The Landlock stage: pure rule construction (`build_landlock_rules`, `access_for`), the preparation of a ruleset
//! (`prepare_landlock`: builds it, opens the rule paths, reports how strongly the kernel will enforce it) and its
//! enforcement (`PreparedLandlock::restrict_self`, one async-signal-safe system call).
//!
//! The handled rights are pinned to [`TARGET_ABI`], so a newer kernel or crate never changes what a profile means;
//! an older kernel enforces what it can (best effort) and the caller refuses when nothing is enforced.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;

use landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, Ruleset,
    RulesetAttr, RulesetCreatedAttr, Scope, ABI,
};

use crate::profile::{private_dirs, Profile};
use crate::roots::{file_type, open_nofollow};

/// The Landlock ABI whose rights loom asks for: filesystem rights incl. truncate and device ioctl, TCP bind/connect,
/// and abstract-socket and signal scoping.
pub const TARGET_ABI: ABI = ABI::V6;

/// What a rule lets the sandbox do beneath a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum AccessClass {
    /// List directories only (the root of a bwrap view, whose contents are all granted anyway).
    List,
    /// Read files, list directories, execute.
    Read,
    /// Read the file's contents, nothing else (the model file of the local model engine).
    ReadFile,
    /// Read plus write files and ioctl on devices (for `/dev/null`, terminals), no creation.
    Device,
    /// Everything (read, write, create, remove, rename, truncate).
    Write,
}

/// One Landlock rule: a path and the class of access beneath it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct LandlockRule {
    /// The path (inside the sandbox's view).
    pub path: PathBuf,
    /// The access granted beneath it.
    pub access: AccessClass,
    /// True for grant roots: a missing root is an error; other rules are skipped when the path is absent.
    pub required: bool,
}

/// Where the rules will be applied: inside a bwrap view (private `/tmp` and home, fresh `/dev` and `/proc`) or
/// directly on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// Inside bwrap's mount namespace.
    Bwrap,
    /// On the host filesystem (Tier B).
    Host,
}

/// Device nodes usable on the host view (Tier B).
pub const HOST_DEVICES: [&str; 6] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// The rights of a class, limited to `abi`.
pub fn access_for(class: AccessClass, abi: ABI) -> BitFlags<AccessFs> {
    match class {
        AccessClass::List => BitFlags::from(AccessFs::ReadDir) & AccessFs::from_all(abi),
        AccessClass::Read => AccessFs::from_read(abi),
        AccessClass::ReadFile => BitFlags::from(AccessFs::ReadFile),
        AccessClass::Device => {
            AccessFs::from_read(abi)
                | ((AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev)
                    & AccessFs::from_all(abi))
        }
        AccessClass::Write => AccessFs::from_all(abi),
    }
}

/// The rules for a profile.
pub fn build_landlock_rules(profile: &Profile, view: View) -> Vec<LandlockRule> {
    let mut rules = view_rules(profile, view);
    for (root, writable) in profile.roots() {
        let access = if writable {
            AccessClass::Write
        } else {
            AccessClass::Read
        };
        rules.push(LandlockRule {
            path: root.to_path_buf(),
            access,
            required: true,
        });
    }
    rules
}

/// The rules every view needs besides the grant's roots: system directories, `/proc`, devices.
pub(crate) fn view_rules(profile: &Profile, view: View) -> Vec<LandlockRule> {
    let mut rules = Vec::new();
    let mut push = |path: PathBuf, access, required| {
        rules.push(LandlockRule {
            path,
            access,
            required,
        })
    };
    for s in &profile.system {
        if s.symlink.is_none() && !profile.in_root(&s.path) {
            push(s.path.clone(), AccessClass::Read, false);
        }
    }
    push("/proc".into(), AccessClass::Read, false);
    match view {
        View::Bwrap => {
            push("/".into(), AccessClass::List, false);
            push("/dev".into(), AccessClass::Device, false);
            for masked in private_dirs(profile) {
                push(masked, AccessClass::Write, false);
            }
        }
        View::Host => {
            for d in HOST_DEVICES {
                push(d.into(), AccessClass::Device, false);
            }
        }
    }
    rules
}

/// How strongly Landlock ended up enforcing the ruleset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Enforcement {
    /// Nothing is enforced (no Landlock, or disabled).
    NotEnforced,
    /// The host's ABI is older than [`TARGET_ABI`]: some rights are not enforced.
    Partial,
    /// Everything asked for is enforced.
    Full,
}

impl Enforcement {
    /// Lowercase name for status lines.
    pub fn as_str(self) -> &'static str {
        match self {
            Enforcement::NotEnforced => "not-enforced",
            Enforcement::Partial => "partial",
            Enforcement::Full => "full",
        }
    }
}

/// Why the Landlock stage failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LandlockError {
    /// A grant root could not be opened inside the sandbox.
    #[error("landlock: cannot open root {path}: {source}")]
    Root {
        /// The root.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The ruleset could not be built.
    #[error("landlock: {0}")]
    Ruleset(String),
    /// The kernel would enforce nothing.
    #[error("landlock is not enforced on this kernel; refusing to run (run `loom doctor`)")]
    NotEnforced,
}

/// The kernel's Landlock ABI version, or the OS error (`EOPNOTSUPP`: built in but disabled; `ENOSYS`: absent).
pub(crate) fn host_landlock_abi() -> Result<i32, std::io::Error> {
    // SAFETY: LANDLOCK_CREATE_RULESET_VERSION with a NULL attribute only returns the ABI version.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32,
        )
    };
    match i32::try_from(v) {
        Ok(v) if v >= 1 => Ok(v),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// A Landlock ruleset built and filled (every rule path opened), ready to be enforced by
/// [`PreparedLandlock::restrict_self`] — in this process, or in a child between fork and exec.
#[derive(Debug)]
pub struct PreparedLandlock {
    fd: OwnedFd,
    enforcement: Enforcement,
}

impl PreparedLandlock {
    /// How strongly the kernel enforces this ruleset once restricted: [`Enforcement::Full`] when the host's ABI
    /// has every right asked for (all of them exist from [`TARGET_ABI`] on), [`Enforcement::Partial`] on an older
    /// ABI (best effort). Never [`Enforcement::NotEnforced`]: [`prepare_landlock`] refuses that.
    pub fn enforcement(&self) -> Enforcement {
        self.enforcement
    }

    /// A "ruleset" that is any descriptor (for tests of how a failed `landlock_restrict_self` is reported).
    #[cfg(test)]
    pub(crate) fn from_fd_for_test(fd: OwnedFd) -> PreparedLandlock {
        PreparedLandlock {
            fd,
            enforcement: Enforcement::Full,
        }
    }

    /// Restricts the calling thread (and what it execs) to the ruleset. `no_new_privs` must already be set.
    ///
    /// Async-signal-safe: one raw system call on a prepared descriptor, no allocation, so it may run between fork
    /// and exec.
    pub fn restrict_self(&self) -> Result<(), std::io::Error> {
        // SAFETY: landlock_restrict_self with a ruleset descriptor we own and no flags.
        let rc =
            unsafe { libc::syscall(libc::SYS_landlock_restrict_self, self.fd.as_raw_fd(), 0u32) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

/// Builds the ruleset for `rules` (TCP is handled, hence denied, when `network` is false) and opens every rule
/// path, without restricting anything yet. Refuses ([`LandlockError::NotEnforced`]) when the kernel would enforce
/// nothing.
pub fn prepare_landlock(
    rules: &[LandlockRule],
    network: bool,
) -> Result<PreparedLandlock, LandlockError> {
    let err = |e: landlock::RulesetError| LandlockError::Ruleset(e.to_string());
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(TARGET_ABI))
        .map_err(err)?
        .scope(Scope::from_all(TARGET_ABI))
        .map_err(err)?;
    if !network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(TARGET_ABI))
            .map_err(err)?;
    }
    let mut created = ruleset.create().map_err(err)?;
    for r in rules {
        let fd = match open_nofollow(&r.path) {
            Ok(fd) => fd,
            Err(e) if !r.required && e.raw_os_error() == Some(libc::ENOENT) => continue,
            Err(e) if !r.required && e.raw_os_error() == Some(libc::ELOOP) => continue,
            Err(source) => {
                return Err(LandlockError::Root {
                    path: r.path.clone(),
                    source,
                })
            }
        };
        let kind = file_type(&fd);
        if kind == Some(libc::S_IFLNK) {
            // O_PATH | O_NOFOLLOW opened the link itself: never follow it.
            if r.required {
                return Err(LandlockError::Root {
                    path: r.path.clone(),
                    source: std::io::Error::from_raw_os_error(libc::ELOOP),
                });
            }
            continue;
        }
        let mut access = access_for(r.access, TARGET_ABI);
        if kind != Some(libc::S_IFDIR) {
            // Directory-only rights on a file would make the crate report partial enforcement.
            access &= AccessFs::from_file(TARGET_ABI);
        }
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(err)?;
    }
    // Best effort gives no descriptor when the kernel has no (enabled) Landlock: nothing would be enforced.
    let fd: Option<OwnedFd> = created.into();
    let (Some(fd), Ok(abi)) = (fd, host_landlock_abi()) else {
        return Err(LandlockError::NotEnforced);
    };
    let enforcement = if abi >= TARGET_ABI as i32 {
        Enforcement::Full
    } else {
        Enforcement::Partial
    };
    Ok(PreparedLandlock { fd, enforcement })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::tests::build;
    use std::path::Path;

    #[test]
    fn classes_are_pinned_to_the_target_abi() {
        let read = access_for(AccessClass::Read, TARGET_ABI);
        assert!(read.contains(AccessFs::ReadFile) && read.contains(AccessFs::Execute));
        assert!(!read.contains(AccessFs::WriteFile));
        let dev = access_for(AccessClass::Device, TARGET_ABI);
        assert!(dev.contains(AccessFs::WriteFile) && dev.contains(AccessFs::IoctlDev));
        assert!(!dev.contains(AccessFs::MakeReg) && !dev.contains(AccessFs::RemoveFile));
        // the engine's model file: reading its contents, not even executing it
        assert_eq!(
            access_for(AccessClass::ReadFile, TARGET_ABI),
            BitFlags::from(AccessFs::ReadFile)
        );
        let write = access_for(AccessClass::Write, TARGET_ABI);
        assert!(write.contains(AccessFs::Refer) && write.contains(AccessFs::Truncate));
        // Never a right newer than the target ABI, whatever the crate knows about.
        assert!(!write.contains(AccessFs::ResolveUnix));
        // An old ABI gets a subset, never more.
        assert!(access_for(AccessClass::Write, ABI::V1).contains(AccessFs::MakeReg));
        assert!(!access_for(AccessClass::Write, ABI::V1).contains(AccessFs::Truncate));
    }

    #[test]
    fn rules_for_a_writable_project() {
        let p =
            build(r#"{ commands = "*", paths = ["./"], read_paths = ["/work/docs"] }"#).unwrap();
        let rules = build_landlock_rules(&p, View::Bwrap);
        let find = |path: &str| rules.iter().find(|r| r.path == Path::new(path)).cloned();
        assert_eq!(find("/usr").unwrap().access, AccessClass::Read);
        assert!(
            find("/bin").is_none(),
            "symlinked system dirs are reached through their target"
        );
        assert_eq!(find("/work/proj").unwrap().access, AccessClass::Write);
        assert!(find("/work/proj").unwrap().required);
        assert_eq!(find("/work/docs").unwrap().access, AccessClass::Read);
        assert_eq!(find("/tmp").unwrap().access, AccessClass::Write);
        assert_eq!(find("/home/u").unwrap().access, AccessClass::Write);
        assert_eq!(find("/dev").unwrap().access, AccessClass::Device);

        let host = build_landlock_rules(&p, View::Host);
        assert!(
            host.iter().all(|r| r.path != Path::new("/tmp")),
            "no host /tmp in tier B"
        );
        assert!(host.iter().all(|r| r.path != Path::new("/home/u")));
        assert!(host.iter().any(|r| r.path == Path::new("/dev/null")));
    }

    #[test]
    fn no_private_dirs_inside_roots() {
        let p = build(r#"{ commands = "*", paths = "*" }"#).unwrap();
        assert!(private_dirs(&p).is_empty());
    }
}
