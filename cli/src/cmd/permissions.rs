//! `loom permissions list|revoke <agent.toml>`: the "always" answers remembered for an agent.
//!
//! An answer is remembered when the user picks "always" for a call a `[permissions]` ask rule asked about; it covers
//! exactly that call (the command line, path or host shown) of that tool, and never a call a deny rule or the grant
//! refuses. Answers live in the agent's storage directory, so every manifest sharing the agent's name or
//! `storage_id` shares them. Exit codes: 0 on success, 1 when the file cannot be read or written, 2 for usage errors
//! (an answer number that does not exist).

use std::path::PathBuf;

use loom_runtime::{env_map, storage_dir, terminal_safe, ApprovalError, ApprovalStore, Remembered};

use crate::exit;
use crate::output::{emit, fail};

/// Arguments of `loom permissions`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// List the remembered "always" answers, numbered.
    List {
        /// The agent manifest (a directory means its agent.toml).
        #[arg(default_value = super::manifest_arg::DEFAULT)]
        manifest: PathBuf,
    },
    /// Forget remembered answers by number (as `list` shows them), or all of them.
    Revoke {
        /// The agent manifest, then the answers to forget by number as `list` shows them (the manifest may be left
        /// out when ./agent.toml is meant: a first argument that is a number is an answer's).
        #[arg(value_name = "[MANIFEST] NUMBERS", required_unless_present = "all")]
        args: Vec<String>,
        /// Forget every remembered answer.
        #[arg(long)]
        all: bool,
    },
}

/// Runs `loom permissions`.
pub fn run(args: Args) -> i32 {
    let (manifest, numbers) = match &args.action {
        Action::List { manifest } => (manifest.clone(), Vec::new()),
        Action::Revoke { args, all } => {
            let (manifest, rest) = match args.split_first() {
                Some((first, rest)) if super::manifest_arg::is_manifest(first) => {
                    (first.as_str(), rest)
                }
                _ => (super::manifest_arg::DEFAULT, &args[..]),
            };
            let mut numbers = Vec::new();
            for n in rest {
                match n.parse::<usize>() {
                    Ok(n) => numbers.push(n),
                    Err(_) => {
                        return fail(
                            exit::USAGE,
                            &format!(
                                "{n:?} is not an answer's number (as `loom permissions list` shows them) nor a \
                                 manifest (a .toml file or a directory); the manifest comes first"
                            ),
                        )
                    }
                }
            }
            if *all && !numbers.is_empty() {
                return fail(exit::USAGE, "pass numbers or --all, not both");
            }
            if !*all && numbers.is_empty() {
                return fail(
                    exit::USAGE,
                    "name the answers to forget by number, or pass --all",
                );
            }
            (PathBuf::from(manifest), numbers)
        }
    };
    let loaded = match super::manifest_arg::load(&manifest) {
        Ok(l) => l,
        Err(e) => return fail(exit::FAILED, &e),
    };
    let dir = storage_dir(&loaded.manifest, &env_map());
    let store = match ApprovalStore::open(&dir) {
        Ok(s) => s,
        Err(e) => return fail(exit::FAILED, &e.to_string()),
    };
    match args.action {
        Action::List { .. } => {
            let entries = store.entries();
            if entries.is_empty() {
                emit(&format!(
                    "no remembered answers for agent {:?} ({})\n",
                    loaded.manifest.agent.name,
                    store.path().display()
                ));
            } else {
                let mut out = format!(
                    "remembered \"always\" answers for agent {:?} ({}):\n",
                    loaded.manifest.agent.name,
                    store.path().display()
                );
                for (i, r) in entries.iter().enumerate() {
                    // the remembered command line came from the model: shown, never obeyed
                    out.push_str(&format!("{:>3}  {}\n", i + 1, terminal_safe(&describe(r))));
                }
                emit(&out);
            }
            exit::OK
        }
        Action::Revoke { all, .. } => {
            let indices: Vec<usize> = if all {
                (0..store.entries().len()).collect()
            } else {
                if numbers.contains(&0) {
                    return fail(
                        exit::USAGE,
                        "answers are numbered from 1, as `loom permissions list` shows",
                    );
                }
                numbers.iter().map(|n| n - 1).collect()
            };
            match store.revoke(&indices) {
                Ok(gone) => {
                    let mut out = String::new();
                    for r in &gone {
                        out.push_str(&format!("revoked  {}\n", terminal_safe(&describe(r))));
                    }
                    if gone.is_empty() {
                        out.push_str("nothing to revoke\n");
                    }
                    emit(&out);
                    exit::OK
                }
                Err(e @ ApprovalError::NoSuchAnswer { .. }) => fail(exit::USAGE, &e.to_string()),
                Err(e) => fail(exit::FAILED, &e.to_string()),
            }
        }
    }
}

fn describe(r: &Remembered) -> String {
    let subject = r
        .approval
        .subject
        .as_ref()
        .map_or_else(|| "any call".into(), ToString::to_string);
    format!("{}  {subject}  (given {})", r.approval.tool, utc(r.at))
}

/// `secs` since the Unix epoch as `YYYY-MM-DD HH:MM UTC` (civil-from-days, proleptic Gregorian).
pub fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        rem / 3_600,
        rem % 3_600 / 60
    )
}

#[cfg(test)]
mod tests {
    use super::utc;

    #[test]
    fn dates() {
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00 UTC");
        assert_eq!(utc(1_796_056_200), "2026-11-30 16:30 UTC");
    }
}
