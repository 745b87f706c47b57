//! `in-memory`: the canonical leaf storage layer. Events live in a process-local list.

use super::{Layer, SessionError};
use crate::update::SessionUpdate;

/// The in-memory storage layer.
#[derive(Debug)]
pub struct MemoryLayer {
    name: &'static str,
    events: Vec<SessionUpdate>,
}

impl Default for MemoryLayer {
    fn default() -> MemoryLayer {
        MemoryLayer {
            name: "in-memory",
            events: Vec::new(),
        }
    }
}

impl MemoryLayer {
    /// `fork-of-parent`: a fresh in-memory layer that starts with a snapshot of the spawning agent's history. What
    /// either side appends afterwards stays on that side.
    pub fn seeded(parent_history: Vec<SessionUpdate>) -> MemoryLayer {
        MemoryLayer {
            name: "fork-of-parent",
            events: parent_history,
        }
    }
}

impl Layer for MemoryLayer {
    fn name(&self) -> &str {
        self.name
    }

    fn stores(&self) -> bool {
        true
    }

    fn push(&mut self, events: Vec<SessionUpdate>) -> Result<Vec<SessionUpdate>, SessionError> {
        self.events.extend(
            events
                .iter()
                .filter(|e| !e.is_frame() && !e.is_progress())
                .cloned(),
        );
        Ok(events)
    }

    fn pull(&self, mut below: Vec<SessionUpdate>) -> Result<Vec<SessionUpdate>, SessionError> {
        below.extend(self.events.iter().cloned());
        Ok(below)
    }
}
