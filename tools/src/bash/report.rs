//! What a bash call reports beside its output: the sandbox's enforcement, as JSON.

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
