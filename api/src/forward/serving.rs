//! Who answers this replica's `/v1` requests: the [`Leadership`] the controller implements,
//! what it tells ([`Serving`]), the ledger that answers ([`LedgerTerm`]), and the headers that
//! name the replicas an answer came from or through.
//!
//! Plain values and one trait; must not depend on the rest of the crate.

use std::sync::Arc;

use axum::http::{HeaderName, Uri};

/// Names the replica that produced an answer: for `/v1`, the one whose ledger answered.
pub const REPLICA: HeaderName = HeaderName::from_static("dra-ledger-replica");
/// On a request: the standby that forwarded it (never forwarded again). On an answer: the
/// standby it passed through on its way from the leader.
pub const FORWARDED_BY: HeaderName = HeaderName::from_static("dra-ledger-forwarded-by");

/// The ledger that answers: the replica's name and its leadership term (0 without leader
/// election). A `continue` token is valid only with the ledger that made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerTerm {
    /// The replica's name (its Lease identity with leader election).
    pub replica: String,
    /// The leadership term: the Lease's transitions when this replica took it.
    pub term: u64,
}

/// Why the leader has no admin address this replica can forward to: the controller's error
/// (this crate knows neither the Lease nor the peers' addresses), shared so that a [`Serving`]
/// clones. Its text is the `cause` of the 503 `leader_unreachable`.
pub type AddressError = Arc<dyn std::error::Error + Send + Sync>;

/// Who answers this replica's `/v1` requests, now.
#[derive(Debug, Clone)]
pub enum Serving {
    /// This replica holds the lease: its own ledger answers, in leadership term `term`.
    Local {
        /// The leadership term.
        term: u64,
    },
    /// Another replica holds the lease.
    Leader {
        /// The leader's identity.
        identity: String,
        /// Its admin server (`http://host:port`), or why it has none.
        url: Result<Uri, AddressError>,
    },
    /// No replica holds the lease, as far as this one knows.
    NoLeader,
    /// This replica lost the lease and is stopping.
    Lost,
}

/// The controller's side: whether this replica leads, and where the leader is.
pub trait Leadership: Send + Sync {
    /// Who answers `/v1` requests now.
    fn serving(&self) -> Serving;
}
