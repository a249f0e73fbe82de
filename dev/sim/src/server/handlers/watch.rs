//! WATCH: replays retained history after a resourceVersion (or sends the current objects as ADDED),
//! then streams live events filtered per watcher; BOOKMARK events, `timeoutSeconds`, 410 Expired as
//! an ERROR event, and fault-injected disconnects.
//!
//! Each watch runs in its own task that writes newline-delimited JSON into the response body.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::response::Response;
use http::StatusCode;
use serde_json::{json, Value};
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;

use super::read::{format_of, with_gvk, Filter};
use super::{object_body, AppState, Call};
use crate::server::convert::needs_presenting;
use crate::server::error::{Result, StatusError};
use crate::server::render::{self, Format};
use crate::server::resources::ResourceInfo;
use crate::server::store::{EventType, StoredEvent, Subscription};

struct Watcher {
    info: Arc<ResourceInfo>,
    key: String,
    filter: Filter,
    format: Format,
    bookmarks: bool,
    first_table: bool,
    tx: mpsc::Sender<std::result::Result<Bytes, std::io::Error>>,
}

/// Appends one watch event line, `{"type":..,"object":..}` and a newline, around an encoded
/// object.
fn push_event_line(out: &mut Vec<u8>, kind: &str, object: &[u8]) {
    out.reserve(object.len() + kind.len() + 24);
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    out.extend_from_slice(object);
    out.extend_from_slice(b"}\n");
}

/// How many bytes of event lines a watcher gathers before it sends them as one chunk.
const BATCH_BYTES: usize = 256 * 1024;

impl Watcher {
    fn push(&mut self, out: &mut Vec<u8>, kind: &str, obj: &Value) {
        let object = match self.format {
            Format::Table { full_object } => {
                let row = render::watch_table_row(
                    &self.info,
                    &with_gvk(&self.info, obj),
                    full_object,
                    self.first_table,
                );
                self.first_table = false;
                serde_json::to_vec(&row).unwrap_or_default()
            }
            f => object_body(f, &self.info, obj),
        };
        push_event_line(out, kind, &object);
    }

    /// Whether this watcher sends an object exactly as stored (so every such watcher can share
    /// one encoding of it).
    fn sends_as_stored(&self, obj: &Value) -> bool {
        self.format == Format::Json && !needs_presenting(&self.info, obj)
    }

    /// Sends the gathered event lines as one chunk of the response; false once the client is
    /// gone.
    async fn flush(&self, out: &mut Vec<u8>) -> bool {
        if out.is_empty() {
            return true;
        }
        let chunk = Bytes::from(std::mem::take(out));
        self.tx.send(Ok(chunk)).await.is_ok()
    }

    /// Sends `out` once it holds a batch's worth.
    async fn flush_full(&self, out: &mut Vec<u8>) -> bool {
        out.len() < BATCH_BYTES || self.flush(out).await
    }

    async fn send_raw(&self, event: &Value) -> bool {
        let mut line = event.to_string();
        line.push('\n');
        self.tx.send(Ok(Bytes::from(line))).await.is_ok()
    }

    async fn bookmark(&self, rv: u64, initial_end: bool) -> bool {
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj = json!({"kind": self.info.kind, "apiVersion": self.info.api_version(), "metadata": metadata});
        self.send_raw(&json!({"type": "BOOKMARK", "object": obj}))
            .await
    }

    /// Appends one stored event as this watcher sees it (selector transitions become
    /// ADDED/DELETED) to `out`.
    fn deliver(&mut self, event: &StoredEvent, out: &mut Vec<u8>) {
        if *event.key != *self.key {
            return;
        }
        let now = self.filter.matches(&event.object);
        let before = event.old.as_ref().is_some_and(|o| self.filter.matches(o));
        let kind = match (event.kind, before, now) {
            (EventType::Modified, true, true) => "MODIFIED",
            (EventType::Added | EventType::Modified, _, true) => "ADDED",
            (EventType::Modified | EventType::Deleted, _, _) if before || now => "DELETED",
            _ => return,
        };
        if self.sends_as_stored(&event.object) {
            let object =
                event.encoded(|object| Bytes::from(serde_json::to_vec(object).unwrap_or_default()));
            push_event_line(out, kind, &object);
        } else {
            self.push(out, kind, &event.object);
        }
    }
}

fn expired(message: &str) -> Value {
    json!({"type": "ERROR", "object": StatusError::Gone(message.to_string()).status_body()})
}

/// Starts a watch and returns the streaming response.
pub(super) fn watch(call: Call<'_>) -> Result<Response> {
    let (state, req, params, headers, _) = call.parts();
    let filter = Filter::from_request(req, params)?;
    let format = format_of(headers, params);
    let send_initial = params.flag("sendInitialEvents");
    let from = match params.get("resourceVersion") {
        None | Some("0") => None,
        Some(_) if send_initial => None,
        Some(v) => Some(
            v.parse::<u64>()
                .map_err(|_| StatusError::BadRequest(format!("invalid resource version: {v:?}")))?,
        ),
    };
    // Zero (or no) timeout means the server's default; a negative one ends the watch at once.
    let timeout = match params.int("timeoutSeconds")? {
        None | Some(0) => state.default_watch_timeout,
        Some(secs) => Duration::from_secs(u64::try_from(secs).unwrap_or(0)),
    };
    let (tx, rx) = mpsc::channel(256);
    let watcher = Watcher {
        info: req.info.clone(),
        key: req.info.storage_key(),
        filter,
        format,
        bookmarks: params.flag("allowWatchBookmarks"),
        first_table: true,
        tx,
    };
    let subscription = state.store.subscribe(&watcher.key, from);
    let lifetime = state.faults.next_watch_lifetime();
    let state = state.clone();
    tokio::spawn(async move {
        match subscription {
            Ok(sub) => run(state, watcher, sub, timeout, lifetime, send_initial).await,
            Err(e) => {
                let _ = watcher.send_raw(&expired(&e.to_string())).await;
            }
        }
    });
    let body = Body::from_stream(ReceiverStream::new(rx));
    Response::builder()
        .status(StatusCode::OK)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::TRANSFER_ENCODING, "chunked")
        .body(body)
        .map_err(|e| StatusError::Internal(format!("building watch response: {e}")))
}

async fn run(
    state: Arc<AppState>,
    mut w: Watcher,
    sub: Subscription,
    timeout: Duration,
    lifetime: Option<Duration>,
    send_initial: bool,
) {
    let mut last_rv = sub.rv;
    let mut receiver = sub.receiver;
    let mut out = Vec::new();
    for obj in &sub.snapshot {
        if w.filter.matches(obj) {
            w.push(&mut out, "ADDED", obj);
            if !w.flush_full(&mut out).await {
                return;
            }
        }
    }
    if !w.flush(&mut out).await {
        return;
    }
    if send_initial && w.bookmarks && !w.bookmark(last_rv, true).await {
        return;
    }
    for event in &sub.replay {
        w.deliver(event, &mut out);
        if !w.flush_full(&mut out).await {
            return;
        }
    }
    if !w.flush(&mut out).await {
        return;
    }
    let mut disconnect = state.disconnect.subscribe();
    let mut closing = state.closing.subscribe();
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let fault_end = tokio::time::sleep(lifetime.unwrap_or(Duration::from_secs(86_400 * 365)));
    tokio::pin!(fault_end);
    let mut ticker = tokio::time::interval(state.bookmark_interval);
    ticker.reset();
    loop {
        tokio::select! {
            next = receiver.recv() => {
                let queue = match next {
                    Ok(first) => {
                        // Other tasks run first: the events they commit meanwhile go out in
                        // the same chunk, one write instead of several.
                        tokio::task::yield_now().await;
                        take_waiting(&mut w, &mut receiver, first, sub.rv, &mut last_rv, &mut out)
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => Queue::FellBehind,
                    Err(broadcast::error::RecvError::Closed) => Queue::Closed,
                };
                if !w.flush(&mut out).await {
                    return;
                }
                match queue {
                    Queue::Open => {}
                    Queue::FellBehind => {
                        let _ = w.send_raw(&expired(FELL_BEHIND)).await;
                        return;
                    }
                    Queue::Closed => return,
                }
            }
            _ = ticker.tick() => {
                if w.bookmarks && !w.bookmark(last_rv, false).await {
                    return;
                }
            }
            () = &mut deadline => return,
            () = &mut fault_end => {
                state.faults.record_disconnect();
                return;
            }
            _ = disconnect.changed() => {
                state.faults.record_disconnect();
                return;
            }
            _ = closing.changed() => return,
            () = w.tx.closed() => return,
        }
    }
}

/// What a watcher's queue of live events holds after it took what was waiting.
enum Queue {
    /// Open, with nothing more waiting (or a batch taken).
    Open,
    /// The watcher fell behind: events it did not take are gone.
    FellBehind,
    /// The store is gone.
    Closed,
}

/// The message of the 410 a watcher gets when it fell behind.
const FELL_BEHIND: &str = "watch fell behind; too old resource version";

/// Appends `first` and the events already queued behind it, up to a batch, to `out`, so that
/// they go out as one chunk; events at or before `since` were sent with the replay. `last_rv`
/// follows every event taken.
fn take_waiting(
    w: &mut Watcher,
    receiver: &mut broadcast::Receiver<Arc<StoredEvent>>,
    first: Arc<StoredEvent>,
    since: u64,
    last_rv: &mut u64,
    out: &mut Vec<u8>,
) -> Queue {
    let mut event = first;
    loop {
        *last_rv = (*last_rv).max(event.rv);
        if event.rv > since {
            w.deliver(&event, out);
        }
        if out.len() >= BATCH_BYTES {
            return Queue::Open;
        }
        event = match receiver.try_recv() {
            Ok(event) => event,
            Err(broadcast::error::TryRecvError::Empty) => return Queue::Open,
            Err(broadcast::error::TryRecvError::Lagged(_)) => return Queue::FellBehind,
            Err(broadcast::error::TryRecvError::Closed) => return Queue::Closed,
        };
    }
}
