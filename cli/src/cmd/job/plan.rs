//! `loom job plan ITEMS --emit gha-matrix | k8s-indexed-job`: the engine's own description of the job, generated
//! from the items file. loom schedules nothing: the engine runs `loom job run` once per cell.
//!
//! Both keep the items in a file and pass only indexes through the engine (an engine's parameters are small and
//! visible: GitHub outputs, etcd objects), and never a secret.

use serde_json::{json, Value};

use super::items::Items;

/// GitHub Actions runs at most this many jobs from one matrix.
pub const GHA_MAX_CELLS: usize = 256;
/// A ConfigMap (an etcd object) holds at most 1 MiB; the items file must fit with room for the rest of the object.
pub const CONFIGMAP_MAX_BYTES: usize = 1_000_000;

/// The GitHub Actions matrix: `{"include": [{"index", "count", "name"}, ...]}`, at most `max_cells` cells; past that,
/// each cell runs `count` consecutive items (`loom job run --index I --count C`).
pub fn gha_matrix(items: &Items, max_cells: usize) -> Value {
    let n = items.items.len();
    let per_cell = n.div_ceil(max_cells.max(1));
    let cells: Vec<Value> = items
        .items
        .chunks(per_cell)
        .map(|chunk| {
            let first = &chunk[0];
            let name = match chunk.last() {
                Some(last) if chunk.len() > 1 => format!("{}..{}", first.id, last.id),
                _ => first.id.clone(),
            };
            json!({"index": first.index, "count": chunk.len(), "name": name})
        })
        .collect();
    json!({ "include": cells })
}

/// What the Kubernetes objects are made from.
#[derive(Debug, Clone)]
pub struct K8s {
    /// The Job's name (and the ConfigMap's prefix): a DNS label.
    pub name: String,
    /// The container image holding loom and the agent.
    pub image: String,
    /// The manifest's path inside the image.
    pub manifest: String,
    /// The baseline manifest's path inside the image, for the per-job gate.
    pub baseline: Option<String>,
    /// Secret objects mounted together as `LOOM_SECRETS_DIR`.
    pub secrets: Vec<String>,
    /// Pods at once.
    pub parallelism: usize,
    /// Retries per index (for exit 75, 130 and lost pods).
    pub retries: usize,
    /// The whole Job's deadline, seconds (then SIGTERM: the turns end cancelled, sessions flushed).
    pub deadline: u64,
    /// A PersistentVolumeClaim for the results (else an emptyDir: read the results before the pod is gone).
    pub results_claim: Option<String>,
    /// `--require-tier` for each cell.
    pub require_tier: Option<String>,
}

/// Where things are mounted in the pod.
const ITEMS_DIR: &str = "/etc/loom/items";
const SECRETS_DIR: &str = "/run/secrets/loom";
const RESULTS_DIR: &str = "/results";
const WORK_DIR: &str = "/workspace";
const DATA_DIR: &str = "/var/lib/loom";
/// The image's non-root user.
pub const UID: u64 = 10001;

/// Checks a Kubernetes object name (a DNS-1123 label, with room for the ConfigMap's suffix).
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 52
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "--name {name:?}: a Job name is 1 to 52 lowercase letters, digits and hyphens, not starting or ending with \
             a hyphen (a DNS label with room for the ConfigMap's \"-items\")"
        ))
    }
}

/// The ConfigMap of items and the Indexed Job, as a YAML stream's documents.
pub fn k8s_indexed_job(items: &Items, k: &K8s) -> Result<Vec<Value>, String> {
    if items.text.len() > CONFIGMAP_MAX_BYTES {
        return Err(format!(
            "the items file is {} bytes; a ConfigMap holds about {CONFIGMAP_MAX_BYTES}: split the items into several \
             jobs",
            items.text.len()
        ));
    }
    let n = items.items.len();
    let items_map = format!("{}-items", k.name);
    let labels = json!({"app.kubernetes.io/name": k.name, "app.kubernetes.io/managed-by": "loom"});
    let config_map = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": items_map, "labels": labels},
        "data": {"items.jsonl": items.text},
    });
    // no --index: each pod's `loom job run` reads JOB_COMPLETION_INDEX, which the Job controller sets
    let mut args = vec![
        json!("job"),
        json!("run"),
        json!(k.manifest),
        json!("--items"),
        json!(format!("{ITEMS_DIR}/items.jsonl")),
        json!("--out"),
        json!(RESULTS_DIR),
    ];
    if let Some(b) = &k.baseline {
        args.extend([json!("--baseline"), json!(b)]);
    }
    if let Some(t) = &k.require_tier {
        args.extend([json!("--require-tier"), json!(t)]);
    }
    let mut env = vec![
        json!({"name": "LOOM_DATA_HOME", "value": DATA_DIR}),
        json!({"name": "HOME", "value": DATA_DIR}),
    ];
    let mut mounts = vec![
        json!({"name": "items", "mountPath": ITEMS_DIR, "readOnly": true}),
        json!({"name": "results", "mountPath": RESULTS_DIR}),
        json!({"name": "workspace", "mountPath": WORK_DIR}),
        json!({"name": "data", "mountPath": DATA_DIR}),
        json!({"name": "tmp", "mountPath": "/tmp"}),
    ];
    let results = match &k.results_claim {
        Some(c) => json!({"name": "results", "persistentVolumeClaim": {"claimName": c}}),
        None => json!({"name": "results", "emptyDir": {}}),
    };
    let mut volumes = vec![
        json!({"name": "items", "configMap": {"name": items_map}}),
        results,
        json!({"name": "workspace", "emptyDir": {}}),
        json!({"name": "data", "emptyDir": {}}),
        json!({"name": "tmp", "emptyDir": {}}),
    ];
    if !k.secrets.is_empty() {
        env.push(json!({"name": "LOOM_SECRETS_DIR", "value": SECRETS_DIR}));
        mounts.push(json!({"name": "secrets", "mountPath": SECRETS_DIR, "readOnly": true}));
        let sources: Vec<Value> = k
            .secrets
            .iter()
            .map(|s| json!({"secret": {"name": s}}))
            .collect();
        volumes.push(
            json!({"name": "secrets", "projected": {"sources": sources, "defaultMode": 0o400}}),
        );
    }
    let job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": k.name, "labels": labels},
        "spec": {
            "completionMode": "Indexed",
            "completions": n,
            "parallelism": k.parallelism.min(n),
            "backoffLimitPerIndex": k.retries,
            "activeDeadlineSeconds": k.deadline,
            "podFailurePolicy": {"rules": [
                // deterministic failures: a manifest or usage error (1, 2), the ceiling grew (3), the required
                // sandbox tier is not on this node (69) — retrying the index cannot help
                {"action": "FailIndex", "onExitCodes": {"containerName": "loom", "operator": "In",
                                                        "values": [1, 2, 3, 69]}},
                // a pod lost to a node drain or preemption is not the item's failure
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
                // anything else (75: a transient provider error; 130: cancelled) counts against backoffLimitPerIndex
            ]},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": false,
                    "securityContext": {
                        "runAsNonRoot": true,
                        "runAsUser": UID,
                        "runAsGroup": UID,
                        "fsGroup": UID,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [{
                        "name": "loom",
                        "image": k.image,
                        "args": args,
                        "workingDir": WORK_DIR,
                        "env": env,
                        "volumeMounts": mounts,
                        "securityContext": {
                            "allowPrivilegeEscalation": false,
                            "readOnlyRootFilesystem": true,
                            "capabilities": {"drop": ["ALL"]},
                        },
                    }],
                    "volumes": volumes,
                },
            },
        },
    });
    Ok(vec![config_map, job])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(n: usize) -> Result<Items, String> {
        let text: String = (0..n)
            .map(|i| format!("{{\"prompt\": \"p{i}\"}}\n"))
            .collect();
        Ok(Items {
            items: super::super::items::parse(&text)?,
            text,
            sha256: String::new(),
        })
    }

    #[test]
    fn a_matrix_has_one_cell_per_item_up_to_the_limit() -> Result<(), String> {
        let m = gha_matrix(&items(3)?, GHA_MAX_CELLS);
        assert_eq!(m["include"].as_array().map(Vec::len), Some(3));
        assert_eq!(
            m["include"][2],
            json!({"index": 2, "count": 1, "name": "item-2"})
        );
        Ok(())
    }

    #[test]
    fn past_the_limit_cells_run_consecutive_items_and_cover_every_index_once() -> Result<(), String>
    {
        for n in [256, 257, 600, 1000] {
            let m = gha_matrix(&items(n)?, GHA_MAX_CELLS);
            let cells = m["include"].as_array().cloned().unwrap_or_default();
            assert!(cells.len() <= GHA_MAX_CELLS, "{n}: {} cells", cells.len());
            let mut next = 0;
            for c in &cells {
                assert_eq!(c["index"].as_u64(), Some(next as u64), "{n}");
                next += c["count"].as_u64().unwrap_or(0) as usize;
            }
            assert_eq!(next, n);
        }
        Ok(())
    }

    #[test]
    fn names_are_dns_labels() {
        assert!(check_name("loom-fix-1").is_ok());
        for bad in ["", "Loom", "-a", "a-", "a_b", &"a".repeat(53)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }
}
