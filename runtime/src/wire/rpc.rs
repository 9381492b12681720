//! Request/response over a [`Link`]: requests carry an id, and the connection's reader hands
//! each response to [`Rpc::complete`], which wakes the caller waiting for that id.

use super::admin::{AdminError, Request, Response};
use super::link::Link;
use super::Frame;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use thiserror::Error;
use tokio::sync::oneshot;

#[derive(Debug, Error)]
pub enum RpcError {
    #[error("not connected")]
    NotConnected,
    #[error("cannot connect: {0}")]
    Dial(String),
    #[error("no answer within {0:?}")]
    TimedOut(Duration),
    #[error(transparent)]
    Refused(#[from] AdminError),
}

type Waiting = HashMap<u64, oneshot::Sender<Result<Response, AdminError>>>;

#[derive(Clone, Default)]
pub struct Rpc {
    next: Arc<AtomicU64>,
    waiting: Arc<Mutex<Waiting>>,
}

impl Rpc {
    pub async fn call(
        &self,
        link: &Link,
        request: Request,
        timeout: Duration,
    ) -> Result<Response, RpcError> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.lock().insert(id, tx);
        if !link.send(Frame::Request { id, request }) {
            self.lock().remove(&id);
            return Err(RpcError::NotConnected);
        }
        let answer = tokio::time::timeout(timeout, rx).await;
        self.lock().remove(&id);
        match answer {
            Ok(Ok(result)) => Ok(result?),
            Ok(Err(_)) => Err(RpcError::NotConnected),
            Err(_) => Err(RpcError::TimedOut(timeout)),
        }
    }

    /// Delivers a response; one for an id nobody waits for (timed out) is dropped.
    pub fn complete(&self, id: u64, result: Result<Response, AdminError>) {
        if let Some(tx) = self.lock().remove(&id) {
            let _ = tx.send(result);
        }
    }

    /// Fails every call still waiting with [`RpcError::NotConnected`]: the connection their
    /// requests went out on closed, so no answer will come, and the callers learn it now
    /// rather than at their timeout. (`isr status` does, once its connection ends. A broker
    /// does not when its controller session ends: a request it sent may still reach the
    /// controller later, and a client told at once to retry elsewhere can then see its newer
    /// offset commit overtaken by the older one: the fault suite's partition-bridge and
    /// partition-leader-controller did, with the broker failing its calls at once.)
    pub fn abandon_all(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        // A panic while holding this lock cannot leave the map inconsistent.
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::admin::Request;

    /// A call abandoned (its connection closed) fails at once as not connected, instead of
    /// waiting out its timeout.
    #[tokio::test]
    async fn a_call_on_a_closed_connection_fails_as_not_connected() {
        let (link, mut sent) = Link::detached();
        let rpc = Rpc::default();
        let call = tokio::spawn({
            let rpc = rpc.clone();
            async move {
                rpc.call(&link, Request::Metadata, Duration::from_secs(600))
                    .await
            }
        });
        assert!(matches!(sent.recv().await, Some(Frame::Request { .. })));
        rpc.abandon_all();
        let answer = call.await.expect("the call's task");
        assert!(matches!(answer, Err(RpcError::NotConnected)), "{answer:?}");
    }
}
