//! The doom-loop guard: the third identical consecutive call (same tool, same input) in a run is not run on the
//! grant alone — it gets the kernel's `Ask` verdict ("the model appears stuck"), which a headless run treats as a
//! refusal fed back to the model, never as consent.

use crate::policy::rules::Verdict;

/// How many identical consecutive calls trip the guard.
pub const DOOM_LOOP_THRESHOLD: usize = 3;

/// The guard's memory of recent calls.
#[derive(Debug, Default, Clone)]
pub struct DoomGuard {
    recent: Vec<(String, String)>,
}

impl DoomGuard {
    /// Records a call and returns the narrowing verdict for it: `Ask` when it is the third identical one in a row.
    pub fn check(&mut self, tool: &str, input: &serde_json::Value) -> Verdict {
        let key = (tool.to_string(), canonical(input));
        if self.recent.last() != Some(&key) {
            self.recent.clear();
        }
        self.recent.push(key);
        if self.recent.len() >= DOOM_LOOP_THRESHOLD {
            Verdict::Ask
        } else {
            Verdict::Allow
        }
    }
}

/// JSON text with object keys sorted, so key order never makes two calls differ.
fn canonical(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys
                .into_iter()
                .map(|k| {
                    format!(
                        "{}:{}",
                        serde_json::Value::String(k.clone()),
                        canonical(&m[k])
                    )
                })
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        serde_json::Value::Array(a) => format!(
            "[{}]",
            a.iter().map(canonical).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_third_identical_call_asks() {
        let mut g = DoomGuard::default();
        assert_eq!(g.check("bash", &json!({"a": 1, "b": 2})), Verdict::Allow);
        assert_eq!(g.check("bash", &json!({"b": 2, "a": 1})), Verdict::Allow);
        assert_eq!(g.check("bash", &json!({"a": 1, "b": 2})), Verdict::Ask);
        assert_eq!(
            g.check("read_file", &json!({"a": 1, "b": 2})),
            Verdict::Allow
        );
        assert_eq!(g.check("bash", &json!({"a": 1, "b": 2})), Verdict::Allow);
    }
}
