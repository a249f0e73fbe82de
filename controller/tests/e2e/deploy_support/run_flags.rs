//! The flags of a `dra-ledger run` or `dra-ledger node` command line, as the built binary reads
//! them.
//!
//! The command line is part of the binary, not of the library, so the binary itself checks the
//! arguments: `dra-ledger <args> --help` exits 0 only when every argument before `--help` is a
//! flag of the subcommand with a valid value (a bad one is a usage error, exit 2), and prints
//! the subcommand's help with the defaults. The values are then read from the arguments, or
//! from the `[default: ...]` lines of that help.

use std::collections::BTreeMap;
use std::process::Command;

/// The flags of one accepted command line.
#[derive(Debug)]
pub struct RunFlags {
    given: BTreeMap<String, String>,
    defaults: BTreeMap<String, String>,
}

/// Runs `dra-ledger <args> --help`; the exit code and the output.
pub fn help_of(args: &[String]) -> (Option<i32>, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_dra-ledger"))
        .args(args)
        .arg("--help")
        .output()
        .expect("dra-ledger runs");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

impl RunFlags {
    /// The flags of `args` (`run` or `node` and its flags); panics unless they are such a
    /// command line that `dra-ledger` accepts.
    pub fn of(args: &[String]) -> Self {
        assert!(
            matches!(args.first().map(String::as_str), Some("run" | "node")),
            "not a `dra-ledger run` or `dra-ledger node` command line: {args:?}"
        );
        let (code, help, stderr) = help_of(args);
        assert_eq!(code, Some(0), "dra-ledger refuses {args:?}:\n{stderr}");
        Self {
            given: given(args),
            defaults: defaults(&help),
        }
    }

    /// The value `args` gave `--<flag>`, if any.
    pub fn given(&self, flag: &str) -> Option<&str> {
        self.given.get(flag).map(String::as_str)
    }

    /// The value of `--<flag>`: given, else its default; panics when it has neither.
    pub fn value(&self, flag: &str) -> &str {
        self.given(flag)
            .or_else(|| self.defaults.get(flag).map(String::as_str))
            .unwrap_or_else(|| panic!("--{flag} is neither given nor defaulted"))
    }

    /// The value of `--<flag>` as a `T`; panics when it is not one.
    pub fn parsed<T>(&self, flag: &str) -> T
    where
        T: std::str::FromStr,
        T::Err: std::fmt::Display,
    {
        let value = self.value(flag);
        value
            .parse()
            .unwrap_or_else(|e| panic!("--{flag}={value}: {e}"))
    }
}

/// `--flag=value` and `--flag value` of `args`.
fn given(args: &[String]) -> BTreeMap<String, String> {
    let mut flags = BTreeMap::new();
    let mut rest = args.iter().peekable();
    while let Some(arg) = rest.next() {
        let Some(flag) = arg.strip_prefix("--") else {
            continue;
        };
        if let Some((name, value)) = flag.split_once('=') {
            flags.insert(name.to_owned(), value.to_owned());
        } else if let Some(value) = rest.next_if(|next| !next.starts_with("--")) {
            flags.insert(flag.to_owned(), value.clone());
        }
    }
    flags
}

/// The `[default: ...]` line under each `--flag` of a help text.
fn defaults(help: &str) -> BTreeMap<String, String> {
    let mut defaults = BTreeMap::new();
    let mut flag = None;
    for line in help.lines().map(str::trim) {
        let long = line.strip_prefix("--").or_else(|| {
            line.strip_prefix('-')
                .and_then(|short| short.split_once(", --"))
                .map(|(_, long)| long)
        });
        if let Some(named) = long {
            flag = named.split([' ', '=']).next().map(str::to_owned);
        } else if let Some(value) = line
            .strip_prefix("[default: ")
            .and_then(|v| v.strip_suffix(']'))
        {
            if let Some(flag) = &flag {
                defaults.insert(flag.clone(), value.to_owned());
            }
        }
    }
    defaults
}
