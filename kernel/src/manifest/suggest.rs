//! Closed key sets: refusing unknown keys with the nearest valid one.

use super::error::{join, Ctx, ManifestError};

/// The valid key closest to `key`, when one is close enough to be a likely typo.
pub(crate) fn nearest<'a>(key: &str, valid: &[&'a str]) -> Option<&'a str> {
    let key_lower = key.to_ascii_lowercase();
    let mut best: Option<(usize, &'a str)> = None;
    for &candidate in valid {
        let d = strsim::damerau_levenshtein(&key_lower, &candidate.to_ascii_lowercase());
        match best {
            Some((bd, _)) if bd <= d => {}
            _ => best = Some((d, candidate)),
        }
    }
    let (distance, candidate) = best?;
    let budget = (key.chars().count().max(candidate.chars().count()) / 3).max(1);
    if distance <= budget {
        return Some(candidate);
    }
    // Long names with an inserted or dropped word (maxTokens / maxOutputTokens) share a long prefix.
    valid
        .iter()
        .map(|c| {
            (
                strsim::jaro_winkler(&key_lower, &c.to_ascii_lowercase()),
                *c,
            )
        })
        .filter(|(score, _)| *score >= 0.85)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// The message for an unknown key: a suggestion when one is close, else the valid set.
pub(crate) fn unknown_key_message(key: &str, valid: &[&str]) -> String {
    match nearest(key, valid) {
        Some(s) => format!("unknown key; did you mean {s}?"),
        None if valid.is_empty() => "unknown key; this table takes no keys".to_string(),
        None => format!("unknown key; expected one of: {}", valid.join(", ")),
    }
}

/// Refuses the first key of `table` not in `valid`, naming its path and the nearest valid key.
pub(crate) fn check_keys(
    ctx: Ctx<'_>,
    path: &str,
    table: &toml::Table,
    valid: &[&str],
) -> Result<(), ManifestError> {
    for key in table.keys() {
        if !valid.contains(&key.as_str()) {
            return Err(ctx.err(&join(path, key), unknown_key_message(key, valid)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn suggests(key: &str, valid: &[&str], want: Option<&str>) {
        assert_eq!(nearest(key, valid), want, "key {key:?}");
    }

    #[test]
    fn suggestions() {
        let agent = [
            "name",
            "description",
            "system_prompt",
            "secrets",
            "storage_id",
            "metadata",
        ];
        suggests("sytem_prompt", &agent, Some("system_prompt"));
        suggests("nmae", &agent, Some("name"));
        suggests("Secrets", &agent, Some("secrets"));
        suggests("storageId", &agent, Some("storage_id"));
        suggests("zzzzzz", &agent, None);
        suggests(
            "capabilites",
            &["provider", "tool", "capabilities"],
            Some("capabilities"),
        );
        suggests("x", &[], None);
    }

    #[test]
    fn messages() {
        assert_eq!(
            unknown_key_message("sytem_prompt", &["system_prompt"]),
            "unknown key; did you mean system_prompt?"
        );
        assert_eq!(
            unknown_key_message("qqqq", &["a1", "b1"]),
            "unknown key; expected one of: a1, b1"
        );
    }
}
