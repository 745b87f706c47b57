//! What each tier enforces beyond the roots, decided from facts (pure): the rights a confined command must not have
//! outside its roots that Landlock covers only from some ABI on (or never), and for each one who takes care of it on
//! a given host — Landlock, seccomp, the bwrap view, the manifest's acceptance by name, or nobody (then tier B
//! refuses the row). The Landlock ABI is an argument, so the same decision runs for this host and, in tests, for
//! older ones; nothing here fakes enforcement.
//!
//! The result travels with every confined command as a [`SandboxStatus`] (as rust-landlock's `RulesetStatus`:
//! fully, partially or not enforced, plus the rights and who enforces each).

use loom_kernel::AcceptedGap;

use crate::landlock::{Enforcement, TARGET_ABI};
use crate::probe::Tier;

/// A right a command must not have outside its roots, which a plain Landlock ruleset does not always withhold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Right {
    /// `truncate(2)` of a file by path (Landlock ABI 3+).
    Truncate,
    /// Signals to processes outside the sandbox: loom, its MCP servers, the user's (Landlock ABI 6+ scoping).
    Signals,
    /// Connecting to the host's abstract unix sockets (X11, some D-Bus setups; Landlock ABI 6+ scoping).
    AbstractSockets,
    /// `connect(2)` to a pathname unix socket outside the roots: the D-Bus session bus (`systemd-run --user` runs
    /// anything unconfined), ssh-agent, X11, docker, systemd-resolved (Landlock ABI 9+).
    PathnameSockets,
    /// `chmod`, `chown`, `utime(n)sat`, `setxattr`/`removexattr` and their fd variants (no Landlock right at all).
    Metadata,
}

impl Right {
    /// Every right, in table order.
    pub const ALL: [Right; 5] = [
        Right::Truncate,
        Right::Signals,
        Right::AbstractSockets,
        Right::PathnameSockets,
        Right::Metadata,
    ];

    /// A short name (status lines, JSON).
    pub fn name(self) -> &'static str {
        match self {
            Right::Truncate => "truncate",
            Right::Signals => "signals",
            Right::AbstractSockets => "abstract-sockets",
            Right::PathnameSockets => "pathname-sockets",
            Right::Metadata => "metadata",
        }
    }

    /// The row title in the enforcement table.
    pub fn title(self) -> &'static str {
        match self {
            Right::Truncate => "`truncate` of files outside the roots",
            Right::Signals => "Signals to processes outside the sandbox (loom, its MCP servers, the user's)",
            Right::AbstractSockets => "Abstract unix sockets of the host",
            Right::PathnameSockets => {
                "Host unix sockets by path outside the roots (D-Bus session bus, ssh-agent, X11, docker, resolved)"
            }
            Right::Metadata => {
                "Metadata outside the roots: `chmod`, `chown`, `utime(n)sat`, `setxattr`/`removexattr`, their fd variants"
            }
        }
    }

    /// What the right is, for people.
    pub fn what(self) -> &'static str {
        match self {
            Right::Truncate => "truncate(2) of files outside the roots",
            Right::Signals => "signals to processes outside the sandbox (loom, its MCP servers, the user's)",
            Right::AbstractSockets => "the host's abstract unix sockets",
            Right::PathnameSockets => {
                "connect(2) to pathname unix sockets outside the roots (D-Bus, ssh-agent, X11, docker)"
            }
            Right::Metadata => "chmod, chown, utime(n)sat, setxattr, removexattr (and fd variants) outside the roots",
        }
    }

    /// The Landlock ABI from which Landlock itself withholds the right (`None`: no ABI does).
    pub fn landlock_abi(self) -> Option<i32> {
        match self {
            Right::Truncate => Some(3),
            Right::Signals | Right::AbstractSockets => Some(6),
            Right::PathnameSockets => Some(9),
            Right::Metadata => None,
        }
    }

    /// What accepting the right's loss means, for audit and doctor.
    pub fn accepted_means(self) -> &'static str {
        match self {
            Right::Signals => {
                "on a host whose Landlock is older than ABI 6, tier B runs commands that can signal any process of \
                 the same user (kill loom, stop its MCP servers) instead of refusing them"
            }
            _ => "tier B runs without this right withheld instead of refusing",
        }
    }

    /// The name a manifest accepts the missing right by (`[sandbox] accept`), when it can.
    pub fn acceptable_as(self) -> Option<AcceptedGap> {
        match self {
            Right::Signals => Some(AcceptedGap::Signals),
            _ => None,
        }
    }
}

/// Who withholds a right from the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum By {
    /// The bwrap view and its namespaces (tiers A and C).
    View,
    /// Landlock.
    Landlock,
    /// The seccomp filter (tier B makes up for what Landlock lacks; the cost is listed by [`RightStatus::cost`]).
    Seccomp,
    /// Nobody: the manifest accepts the gap by name (`[sandbox] accept`).
    Accepted,
    /// Nobody: tier B refuses the row.
    Missing,
}

impl By {
    /// A short name.
    pub fn name(self) -> &'static str {
        match self {
            By::View => "view",
            By::Landlock => "landlock",
            By::Seccomp => "seccomp",
            By::Accepted => "ACCEPTED",
            By::Missing => "MISSING",
        }
    }
}

/// One right and who withholds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RightStatus {
    /// The right.
    pub right: Right,
    /// Who withholds it.
    pub by: By,
}

impl RightStatus {
    /// What making up for the right costs inside the roots too (seccomp cannot see paths), if anything.
    pub fn cost(&self) -> Option<&'static str> {
        match (self.by, self.right) {
            (By::Seccomp, Right::Metadata) => Some(
                "chmod, chown, utime and xattr calls fail (EPERM) inside the roots too: `chmod +x`, `touch` (which \
                 still creates a new file), `cp -p`, `tar -p`, `rsync -a`, `install -m` report errors",
            ),
            (By::Seccomp, Right::PathnameSockets | Right::AbstractSockets) => Some(
                "no unix socket can be created (socketpair works): nothing connects to a socket inside the roots \
                 either, and rows with brokered commands are refused",
            ),
            (By::Seccomp, Right::Truncate) => {
                Some("truncate(2) by path fails inside the roots too (ftruncate works)")
            }
            _ => None,
        }
    }
}

/// What a confined command ran under: the tier, the Landlock ruleset's state and every [`Right`] with who withholds
/// it. Kept in the bash tool's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxStatus {
    /// The tier.
    pub tier: Tier,
    /// The host's Landlock ABI (`None` for tier C, which uses none).
    pub landlock_abi: Option<i32>,
    /// How fully the Landlock ruleset is enforced ([`Enforcement::NotEnforced`] for tier C).
    pub landlock: Enforcement,
    /// Each right and who withholds it.
    pub rights: Vec<RightStatus>,
}

impl SandboxStatus {
    /// The rights nobody withholds and the manifest did not accept (empty for anything that ran).
    pub fn missing(&self) -> Vec<Right> {
        self.rights
            .iter()
            .filter(|r| r.by == By::Missing)
            .map(|r| r.right)
            .collect()
    }

    /// The rights nobody withholds because the manifest accepts their loss.
    pub fn accepted(&self) -> Vec<Right> {
        self.rights
            .iter()
            .filter(|r| r.by == By::Accepted)
            .map(|r| r.right)
            .collect()
    }

    /// One line: `tier=B landlock=full abi=7 truncate=landlock signals=landlock ...`.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "tier={} landlock={}",
            self.tier.name(),
            self.landlock.as_str()
        );
        if let Some(abi) = self.landlock_abi {
            s.push_str(&format!(" abi={abi}"));
        }
        for r in &self.rights {
            s.push_str(&format!(" {}={}", r.right.name(), r.by.name()));
        }
        s
    }
}

/// Who withholds each right in tier B on a host with Landlock ABI `abi`, given what the manifest accepts.
pub fn tier_b_rights(abi: i32, accept: &[AcceptedGap]) -> Vec<RightStatus> {
    Right::ALL
        .into_iter()
        .map(|right| {
            let by = match right {
                // seccomp denies socket(AF_UNIX) in tier B on every ABI: loom does not use ABI 9's
                // LANDLOCK_ACCESS_FS_RESOLVE_UNIX yet, and below it nothing else could.
                Right::PathnameSockets | Right::AbstractSockets | Right::Metadata => By::Seccomp,
                Right::Truncate if abi >= 3 => By::Landlock,
                Right::Truncate => By::Seccomp,
                Right::Signals if abi >= 6 => By::Landlock,
                Right::Signals => match right.acceptable_as() {
                    Some(gap) if accept.contains(&gap) => By::Accepted,
                    _ => By::Missing,
                },
            };
            RightStatus { right, by }
        })
        .collect()
}

/// The typed status of tier B on a host with Landlock ABI `abi`.
pub fn tier_b_status(abi: i32, accept: &[AcceptedGap]) -> SandboxStatus {
    SandboxStatus {
        tier: Tier::B,
        landlock_abi: Some(abi),
        landlock: if abi >= TARGET_ABI as i32 {
            Enforcement::Full
        } else {
            Enforcement::Partial
        },
        rights: tier_b_rights(abi, accept),
    }
}

/// The typed status of a tier with a bwrap view (A, with Landlock ABI `abi`; C, without Landlock): the view and its
/// namespaces withhold every right (read-only binds, no host sockets, a pid namespace).
pub fn view_status(tier: Tier, abi: Option<i32>, landlock: Enforcement) -> SandboxStatus {
    SandboxStatus {
        tier,
        landlock_abi: abi,
        landlock,
        rights: Right::ALL
            .into_iter()
            .map(|right| RightStatus {
                right,
                by: By::View,
            })
            .collect(),
    }
}

/// Why tier B refuses to run on this host given `status`, naming every missing right and the fix; `None` when it
/// can run.
pub fn tier_b_refusal(status: &SandboxStatus) -> Option<String> {
    let missing = status.missing();
    if missing.is_empty() {
        return None;
    }
    let abi = status.landlock_abi.unwrap_or(0);
    let parts: Vec<String> = missing
        .iter()
        .map(|r| {
            let need = r.landlock_abi().map_or(String::new(), |v| {
                format!(" (needs Landlock ABI {v}; this host has {abi})")
            });
            let accept = r.acceptable_as().map_or(String::new(), |g| {
                format!(
                    ", or accept the loss with `[sandbox] accept = [\"{}\"]`",
                    g.name()
                )
            });
            format!(
                "{}{need}: make user namespaces available for tier A (`loom doctor`){accept}",
                r.what()
            )
        })
        .collect();
    Some(format!(
        "tier B cannot withhold {}",
        parts.join("; and cannot withhold ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn by(status: &SandboxStatus, right: Right) -> By {
        status.rights.iter().find(|r| r.right == right).unwrap().by
    }

    #[test]
    fn this_hosts_abi_and_newer_need_nothing_accepted() {
        for abi in [6, 7, 9] {
            let s = tier_b_status(abi, &[]);
            assert!(s.missing().is_empty(), "abi {abi}");
            assert_eq!(s.landlock, Enforcement::Full);
            assert_eq!(by(&s, Right::Signals), By::Landlock);
            assert_eq!(by(&s, Right::Truncate), By::Landlock);
            assert_eq!(by(&s, Right::PathnameSockets), By::Seccomp);
            assert_eq!(by(&s, Right::Metadata), By::Seccomp);
            assert!(tier_b_refusal(&s).is_none());
        }
    }

    #[test]
    fn abi_5_refuses_for_signals_unless_accepted() {
        let s = tier_b_status(5, &[]);
        assert_eq!(s.landlock, Enforcement::Partial);
        assert_eq!(s.missing(), vec![Right::Signals]);
        let why = tier_b_refusal(&s).unwrap();
        assert!(why.contains("signals to processes outside"), "{why}");
        assert!(
            why.contains("needs Landlock ABI 6; this host has 5"),
            "{why}"
        );
        assert!(why.contains("accept = [\"signals\"]"), "{why}");
        let ok = tier_b_status(5, &[AcceptedGap::Signals]);
        assert!(ok.missing().is_empty());
        assert_eq!(ok.accepted(), vec![Right::Signals]);
        assert!(tier_b_refusal(&ok).is_none());
        // Abstract sockets are made up for by seccomp, truncate by Landlock.
        assert_eq!(by(&ok, Right::AbstractSockets), By::Seccomp);
        assert_eq!(by(&ok, Right::Truncate), By::Landlock);
    }

    #[test]
    fn abi_2_makes_up_for_truncate_with_seccomp() {
        let s = tier_b_status(2, &[AcceptedGap::Signals]);
        assert_eq!(by(&s, Right::Truncate), By::Seccomp);
        assert!(s
            .rights
            .iter()
            .any(|r| r.right == Right::Truncate && r.cost().is_some()));
        assert!(tier_b_refusal(&s).is_none());
        assert!(tier_b_refusal(&tier_b_status(2, &[])).is_some());
    }

    #[test]
    fn status_lines_name_every_right() {
        let s = tier_b_status(7, &[]);
        assert_eq!(
            s.describe(),
            "tier=B landlock=full abi=7 truncate=landlock signals=landlock abstract-sockets=seccomp \
             pathname-sockets=seccomp metadata=seccomp"
        );
        let a = view_status(Tier::A, Some(7), Enforcement::Full);
        assert!(a.missing().is_empty() && a.rights.iter().all(|r| r.by == By::View));
    }
}
