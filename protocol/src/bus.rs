//! Subscriptions to an agent's updates: bounded (drop-oldest, [`DEFAULT_CAPACITY`]) for renderers, or lossless for
//! hosts whose state a dropped update would corrupt.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use crate::update::SessionUpdate;

/// The default bound of a subscription.
pub const DEFAULT_CAPACITY: usize = 1024;

/// How a subscription buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capacity {
    /// Keep at most this many updates; the oldest are dropped (and counted) when a slow reader falls behind.
    Bounded(usize),
    /// Keep everything.
    Unbounded,
}

#[derive(Debug, Default)]
struct Queue {
    items: VecDeque<SessionUpdate>,
    cap: Option<usize>,
    dropped: u64,
    closed: bool,
}

#[derive(Debug)]
struct Shared {
    queue: Mutex<Queue>,
    notify: Notify,
}

/// One subscriber's end.
#[derive(Debug)]
pub struct Subscription {
    shared: Arc<Shared>,
}

impl Subscription {
    /// The next update, or `None` once the agent is gone and everything was read.
    pub async fn recv(&self) -> Option<SessionUpdate> {
        loop {
            let notified = self.shared.notify.notified();
            if let Some(u) = self.try_recv() {
                return Some(u);
            }
            if self.shared.queue.lock().map(|q| q.closed).unwrap_or(true) {
                return None;
            }
            notified.await;
        }
    }

    /// The next buffered update, if any.
    pub fn try_recv(&self) -> Option<SessionUpdate> {
        self.shared.queue.lock().ok()?.items.pop_front()
    }

    /// How many updates were dropped because this subscriber fell behind.
    pub fn dropped(&self) -> u64 {
        self.shared.queue.lock().map(|q| q.dropped).unwrap_or(0)
    }
}

/// The publishing side.
#[derive(Debug, Default)]
pub struct Bus {
    subs: Mutex<Vec<Arc<Shared>>>,
}

impl Bus {
    /// A new subscription.
    pub fn subscribe(&self, capacity: Capacity) -> Subscription {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                cap: match capacity {
                    Capacity::Bounded(n) => Some(n.max(1)),
                    Capacity::Unbounded => None,
                },
                ..Queue::default()
            }),
            notify: Notify::new(),
        });
        if let Ok(mut subs) = self.subs.lock() {
            subs.push(shared.clone());
        }
        Subscription { shared }
    }

    /// Delivers `update` to every live subscriber.
    pub fn publish(&self, update: &SessionUpdate) {
        let Ok(mut subs) = self.subs.lock() else {
            return;
        };
        subs.retain(|s| Arc::strong_count(s) > 1);
        for s in subs.iter() {
            if let Ok(mut q) = s.queue.lock() {
                q.items.push_back(update.clone());
                if let Some(cap) = q.cap {
                    while q.items.len() > cap {
                        q.items.pop_front();
                        q.dropped += 1;
                    }
                }
            }
            s.notify.notify_one();
        }
    }

    /// Ends every subscription (after the buffered updates are read).
    pub fn close(&self) {
        if let Ok(subs) = self.subs.lock() {
            for s in subs.iter() {
                if let Ok(mut q) = s.queue.lock() {
                    q.closed = true;
                }
                s.notify.notify_one();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::update::{Chunk, Content};

    fn chunk(i: usize) -> SessionUpdate {
        SessionUpdate::AgentMessageChunk(Chunk {
            content: Content::text(i.to_string()),
            message_id: None,
        })
    }

    #[tokio::test]
    async fn bounded_drops_oldest_and_lossless_keeps_all() {
        let bus = Bus::default();
        let bounded = bus.subscribe(Capacity::Bounded(DEFAULT_CAPACITY));
        let lossless = bus.subscribe(Capacity::Unbounded);
        for i in 0..DEFAULT_CAPACITY + 10 {
            bus.publish(&chunk(i));
        }
        bus.close();
        assert_eq!(bounded.dropped(), 10);
        assert_eq!(bounded.recv().await, Some(chunk(10)));
        let mut n = 0;
        while lossless.recv().await.is_some() {
            n += 1;
        }
        assert_eq!(n, DEFAULT_CAPACITY + 10);
        assert_eq!(lossless.dropped(), 0);
    }
}
