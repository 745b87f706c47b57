//! When a dead MCP server or provider is restarted: on the next call after each death, until it crash-loops — dies
//! [`CRASH_LOOP_DEATHS`] times within [`CRASH_LOOP_WINDOW`] — after which it stays down for the session.
//!
//! The guard reads time only through its clock (`Instant::now` unless a test swaps it), so tests step time instead
//! of sleeping.

use std::time::{Duration, Instant};

/// Deaths within [`CRASH_LOOP_WINDOW`] that make a crash loop.
pub const CRASH_LOOP_DEATHS: usize = 3;

/// The window [`CRASH_LOOP_DEATHS`] deaths must fall in to count as a crash loop.
pub const CRASH_LOOP_WINDOW: Duration = Duration::from_secs(60);

/// One server's recent deaths, and whether they made a crash loop.
#[derive(Debug)]
pub(crate) struct RestartGuard {
    /// The deaths still inside the window, oldest first.
    deaths: Vec<Instant>,
    /// Set by the death that completed a crash loop; never cleared.
    given_up: bool,
    /// Where time comes from.
    pub(crate) clock: fn() -> Instant,
}

impl Default for RestartGuard {
    fn default() -> Self {
        RestartGuard {
            deaths: Vec::new(),
            given_up: false,
            clock: Instant::now,
        }
    }
}

impl RestartGuard {
    /// Records a death now; true when it completes a crash loop, so the server is not restarted again.
    pub(crate) fn died(&mut self) -> bool {
        self.died_at((self.clock)())
    }

    /// [`RestartGuard::died`] at `now`.
    pub(crate) fn died_at(&mut self, now: Instant) -> bool {
        self.deaths
            .retain(|t| now.saturating_duration_since(*t) < CRASH_LOOP_WINDOW);
        self.deaths.push(now);
        if self.deaths.len() >= CRASH_LOOP_DEATHS {
            self.given_up = true;
        }
        self.given_up
    }

    /// True when the server crash-looped and stays down.
    pub(crate) fn given_up(&self) -> bool {
        self.given_up
    }

    /// How a refusal explains itself: `died 3 times within 60 s`.
    pub(crate) fn why() -> String {
        format!(
            "died {CRASH_LOOP_DEATHS} times within {} s",
            CRASH_LOOP_WINDOW.as_secs()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deaths_spread_out_are_always_restarted() {
        let t0 = Instant::now();
        let mut g = RestartGuard::default();
        for i in 0..10 {
            // two deaths per window at most
            assert!(!g.died_at(t0 + CRASH_LOOP_WINDOW / 2 * i + Duration::from_millis(1)));
        }
        assert!(!g.given_up());
    }

    #[test]
    fn the_third_death_within_the_window_gives_up_for_good() {
        let t0 = Instant::now();
        let mut g = RestartGuard::default();
        assert!(!g.died_at(t0));
        assert!(!g.died_at(t0 + Duration::from_secs(30)));
        assert!(g.died_at(t0 + Duration::from_secs(59)));
        assert!(g.given_up());
        // a later, lone death does not revive it
        assert!(g.died_at(t0 + Duration::from_secs(3600)));
    }

    #[test]
    fn a_death_exactly_one_window_old_no_longer_counts() {
        let t0 = Instant::now();
        let mut g = RestartGuard::default();
        assert!(!g.died_at(t0));
        assert!(!g.died_at(t0 + Duration::from_secs(1)));
        assert!(!g.died_at(t0 + CRASH_LOOP_WINDOW));
        assert!(g.died_at(t0 + CRASH_LOOP_WINDOW + Duration::from_millis(500)));
    }

    #[test]
    fn the_guard_reads_its_clock() {
        fn frozen() -> Instant {
            static T: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
            *T.get_or_init(Instant::now)
        }
        let mut g = RestartGuard {
            clock: frozen,
            ..RestartGuard::default()
        };
        assert!(!g.died());
        assert!(!g.died());
        assert!(g.died());
    }
}
