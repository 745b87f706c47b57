//! Watching free text for the opening of a tool call (a lazy grammar's [`Trigger`]): what may be shown as it comes,
//! what must wait because it may still become the trigger, and where the trigger begins once it is there. Pure, so
//! the model loop's one tricky decision is tested without a model.

use loom_engine_protocol::Trigger;

/// What the text generated so far means for the trigger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seen {
    /// No trigger yet: the text up to this byte can be shown; the rest may still become one.
    Free(usize),
    /// The trigger begins at this byte.
    Fire(usize),
    /// The trigger can no longer appear (one that must open the output did not): all of it is free text.
    Never,
}

/// Reads `text` (everything generated so far) against `trigger`.
pub(crate) fn look(trigger: &Trigger, text: &str) -> Seen {
    let want = trigger.text.as_str();
    if want.is_empty() {
        return Seen::Fire(0);
    }
    if trigger.at_start {
        let lead = text.trim_start();
        let at = text.len() - lead.len();
        if lead.starts_with(want) {
            return Seen::Fire(at);
        }
        return if want.starts_with(lead) {
            Seen::Free(0)
        } else {
            Seen::Never
        };
    }
    if let Some(at) = text.find(want) {
        return Seen::Fire(at);
    }
    // hold back the longest end of the text that is a beginning of the trigger
    let held = (1..want.len())
        .rev()
        .find(|k| {
            text.len() >= *k
                && text.is_char_boundary(text.len() - k)
                && want.is_char_boundary(*k)
                && text.ends_with(&want[..*k])
        })
        .unwrap_or(0);
    Seen::Free(text.len() - held)
}

/// Where to cut the generated tokens when a trigger begins at byte `from`: `starts` are where the decoded tokens'
/// pieces start, `at` where the current (not decoded) one starts. Returns how many decoded tokens lie wholly before
/// `from` (they are kept), and where the text to decode again begins (the first token not kept, or `at`): the bytes
/// from there to `from` are text before the trigger that a dropped token also held.
pub(crate) fn cut(starts: &[usize], at: usize, from: usize) -> (usize, usize) {
    // each decoded token ends where the next starts; the last where the current one starts
    let ends = starts.iter().skip(1).copied().chain(std::iter::once(at));
    let keep = ends.take(starts.len()).take_while(|e| *e <= from).count();
    (keep, starts.get(keep).copied().unwrap_or(at))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn anywhere(t: &str) -> Trigger {
        Trigger {
            text: t.into(),
            at_start: false,
        }
    }

    #[test]
    fn a_trigger_anywhere_holds_back_only_what_may_still_open_it() {
        let t = anywhere("<tool_call>");
        assert_eq!(look(&t, ""), Seen::Free(0));
        assert_eq!(look(&t, "I will read it."), Seen::Free(15));
        assert_eq!(look(&t, "Sure <to"), Seen::Free(5));
        assert_eq!(look(&t, "a < b"), Seen::Free(5));
        assert_eq!(look(&t, "a <"), Seen::Free(2));
        assert_eq!(look(&t, "Sure <tool_call>"), Seen::Fire(5));
        assert_eq!(look(&t, "<tool_call>\n{\"name\""), Seen::Fire(0));
        // a near miss is free text, multi-byte characters included
        assert_eq!(look(&t, "<tool_cal é>"), Seen::Free(13));
        assert_eq!(look(&t, "é"), Seen::Free(2));
    }

    #[test]
    fn a_trigger_at_the_start_fires_there_or_never() {
        let t = Trigger {
            text: "{".into(),
            at_start: true,
        };
        assert_eq!(look(&t, ""), Seen::Free(0));
        assert_eq!(look(&t, "  \n"), Seen::Free(0));
        assert_eq!(look(&t, " {\"name\""), Seen::Fire(1));
        assert_eq!(look(&t, "The answer {"), Seen::Never);
        let long = Trigger {
            text: "<|python_tag|>".into(),
            at_start: true,
        };
        assert_eq!(look(&long, "<|py"), Seen::Free(0));
        assert_eq!(look(&long, "<|px"), Seen::Never);
    }

    #[test]
    fn a_trigger_spread_over_tokens_cuts_where_it_begins() {
        // "Sure" " <" "tool" "_" "call" and the current ">": the trigger begins at byte 5, inside " <"
        let starts = [0, 4, 6, 10, 11];
        assert_eq!(cut(&starts, 15, 5), (1, 4));
        // the trigger begins exactly where a token begins: nothing to decode again
        assert_eq!(cut(&starts, 15, 4), (1, 4));
        // it begins in the current token (one piece "<tool_call>" after "Sure "): every decoded token stays
        assert_eq!(cut(&[0, 4], 5, 5), (2, 5));
        assert_eq!(cut(&[0, 4], 5, 6), (2, 5));
        // nothing decoded yet
        assert_eq!(cut(&[], 0, 0), (0, 0));
        assert_eq!(cut(&[], 0, 1), (0, 0));
    }
}
