//! The one path of a kubelet call through the preparer, for prepare and unprepare and for every
//! protocol: a checked [`Batch`] goes to the [`ClaimPreparer`] on the blocking pool (it commits
//! to disk), every outcome (answered, no answer, did not finish) becomes the claim's entry of
//! the answer map ([`Batch::answer`]) and each claim's outcome is logged. The services only
//! convert their request messages to a batch and the answer map to their answer messages.
//!
//! Knows the prepare contract ([`crate::prepare`]) and the batch, never a protocol's messages.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use tracing::field;

use super::batch::{Batch, BatchClaim, Call, CallError};
use crate::prepare::{ClaimPreparer, PrepareError};

/// One claim's outcome of a call: what the call gives for it, or why it failed.
pub type Outcome<T> = Result<T, CallError>;

/// One blocking call of the preparer on the claims of a batch, e.g. `ClaimPreparer::prepare`.
pub type PreparerCall<P, C, R> = fn(&P, &[C]) -> Vec<(String, Result<R, PrepareError>)>;

/// Runs `work` of `preparer` on the claims of `batch` off the async runtime (not at all when
/// the checks left nothing for it), turns what it gave into each claim's outcome with `done`
/// and logs every claim's outcome: done at debug, failed at warn with its error. The map has
/// one entry per claim UID of the request.
pub async fn run<P, C, R, T>(
    preparer: &Arc<P>,
    batch: Batch<C>,
    work: PreparerCall<P, C, R>,
    done: impl Fn(&C, R) -> T,
) -> BTreeMap<String, Outcome<T>>
where
    P: ClaimPreparer,
    C: BatchClaim + Clone + Send + 'static,
    R: Send + 'static,
{
    let answers = if batch.is_empty() {
        Ok(Vec::new())
    } else {
        let preparer = Arc::clone(preparer);
        let claims = batch.requests.clone();
        tokio::task::spawn_blocking(move || work(&preparer, &claims))
            .await
            .map_err(|error| {
                tracing::error!(%error, "The preparer did not finish");
                Arc::new(error)
            })
    };
    let call = batch.call;
    let outcomes = batch.answer(answers, done);
    log_outcomes(call, &outcomes);
    outcomes
}

/// Logs each claim's outcome of `call`.
fn log_outcomes<T>(call: Call, outcomes: &BTreeMap<String, Outcome<T>>) {
    let call = call.as_str();
    for (uid, outcome) in outcomes {
        match outcome {
            Ok(_) => tracing::debug!(claim.uid = %uid, call, "Claim done"),
            Err(error) => tracing::warn!(claim.uid = %uid, call, %error, "Claim failed"),
        }
    }
}

/// The answer map as a protocol's answer message holds it, each outcome made its message by
/// `reply`.
pub fn replies<T, M>(
    outcomes: BTreeMap<String, Outcome<T>>,
    reply: impl Fn(Outcome<T>) -> M,
) -> HashMap<String, M> {
    outcomes
        .into_iter()
        .map(|(uid, outcome)| (uid, reply(outcome)))
        .collect()
}

/// What an answer message holds of an outcome: what the call gave (the default where it
/// failed) and the error text, empty for success, which is how the kubelet tells them apart.
pub fn message_parts<T: Default>(outcome: Outcome<T>) -> (T, String) {
    match outcome {
        Ok(given) => (given, String::new()),
        Err(error) => (T::default(), error.to_string()),
    }
}

/// The span of one call of a protocol: named after the call, with the protocol (`api`) where
/// more than one serves the call and the number of claims asked about.
pub fn span(call: Call, api: Option<&'static str>, claims: usize) -> tracing::Span {
    let span = match call {
        Call::Prepare => tracing::info_span!("prepare", api = field::Empty, claims),
        Call::Unprepare => tracing::info_span!("unprepare", api = field::Empty, claims),
    };
    if let Some(api) = api {
        span.record("api", api);
    }
    span
}

#[cfg(test)]
mod tests;
