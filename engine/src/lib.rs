//! # loom-engine: the local model engine process
//!
//! `loom` runs `[harness] provider = "local"` by starting this program (`loom-engine`, installed next to `loom`) and
//! speaking `loom_engine_protocol` with it: one JSON object per line on stdin and stdout. It loads one GGUF model
//! with llama.cpp, then runs generation jobs one at a time, keeping the KV cache between them, and exits when its
//! stdin ends. Keeping llama.cpp in a process of its own means the C++ code that parses model files never shares an
//! address space with loom's policy decisions, secrets or sessions, and a `loom` that runs no local model never
//! loads it.
//!
//! Before it loads the model the engine confines itself (`loom_sandbox::confine_engine`): from then on the model
//! file is the only file it can open, it can create no socket, run no program and signal no other process, so a
//! memory bug in the C++ code that a crafted model file or prompt text reaches gets none of the user's authority.
//! When it cannot confine itself it loads nothing and says why.
//!
//! ## What this crate must never do
//! Decide anything about tools: it produces text under the grammar it is given, and loom's kernel decides every call
//! the text proposes. Write anywhere but its stdout (the protocol) and stderr (diagnostics). Read anything but the
//! model file it is told to load. Load a model before it has confined itself.

#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod model;
mod trigger;

use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};

use loom_engine_protocol::{line, EngineError, Reply, Request};

pub use model::{Job, Model};

/// Serves the protocol on `input` / `output` until `input` ends, confining the process before it loads the model;
/// returns the process's exit code (0 after a normal end, 1 when the engine could not confine itself or load the
/// model, or the first line was not a load, 2 when a line was not a request). Call it while the process has one
/// thread.
pub fn serve(input: impl BufRead, output: impl Write + Send + 'static) -> i32 {
    serve_as(input, output, Confine::Itself)
}

/// Whether [`serve_as`] confines the process before it loads the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confine {
    /// It does (the engine process: [`serve`]).
    Itself,
    /// It does not: for tests that serve inside a test process, which must stay free (and has many threads).
    NotInThisTest,
}

/// [`serve`], with the choice of confining the process; the engine program always confines itself.
pub fn serve_as(
    mut input: impl BufRead,
    output: impl Write + Send + 'static,
    confine: Confine,
) -> i32 {
    let out = Arc::new(Mutex::new(output));
    let write = {
        let out = out.clone();
        move |r: &Reply| -> bool {
            let Ok(mut o) = out.lock() else { return false };
            let mut text = line(r);
            text.push('\n');
            o.write_all(text.as_bytes())
                .and_then(|()| o.flush())
                .is_ok()
        }
    };
    let opts = match next_request(&mut input) {
        Some(Ok(Request::Load(opts))) => opts,
        Some(Ok(_)) => {
            eprintln!("loom-engine: the first request must be `load`");
            return 1;
        }
        Some(Err(e)) => {
            eprintln!("loom-engine: {e}");
            return 2;
        }
        None => return 0,
    };
    let (opts, confinement) = match confine {
        Confine::Itself => match confine_to_model(opts) {
            Ok(c) => c,
            Err(e) => {
                write(&Reply::LoadFailed(e));
                return 1;
            }
        },
        Confine::NotInThisTest => (opts, String::new()),
    };
    let model = match Model::start(opts) {
        Ok(m) => m,
        Err(e) => {
            write(&Reply::LoadFailed(e));
            return 1;
        }
    };
    if !write(&Reply::Ready {
        chat_template: model.chat_template().to_string(),
        confinement,
    }) {
        return 0;
    }
    let cancelled: Arc<Mutex<BTreeSet<u64>>> = Arc::default();
    loop {
        match next_request(&mut input) {
            None => return 0,
            Some(Err(e)) => {
                eprintln!("loom-engine: {e}");
                return 2;
            }
            Some(Ok(Request::Load(_))) => {
                eprintln!("loom-engine: a model is loaded already; start another engine for another model");
                return 2;
            }
            Some(Ok(Request::Cancel { id })) => {
                if let Ok(mut c) = cancelled.lock() {
                    c.insert(id);
                }
            }
            Some(Ok(Request::Job { id, job })) => {
                let (events_out, done_out) = (write.clone(), write.clone());
                let (stop, forget) = (cancelled.clone(), cancelled.clone());
                let submitted = model.submit(Job {
                    spec: job,
                    events: Box::new(move |event| {
                        let go_on = stop.lock().map(|c| !c.contains(&id)).unwrap_or(false);
                        events_out(&Reply::Event { id, event }) && go_on
                    }),
                    done: Box::new(move |r| {
                        if let Ok(mut c) = forget.lock() {
                            c.remove(&id);
                        }
                        done_out(&Reply::End { id, error: r.err() });
                    }),
                });
                if submitted.is_err() {
                    write(&Reply::End {
                        id,
                        error: Some(EngineError::Stopped),
                    });
                    return 1;
                }
            }
        }
    }
}

/// Confines the process to reading the model file (its path resolved first, so a link to it works and the rule
/// names the file itself): the options to load it with, and what the confinement enforces.
fn confine_to_model(
    mut opts: loom_engine_protocol::EngineOptions,
) -> Result<(loom_engine_protocol::EngineOptions, String), EngineError> {
    let file = std::fs::canonicalize(&opts.model).map_err(|e| EngineError::Load {
        model: opts.label.clone(),
        why: format!("cannot resolve {}: {e}", opts.model.display()),
    })?;
    let confined =
        loom_sandbox::confine_engine(&file).map_err(|e| EngineError::Confine(e.to_string()))?;
    opts.model = file;
    Ok((opts, confined.to_string()))
}

/// The next request: `None` at the end of the input; an error naming the line that is not one.
fn next_request(input: &mut impl BufRead) -> Option<Result<Request, String>> {
    let mut text = String::new();
    loop {
        text.clear();
        match input.read_line(&mut text) {
            Ok(0) | Err(_) => return None,
            Ok(_) if text.trim().is_empty() => continue,
            Ok(_) => {
                return Some(
                    serde_json::from_str(text.trim_end())
                        .map_err(|e| format!("not a request ({e}): {:?}", text.trim_end())),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn replies(sink: &Sink) -> Vec<Reply> {
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The load request for `model`, as the line loom sends.
    fn load_line(model: std::path::PathBuf, label: &str) -> String {
        let load = line(&Request::Load(loom_engine_protocol::EngineOptions {
            model,
            label: label.into(),
            threads: 1,
            context: 256,
        }));
        format!("{load}\n")
    }

    #[test]
    fn a_model_that_does_not_load_is_reported_on_the_protocol() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("bad.gguf");
        std::fs::write(&bad, b"GGUF but not really a model").unwrap();
        let load = load_line(bad, "bad");
        let sink = Sink::default();
        let code = serve_as(
            std::io::Cursor::new(load),
            sink.clone(),
            Confine::NotInThisTest,
        );
        assert_eq!(code, 1);
        match replies(&sink).as_slice() {
            [Reply::LoadFailed(EngineError::Load { model, .. })] => assert_eq!(model, "bad"),
            other => panic!("{other:?}"),
        }
    }

    /// The engine confines itself only while it has one thread; a test process has more, so `serve` refuses to
    /// load — the path an engine takes when it cannot confine itself.
    #[test]
    fn an_engine_that_cannot_confine_itself_loads_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("m.gguf");
        std::fs::write(&model, b"GGUF").unwrap();
        let load = load_line(model, "m");
        // a second thread, whatever thread the harness runs this test on
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || rx.recv());
        let sink = Sink::default();
        let code = serve(std::io::Cursor::new(load), sink.clone());
        drop(tx);
        let _ = other.join();
        assert_eq!(code, 1);
        match replies(&sink).as_slice() {
            [Reply::LoadFailed(EngineError::Confine(why))] => {
                assert!(why.contains("threads"), "{why}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_first_line_that_is_not_a_load_ends_the_engine() {
        let sink = Sink::default();
        let job = line(&Request::Cancel { id: 1 });
        assert_eq!(
            serve(std::io::Cursor::new(format!("{job}\n")), sink.clone()),
            1
        );
        assert_eq!(serve(std::io::Cursor::new("not json\n"), sink.clone()), 2);
        assert_eq!(serve(std::io::Cursor::new(""), sink.clone()), 0);
        assert!(replies(&sink).is_empty());
    }
}
