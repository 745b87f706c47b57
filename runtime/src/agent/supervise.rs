//! The supervisor (`[supervisor]`): when the model ends a turn while its working record still has unfinished
//! checklist items or tasks, loom sends it back with what remains — at most `max_rounds` times a turn, each round a
//! request inside the same turn (so `maxTurnRequests`, cancellation, denials and asks all stay in force). When the
//! record says everything is done, an optional review model (a named harness) judges that claim against the record
//! and the model's last answer, within `review_budget` requests a turn; its "incomplete" sends the model back too.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::Agent;
use crate::harness::Harness;
use crate::update::SessionUpdate;

/// The supervisor's settings (from `[supervisor]`; the REPL can switch it on and off per session).
#[derive(Clone, Default)]
pub struct Supervisor {
    /// On when the agent starts.
    pub enabled: bool,
    /// The most times one turn is sent back.
    pub max_rounds: u32,
    /// The review model: its name and harness.
    pub review: Option<(String, Arc<dyn Harness>)>,
    /// The most review requests a turn.
    pub review_budget: u32,
}

impl std::fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervisor")
            .field("enabled", &self.enabled)
            .field("max_rounds", &self.max_rounds)
            .field("review", &self.review.as_ref().map(|(n, _)| n))
            .field("review_budget", &self.review_budget)
            .finish()
    }
}

/// What the supervisor has spent in one turn.
#[derive(Debug, Default)]
pub(super) struct Rounds {
    sent_back: u32,
    reviews: u32,
}

/// The review model's instructions.
const REVIEW_SYSTEM: &str = "You review whether an agent's work is complete. You are given the agent's working record \
     (its goal, checklist, tasks and notes) and its final answer. Judge only from them. Answer with one line: \
     COMPLETE, or INCOMPLETE followed by a colon and what is missing or unverified. Be strict about verification steps \
     the record lists.";

/// The review request's turn numbers, apart from user turns and compactions.
const REVIEW_TURN_BIT: u64 = 1 << 62;

/// The review's verdict: `None` when it accepts the claim, else what it says is missing.
fn verdict(answer: &str) -> Option<String> {
    let first = answer.trim().lines().next().unwrap_or("").trim();
    let upper = first.to_ascii_uppercase();
    // the first word, exactly: "COMPLETELY unverified" is no acceptance
    let word = upper
        .split(|c: char| !c.is_ascii_alphabetic())
        .find(|w| !w.is_empty())
        .unwrap_or("");
    if word == "COMPLETE" {
        return None;
    }
    let why = first
        .split_once(':')
        .map(|(_, w)| w.trim())
        .filter(|w| !w.is_empty())
        .unwrap_or(answer.trim());
    Some(if upper.starts_with("INCOMPLETE") {
        why.to_string()
    } else {
        // an answer that is neither is read as a refusal to accept: the model is asked to check its work
        format!(
            "the reviewer did not confirm completion ({})",
            answer.trim()
        )
    })
}

impl Agent {
    /// Switches the supervisor on or off for this session.
    pub fn set_supervising(&self, on: bool) {
        self.supervising
            .store(on, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether the supervisor is on.
    pub fn supervising(&self) -> bool {
        self.supervising.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The supervisor's settings.
    pub fn supervisor(&self) -> &Supervisor {
        &self.supervisor
    }

    /// At the end of a turn (the model stopped with no calls): the message that sends the model back, or `None` to
    /// let the turn end. Each decision is published as a notice.
    pub(super) async fn supervise(
        &self,
        turn: u64,
        final_text: &str,
        rounds: &mut Rounds,
        cancel: &CancellationToken,
    ) -> Option<String> {
        if !self.supervising() || cancel.is_cancelled() {
            return None;
        }
        let s = &self.supervisor;
        let record = self.record.snapshot();
        let left = record.unfinished();
        if rounds.sent_back >= s.max_rounds {
            if !left.is_empty() {
                self.bus.publish(&SessionUpdate::notice(format!(
                    "supervisor: the turn ends with {} unfinished item(s) after {} round(s) (max_rounds): {}",
                    left.len(),
                    rounds.sent_back,
                    left.join("; ")
                )));
            }
            return None;
        }
        let round = rounds.sent_back + 1;
        if !left.is_empty() {
            rounds.sent_back = round;
            self.bus.publish(&SessionUpdate::notice(format!(
                "supervisor: round {round} of {}: {} unfinished item(s); the model is sent back",
                s.max_rounds,
                left.len()
            )));
            return Some(format!(
                "[loom supervisor, round {round} of {}] You ended your turn, but your working record still has \
                 unfinished work:\n{}\nContinue with it now. Mark each item completed as soon as it is done. If one \
                 cannot be done, record why with a blocker note and take it off the checklist, then say so.",
                s.max_rounds,
                left.iter()
                    .map(|l| format!("- {l}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            ));
        }
        // everything recorded is done: the review model, if any, judges that claim
        let (name, harness) = s.review.as_ref()?;
        if (record.todos.is_empty() && record.tasks.is_empty()) || rounds.reviews >= s.review_budget
        {
            return None;
        }
        rounds.reviews += 1;
        let body = format!(
            "The agent's working record:\n{}\n\nThe agent's final answer:\n{}",
            record.render(),
            if final_text.trim().is_empty() {
                "(no text)"
            } else {
                final_text.trim()
            }
        );
        // numbered apart from user turns and compactions, and from every other review
        let turn = REVIEW_TURN_BIT | (turn << 8) | u64::from(rounds.reviews);
        let answer = crate::session::compactor::ask_once(
            harness.as_ref(),
            REVIEW_SYSTEM,
            body,
            turn,
            "review",
            cancel,
        )
        .await;
        let missing = match answer {
            Ok(a) => verdict(&a)?,
            Err(e) => {
                self.bus.publish(&SessionUpdate::notice(format!(
                    "supervisor: the review by {name} gave no verdict ({e}); the turn ends as the model left it"
                )));
                return None;
            }
        };
        rounds.sent_back = round;
        self.bus.publish(&SessionUpdate::notice(format!(
            "supervisor: round {round} of {}: the review by {name} does not accept that the work is complete: \
             {missing}",
            s.max_rounds
        )));
        Some(format!(
            "[loom supervisor, round {round} of {}] A reviewer does not accept that the work is complete: \
             {missing}\nCheck it against your working record, do what is missing (update the checklist as you \
             go), or explain why it is not needed.",
            s.max_rounds
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::verdict;

    #[test]
    fn the_review_answer_is_read_strictly() {
        assert_eq!(verdict("COMPLETE"), None);
        assert_eq!(verdict("Complete — all verified."), None);
        assert_eq!(
            verdict("INCOMPLETE: the tests were never run\nmore text").as_deref(),
            Some("the tests were never run")
        );
        assert!(verdict("COMPLETELY unverified").is_some());
        assert_eq!(verdict("**COMPLETE**"), None);
        assert!(verdict("I think so?")
            .unwrap()
            .starts_with("the reviewer did not confirm completion"));
    }
}
