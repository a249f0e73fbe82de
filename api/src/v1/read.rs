//! The read-only `/v1` handlers: nodes, devices, claims, intents, audit and utilisation, each a
//! ledger read view run on the blocking pool and mapped to [`super::types`]. No token needed.

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::{Extension, Json};
use dra_allocator::ledger::{AdminAccessQuery, AllocationQuery, Ledger};
use serde::Deserialize;
use utoipa::IntoParams;

use super::paging::Cursor;
use super::types::{
    AuditItem, AuditPage, ClaimDetailView, ClaimItem, ClaimList, DeviceItem, DeviceList,
    IntentList, NodeList, UtilisationView,
};
use crate::error_response::{ErrorBody, ErrorResponse};
use crate::forward::serving::LedgerTerm;
use crate::state::AppState;

/// Default page size of `/v1/claims` and `/v1/audit`.
pub const DEFAULT_LIMIT: usize = 100;
/// Largest page size accepted.
pub const MAX_LIMIT: usize = 1000;

/// Maps a query string that does not parse to a JSON 400.
pub(crate) fn query<T>(parsed: Result<Query<T>, QueryRejection>) -> Result<T, ErrorResponse> {
    parsed
        .map(|Query(q)| q)
        .map_err(|rejection| ErrorResponse::BadRequest(rejection.body_text()))
}

/// Maps path segments that do not decode to a JSON 400.
pub(crate) fn segments<T>(parsed: Result<Path<T>, PathRejection>) -> Result<T, ErrorResponse> {
    parsed
        .map(|Path(p)| p)
        .map_err(|rejection| ErrorResponse::BadRequest(rejection.body_text()))
}

fn page_limit(limit: Option<usize>) -> Result<usize, ErrorResponse> {
    match limit {
        None => Ok(DEFAULT_LIMIT),
        Some(n @ 1..=MAX_LIMIT) => Ok(n),
        Some(n) => Err(ErrorResponse::BadRequest(format!(
            "limit must be between 1 and {MAX_LIMIT}, got {n}"
        ))),
    }
}

/// Per node: devices total, free, allocated, shared, cordoned and missing, the admin-access
/// claims on its devices, its unhealthy devices, and its capacity where it has partitions or
/// shared devices.
#[utoipa::path(get, path = "/v1/nodes", tag = "ledger",
    responses(
        (status = 200, description = "Nodes by name", body = NodeList),
        (status = 503, description = "Ledger not open, or a standby that cannot forward to the leader (codes `leader_unreachable`, `no_leader`, `not_leader`)", body = ErrorBody),
    ))]
pub async fn list_nodes(State(state): State<AppState>) -> Result<Json<NodeList>, ErrorResponse> {
    let nodes = state.ledger_call(Ledger::nodes).await?;
    Ok(Json(
        NodeList::from(nodes).with_capacity(&state.capacity().view()),
    ))
}

/// The devices of a node with their attributes, state, health, consumer claims and the
/// admin-access claims looking at them.
#[utoipa::path(get, path = "/v1/nodes/{node}/devices", tag = "ledger",
    params(("node" = String, Path, description = "Node name")),
    responses(
        (status = 200, description = "Devices by name", body = DeviceList),
        (status = 404, description = "No devices of this node in the ledger", body = ErrorBody),
        (status = 503, description = "Ledger not open, or a standby that cannot forward to the leader (codes `leader_unreachable`, `no_leader`, `not_leader`)", body = ErrorBody),
    ))]
pub async fn node_devices(
    State(state): State<AppState>,
    node: Result<Path<String>, PathRejection>,
) -> Result<Json<DeviceList>, ErrorResponse> {
    let node = segments(node)?;
    let name = node.clone();
    let devices = state
        .ledger_call(move |ledger| ledger.node_devices(&name))
        .await?
        .ok_or_else(|| {
            ErrorResponse::UnknownObject(format!("node {node} has no devices in the ledger"))
        })?;
    let view = state.capacity().view();
    let capacity = view.nodes.get(&node);
    Ok(Json(DeviceList {
        items: devices
            .into_iter()
            .map(|d| DeviceItem::from(d).with_capacity(capacity))
            .collect(),
        node,
    }))
}

/// Query of `GET /v1/claims`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ClaimsQuery {
    /// Only claims of this namespace.
    namespace: Option<String>,
    /// Only allocations on this node.
    node: Option<String>,
    /// Page size, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<usize>,
    /// An opaque token: the `continue` value of the previous page's answer, passed unchanged
    /// with the same `namespace` and `node` to get the next page. Only tokens the server issued
    /// continue a listing: any other value, even one this schema allows, answers 400; a token
    /// issued by another leader's ledger (the listing began before a takeover) answers 410, and
    /// the listing must start again without `continue`.
    #[serde(rename = "continue")]
    #[param(
        rename = "continue",
        pattern = "^([0-9a-fA-F]{2})*$",
        max_length = 8192
    )]
    continue_token: Option<String>,
}

/// The ledger's allocations by claim UID, optionally filtered, one page at a time; the
/// admin-access claims matching the filters come apart, with the first page.
#[utoipa::path(get, path = "/v1/claims", tag = "ledger",
    params(ClaimsQuery),
    responses(
        (status = 200, description = "A page of allocations", body = ClaimList),
        (status = 400, description = "Bad limit, or a `continue` that is not a token of a previous page of this listing", body = ErrorBody),
        (status = 410, description = "The `continue` token was issued by another leader's ledger (code `expired`): list again without it", body = ErrorBody),
        (status = 503, description = "Ledger not open, or a standby that cannot forward to the leader (codes `leader_unreachable`, `no_leader`, `not_leader`)", body = ErrorBody),
    ))]
pub async fn list_claims(
    State(state): State<AppState>,
    Extension(ledger): Extension<LedgerTerm>,
    parsed: Result<Query<ClaimsQuery>, QueryRejection>,
) -> Result<Json<ClaimList>, ErrorResponse> {
    let q = query(parsed)?;
    let namespace = q.namespace.filter(|s| !s.is_empty());
    let node = q.node.filter(|s| !s.is_empty());
    let after = match q.continue_token.as_deref().filter(|s| !s.is_empty()) {
        Some(token) => Some(Cursor::decode(
            token,
            namespace.as_deref(),
            node.as_deref(),
            &ledger,
        )?),
        None => None,
    };
    let first_page = after.is_none();
    let request = AllocationQuery {
        after,
        limit: page_limit(q.limit)?,
        namespace: namespace.clone(),
        node: node.clone(),
    };
    let admin_query = AdminAccessQuery {
        namespace: namespace.clone(),
        node: node.clone(),
    };
    let (page, admin_access, unhealthy) = state
        .ledger_call(move |ledger| {
            let page = ledger.allocations(&request)?;
            let admin_access = if first_page {
                ledger.admin_accesses(&admin_query)?
            } else {
                Vec::new()
            };
            Ok((page, admin_access, ledger.unhealthy_devices()?))
        })
        .await?;
    Ok(Json(ClaimList {
        items: page
            .items
            .into_iter()
            .map(|a| ClaimItem::with_health(a, &unhealthy))
            .collect(),
        admin_access: admin_access.into_iter().map(Into::into).collect(),
        continue_token: page
            .next
            .map(|after| Cursor::new(after, namespace, node, &ledger).encode()),
    }))
}

/// A claim's allocation and its intent history, or its admin access.
#[utoipa::path(get, path = "/v1/claims/{uid}", tag = "ledger",
    params(("uid" = String, Path, description = "Claim UID")),
    responses(
        (status = 200, description = "The claim", body = ClaimDetailView),
        (status = 404, description = "The ledger never saw this claim", body = ErrorBody),
        (status = 503, description = "Ledger not open, or a standby that cannot forward to the leader (codes `leader_unreachable`, `no_leader`, `not_leader`)", body = ErrorBody),
    ))]
pub async fn get_claim(
    State(state): State<AppState>,
    uid: Result<Path<String>, PathRejection>,
) -> Result<Json<ClaimDetailView>, ErrorResponse> {
    let uid = segments(uid)?;
    let key = uid.clone();
    let (detail, admin_access, unhealthy) = state
        .ledger_call(move |ledger| {
            Ok((
                ledger.claim(&key)?,
                ledger.admin_access(&key)?,
                ledger.unhealthy_devices()?,
            ))
        })
        .await?;
    let view = ClaimDetailView::new(uid.clone(), detail, admin_access, &unhealthy)
        .ok_or_else(|| ErrorResponse::UnknownObject(format!("claim {uid} is not in the ledger")))?;
    Ok(Json(view))
}

/// Allocations whose intent is durable but not yet confirmed in the cluster.
#[utoipa::path(get, path = "/v1/intents", tag = "ledger",
    responses(
        (status = 200, description = "Open intents by id", body = IntentList),
        (status = 503, description = "Ledger not open, or a standby that cannot forward to the leader (codes `leader_unreachable`, `no_leader`, `not_leader`)", body = ErrorBody),
    ))]
pub async fn list_intents(
    State(state): State<AppState>,
) -> Result<Json<IntentList>, ErrorResponse> {
    let intents = state.ledger_call(Ledger::pending_intents).await?;
    Ok(Json(IntentList {
        items: intents.into_iter().map(Into::into).collect(),
    }))
}

/// Query of `GET /v1/audit`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    /// Only entries with a sequence number above this (default 0: from the oldest kept); at
    /// most 2^63 - 1.
    #[param(minimum = 0, maximum = 9_223_372_036_854_775_807_i64)]
    since: Option<u64>,
    /// At most this many, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<usize>,
}

/// The audit log after a sequence number, oldest first.
#[utoipa::path(get, path = "/v1/audit", tag = "ledger",
    params(AuditQuery),
    responses(
        (status = 200, description = "Audit entries", body = AuditPage),
        (status = 400, description = "Bad since or limit", body = ErrorBody),
        (status = 503, description = "Ledger not open, or a standby that cannot forward to the leader (codes `leader_unreachable`, `no_leader`, `not_leader`)", body = ErrorBody),
    ))]
pub async fn audit(
    State(state): State<AppState>,
    parsed: Result<Query<AuditQuery>, QueryRejection>,
) -> Result<Json<AuditPage>, ErrorResponse> {
    let q = query(parsed)?;
    let since = q.since.unwrap_or(0);
    if i64::try_from(since).is_err() {
        return Err(ErrorResponse::BadRequest(format!(
            "since must be at most {}, got {since}",
            i64::MAX
        )));
    }
    let limit = page_limit(q.limit)?;
    let entries = state
        .ledger_call(move |ledger| ledger.audit_since(since, limit))
        .await?;
    let next_since = entries.last().map_or(since, |e| e.seq);
    Ok(Json(AuditPage {
        items: entries.into_iter().map(AuditItem::from).collect(),
        next_since,
    }))
}

/// Device totals and per attribute value, with claim and pending counts.
#[utoipa::path(get, path = "/v1/utilisation", tag = "ledger",
    responses(
        (status = 200, description = "Utilisation", body = UtilisationView),
        (status = 503, description = "Ledger not open, or a standby that cannot forward to the leader (codes `leader_unreachable`, `no_leader`, `not_leader`)", body = ErrorBody),
    ))]
pub async fn utilisation(
    State(state): State<AppState>,
) -> Result<Json<UtilisationView>, ErrorResponse> {
    let view = state.ledger_call(Ledger::utilisation).await?;
    Ok(Json(
        UtilisationView::from(view).with_capacity(&state.capacity().view()),
    ))
}
