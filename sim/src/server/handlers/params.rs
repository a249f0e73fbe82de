//! Query parameters and request body decoding shared by the verb handlers.
//!
//! No store access.

use axum::extract::Query;
use http::{HeaderMap, Uri};
use serde_json::Value;

use crate::server::error::{ApiError, Result};

/// Query parameters of a request.
#[derive(Debug, Clone, Default)]
pub(crate) struct Params(Vec<(String, String)>);

impl Params {
    /// Parses the query string.
    pub fn from_uri(uri: &Uri) -> Result<Self> {
        let Query(pairs) = Query::<Vec<(String, String)>>::try_from_uri(uri)
            .map_err(|e| ApiError::BadRequest(format!("malformed query: {e}")))?;
        Ok(Self(pairs))
    }

    /// The last value of a parameter, if present and non-empty.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }

    /// A boolean parameter (`true` or `1`).
    pub fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1"))
    }

    /// An unsigned integer parameter; 400 when malformed.
    pub fn number(&self, key: &str) -> Result<Option<u64>> {
        self.get(key)
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|_| ApiError::BadRequest(format!("invalid value for {key}: {v:?}")))
            })
            .transpose()
    }

    /// Whether unknown fields are an error (`fieldValidation=Strict`).
    pub fn strict_fields(&self) -> bool {
        self.get("fieldValidation") == Some("Strict")
    }

    /// Whether the request is a server-side dry run.
    pub fn dry_run(&self) -> bool {
        self.get("dryRun").is_some()
    }
}

/// Decodes a JSON (or YAML) request body into an object.
pub(crate) fn decode_body(headers: &HeaderMap, body: &[u8]) -> Result<Value> {
    let content_type = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    let media = content_type.split(';').next().unwrap_or_default().trim();
    let value: Value = match media {
        "application/json" | "" | "*/*" => serde_json::from_slice(body)
            .map_err(|e| ApiError::BadRequest(format!("the body of the request could not be decoded as JSON: {e}")))?,
        "application/yaml" | "application/x-yaml" => serde_yaml::from_slice(body)
            .map_err(|e| ApiError::BadRequest(format!("the body of the request could not be decoded as YAML: {e}")))?,
        other => {
            return Err(ApiError::UnsupportedMediaType(format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (got {other:?})"
            )))
        }
    };
    if value.is_object() {
        Ok(value)
    } else {
        Err(ApiError::BadRequest(
            "the body of the request must be a JSON object".into(),
        ))
    }
}
