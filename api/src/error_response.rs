//! The HTTP error of the admin API: one [`ErrorResponse`] answered as
//! `{"error": {"code": "...", "message": "..."}}` with its status. 4xx messages say what was
//! wrong; 5xx messages are generic while the real error is logged. Depends on the ledger's error
//! type only to map it to a status.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use dra_allocator::ledger::LedgerError;
use serde::Serialize;
use utoipa::ToSchema;

/// An error answered as JSON `{"error": {"code", "message"}}` with its status.
#[derive(Debug, thiserror::Error)]
pub enum ErrorResponse {
    /// A query parameter, path segment or body is malformed (400).
    #[error("{0}")]
    BadRequest(String),
    /// A mutating endpoint was called without a valid bearer token (401).
    #[error("{0}")]
    Unauthorized(&'static str),
    /// A mutating endpoint was called while no admin token is configured (403).
    #[error("admin token not configured: start the server with --admin-token-file to enable this endpoint")]
    Forbidden,
    /// No route matches the path (404).
    #[error("no such endpoint: {path}")]
    NotFound {
        /// The requested path.
        path: String,
    },
    /// The route exists but not with this method (405).
    #[error("method {method} not allowed on {path}")]
    MethodNotAllowed {
        /// The request method.
        method: String,
        /// The requested path.
        path: String,
    },
    /// The named node, device or claim is not in the ledger (404).
    #[error("{0}")]
    UnknownObject(String),
    /// The request conflicts with the current state (409).
    #[error("{0}")]
    Conflict(String),
    /// A `continue` token from another ledger than the one answering now (410), as Kubernetes
    /// answers an expired `continue`.
    #[error("{0}")]
    ContinueExpired(String),
    /// The request body is larger than the limit (413).
    #[error("request body larger than {limit} bytes")]
    PayloadTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The process is not ready yet (503).
    #[error("not ready: waiting for {}", waiting.join(", "))]
    NotReady {
        /// What is still missing.
        waiting: Vec<&'static str>,
    },
    /// The request did not finish within its time limit (503).
    #[error("request did not finish within {seconds} s")]
    Timeout {
        /// The limit in seconds.
        seconds: u64,
    },
    /// A standby cannot reach the leader its `/v1` requests are forwarded to (503).
    #[error("replica {replica} is a standby and cannot reach the leader {leader}{}: {cause}; the admin API answers only from the leader's ledger", at.as_ref().map(|url| format!(" at {url}")).unwrap_or_default())]
    LeaderUnreachable {
        /// The replica that answers.
        replica: String,
        /// The leader's identity.
        leader: String,
        /// Where it was looked for, when it has an address.
        at: Option<String>,
        /// Why it was not reached.
        cause: String,
    },
    /// No replica holds the leader lease as far as this one knows, or this one lost it (503).
    #[error("replica {replica} has no leader to answer from: {why}; the admin API answers only from the leader's ledger")]
    NoLeader {
        /// The replica that answers.
        replica: String,
        /// Why.
        why: &'static str,
    },
    /// A request another replica forwarded reached a replica that is not the leader either (503):
    /// a forwarded request is never forwarded again.
    #[error("replica {replica} is not the leader ({}) and does not forward again a request that {forwarded_by} forwarded", leader.as_ref().map_or_else(|| "no replica holds the lease".to_owned(), |leader| format!("the lease is held by {leader}")))]
    NotLeader {
        /// The replica that answers.
        replica: String,
        /// The leader as this replica knows it.
        leader: Option<String>,
        /// The replica that forwarded the request.
        forwarded_by: String,
    },
    /// Something failed inside the server (500); the client sees a generic message.
    #[error("internal error")]
    Internal(#[source] crate::Error),
}

impl ErrorResponse {
    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            ErrorResponse::BadRequest(_) => StatusCode::BAD_REQUEST,
            ErrorResponse::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ErrorResponse::Forbidden => StatusCode::FORBIDDEN,
            ErrorResponse::NotFound { .. } | ErrorResponse::UnknownObject(_) => {
                StatusCode::NOT_FOUND
            }
            ErrorResponse::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            ErrorResponse::Conflict(_) => StatusCode::CONFLICT,
            ErrorResponse::ContinueExpired(_) => StatusCode::GONE,
            ErrorResponse::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorResponse::NotReady { .. }
            | ErrorResponse::Timeout { .. }
            | ErrorResponse::LeaderUnreachable { .. }
            | ErrorResponse::NoLeader { .. }
            | ErrorResponse::NotLeader { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ErrorResponse::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The fixed `code` of the JSON body.
    pub fn code(&self) -> &'static str {
        match self {
            ErrorResponse::BadRequest(_) => "bad_request",
            ErrorResponse::Unauthorized(_) => "unauthorized",
            ErrorResponse::Forbidden => "forbidden",
            ErrorResponse::NotFound { .. } | ErrorResponse::UnknownObject(_) => "not_found",
            ErrorResponse::MethodNotAllowed { .. } => "method_not_allowed",
            ErrorResponse::Conflict(_) => "conflict",
            ErrorResponse::ContinueExpired(_) => "expired",
            ErrorResponse::PayloadTooLarge { .. } => "payload_too_large",
            ErrorResponse::NotReady { .. } => "not_ready",
            ErrorResponse::Timeout { .. } => "timeout",
            ErrorResponse::LeaderUnreachable { .. } => "leader_unreachable",
            ErrorResponse::NoLeader { .. } => "no_leader",
            ErrorResponse::NotLeader { .. } => "not_leader",
            ErrorResponse::Internal(_) => "internal",
        }
    }

    /// The answer to a failed ledger call: refusals become 4xx with the ledger's message, a
    /// stopped writer or a fenced commit (not the leader) 503, anything else a generic 500.
    pub fn from_ledger(error: LedgerError) -> Self {
        match error {
            LedgerError::DeviceNotFound { .. } | LedgerError::ClaimNotFound { .. } => {
                ErrorResponse::UnknownObject(error.to_string())
            }
            LedgerError::InvalidInput { .. } => ErrorResponse::BadRequest(error.to_string()),
            LedgerError::ClaimConflict { .. }
            | LedgerError::DeviceConflict { .. }
            | LedgerError::AbortConfirmed { .. } => ErrorResponse::Conflict(error.to_string()),
            LedgerError::WriterStopped => ErrorResponse::NotReady {
                waiting: vec!["ledger writer"],
            },
            // A standby (or a replica that lost the lease) may not write its ledger.
            LedgerError::Fenced { .. } => ErrorResponse::NotReady {
                waiting: vec!["leader lease"],
            },
            other => ErrorResponse::Internal(crate::Error::Ledger(other)),
        }
    }
}

/// The JSON body of every error answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// A fixed machine-readable code: `bad_request`, `unauthorized`, `forbidden`, `not_found`,
    /// `method_not_allowed`, `conflict`, `expired`, `payload_too_large`, `not_ready`, `timeout`,
    /// `leader_unreachable`, `no_leader`, `not_leader` or `internal`.
    pub code: String,
    /// What was wrong, for people.
    pub message: String,
}

impl IntoResponse for ErrorResponse {
    fn into_response(self) -> Response {
        if let ErrorResponse::Internal(source) = &self {
            tracing::error!(error = %source, "Admin API request failed");
        }
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code().to_owned(),
                message: self.to_string(),
            },
        };
        let mut response = (self.status(), Json(body)).into_response();
        if matches!(self, ErrorResponse::Unauthorized(_)) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}
