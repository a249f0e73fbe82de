//! The admin server's limits: the largest request body, and the time a request may take
//! (longer for the backup, which streams a whole copy of the ledger).
//!
//! Plain values; must not depend on anything else of the crate.

use std::time::Duration;

/// Largest accepted request body in bytes (64 KiB).
pub const BODY_LIMIT: usize = 64 * 1024;
/// Default time limit of a request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Time limit of `GET /v1/backup` until the copy starts streaming.
pub const BACKUP_TIMEOUT: Duration = Duration::from_secs(600);

/// The time limit of a request for `path` when other requests get `request_timeout`.
pub(crate) fn time_limit_of(path: &str, request_timeout: Duration) -> Duration {
    if path == "/v1/backup" {
        BACKUP_TIMEOUT.max(request_timeout)
    } else {
        request_timeout
    }
}
