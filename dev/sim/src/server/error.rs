//! API errors rendered as `metav1.Status` bodies with the codes and reasons a 1.30 kube-apiserver uses.
//!
//! Owns only the error type and its HTTP rendering; it must not depend on the store or handlers.

use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde_json::{json, Value};

/// Result alias for server operations.
pub type Result<T, E = StatusError> = std::result::Result<T, E>;

/// One field-level cause of an `Invalid` error (`details.causes[]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldCause {
    /// Machine reason, e.g. `FieldValueInvalid`, `FieldValueRequired`, `FieldValueForbidden`.
    pub reason: &'static str,
    /// Field path, e.g. `metadata.name`.
    pub field: String,
    /// Human readable message for the field.
    pub message: String,
}

impl FieldCause {
    /// A `FieldValueInvalid` cause in the wording of apimachinery's field errors.
    pub fn invalid(field: impl Into<String>, value: &str, detail: &str) -> Self {
        Self {
            reason: "FieldValueInvalid",
            field: field.into(),
            message: format!("Invalid value: {value:?}: {detail}"),
        }
    }

    /// A `FieldValueRequired` cause.
    pub fn required(field: impl Into<String>, detail: &str) -> Self {
        let message = if detail.is_empty() {
            "Required value".to_string()
        } else {
            format!("Required value: {detail}")
        };
        Self {
            reason: "FieldValueRequired",
            field: field.into(),
            message,
        }
    }

    /// A `FieldValueForbidden` cause.
    pub fn forbidden(field: impl Into<String>, detail: &str) -> Self {
        Self {
            reason: "FieldValueForbidden",
            field: field.into(),
            message: format!("Forbidden: {detail}"),
        }
    }

    /// A `FieldValueNotSupported` cause; `value` is already rendered (Go's `%#v`).
    pub fn not_supported(field: impl Into<String>, value: &str, supported: &[&str]) -> Self {
        let supported: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        Self {
            reason: "FieldValueNotSupported",
            field: field.into(),
            message: format!(
                "Unsupported value: {value}: supported values: {}",
                supported.join(", ")
            ),
        }
    }

    /// A `FieldValueTooLong` cause.
    pub fn too_long(field: impl Into<String>, max: usize) -> Self {
        Self {
            reason: "FieldValueTooLong",
            field: field.into(),
            message: format!("Too long: may not be longer than {max}"),
        }
    }

    /// An immutable-field cause (`FieldValueInvalid` with the upstream wording).
    pub fn immutable(field: impl Into<String>) -> Self {
        Self {
            reason: "FieldValueInvalid",
            field: field.into(),
            message: "Invalid value: \"...\": field is immutable".into(),
        }
    }
}

/// An error answered to a client as a `metav1.Status`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StatusError {
    /// 404: the object (or resource path) does not exist.
    #[error("{message}")]
    NotFound {
        /// Status message.
        message: String,
        /// `details.kind` (plural resource name), `details.name`, `details.group`.
        details: Option<(String, String, String)>,
    },
    /// 409 `AlreadyExists`.
    #[error("{message}")]
    AlreadyExists {
        /// Status message.
        message: String,
        /// resource, name, group.
        details: (String, String, String),
    },
    /// 409 `Conflict` (stale resourceVersion, failed precondition, already bound).
    #[error("{message}")]
    Conflict {
        /// Status message.
        message: String,
        /// resource, name, group.
        details: Option<(String, String, String)>,
    },
    /// 422 `Invalid` with field causes.
    #[error("{message}")]
    Invalid {
        /// Status message.
        message: String,
        /// resource kind, name, group.
        details: (String, String, String),
        /// Field causes.
        causes: Vec<FieldCause>,
    },
    /// 400 `BadRequest`.
    #[error("{0}")]
    BadRequest(String),
    /// 403 `Forbidden`.
    #[error("{0}")]
    Forbidden(String),
    /// 405 `MethodNotAllowed`.
    #[error("{0}")]
    MethodNotAllowed(String),
    /// 410 `Expired` (too old resourceVersion or continue token).
    #[error("{0}")]
    Gone(String),
    /// 406 `NotAcceptable`: no media type of the `Accept` header can be given.
    #[error("{0}")]
    NotAcceptable(String),
    /// 415 `UnsupportedMediaType`.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 500 `InternalError`.
    #[error("{0}")]
    Internal(String),
    /// 504 `Timeout` (injected slow responses never produce this; kept for completeness of the set).
    #[error("{0}")]
    Timeout(String),
}

impl StatusError {
    /// Not found for a named object of a resource.
    pub fn not_found(resource: &str, group: &str, name: &str) -> Self {
        let qualified = qualified(resource, group);
        Self::NotFound {
            message: format!("{qualified} \"{name}\" not found"),
            details: Some((resource.to_string(), name.to_string(), group.to_string())),
        }
    }

    /// Not found for an unknown path.
    pub fn no_route() -> Self {
        Self::NotFound {
            message: "the server could not find the requested resource".into(),
            details: None,
        }
    }

    /// Already exists.
    pub fn already_exists(resource: &str, group: &str, name: &str) -> Self {
        Self::AlreadyExists {
            message: format!("{} \"{name}\" already exists", qualified(resource, group)),
            details: (resource.to_string(), name.to_string(), group.to_string()),
        }
    }

    /// Conflict for a stale resourceVersion.
    pub fn stale(resource: &str, group: &str, name: &str) -> Self {
        Self::conflict(
            resource,
            group,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// Conflict with a custom reason text.
    pub fn conflict(resource: &str, group: &str, name: &str, why: &str) -> Self {
        Self::Conflict {
            message: format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                qualified(resource, group)
            ),
            details: Some((resource.to_string(), name.to_string(), group.to_string())),
        }
    }

    /// Invalid with causes; `kind` is the object kind (e.g. `Pod`).
    pub fn invalid(kind: &str, group: &str, name: &str, causes: Vec<FieldCause>) -> Self {
        let joined = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect::<Vec<_>>();
        let body = if joined.len() == 1 {
            joined[0].clone()
        } else {
            format!("[{}]", joined.join(", "))
        };
        let qualified_kind = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        Self::Invalid {
            message: format!("{qualified_kind} \"{name}\" is invalid: {body}"),
            details: (kind.to_string(), name.to_string(), group.to_string()),
            causes,
        }
    }

    /// HTTP status code.
    pub fn code(&self) -> StatusCode {
        match self {
            Self::NotFound { .. } => StatusCode::NOT_FOUND,
            Self::AlreadyExists { .. } | Self::Conflict { .. } => StatusCode::CONFLICT,
            Self::Invalid { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            Self::Gone(_) => StatusCode::GONE,
            Self::NotAcceptable(_) => StatusCode::NOT_ACCEPTABLE,
            Self::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Self::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
        }
    }

    /// The `reason` field of the Status.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NotFound { .. } => "NotFound",
            Self::AlreadyExists { .. } => "AlreadyExists",
            Self::Conflict { .. } => "Conflict",
            Self::Invalid { .. } => "Invalid",
            Self::BadRequest(_) => "BadRequest",
            Self::Forbidden(_) => "Forbidden",
            Self::MethodNotAllowed(_) => "MethodNotAllowed",
            Self::Gone(_) => "Expired",
            Self::NotAcceptable(_) => "NotAcceptable",
            Self::UnsupportedMediaType(_) => "UnsupportedMediaType",
            Self::Internal(_) => "InternalError",
            Self::Timeout(_) => "Timeout",
        }
    }

    /// The `metav1.Status` JSON body.
    pub fn status_body(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.reason(),
            "code": self.code().as_u16(),
        });
        let details = match self {
            Self::NotFound {
                details: Some((kind, name, group)),
                ..
            }
            | Self::AlreadyExists {
                details: (kind, name, group),
                ..
            }
            | Self::Conflict {
                details: Some((kind, name, group)),
                ..
            } => Some(details_json(kind, name, group)),
            Self::Invalid {
                details: (kind, name, group),
                causes,
                ..
            } => {
                // A JSON patch that does not apply names no resource: `details` is empty.
                let mut d = if kind.is_empty() {
                    json!({})
                } else {
                    details_json(kind, name, group)
                };
                if !causes.is_empty() {
                    d["causes"] = causes
                        .iter()
                        .map(
                            |c| json!({"reason": c.reason, "message": c.message, "field": c.field}),
                        )
                        .collect();
                }
                Some(d)
            }
            _ => None,
        };
        if let Some(d) = details {
            status["details"] = d;
        }
        status
    }
}

fn details_json(kind: &str, name: &str, group: &str) -> Value {
    let mut d = json!({ "kind": kind });
    if !name.is_empty() {
        d["name"] = Value::String(name.to_string());
    }
    if !group.is_empty() {
        d["group"] = Value::String(group.to_string());
    }
    d
}

fn qualified(resource: &str, group: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

impl IntoResponse for StatusError {
    fn into_response(self) -> Response {
        if matches!(self, Self::Internal(_)) {
            tracing::warn!(error = %self, "Request failed with an internal error");
        }
        let body = self.status_body().to_string();
        (
            self.code(),
            [(http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response()
    }
}
