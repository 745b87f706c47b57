//! The manifest parser: arbitrary text -> `loom_kernel::parse_manifest(text, "agent.toml", env)` with a small env map
//! (so `${VAR}` and `${VAR:-default}` both resolve and fail). It must return `Ok` or an error, never panic, never
//! overflow the stack; an error must render to a non-empty message naming the file.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let env: BTreeMap<String, String> = [
        ("HOME", "/home/u"),
        ("VAULT_PATH", "./vault"),
        ("EMPTY", ""),
        ("NESTED", "${HOME}"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    match loom_kernel::parse_manifest(text, "agent.toml", &env) {
        Ok(manifest) => {
            let _ = format!("{manifest:?}");
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(!msg.is_empty());
        }
    }
});
