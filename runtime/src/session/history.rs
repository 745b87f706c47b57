//! Stored events to the conversation a harness sends.

use crate::model::{ContentBlock, Message, Role};
use crate::update::{Chunk, SessionUpdate, ThoughtChunk, ToolStatus};

/// The result text given to a call whose result was never recorded (the process died mid-tool).
pub const LOST_RESULT: &str = "interrupted: no result was recorded for this call";

/// Turns stored events into messages: user chunks into user text, agent chunks and tool calls into assistant
/// messages, final tool call updates into tool results. Thought chunks become thinking blocks in stream order (so
/// before the calls they led to): a chunk carrying a signature closes the open block with it, the next thought
/// chunk opens a new one, and a redacted chunk is a redacted block of its own. A tool call without a recorded result gets an error result
/// (`LOST_RESULT`) so the conversation stays well-formed. Frames, progress and usage are skipped.
pub fn to_messages(events: &[SessionUpdate]) -> Vec<Message> {
    let mut b = Builder::default();
    for e in events {
        match e {
            SessionUpdate::UserMessageChunk(c) => {
                b.settle();
                b.text(Role::User, c);
            }
            SessionUpdate::AgentMessageChunk(c) => {
                b.settle();
                b.text(Role::Assistant, c);
            }
            SessionUpdate::AgentThoughtChunk(c) => {
                b.settle();
                b.thought(c);
            }
            SessionUpdate::ToolCall(call) => {
                if b.last_role() != Some(Role::Assistant) {
                    b.settle();
                }
                b.block(
                    Role::Assistant,
                    ContentBlock::ToolUse {
                        id: call.tool_call_id.clone(),
                        name: call.title.clone(),
                        input: call.raw_input.clone(),
                    },
                );
                b.pending.push(call.tool_call_id.clone());
            }
            SessionUpdate::ToolCallUpdate(u) => {
                let is_error = match u.status {
                    Some(ToolStatus::Completed) => false,
                    Some(ToolStatus::Failed) => true,
                    _ => continue,
                };
                let Some(pos) = b.pending.iter().position(|id| *id == u.tool_call_id) else {
                    continue;
                };
                b.pending.remove(pos);
                b.result(u.tool_call_id.clone(), u.text(), is_error);
            }
            SessionUpdate::UsageUpdate(_) | SessionUpdate::Plan(_) | SessionUpdate::Frame(_) => {}
        }
    }
    b.settle();
    b.msgs
}

#[derive(Default)]
struct Builder {
    msgs: Vec<Message>,
    pending: Vec<String>,
    /// The message id of the last chunk appended: a chunk of another message starts a new block, so two prompts
    /// in a row (a turn that failed before the model answered) never run together.
    last_id: Option<Option<String>>,
}

impl Builder {
    fn last_role(&self) -> Option<Role> {
        self.msgs.last().map(|m| m.role)
    }

    /// Gives every call still waiting for a result an error result.
    fn settle(&mut self) {
        for id in std::mem::take(&mut self.pending) {
            self.result(id, LOST_RESULT.to_string(), true);
        }
    }

    fn block(&mut self, role: Role, block: ContentBlock) {
        if !matches!(
            block,
            ContentBlock::Text { .. }
                | ContentBlock::Thinking { .. }
                | ContentBlock::RedactedThinking { .. }
                | ContentBlock::ProviderItem { .. }
        ) {
            self.last_id = None;
        }
        match self.msgs.last_mut() {
            Some(m) if m.role == role => m.content.push(block),
            _ => self.msgs.push(Message {
                role,
                content: vec![block],
            }),
        }
    }

    /// The last block of the last message when it has `role` and the chunk of `message_id` continues it; records
    /// `message_id` as the last chunk's.
    fn continued(&mut self, role: Role, message_id: &Option<String>) -> Option<&mut ContentBlock> {
        let same_message = self.last_id.as_ref() == Some(message_id);
        self.last_id = Some(message_id.clone());
        self.msgs
            .last_mut()
            .filter(|m| m.role == role && same_message)
            .and_then(|m| m.content.last_mut())
    }

    fn text(&mut self, role: Role, chunk: &Chunk) {
        let text = chunk.content.as_text();
        if let Some(ContentBlock::Text { text: t }) = self.continued(role, &chunk.message_id) {
            t.push_str(text);
            return;
        }
        self.block(
            role,
            ContentBlock::Text {
                text: text.to_string(),
            },
        );
    }

    fn thought(&mut self, chunk: &ThoughtChunk) {
        let text = chunk.content.as_text();
        let open = self.continued(Role::Assistant, &chunk.message_id);
        if let Some(item) = &chunk.meta.provider_item {
            let item = item.clone();
            self.block(Role::Assistant, ContentBlock::ProviderItem { item });
            return;
        }
        if let Some(data) = &chunk.meta.redacted {
            let data = data.clone();
            self.block(Role::Assistant, ContentBlock::RedactedThinking { data });
            return;
        }
        let signature = chunk.meta.signature.clone();
        if let Some(ContentBlock::Thinking {
            text: t,
            signature: s @ None,
        }) = open
        {
            t.push_str(text);
            *s = signature;
            return;
        }
        if text.is_empty() && signature.is_none() {
            return;
        }
        self.block(
            Role::Assistant,
            ContentBlock::Thinking {
                text: text.to_string(),
                signature,
            },
        );
    }

    fn result(&mut self, tool_use_id: String, content: String, is_error: bool) {
        self.block(
            Role::User,
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
            },
        );
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::update::{
        Chunk, Content, ThoughtMeta, ToolCall, ToolCallContent, ToolCallUpdate, ToolKind,
    };

    fn user(t: &str) -> SessionUpdate {
        SessionUpdate::UserMessageChunk(Chunk {
            content: Content::text(t),
            message_id: None,
        })
    }
    fn agent(t: &str) -> SessionUpdate {
        SessionUpdate::AgentMessageChunk(Chunk {
            content: Content::text(t),
            message_id: None,
        })
    }
    /// A `bash` call announced (shared with the other session tests).
    pub(crate) fn call(id: &str) -> SessionUpdate {
        SessionUpdate::ToolCall(ToolCall {
            tool_call_id: id.into(),
            title: "bash".into(),
            kind: ToolKind::Execute,
            status: ToolStatus::Pending,
            raw_input: serde_json::json!({}),
            content: vec![],
            locations: vec![],
        })
    }
    /// The completed result of call `id` (shared with the other session tests).
    pub(crate) fn done(id: &str, text: &str) -> SessionUpdate {
        SessionUpdate::ToolCallUpdate(ToolCallUpdate {
            tool_call_id: id.into(),
            status: Some(ToolStatus::Completed),
            content: Some(vec![ToolCallContent::Content {
                content: Content::text(text),
            }]),
            raw_output: None,
        })
    }

    /// The thought chunks the turn loop emits for one message: text deltas, then the signature (or redacted data)
    /// on an empty chunk (shared with the file session tests).
    pub(crate) fn thought(
        text: &str,
        signature: Option<&str>,
        redacted: Option<&str>,
    ) -> SessionUpdate {
        SessionUpdate::AgentThoughtChunk(ThoughtChunk {
            content: Content::text(text),
            message_id: Some("m1".into()),
            meta: ThoughtMeta {
                signature: signature.map(str::to_string),
                redacted: redacted.map(str::to_string),
                provider_item: None,
            },
        })
    }

    #[test]
    fn each_thinking_block_keeps_its_own_signature_and_precedes_the_call() {
        let text = |t: &str| {
            SessionUpdate::AgentMessageChunk(Chunk {
                content: Content::text(t),
                message_id: Some("m1".into()),
            })
        };
        let m = to_messages(&[
            user("go"),
            thought("First, ", None, None),
            thought("the notes.", None, None),
            thought("", Some("sigA"), None),
            thought("", None, Some("opaque")),
            thought("Then ", None, None),
            thought("read it.", None, None),
            thought("", Some("sigB"), None),
            text("Reading."),
            call("c1"),
            done("c1", "out"),
        ]);
        assert_eq!(m.len(), 3);
        assert_eq!(
            m[1].content,
            vec![
                ContentBlock::Thinking {
                    text: "First, the notes.".into(),
                    signature: Some("sigA".into())
                },
                ContentBlock::RedactedThinking {
                    data: "opaque".into()
                },
                ContentBlock::Thinking {
                    text: "Then read it.".into(),
                    signature: Some("sigB".into())
                },
                ContentBlock::Text {
                    text: "Reading.".into()
                },
                ContentBlock::ToolUse {
                    id: "c1".into(),
                    name: "bash".into(),
                    input: serde_json::json!({})
                },
            ]
        );
        // reasoning without signatures (openai-chat, the test harness) stays one unsigned block
        let m = to_messages(&[
            user("go"),
            thought("a", None, None),
            thought("b", None, None),
        ]);
        assert_eq!(
            m[1].content,
            vec![ContentBlock::Thinking {
                text: "ab".into(),
                signature: None
            }]
        );
    }

    #[test]
    fn events_become_alternating_messages() {
        let m = to_messages(&[
            user("hi"),
            user(" there"),
            agent("a"),
            call("c1"),
            done("c1", "out"),
            agent("b"),
        ]);
        assert_eq!(m.len(), 4);
        assert_eq!(m[0].text(), "hi there");
        assert_eq!(m[1].role, Role::Assistant);
        assert!(matches!(&m[1].content[1], ContentBlock::ToolUse { id, .. } if id == "c1"));
        assert_eq!(
            m[2].content,
            vec![ContentBlock::ToolResult {
                tool_use_id: "c1".into(),
                content: "out".into(),
                is_error: false
            }]
        );
        assert_eq!(m[3].text(), "b");
    }

    #[test]
    fn chunks_of_different_messages_never_run_together() {
        let u = |t: &str, id: &str| {
            SessionUpdate::UserMessageChunk(Chunk {
                content: Content::text(t),
                message_id: Some(id.into()),
            })
        };
        let m = to_messages(&[
            u("first", "user-0"),
            u(" prompt", "user-0"),
            u("second", "user-1"),
        ]);
        assert_eq!(m.len(), 1);
        assert_eq!(
            m[0].content,
            vec![
                ContentBlock::Text {
                    text: "first prompt".into()
                },
                ContentBlock::Text {
                    text: "second".into()
                }
            ]
        );
    }

    #[test]
    fn a_call_without_a_result_gets_an_error_result() {
        let m = to_messages(&[user("hi"), call("c1"), user("again")]);
        assert_eq!(m.len(), 3);
        assert!(
            matches!(&m[2].content[0], ContentBlock::ToolResult { is_error: true, content, .. } if content == LOST_RESULT)
        );
        assert_eq!(m[2].text(), "again");
    }
}
