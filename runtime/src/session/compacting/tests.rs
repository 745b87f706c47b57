//! The `compacting` layer, both compactors, persistence, and the turn loop's context-overflow path.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::agent::{Agent, AgentParts};
use crate::harness::{EventStream, Harness, HarnessError, TestHarness};
use crate::model::{ContentBlock, ModelEvent, ModelRequest, Role, StopReason};
use crate::session::compactor::{
    ModelCompactor, COMPACTION_TURN_BIT, DEFAULT_COMPACTOR_SYSTEM, DEFAULT_INSTRUCTION,
};
use crate::session::history::tests::{call, done};
use crate::session::{Chain, FileLayer, MemoryLayer};
use crate::update::{TurnStop, UsageUpdate};

fn chunk(t: &str, id: &str) -> Chunk {
    Chunk {
        content: Content::text(t),
        message_id: Some(id.into()),
    }
}
fn user(t: &str, id: &str) -> SessionUpdate {
    SessionUpdate::UserMessageChunk(chunk(t, id))
}
fn agent(t: &str, id: &str) -> SessionUpdate {
    SessionUpdate::AgentMessageChunk(chunk(t, id))
}
fn usage(used: u64) -> SessionUpdate {
    SessionUpdate::UsageUpdate(UsageUpdate {
        used,
        size: None,
        meta: None,
    })
}
fn usage_of(used: u64, size: u64) -> SessionUpdate {
    SessionUpdate::UsageUpdate(UsageUpdate {
        used,
        size: Some(size),
        meta: None,
    })
}

/// `n` exchanges: user `q<i>`, assistant `a<i>`.
fn exchanges(n: usize) -> Vec<SessionUpdate> {
    (0..n)
        .flat_map(|i| {
            [
                user(&format!("q{i}"), &format!("u{i}")),
                agent(&format!("a{i}"), &format!("m{i}")),
            ]
        })
        .collect()
}

fn text_of(e: &SessionUpdate) -> &str {
    match e {
        SessionUpdate::UserMessageChunk(c) | SessionUpdate::AgentMessageChunk(c) => {
            c.content.as_text()
        }
        _ => "",
    }
}

fn config(threshold: usize, keep: usize) -> CompactingConfig {
    CompactingConfig {
        threshold,
        keep,
        ..CompactingConfig::default()
    }
}

/// A clock the test moves by hand.
#[derive(Debug)]
struct Manual(Mutex<Instant>);
impl Manual {
    fn new() -> Arc<Manual> {
        Arc::new(Manual(Mutex::new(Instant::now())))
    }
    fn advance(&self, d: Duration) {
        *self.0.lock().unwrap() += d;
    }
}
impl Clock for Manual {
    fn now(&self) -> Instant {
        *self.0.lock().unwrap()
    }
}

/// A harness that records each request and answers from a queue.
#[derive(Default)]
struct Replies {
    queue: Mutex<VecDeque<Result<Vec<ModelEvent>, HarnessError>>>,
    seen: Mutex<Vec<ModelRequest>>,
}
impl Replies {
    fn new(replies: Vec<Result<Vec<ModelEvent>, HarnessError>>) -> Arc<Replies> {
        Arc::new(Replies {
            queue: Mutex::new(replies.into()),
            seen: Mutex::default(),
        })
    }
    fn seen(&self) -> Vec<ModelRequest> {
        self.seen.lock().unwrap().clone()
    }
}
fn say(t: &str) -> Result<Vec<ModelEvent>, HarnessError> {
    Ok(vec![
        ModelEvent::MessageStart {
            message_id: "m".into(),
        },
        ModelEvent::TextDelta(t.into()),
        ModelEvent::MessageEnd {
            stop_reason: StopReason::EndTurn,
        },
    ])
}
fn overflow() -> Result<Vec<ModelEvent>, HarnessError> {
    Err(HarnessError::ContextOverflow {
        message: "prompt is too long: 250000 tokens > 200000 maximum".into(),
    })
}
impl Harness for Replies {
    fn name(&self) -> &str {
        "replies"
    }
    fn stream(
        &self,
        request: ModelRequest,
        _cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<EventStream, HarnessError>> {
        self.seen.lock().unwrap().push(request);
        let next = self.queue.lock().unwrap().pop_front();
        Box::pin(async move {
            let events = next.unwrap_or_else(|| {
                Err(HarnessError::Protocol {
                    message: "no reply left".into(),
                })
            })?;
            let s: EventStream = Box::pin(futures::stream::iter(events.into_iter().map(Ok)));
            Ok(s)
        })
    }
}

/// Runs one compaction of `layer` over `below` (a forced one through `compact_now`).
async fn run(
    layer: &mut CompactingLayer,
    mode: CompactMode,
    below: &[SessionUpdate],
    h: &dyn Harness,
) -> Option<Compaction> {
    let cancel = CancellationToken::new();
    let ctx = CompactCtx {
        harness: h,
        cancel: &cancel,
    };
    match mode {
        CompactMode::Auto => layer.compact(below, mode, &ctx).await,
        CompactMode::Forced => layer.compact_now(below, &ctx).await,
    }
    .unwrap()
}

async fn auto(
    l: &mut CompactingLayer,
    below: &[SessionUpdate],
    h: &dyn Harness,
) -> Option<Compaction> {
    run(l, CompactMode::Auto, below, h).await
}

async fn forced(
    l: &mut CompactingLayer,
    below: &[SessionUpdate],
    h: &dyn Harness,
) -> Option<Compaction> {
    run(l, CompactMode::Forced, below, h).await
}

#[test]
fn push_keeps_usage_as_metadata_and_passes_the_rest_down() {
    let mut layer = CompactingLayer::heuristic(CompactingConfig::default()).unwrap();
    let frame = SessionUpdate::frame(crate::update::FrameKind::TurnStart, None, None);
    let down = layer
        .push(vec![
            user("hi", "u0"),
            usage(1234),
            frame.clone(),
            agent("yo", "m0"),
        ])
        .unwrap();
    assert_eq!(down, vec![user("hi", "u0"), frame, agent("yo", "m0")]);
    assert_eq!(layer.tokens_in_context(), Some(1234));
    let mut chain = Chain::new(vec![Box::new(layer), Box::new(MemoryLayer::default())]).unwrap();
    chain.push(vec![usage(99)]).unwrap();
    assert_eq!(chain.tokens_in_context(), Some(99));
    assert!(
        chain.pull().unwrap().is_empty(),
        "usage never reaches storage"
    );
}

#[tokio::test]
async fn past_the_threshold_all_but_keep_become_one_heuristic_summary() {
    let h = TestHarness::echo();
    let mut layer = CompactingLayer::heuristic(config(10, 3)).unwrap();
    let below = exchanges(5);
    assert_eq!(
        auto(&mut layer, &below, &h).await,
        None,
        "10 events do not exceed 10"
    );
    let below = exchanges(6);
    assert_eq!(
        auto(&mut layer, &below, &h).await,
        Some(Compaction::Compacted {
            layer: "compacting".into(),
            before: 12,
            after: 4
        })
    );
    let view = layer.pull(below.clone()).unwrap();
    assert_eq!(view.len(), 4);
    assert_eq!(&view[1..], &below[9..]);
    let SessionUpdate::UserMessageChunk(s) = &view[0] else {
        panic!("the summary is a user message: {view:?}");
    };
    assert_eq!(s.message_id.as_deref(), Some("loom-compaction-1"));
    assert_eq!(
        s.content.as_text(),
        format!(
            "{SUMMARY_HEADER}\n\nHeuristic summary of 9 earlier events (no model was asked):\n- user: q0\n- assistant: \
             a0\n- user: q1\n- assistant: a1\n- user: q2\n- assistant: a2\n- user: q3\n- assistant: a3\n- user: q4"
        )
    );
    // what the model sees stays well-formed: the summary, then the kept exchange
    let msgs = crate::session::to_messages(&view);
    assert_eq!(msgs[0].role, Role::User);
    assert!(msgs[0].text().contains("- user: q4"));
    assert_eq!(msgs[1].text(), "a4");
    // below the threshold again: nothing more to do
    assert_eq!(auto(&mut layer, &below, &h).await, None);
}

#[tokio::test]
async fn a_streamed_message_counts_as_one_event() {
    let h = TestHarness::echo();
    let mut layer = CompactingLayer::heuristic(config(6, 2)).unwrap();
    let mut below = vec![user("q0", "u0")];
    below.extend((0..50).map(|i| agent(&format!("d{i} "), "m0")));
    below.extend(exchanges(3).split_off(2));
    // q0, the 50 deltas of m0, q1, a1, q2, a2: six events, not 55
    assert_eq!(count_events(&below), 6);
    assert_eq!(auto(&mut layer, &below, &h).await, None);
    below.push(user("q3", "u3"));
    assert!(auto(&mut layer, &below, &h).await.is_some());
    let summary = layer.summary().unwrap();
    assert!(summary.contains("- assistant: d0 d1 d2"), "{summary}");
    assert!(
        summary.starts_with("Heuristic summary of 54 earlier events"),
        "{summary}"
    );
}

#[test]
fn a_threshold_at_or_below_keep_plus_two_is_raised() {
    assert_eq!(config(12, 10).effective_threshold(), 14);
    assert_eq!(config(13, 10).effective_threshold(), 13);
    assert_eq!(config(0, 0).effective_threshold(), 4);
    assert_eq!(
        CompactingConfig::default().effective_threshold(),
        DEFAULT_THRESHOLD
    );
}

#[test]
fn the_cut_never_separates_a_call_from_its_result_nor_splits_a_message() {
    let view = vec![
        user("q", "u0"),
        call("c1"),
        done("c1", "out"),
        agent("a", "m1"),
    ];
    // keep 2 would keep the result without its call: the call stays too
    assert_eq!(cut_point(&view, 2), 1);
    assert_eq!(cut_point(&view, 1), 3);
    let view = vec![
        user("q", "u0"),
        agent("one ", "m1"),
        agent("two ", "m1"),
        agent("three", "m1"),
        call("c1"),
        call("c2"),
        done("c1", "x"),
        done("c2", "y"),
    ];
    // keeping c2's result keeps c2's call, then c1's result keeps c1's call, and the calls keep the message
    // that made them
    assert_eq!(cut_point(&view, 1), 1);
    // the three chunks of m1 are one message: keeping five keeps all of it
    assert_eq!(cut_point(&view, 5), 1);
    assert_eq!(cut_point(&view, 6), 0);
    assert_eq!(cut_point(&view, 100), 0);
    assert_eq!(cut_point(&view, 0), 8);
    assert_eq!(count_events(&view), 6);
}

#[test]
fn the_cut_keeps_the_reasoning_before_a_kept_call() {
    use crate::session::history::tests::thought;
    let view = vec![
        user("q", "u0"),
        thought("plan", None, None),
        thought("", Some("sig"), None),
        agent("reading", "m1"),
        call("c1"),
        done("c1", "out"),
    ];
    // the signed thinking and the call it led to are summarised or kept together
    assert_eq!(cut_point(&view, 2), 1);
    assert_eq!(cut_point(&view, 1), 1);
    assert_eq!(cut_point(&view, 0), 6);
}

#[tokio::test]
async fn token_fraction_trips_on_the_window_the_usage_updates_report() {
    let h = TestHarness::echo();
    // what `[session.compacting] token_fraction = 0.5` builds: no window configured
    let d = tempfile::tempdir().unwrap();
    let t: toml::Table = toml::from_str("token_fraction = 0.5\nthreshold = 100\nkeep = 2").unwrap();
    let (cfg, notes) = CompactingConfig::from_toml(&t, d.path()).unwrap();
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(cfg.context_window, None);
    let below = exchanges(4);
    let mut layer = CompactingLayer::heuristic(cfg.clone()).unwrap();
    // usage without a size: the fraction cannot be judged, and 8 events <= 100
    layer.push(vec![usage(900)]).unwrap();
    assert_eq!(layer.context_window(), None);
    assert_eq!(auto(&mut layer, &below, &h).await, None);
    // the harness reports its window: 499 of 1000 is under half
    layer.push(vec![usage_of(499, 1000)]).unwrap();
    assert_eq!(layer.context_window(), Some(1000));
    assert_eq!(auto(&mut layer, &below, &h).await, None);
    // a later update without a size keeps the window known
    layer.push(vec![usage(500)]).unwrap();
    assert_eq!(layer.context_window(), Some(1000));
    assert!(matches!(
        auto(&mut layer, &below, &h).await,
        Some(Compaction::Compacted { .. })
    ));
    // an SDK-configured window wins over the reported one
    let mut layer = CompactingLayer::heuristic(CompactingConfig {
        context_window: Some(10_000),
        ..cfg
    })
    .unwrap();
    layer.push(vec![usage_of(600, 1000)]).unwrap();
    assert_eq!(layer.context_window(), Some(10_000));
    assert_eq!(auto(&mut layer, &below, &h).await, None);
}

#[tokio::test]
async fn thresholds_are_capped_at_eighty_percent_of_the_window() {
    let h = TestHarness::echo();
    let d = tempfile::tempdir().unwrap();
    let t: toml::Table = toml::from_str("token_fraction = 0.95\nkeep = 2").unwrap();
    let (cfg, notes) = CompactingConfig::from_toml(&t, d.path()).unwrap();
    assert_eq!(cfg.token_fraction, Some(MAX_FRACTION));
    assert!(notes[0].contains("capped at 0.8"), "{notes:?}");
    let below = exchanges(4);
    // an SDK token threshold of 950 in a window of 1000 trips at 800
    let mut layer = CompactingLayer::heuristic(CompactingConfig {
        token_threshold: Some(950),
        token_fraction: None,
        threshold: 100,
        ..cfg
    })
    .unwrap();
    layer.push(vec![usage_of(799, 1000)]).unwrap();
    assert_eq!(auto(&mut layer, &below, &h).await, None);
    layer.push(vec![usage_of(800, 1000)]).unwrap();
    assert!(matches!(
        auto(&mut layer, &below, &h).await,
        Some(Compaction::Compacted { .. })
    ));
}

#[tokio::test]
async fn token_usage_takes_priority_over_the_event_count() {
    let h = TestHarness::echo();
    let cfg = CompactingConfig {
        threshold: 100,
        keep: 2,
        token_fraction: Some(0.5),
        context_window: Some(1000),
        ..CompactingConfig::default()
    };
    let below = exchanges(4);
    let mut layer = CompactingLayer::heuristic(cfg.clone()).unwrap();
    assert_eq!(
        auto(&mut layer, &below, &h).await,
        None,
        "no usage yet: 8 events <= 100"
    );
    layer.push(vec![usage(499)]).unwrap();
    assert_eq!(auto(&mut layer, &below, &h).await, None);
    layer.push(vec![usage(500)]).unwrap();
    assert!(matches!(
        auto(&mut layer, &below, &h).await,
        Some(Compaction::Compacted { .. })
    ));
    // the usage measured the context before compaction: it is stale now
    assert_eq!(layer.tokens_in_context(), None);

    // with usage below the fraction, a long history is left alone
    let mut layer = CompactingLayer::heuristic(CompactingConfig {
        threshold: 4,
        ..cfg.clone()
    })
    .unwrap();
    layer.push(vec![usage(10)]).unwrap();
    assert_eq!(auto(&mut layer, &exchanges(40), &h).await, None);

    // without a known context window the fraction cannot be judged: the count applies
    let mut layer = CompactingLayer::heuristic(CompactingConfig {
        threshold: 6,
        context_window: None,
        ..cfg.clone()
    })
    .unwrap();
    layer.push(vec![usage(10)]).unwrap();
    assert!(auto(&mut layer, &exchanges(4), &h).await.is_some());

    // an SDK token threshold
    let mut layer = CompactingLayer::heuristic(CompactingConfig {
        token_threshold: Some(300),
        token_fraction: None,
        ..cfg
    })
    .unwrap();
    layer.push(vec![usage(299)]).unwrap();
    assert_eq!(auto(&mut layer, &below, &h).await, None);
    layer.push(vec![usage(300)]).unwrap();
    assert!(auto(&mut layer, &below, &h).await.is_some());
}

#[tokio::test]
async fn a_second_compaction_folds_the_first_summary_in() {
    let h = TestHarness::echo();
    let mut layer = CompactingLayer::heuristic(config(8, 2)).unwrap();
    let mut below = exchanges(5);
    assert!(auto(&mut layer, &below, &h).await.is_some());
    assert_eq!(layer.pull(below.clone()).unwrap().len(), 3);
    below.extend((5..9).flat_map(|i| {
        [
            user(&format!("q{i}"), &format!("u{i}")),
            agent(&format!("a{i}"), &format!("m{i}")),
        ]
    }));
    assert_eq!(layer.pull(below.clone()).unwrap().len(), 11);
    assert!(auto(&mut layer, &below, &h).await.is_some());
    let view = layer.pull(below.clone()).unwrap();
    assert_eq!(view.len(), 3);
    assert_eq!(&view[1..], &below[16..]);
    let summary = text_of(&view[0]);
    assert!(
        summary.contains("- earlier summary: Heuristic summary of 8 earlier events"),
        "{summary}"
    );
    assert!(
        summary.contains("- user: q7") && !summary.contains("a8"),
        "{summary}"
    );
    assert_eq!(
        view[0],
        SessionUpdate::UserMessageChunk(chunk(summary, "loom-compaction-2"))
    );
}

#[test]
fn a_long_history_gives_a_bounded_heuristic_summary() {
    let long = "x".repeat(1000);
    let mut events = vec![user(&long, "u")];
    events.extend(exchanges(100));
    let s = HeuristicCompactor::summary(&events);
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(lines.len(), 1 + HeuristicCompactor::LINES);
    assert_eq!(
        lines[1].chars().count(),
        "- user: ".len() + HeuristicCompactor::LINE + 1
    );
    assert!(lines[1].ends_with('…'));
    assert_eq!(lines[11], "- … 142 more entries elided …");
    assert_eq!(*lines.last().unwrap(), "- assistant: a99");
}

#[tokio::test]
async fn the_model_compactor_chunks_to_half_the_window_and_folds_partial_summaries() {
    let words = |i: usize| format!("q{i} {}", "w".repeat(50));
    let below: Vec<SessionUpdate> = (0..4)
        .flat_map(|i| {
            [
                user(&words(i), &format!("u{i}")),
                agent(&format!("a{i}"), &format!("m{i}")),
            ]
        })
        .collect();
    // 40 tokens: chunks of 20 tokens = 80 characters, so each user line ("user: q0 www…") fills most of one
    let compactor = ModelCompactor::new(40);
    assert_eq!(compactor.chunk_chars(), 80);
    let chunks = compactor.chunks(&below[..6]);
    assert!(
        chunks.iter().all(|c| c.chars().count() <= 80),
        "{chunks:#?}"
    );
    assert_eq!(chunks.len(), 3, "{chunks:#?}");
    assert!(chunks[0].starts_with("user: q0 ") && chunks[0].ends_with("assistant: a0\n"));

    let model = Replies::new(vec![say("S1"), say("S2"), say("S3 final")]);
    let mut layer = CompactingLayer::new(config(4, 2), Arc::new(compactor)).unwrap();
    let out = auto(&mut layer, &below, model.as_ref()).await;
    assert!(
        matches!(
            out,
            Some(Compaction::Compacted {
                before: 8,
                after: 3,
                ..
            })
        ),
        "{out:?}"
    );
    let seen = model.seen();
    assert_eq!(seen.len(), 3);
    let body = |r: &ModelRequest| r.messages[0].text();
    assert!(body(&seen[0]).starts_with(DEFAULT_INSTRUCTION));
    assert!(body(&seen[0]).contains("Transcript, part 1 of 3:\nuser: q0 "));
    assert!(!body(&seen[0]).contains("so far"));
    assert!(body(&seen[1])
        .contains("Summary of the transcript so far:\nS1\n\nTranscript, part 2 of 3:\nuser: q1 "));
    assert!(body(&seen[2]).contains("so far:\nS2\n") && body(&seen[2]).contains("user: q2 "));
    assert!(seen
        .iter()
        .all(|r| r.tools.is_empty() && r.system == [DEFAULT_COMPACTOR_SYSTEM]));
    assert!(seen.iter().all(|r| r.turn & COMPACTION_TURN_BIT != 0));
    assert_ne!(seen[0].turn, seen[1].turn);
    assert_eq!(layer.summary(), Some("S3 final"));
    assert_eq!(
        text_of(&layer.pull(below).unwrap()[0]),
        format!("{SUMMARY_HEADER}\n\nS3 final")
    );
}

#[tokio::test]
async fn the_model_compactor_can_use_a_harness_of_its_own() {
    let agent_model = Replies::new(vec![]);
    let small = Replies::new(vec![say("small summary")]);
    let compactor = ModelCompactor::new(100_000)
        .with_harness(small.clone())
        .with_instruction("Summarise.")
        .with_system_prompt("Be brief.");
    let mut layer = CompactingLayer::new(config(4, 1), Arc::new(compactor)).unwrap();
    assert!(forced(&mut layer, &exchanges(2), agent_model.as_ref())
        .await
        .is_some());
    assert!(agent_model.seen().is_empty());
    let seen = small.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].system, ["Be brief."]);
    assert!(seen[0].messages[0]
        .text()
        .starts_with("Summarise.\n\nTranscript:\nuser: q0\nassistant: a0\nuser: q1\n"));
    assert_eq!(layer.summary(), Some("small summary"));
}

#[tokio::test]
async fn an_empty_summary_reports_its_cause_keeps_history_and_pauses_auto_compaction() {
    let clock = Manual::new();
    let reasoning_only = Ok(vec![
        ModelEvent::MessageStart {
            message_id: "m".into(),
        },
        ModelEvent::ThinkingDelta("let me think".into()),
        ModelEvent::MessageEnd {
            stop_reason: StopReason::EndTurn,
        },
    ]);
    let model = Replies::new(vec![
        say("   "),
        reasoning_only,
        Err(HarnessError::Overloaded {
            message: "overloaded_error".into(),
            retry_after: None,
        }),
        say("at last"),
    ]);
    let reports = Arc::new(Mutex::new(Vec::new()));
    let seen_reports = reports.clone();
    let mut layer = CompactingLayer::new(config(4, 2), Arc::new(ModelCompactor::new(100_000)))
        .unwrap()
        .with_clock(clock.clone())
        .on_compact(move |c| seen_reports.lock().unwrap().push(c.clone()));
    let below = exchanges(4);

    let out = auto(&mut layer, &below, model.as_ref()).await;
    let Some(Compaction::Failed { cause, .. }) = out else {
        panic!("{out:?}");
    };
    assert_eq!(
        cause,
        "replies returned an empty completion for the summarisation request; the history was kept as it was"
    );
    assert_eq!(layer.pull(below.clone()).unwrap(), below, "nothing is lost");
    assert_eq!(layer.summary(), None);
    assert!(layer.last_failure().unwrap().contains("empty completion"));

    // paused: the threshold still trips, but the model is not asked again for 60 s
    clock.advance(Duration::from_secs(59));
    assert_eq!(auto(&mut layer, &below, model.as_ref()).await, None);
    assert_eq!(model.seen().len(), 1);
    clock.advance(Duration::from_secs(1));
    let out = auto(&mut layer, &below, model.as_ref()).await;
    assert!(
        matches!(&out, Some(Compaction::Failed { cause, .. }) if cause.contains("answered the summarisation request with reasoning only")),
        "{out:?}"
    );
    assert_eq!(model.seen().len(), 2);

    // a forced compaction ignores the pause
    let out = forced(&mut layer, &below, model.as_ref()).await;
    assert!(
        matches!(&out, Some(Compaction::Failed { cause, .. }) if cause.contains("the summarisation request to replies failed: the provider is overloaded")),
        "{out:?}"
    );
    let out = forced(&mut layer, &below, model.as_ref()).await;
    assert!(matches!(out, Some(Compaction::Compacted { .. })), "{out:?}");
    assert_eq!(layer.last_failure(), None);
    assert_eq!(layer.summary(), Some("at last"));
    assert_eq!(reports.lock().unwrap().len(), 4);
}

#[tokio::test]
async fn persisted_state_is_written_atomically_and_reloaded() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join(STATE_FILE);
    let cfg = CompactingConfig {
        persist: Some(path.clone()),
        ..config(6, 2)
    };
    let h = TestHarness::echo();
    let below = exchanges(4);
    let mut layer = CompactingLayer::heuristic(cfg.clone()).unwrap();
    assert!(!path.exists(), "nothing is written before a compaction");
    assert!(auto(&mut layer, &below, &h).await.is_some());
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(state["version"], 1);
    assert_eq!(state["covered"], 6);
    assert_eq!(state["compactions"], 1);
    assert!(state["summary"].as_str().unwrap().contains("- user: q2"));
    let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["state.json"], "no temporary file is left behind");

    // a restart over a storage layer that kept the history: the same view
    let reloaded = CompactingLayer::heuristic(cfg.clone()).unwrap();
    assert_eq!(
        reloaded.pull(below.clone()).unwrap(),
        layer.pull(below.clone()).unwrap()
    );
    // over an in-memory layer that starts empty: the summary, then whatever is new
    let fresh = vec![user("after the restart", "u9")];
    let view = reloaded.pull(fresh.clone()).unwrap();
    assert_eq!(view.len(), 2);
    assert!(text_of(&view[0]).contains("- user: q2"));
    assert_eq!(view[1], fresh[0]);
    // a history below that does not start with the covered events is shown whole after the summary
    let other = exchanges(5).split_off(2);
    assert_eq!(reloaded.pull(other.clone()).unwrap().len(), other.len() + 1);
}

#[test]
fn a_corrupt_state_file_is_an_error_naming_it_and_is_left_alone() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join(STATE_FILE);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let cfg = CompactingConfig {
        persist: Some(path.clone()),
        ..CompactingConfig::default()
    };
    for (text, why) in [
        (
            "{\"version\":1,\"summary\":\"s\",\"cov",
            "EOF while parsing",
        ),
        ("{\"version\":7}", "version 7 is not one this build reads"),
        (
            "{\"version\":1,\"summary\":\"s\"}",
            "a summary needs covered > 0",
        ),
        ("{\"version\":1,\"extra\":true}", "unknown field `extra`"),
    ] {
        std::fs::write(&path, text).unwrap();
        let err = CompactingLayer::heuristic(cfg.clone())
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(&format!(
                "{}: not a compaction state file (",
                path.display()
            )) && err.contains(why),
            "{err}"
        );
        assert!(err.contains("fix or remove it"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    }
}

#[tokio::test]
async fn nothing_to_compact_is_not_a_compaction() {
    let h = TestHarness::echo();
    let mut layer = CompactingLayer::heuristic(config(40, 10)).unwrap();
    assert_eq!(forced(&mut layer, &exchanges(5), &h).await, None);
    assert_eq!(
        forced(&mut layer, &exchanges(6), &h)
            .await
            .map(|c| c.to_string())
            .as_deref(),
        Some("compacting: compacted 12 events to 11")
    );
    // the summary and the kept events are all there is: a second forced compaction has nothing new to fold
    assert_eq!(forced(&mut layer, &exchanges(6), &h).await, None);
}

/// An agent over `compacting(threshold, keep) -> file` in a temp dir, driven by `model`.
fn overflow_agent(model: Arc<Replies>, dir: &std::path::Path) -> Agent {
    let (file, _) = FileLayer::open(&dir.join("session.jsonl")).unwrap();
    let layer = CompactingLayer::heuristic(config(1000, 2)).unwrap();
    let chain = Chain::new(vec![Box::new(layer), Box::new(file)]).unwrap();
    Agent::new(AgentParts::new(
        model,
        chain,
        loom_kernel::PathCtx::new("/", None),
    ))
}

#[tokio::test]
async fn a_context_overflow_compacts_once_and_retries_the_request() {
    let d = tempfile::tempdir().unwrap();
    let model = Replies::new(vec![
        say("a0"),
        say("a1"),
        say("a2"),
        overflow(),
        say("fits now"),
    ]);
    let agent = overflow_agent(model.clone(), d.path());
    for q in ["q0", "q1", "q2"] {
        assert_eq!(
            agent.prompt(q, CancellationToken::new()).await.stop,
            TurnStop::EndTurn
        );
    }
    let out = agent.prompt("q3", CancellationToken::new()).await;
    assert_eq!(
        (out.stop, out.final_text.as_str(), out.error),
        (TurnStop::EndTurn, "fits now", None)
    );
    let seen = model.seen();
    assert_eq!(seen.len(), 5);
    let (too_long, retried) = (&seen[3], &seen[4]);
    assert_eq!(
        (too_long.turn, too_long.request_in_turn),
        (retried.turn, retried.request_in_turn)
    );
    assert_eq!(too_long.messages.len(), 7);
    // the retry carries the summary and the last two events (a2, q3)
    assert_eq!(retried.messages.len(), 3);
    let summary = retried.messages[0].text();
    assert!(
        summary.starts_with(SUMMARY_HEADER) && summary.contains("- user: q0\n- assistant: a0"),
        "{summary}"
    );
    assert!(!summary.contains("q3"), "{summary}");
    assert_eq!(
        retried.messages[2].content,
        vec![ContentBlock::Text { text: "q3".into() }]
    );
    // nothing was lost from the stored history
    agent.close().await.unwrap();
    let log = std::fs::read_to_string(d.path().join("session.jsonl")).unwrap();
    for t in ["\"q0\"", "\"a0\"", "\"q3\"", "\"fits now\""] {
        assert!(log.contains(t), "{t} missing from\n{log}");
    }
}

#[tokio::test]
async fn a_second_overflow_ends_the_turn_with_a_clear_error() {
    let d = tempfile::tempdir().unwrap();
    let model = Replies::new(vec![
        say("a0"),
        say("a1"),
        overflow(),
        overflow(),
        say("unreachable"),
    ]);
    let agent = overflow_agent(model.clone(), d.path());
    for q in ["q0", "q1"] {
        agent.prompt(q, CancellationToken::new()).await;
    }
    let out = agent.prompt("q2", CancellationToken::new()).await;
    assert_eq!(out.stop, TurnStop::Error);
    let err = out.error.unwrap();
    assert!(
        err.starts_with("replies: the conversation no longer fits the model's context window: prompt is too long")
            && err.ends_with("(it still did not fit after compaction (compacting: compacted 5 events to 3) and one retry)"),
        "{err}"
    );
    assert_eq!(model.seen().len(), 4);
    agent.close().await.unwrap();
    let log = std::fs::read_to_string(d.path().join("session.jsonl")).unwrap();
    assert!(log.contains("\"q0\"") && log.contains("\"q2\""), "{log}");
}

#[tokio::test]
async fn an_overflow_with_nothing_to_compact_says_why() {
    let model = Replies::new(vec![overflow(), say("unreachable")]);
    let chain = Chain::new(vec![Box::new(MemoryLayer::default())]).unwrap();
    let agent = Agent::new(AgentParts::new(
        model.clone(),
        chain,
        loom_kernel::PathCtx::new("/", None),
    ));
    let out = agent.prompt("hi", CancellationToken::new()).await;
    assert_eq!(out.stop, TurnStop::Error);
    let err = out.error.unwrap();
    assert!(
        err.contains("compaction could not shorten it: the session has no compacting layer"),
        "{err}"
    );
    assert_eq!(model.seen().len(), 1);

    let d = tempfile::tempdir().unwrap();
    let model = Replies::new(vec![overflow(), say("unreachable")]);
    let agent = overflow_agent(model.clone(), d.path());
    let out = agent.prompt("hi", CancellationToken::new()).await;
    let err = out.error.unwrap();
    assert!(
        err.contains("the history is no longer than the events compaction keeps"),
        "{err}"
    );
    assert_eq!(model.seen().len(), 1);
}

#[tokio::test]
async fn compact_now_on_the_agent_compacts_whatever_the_threshold() {
    let d = tempfile::tempdir().unwrap();
    let model = Replies::new(vec![say("a0"), say("a1"), say("a2")]);
    let agent = overflow_agent(model, d.path());
    for q in ["q0", "q1", "q2"] {
        agent.prompt(q, CancellationToken::new()).await;
    }
    assert_eq!(
        agent.tokens_in_context().await,
        None,
        "the replies harness reports no usage"
    );
    let reports = agent.compact_now(CancellationToken::new()).await.unwrap();
    assert_eq!(
        reports.iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["compacting: compacted 6 events to 3"]
    );
    let p = agent.preamble("next").await.unwrap();
    assert_eq!(p.events.len(), 4);
    assert!(text_of(&p.events[0]).contains("- user: q0"));
}
