//! Query parameters and request body decoding shared by the verb handlers.
//!
//! Parameters are read the way the API server's parameter codec reads them: the first value of a
//! repeated parameter wins; a boolean is false only for `0` or `false` (any case) and true for any
//! other value, the empty one included; integers parse as signed 64-bit numbers and a malformed
//! one is a 400 with Go's `strconv.ParseInt` text. `pretty` alone is parsed like Go's
//! `strconv.ParseBool`, with anything unparsable meaning false.
//!
//! No store access.

use axum::extract::Query;
use http::{HeaderMap, Uri};
use serde_json::Value;

use crate::server::error::{Result, StatusError};
use crate::server::protobuf;
use crate::server::resources::ResourceInfo;

/// Query parameters of a request.
#[derive(Debug, Clone, Default)]
pub(crate) struct Params(Vec<(String, String)>);

impl Params {
    /// Parses the query string.
    pub fn from_uri(uri: &Uri) -> Result<Self> {
        let Query(pairs) = Query::<Vec<(String, String)>>::try_from_uri(uri)
            .map_err(|e| StatusError::BadRequest(format!("malformed query: {e}")))?;
        Ok(Self(pairs))
    }

    /// The first value of a parameter, empty or not, if the parameter is present.
    pub fn first(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of a repeated parameter, in order.
    pub fn all(&self, key: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The first value of a parameter, if present and non-empty.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.first(key).filter(|v| !v.is_empty())
    }

    /// A boolean parameter that may be unset (`sendInitialEvents`, `orphanDependents`).
    pub fn optional_flag(&self, key: &str) -> Option<bool> {
        self.first(key)
            .map(|v| !(v == "0" || v.eq_ignore_ascii_case("false")))
    }

    /// A boolean parameter; absent means false.
    pub fn flag(&self, key: &str) -> bool {
        self.optional_flag(key).unwrap_or(false)
    }

    /// A signed integer parameter (`limit`, `timeoutSeconds`, `gracePeriodSeconds`); 400 when
    /// malformed, an empty value included.
    pub fn int(&self, key: &str) -> Result<Option<i64>> {
        self.first(key)
            .map(|v| {
                v.parse::<i64>().map_err(|_| {
                    StatusError::BadRequest(format!(
                        "strconv.ParseInt: parsing {v:?}: invalid syntax"
                    ))
                })
            })
            .transpose()
    }

    /// Whether unknown fields are an error (`fieldValidation=Strict`).
    pub fn strict_fields(&self) -> bool {
        self.get("fieldValidation") == Some("Strict")
    }

    /// Whether the request is a server-side dry run (any `dryRun` value; the values themselves
    /// are checked by the options validation).
    pub fn dry_run(&self) -> bool {
        self.first("dryRun").is_some()
    }

    /// Whether the answer is indented: `pretty` parsed like Go's `strconv.ParseBool` (unparsable
    /// is false), or, without it, a user agent of a person's tool (curl, Wget, a browser).
    pub fn pretty(&self, headers: &HeaderMap) -> bool {
        if let Some(p) = self.get("pretty") {
            return matches!(p, "1" | "t" | "T" | "TRUE" | "true" | "True");
        }
        headers
            .get(http::header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ua| {
                ua.starts_with("curl") || ua.starts_with("Wget") || ua.starts_with("Mozilla/5.0")
            })
    }
}

/// The media type of a request body (`application/json` when none is given).
fn media_type(headers: &HeaderMap) -> &str {
    let content_type = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    content_type.split(';').next().unwrap_or_default().trim()
}

/// Decodes the body of a create or update of `info` into an object: JSON, YAML, or protobuf
/// for the kinds that have a protobuf form; another media type is the 415 kube-apiserver gives.
pub(crate) fn decode_object(
    info: &ResourceInfo,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Value> {
    match media_type(headers) {
        protobuf::MEDIA_TYPE => protobuf::decode(info, body),
        "application/json" | "" | "*/*" | "application/yaml" | "application/x-yaml" => {
            decode_body(headers, body)
        }
        _ => Err(protobuf::unsupported(info)),
    }
}

/// Decodes a JSON (or YAML) request body into an object.
pub(crate) fn decode_body(headers: &HeaderMap, body: &[u8]) -> Result<Value> {
    let media = media_type(headers);
    let value: Value = match media {
        "application/json" | "" | "*/*" => serde_json::from_slice(body)
            .map_err(|e| StatusError::BadRequest(format!("the body of the request could not be decoded as JSON: {e}")))?,
        "application/yaml" | "application/x-yaml" => serde_yaml::from_slice(body)
            .map_err(|e| StatusError::BadRequest(format!("the body of the request could not be decoded as YAML: {e}")))?,
        other => {
            return Err(StatusError::UnsupportedMediaType(format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (got {other:?})"
            )))
        }
    };
    if value.is_object() {
        Ok(value)
    } else {
        Err(StatusError::BadRequest(
            "the body of the request must be a JSON object".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(query: &str) -> Params {
        Params::from_uri(&format!("/x?{query}").parse().unwrap()).unwrap()
    }

    #[test]
    fn booleans_are_false_only_for_zero_and_false_in_any_case() {
        for yes in ["true", "True", "TRUE", "1", "t", "yes", ""] {
            assert!(params(&format!("watch={yes}")).flag("watch"), "{yes:?}");
        }
        for no in ["false", "False", "FALSE", "fAlSe", "0"] {
            assert!(!params(&format!("watch={no}")).flag("watch"), "{no:?}");
        }
        assert!(!params("other=1").flag("watch"));
        assert_eq!(params("x=1").optional_flag("sendInitialEvents"), None);
    }

    #[test]
    fn the_first_of_repeated_values_wins() {
        assert!(params("watch=true&watch=false").flag("watch"));
        assert_eq!(params("limit=2&limit=5").int("limit").unwrap(), Some(2));
    }

    #[test]
    fn integers_are_signed_and_malformed_ones_are_rejected() {
        assert_eq!(params("limit=-1").int("limit").unwrap(), Some(-1));
        assert!(params("limit=").int("limit").is_err());
        assert!(params("limit=ten").int("limit").is_err());
    }

    #[test]
    fn pretty_is_parsed_like_go_parse_bool() {
        let none = HeaderMap::new();
        assert!(params("pretty=T").pretty(&none));
        assert!(!params("pretty=yes").pretty(&none));
        assert!(!params("pretty=false").pretty(&none));
        let mut curl = HeaderMap::new();
        curl.insert(http::header::USER_AGENT, "curl/8.5.0".parse().unwrap());
        assert!(params("").pretty(&curl));
        assert!(!params("pretty=0").pretty(&curl));
    }
}
