//! One truth across replicas: every `/v1` request is answered from the leader's ledger. The
//! leader (or a process without leader election) answers from its own ledger; a standby
//! forwards the request to the leader (`proxy`) and passes its answer back, or answers 503
//! naming the leader when it cannot reach it, or when no replica holds the lease. A request that
//! another replica forwarded (it carries [`FORWARDED_BY`]) is never forwarded again: a replica
//! that is not the leader either answers 503 `not_leader`. `/healthz`, `/readyz` and
//! `/metrics` are always this process's own.
//!
//! Every answer names the replica that produced it in [`REPLICA`]; for `/v1` that is the
//! replica whose ledger answered (or, for the 503s above, the standby that could not forward).
//! A forwarded answer also names the standby it passed through in [`FORWARDED_BY`]. The ledger
//! that answers ([`LedgerTerm`]) is handed to the handlers as a request extension, for the
//! `continue` tokens.
//!
//! Where the leader is and whether this replica leads comes from the controller through
//! [`Leadership`]; this module knows neither the Lease nor the peers' addresses.

pub(crate) mod proxy;
pub(crate) mod serving;

use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tracing::{debug, warn};

use crate::error_response::ErrorResponse;
use crate::state::AppState;
use proxy::ForwardError;
pub use serving::{AddressError, Leadership, LedgerTerm, Serving, FORWARDED_BY, REPLICA};

/// Whether `path` is of the ledger API, answered from the leader's ledger.
fn is_ledger_path(path: &str) -> bool {
    path == "/v1" || path.starts_with("/v1/")
}

/// `value` as a header value; a name that cannot be one is left out.
fn header_value(value: &str) -> Option<HeaderValue> {
    HeaderValue::from_str(value).ok()
}

/// Sets `name: value` on `response` (when the value can be a header).
fn name_in(response: &mut Response, name: HeaderName, value: &str) {
    if let Some(value) = header_value(value) {
        response.headers_mut().insert(name, value);
    }
}

/// The middleware of [`crate::router()`]: answers locally, forwards, or refuses, as above.
pub(crate) async fn answer_from_leader(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let replica = state.replica().to_owned();
    if !is_ledger_path(request.uri().path()) {
        let mut response = next.run(request).await;
        name_in(&mut response, REPLICA, &replica);
        return response;
    }
    let forwarded_by = request
        .headers()
        .get(FORWARDED_BY)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let serving = state
        .leadership()
        .map_or(Serving::Local { term: 0 }, |leadership| {
            leadership.serving()
        });
    let refusal = match serving {
        Serving::Local { term } => {
            request.extensions_mut().insert(LedgerTerm {
                replica: replica.clone(),
                term,
            });
            let mut response = next.run(request).await;
            name_in(&mut response, REPLICA, &replica);
            return response;
        }
        Serving::Leader { identity, .. } if forwarded_by.is_some() => ErrorResponse::NotLeader {
            replica: replica.clone(),
            leader: Some(identity),
            forwarded_by: forwarded_by.unwrap_or_default(),
        },
        Serving::Leader { identity, url } => {
            match forward(&state, request, &replica, &identity, url).await {
                Ok(response) => return response,
                Err(refusal) => refusal,
            }
        }
        Serving::NoLeader | Serving::Lost if forwarded_by.is_some() => ErrorResponse::NotLeader {
            replica: replica.clone(),
            leader: None,
            forwarded_by: forwarded_by.unwrap_or_default(),
        },
        Serving::NoLeader => ErrorResponse::NoLeader {
            replica: replica.clone(),
            why: "no replica holds the leader lease",
        },
        Serving::Lost => ErrorResponse::NoLeader {
            replica: replica.clone(),
            why: "this replica lost the leader lease and is stopping",
        },
    };
    let mut response = refusal.into_response();
    name_in(&mut response, REPLICA, &replica);
    response
}

/// Forwards `request` to the leader `identity` at `url`: its answer, marked as passed through
/// `replica`, or the 503 (or the 4xx of a refused body) to answer instead.
async fn forward(
    state: &AppState,
    request: Request,
    replica: &str,
    identity: &str,
    url: Result<Uri, AddressError>,
) -> Result<Response, ErrorResponse> {
    let unreachable = |at: Option<String>, cause: String| {
        warn!(leader = %identity, at = at.as_deref().unwrap_or("-"), %cause, "Cannot forward an admin request to the leader");
        ErrorResponse::LeaderUnreachable {
            replica: replica.to_owned(),
            leader: identity.to_owned(),
            at,
            cause,
        }
    };
    let url = url.map_err(|why| unreachable(None, why.to_string()))?;
    let via = header_value(replica).ok_or_else(|| {
        unreachable(
            Some(url.to_string()),
            "this replica's name cannot be sent in a header".to_owned(),
        )
    })?;
    let limit = state.time_limit_of(request.uri().path());
    debug!(leader = %identity, path = %request.uri().path(), "Forwarding an admin request to the leader");
    match state.forwarder().forward(request, &url, &via, limit).await {
        Ok(mut response) => {
            response.headers_mut().insert(FORWARDED_BY, via);
            Ok(response)
        }
        Err(ForwardError::Request(refused)) => Err(refused),
        Err(ForwardError::Unreachable(cause)) => Err(unreachable(Some(url.to_string()), cause)),
    }
}
