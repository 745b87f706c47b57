//! `in-memory`: the canonical leaf storage layer. Events live in a process-local list.

use super::{Layer, SessionError};
use crate::update::SessionUpdate;

/// The in-memory storage layer.
#[derive(Debug, Default)]
pub struct MemoryLayer {
    events: Vec<SessionUpdate>,
}

impl Layer for MemoryLayer {
    fn name(&self) -> &str {
        "in-memory"
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
