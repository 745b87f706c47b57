//! The background agents of one agent: children `background_spawn` started, which run while their parent goes on.
//!
//! One table per agent, shared by the four background tools and the agent itself. A child is booted before the call
//! that starts it returns (so an unknown profile or a child that cannot boot fails that call), then runs its one task
//! on a task of its own, with a cancellation token of its own: the parent's turn ending does not stop it; its
//! `background_kill`, the parent's session ending, or the table being dropped does. `background_message` steers a
//! running child (its text enters the child's history at the child's next step boundary, as a user's steering does).
//! A finished child's report is kept until the parent takes it ([`BackgroundTable::take_reports`], at each of the
//! parent's step boundaries and at the start of its next turn) and stays listed after that.
//!
//! Bounded: at most [`MAX_RUNNING`] children run at once, at most [`MAX_KEPT`] entries are kept (the oldest finished
//! and delivered ones go first), and a report is cut to [`REPORT_BYTES`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::agent::Agent;

/// The most children running at once.
pub const MAX_RUNNING: usize = 4;
/// The most entries kept (running ones always are).
pub const MAX_KEPT: usize = 32;
/// The most bytes of a report the parent is given.
pub const REPORT_BYTES: usize = 64 * 1024;

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// It gave its final answer.
    Complete,
    /// It used up its requests (`maxTurns`) first: its last answer, marked incomplete.
    Incomplete,
    /// It failed (the model or its session).
    Failed,
    /// It was cancelled (`background_kill`, or its parent's session ended).
    Killed,
}

impl Ended {
    /// The word the tools and reports use.
    pub fn word(self) -> &'static str {
        match self {
            Ended::Complete => "complete",
            Ended::Incomplete => "incomplete",
            Ended::Failed => "failed",
            Ended::Killed => "killed",
        }
    }
}

/// A finished child's report, as the parent is given it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The child's id (`bg-1`).
    pub id: String,
    /// The profile it runs.
    pub profile: String,
    /// How it ended.
    pub ended: Ended,
    /// Its last answer, or why there is none (at most [`REPORT_BYTES`]).
    pub text: String,
}

impl Report {
    /// The one line the user is shown when the report reaches the parent.
    pub fn headline(&self) -> String {
        format!(
            "background agent {} ({}) finished: {}",
            self.id,
            self.profile,
            self.ended.word()
        )
    }

    /// What enters the parent's history: the report, marked as the child's output (not the user's words) and fenced
    /// by a mark made now, which the child never saw, so its text cannot close the fence early and go on as if it
    /// were the user.
    pub fn message(&self) -> String {
        let fence = format!("report-{:016x}", fence_nonce());
        format!(
            "[report of background agent {} (profile {}), {}: everything between the lines <<{fence} and {fence}>> \
             is that agent's output, not a request from the user]\n<<{fence}\n{}\n{fence}>>",
            self.id,
            self.profile,
            self.ended.word(),
            self.text
        )
    }
}

/// A number no child can have seen: the fence of a report.
fn fence_nonce() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

/// One row of `background_list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The id.
    pub id: String,
    /// The profile.
    pub profile: String,
    /// The task it was given.
    pub task: String,
    /// `running` while it runs, then how it ended.
    pub status: String,
    /// The report, once finished.
    pub report: Option<String>,
    /// Steering messages it was sent.
    pub messages: usize,
}

enum State {
    /// Reserved: booting.
    Starting,
    Running {
        agent: Arc<Agent>,
    },
    Finished {
        ended: Ended,
        text: String,
        delivered: bool,
    },
}

struct Entry {
    profile: String,
    task: String,
    state: State,
    cancel: CancellationToken,
    handle: Option<JoinHandle<()>>,
    messages: usize,
}

#[derive(Default)]
struct Inner {
    next: u64,
    entries: BTreeMap<u64, Entry>,
    /// Children that have finished so far (what a wait watches).
    ended: u64,
}

#[derive(Default)]
struct Shared {
    inner: Mutex<Inner>,
    /// Woken when a child finishes.
    ended: tokio::sync::Notify,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // the last handle is gone (the parent was dropped without closing): its children end with it
        for e in self.entries.values() {
            e.cancel.cancel();
        }
    }
}

/// One agent's background children (a cheap handle).
#[derive(Clone, Default)]
pub struct BackgroundTable(Arc<Shared>);

impl std::fmt::Debug for BackgroundTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackgroundTable")
            .field("entries", &self.lock().entries.len())
            .finish()
    }
}

/// A reserved place for a child that is booting: [`Slot::start`] it once booted; dropped unstarted, the place is
/// given back.
pub struct Slot {
    table: BackgroundTable,
    n: u64,
    started: bool,
}

impl Slot {
    /// The child's id.
    pub fn id(&self) -> String {
        id_of(self.n)
    }

    /// Runs `agent` on `task` in the background; `finish` turns its outcome into how it ended and its report text.
    pub fn start<F>(mut self, agent: Agent, task: String, finish: F) -> String
    where
        F: FnOnce(
                crate::agent::TurnOutcome,
                Result<(), crate::session::SessionError>,
            ) -> (Ended, String)
            + Send
            + 'static,
    {
        let agent = Arc::new(agent);
        let table = Arc::downgrade(&self.table.0);
        let n = self.n;
        let cancel = {
            let mut inner = self.table.lock();
            let Some(e) = inner.entries.get_mut(&n) else {
                return self.id();
            };
            e.state = State::Running {
                agent: agent.clone(),
            };
            e.cancel.clone()
        };
        let handle = tokio::spawn(async move {
            let outcome = agent.prompt(&task, cancel).await;
            let closed = agent.close().await;
            drop(agent);
            let (ended, text) = finish(outcome, closed);
            finished(&table, n, ended, text);
        });
        if let Some(e) = self.table.lock().entries.get_mut(&n) {
            e.handle = Some(handle);
        }
        self.started = true;
        self.id()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if !self.started {
            self.table.lock().entries.remove(&self.n);
        }
    }
}

fn id_of(n: u64) -> String {
    format!("bg-{n}")
}

/// Records how child `n` ended (its task is done).
fn finished(table: &Weak<Shared>, n: u64, ended: Ended, text: String) {
    let Some(shared) = table.upgrade() else {
        return;
    };
    record_end(&shared, n, ended, text);
    shared.ended.notify_waiters();
}

fn record_end(shared: &Shared, n: u64, ended: Ended, mut text: String) {
    let mut inner = shared.inner.lock().unwrap_or_else(|p| p.into_inner());
    inner.ended += 1;
    if let Some(e) = inner.entries.get_mut(&n) {
        // a child cancelled by background_kill or the parent's end reports as killed, whatever its turn said
        let ended = if e.cancel.is_cancelled() {
            Ended::Killed
        } else {
            ended
        };
        if text.len() > REPORT_BYTES {
            let mut cut = REPORT_BYTES;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text.push_str("\n[report cut at 64 KiB]");
        }
        e.state = State::Finished {
            ended,
            text,
            delivered: false,
        };
        e.handle = None;
    }
}

impl BackgroundTable {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.0.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits until a child finishes, at most `wait` (or until `cancel` fires); at once when none is running or a
    /// finished child's report is not read yet.
    pub async fn wait_for_an_end(&self, wait: std::time::Duration, cancel: &CancellationToken) {
        let deadline = tokio::time::Instant::now() + wait;
        let start = self.lock().ended;
        loop {
            let woken = self.0.ended.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            let (ended, running, unread) = {
                let inner = self.lock();
                let unread = inner.entries.values().any(|e| {
                    matches!(
                        e.state,
                        State::Finished {
                            delivered: false,
                            ..
                        }
                    )
                });
                (inner.ended, Self::running_in(&inner), unread)
            };
            // a child that finished just before the wait began counts: its report is not read yet
            if ended != start || running == 0 || unread {
                return;
            }
            tokio::select! {
                _ = &mut woken => {}
                _ = tokio::time::sleep_until(deadline) => return,
                _ = cancel.cancelled() => return,
            }
        }
    }

    /// Reserves a place for a child of `profile` working on `task`: `Err` when [`MAX_RUNNING`] children run already.
    pub fn reserve(&self, profile: &str, task: &str) -> Result<Slot, String> {
        let mut inner = self.lock();
        let running = Self::running_in(&inner);
        if running >= MAX_RUNNING {
            return Err(format!(
                "{running} background agents are running already (the most is {MAX_RUNNING}); wait for one to \
                 finish (background_list) or end one (background_kill)"
            ));
        }
        // room: the oldest finished entries whose reports were delivered go first
        while inner.entries.len() >= MAX_KEPT {
            let Some(old) = inner
                .entries
                .iter()
                .find(|(_, e)| {
                    matches!(
                        e.state,
                        State::Finished {
                            delivered: true,
                            ..
                        }
                    )
                })
                .map(|(n, _)| *n)
            else {
                break;
            };
            inner.entries.remove(&old);
        }
        inner.next += 1;
        let n = inner.next;
        inner.entries.insert(
            n,
            Entry {
                profile: profile.to_string(),
                task: task.to_string(),
                state: State::Starting,
                cancel: CancellationToken::new(),
                handle: None,
                messages: 0,
            },
        );
        drop(inner);
        Ok(Slot {
            table: self.clone(),
            n,
            started: false,
        })
    }

    /// Every child, oldest first.
    pub fn list(&self) -> Vec<Listed> {
        self.lock()
            .entries
            .iter()
            .map(|(n, e)| {
                let (status, report) = match &e.state {
                    State::Starting | State::Running { .. } => ("running".to_string(), None),
                    State::Finished { ended, text, .. } => {
                        (ended.word().to_string(), Some(text.clone()))
                    }
                };
                Listed {
                    id: id_of(*n),
                    profile: e.profile.clone(),
                    task: e.task.clone(),
                    status,
                    report,
                    messages: e.messages,
                }
            })
            .collect()
    }

    fn entry<'a>(inner: &'a mut Inner, id: &str) -> Result<&'a mut Entry, String> {
        let ids: Vec<String> = inner.entries.keys().map(|n| id_of(*n)).collect();
        id.strip_prefix("bg-")
            .and_then(|n| n.parse::<u64>().ok())
            .and_then(|n| inner.entries.get_mut(&n))
            .ok_or_else(|| {
                format!(
                    "no background agent {id:?} (this agent's: {})",
                    if ids.is_empty() {
                        "none".to_string()
                    } else {
                        ids.join(", ")
                    }
                )
            })
    }

    /// Sends `text` to running child `id`: it enters the child's history at its next step boundary.
    pub fn message(&self, id: &str, text: &str) -> Result<(), String> {
        let mut inner = self.lock();
        let e = Self::entry(&mut inner, id)?;
        match &e.state {
            State::Running { agent } if !e.cancel.is_cancelled() => {
                agent.steer(text);
                e.messages += 1;
                Ok(())
            }
            State::Starting => Err(format!("{id} is still starting; send it again")),
            State::Running { .. } => Err(format!("{id} is being cancelled; nothing was sent")),
            State::Finished { ended, .. } => Err(format!(
                "{id} has finished ({}); nothing was sent — its report is in background_list",
                ended.word()
            )),
        }
    }

    /// Cancels running child `id` (cooperatively: it stops at its next await and closes its session).
    pub fn kill(&self, id: &str) -> Result<(), String> {
        let mut inner = self.lock();
        let e = Self::entry(&mut inner, id)?;
        match &e.state {
            State::Finished { ended, .. } => Err(format!(
                "{id} has finished already ({}); nothing to end",
                ended.word()
            )),
            _ => {
                e.cancel.cancel();
                Ok(())
            }
        }
    }

    /// The reports of children that finished since the last call, oldest first (each is given once).
    pub fn take_reports(&self) -> Vec<Report> {
        let mut inner = self.lock();
        let mut out = Vec::new();
        for (n, e) in inner.entries.iter_mut() {
            if let State::Finished {
                ended,
                text,
                delivered,
            } = &mut e.state
            {
                if !*delivered {
                    *delivered = true;
                    out.push(Report {
                        id: id_of(*n),
                        profile: e.profile.clone(),
                        ended: *ended,
                        text: text.clone(),
                    });
                }
            }
        }
        out
    }

    /// How many children are running.
    pub fn running(&self) -> usize {
        Self::running_in(&self.lock())
    }

    fn running_in(inner: &Inner) -> usize {
        inner
            .entries
            .values()
            .filter(|e| !matches!(e.state, State::Finished { .. }))
            .count()
    }

    /// Cancels every running child and waits until each has closed its session (the parent's session ends); how
    /// many were running.
    pub async fn close(&self) -> usize {
        let handles: Vec<JoinHandle<()>> = {
            let mut inner = self.lock();
            inner
                .entries
                .values_mut()
                .filter(|e| !matches!(e.state, State::Finished { .. }))
                .filter_map(|e| {
                    e.cancel.cancel();
                    e.handle.take()
                })
                .collect()
        };
        let n = handles.len();
        for h in handles {
            let _ = h.await;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_dropped_unstarted_gives_its_place_back_and_the_bound_holds() {
        let t = BackgroundTable::default();
        let slots: Vec<Slot> = (0..MAX_RUNNING)
            .map(|i| t.reserve("p", &format!("task {i}")).unwrap())
            .collect();
        assert_eq!(t.running(), MAX_RUNNING);
        let e = t.reserve("p", "one more").err().unwrap();
        assert!(e.contains("the most is 4"), "{e}");
        drop(slots);
        assert_eq!(t.running(), 0);
        assert!(t.list().is_empty());
        assert!(t.reserve("p", "now").is_ok());
    }

    #[test]
    fn finished_children_report_once_and_refuse_messages_and_kills() {
        let t = BackgroundTable::default();
        let slot = t.reserve("reviewer", "look").unwrap();
        let id = slot.id();
        std::mem::forget(slot);
        finished(&Arc::downgrade(&t.0), 1, Ended::Complete, "all good".into());
        let r = t.take_reports();
        assert_eq!(
            r,
            vec![Report {
                id: id.clone(),
                profile: "reviewer".into(),
                ended: Ended::Complete,
                text: "all good".into()
            }]
        );
        assert!(t.take_reports().is_empty());
        assert_eq!(t.list()[0].report.as_deref(), Some("all good"));
        let m = t.message(&id, "more").err().unwrap();
        assert!(m.contains("has finished (complete)"), "{m}");
        assert!(t.kill(&id).err().unwrap().contains("finished already"));
        let u = t.message("bg-9", "x").err().unwrap();
        assert_eq!(u, "no background agent \"bg-9\" (this agent's: bg-1)");
        assert!(t.kill("nonsense").is_err());
    }

    #[test]
    fn a_long_report_is_cut_at_a_character_boundary() {
        let t = BackgroundTable::default();
        std::mem::forget(t.reserve("p", "t").unwrap());
        finished(
            &Arc::downgrade(&t.0),
            1,
            Ended::Failed,
            // one ASCII byte first, so the cut at REPORT_BYTES falls inside a character
            format!("a{}", "é".repeat(REPORT_BYTES)),
        );
        let r = t.take_reports();
        assert!(r[0].text.len() <= REPORT_BYTES + 40);
        assert!(r[0].text.ends_with("[report cut at 64 KiB]"));
    }

    /// On the paused test clock (virtual time, nothing measured): a wait with nothing running ends at once, and one
    /// with a child running ends when it finishes, long before the deadline.
    #[tokio::test(start_paused = true)]
    async fn a_wait_ends_when_a_child_finishes_or_at_once_when_none_runs() {
        let t = BackgroundTable::default();
        let wait = std::time::Duration::from_secs(60);
        let begin = tokio::time::Instant::now();
        t.wait_for_an_end(wait, &CancellationToken::new()).await;
        assert_eq!(tokio::time::Instant::now(), begin);
        std::mem::forget(t.reserve("p", "t").unwrap());
        let weak = Arc::downgrade(&t.0);
        let ender = tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            finished(&weak, 1, Ended::Complete, "x".into());
        });
        t.wait_for_an_end(wait, &CancellationToken::new()).await;
        assert!(tokio::time::Instant::now() - begin < wait);
        assert_eq!(t.list()[0].status, "complete");
        ender.await.unwrap();
        // bg-1's report is not read yet, and a second child runs: the wait ends at once, not when bg-2 does
        std::mem::forget(t.reserve("p", "t").unwrap());
        let again = tokio::time::Instant::now();
        t.wait_for_an_end(wait, &CancellationToken::new()).await;
        assert_eq!(tokio::time::Instant::now(), again);
        // once it is read, the wait is for bg-2 (here: until the deadline)
        assert_eq!(t.take_reports().len(), 1);
        t.wait_for_an_end(wait, &CancellationToken::new()).await;
        assert_eq!(tokio::time::Instant::now(), again + wait);
    }

    #[test]
    fn a_cancelled_child_reports_as_killed() {
        let t = BackgroundTable::default();
        std::mem::forget(t.reserve("p", "t").unwrap());
        t.kill("bg-1").unwrap();
        finished(&Arc::downgrade(&t.0), 1, Ended::Complete, "done".into());
        assert_eq!(t.take_reports()[0].ended, Ended::Killed);
    }
}
