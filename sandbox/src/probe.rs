//! What the host can enforce, probed once per process, and the tier chosen from it (pure).

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::bwrap::BwrapFeatures;
use crate::error::TrialError;

/// A sandbox backend, strongest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    /// bwrap view + Landlock + seccomp.
    A,
    /// Landlock + seccomp, no namespaces.
    B,
    /// bwrap view + seccomp, no Landlock.
    C,
}

impl Tier {
    /// Parses `a`, `b` or `c` (any case).
    pub fn parse(s: &str) -> Option<Tier> {
        match s.to_ascii_lowercase().as_str() {
            "a" => Some(Tier::A),
            "b" => Some(Tier::B),
            "c" => Some(Tier::C),
            _ => None,
        }
    }

    /// `A`, `B` or `C`.
    pub fn name(self) -> &'static str {
        match self {
            Tier::A => "A",
            Tier::B => "B",
            Tier::C => "C",
        }
    }

    /// What the tier is made of.
    pub fn describe(self) -> &'static str {
        match self {
            Tier::A => "bwrap + Landlock + seccomp",
            Tier::B => "Landlock + seccomp (no namespaces)",
            Tier::C => "bwrap + seccomp (no Landlock)",
        }
    }
}

/// Whether unprivileged user namespaces can be created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Userns {
    /// Available.
    Available,
    /// Not available, with the reason and the fix.
    Unavailable(String),
}

/// The host's sandboxing facilities.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSupport {
    /// The bubblewrap executable, if found.
    pub bwrap: Option<PathBuf>,
    /// Optional bubblewrap features.
    pub bwrap_features: BwrapFeatures,
    /// User namespaces.
    pub userns: Userns,
    /// The kernel's Landlock ABI version (`None`: not available), and why not.
    pub landlock_abi: Result<i32, String>,
    /// Whether seccomp filters can be installed.
    pub seccomp: bool,
    /// True when running as uid 0.
    pub root: bool,
}

/// No backend can confine the command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// Nothing at all.
    #[error("no sandbox backend is available on this host ({0}); loom never runs a command unconfined unless the grant is \"*\" — run `loom doctor` for the fix")]
    None(String),
    /// The requested tier is not available.
    #[error(
        "sandbox tier {tier} ({what}) is not available on this host: {why}; run `loom doctor`"
    )]
    TierUnavailable {
        /// The tier.
        tier: &'static str,
        /// What it needs.
        what: &'static str,
        /// What is missing.
        why: String,
    },
}

fn read_trim(p: &str) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

fn find_bwrap() -> Option<PathBuf> {
    let fixed = ["/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"];
    fixed
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .or_else(|| {
            std::env::var_os("PATH").and_then(|path| {
                std::env::split_paths(&path)
                    .map(|d| d.join("bwrap"))
                    .find(|p| p.is_file())
            })
        })
}

fn bwrap_features(bwrap: &Path) -> BwrapFeatures {
    let disable_userns = std::fs::read(bwrap)
        .map(|bytes| bytes.windows(14).any(|w| w == b"disable-userns"))
        .unwrap_or(false);
    BwrapFeatures { disable_userns }
}

fn probe_userns(root: bool) -> Userns {
    if read_trim("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        return Userns::Unavailable(
            "user.max_user_namespaces is 0; fix: sysctl -w user.max_user_namespaces=15000".into(),
        );
    }
    if !root {
        if read_trim("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
            return Userns::Unavailable(
                "kernel.unprivileged_userns_clone is 0; fix: sysctl -w kernel.unprivileged_userns_clone=1".into(),
            );
        }
        if read_trim("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref()
            == Some("1")
        {
            return Userns::Unavailable(
                "AppArmor restricts unprivileged user namespaces (Ubuntu 23.10+: kernel.apparmor_restrict_unprivileged_userns=1); \
                 fix: install an AppArmor profile allowing userns for bwrap, or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"
                    .into(),
            );
        }
    }
    Userns::Available
}

fn probe_landlock() -> Result<i32, String> {
    match crate::landlock::host_landlock_abi() {
        Ok(v) => Ok(v),
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Err(
            "Landlock is built into the kernel but not enabled; fix: add landlock to the lsm= kernel parameter".into(),
        ),
        Err(_) => Err("the kernel has no Landlock (Linux 5.13+ with CONFIG_SECURITY_LANDLOCK)".into()),
    }
}

fn probe_seccomp() -> bool {
    // SAFETY: PR_GET_SECCOMP has no pointer arguments.
    unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) >= 0 }
}

/// Probes the host: reads a few `/proc/sys` files and asks the kernel for its Landlock ABI. Spawns nothing.
pub fn probe_host() -> HostSupport {
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let bwrap = find_bwrap();
    HostSupport {
        bwrap_features: bwrap.as_deref().map(bwrap_features).unwrap_or_default(),
        bwrap,
        userns: probe_userns(root),
        landlock_abi: probe_landlock(),
        seccomp: probe_seccomp(),
        root,
    }
}

/// [`probe_host`], once per process.
pub fn host_support() -> &'static HostSupport {
    static ONCE: OnceLock<HostSupport> = OnceLock::new();
    ONCE.get_or_init(probe_host)
}

/// Why bubblewrap does not work on this host.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BwrapProbeError {
    /// It could not be started.
    #[error("cannot run {}: {why}", .bwrap.display())]
    CannotRun {
        /// The executable.
        bwrap: PathBuf,
        /// The operating system's reason.
        why: std::io::Error,
    },
    /// It ran and refused a minimal view (user namespaces denied, a seccomp policy of the container).
    #[error("{} failed: {stderr}", .bwrap.display())]
    Refused {
        /// The executable.
        bwrap: PathBuf,
        /// What it printed.
        stderr: String,
    },
}

/// Runs bwrap once with a minimal view to check that it works here (for `loom doctor`); its version when it does.
pub fn probe_bwrap_works(bwrap: &Path) -> Result<String, BwrapProbeError> {
    let cannot_run = |why| BwrapProbeError::CannotRun {
        bwrap: bwrap.to_path_buf(),
        why,
    };
    let mut probe = std::process::Command::new(bwrap);
    probe.args([
        "--unshare-user",
        "--unshare-pid",
        "--unshare-net",
        "--die-with-parent",
        "--ro-bind",
        "/",
        "/",
        "--",
        "/bin/true",
    ]);
    // Behind the same guard as every confined spawn (`guard`): a loom killed while bubblewrap sets up leaves no
    // stray holding the probe's pipes.
    let loom = std::process::id() as libc::pid_t;
    // SAFETY: setpgid is async-signal-safe; the guard's split makes raw system calls only.
    unsafe {
        probe.pre_exec(move || {
            libc::setpgid(0, 0);
            crate::guard::split_off_guard(loom)
        });
    }
    let out = probe.output().map_err(cannot_run)?;
    if !out.status.success() {
        return Err(BwrapProbeError::Refused {
            bwrap: bwrap.to_path_buf(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    let v = std::process::Command::new(bwrap)
        .arg("--version")
        .output()
        .map_err(cannot_run)?;
    Ok(String::from_utf8_lossy(&v.stdout).trim().to_string())
}

/// Why each tier is or is not available.
pub fn tier_status(h: &HostSupport, tier: Tier) -> Result<(), TrialError> {
    let mut missing = Vec::new();
    if !h.seccomp {
        missing.push("seccomp is not available (CONFIG_SECCOMP_FILTER)".to_string());
    }
    if matches!(tier, Tier::A | Tier::C) {
        if h.bwrap.is_none() {
            missing.push("bubblewrap is not installed (fix: apt-get install bubblewrap)".into());
        }
        if let Userns::Unavailable(why) = &h.userns {
            missing.push(why.clone());
        }
    }
    if matches!(tier, Tier::A | Tier::B) {
        if let Err(why) = &h.landlock_abi {
            missing.push(why.clone());
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(TrialError::HostLacks(missing))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> HostSupport {
        HostSupport {
            bwrap: Some("/usr/bin/bwrap".into()),
            bwrap_features: BwrapFeatures::default(),
            userns: Userns::Available,
            landlock_abi: Ok(6),
            seccomp: true,
            root: false,
        }
    }

    /// The trial of a host whose facts fail `tier_status` fails with that reason (what `try_tier` checks first).
    fn by_facts(h: &HostSupport, requested: Option<Tier>) -> Result<(Tier, String), BackendError> {
        crate::trial::choose_by_trial(requested, &Default::default(), &mut |t| {
            tier_status(h, t).map(|()| String::new())
        })
    }

    #[test]
    fn nothing_available_refuses_and_never_widens() {
        let nothing = HostSupport {
            bwrap: None,
            landlock_abi: Err("no landlock".into()),
            ..full()
        };
        let err = by_facts(&nothing, None).unwrap_err().to_string();
        assert!(err.contains("never runs a command unconfined"), "{err}");
        assert!(err.contains("apt-get install bubblewrap"), "{err}");
        let no_seccomp = HostSupport {
            seccomp: false,
            ..full()
        };
        assert!(by_facts(&no_seccomp, None).is_err());
    }

    #[test]
    fn a_requested_tier_must_be_available() {
        let no_userns = HostSupport {
            userns: Userns::Unavailable("AppArmor restricts".into()),
            ..full()
        };
        let err = by_facts(&no_userns, Some(Tier::A)).unwrap_err().to_string();
        assert!(err.contains("tier A") && err.contains("AppArmor"), "{err}");
        assert_eq!(by_facts(&no_userns, None).map(|(t, _)| t), Ok(Tier::B));
        assert_eq!(
            by_facts(&full(), Some(Tier::C)).map(|(t, _)| t),
            Ok(Tier::C)
        );
    }
}
