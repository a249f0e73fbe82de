//! The opaque `continue` token of `GET /v1/claims`: the last claim UID of a page together with
//! the filters it was made for, as hex of a small JSON object. A token that does not decode, or
//! that was made for other filters, is a 400. Depends on nothing else of the crate.

use serde::{Deserialize, Serialize};

use crate::error_response::ErrorResponse;

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
}

const VERSION: u8 = 1;
const HEX: &[u8; 16] = b"0123456789abcdef";

impl Cursor {
    /// The cursor after `after` in the listing with these filters.
    pub fn new(after: String, namespace: Option<String>, node: Option<String>) -> Self {
        Cursor {
            v: VERSION,
            after,
            namespace,
            node,
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

    /// The UID to continue after, when `token` was made for this listing's filters.
    pub fn decode(
        token: &str,
        namespace: Option<&str>,
        node: Option<&str>,
    ) -> Result<String, ErrorResponse> {
        let invalid = || ErrorResponse::BadRequest("invalid continue token".to_owned());
        if !token.len().is_multiple_of(2) || token.len() > 8192 {
            return Err(invalid());
        }
        let bytes = (0..token.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(token.get(i..i + 2)?, 16).ok())
            .collect::<Option<Vec<u8>>>()
            .ok_or_else(invalid)?;
        let cursor: Cursor = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
        if cursor.v != VERSION {
            return Err(invalid());
        }
        if cursor.namespace.as_deref() != namespace || cursor.node.as_deref() != node {
            return Err(ErrorResponse::BadRequest(
                "continue token was issued for other namespace or node filters".to_owned(),
            ));
        }
        Ok(cursor.after)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_round_trips_for_the_same_filters_only() {
        let token = Cursor::new("uid-7".into(), Some("team-a".into()), None).encode();
        assert_eq!(
            Cursor::decode(&token, Some("team-a"), None).unwrap(),
            "uid-7"
        );
        assert!(Cursor::decode(&token, None, None).is_err());
        assert!(Cursor::decode(&token, Some("team-a"), Some("n1")).is_err());
    }

    #[test]
    fn garbage_tokens_are_bad_requests() {
        for token in ["", "abc", "zz", "7b7d", "not-a-token-é"] {
            let error = Cursor::decode(token, None, None).unwrap_err();
            assert_eq!(error.code(), "bad_request", "{token}");
        }
    }
}
