//! Fixture skills for the skills e2e suites: the Agent Skills spec's own example shapes, the seed's skills, and
//! broken ones.

use crate::Scratch;

/// The spec's example with every optional field; bundles a script.
pub const PDF: &str = "---\nname: pdf-processing\ndescription: Extract text and tables from PDF files, fill PDF forms, and merge PDFs. Use when working with PDF documents.\nlicense: Apache-2.0\ncompatibility: Requires python3\nmetadata:\n  author: example-org\n  version: \"1.0\"\nallowed-tools: Bash(python3:*) Read\n---\n# PDF processing\n\nRun scripts/extract.py on the file.\n";

/// The seed's dns-lookup skill (a bash row, a folded description).
pub const DNS: &str = "---\nname: dns-lookup\ndescription: Look up DNS records with dig. Use when the user asks\n  what a domain resolves to.\nmetadata:\n  loom.tools: |\n    bash = { capabilities = { commands = [\"dig\"], network = \"*\" } }\n---\n\n# DNS lookup\n\nUse the `bash` tool to invoke `dig`.\n";

/// The seed's calendar skill (needs a gcalcli row the host does not grant).
pub const CALENDAR: &str = "---\nname: calendar\ndescription: Read and edit Google Calendar with gcalcli.\nmetadata:\n  loom.tools: |\n    bash = { capabilities = { commands = [\"gcalcli\"], network = \"*\", paths = [\"~/.gcalcli\"] } }\n---\n\nRun `gcalcli agenda` to list events.\n";

/// Writes the fixture skills under `root` (relative to the scratch dir): three good ones, broken YAML, a name that
/// does not match its folder, and a SKILL.md that is a symlink out of its folder.
pub fn write_skills(s: &Scratch, root: &str) {
    s.write(&format!("{root}/pdf-processing/SKILL.md"), PDF);
    s.write(
        &format!("{root}/pdf-processing/scripts/extract.py"),
        "print('extracted')\n",
    );
    s.write(&format!("{root}/dns-lookup/SKILL.md"), DNS);
    s.write(&format!("{root}/calendar/SKILL.md"), CALENDAR);
    s.write(
        &format!("{root}/broken-yaml/SKILL.md"),
        "---\nname: broken-yaml\ndescription: [never closed\n---\nbody\n",
    );
    s.write(
        &format!("{root}/wrong-name/SKILL.md"),
        "---\nname: right-name\ndescription: d\n---\nbody\n",
    );
    let outside = s.write(
        "outside/SKILL.md",
        "---\nname: linked\ndescription: d\n---\nsecret instructions\n",
    );
    let linked = s.path().join(root).join("linked");
    std::fs::create_dir_all(&linked).unwrap_or_else(|e| panic!("invariant failed: mkdir: {e}"));
    std::os::unix::fs::symlink(outside, linked.join("SKILL.md"))
        .unwrap_or_else(|e| panic!("invariant failed: symlink: {e}"));
}
