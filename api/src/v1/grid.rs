//! `GET /v1/devices?nodes=...`: the devices of a few named nodes in one answer, with the
//! namespace, name and start of every claim holding or looking at them. The device page asks
//! for the nodes it shows (a page of them) instead of one `/v1/nodes/{node}/devices` request per
//! node, so a refresh costs one summary request and one of these at any cluster size. No token
//! needed; one ledger read on the blocking pool.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::Json;
use dra_allocator::ledger::Ledger;
use serde::Deserialize;
use utoipa::IntoParams;

use super::read::query;
use super::types::{DeviceGrid, DeviceItem, DeviceList, HolderItem};
use crate::capacity::CapacityView;
use crate::error_response::{ErrorBody, ErrorResponse};
use crate::state::AppState;

/// Most nodes one `GET /v1/devices` names.
pub const MAX_GRID_NODES: usize = 100;

/// A node name as Kubernetes allows it (a DNS subdomain: lowercase letters, digits, `-` and
/// `.`, starting and ending with a letter or digit).
const NODE_NAME: &str = "[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?";

/// Query of `GET /v1/devices`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct GridQuery {
    /// Node names separated by commas, 1 to 100 of them (a name given twice counts once).
    #[param(
        pattern = "^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?(,[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?){0,99}$"
    )]
    nodes: String,
}

/// Whether `name` matches [`NODE_NAME`].
fn is_node_name(name: &str) -> bool {
    let edge = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let bytes = name.as_bytes();
    matches!(bytes.len(), 1..=253)
        && bytes.first().copied().is_some_and(edge)
        && bytes.last().copied().is_some_and(edge)
        && bytes.iter().all(|&c| edge(c) || c == b'-' || c == b'.')
}

/// The distinct node names of `nodes` (comma-separated), in the order given.
fn node_names(nodes: &str) -> Result<Vec<String>, ErrorResponse> {
    let mut names: Vec<String> = Vec::new();
    let mut given = 0;
    for name in nodes.split(',') {
        given += 1;
        if !is_node_name(name) {
            return Err(ErrorResponse::BadRequest(format!(
                "nodes must be node names separated by commas, matching {NODE_NAME}; got {name:?}"
            )));
        }
        if !names.iter().any(|n| n == name) {
            names.push(name.to_owned());
        }
    }
    if given > MAX_GRID_NODES {
        return Err(ErrorResponse::BadRequest(format!(
            "nodes must name at most {MAX_GRID_NODES} nodes, got {given}"
        )));
    }
    Ok(names)
}

/// The devices of the named nodes, each as `GET /v1/nodes/{node}/devices` answers it, and the
/// claims holding or looking at them.
#[utoipa::path(get, path = "/v1/devices", tag = "ledger",
    params(GridQuery),
    responses(
        (status = 200, description = "The devices of the named nodes and their claims", body = DeviceGrid),
        (status = 400, description = "No node named, a name that is not a node name, or more than 100", body = ErrorBody),
        (status = 503, description = "Ledger not open, or a standby that cannot forward to the leader (codes `leader_unreachable`, `no_leader`, `not_leader`)", body = ErrorBody),
    ))]
pub async fn devices_of_nodes(
    State(state): State<AppState>,
    parsed: Result<Query<GridQuery>, QueryRejection>,
) -> Result<Json<DeviceGrid>, ErrorResponse> {
    let names = node_names(&query(parsed)?.nodes)?;
    let view = state.capacity().view();
    let grid = state
        .ledger_call(move |ledger| read_grid(ledger, names, &view))
        .await?;
    Ok(Json(grid))
}

/// One read of the ledger for [`devices_of_nodes`].
fn read_grid(
    ledger: &Ledger,
    names: Vec<String>,
    capacity: &CapacityView,
) -> Result<DeviceGrid, dra_allocator::ledger::LedgerError> {
    let mut grid = DeviceGrid::default();
    for node in names {
        let Some(devices) = ledger.node_devices(&node)? else {
            grid.absent.push(node);
            continue;
        };
        let of_node = capacity.nodes.get(&node);
        let list = DeviceList {
            items: devices
                .into_iter()
                .map(|d| DeviceItem::from(d).with_capacity(of_node))
                .collect(),
            node,
        };
        for device in &list.items {
            let uids = device
                .consumers
                .iter()
                .map(|c| &c.claim_uid)
                .chain(&device.admin_access);
            for uid in uids {
                if !grid.holders.contains_key(uid) {
                    if let Some(holder) = holder(ledger, uid)? {
                        grid.holders.insert(uid.clone(), holder);
                    }
                }
            }
        }
        grid.items.push(list);
    }
    Ok(grid)
}

/// Who claim `uid` is: an allocation's claim, else an admin-access claim.
fn holder(
    ledger: &Ledger,
    uid: &str,
) -> Result<Option<HolderItem>, dra_allocator::ledger::LedgerError> {
    if let Some(allocation) = ledger.allocation(uid)? {
        return Ok(Some(HolderItem {
            namespace: allocation.claim.namespace,
            name: allocation.claim.name,
            since_ms: allocation.created_ms,
            admin_access: false,
        }));
    }
    Ok(ledger.admin_access(uid)?.map(|access| HolderItem {
        namespace: access.claim.namespace,
        name: access.claim.name,
        since_ms: access.recorded_ms,
        admin_access: true,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_are_split_and_deduplicated_in_order() {
        assert_eq!(
            node_names("b,a.example,b,c-1").unwrap(),
            vec!["b".to_owned(), "a.example".to_owned(), "c-1".to_owned()]
        );
    }

    #[test]
    fn no_node_a_bad_name_or_more_than_the_limit_is_a_bad_request() {
        for bad in ["", ",", "a,", " a", "A", "-a", "a-", "a_b", "a,,b"] {
            assert!(
                matches!(node_names(bad), Err(ErrorResponse::BadRequest(_))),
                "{bad:?}"
            );
        }
        assert!(node_names(&"a".repeat(254)).is_err());
        assert!(node_names(&"a".repeat(253)).is_ok());
        let many: Vec<String> = (0..=MAX_GRID_NODES).map(|i| format!("n{i}")).collect();
        let error = node_names(&many.join(",")).unwrap_err();
        assert!(
            matches!(&error, ErrorResponse::BadRequest(m) if m.contains("at most 100")),
            "{error:?}"
        );
        assert_eq!(node_names(&many[1..].join(",")).unwrap().len(), 100);
    }
}
