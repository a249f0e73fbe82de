//! Writes `messages.rs`, the JSON field lists of the k8s-pb messages the server decodes: the
//! kinds in [`ROOTS`] and every message they contain, read from k8s-pb's sources (found
//! with `cargo metadata`). A field's JSON name is the property of the kind's `OpenAPI` schema
//! (the Rust model the server decodes with) whose name matches the Rust field's ignoring case and
//! underscores (`pod_ips` is `podIPs`); a field the model lacks gets its lower camel case name.
//!
//! The test fails when `messages.rs` differs from what the sources give;
//! `UPDATE_PROTOBUF_MESSAGES=1` rewrites it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::server::openapi::schemas::{Definitions, Spec};
use crate::server::resources::Registry;
use crate::KubernetesVersion;

/// The kinds decoded from protobuf (their k8s-pb message paths); `messages.rs` covers them and
/// every message they contain; `decoder` in `mod.rs` decodes them.
const ROOTS: [&str; 11] = [
    "api::core::v1::Namespace",
    "api::core::v1::Node",
    "api::core::v1::Pod",
    "api::core::v1::Event",
    "api::core::v1::ConfigMap",
    "api::events::v1::Event",
    "api::coordination::v1::Lease",
    "api::resource::v1::DeviceClass",
    "api::resource::v1::ResourceClaim",
    "api::resource::v1::ResourceClaimTemplate",
    "api::resource::v1::ResourceSlice",
];

/// Messages with a JSON form of their own (`json.rs`), not generated.
const SPECIAL: [&str; 6] = [
    "apimachinery::pkg::apis::meta::v1::Time",
    "apimachinery::pkg::apis::meta::v1::MicroTime",
    "apimachinery::pkg::apis::meta::v1::FieldsV1",
    "apimachinery::pkg::runtime::RawExtension",
    "apimachinery::pkg::api::resource::Quantity",
    "apimachinery::pkg::util::intstr::IntOrString",
];

/// A message field: Rust name and the k8s-pb message it holds, if any.
#[derive(Clone)]
struct Field {
    name: String,
    message: Option<String>,
    /// A list or map field (never embedded).
    repeated: bool,
}

/// k8s-pb's `src` directory.
fn k8s_pb_sources() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = std::process::Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    let metadata: Value = serde_json::from_slice(&output.stdout).expect("cargo metadata is JSON");
    let manifest = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "k8s-pb")
        .and_then(|p| p["manifest_path"].as_str())
        .expect("k8s-pb is a dependency");
    Path::new(manifest).parent().unwrap().join("src")
}

/// The message a field's type names, as a path from the crate root (`api::core::v1::PodSpec`).
fn referenced(module: &[&str], attr: &str, ty: &str) -> Option<String> {
    let ty: String = ty.chars().filter(|c| !c.is_whitespace()).collect();
    let inner = if attr.starts_with("map") || attr.starts_with("btree_map") {
        if !attr.contains("message") {
            return None;
        }
        let start = ty.find(',')? + 1;
        ty[start..].trim_end_matches('>').to_owned()
    } else if attr.starts_with("message") {
        let mut t = ty.as_str();
        for wrapper in [
            "::core::option::Option<",
            "::prost::alloc::vec::Vec<",
            "::prost::alloc::boxed::Box<",
        ] {
            t = t.strip_prefix(wrapper).unwrap_or(t);
        }
        t.trim_end_matches('>').to_owned()
    } else {
        return None;
    };
    let mut path: Vec<&str> = module.to_vec();
    let mut rest = inner.as_str();
    if rest.contains("::") {
        while let Some(r) = rest.strip_prefix("super::") {
            path.pop();
            rest = r;
        }
    }
    Some(
        format!("{}::{rest}", path.join("::"))
            .trim_start_matches("::")
            .to_owned(),
    )
}

/// A field declaration of `module` (attribute, name, type) as a [`Field`].
fn field(module: &[&str], attr: &str, name: String, ty: &str) -> Field {
    Field {
        name,
        message: referenced(module, attr, ty.trim_end_matches(',')),
        repeated: attr.contains("repeated") || attr.contains("map"),
    }
}

/// The structs of one k8s-pb module file: name to fields.
fn parse_module(src: &Path, module: &str) -> BTreeMap<String, Vec<Field>> {
    let segments: Vec<&str> = module.split("::").collect();
    let file = src.join(segments.join("/")).join("mod.rs");
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let mut structs = BTreeMap::new();
    let mut current: Option<(String, Vec<Field>)> = None;
    let mut attr: Option<String> = None;
    // A field declaration whose type goes on over the next lines: attribute, name, type so far.
    let mut pending: Option<(String, String, String)> = None;
    for line in text.lines() {
        let t = line.trim();
        let declared = if let Some((a, name, mut ty)) = pending.take() {
            ty.push_str(t);
            Some((a, name, ty))
        } else if let Some(name) = t
            .strip_prefix("pub struct ")
            .and_then(|r| r.strip_suffix(" {"))
        {
            current = Some((name.to_owned(), Vec::new()));
            None
        } else if t == "}" {
            if let Some((name, fields)) = current.take() {
                structs.insert(name, fields);
            }
            None
        } else if let Some(a) = t
            .strip_prefix("#[prost(")
            .and_then(|r| r.strip_suffix(")]"))
        {
            attr = Some(a.to_owned());
            None
        } else if let (Some(a), Some(decl)) = (attr.take(), t.strip_prefix("pub ")) {
            let (name, ty) = decl.split_once(':').expect("a field declaration");
            Some((a, name.trim().to_owned(), ty.trim().to_owned()))
        } else {
            None
        };
        match declared {
            Some((a, name, ty)) if ty.ends_with(',') => {
                if let Some((_, fields)) = current.as_mut() {
                    fields.push(field(&segments, &a, name, &ty));
                }
            }
            Some(unfinished) => pending = Some(unfinished),
            None => {}
        }
    }
    structs
}

/// The property names of every definition of every kind the releases serve.
fn json_names() -> BTreeMap<String, Vec<String>> {
    let mut definitions = Definitions::new(Spec::V3);
    for release in KubernetesVersion::ALL {
        let registry = Registry::with_builtins_of(release);
        for (group, versions) in
            std::iter::once((String::new(), vec!["v1".to_owned()])).chain(registry.groups())
        {
            for version in versions {
                for info in registry.resources_of(&group, &version) {
                    definitions.add(&info, None);
                }
            }
        }
    }
    definitions
        .finish()
        .into_iter()
        .map(|(name, schema)| {
            let properties = schema["properties"]
                .as_object()
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default();
            (name, properties)
        })
        .collect()
}

fn squash(name: &str) -> String {
    name.trim_start_matches("r#")
        .chars()
        .filter(|c| *c != '_')
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

fn lower_camel(name: &str) -> String {
    let mut out = String::new();
    for (i, part) in name.trim_start_matches("r#").split('_').enumerate() {
        let mut chars = part.chars();
        if let (true, Some(first)) = (i > 0, chars.next()) {
            out.push(first.to_ascii_uppercase());
            out.extend(chars);
        } else {
            out.push_str(part);
        }
    }
    out
}

/// Whether the message `inner` is embedded in its parent's JSON (Go's `json:",inline"`, as
/// `Probe` holds `ProbeHandler`): the parent's schema has no property for the field but one for
/// most fields of `inner` (a release newer than the schema's may have added a few).
fn embedded(
    src: &Path,
    modules: &mut BTreeMap<String, BTreeMap<String, Vec<Field>>>,
    inner: &str,
    parent: &[String],
) -> bool {
    let (module, name) = inner.rsplit_once("::").unwrap();
    let structs = modules
        .entry(module.to_owned())
        .or_insert_with(|| parse_module(src, module));
    structs.get(name).is_some_and(|fields| {
        let known = fields
            .iter()
            .filter(|f| parent.iter().any(|p| squash(p) == squash(&f.name)))
            .count();
        known * 2 > fields.len()
    })
}

/// The text of `messages.rs`.
fn generate() -> String {
    let src = k8s_pb_sources();
    let names = json_names();
    let mut modules: BTreeMap<String, BTreeMap<String, Vec<Field>>> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    let mut queue: VecDeque<String> = ROOTS.iter().map(|r| (*r).to_owned()).collect();
    let mut out = String::from(
        "//! The JSON field names of the k8s-pb messages the server decodes. Generated from k8s-pb's\n//! sources by `generate.rs` (`UPDATE_PROTOBUF_MESSAGES=1 cargo test -p dra-sim protobuf`); do\n//! not edit.\n\nuse super::json::message;\n",
    );
    while let Some(path) = queue.pop_front() {
        if SPECIAL.contains(&path.as_str()) || !seen.insert(path.clone()) {
            continue;
        }
        let (module, name) = path.rsplit_once("::").unwrap();
        let structs = modules
            .entry(module.to_owned())
            .or_insert_with(|| parse_module(&src, module));
        let fields = structs
            .get(name)
            .unwrap_or_else(|| panic!("{path} is not a message of k8s-pb"))
            .clone();
        let schema_name = format!("io.k8s.{}", path.replace("::", "."));
        let properties = names
            .get(&schema_name)
            .or_else(|| names.get(name).filter(|_| module == "api::resource::v1"));
        let _ = write!(out, "\nmessage!({path} {{");
        for field in &fields {
            let matched = properties
                .and_then(|ps| ps.iter().find(|p| squash(p) == squash(&field.name)))
                .cloned();
            let json = match (matched, properties, &field.message) {
                (Some(json), _, _) => json,
                (None, Some(ps), Some(inner))
                    if !field.repeated && embedded(&src, &mut modules, inner, ps) =>
                {
                    String::new()
                }
                _ => lower_camel(&field.name),
            };
            let _ = write!(out, "\n    {}: \"{json}\",", field.name);
            queue.extend(field.message.clone());
        }
        out.push_str("\n});\n");
    }
    out
}

#[test]
fn generated_messages_match_the_k8s_pb_sources() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/server/protobuf/messages.rs");
    let generated = generate();
    if std::env::var_os("UPDATE_PROTOBUF_MESSAGES").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "{} is out of date (UPDATE_PROTOBUF_MESSAGES=1 cargo test -p dra-sim protobuf)",
        path.display()
    );
}
