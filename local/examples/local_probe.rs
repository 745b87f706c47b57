//! Measures the engine as the `local` harness drives it: prompt processing and generation speed, with the tool
//! grammar in loom's form (`call`), the lazy grammar of the tagged format with its trigger (`lazy`: free text until
//! `<tool_call>`, as Qwen and other ChatML models are run), the answer-only grammar (`answer`) or none (`raw`). Used
//! by benches/local.sh: `local_probe MODEL.gguf [threads] [call|lazy|answer|raw] [rounds]`. Each round starts from a different first message,
//! so the prompt is processed afresh (no cache reuse), like llama-bench's `pp`. It drives the engine process exactly as
//! the harness does (`loom-engine` next to it, or `$LOOM_ENGINE`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::mpsc;

use loom_local::{
    response_grammar, Engine, EngineOptions, Job, JobEvent, Respond, Sampling, ToolFormat,
    ToolShape,
};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let model = args
        .get(1)
        .expect("usage: local_probe MODEL.gguf [threads] [call|lazy|answer|raw] [rounds]")
        .clone();
    let threads: u32 = args.get(2).map(|t| t.parse().unwrap()).unwrap_or(2);
    let mode = args.get(3).cloned().unwrap_or_else(|| "call".into());
    let rounds: usize = args.get(4).map(|t| t.parse().unwrap()).unwrap_or(3);
    let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    let program = loom_local::engine_program(&env).unwrap();
    let engine = Engine::start(
        &program,
        EngineOptions {
            model: model.into(),
            label: "probe".into(),
            threads,
            context: 2048,
        },
    )
    .unwrap();
    let schema = serde_json::json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]});
    let bash = [ToolShape {
        name: "bash",
        schema: &schema,
    }];
    let (grammar, trigger) = match mode.as_str() {
        "raw" => (String::new(), None),
        "answer" => (response_grammar(&[], true).unwrap(), None),
        "lazy" => ToolFormat::Tagged.grammar(&bash, Respond::Either).unwrap(),
        _ => (
            response_grammar(
                &[ToolShape {
                    name: "bash",
                    schema: &schema,
                }],
                false,
            )
            .unwrap(),
            None,
        ),
    };
    let (mut pp, mut tg, mut ttft, mut ptoks) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let (tx, rx) = mpsc::channel();
        let events = tx.clone();
        let submitted = std::time::Instant::now();
        let mut first = None;
        engine
            .submit(Job {
                messages: vec![
                    ("system".into(), format!("Session {round}. You are a helpful assistant who writes long, detailed stories for children about animals and their adventures. To run a shell command reply with a JSON object; otherwise answer in plain text.")),
                    ("user".into(), "Write a long story about a cat who learns to program computers.".into()),
                ],
                grammar: grammar.clone(),
                trigger: trigger.clone(),
                max_tokens: 128,
                sampling: Sampling { temperature: 0.0, top_k: 40, top_p: 0.95, seed: 1 },
                events: Box::new(move |e| {
                    let _ = events.send(Some(e));
                    true
                }),
                done: Box::new(move |r| {
                    r.unwrap();
                    let _ = tx.send(None);
                }),
            })
            .unwrap();
        while let Some(e) = rx.recv().unwrap() {
            match e {
                JobEvent::Prompt {
                    tokens,
                    reused,
                    millis,
                } => {
                    let n = (tokens - reused) as f64;
                    ptoks.push(tokens as f64);
                    pp.push(n / (millis.max(1) as f64 / 1000.0));
                    eprintln!(
                        "round {round}: prompt {tokens} tokens ({reused} reused) in {millis} ms"
                    );
                }
                JobEvent::Done {
                    generated, millis, ..
                } => {
                    tg.push(generated as f64 / (millis.max(1) as f64 / 1000.0));
                    eprintln!("round {round}: generated {generated} tokens in {millis} ms");
                }
                JobEvent::Call => {}
                JobEvent::Text(_) => {
                    // first-token latency: from the job's submission to the first decoded text
                    if first.is_none() {
                        first = Some(submitted.elapsed().as_secs_f64() * 1000.0);
                    }
                }
            }
        }
        ttft.extend(first);
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    println!(
        "mode={mode} threads={threads} prompt_tokens={:.0} first_token_ms={:.1} pp_tok_s={:.1} tg_tok_s={:.1}",
        mean(&ptoks),
        mean(&ttft),
        mean(&pp),
        mean(&tg)
    );
}
