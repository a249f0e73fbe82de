//! The `/v1` handlers that change state or copy the ledger: cordon, uncordon, reconcile and
//! backup. Each takes [`Authorized`], so each needs the admin bearer token.

use std::path::PathBuf;

use axum::body::{Body, Bytes};
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::stream;
use tokio::io::AsyncReadExt;
use tracing::{info, warn};

use super::read::segments;
use super::types::{CordonRequest, CordonResult};
use crate::auth::Authorized;
use crate::cordon::CordonError;
use crate::error_response::{ErrorBody, ErrorResponse};
use crate::limits::BODY_LIMIT;
use crate::state::AppState;

/// The optional JSON body of cordon and uncordon: empty, `null`, or a [`CordonRequest`].
fn cordon_body(body: Result<Bytes, BytesRejection>) -> Result<CordonRequest, ErrorResponse> {
    let bytes = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ErrorResponse::PayloadTooLarge { limit: BODY_LIMIT }
        } else {
            ErrorResponse::BadRequest(rejection.body_text())
        }
    })?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(CordonRequest::default());
    }
    let invalid =
        |reason: String| ErrorResponse::BadRequest(format!("invalid JSON body: {reason}"));
    // The document's `oneOf [null, CordonRequest]`: `null` is the same as no body, and only an
    // object is a request (serde would also take the fields from an array, `[null]`).
    match serde_json::from_slice(&bytes).map_err(|error| invalid(error.to_string()))? {
        serde_json::Value::Null => Ok(CordonRequest::default()),
        object @ serde_json::Value::Object(_) => {
            serde_json::from_value(object).map_err(|error| invalid(error.to_string()))
        }
        _ => Err(invalid(
            "expected an object with an optional \"reason\", or null".to_owned(),
        )),
    }
}

async fn set_cordon(
    state: AppState,
    node: String,
    device: String,
    body: Result<Bytes, BytesRejection>,
    cordon: bool,
) -> Result<Json<CordonResult>, ErrorResponse> {
    let request = cordon_body(body)?;
    if let Some(cluster) = state.cluster_cordon() {
        // A device the ledger does not know is refused by the ledger call below (404), and
        // nothing is written to the cluster for it.
        let (n, d) = (node.clone(), device.clone());
        let known = state
            .ledger_call(move |ledger| ledger.node_devices(&n))
            .await?
            .is_some_and(|devices| devices.iter().any(|status| status.name == d));
        let written = if known {
            cluster.set(&node, &device, cordon).await
        } else {
            Ok(())
        };
        match written {
            Ok(()) => {}
            Err(CordonError::Unavailable(message)) => return Err(ErrorResponse::Conflict(message)),
            Err(error) => return Err(ErrorResponse::Internal(crate::Error::Cordon(error))),
        }
    }
    let (n, d) = (node.clone(), device.clone());
    let changed = state
        .ledger_call(move |ledger| {
            if cordon {
                ledger.cordon(&n, &d)
            } else {
                ledger.uncordon(&n, &d)
            }
        })
        .await?;
    let reason = request.reason.as_deref().unwrap_or("");
    info!(%node, %device, cordon, changed, reason, "Device cordon set through the admin API");
    Ok(Json(CordonResult {
        node,
        device,
        cordoned: cordon,
        changed,
    }))
}

/// A handler of `POST /v1/nodes/{node}/devices/{device}/<action>` that sets the cordon to
/// `$cordon`: cordon and uncordon differ only in these, and their OpenAPI operations only in
/// the path, the summary and the 200 answer.
macro_rules! cordon_handler {
    ($name:ident, $path:tt, $summary:tt, $done:tt, $cordon:expr) => {
        #[doc = $summary]
        #[utoipa::path(post, path = $path, tag = "admin",
            params(("node" = String, Path, description = "Node name"),
                   ("device" = String, Path, description = "Device name")),
            request_body(content = Option<CordonRequest>, description = "Optional reason", content_type = "application/json"),
            security(("bearer" = [])),
            responses(
                (status = 200, description = $done, body = CordonResult),
                (status = 400, description = "Malformed body", body = ErrorBody),
                (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
                (status = 403, description = "No admin token configured", body = ErrorBody),
                (status = 404, description = "Unknown node or device", body = ErrorBody),
                (status = 409, description = "Cordon is not available: a resource.k8s.io/v1 cluster that serves no DeviceTaintRule", body = ErrorBody),
                (status = 413, description = "Body larger than 64 KiB", body = ErrorBody),
                (status = 503, description = "Ledger not open, the leader lease not held, or a standby that cannot forward to the leader (codes `leader_unreachable`, `no_leader`, `not_leader`)", body = ErrorBody),
            ))]
        pub async fn $name(
            _auth: Authorized,
            State(state): State<AppState>,
            names: Result<Path<(String, String)>, PathRejection>,
            body: Result<Bytes, BytesRejection>,
        ) -> Result<Json<CordonResult>, ErrorResponse> {
            let (node, device) = segments(names)?;
            set_cordon(state, node, device, body, $cordon).await
        }
    };
}

cordon_handler!(
    cordon,
    "/v1/nodes/{node}/devices/{device}/cordon",
    " Takes a device out of allocation; existing consumers keep it. Idempotent.",
    "Cordoned",
    true
);

cordon_handler!(
    uncordon,
    "/v1/nodes/{node}/devices/{device}/uncordon",
    " Puts a cordoned device back into allocation. Idempotent.",
    "Uncordoned",
    false
);

/// Runs a reconcile of the ledger against the cluster now and returns the drift report.
#[utoipa::path(post, path = "/v1/reconcile", tag = "admin",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The drift report", body = Object),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "No admin token configured", body = ErrorBody),
        (status = 409, description = "A reconcile requested through the API is running", body = ErrorBody),
        (status = 503, description = "Not ready, the leader lease not held, no reconciler in this process, or a standby that cannot forward to the leader (codes `leader_unreachable`, `no_leader`, `not_leader`)", body = ErrorBody),
    ))]
pub async fn reconcile(
    _auth: Authorized,
    State(state): State<AppState>,
) -> Result<Json<serde_json::Value>, ErrorResponse> {
    let Some(reconciler) = state.reconciler() else {
        return Err(ErrorResponse::NotReady {
            waiting: vec!["a reconciler (none in this process)"],
        });
    };
    let waiting = state.readiness().waiting_for();
    if !waiting.is_empty() {
        return Err(ErrorResponse::NotReady { waiting });
    }
    if state.readiness().is_standby() {
        // Only the leader writes its ledger; a standby reconciles when it takes over.
        return Err(ErrorResponse::NotReady {
            waiting: vec!["leader lease"],
        });
    }
    let Ok(_running) = state.reconcile_lock().try_lock() else {
        return Err(ErrorResponse::Conflict(
            "a reconcile requested through the admin API is already running".to_owned(),
        ));
    };
    let report = reconciler
        .reconcile_now()
        .await
        .map_err(|error| ErrorResponse::Internal(crate::Error::Reconcile(error)))?;
    info!("Reconcile requested through the admin API done");
    Ok(Json(report))
}

/// A consistent copy of the ledger file (one read snapshot), streamed.
#[utoipa::path(get, path = "/v1/backup", tag = "admin",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The ledger file", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 401, description = "Missing or invalid bearer token", body = ErrorBody),
        (status = 403, description = "No admin token configured", body = ErrorBody),
        (status = 503, description = "Ledger not open, or a standby that cannot forward to the leader (codes `leader_unreachable`, `no_leader`, `not_leader`)", body = ErrorBody),
    ))]
pub async fn backup(
    _auth: Authorized,
    State(state): State<AppState>,
) -> Result<Response, ErrorResponse> {
    let ledger = state.ledger()?;
    let backup_error = |e: std::io::Error| ErrorResponse::Internal(crate::Error::Backup(e));
    let (dir, path) = tokio::task::spawn_blocking(move || {
        // Next to the ledger: the same volume, sized for it.
        let parent = ledger
            .path()
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), std::path::Path::to_path_buf);
        let dir = tempfile::Builder::new()
            .prefix(".dra-ledger-backup-")
            .tempdir_in(parent)
            .map_err(crate::Error::Backup)?;
        let path = dir.path().join("ledger.redb");
        ledger.backup(&path).map_err(crate::Error::Ledger)?;
        Ok::<_, crate::Error>((dir, path))
    })
    .await
    .map_err(|e| ErrorResponse::Internal(crate::Error::Task(e)))?
    .map_err(ErrorResponse::Internal)?;
    let file = tokio::fs::File::open(&path).await.map_err(backup_error)?;
    let length = file.metadata().await.map_err(backup_error)?.len();
    info!(
        bytes = length,
        "Ledger backup streamed through the admin API"
    );
    // The temporary directory lives in the stream's state and goes when the stream ends.
    let chunks = stream::unfold(Some((file, dir)), |state| async move {
        let (mut file, dir) = state?;
        let mut buf = vec![0; 64 * 1024];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(Bytes::from(buf)), Some((file, dir))))
            }
            Err(error) => {
                warn!(%error, "Reading the backup copy failed");
                Some((Err(error), None))
            }
        }
    });
    Ok((
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
            (header::CONTENT_LENGTH, length.to_string()),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"ledger.redb\"".to_owned(),
            ),
        ],
        Body::from_stream(chunks),
    )
        .into_response())
}
