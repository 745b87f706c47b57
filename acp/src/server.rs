//! The server: reads JSON-RPC lines, keeps one [`Agent`] per ACP session, runs prompts as tasks so `session/cancel`
//! and the client's answers to our `session/request_permission` requests are read while a turn runs.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};

use futures::future::BoxFuture;
use serde_json::{json, Value};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::wire::{
    check_config_value, config_options, initialize_result, modes, permission_request, prompt_text,
    replay_update, session_update, stop_reason, str_param, ALLOW_ALWAYS, ALLOW_ONCE, MODE_DEFAULT,
    MODE_PLAN, REJECT_ONCE,
};
use loom_jsonrpc::{
    classify_line, reply, reply_error, request, Frame, Incoming, LineFramer, RpcError,
    INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR,
};
use loom_protocol::Capacity;
use loom_runtime::storage_dir;
use loom_runtime::{boot_loaded, BootOptions};
use loom_runtime::{env_map, Loaded};
use loom_runtime::{resumable_log, FileLayer};
use loom_runtime::{Agent, AskAnswer, Asker, PermissionAsk};
use loom_tools::{ClientFs, ClientTerminals};

/// The longest line read; a longer one is answered with a parse error and skipped.
pub const MAX_LINE: usize = 16 << 20;

/// Where notes (boot notes, ignored notifications) go: never stdout, which carries only protocol messages.
pub type Notes = Arc<dyn Fn(&str) + Send + Sync>;

type Reply = Result<Value, Value>;

/// The connection to the client: the write half and our requests awaiting an answer.
struct Peer {
    out: tokio::sync::Mutex<Box<dyn AsyncWrite + Send + Unpin>>,
    pending: StdMutex<HashMap<u64, oneshot::Sender<Reply>>>,
    next_id: AtomicU64,
}

impl Peer {
    /// Writes one message as one line. A client that stopped reading is noticed by the reader (EOF).
    async fn send(&self, msg: &Value) {
        let Ok(mut line) = serde_json::to_vec(msg) else {
            return;
        };
        line.push(b'\n');
        let mut out = self.out.lock().await;
        if out.write_all(&line).await.is_ok() {
            let _ = out.flush().await;
        }
    }

    /// Sends a request; the receiver gets the client's answer (`Err`: its error object).
    async fn start(&self, method: &str, params: Value) -> (u64, oneshot::Receiver<Reply>) {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = oneshot::channel();
        if let Ok(mut p) = self.pending.lock() {
            p.insert(id, tx);
        }
        self.send(&request(id, method, params)).await;
        (id, rx)
    }

    fn forget(&self, id: u64) {
        if let Ok(mut p) = self.pending.lock() {
            p.remove(&id);
        }
    }

    fn answer(&self, id: &Value, outcome: Reply) -> bool {
        let tx = id
            .as_u64()
            .and_then(|id| self.pending.lock().ok()?.remove(&id));
        match tx {
            Some(tx) => {
                let _ = tx.send(outcome);
                true
            }
            None => false,
        }
    }
}

/// A request of the agent's to the client (`session/request_permission`, `fs/*`) on its way: the method, its
/// params and where the answer goes. The running turn's task sends it, after every update published before it, so
/// the client has seen the `tool_call` it is about.
type ClientRequest = (&'static str, Value, oneshot::Sender<Reply>);

/// Sends a request to the client through the turn's task and waits for the answer; `Err` says why there is none
/// (the client's error message, or that it went away).
fn ask_client(
    requests: &mpsc::UnboundedSender<ClientRequest>,
    method: &'static str,
    params: Value,
) -> BoxFuture<'static, Result<Value, String>> {
    let (tx, rx) = oneshot::channel();
    let sent = requests.send((method, params, tx)).is_ok();
    Box::pin(async move {
        if !sent {
            return Err("no client turn is running to ask".into());
        }
        match rx.await {
            Ok(Ok(result)) => Ok(result),
            // a plain string is our own note (the client went away); an object is the client's error
            Ok(Err(Value::String(why))) => Err(why),
            Ok(Err(e)) => Err(format!(
                "the client answered {method} with an error: {}",
                RpcError::from_peer(&e).message
            )),
            Err(_) => Err("the client disconnected before answering".into()),
        }
    })
}

/// The client's file system (`fs/read_text_file`, `fs/write_text_file`), as far as it advertised it.
struct AcpFs {
    requests: mpsc::UnboundedSender<ClientRequest>,
    session_id: String,
    read: bool,
    write: bool,
}

impl ClientFs for AcpFs {
    fn can_read(&self) -> bool {
        self.read
    }

    fn can_write(&self) -> bool {
        self.write
    }

    fn read_text_file(&self, path: &Path) -> BoxFuture<'static, Result<String, String>> {
        let params = json!({"sessionId": self.session_id, "path": path.display().to_string()});
        let answer = ask_client(&self.requests, "fs/read_text_file", params);
        Box::pin(async move {
            let result = answer.await?;
            match result["content"].as_str() {
                Some(text) => Ok(text.to_string()),
                None => Err(format!(
                    "the client's answer to fs/read_text_file has no \"content\" string: {result}"
                )),
            }
        })
    }

    fn write_text_file(
        &self,
        path: &Path,
        content: String,
    ) -> BoxFuture<'static, Result<(), String>> {
        let params = json!({"sessionId": self.session_id, "path": path.display().to_string(),
            "content": content});
        let answer = ask_client(&self.requests, "fs/write_text_file", params);
        Box::pin(async move { answer.await.map(|_| ()) })
    }
}

/// The client's terminals (`terminal/*`), offered when it advertised `terminal`.
struct AcpTerminals {
    requests: mpsc::UnboundedSender<ClientRequest>,
    session_id: String,
}

impl ClientTerminals for AcpTerminals {
    fn terminal(
        &self,
        method: &'static str,
        mut params: Value,
    ) -> BoxFuture<'static, Result<Value, String>> {
        if let Some(obj) = params.as_object_mut() {
            obj.insert("sessionId".into(), json!(self.session_id));
        }
        ask_client(&self.requests, method, params)
    }

    /// This process is `loom acp serve`: its own binary has `loom sandbox run`.
    fn loom_exe(&self) -> Result<PathBuf, String> {
        std::env::current_exe().map_err(|e| format!("cannot find the loom binary: {e}"))
    }
}

/// `session/request_permission`: the client's user answers a `[permissions]` ask or a doom-loop ask (the question
/// is [`permission_request`]); an option that was not offered is never accepted. The question goes through the
/// turn's task, which sends every update published before it first, so the client has seen the `tool_call` it is
/// asked about.
struct ClientAsker {
    requests: mpsc::UnboundedSender<ClientRequest>,
    session_id: String,
}

impl Asker for ClientAsker {
    fn ask(&self, ask: PermissionAsk) -> BoxFuture<'static, AskAnswer> {
        let always = ask.rememberable;
        let params = permission_request(&self.session_id, &ask.call, &ask.reason, always);
        let answer = ask_client(&self.requests, "session/request_permission", params);
        Box::pin(async move {
            match answer.await {
                Ok(result) => answer_of(&result, always),
                Err(why) => AskAnswer::Reject(why),
            }
        })
    }
}

/// The client's `RequestPermissionResponse` as an answer; anything but an offered "allow" option selected is a
/// refusal.
pub(super) fn answer_of(result: &Value, offered_always: bool) -> AskAnswer {
    let outcome = &result["outcome"];
    match (outcome["outcome"].as_str(), outcome["optionId"].as_str()) {
        (Some("selected"), Some(ALLOW_ONCE)) => AskAnswer::AllowOnce,
        (Some("selected"), Some(ALLOW_ALWAYS)) if offered_always => AskAnswer::AllowAlways,
        (Some("selected"), Some(REJECT_ONCE)) => AskAnswer::Reject("the user rejected it".into()),
        (Some("cancelled"), _) => AskAnswer::Reject("the client cancelled the question".into()),
        _ => AskAnswer::Reject(format!("the client's answer was not understood: {result}")),
    }
}

struct Session {
    agent: Agent,
    /// The agent's requests to the client ([`ClientAsker`], [`AcpFs`]), sent by the running turn's task.
    requests: tokio::sync::Mutex<mpsc::UnboundedReceiver<ClientRequest>>,
    /// The running turn's token.
    running: StdMutex<Option<CancellationToken>>,
}

struct Server {
    loaded: Arc<Loaded>,
    opts: BootOptions,
    peer: Arc<Peer>,
    sessions: StdMutex<BTreeMap<String, Arc<Session>>>,
    turns: StdMutex<Vec<JoinHandle<()>>>,
    next_session: AtomicU64,
    notes: Notes,
    /// The `clientCapabilities` of the client's `initialize` (`null` before it).
    client_caps: StdMutex<Value>,
    /// The `file` log the manifest's session chain keeps, when it has one: the one stored session, which
    /// `session/load` resumes (see [`durable_id`]).
    log: Option<PathBuf>,
}

/// The ACP session id of the one session a `file` log holds: `file:` and the log's path. A manifest whose chain
/// has a `file` layer has exactly one stored conversation (its log, which `loom run` resumes too), and one process
/// serves it at a time, so the id names the log: a client that saved it gets the same conversation back with
/// `session/load` from a later `loom acp serve` process.
pub(super) fn durable_id(log: &Path) -> String {
    format!("file:{}", log.display())
}

/// Does the manifest's session store its history beyond the process (a `file` layer)?
pub fn stores_durably(loaded: &Loaded) -> Option<&str> {
    loaded
        .manifest
        .session
        .layers
        .iter()
        .find(|l| l.storage && l.provider != "in-memory")
        .map(|l| l.provider.as_str())
}

/// The `cwd` of `session/new` / `session/load` (absolute), after refusing client MCP servers.
pub(super) fn session_cwd<'a>(params: &'a Value, method: &str) -> Result<&'a str, RpcError> {
    let cwd = str_param(params, "cwd")?;
    if !Path::new(cwd).is_absolute() {
        return Err(RpcError::params(format!(
            "invalid params: \"cwd\" must be an absolute path, got {cwd:?}"
        )));
    }
    match params.get("mcpServers") {
        None | Some(Value::Null) => Ok(cwd),
        Some(Value::Array(list)) if list.is_empty() => Ok(cwd),
        Some(Value::Array(_)) => Err(RpcError::params(format!(
            "{method}: mcpServers: loom does not connect MCP servers a client passes — the manifest alone decides \
             which tools exist; declare the server under [providers] with provider = \"mcp-server\" and name its \
             tools in [tools]; send an empty list"
        ))),
        Some(_) => Err(RpcError::params(
            "invalid params: \"mcpServers\" must be an array",
        )),
    }
}

/// Serves ACP on `input` / `output` until the client closes `input`; then cancels running turns, closes every
/// session (flushing file sessions) and returns.
pub async fn serve<R, W>(
    loaded: Arc<Loaded>,
    opts: BootOptions,
    mut input: R,
    output: W,
    notes: Notes,
) where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let log = resumable_log(
        &loaded.manifest.session,
        &loaded.dir,
        &storage_dir(&loaded.manifest, &env_map()),
    );
    let server = Arc::new(Server {
        log,
        client_caps: StdMutex::new(Value::Null),
        loaded,
        opts,
        peer: Arc::new(Peer {
            out: tokio::sync::Mutex::new(Box::new(output)),
            pending: StdMutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
        }),
        sessions: StdMutex::new(BTreeMap::new()),
        turns: StdMutex::new(Vec::new()),
        next_session: AtomicU64::new(1),
        notes,
    });
    // the shared framer cuts lines at MAX_LINE while they arrive: an endless line is never held
    let mut framer = LineFramer::new(MAX_LINE);
    let mut ready = VecDeque::new();
    loop {
        let frame = match ready.pop_front() {
            Some(frame) => frame,
            None => match input.fill_buf().await {
                Err(e) => {
                    (server.notes)(&format!("acp: cannot read from the client ({e}); closing"));
                    break;
                }
                Ok([]) => match framer.finish() {
                    Some(last) => last,
                    None => break,
                },
                Ok(bytes) => {
                    let n = bytes.len();
                    framer.push(bytes, &mut |frame| {
                        ready.push_back(frame);
                        true
                    });
                    input.consume(n);
                    continue;
                }
            },
        };
        let line = match frame {
            Frame::TooLarge(_) => {
                let e = RpcError::new(
                    PARSE_ERROR,
                    format!("parse error: a line longer than {MAX_LINE} bytes was skipped"),
                );
                server.peer.send(&reply_error(&Value::Null, &e)).await;
                continue;
            }
            Frame::Message(bytes) => bytes,
        };
        let Ok(text) = String::from_utf8(line) else {
            let e = RpcError::new(PARSE_ERROR, "parse error: the line is not UTF-8");
            server.peer.send(&reply_error(&Value::Null, &e)).await;
            continue;
        };
        if text.trim().is_empty() {
            continue;
        }
        server.handle(classify_line(&text)).await;
    }
    server.shutdown().await;
}

impl Server {
    async fn handle(self: &Arc<Server>, msg: Incoming) {
        match msg {
            Incoming::Invalid { id, error } => self.peer.send(&reply_error(&id, &error)).await,
            Incoming::Response { id, outcome } => {
                if !self.peer.answer(&id, outcome) {
                    (self.notes)(&format!(
                        "acp: ignored a response to no pending request (id {id})"
                    ));
                }
            }
            Incoming::Notification { method, params } => match method.as_str() {
                "session/cancel" => self.cancel(&params),
                _ => (self.notes)(&format!("acp: ignored the notification {method:?}")),
            },
            Incoming::Request { id, method, params } => {
                let answer = match method.as_str() {
                    "initialize" => self.initialize(&params),
                    "session/new" => self.new_session(&params),
                    "session/set_mode" => self.set_mode(&params),
                    "session/set_config_option" => self.set_config_option(&params),
                    "session/prompt" => match self.prompt(id.clone(), &params) {
                        // the turn's task answers
                        Ok(()) => return,
                        Err(e) => Err(e),
                    },
                    "session/load" => self.load(&params).await,
                    _ => Err(RpcError::new(
                        METHOD_NOT_FOUND,
                        format!("method not found: {method:?}"),
                    )),
                };
                let msg = match answer {
                    Ok(result) => reply(&id, result),
                    Err(e) => reply_error(&id, &e),
                };
                self.peer.send(&msg).await;
            }
        }
    }

    fn initialize(&self, params: &Value) -> Result<Value, RpcError> {
        if !params["protocolVersion"].is_u64() {
            return Err(RpcError::params(
                "invalid params: \"protocolVersion\" must be a non-negative integer",
            ));
        }
        let provider = self
            .loaded
            .manifest
            .harness
            .as_ref()
            .map_or("", |h| h.provider.as_str());
        if let Ok(mut caps) = self.client_caps.lock() {
            *caps = params["clientCapabilities"].clone();
        }
        // session/load resumes a `file` log; an in-memory session cannot be resumed
        Ok(initialize_result(provider, self.log.is_some()))
    }

    fn client_caps(&self) -> Value {
        self.client_caps
            .lock()
            .map(|c| c.clone())
            .unwrap_or(Value::Null)
    }

    fn session(&self, params: &Value) -> Result<(String, Arc<Session>), RpcError> {
        let id = str_param(params, "sessionId")?;
        let found = self.sessions.lock().ok().and_then(|s| s.get(id).cloned());
        match found {
            Some(s) => Ok((id.to_string(), s)),
            None => Err(RpcError::params(format!(
                "invalid params: unknown sessionId {id:?} (create one with session/new)"
            ))),
        }
    }

    fn new_session(&self, params: &Value) -> Result<Value, RpcError> {
        let cwd = session_cwd(params, "session/new")?;
        let (id, session) = self.open_session(cwd, "session/new")?;
        Ok(json!({
            "sessionId": id,
            "modes": modes(session.agent.plan_mode()),
            "configOptions": config_options(session.agent.model().as_deref()),
        }))
    }

    /// Boots the agent of a new ACP session in `cwd` and registers it. A manifest with a `file` log gets the id
    /// naming the log ([`durable_id`]); an in-memory one `loom-<n>`.
    fn open_session(&self, cwd: &str, method: &str) -> Result<(String, Arc<Session>), RpcError> {
        if let Some(layer) = stores_durably(&self.loaded) {
            if self.sessions.lock().map(|s| !s.is_empty()).unwrap_or(true) {
                return Err(RpcError::new(
                    INVALID_REQUEST,
                    format!(
                        "{method}: {} keeps its history in one {layer:?} session log; a second session at once \
                         would interleave both conversations in it, so this process serves one session for this \
                         manifest (start another `loom acp serve`, or use an in-memory session)",
                        self.loaded.path.display()
                    ),
                ));
            }
        }
        let opts = BootOptions {
            cwd: Some(PathBuf::from(cwd)),
            ..self.opts.clone()
        };
        let booted = boot_loaded(self.loaded.clone(), opts)
            .map_err(|e| RpcError::new(INTERNAL_ERROR, format!("{method}: {e}")))?;
        for n in &booted.notes {
            (self.notes)(n);
        }
        let id = match &self.log {
            Some(log) => durable_id(log),
            None => format!("loom-{}", self.next_session.fetch_add(1, Ordering::SeqCst)),
        };
        let mut agent = booted.agent;
        let (requests, requested) = mpsc::unbounded_channel();
        agent.set_asker(Arc::new(ClientAsker {
            requests: requests.clone(),
            session_id: id.clone(),
        }));
        let caps = self.client_caps();
        let (read, write) = (
            caps["fs"]["readTextFile"] == true,
            caps["fs"]["writeTextFile"] == true,
        );
        if caps["terminal"] == true {
            agent.set_client_terminals(Arc::new(AcpTerminals {
                requests: requests.clone(),
                session_id: id.clone(),
            }));
        }
        if read || write {
            agent.set_client_fs(Arc::new(AcpFs {
                requests,
                session_id: id.clone(),
                read,
                write,
            }));
        }
        let session = Arc::new(Session {
            agent,
            requests: tokio::sync::Mutex::new(requested),
            running: StdMutex::new(None),
        });
        if let Ok(mut s) = self.sessions.lock() {
            s.insert(id.clone(), session.clone());
        }
        Ok((id, session))
    }

    /// `session/load`: resumes the session a `file` log holds (its id is [`durable_id`] of the log). The stored
    /// history is replayed to the client as `session/update` notifications (user and agent chunks, thoughts, tool
    /// calls and their updates) before the answer; then prompts continue it. Refused with nothing written: a
    /// manifest whose session cannot resume, an id that is not this manifest's log, a log that does not exist yet,
    /// a damaged log (the line is named), a session that is running a prompt.
    async fn load(&self, params: &Value) -> Result<Value, RpcError> {
        let id = str_param(params, "sessionId")?;
        let cwd = session_cwd(params, "session/load")?;
        let manifest = self.loaded.path.display();
        let Some(log) = &self.log else {
            return Err(RpcError::new(
                INVALID_REQUEST,
                format!(
                    "session/load {id:?}: {manifest} keeps its session in memory, which does not outlive the \
                     process, so no session can be loaded (initialize advertises loadSession: false); add a \
                     \"file\" layer to [session] to keep sessions that can be resumed"
                ),
            ));
        };
        let expected = durable_id(log);
        if id != expected {
            return Err(RpcError::params(format!(
                "session/load: unknown sessionId {id:?}: {manifest} keeps one session, {expected:?} (its log \
                 {}); load that id, or start a session with session/new",
                log.display()
            )));
        }
        let open = self.sessions.lock().ok().and_then(|s| s.get(id).cloned());
        let session = match open {
            Some(s) => {
                if s.running.lock().map(|r| r.is_some()).unwrap_or(true) {
                    return Err(RpcError::new(
                        INVALID_REQUEST,
                        format!(
                            "session/load {id:?}: the session is running a prompt; wait for its answer or send \
                             session/cancel, then load it"
                        ),
                    ));
                }
                s
            }
            None => {
                match FileLayer::check(log) {
                    Ok(Some(_)) => {}
                    Ok(None) => {
                        return Err(RpcError::params(format!(
                            "session/load {id:?}: there is no log at {} yet, so there is nothing to resume; start \
                             the session with session/new",
                            log.display()
                        )))
                    }
                    Err(e) => {
                        return Err(RpcError::new(
                            INTERNAL_ERROR,
                            format!("session/load {id:?}: the stored history cannot be read: {e}"),
                        ))
                    }
                }
                self.open_session(cwd, "session/load")?.1
            }
        };
        let history = session.agent.history().await.map_err(|e| {
            RpcError::new(
                INTERNAL_ERROR,
                format!("session/load {id:?}: the stored history cannot be read: {e}"),
            )
        })?;
        for u in &history {
            if let Some(n) = replay_update(id, u) {
                self.peer.send(&n).await;
            }
        }
        // the working record is kept apart from the history: its plan, as it stands, after the replay
        if !session.agent.record().is_empty() {
            if let Some(n) = session_update(id, &session.agent.plan_update()) {
                self.peer.send(&n).await;
            }
        }
        Ok(json!({
            "modes": modes(session.agent.plan_mode()),
            "configOptions": config_options(session.agent.model().as_deref()),
        }))
    }

    /// `session/set_mode`: the client's user switches between the default mode and plan mode. The model has no
    /// way to do this; only the client (its user) does.
    fn set_mode(&self, params: &Value) -> Result<Value, RpcError> {
        let (_, session) = self.session(params)?;
        let plan = match str_param(params, "modeId")? {
            MODE_DEFAULT => false,
            MODE_PLAN => true,
            other => {
                return Err(RpcError::params(format!(
                    "invalid params: unknown modeId {other:?} (the modes are {MODE_DEFAULT:?} and {MODE_PLAN:?})"
                )))
            }
        };
        session.agent.set_plan_mode(plan);
        Ok(json!({}))
    }

    /// `session/set_config_option`: the model option, which takes only the manifest's model (the harness is the
    /// manifest's; a client cannot pick another).
    fn set_config_option(&self, params: &Value) -> Result<Value, RpcError> {
        let (_, session) = self.session(params)?;
        let model = session.agent.model();
        let manifest = self.loaded.path.display().to_string();
        check_config_value(params, model.as_deref(), &manifest)?;
        Ok(json!({ "configOptions": config_options(model.as_deref()) }))
    }

    fn prompt(self: &Arc<Server>, id: Value, params: &Value) -> Result<(), RpcError> {
        let (session_id, session) = self.session(params)?;
        let text = prompt_text(params)?;
        let token = CancellationToken::new();
        {
            let Ok(mut running) = session.running.lock() else {
                return Err(RpcError::new(INTERNAL_ERROR, "session state is poisoned"));
            };
            if running.is_some() {
                return Err(RpcError::new(
                    INVALID_REQUEST,
                    format!(
                        "session {session_id:?} is already running a prompt; wait for its answer or send \
                         session/cancel"
                    ),
                ));
            }
            *running = Some(token.clone());
        }
        let peer = self.peer.clone();
        let task = tokio::spawn(async move {
            let updates = session.agent.subscribe(Capacity::Unbounded);
            let mut requests = session.requests.lock().await;
            let turn = session.agent.prompt(&text, token);
            tokio::pin!(turn);
            // the turn itself never writes: every message goes out from here, so no write waits on the turn
            let outcome = loop {
                tokio::select! {
                    biased;
                    Some(u) = updates.recv() => {
                        if let Some(n) = session_update(&session_id, &u) {
                            peer.send(&n).await;
                        }
                    }
                    Some((method, params, answer)) = requests.recv() => {
                        while let Some(u) = updates.try_recv() {
                            if let Some(n) = session_update(&session_id, &u) {
                                peer.send(&n).await;
                            }
                        }
                        let (id, reply) = peer.start(method, params).await;
                        let peer = peer.clone();
                        tokio::spawn(async move {
                            let mut answer = answer;
                            tokio::select! {
                                r = reply => {
                                    let r = r.unwrap_or_else(|_| Err(json!("the client disconnected")));
                                    let _ = answer.send(r);
                                }
                                // the turn stopped waiting (cancelled): the client's late answer is ignored
                                _ = answer.closed() => peer.forget(id),
                            }
                        });
                    }
                    o = &mut turn => break o,
                }
            };
            while let Some(u) = updates.try_recv() {
                if let Some(n) = session_update(&session_id, &u) {
                    peer.send(&n).await;
                }
            }
            if let Ok(mut running) = session.running.lock() {
                *running = None;
            }
            let msg = match stop_reason(outcome.stop) {
                Some(r) => reply(&id, json!({ "stopReason": r })),
                None => reply_error(
                    &id,
                    &RpcError::new(
                        INTERNAL_ERROR,
                        format!(
                            "the turn failed: {}",
                            outcome.error.as_deref().unwrap_or("(no detail)")
                        ),
                    ),
                ),
            };
            peer.send(&msg).await;
        });
        if let Ok(mut turns) = self.turns.lock() {
            turns.retain(|t| !t.is_finished());
            turns.push(task);
        }
        Ok(())
    }

    fn cancel(&self, params: &Value) {
        match self.session(params) {
            Ok((_, s)) => {
                if let Some(t) = s.running.lock().ok().and_then(|r| r.clone()) {
                    t.cancel();
                }
            }
            Err(e) => (self.notes)(&format!("acp: session/cancel ignored: {}", e.message)),
        }
    }

    /// The client is gone: cancel every running turn, let each finish, then close every session.
    async fn shutdown(&self) {
        let sessions: Vec<(String, Arc<Session>)> = self
            .sessions
            .lock()
            .map(|s| s.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        for (_, s) in &sessions {
            if let Some(t) = s.running.lock().ok().and_then(|r| r.clone()) {
                t.cancel();
            }
        }
        // after the cancel, so a turn waiting on a question ends cancelled rather than refused
        if let Ok(mut p) = self.peer.pending.lock() {
            p.clear();
        }
        let turns = self
            .turns
            .lock()
            .map(|mut t| std::mem::take(&mut *t))
            .unwrap_or_default();
        for t in turns {
            let _ = t.await;
        }
        for (id, s) in sessions {
            if let Err(e) = s.agent.close().await {
                (self.notes)(&format!("acp: closing session {id}: {e}"));
            }
        }
    }
}
