//! # loom-benches
//!
//! Fixtures for the criterion benches in `benches/` (see `benches/README.md`): large bash capability sets and the
//! requests measured against them. Built here, not in the bench, so the fixtures are unit-tested.

use loom_kernel::{AlgebraKind, Grant, PathCtx, Row, Value};

/// The path facts every bench uses: base `/tmp/work`, home `/home/u`.
pub fn ctx() -> PathCtx {
    PathCtx::new("/tmp/work", Some("/home/u".into()))
}

/// Row `i` of a large bash capability set: one command, its own directory, network on every third row, an env
/// pattern on every other row.
pub fn bash_row(i: usize) -> Row {
    let mut pairs = vec![
        ("commands", Value::strs([format!("cmd{i:05}")])),
        (
            "paths",
            Value::strs([
                format!("./data/{i:05}"),
                format!("/srv/shared/{:03}", i % 997),
            ]),
        ),
    ];
    if i.is_multiple_of(3) {
        pairs.push(("network", Value::Star));
    }
    if i.is_multiple_of(2) {
        pairs.push(("env", Value::strs(["PATH", "AWS_*"])));
    }
    Row::from_pairs(pairs)
}

/// A bash capability set of the rows `from..to`.
pub fn bash_set(from: usize, to: usize) -> Grant {
    Grant::set((from..to).map(bash_row).collect())
}

/// A request that fits exactly the row whose command is `cmd{i}` (narrower paths, same network and env).
pub fn request_for(i: usize) -> Grant {
    let mut pairs = vec![
        ("commands", Value::strs([format!("cmd{i:05}")])),
        ("paths", Value::strs([format!("./data/{i:05}/out")])),
    ];
    if i.is_multiple_of(3) {
        pairs.push(("network", Value::Star));
    }
    if i.is_multiple_of(2) {
        pairs.push(("env", Value::strs(["AWS_KEY"])));
    }
    Grant::row(Row::from_pairs(pairs))
}

/// A request no row grants: a command absent from every row.
pub fn request_absent() -> Grant {
    Grant::row(Row::from_pairs([
        ("commands", Value::strs(["curl"])),
        ("paths", Value::strs(["./data/00001"])),
    ]))
}

/// The index of the first and of the last row in a set's canonical (sorted) order, as a `cmd` number.
pub fn first_and_last(set: &Grant) -> Option<(usize, usize)> {
    let rows = set.rows()?;
    let num = |r: &Row| -> Option<usize> {
        let cmd = r
            .get("commands")?
            .elements()?
            .first()?
            .as_str()?
            .to_string();
        cmd.strip_prefix("cmd")?.parse().ok()
    };
    Some((num(rows.first()?)?, num(rows.last()?)?))
}

/// The four tools a manifest without `[tools]` gets, with their algebras.
pub const DEFAULT_TOOLS: [(&str, AlgebraKind); 4] = [
    ("bash", AlgebraKind::Bash),
    ("read_file", AlgebraKind::Files),
    ("write_file", AlgebraKind::Files),
    ("edit_file", AlgebraKind::Files),
];

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn fixtures_behave_as_the_benches_claim() {
        let bash = AlgebraKind::Bash.build(&ctx());
        let set = bash_set(0, 1000);
        assert_eq!(set.rows().unwrap().len(), 1000);
        let (first, last) = first_and_last(&set).unwrap();
        assert_eq!((first, last), (0, 999));
        assert!(bash.contains(&set, &request_for(first)));
        assert!(bash.contains(&set, &request_for(last)));
        assert!(!bash.contains(&set, &request_absent()));
        for (tool, kind) in DEFAULT_TOOLS {
            assert_eq!(AlgebraKind::for_builtin(tool), kind);
        }
    }
}
