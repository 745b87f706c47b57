//! macOS: a deny-default Seatbelt (SBPL) profile generated from the same [`Profile`] (pure text).
//!
//! Paths are never spliced into the text: each root is referenced as `(param "ROOT_n")` and returned as a parameter
//! for `sandbox-exec -D ROOT_n=/path`, so a path containing quotes or parentheses cannot change the policy.

use crate::profile::Profile;

/// The SBPL text and its parameters (`name`, `value`) for a profile.
pub fn build_sbpl(profile: &Profile) -> (String, Vec<(String, String)>) {
    let mut params: Vec<(String, String)> = Vec::new();
    let mut param = |prefix: &str, value: String| {
        let name = format!("{prefix}_{}", params.len());
        params.push((name.clone(), value));
        name
    };
    let mut text = String::from(
        "(version 1)\n(deny default)\n(allow process-exec process-fork)\n(allow signal (target same-sandbox))\n\
         (allow sysctl-read mach-lookup ipc-posix-shm-read-data)\n\
         (allow file-read* (subpath \"/usr\") (subpath \"/bin\") (subpath \"/sbin\") (subpath \"/System\") \
         (subpath \"/Library\") (subpath \"/private/etc\") (subpath \"/dev\") (literal \"/\"))\n\
         (allow file-write-data (literal \"/dev/null\") (literal \"/dev/tty\"))\n",
    );
    let mut read = Vec::new();
    let mut write = Vec::new();
    for (root, writable) in profile.roots() {
        let name = param("ROOT", root.display().to_string());
        read.push(format!("(subpath (param \"{name}\"))"));
        if writable {
            write.push(format!("(subpath (param \"{name}\"))"));
        }
    }
    if !read.is_empty() {
        text.push_str(&format!("(allow file-read* {})\n", read.join(" ")));
    }
    if !write.is_empty() {
        text.push_str(&format!("(allow file-write* {})\n", write.join(" ")));
    }
    let protected: Vec<String> = profile
        .protected
        .iter()
        .map(|p| {
            let name = param("PROTECTED", p.display().to_string());
            format!("(subpath (param \"{name}\"))")
        })
        .collect();
    if !protected.is_empty() {
        // Later rules win in SBPL: protected paths stay read-only inside writable roots.
        text.push_str(&format!("(deny file-write* {})\n", protected.join(" ")));
    }
    let masked: Vec<String> = profile
        .masked
        .iter()
        .map(|p| {
            let name = param("MASKED", p.display().to_string());
            format!("(literal (param \"{name}\"))")
        })
        .collect();
    if !masked.is_empty() {
        // secret stores: neither read nor written
        text.push_str(&format!(
            "(deny file-read* file-write* {})\n",
            masked.join(" ")
        ));
    }
    if profile.network {
        text.push_str("(allow network*)\n");
    }
    (text, params)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::tests::build;

    #[test]
    fn deny_default_with_roots_as_parameters() {
        let p =
            build(r#"{ commands = "*", paths = ["./"], read_paths = ["/work/docs"] }"#).unwrap();
        let (text, params) = build_sbpl(&p);
        assert!(text.starts_with("(version 1)\n(deny default)\n"), "{text}");
        assert!(
            !text.contains("/work/proj"),
            "paths must be parameters, not text: {text}"
        );
        assert_eq!(params[0], ("ROOT_0".to_string(), "/work/docs".to_string()));
        assert_eq!(params[1], ("ROOT_1".to_string(), "/work/proj".to_string()));
        assert!(text.contains(
            "(allow file-read* (subpath (param \"ROOT_0\")) (subpath (param \"ROOT_1\")))"
        ));
        assert!(text.contains("(allow file-write* (subpath (param \"ROOT_1\")))\n"));
        assert!(
            text.contains("(deny file-write* (subpath (param \"PROTECTED_2\"))"),
            "{text}"
        );
        assert!(
            !text.contains("network"),
            "network off: deny default covers sockets: {text}"
        );
        assert!(text.contains("(allow signal (target same-sandbox))\n"));
        let deny = text.find("(deny file-write*").unwrap();
        let allow = text.find("(allow file-write* (subpath").unwrap();
        assert!(allow < deny, "the protected deny must come last");
    }

    #[test]
    fn network_rows_allow_the_network() {
        let p = build(r#"{ commands = "*", network = "*" }"#).unwrap();
        let (text, params) = build_sbpl(&p);
        assert!(text.contains("(allow network*)\n"));
        assert!(params.is_empty());
    }
}
