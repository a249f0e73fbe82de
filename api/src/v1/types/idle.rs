//! The JSON shape of `GET /v1/idle`: allocated claims no consumer has used for longer than
//! `for`, mapped from `dra_allocator::idle` joined with the ledger's allocations.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One allocated claim that no consumer uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IdleClaimView {
    /// The claim's UID.
    pub uid: String,
    /// The claim's namespace.
    pub namespace: String,
    /// The claim's name.
    pub name: String,
    /// The node holding its devices.
    pub node: String,
    /// The devices it holds on the node.
    pub devices: Vec<String>,
    /// Since when no consumer has used it (RFC 3339): the time the running replica first saw
    /// it allocated with `status.reservedFor` empty (at the earliest, when that replica started).
    pub idle_since: String,
    /// Whole seconds from `idleSince` to the answer.
    pub idle_seconds: u64,
}

/// `GET /v1/idle`: the idle allocated claims, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct IdleView {
    /// The threshold asked for, in whole seconds: a claim is listed once idle for longer.
    #[serde(rename = "forSeconds")]
    pub for_seconds: u64,
    /// The idle claims, longest idle first.
    pub items: Vec<IdleClaimView>,
}
