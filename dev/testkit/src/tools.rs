//! Outside programs that some tests need (kubectl, prometheus, python, ...): found on `PATH`,
//! or the test is skipped with a `SKIPPED` line on a developer's machine and fails under CI,
//! where `.ci/run` installs every one of them.

use std::io::Write;
use std::path::PathBuf;

/// Whether the tests run under CI (`CI` set to anything but empty or `false`).
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| !value.is_empty() && value != "false")
}

/// The first `name` on `PATH`.
pub fn on_path(name: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
}

/// `name` on `PATH`; without it, `None` after printing why the calling test is skipped, or a
/// panic under CI. `install` says how to get it (`apt-get install -y prometheus`).
pub fn require_tool(name: &str, install: &str) -> Option<PathBuf> {
    let found = on_path(name);
    if found.is_none() {
        skip_or_fail(&format!("{name} is not on PATH ({install})"));
    }
    found
}

/// The `kubectl.1.N` binaries beside the target of the `kubectl` on `PATH` (the dispatcher that
/// runs the release nearest the server's), with their minor version, oldest first; empty where
/// there is no such `kubectl`.
pub fn kubectl_releases() -> Vec<(u32, PathBuf)> {
    let Some(dir) = on_path("kubectl")
        .and_then(|path| std::fs::canonicalize(path).ok())
        .and_then(|target| target.parent().map(PathBuf::from))
    else {
        return Vec::new();
    };
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|entry| {
                    let name = entry.file_name().into_string().ok()?;
                    let minor = name.strip_prefix("kubectl.1.")?.parse().ok()?;
                    Some((minor, entry.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

/// Skips the calling test with `why` (the caller returns), or fails it under CI.
pub fn skip_or_fail(why: &str) {
    assert!(!under_ci(), "required under CI: {why}");
    // Straight to stderr: the test harness captures eprintln! of passing tests.
    let _ = writeln!(std::io::stderr(), "\n*** SKIPPED: {why} ***\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_releases_are_versioned_binaries_in_order() {
        let releases = kubectl_releases();
        assert!(releases.windows(2).all(|w| w[0].0 < w[1].0), "{releases:?}");
        for (minor, path) in releases {
            assert!(path.is_file(), "{}", path.display());
            assert!(
                path.ends_with(format!("kubectl.1.{minor}")),
                "{}",
                path.display()
            );
        }
    }

    #[test]
    fn a_program_on_path_is_found_and_a_made_up_one_is_not() {
        assert!(on_path("sh").is_some());
        assert!(on_path("no-such-program-dra-ledger-testkit").is_none());
    }
}
