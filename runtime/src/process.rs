//! Process lifetime shared by every command that runs until it is told to stop (`dra-ledger run`,
//! `node`, `demo`, `sim` and `dra-sim`): the signal wait, the shutdown grace, and the grammar of the
//! duration flags.
//!
//! Owns no controller logic; must not depend on anything but tokio and humantime.

use std::time::Duration;

/// How long a process waits for its in-flight work to finish after a stop signal before it gives
/// up (the `StatefulSet`'s termination grace period is longer).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

/// Starts watching for Ctrl-C and, on Unix, SIGTERM, and returns a future that completes at the
/// first of them. Both are watched from the moment of the call, not from the first poll: a
/// process calls this before it says it is ready, so that a stop signal sent as soon as it is
/// ready is never met by the default action, which would end it without cleanup.
pub fn watch_for_signal() -> std::io::Result<impl std::future::Future<Output = ()> + Send + 'static>
{
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        let mut interrupt = signal(SignalKind::interrupt())?;
        Ok(async move {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = term.recv() => {}
            }
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async {
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }
}

/// A duration flag that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("{text:?} is not a duration such as 500ms, 90s, 5m or 1h30m")]
pub struct DurationError {
    text: String,
    #[source]
    source: humantime::DurationError,
}

/// Parses a duration flag: `humantime`'s grammar (`500ms`, `90s`, `5m`, `1h30m`, `2h 5min`), or a
/// bare number of seconds (`90`). Every duration flag of every command uses this parser.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    humantime::parse_duration(text).map_err(|source| DurationError {
        text: text.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_with_units_add_up() {
        let cases = [
            ("90", 90_000),
            ("90s", 90_000),
            ("5m", 300_000),
            ("1h", 3_600_000),
            ("1h30m", 5_400_000),
            ("250ms", 250),
            ("500ms", 500),
            ("2m5s", 125_000),
            (" 2s ", 2_000),
        ];
        for (text, millis) in cases {
            assert_eq!(
                parse_duration(text).unwrap(),
                Duration::from_millis(millis),
                "{text}"
            );
        }
    }

    #[test]
    fn malformed_durations_are_rejected_naming_the_text() {
        for text in ["", "soon", "m5", "5x", "-1s"] {
            let error = parse_duration(text).unwrap_err();
            assert!(
                error.to_string().contains(&format!("{:?}", text.trim())),
                "{error}"
            );
            assert!(std::error::Error::source(&error).is_some(), "{text}");
        }
    }
}
