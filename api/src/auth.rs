//! Bearer-token authorisation of the mutating endpoints and `/v1/backup`.
//!
//! The token comes from the file given with `--admin-token-file` (surrounding whitespace
//! trimmed). A request is let through only with `Authorization: Bearer <token>`; the comparison
//! takes the same time wherever the first differing byte is. Without a configured token those
//! endpoints answer 403. The token is never logged, and `Debug` does not show it. Depends on
//! nothing of the workspace.

use std::path::Path;
use std::sync::Arc;

use axum::extract::{FromRef, FromRequestParts};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;

use crate::error_response::ErrorResponse;

/// The admin bearer token. Clones share it.
#[derive(Clone)]
pub struct AdminToken {
    secret: Arc<[u8]>,
}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(<redacted>)")
    }
}

impl AdminToken {
    /// A token from its text, surrounding whitespace trimmed; `None` when nothing is left.
    pub fn new(token: &str) -> Option<Self> {
        let token = token.trim();
        (!token.is_empty()).then(|| AdminToken {
            secret: Arc::from(token.as_bytes()),
        })
    }

    /// Reads the token from `path`.
    pub fn from_file(path: &Path) -> crate::Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|error| crate::Error::TokenFile {
            path: path.to_path_buf(),
            reason: error.to_string(),
        })?;
        AdminToken::new(&text).ok_or_else(|| crate::Error::TokenFile {
            path: path.to_path_buf(),
            reason: "the file is empty".to_owned(),
        })
    }

    /// Whether `presented` is the token, in time independent of where they differ.
    pub fn matches(&self, presented: &[u8]) -> bool {
        constant_time_eq(&self.secret, presented)
    }
}

/// Compares two byte strings looking at every byte of the longer one, so the time taken does
/// not tell how long a matching prefix is.
fn constant_time_eq(expected: &[u8], presented: &[u8]) -> bool {
    let mut difference = u64::from(expected.len() != presented.len());
    for i in 0..expected.len().max(presented.len()) {
        let a = expected.get(i).copied().unwrap_or(0);
        let b = presented.get(i).copied().unwrap_or(0);
        difference |= u64::from(a ^ b);
    }
    std::hint::black_box(difference) == 0
}

/// Proof that the request carried the admin token; taking it as a handler argument protects the
/// handler. Checked against the token of the server's state (none configured: 403).
#[derive(Debug, Clone, Copy)]
pub struct Authorized;

impl<S> FromRequestParts<S> for Authorized
where
    S: Send + Sync,
    Option<AdminToken>: FromRef<S>,
{
    type Rejection = ErrorResponse;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ErrorResponse> {
        let Some(token) = Option::<AdminToken>::from_ref(state) else {
            return Err(ErrorResponse::Forbidden);
        };
        let Some(header) = parts.headers.get(AUTHORIZATION) else {
            return Err(ErrorResponse::Unauthorized("missing bearer token"));
        };
        let presented =
            header
                .as_bytes()
                .strip_prefix(b"Bearer ")
                .ok_or(ErrorResponse::Unauthorized(
                    "authorization header is not a bearer token",
                ))?;
        if token.matches(presented) {
            Ok(Authorized)
        } else {
            Err(ErrorResponse::Unauthorized("invalid bearer token"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_token_matches() {
        let token = AdminToken::new("  s3cret\n").unwrap();
        assert!(token.matches(b"s3cret"));
        for wrong in [
            &b""[..],
            b"s3cre",
            b"s3cret ",
            b"S3cret",
            b"s3cretx",
            b"x3cret",
        ] {
            assert!(!token.matches(wrong), "{wrong:?}");
        }
    }

    #[test]
    fn blank_token_text_is_no_token_and_debug_hides_it() {
        assert!(AdminToken::new(" \n\t").is_none());
        let token = AdminToken::new("hunter2").unwrap();
        assert!(!format!("{token:?}").contains("hunter2"));
    }
}
