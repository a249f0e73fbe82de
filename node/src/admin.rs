//! The agent's admin HTTP server (`--listen`): `GET /healthz`, `GET /readyz` (the journal is open,
//! the inventory is published and the kubelet acknowledged the registration; in `v1` mode also
//! the node's `ResourceSlice` published), `GET /metrics`,
//! `GET /v1/prepared` (the claims prepared here with their devices and CDI IDs) and
//! `GET /v1/devices` (the inventory, each device with its health). Read-only: nothing here changes state. Errors are JSON
//! `{"error": {"code", "message"}}`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::device::NodeDevice;
use crate::health::DeviceHealth;
use crate::metrics::{NodeMetrics, TEXT_FORMAT};

/// A claim prepared on this node, as `/v1/prepared` lists it (and `dra-ledger admin prepared`
/// reads it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreparedClaim {
    /// The claim UID.
    pub uid: String,
    /// The claim's namespace.
    pub namespace: String,
    /// The claim's name.
    pub name: String,
    /// The devices prepared for it.
    pub devices: Vec<String>,
    /// The CDI device IDs handed to the kubelet.
    pub cdi_devices: Vec<String>,
}

/// The answer of `/v1/prepared`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreparedList {
    /// The prepared claims, by claim UID.
    pub items: Vec<PreparedClaim>,
}

/// A device as `/v1/devices` lists it: the inventory's fields and its health (`state`,
/// `reason`, `message`, `since`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceView {
    /// The device.
    #[serde(flatten)]
    pub device: NodeDevice,
    /// Its health; absent until the first health round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<DeviceHealth>,
}

/// The readiness flags behind `/readyz`; clones share them.
#[derive(Clone, Debug, Default)]
pub struct AgentReadiness {
    journal_open: Arc<AtomicBool>,
    inventory_published: Arc<AtomicBool>,
    registered: Arc<AtomicBool>,
    slices_required: Arc<AtomicBool>,
    slices_published: Arc<AtomicBool>,
}

impl AgentReadiness {
    /// Marks the journal as open and recovered.
    pub fn set_journal_open(&self) {
        self.journal_open.store(true, Ordering::Release);
    }

    /// Marks the inventory as read and served.
    pub fn set_inventory_published(&self) {
        self.inventory_published.store(true, Ordering::Release);
    }

    /// Sets whether the kubelet acknowledged the registration (it can take it back by refusing
    /// a later one).
    pub fn set_registered(&self, registered: bool) {
        self.registered.store(registered, Ordering::Release);
    }

    /// Makes readiness wait for the node's `ResourceSlice` too (`v1` DRA, where the agent
    /// publishes it).
    pub fn require_slices(&self) {
        self.slices_required.store(true, Ordering::Release);
    }

    /// Marks the node's `ResourceSlice` as written.
    pub fn set_slices_published(&self) {
        self.slices_published.store(true, Ordering::Release);
    }

    /// The flags as `/readyz` reports them, and whether all are set.
    fn report(&self) -> (bool, serde_json::Value) {
        let journal = self.journal_open.load(Ordering::Acquire);
        let inventory = self.inventory_published.load(Ordering::Acquire);
        let registered = self.registered.load(Ordering::Acquire);
        let slices = self
            .slices_required
            .load(Ordering::Acquire)
            .then(|| self.slices_published.load(Ordering::Acquire));
        let ready = journal && inventory && registered && slices.unwrap_or(true);
        let mut body = json!({
            "status": if ready { "ready" } else { "not ready" },
            "journalOpen": journal,
            "inventoryPublished": inventory,
            "registered": registered,
        });
        if let Some(slices) = slices {
            body["slicesPublished"] = json!(slices);
        }
        (ready, body)
    }
}

/// A read of the agent's state, taken on each request.
pub type View<T> =
    Arc<dyn Fn() -> Result<Vec<T>, Box<dyn std::error::Error + Send + Sync>> + Send + Sync>;

/// What the handlers share.
#[derive(Clone)]
pub struct AgentState {
    /// The readiness flags.
    pub readiness: AgentReadiness,
    /// The metrics.
    pub metrics: NodeMetrics,
    /// The prepared claims.
    pub prepared: View<PreparedClaim>,
    /// The inventory with the devices' health.
    pub devices: View<DeviceView>,
}

/// The admin router.
pub fn router(state: AgentState) -> Router {
    Router::new()
        .route("/healthz", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/v1/prepared", get(prepared))
        .route("/v1/devices", get(devices))
        .fallback(|| async { error(StatusCode::NOT_FOUND, "not_found", "no such route") })
        .with_state(state)
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        Json(json!({"error": {"code": code, "message": message}})),
    )
        .into_response()
}

async fn readyz(State(state): State<AgentState>) -> Response {
    let (ready, body) = state.readiness.report();
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

async fn metrics(State(state): State<AgentState>) -> Response {
    match state.metrics.encode() {
        Ok(text) => ([(header::CONTENT_TYPE, TEXT_FORMAT)], text).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "Failed to encode the metrics");
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "internal error",
            )
        }
    }
}

fn listing<T: Serialize>(view: &View<T>, what: &str) -> Response {
    match view() {
        Ok(items) => Json(json!({ "items": items })).into_response(),
        Err(e) => {
            tracing::error!(error = %e, what, "Failed to read the agent's state");
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "internal error",
            )
        }
    }
}

async fn prepared(State(state): State<AgentState>) -> Response {
    listing(&state.prepared, "prepared claims")
}

async fn devices(State(state): State<AgentState>) -> Response {
    listing(&state.devices, "devices")
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::{to_bytes, Body};
    use axum::http::Request;
    use tower::ServiceExt;

    fn state() -> AgentState {
        AgentState {
            readiness: AgentReadiness::default(),
            metrics: NodeMetrics::new().unwrap(),
            prepared: Arc::new(|| {
                Ok(vec![PreparedClaim {
                    uid: "u1".into(),
                    namespace: "default".into(),
                    name: "c1".into(),
                    devices: vec!["gpu-0".into()],
                    cdi_devices: vec!["gpu.dra-ledger.io/claim=u1".into()],
                }])
            }),
            devices: Arc::new(|| Err("inventory unreadable".into())),
        }
    }

    async fn get(state: &AgentState, path: &str) -> (StatusCode, serde_json::Value) {
        let response = router(state.clone())
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let body = to_bytes(response.into_body(), usize::MAX).await.unwrap();
        (status, serde_json::from_slice(&body).unwrap_or_default())
    }

    #[tokio::test]
    async fn readyz_waits_for_journal_inventory_and_registration() {
        let state = state();
        let (status, body) = get(&state, "/readyz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body["registered"], false);
        state.readiness.set_journal_open();
        state.readiness.set_inventory_published();
        assert_eq!(
            get(&state, "/readyz").await.0,
            StatusCode::SERVICE_UNAVAILABLE
        );
        state.readiness.set_registered(true);
        let (status, body) = get(&state, "/readyz").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        state.readiness.set_registered(false);
        assert_eq!(
            get(&state, "/readyz").await.0,
            StatusCode::SERVICE_UNAVAILABLE
        );
    }

    #[tokio::test]
    async fn readyz_in_v1_mode_also_waits_for_the_nodes_slice() {
        let state = state();
        let (_, body) = get(&state, "/readyz").await;
        assert!(body.get("slicesPublished").is_none(), "{body}");
        state.readiness.require_slices();
        state.readiness.set_journal_open();
        state.readiness.set_inventory_published();
        state.readiness.set_registered(true);
        let (status, body) = get(&state, "/readyz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body["slicesPublished"], false);
        state.readiness.set_slices_published();
        let (status, body) = get(&state, "/readyz").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["slicesPublished"], true);
    }

    #[tokio::test]
    async fn prepared_lists_claims_and_a_failed_read_is_a_generic_500() {
        let state = state();
        let (status, body) = get(&state, "/v1/prepared").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            body["items"][0]["cdiDevices"][0],
            "gpu.dra-ledger.io/claim=u1"
        );
        let (status, body) = get(&state, "/v1/devices").await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(body["error"]["message"], "internal error");
        assert_eq!(get(&state, "/v1/nothing").await.0, StatusCode::NOT_FOUND);
    }
}
