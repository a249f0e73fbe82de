//! Validation of the request options each verb reads from the query: `dryRun`, `fieldManager`,
//! `fieldValidation` and `force` of writes, `resourceVersionMatch` and `sendInitialEvents` of lists
//! and watches. A violation answers the 422 `Invalid` Status of the options kind
//! (`CreateOptions.meta.k8s.io "" is invalid: ...`), as the API server's option validation does
//! (apimachinery `pkg/apis/meta/v1/validation` and `pkg/apis/meta/internalversion/validation`).
//!
//! Watches validate as with the `WatchList` feature enabled, since streaming lists are served.
//! No store access.

use super::Params;
use crate::server::error::{FieldCause, Result, StatusError};

/// The longest field manager name accepted.
const FIELD_MANAGER_MAX_LENGTH: usize = 128;

/// The options kind of a write verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WriteKind {
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH.
    Patch,
}

impl WriteKind {
    fn options_kind(self) -> &'static str {
        match self {
            Self::Create => "CreateOptions",
            Self::Update => "UpdateOptions",
            Self::Patch => "PatchOptions",
        }
    }
}

/// Checks the options of a create, update or patch.
pub(super) fn validate_write(kind: WriteKind, params: &Params) -> Result<()> {
    let mut causes = Vec::new();
    if kind == WriteKind::Patch && params.first("force").is_some() {
        causes.push(FieldCause::forbidden(
            "force",
            "may not be specified for non-apply patch",
        ));
    }
    field_manager(
        params.first("fieldManager").unwrap_or_default(),
        &mut causes,
    );
    dry_run(&params.all("dryRun"), &mut causes);
    let validation = params.first("fieldValidation").unwrap_or_default();
    if !matches!(validation, "" | "Ignore" | "Strict" | "Warn") {
        causes.push(FieldCause::not_supported(
            "fieldValidation",
            &format!("{validation:?}"),
            &["", "Ignore", "Strict", "Warn"],
        ));
    }
    finish(kind.options_kind(), causes)
}

/// Checks the options of a delete (from its body or query).
pub(super) fn validate_delete(
    orphan_dependents: Option<bool>,
    propagation: Option<&str>,
    dry_run_values: &[&str],
) -> Result<()> {
    let mut causes = Vec::new();
    if let (Some(_), Some(p)) = (orphan_dependents, propagation) {
        causes.push(FieldCause::invalid(
            "propagationPolicy",
            p,
            "orphanDependents and deletionPropagation cannot be both set",
        ));
    }
    if let Some(p) = propagation {
        if !matches!(p, "Foreground" | "Background" | "Orphan") {
            causes.push(FieldCause::not_supported(
                "propagationPolicy",
                &format!("{p:?}"),
                &["Foreground", "Background", "Orphan", "nil"],
            ));
        }
    }
    dry_run(dry_run_values, &mut causes);
    finish("DeleteOptions", causes)
}

/// Checks the options of a list (`watch` false) or a watch.
pub(super) fn validate_list(params: &Params, watch: bool) -> Result<()> {
    let mut causes = Vec::new();
    let rv_match = params.first("resourceVersionMatch").unwrap_or_default();
    let send_initial = params.optional_flag("sendInitialEvents");
    let has_continue = params.get("continue").is_some();
    let path = "resourceVersionMatch";
    if watch {
        if send_initial.is_some() && rv_match != "NotOlderThan" {
            causes.push(FieldCause::forbidden(
                path,
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        if !rv_match.is_empty() {
            if send_initial.is_none() {
                causes.push(FieldCause::forbidden(
                    path,
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                ));
            }
            if rv_match != "NotOlderThan" {
                causes.push(FieldCause::not_supported(
                    path,
                    &format!("{rv_match:?}"),
                    &["NotOlderThan"],
                ));
            }
            if has_continue {
                causes.push(FieldCause::forbidden(
                    path,
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
        }
        return finish("ListOptions", causes);
    }
    if !rv_match.is_empty() {
        let rv = params.first("resourceVersion").unwrap_or_default();
        if rv.is_empty() {
            causes.push(FieldCause::forbidden(
                path,
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if has_continue {
            causes.push(FieldCause::forbidden(
                path,
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        if !matches!(rv_match, "Exact" | "NotOlderThan") {
            causes.push(FieldCause::not_supported(
                path,
                &format!("{rv_match:?}"),
                &["Exact", "NotOlderThan", ""],
            ));
        }
        if rv_match == "Exact" && rv == "0" {
            causes.push(FieldCause::forbidden(
                path,
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
    }
    if send_initial.is_some() {
        causes.push(FieldCause::forbidden(
            "sendInitialEvents",
            "sendInitialEvents is forbidden for list",
        ));
    }
    finish("ListOptions", causes)
}

/// A field manager name is at most 128 bytes of printable characters.
fn field_manager(name: &str, causes: &mut Vec<FieldCause>) {
    if name.len() > FIELD_MANAGER_MAX_LENGTH {
        causes.push(FieldCause::too_long(
            "fieldManager",
            FIELD_MANAGER_MAX_LENGTH,
        ));
    }
    for (i, c) in name.char_indices() {
        if c.is_control() || (c.is_whitespace() && c != ' ') {
            causes.push(FieldCause::invalid(
                "fieldManager",
                name,
                &format!("invalid character U+{:04X} (at position {i})", u32::from(c)),
            ));
        }
    }
}

/// `All` is the only dry-run mode.
fn dry_run(values: &[&str], causes: &mut Vec<FieldCause>) {
    if values.iter().any(|v| *v != "All") {
        let quoted: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
        causes.push(FieldCause::not_supported(
            "dryRun",
            &format!("[]string{{{}}}", quoted.join(", ")),
            &["All"],
        ));
    }
}

fn finish(kind: &str, causes: Vec<FieldCause>) -> Result<()> {
    if causes.is_empty() {
        Ok(())
    } else {
        Err(StatusError::invalid(kind, "meta.k8s.io", "", causes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(query: &str) -> Params {
        Params::from_uri(&format!("/x?{query}").parse().unwrap()).unwrap()
    }

    fn rejected(result: Result<()>) -> String {
        match result {
            Err(StatusError::Invalid { message, .. }) => message,
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    #[test]
    fn writes_accept_all_as_the_only_dry_run_mode() {
        assert!(validate_write(WriteKind::Create, &params("dryRun=All")).is_ok());
        let message = rejected(validate_write(WriteKind::Update, &params("dryRun=Some")));
        assert!(
            message.starts_with(
                "UpdateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value"
            ),
            "{message}"
        );
    }

    #[test]
    fn field_managers_are_short_and_printable() {
        assert!(validate_write(WriteKind::Patch, &params("fieldManager=my-tool")).is_ok());
        let long = "m".repeat(129);
        let message = rejected(validate_write(
            WriteKind::Create,
            &params(&format!("fieldManager={long}")),
        ));
        assert!(
            message.contains("Too long: may not be longer than 128"),
            "{message}"
        );
        let message = rejected(validate_write(
            WriteKind::Create,
            &params("fieldManager=a%01b"),
        ));
        assert!(
            message.contains("invalid character U+0001 (at position 1)"),
            "{message}"
        );
    }

    #[test]
    fn list_options_reject_the_combinations_upstream_rejects() {
        assert!(validate_list(
            &params("resourceVersion=5&resourceVersionMatch=Exact"),
            false
        )
        .is_ok());
        for bad in [
            "resourceVersionMatch=Exact",
            "resourceVersion=0&resourceVersionMatch=Exact",
            "resourceVersion=5&resourceVersionMatch=Newest",
            "resourceVersion=5&resourceVersionMatch=Exact&continue=abc",
            "sendInitialEvents=true",
        ] {
            rejected(validate_list(&params(bad), false));
        }
        assert!(validate_list(
            &params("sendInitialEvents=true&resourceVersionMatch=NotOlderThan"),
            true
        )
        .is_ok());
        rejected(validate_list(&params("sendInitialEvents=true"), true));
        rejected(validate_list(
            &params("resourceVersionMatch=NotOlderThan"),
            true,
        ));
    }
}
