//! Tier B's per-entry roots: how a writable root that holds a protected path (`.git`, `.loom`, an authority file) or
//! a masked secret store is expressed with Landlock, which can only add rights.
//!
//! Landlock grants a right on a directory to everything beneath it, so a writable root cannot keep `.git` below it
//! read-only. Instead, such a root is split: the root (and each directory between it and a protected path) gets only
//! read rights — listing only when a masked store lies below it — and each of its *other* entries gets the root's
//! class (write for a writable root) on its own. A protected entry is readable and nothing more; a masked store gets
//! no rule at all (reading it is denied, where tiers A and C show an empty file); a symlink entry gets no rule (what
//! it points to is reached through the rule of its target, if any).
//!
//! What this costs, by construction: in a split directory nothing can be created, renamed or removed — only the
//! entries that existed when the command started are writable, in place and below. SECURITY.md's tier B section
//! says so, and `tests/sandbox/tier_b.rs` shows each side.
//!
//! Pure: the directory listing comes from the caller ([`Lister`]), so the split is unit-tested on a table.

use std::path::{Path, PathBuf};

use crate::landlock::{view_rules, AccessClass, LandlockRule, View};
use crate::profile::{Profile, LIST_LIMIT};

/// Lists a directory's entries as (path, is a symlink), without following a symlink.
pub type Lister<'a> = dyn FnMut(&Path) -> std::io::Result<Vec<(PathBuf, bool)>> + 'a;

/// The rules for the roots of `profile` on the host view: a root holding no protected or masked path is one rule of
/// its class, as in tiers A and C; any other root is split per entry (module doc). An error says why a root cannot
/// be split (it cannot be listed, or a directory on the way holds more than [`LIST_LIMIT`] entries).
pub fn host_root_rules(
    profile: &Profile,
    list: &mut Lister<'_>,
) -> Result<Vec<LandlockRule>, String> {
    let mut out = Vec::new();
    for (root, writable) in profile.roots() {
        let class = if writable {
            AccessClass::Write
        } else {
            AccessClass::Read
        };
        let below = |p: &&PathBuf| p.starts_with(root) && p.as_path() != root;
        let protected: Vec<&PathBuf> = if writable {
            profile.protected.iter().filter(below).collect()
        } else {
            // a read-only root keeps everything read-only anyway
            Vec::new()
        };
        let masked: Vec<&PathBuf> = profile.masked.iter().filter(below).collect();
        if protected.is_empty() && masked.is_empty() {
            out.push(rule(root, class, true));
            continue;
        }
        let sets = Sets {
            protected: &protected,
            masked: &masked,
        };
        split_dir(root, true, class, &sets, list, &mut out)?;
    }
    Ok(out)
}

struct Sets<'a> {
    protected: &'a [&'a PathBuf],
    masked: &'a [&'a PathBuf],
}

impl Sets<'_> {
    /// Whether a path of `set` lies strictly below `p`.
    fn below(set: &[&PathBuf], p: &Path) -> bool {
        set.iter().any(|s| s.starts_with(p) && s.as_path() != p)
    }
}

fn rule(path: &Path, access: AccessClass, required: bool) -> LandlockRule {
    LandlockRule {
        path: path.to_path_buf(),
        access,
        required,
    }
}

/// Splits `dir` (module doc): its own rule, then one per entry, recursing into the entries that hold a protected
/// or masked path.
fn split_dir(
    dir: &Path,
    required: bool,
    class: AccessClass,
    sets: &Sets<'_>,
    list: &mut Lister<'_>,
    out: &mut Vec<LandlockRule>,
) -> Result<(), String> {
    let hides = Sets::below(sets.masked, dir);
    // listing only when something below must stay unreadable; reading otherwise (protected entries included)
    out.push(rule(
        dir,
        if hides {
            AccessClass::List
        } else {
            AccessClass::Read
        },
        required,
    ));
    let entries = list(dir).map_err(|e| {
        format!(
            "{} holds a path that must stay read-only or hidden, so tier B grants its entries one by one, and it \
             cannot be listed: {e}",
            dir.display()
        )
    })?;
    if entries.len() > LIST_LIMIT {
        return Err(format!(
            "{} holds a path that must stay read-only or hidden, so tier B grants its entries one by one, and it \
             has more than {LIST_LIMIT} entries; narrow the grant to the directories the command needs, or make \
             user namespaces available for tier A (`loom doctor`)",
            dir.display()
        ));
    }
    for (entry, symlink) in entries {
        if sets.masked.iter().any(|m| **m == entry) {
            continue; // no rule: unreadable
        }
        let protected = sets.protected.iter().any(|p| **p == entry);
        let holds = Sets::below(sets.protected, &entry) || Sets::below(sets.masked, &entry);
        if symlink {
            continue; // reached through its target's rule, never through the link
        }
        match (protected, holds) {
            // read-only below, with something hidden further down
            (true, true) => split_dir(&entry, false, AccessClass::Read, sets, list, out)?,
            // read-only: the directory's read rule covers it, unless that rule only lists
            (true, false) => {
                if hides {
                    out.push(rule(&entry, AccessClass::Read, false));
                }
            }
            (false, true) => split_dir(&entry, false, class, sets, list, out)?,
            (false, false) => {
                if class == AccessClass::Write || hides {
                    out.push(rule(&entry, class, false));
                }
            }
        }
    }
    Ok(())
}

/// Lists `dir` on the host: each entry's own type (a symlink is not followed), at most [`LIST_LIMIT`] + 1 entries
/// (one more than [`host_root_rules`] accepts, so too many is seen).
pub fn host_lister(dir: &Path) -> std::io::Result<Vec<(PathBuf, bool)>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)?.take(LIST_LIMIT + 1) {
        let e = e?;
        out.push((e.path(), e.file_type()?.is_symlink()));
    }
    out.sort();
    Ok(out)
}

/// Tier B's rules on the host: [`build_landlock_rules`](crate::landlock::build_landlock_rules) for [`View::Host`], except that a root holding a path that
/// must stay read-only or hidden is granted entry by entry (this module); `list` lists a directory. The error
/// says why a root cannot be split.
pub fn build_host_rules(
    profile: &Profile,
    list: &mut Lister<'_>,
) -> Result<Vec<LandlockRule>, String> {
    let mut rules = view_rules(profile, View::Host);
    rules.extend(host_root_rules(profile, list)?);
    Ok(rules)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::profile::tests::build;

    /// A lister over a table of directories and their entries (name, is a symlink).
    fn table(
        dirs: &[(&str, &[(&str, bool)])],
    ) -> impl FnMut(&Path) -> std::io::Result<Vec<(PathBuf, bool)>> {
        let map: BTreeMap<PathBuf, Vec<(PathBuf, bool)>> = dirs
            .iter()
            .map(|(d, es)| {
                let d = PathBuf::from(d);
                let es = es.iter().map(|(n, l)| (d.join(n), *l)).collect();
                (d, es)
            })
            .collect();
        move |p: &Path| {
            map.get(p)
                .cloned()
                .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
        }
    }

    fn find(rules: &[LandlockRule], path: &str) -> Option<AccessClass> {
        rules
            .iter()
            .find(|r| r.path == Path::new(path))
            .map(|r| r.access)
    }

    #[test]
    fn a_root_holding_git_is_writable_entry_by_entry_and_git_stays_read_only() {
        let mut p = build(r#"{ commands = "*", paths = ["./"] }"#).unwrap();
        p.protected = vec!["/work/proj/.git".into(), "/work/proj/sub/.git".into()];
        let mut list = table(&[
            (
                "/work/proj",
                &[
                    (".git", false),
                    ("src", false),
                    ("README.md", false),
                    ("sub", false),
                    ("link", true),
                ],
            ),
            ("/work/proj/sub", &[(".git", false), ("lib.rs", false)]),
        ]);
        let rules = host_root_rules(&p, &mut list).unwrap();
        // the root and the directory on the way are readable only: nothing is created, renamed or removed there
        assert_eq!(find(&rules, "/work/proj"), Some(AccessClass::Read));
        assert!(
            rules
                .iter()
                .find(|r| r.path == Path::new("/work/proj"))
                .unwrap()
                .required
        );
        assert_eq!(find(&rules, "/work/proj/sub"), Some(AccessClass::Read));
        // every other entry is writable on its own
        assert_eq!(find(&rules, "/work/proj/src"), Some(AccessClass::Write));
        assert_eq!(
            find(&rules, "/work/proj/README.md"),
            Some(AccessClass::Write)
        );
        assert_eq!(
            find(&rules, "/work/proj/sub/lib.rs"),
            Some(AccessClass::Write)
        );
        // .git gets nothing beyond the root's read rule, and a symlink no rule of its own
        assert_eq!(find(&rules, "/work/proj/.git"), None);
        assert_eq!(find(&rules, "/work/proj/sub/.git"), None);
        assert_eq!(find(&rules, "/work/proj/link"), None);
        assert!(rules.iter().all(|r| !r.path.starts_with("/work/proj/.git")));
    }

    #[test]
    fn a_masked_store_gets_no_rule_and_its_directory_only_lists() {
        let mut p =
            build(r#"{ commands = "*", paths = ["./"], read_paths = ["/work/docs"] }"#).unwrap();
        p.masked = vec!["/work/docs/.loom-secrets".into()];
        p.protected = vec!["/work/proj/.git".into()];
        let mut list = table(&[
            ("/work/proj", &[(".git", false), ("a.txt", false)]),
            (
                "/work/docs",
                &[(".loom-secrets", false), ("guide.md", false)],
            ),
        ]);
        let rules = host_root_rules(&p, &mut list).unwrap();
        assert_eq!(find(&rules, "/work/docs"), Some(AccessClass::List));
        assert_eq!(find(&rules, "/work/docs/guide.md"), Some(AccessClass::Read));
        assert_eq!(find(&rules, "/work/docs/.loom-secrets"), None);
        assert_eq!(find(&rules, "/work/proj/a.txt"), Some(AccessClass::Write));
    }

    #[test]
    fn a_root_with_nothing_to_keep_is_one_rule_and_a_huge_one_is_refused() {
        let mut p = build(r#"{ commands = "*", paths = ["./"] }"#).unwrap();
        p.protected.clear();
        p.masked.clear();
        let mut never =
            |_: &Path| -> std::io::Result<Vec<(PathBuf, bool)>> { panic!("nothing to split") };
        let rules = host_root_rules(&p, &mut never).unwrap();
        assert_eq!(find(&rules, "/work/proj"), Some(AccessClass::Write));
        p.protected = vec!["/work/proj/.git".into()];
        let mut huge = |d: &Path| -> std::io::Result<Vec<(PathBuf, bool)>> {
            Ok((0..=LIST_LIMIT)
                .map(|i| (d.join(format!("f{i}")), false))
                .collect())
        };
        let e = host_root_rules(&p, &mut huge).unwrap_err();
        assert!(
            e.contains(&format!("more than {LIST_LIMIT} entries")),
            "{e}"
        );
        let mut broken = |_: &Path| -> std::io::Result<Vec<(PathBuf, bool)>> {
            Err(std::io::Error::from(std::io::ErrorKind::PermissionDenied))
        };
        let e = host_root_rules(&p, &mut broken).unwrap_err();
        assert!(e.contains("cannot be listed"), "{e}");
    }
}
