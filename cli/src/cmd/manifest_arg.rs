//! The one way every command takes its manifest: a positional that defaults to `./agent.toml`, where a directory
//! means the `agent.toml` inside it. A path the user named is never swapped for another: a named file that does not
//! exist is the loader's error.

use std::path::{Path, PathBuf};

/// The manifest a command reads when none is named.
pub const DEFAULT: &str = "agent.toml";

/// The manifest to read for the argument `given` (the default when absent), or why there is none.
pub fn resolve(given: &Path) -> Result<PathBuf, String> {
    if given == Path::new(DEFAULT) && !given.exists() {
        return Err(format!(
            "there is no {DEFAULT} in the current directory; name the manifest (`loom <command> path/to/agent.toml`) \
             or run loom in the agent's directory"
        ));
    }
    if given.is_dir() {
        let inside = given.join(DEFAULT);
        if inside.is_file() {
            return Ok(inside);
        }
        return Err(format!(
            "{}: a directory without an {DEFAULT}; name the manifest file",
            given.display()
        ));
    }
    Ok(given.to_path_buf())
}

/// [`resolve`], then load and parse it: the manifest, or the message to print.
pub fn load(given: &Path) -> Result<loom_runtime::Loaded, String> {
    loom_runtime::load_manifest(&resolve(given)?).map_err(|e| e.to_string())
}

/// Whether a lone positional that may be a manifest or something else (a prompt's text, a permission's number) is
/// the manifest: it names an existing file or directory, or ends in `.toml`.
pub fn is_manifest(arg: &str) -> bool {
    arg.ends_with(".toml") || Path::new(arg).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_means_its_agent_toml_and_a_named_path_stays_itself(
    ) -> Result<(), Box<dyn std::error::Error>> {
        let d = tempfile::tempdir()?;
        std::fs::write(d.path().join("agent.toml"), "")?;
        assert_eq!(resolve(d.path())?, d.path().join("agent.toml"));
        let named = d.path().join("other.toml");
        assert_eq!(
            resolve(&named)?,
            named,
            "a missing named file is the loader's to report"
        );
        let empty = d.path().join("empty");
        std::fs::create_dir(&empty)?;
        assert!(resolve(&empty).is_err_and(|e| e.contains("a directory without an agent.toml")));
        assert!(is_manifest("x.toml") && is_manifest(&d.path().display().to_string()));
        assert!(!is_manifest("what files are here?") && !is_manifest("3"));
        Ok(())
    }
}
