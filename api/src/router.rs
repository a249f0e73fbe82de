//! The admin HTTP server's router: [`router()`] over an [`AppState`], with the JSON 404 and 405,
//! the body limit and the time limits.
//!
//! The process endpoints `GET /healthz`, `GET /readyz` and `GET /metrics` are in
//! [`crate::health`], the device page (`GET /`, `GET /ui/`) in [`crate::ui`], the ledger API
//! under `/v1` in [`crate::v1`]; `docs/admin-api.md` lists
//! every route and what it answers.
//!
//! Any other path is a JSON 404, a known path with another method a JSON 405. Request bodies
//! are limited to [`BODY_LIMIT`] bytes and requests to a time limit (longer for the backup).
//! On a standby, `/v1` requests go to the leader ([`crate::forward`]). The top of the crate:
//! nothing else may depend on it.

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;

use crate::error_response::ErrorResponse;
use crate::limits::BODY_LIMIT;
use crate::state::AppState;

/// The admin router over `state`: every route of [`crate::v1::openapi`], a JSON 404 for other
/// paths, the body limit and the time limits, all behind the forwarding of a standby's `/v1`
/// requests to the leader (which has its own time limits, [`crate::forward`]).
pub fn router(state: AppState) -> Router {
    let (routes, _document) = crate::v1::routes().split_for_parts();
    routes
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(middleware::from_fn_with_state(state.clone(), time_limit))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            crate::forward::answer_from_leader,
        ))
        .with_state(state)
}

async fn time_limit(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let limit = state.time_limit_of(request.uri().path());
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ErrorResponse::Timeout {
            seconds: limit.as_secs().max(1),
        }
        .into_response(),
    }
}

async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> ErrorResponse {
    ErrorResponse::MethodNotAllowed {
        method: method.to_string(),
        path: uri.path().to_owned(),
    }
}

async fn not_found(uri: axum::http::Uri) -> ErrorResponse {
    ErrorResponse::NotFound {
        path: uri.path().to_owned(),
    }
}
