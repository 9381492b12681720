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

    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        // A panic while holding this lock cannot leave the map inconsistent.
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }
}
