//! What a bash call reports beside its output, as JSON: the sandbox's enforcement, and what was moved aside after it.

use serde_json::json;

/// What the sandbox enforced, for the result's raw output: `{"tier": "B", "landlock": "full", "landlockAbi": 7,
/// "rights": {"signals": "landlock", "metadata": "seccomp", ...}, "accepted": [...]}`.
pub(super) fn sandbox_json(status: &loom_sandbox::SandboxStatus) -> serde_json::Value {
    let rights: serde_json::Map<String, serde_json::Value> = status
        .rights
        .iter()
        .map(|r| (r.right.name().to_string(), json!(r.by.name())))
        .collect();
    let accepted: Vec<&str> = status.accepted().iter().map(|r| r.name()).collect();
    json!({
        "tier": status.tier.name(),
        "landlock": status.landlock.as_str(),
        "landlockAbi": status.landlock_abi,
        "rights": rights,
        "accepted": accepted,
    })
}

/// Adds what the sweep after the command found (nothing when it found nothing) to the result's text and raw output.
pub(super) fn add_swept(
    text: &mut String,
    raw: &mut serde_json::Value,
    swept: &[loom_sandbox::Swept],
) {
    if let Some(note) = loom_sandbox::swept_note(swept) {
        raw["swept"] = swept_json(swept);
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&note);
    }
}

/// What the sweep after the command found, for the result's raw output: `[{"from": …, "to": …}]` for each entry moved
/// aside, `[{"path": …, "error": …}]` for one that could not be; an entry of an earlier command whose loom died has
/// `"earlier": true`, and a record of one that could not be used is `{"record": …, "error": …}`.
fn swept_json(swept: &[loom_sandbox::Swept]) -> serde_json::Value {
    swept.iter().map(one_json).collect()
}

fn one_json(s: &loom_sandbox::Swept) -> serde_json::Value {
    match s {
        loom_sandbox::Swept::Moved { from, to } => {
            json!({ "from": from.display().to_string(), "to": to.display().to_string() })
        }
        loom_sandbox::Swept::Stuck { path, why } => {
            json!({ "path": path.display().to_string(), "error": why })
        }
        loom_sandbox::Swept::Earlier(inner) => {
            let mut v = one_json(inner);
            v["earlier"] = json!(true);
            v
        }
        loom_sandbox::Swept::Unread { record, why } => {
            json!({ "record": record.display().to_string(), "error": why })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loom_sandbox::Swept;

    #[test]
    fn earlier_sweeps_and_unread_records_are_told_apart_in_text_and_raw_output() {
        let moved = Swept::Moved {
            from: "/w/.envrc".into(),
            to: "/w/.envrc.loom-moved".into(),
        };
        let swept = [
            moved.clone(),
            Swept::Earlier(Box::new(moved)),
            Swept::Unread {
                record: "/d/sweeps/1-2-3.sweep".into(),
                why: "line 2 is not a record line".into(),
            },
        ];
        let (mut text, mut raw) = ("out".to_string(), json!({}));
        add_swept(&mut text, &mut raw, &swept);
        assert_eq!(
            raw["swept"],
            json!([
                { "from": "/w/.envrc", "to": "/w/.envrc.loom-moved" },
                { "from": "/w/.envrc", "to": "/w/.envrc.loom-moved", "earlier": true },
                { "record": "/d/sweeps/1-2-3.sweep", "error": "line 2 is not a record line" },
            ])
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[2].ends_with("by a command whose loom ended before the command did (killed, or the machine stopped)]"), "{text}");
        assert!(
            lines[3].contains("/d/sweeps/1-2-3.sweep") && lines[3].contains("line 2"),
            "{text}"
        );
        // nothing found: nothing said
        let (mut text, mut raw) = ("out".to_string(), json!({}));
        add_swept(&mut text, &mut raw, &[]);
        assert_eq!((text.as_str(), &raw), ("out", &json!({})));
    }
}
