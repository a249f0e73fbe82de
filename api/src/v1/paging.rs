//! The opaque `continue` token of `GET /v1/claims`: the last claim UID of a page, the filters it
//! was made for and the ledger it was read from (the replica and its leadership term), as hex of
//! a small JSON object. A token that does not decode, or that was made for other filters, is a
//! 400; one read from another ledger (before a takeover, or by an older release) is a 410, as
//! Kubernetes answers an expired `continue`: its next page would come from a ledger that did not
//! serve the pages before it. Depends on nothing else of the crate but the error answer.

use serde::{Deserialize, Serialize};

use crate::error_response::ErrorResponse;
use crate::forward::serving::LedgerTerm;

/// What a continue token carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    /// Format version of the token.
    v: u8,
    /// The last UID of the previous page.
    after: String,
    /// The namespace filter of the listing.
    namespace: Option<String>,
    /// The node filter of the listing.
    node: Option<String>,
    /// The replica whose ledger answered the previous page (absent in version 1 tokens).
    #[serde(default)]
    replica: String,
    /// Its leadership term (absent in version 1 tokens).
    #[serde(default)]
    term: u64,
}

/// The version of the tokens made now; version 1 tokens (without the ledger) are expired.
const VERSION: u8 = 2;
const HEX: &[u8; 16] = b"0123456789abcdef";

impl Cursor {
    /// The cursor after `after` in the listing with these filters, read from `ledger`.
    pub fn new(
        after: String,
        namespace: Option<String>,
        node: Option<String>,
        ledger: &LedgerTerm,
    ) -> Self {
        Cursor {
            v: VERSION,
            after,
            namespace,
            node,
            replica: ledger.replica.clone(),
            term: ledger.term,
        }
    }

    /// The token text.
    pub fn encode(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        json.iter()
            .fold(String::with_capacity(json.len() * 2), |mut text, b| {
                text.push(char::from(HEX[usize::from(b >> 4)]));
                text.push(char::from(HEX[usize::from(b & 0xf)]));
                text
            })
    }

    /// The UID to continue after, when `token` was made for this listing's filters by the
    /// ledger that answers now (`ledger`).
    pub fn decode(
        token: &str,
        namespace: Option<&str>,
        node: Option<&str>,
        ledger: &LedgerTerm,
    ) -> Result<String, ErrorResponse> {
        let invalid = || {
            ErrorResponse::BadRequest(
                "invalid continue token: pass the `continue` value of the previous page".to_owned(),
            )
        };
        if !token.len().is_multiple_of(2) || token.len() > 8192 {
            return Err(invalid());
        }
        let bytes = (0..token.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(token.get(i..i + 2)?, 16).ok())
            .collect::<Option<Vec<u8>>>()
            .ok_or_else(invalid)?;
        let cursor: Cursor = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
        if cursor.v == 1 {
            return Err(ErrorResponse::ContinueExpired(
                "continue token was issued by an older release, which did not name its ledger: \
                 list again without continue"
                    .to_owned(),
            ));
        }
        if cursor.v != VERSION {
            return Err(invalid());
        }
        if cursor.namespace.as_deref() != namespace || cursor.node.as_deref() != node {
            return Err(ErrorResponse::BadRequest(
                "continue token was issued for other namespace or node filters".to_owned(),
            ));
        }
        if cursor.replica != ledger.replica || cursor.term != ledger.term {
            return Err(ErrorResponse::ContinueExpired(format!(
                "continue token was issued by the ledger of {} (leader term {}), but the ledger \
                 of {} (leader term {}) answers now: its next page would not continue the same \
                 listing; list again without continue",
                cursor.replica, cursor.term, ledger.replica, ledger.term
            )));
        }
        Ok(cursor.after)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger(replica: &str, term: u64) -> LedgerTerm {
        LedgerTerm {
            replica: replica.to_owned(),
            term,
        }
    }

    #[test]
    fn token_round_trips_for_the_same_filters_only() {
        let a = ledger("replica-a", 3);
        let token = Cursor::new("uid-7".into(), Some("team-a".into()), None, &a).encode();
        assert_eq!(
            Cursor::decode(&token, Some("team-a"), None, &a).unwrap(),
            "uid-7"
        );
        assert!(Cursor::decode(&token, None, None, &a).is_err());
        assert!(Cursor::decode(&token, Some("team-a"), Some("n1"), &a).is_err());
    }

    #[test]
    fn token_of_another_ledger_or_term_is_expired_naming_both() {
        let a = ledger("replica-a", 3);
        let token = Cursor::new("uid-7".into(), None, None, &a).encode();
        for now in [ledger("replica-b", 4), ledger("replica-a", 5)] {
            let error = Cursor::decode(&token, None, None, &now).unwrap_err();
            assert_eq!(error.status(), 410);
            assert_eq!(error.code(), "expired");
            let message = error.to_string();
            assert!(
                message.contains("replica-a (leader term 3)")
                    && message.contains(&format!("{} (leader term {})", now.replica, now.term))
                    && message.contains("without continue"),
                "{message}"
            );
        }
    }

    #[test]
    fn version_1_tokens_are_expired() {
        let v1 = br#"{"v":1,"after":"uid-7","namespace":null,"node":null}"#;
        let token: String = v1
            .iter()
            .flat_map(|b| [HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]])
            .map(char::from)
            .collect();
        let error = Cursor::decode(&token, None, None, &ledger("a", 0)).unwrap_err();
        assert_eq!(error.code(), "expired", "{error}");
    }

    #[test]
    fn garbage_tokens_are_bad_requests() {
        for token in ["", "abc", "zz", "7b7d", "not-a-token-é"] {
            let error = Cursor::decode(token, None, None, &ledger("a", 0)).unwrap_err();
            assert_eq!(error.code(), "bad_request", "{token}");
        }
    }
}
