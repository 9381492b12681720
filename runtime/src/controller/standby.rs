//! A controller that does not hold the role: it campaigns through the store and meanwhile tells
//! whoever connects where the active controller is, so that brokers and clients given a list of
//! controllers find the active one.

use super::connections::{Event, Inbox};
use super::store::{Store, StoreError, Won};
use crate::wire::admin::{AdminError, ControllerInfo};
use crate::wire::link::Link;
use crate::wire::Frame;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::sync::watch;
use tracing::info;

/// How often a standby asks the store who is active.
const LOOKUP_EVERY: Duration = Duration::from_millis(500);

/// Campaigns until this controller holds the role, answering connections as a standby.
pub async fn stand_by(
    store: &mut Store,
    events: &mut Inbox,
    links: &mut BTreeMap<u64, Link>,
) -> Result<Won, StoreError> {
    let (tell, known) = watch::channel(None);
    let lookup = store.lookup();
    let watcher = tokio::spawn(async move {
        loop {
            let active = lookup.active().await;
            if tell.send(active).is_err() {
                return;
            }
            tokio::time::sleep(LOOKUP_EVERY).await;
        }
    });
    let campaign = store.campaign();
    tokio::pin!(campaign);
    let won = loop {
        tokio::select! {
            won = &mut campaign => break won,
            Some(event) = events.recv() => answer(event, &known.borrow(), links),
        }
    };
    watcher.abort();
    if let Ok(won) = &won {
        info!(epoch = %won.epoch, "this controller is now the active one");
    }
    won
}

/// A standby's answer: nothing here acts; the active controller is `active`.
fn answer(event: Event, active: &Option<ControllerInfo>, links: &mut BTreeMap<u64, Link>) {
    match event {
        Event::Connected { conn, link, .. } => {
            link.send(Frame::NotActive(active.clone()));
            links.insert(conn, link);
        }
        Event::Frame {
            conn,
            frame: Frame::Request { id, .. },
        } => {
            if let Some(link) = links.get(&conn) {
                let refusal = Err(AdminError::NotActive(active.clone()));
                link.send(Frame::Response {
                    id,
                    result: refusal,
                });
            }
        }
        Event::Frame { .. } => {}
        Event::Closed { conn } => {
            links.remove(&conn);
        }
    }
}
