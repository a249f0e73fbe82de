//! GET of one object and LIST of a collection (selectors, `limit`/`continue` paging).
//!
//! Reads copy `Arc`s out of the store under its lock and filter outside it.

use std::sync::Arc;

use axum::response::Response;
use http::{HeaderMap, StatusCode};
use serde_json::{json, Value};

use super::{json_bytes_response, object_response, Call, Params};
use crate::server::error::{Result, StatusError};
use crate::server::render::{self, Format};
use crate::server::resources::ResourceInfo;
use crate::server::route::ResourceRequest;
use crate::server::selectors::{FieldSelector, LabelSelector};
use crate::server::store::PageRange;
use crate::KubernetesVersion;

pub(super) fn format_of(headers: &HeaderMap, params: &Params) -> Format {
    let accept = headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    render::negotiate(accept, params.get("includeObject"))
}

/// GET one object (also serves GET on the `status` subresource).
pub(super) fn get(call: Call<'_>) -> Result<Response> {
    let (state, req, params, headers, _) = call.parts();
    let info = &req.info;
    let name = req.name.as_deref().unwrap_or_default();
    let ns = req.namespace.as_deref().unwrap_or_default();
    let obj = state
        .store
        .get(&info.storage_key(), ns, name)
        .ok_or_else(|| StatusError::not_found(&info.plural, &info.group, name))?;
    let format = format_of(headers, params);
    Ok(object_response(StatusCode::OK, format, info, &obj))
}

/// Sets `apiVersion` for the requested version (objects are shared between served versions).
pub(super) fn with_gvk(info: &crate::server::resources::ResourceInfo, obj: &Value) -> Value {
    crate::server::convert::present(info, obj)
}

/// Parsed selectors of a list or watch request.
pub(super) struct Filter {
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Filter {
    pub fn from_request(req: &ResourceRequest, params: &Params) -> Result<Self> {
        Ok(Self {
            namespace: req.namespace.clone(),
            labels: LabelSelector::parse(params.get("labelSelector").unwrap_or_default())?,
            fields: FieldSelector::parse(
                params.get("fieldSelector").unwrap_or_default(),
                &req.info.kind,
                &req.info.version,
            )?,
        })
    }

    pub fn matches(&self, obj: &Value) -> bool {
        let ns_ok = self
            .namespace
            .as_deref()
            .is_none_or(|ns| obj["metadata"]["namespace"].as_str() == Some(ns));
        ns_ok && self.labels.matches(obj) && self.fields.matches(obj)
    }
}

/// What a continue token holds: the revision the list reads at, the last key returned, and
/// how many objects came after that key when the list has no selectors (so that a later page
/// reports `remainingItemCount` without walking the rest of the collection again).
#[derive(Debug, PartialEq, Eq)]
struct Continue {
    rv: u64,
    ns: String,
    name: String,
    rest: Option<usize>,
}

/// The opaque text of a continue token.
fn encode_token(token: &Continue) -> String {
    let mut raw = json!({"rv": token.rv, "ns": token.ns, "name": token.name});
    if let Some(rest) = token.rest {
        raw["rest"] = json!(rest);
    }
    let raw = raw.to_string();
    raw.bytes()
        .fold(String::with_capacity(raw.len() * 2), |mut out, b| {
            use std::fmt::Write;
            let _ = write!(out, "{b:02x}");
            out
        })
}

fn decode_token(token: &str) -> Result<Continue> {
    let bad = || StatusError::BadRequest(format!("continue key is not valid: {token:?}"));
    if !token.len().is_multiple_of(2) {
        return Err(bad());
    }
    let bytes = (0..token.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&token[i..i + 2], 16))
        .collect::<std::result::Result<Vec<u8>, _>>()
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    let rest = match &v["rest"] {
        Value::Null => None,
        n => Some(
            n.as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(bad)?,
        ),
    };
    Ok(Continue {
        rv: v["rv"].as_u64().ok_or_else(bad)?,
        ns: v["ns"].as_str().ok_or_else(bad)?.to_string(),
        name: v["name"].as_str().ok_or_else(bad)?.to_string(),
        rest,
    })
}

/// The 410 of a continue token whose revision is no longer retained.
const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.";

/// The 410 of an exact list at a revision no longer retained.
const LIST_EXPIRED: &str = "The resourceVersion for the provided list is too old.";

/// The revision a list without a continue token reads at, `None` for the present: an exact read
/// for `resourceVersionMatch=Exact`, and for a paged list with a resourceVersion and no match
/// (the legacy rule); `NotOlderThan` (or no match) is served from the present, which is never
/// older. A revision the server has not reached is a 504 for "not older than" and the storage's
/// future-revision error for an exact read.
fn exact_revision(params: &Params, paged: bool, current: u64) -> Result<Option<u64>> {
    let Some(v) = params.get("resourceVersion").filter(|v| *v != "0") else {
        return Ok(None);
    };
    let rv = v
        .parse::<u64>()
        .map_err(|_| StatusError::BadRequest(format!("invalid resource version: {v:?}")))?;
    let exact = match params.get("resourceVersionMatch") {
        Some(m) => m == "Exact",
        None => paged,
    };
    if rv > current {
        return Err(if exact {
            StatusError::Internal("etcdserver: mvcc: required revision is a future revision".into())
        } else {
            StatusError::Timeout(format!(
                "Timeout: Too large resource version: {rv}, current: {current}"
            ))
        });
    }
    Ok(exact.then_some(rv))
}

/// Whether the 1.30 API server answers this list from its watch cache, which ignores `limit`:
/// `resourceVersion=0` without a continue token and without an exact match
/// (`shouldDelegateList` of 1.30's cacher sends only those to the cache, whose list has no
/// pages). So a client that lists from version 0 with a page size, as client-go's reflectors do
/// (kube-rs's watcher only with `ListSemantic::Any`), gets the whole collection in one answer.
fn from_watch_cache(info: &ResourceInfo, params: &Params) -> bool {
    info.release == KubernetesVersion::V1_30
        && params.get("resourceVersion") == Some("0")
        && params.get("continue").is_none()
        && params
            .get("resourceVersionMatch")
            .is_none_or(|m| m == "NotOlderThan")
}

/// LIST a collection. Pages after the first read at the first page's revision, so a paged list
/// is one consistent snapshot, as from etcd.
pub(super) fn list(call: Call<'_>) -> Result<Response> {
    let (state, req, params, headers, _) = call.parts();
    let info = &req.info;
    let filter = Filter::from_request(req, params)?;
    let limit = params
        .int("limit")?
        .filter(|l| *l > 0)
        .map(|l| usize::try_from(l).unwrap_or(usize::MAX))
        .filter(|_| !from_watch_cache(info, params));
    let key = info.storage_key();
    let namespace = filter.namespace.as_deref();
    // Counted only without selectors, as etcd's count includes objects they would drop.
    let selected = params.get("labelSelector").is_some() || params.get("fieldSelector").is_some();
    let after;
    let mut known_rest = None;
    let (range, expired) = if let Some(token) = params.get("continue") {
        let token = decode_token(token)?;
        after = (token.ns, token.name);
        known_rest = token.rest.filter(|_| !selected);
        let range = PageRange {
            namespace,
            after: Some(&after),
            rv: Some(token.rv),
            count_rest: !selected && known_rest.is_none(),
        };
        (range, CONTINUE_EXPIRED)
    } else {
        let rv = exact_revision(params, limit.is_some(), state.store.current_rv())?;
        let range = PageRange {
            namespace,
            after: None,
            rv,
            count_rest: !selected,
        };
        (range, LIST_EXPIRED)
    };
    // The range keeps to the namespace: without selectors every object in it is listed.
    let selects_all = filter.labels.is_empty() && filter.fields.is_empty();
    let page = state
        .store
        .list_page(&key, range, limit, |o| selects_all || filter.matches(o))
        .ok_or_else(|| StatusError::Gone(expired.into()))?;
    let list_rv = page.rv;
    let items: Vec<Arc<Value>> = page
        .items
        .into_iter()
        .map(|obj| {
            if crate::server::convert::needs_presenting(info, &obj) {
                Arc::new(with_gvk(info, &obj))
            } else {
                obj
            }
        })
        .collect();
    // The page's snapshot is fixed, so the count after this page follows from the one after
    // the previous page.
    let rest = match known_rest {
        Some(before) => Some(before.saturating_sub(items.len())),
        None => (!selected).then_some(page.rest),
    };
    let mut token = None;
    let mut remaining = None;
    if page.rest > 0 {
        let last = items
            .last()
            .map(|o| &o["metadata"])
            .cloned()
            .unwrap_or_default();
        token = Some(encode_token(&Continue {
            rv: list_rv,
            ns: last["namespace"].as_str().unwrap_or_default().to_owned(),
            name: last["name"].as_str().unwrap_or_default().to_owned(),
            rest,
        }));
        remaining = rest;
    }
    let body = render::list(
        format_of(headers, params),
        info,
        &items,
        list_rv,
        token.as_deref(),
        remaining,
    );
    Ok(json_bytes_response(StatusCode::OK, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip_and_reject_garbage() {
        for rest in [None, Some(7)] {
            let token = Continue {
                rv: 42,
                ns: "ns".to_owned(),
                name: "a-b".to_owned(),
                rest,
            };
            assert_eq!(decode_token(&encode_token(&token)).unwrap(), token);
        }
        assert!(decode_token("zz").is_err());
        assert!(decode_token("abc").is_err());
    }
}
