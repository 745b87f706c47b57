//! One request: its start under the retry policy, its events streamed as updates, its `message_end`.

use super::*;

impl Agent {
    /// Starts a request, retrying its start (up to and including the first event) under the retry policy.
    pub(super) async fn start(
        &self,
        request: ModelRequest,
        cancel: &CancellationToken,
    ) -> Result<(EventStream, ModelEvent), HarnessError> {
        let mut retry = 0u32;
        loop {
            let attempt = async {
                let mut s = self
                    .harness
                    .stream(request.clone(), cancel.child_token())
                    .await?;
                match s.next().await {
                    Some(Ok(first)) => Ok((s, first)),
                    Some(Err(e)) => Err(e),
                    None => Err(HarnessError::Protocol {
                        message: "the response ended before its first event".into(),
                    }),
                }
            };
            let err = tokio::select! {
                r = attempt => match r {
                    Ok(ok) => return Ok(ok),
                    Err(e) => e,
                },
                _ = cancel.cancelled() => return Err(HarnessError::Cancelled),
            };
            let Some(delay) = self.retry.delay(&err, retry, jitter()) else {
                return Err(err);
            };
            // never silent: a retry says which, how many, how long, and why
            self.bus
                .publish(&SessionUpdate::notice(crate::retry::retry_notice(
                    self.harness.name(),
                    retry + 1,
                    self.retry.max_attempts.saturating_sub(1),
                    delay,
                    &err,
                )));
            if !wait(self.sleeper.as_ref(), delay, cancel).await {
                return Err(HarnessError::Cancelled);
            }
            retry += 1;
        }
    }

    pub(super) async fn announce(
        &self,
        session: &mut Chain,
        call: &PendingCall,
        raw_input: &serde_json::Value,
        kind: ToolKind,
        locations: Vec<crate::update::Location>,
    ) -> Result<(), SessionError> {
        self.emit(
            session,
            SessionUpdate::ToolCall(ToolCall {
                tool_call_id: call.id.clone(),
                title: call.name.clone(),
                kind,
                status: ToolStatus::Pending,
                raw_input: raw_input.clone(),
                content: vec![],
                locations,
            }),
        )
        .await
    }

    pub(super) async fn finish(
        &self,
        session: &mut Chain,
        id: &str,
        out: ToolOutput,
    ) -> Result<(), SessionError> {
        let mut content = vec![ToolCallContent::Content {
            content: Content::text(out.text),
        }];
        content.extend(out.content);
        self.emit(
            session,
            SessionUpdate::ToolCallUpdate(ToolCallUpdate {
                tool_call_id: id.to_string(),
                status: Some(if out.is_error {
                    ToolStatus::Failed
                } else {
                    ToolStatus::Completed
                }),
                content: Some(content),
                raw_output: out.raw_output,
            }),
        )
        .await?;
        self.publish_plan_if_changed();
        Ok(())
    }
}
