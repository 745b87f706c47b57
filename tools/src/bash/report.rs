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
/// aside, `[{"path": …, "error": …}]` for one that could not be.
fn swept_json(swept: &[loom_sandbox::Swept]) -> serde_json::Value {
    swept
        .iter()
        .map(|s| match s {
            loom_sandbox::Swept::Moved { from, to } => {
                json!({ "from": from.display().to_string(), "to": to.display().to_string() })
            }
            loom_sandbox::Swept::Stuck { path, why } => {
                json!({ "path": path.display().to_string(), "error": why })
            }
        })
        .collect()
}
