//! The retry policy: which failures are retried, how long to wait, and an injectable clock so tests never sleep.
//!
//! Only the START of a request is retried (before the first event is consumed); once any event arrived, an error is
//! surfaced instead. Retryable: rate limits, overloads, network errors, HTTP 5xx. Never: auth, context overflow,
//! protocol errors. The wait is the provider's `retry-after-ms` / `retry-after` when sent, at most
//! [`MAX_RETRY_AFTER`] (60 s: a hint is the provider's word, and `retry-after: 1e9` must not stall a headless run),
//! else `min(2 s × 2^n, 30 s)` with up to 20 % jitter; at most [`MAX_ATTEMPTS`] attempts; every wait races
//! cancellation.

use std::time::Duration;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::harness::HarnessError;

/// Attempts in total (the first plus seven retries).
pub const MAX_ATTEMPTS: u32 = 8;
/// The first backoff.
pub const BASE_DELAY: Duration = Duration::from_secs(2);
/// The longest backoff.
pub const MAX_DELAY: Duration = Duration::from_secs(30);
/// The longest wait a provider's `retry-after` / `retry-after-ms` hint can ask for; a longer hint waits this long.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Waits. The default sleeps on the tokio clock; tests inject one that records and returns at once.
pub trait Sleeper: Send + Sync {
    /// Waits `d`.
    fn sleep(&self, d: Duration) -> BoxFuture<'static, ()>;
}

/// The tokio clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct TokioSleeper;

impl Sleeper for TokioSleeper {
    fn sleep(&self, d: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(d))
    }
}

/// The notice a retry publishes: "anthropic: retrying (2 of 4, in 3.5s): <the error's first line>". The error text
/// is the harness's own (it never holds a key: keys travel in headers); long text is cut.
pub fn retry_notice(harness: &str, n: u32, of: u32, delay: Duration, err: &HarnessError) -> String {
    let text = err.to_string();
    let first = text.lines().next().unwrap_or("");
    let mut why: String = first.chars().take(200).collect();
    if why.len() < first.len() {
        why.push('…');
    }
    format!(
        "{harness}: retrying ({n} of {of}, in {:.1}s): {why}",
        delay.as_secs_f64()
    )
}

/// The policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in total.
    pub max_attempts: u32,
    /// First backoff.
    pub base: Duration,
    /// Longest backoff.
    pub max: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: MAX_ATTEMPTS,
            base: BASE_DELAY,
            max: MAX_DELAY,
        }
    }
}

impl RetryPolicy {
    /// How long to wait before retry number `retry` (0-based) after `err`, or `None` when it must not be retried.
    /// `jitter` in `[0, 1)` adds up to 20 % to a computed backoff (never to the provider's own hint, which is
    /// capped at [`MAX_RETRY_AFTER`]).
    pub fn delay(&self, err: &HarnessError, retry: u32, jitter: f64) -> Option<Duration> {
        if !err.is_retryable() || retry + 1 >= self.max_attempts {
            return None;
        }
        if let Some(hint) = err.retry_after() {
            return Some(hint.min(MAX_RETRY_AFTER));
        }
        let exp = self.base.saturating_mul(2u32.saturating_pow(retry.min(16)));
        let capped = exp.min(self.max);
        let extra = capped.mul_f64(0.2 * jitter.clamp(0.0, 1.0));
        Some((capped + extra).min(self.max))
    }
}

/// Waits `d` unless `cancel` fires first; true when the wait completed.
pub async fn wait(sleeper: &dyn Sleeper, d: Duration, cancel: &CancellationToken) -> bool {
    tokio::select! {
        _ = sleeper.sleep(d) => true,
        _ = cancel.cancelled() => false,
    }
}

/// A small jitter source (no crate needed): the low bits of the clock, mixed.
pub fn jitter() -> f64 {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mixed = (u64::from(n)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11;
    (mixed as f64) / ((1u64 << 53) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(hint: Option<Duration>) -> HarnessError {
        HarnessError::RateLimited {
            message: String::new(),
            retry_after: hint,
        }
    }

    #[test]
    fn a_retry_notice_says_which_how_many_how_long_and_why_in_one_short_line() {
        let err = HarnessError::Protocol {
            message: format!("{}\nsecond line", "x".repeat(300)),
        };
        let n = retry_notice("anthropic", 2, 7, Duration::from_millis(3500), &err);
        assert!(
            n.starts_with("anthropic: retrying (2 of 7, in 3.5s): "),
            "{n}"
        );
        assert!(n.ends_with('…') && !n.contains("second line"), "{n}");
        assert!(n.chars().count() < 260, "{n}");
    }

    #[test]
    fn backoff_doubles_caps_and_honours_hints() {
        let p = RetryPolicy::default();
        let d = |n| p.delay(&rate(None), n, 0.0).unwrap();
        assert_eq!(
            [d(0), d(1), d(2), d(3), d(4)].map(|x| x.as_secs()),
            [2, 4, 8, 16, 30]
        );
        assert_eq!(p.delay(&rate(None), 0, 0.99).unwrap().as_millis(), 2396);
        assert_eq!(
            p.delay(&rate(Some(Duration::from_millis(1500))), 3, 0.5),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(p.delay(&rate(None), 7, 0.0), None, "8 attempts at most");
        // a provider's hint is honoured up to the cap, never beyond
        for (hint, want) in [(59, 59), (60, 60), (61, 60), (1_000_000_000, 60)] {
            assert_eq!(
                p.delay(&rate(Some(Duration::from_secs(hint))), 0, 0.5),
                Some(Duration::from_secs(want)),
                "retry-after: {hint}"
            );
        }
        assert_eq!(
            p.delay(&rate(Some(Duration::MAX)), 0, 0.0),
            Some(MAX_RETRY_AFTER)
        );
        assert_eq!(
            p.delay(
                &HarnessError::Auth {
                    message: String::new()
                },
                0,
                0.0
            ),
            None
        );
        assert_eq!(
            p.delay(
                &HarnessError::ContextOverflow {
                    message: String::new()
                },
                0,
                0.0
            ),
            None
        );
        let j = jitter();
        assert!((0.0..1.0).contains(&j));
    }
}
