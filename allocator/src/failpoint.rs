//! Failpoints: named places in the code where a crash test can freeze the process, so that a
//! SIGKILL lands exactly there.
//!
//! [`hit`] is an empty inline function unless the crate feature `failpoints` is on. With it on,
//! the environment variable `DRA_LEDGER_FAILPOINTS` (read once, at the first hit) arms points:
//! `name@N[,name@N...]` pauses the Nth hit of `name` (counted from 1 per process). At an armed
//! hit the calling thread prints one line `FAILPOINT <name> pid=<pid>` to stderr, flushes it and
//! then blocks forever; other threads go on. Nothing else is ever done at a failpoint: the test
//! that armed it kills the process.
//!
//! The feature is switched on only explicitly, through the `failpoints` feature of
//! `dra-controller` that its chaos tests require (`cargo test --features failpoints`); other
//! builds do not carry the points. Depends on nothing but `std` (and `thiserror` for
//! [`SpecError`]).

/// Marks failpoint `name`. Does nothing unless the `failpoints` feature is on and the point is
/// armed through `DRA_LEDGER_FAILPOINTS`.
#[cfg(not(feature = "failpoints"))]
#[inline]
pub fn hit(name: &'static str) {
    let _ = name;
}

/// Marks failpoint `name`: pauses the calling thread forever at its armed hit (see the module
/// doc).
#[cfg(feature = "failpoints")]
pub fn hit(name: &'static str) {
    armed::hit(name);
}

/// The environment variable that arms failpoints.
pub const ENV: &str = "DRA_LEDGER_FAILPOINTS";

/// Why an entry of a failpoint spec was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// The entry has no `@`.
    #[error("failpoint {entry:?} has no @N")]
    NoHitNumber {
        /// The entry as written.
        entry: String,
    },
    /// What follows `@` is not a number.
    #[error("failpoint {entry:?}: {count:?} is not a hit number")]
    HitNumber {
        /// The entry as written.
        entry: String,
        /// What follows `@`.
        count: String,
        /// Why it is not a number.
        source: std::num::ParseIntError,
    },
    /// The name is empty or the hit number is 0.
    #[error("failpoint {entry:?} needs a name and a hit number from 1")]
    Incomplete {
        /// The entry as written.
        entry: String,
    },
}

/// Parses a failpoint spec `name@N[,name@N...]` (whitespace around entries is ignored; an empty
/// spec arms nothing). `N` counts hits from 1.
pub fn parse_spec(spec: &str) -> Result<Vec<(String, u64)>, SpecError> {
    spec.split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(|entry| {
            let (name, count) = entry
                .split_once('@')
                .ok_or_else(|| SpecError::NoHitNumber {
                    entry: entry.to_owned(),
                })?;
            let count: u64 = count.parse().map_err(|source| SpecError::HitNumber {
                entry: entry.to_owned(),
                count: count.to_owned(),
                source,
            })?;
            if name.is_empty() || count == 0 {
                return Err(SpecError::Incomplete {
                    entry: entry.to_owned(),
                });
            }
            Ok((name.to_owned(), count))
        })
        .collect()
}

#[cfg(feature = "failpoints")]
mod armed {
    use std::collections::HashMap;
    use std::io::Write;
    use std::sync::{Mutex, OnceLock};

    /// Armed points with the hit number that pauses, and the hits counted so far.
    struct Points {
        armed: HashMap<String, u64>,
        hits: Mutex<HashMap<&'static str, u64>>,
    }

    fn points() -> &'static Points {
        static POINTS: OnceLock<Points> = OnceLock::new();
        POINTS.get_or_init(|| {
            let spec = std::env::var(super::ENV).unwrap_or_default();
            let armed = super::parse_spec(&spec).unwrap_or_else(|error| {
                eprintln!("FAILPOINT spec ignored: {error}");
                Vec::new()
            });
            Points {
                armed: armed.into_iter().collect(),
                hits: Mutex::new(HashMap::new()),
            }
        })
    }

    pub(super) fn hit(name: &'static str) {
        let points = points();
        let Some(&at) = points.armed.get(name) else {
            return;
        };
        let count = {
            let mut hits = points
                .hits
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let count = hits.entry(name).or_insert(0);
            *count += 1;
            *count
        };
        if count != at {
            return;
        }
        let mut stderr = std::io::stderr().lock();
        let _ = writeln!(stderr, "FAILPOINT {name} pid={}", std::process::id());
        let _ = stderr.flush();
        drop(stderr);
        loop {
            std::thread::park();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_spec;

    #[test]
    fn spec_lists_points_with_their_hit_numbers() {
        assert_eq!(
            parse_spec("after_intent_commit@3, group_commit@1").unwrap(),
            [
                ("after_intent_commit".to_owned(), 3),
                ("group_commit".to_owned(), 1)
            ]
        );
        assert!(parse_spec("").unwrap().is_empty());
    }

    #[test]
    fn spec_without_a_hit_number_from_one_is_refused() {
        for (bad, message) in [
            ("group_commit", r#"failpoint "group_commit" has no @N"#),
            (
                "group_commit@0",
                r#"failpoint "group_commit@0" needs a name and a hit number from 1"#,
            ),
            (
                "group_commit@x",
                r#"failpoint "group_commit@x": "x" is not a hit number"#,
            ),
            (
                "@2",
                r#"failpoint "@2" needs a name and a hit number from 1"#,
            ),
        ] {
            assert_eq!(parse_spec(bad).unwrap_err().to_string(), message, "{bad}");
        }
    }
}
