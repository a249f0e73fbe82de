//! The schema of each served kind: generated from the Rust type the server decodes the kind with
//! (k8s-openapi's for the built-in kinds of 1.30, `dra_types::resource_v1` for
//! `resource.k8s.io/v1` and the versions of the same shape: `v1beta2`, `v1alpha3`), taken from a
//! CRD's `openAPIV3Schema` for custom resources, and for a resource with neither (`v1beta1`) an
//! object that keeps every field, so that every resource the registry serves has one. Each kind's definition carries `x-kubernetes-group-version-kind`, which is how
//! kubectl finds it.
//!
//! Depends on the registry's resource descriptions and on the typed models; no store or HTTP.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Node, Pod};
use k8s_openapi::api::events::v1::Event as EventsV1Event;
use k8s_openapi::api::resource::v1alpha2::{
    PodSchedulingContext, ResourceClaim, ResourceClaimParameters, ResourceClaimTemplate,
    ResourceClass, ResourceClassParameters, ResourceSlice,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::generate::{GenTransform, SchemaGenerator, SchemaSettings};
use schemars::transform::{AddNullable, RemoveRefSiblings, ReplaceBoolSchemas};
use schemars::JsonSchema;
use serde_json::{json, Map, Value};

use crate::server::resource_v1;
use crate::server::resources::ResourceInfo;

/// The two `OpenAPI` documents the server publishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spec {
    /// Swagger 2.0 at `/openapi/v2`: definitions under `#/definitions/`, a `$ref` keeps its
    /// sibling `description`.
    V2,
    /// `OpenAPI` 3.0 at `/openapi/v3/...`: schemas under `#/components/schemas/`, a `$ref` with
    /// siblings wrapped in `allOf`, as kube-apiserver publishes them.
    V3,
}

impl Spec {
    /// Where the definitions live in the document, as a JSON pointer.
    fn definitions_path(self) -> &'static str {
        match self {
            Spec::V2 => "/definitions",
            Spec::V3 => "/components/schemas",
        }
    }

    /// The `$ref` of the definition `name`.
    pub fn reference(self, name: &str) -> String {
        format!("#{}/{name}", self.definitions_path())
    }

    /// A schema generator writing references in this document's form.
    pub fn generator(self) -> SchemaGenerator {
        let mut keep_bool_maps = ReplaceBoolSchemas::default();
        keep_bool_maps.skip_additional_properties = true;
        let mut transforms: Vec<Box<dyn GenTransform>> =
            vec![Box::new(keep_bool_maps), Box::new(AddNullable::default())];
        if self == Spec::V3 {
            transforms.push(Box::new(RemoveRefSiblings::default()));
        }
        SchemaSettings::openapi3()
            .with(|settings| {
                settings.definitions_path = self.definitions_path().into();
                settings.meta_schema = None;
                settings.transforms = transforms;
            })
            .into_generator()
    }
}

/// Adds `T`'s schema (and those it refers to) to `generator`; the name of its definition.
fn define<T: JsonSchema>(generator: &mut SchemaGenerator) -> String {
    generator.subschema_for::<T>();
    T::schema_name().into_owned()
}

/// The schema of a built-in kind, added to `generator`: the name of its definition, or `None`
/// for a resource the server has no typed model of.
fn builtin(generator: &mut SchemaGenerator, info: &ResourceInfo) -> Option<String> {
    use dra_types::resource_v1 as v1;
    let g = generator;
    let name = match (
        info.group.as_str(),
        info.version.as_str(),
        info.kind.as_str(),
    ) {
        ("", "v1", "Namespace") => define::<Namespace>(g),
        ("", "v1", "Node") => define::<Node>(g),
        ("", "v1", "Pod") => define::<Pod>(g),
        ("", "v1", "Event") => define::<Event>(g),
        ("", "v1", "ConfigMap") => define::<ConfigMap>(g),
        ("events.k8s.io", "v1", "Event") => define::<EventsV1Event>(g),
        ("coordination.k8s.io", "v1", "Lease") => define::<Lease>(g),
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition") => {
            define::<CustomResourceDefinition>(g)
        }
        ("resource.k8s.io", "v1alpha2", kind) => match kind {
            "ResourceClass" => define::<ResourceClass>(g),
            "ResourceClaim" => define::<ResourceClaim>(g),
            "ResourceClaimTemplate" => define::<ResourceClaimTemplate>(g),
            "PodSchedulingContext" => define::<PodSchedulingContext>(g),
            "ResourceSlice" => define::<ResourceSlice>(g),
            "ResourceClaimParameters" => define::<ResourceClaimParameters>(g),
            "ResourceClassParameters" => define::<ResourceClassParameters>(g),
            _ => return None,
        },
        (v1::GROUP, _, kind) if resource_v1::shaped_like_v1(info) => match kind {
            "DeviceClass" => define::<v1::DeviceClass>(g),
            "DeviceTaintRule" => define::<v1::DeviceTaintRule>(g),
            "ResourceClaim" => define::<v1::ResourceClaim>(g),
            "ResourceClaimTemplate" => define::<v1::ResourceClaimTemplate>(g),
            "ResourceSlice" => define::<v1::ResourceSlice>(g),
            _ => return None,
        },
        _ => return None,
    };
    Some(name)
}

/// The definition name kube-apiserver gives a kind it has no Go package for: the group's
/// labels reversed, then version and kind (`com.example.v1.Widget`).
fn reversed_name(info: &ResourceInfo) -> String {
    let mut labels: Vec<&str> = info.group.split('.').collect();
    labels.reverse();
    format!("{}.{}.{}", labels.join("."), info.version, info.kind)
}

/// `apiVersion`, `kind` and `metadata` (a reference to `ObjectMeta`) as every object has them.
fn object_properties(generator: &mut SchemaGenerator, spec: Spec) -> Map<String, Value> {
    let meta = define::<ObjectMeta>(generator);
    let string = |description: &str| json!({"type": "string", "description": description});
    let mut properties = Map::new();
    properties.insert(
        "apiVersion".into(),
        string("APIVersion defines the versioned schema of this representation of an object."),
    );
    properties.insert(
        "kind".into(),
        string("Kind is a string value representing the REST resource this object represents."),
    );
    properties.insert("metadata".into(), json!({"$ref": spec.reference(&meta)}));
    properties
}

/// The schema of a custom resource: the `openAPIV3Schema` of its version in `crd`, with the
/// object's standard fields, or `None` when the CRD declares none for that version.
fn custom(
    generator: &mut SchemaGenerator,
    spec: Spec,
    info: &ResourceInfo,
    crd: &Value,
) -> Option<(String, Value)> {
    let version = crd
        .pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v["name"] == info.version.as_str())?;
    let mut schema = version.pointer("/schema/openAPIV3Schema")?.clone();
    let object = schema.as_object_mut()?;
    let standard = object_properties(generator, spec);
    let properties = object
        .entry("properties")
        .or_insert_with(|| json!({}))
        .as_object_mut()?;
    for (key, value) in standard {
        properties.entry(key).or_insert(value);
    }
    Some((reversed_name(info), schema))
}

/// A kind without a model: an object that keeps whatever fields it is given.
fn open_object(generator: &mut SchemaGenerator, spec: Spec, info: &ResourceInfo) -> Value {
    json!({
        "description": format!("{} of {}.", info.kind, info.api_version()),
        "type": "object",
        "properties": object_properties(generator, spec),
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// The definitions of a set of kinds being gathered for one document.
pub struct Definitions {
    spec: Spec,
    generator: SchemaGenerator,
    /// Definitions that are not generated from a type (custom and untyped kinds).
    extra: Map<String, Value>,
    /// Each kind's definition name with its group, version and kind.
    kinds: Vec<(String, Value)>,
}

impl Definitions {
    /// Empty definitions for `spec`.
    pub fn new(spec: Spec) -> Self {
        Self {
            spec,
            generator: spec.generator(),
            extra: Map::new(),
            kinds: Vec::new(),
        }
    }

    /// Adds the schema of `info`'s kind (its CRD is `crd` for a custom resource) and returns the
    /// name of its definition.
    pub fn add(&mut self, info: &ResourceInfo, crd: Option<&Value>) -> String {
        let typed = if info.custom {
            None
        } else {
            builtin(&mut self.generator, info)
        };
        let name = if let Some(name) = typed {
            name
        } else {
            let (name, schema) = crd
                .and_then(|crd| custom(&mut self.generator, self.spec, info, crd))
                .unwrap_or_else(|| {
                    let open = open_object(&mut self.generator, self.spec, info);
                    (reversed_name(info), open)
                });
            self.extra.insert(name.clone(), schema);
            name
        };
        let gvk = json!({"group": info.group, "version": info.version, "kind": info.kind});
        if !self.kinds.iter().any(|(n, k)| *n == name && *k == gvk) {
            self.kinds.push((name.clone(), gvk));
        }
        name
    }

    /// Every definition gathered, with `x-kubernetes-group-version-kind` on the kinds'.
    pub fn finish(mut self) -> Map<String, Value> {
        // Taken with the generated ones so that the document's transforms apply to them too.
        self.generator.definitions_mut().extend(self.extra);
        let mut definitions = self.generator.take_definitions(true);
        for (name, gvk) in self.kinds {
            if let Some(Value::Object(definition)) = definitions.get_mut(&name) {
                let list = definition
                    .entry("x-kubernetes-group-version-kind")
                    .or_insert_with(|| json!([]));
                if let Some(list) = list.as_array_mut() {
                    list.push(gvk);
                }
            }
        }
        if self.spec == Spec::V2 {
            for definition in definitions.values_mut() {
                open_objects_for_v2(definition);
            }
        }
        definitions
    }
}

/// Swagger 2.0 has no way to say that an object keeps unknown fields: kube-apiserver publishes
/// such an object (`x-kubernetes-preserve-unknown-fields`) without its type and properties, so
/// that clients validating against it accept any field.
fn open_objects_for_v2(schema: &mut Value) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    if object.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
        let gvk = object.get("x-kubernetes-group-version-kind").cloned();
        object.retain(|k, _| k == "description" || k.starts_with("x-kubernetes-"));
        if let Some(gvk) = gvk {
            object.insert("x-kubernetes-group-version-kind".into(), gvk);
        }
        return;
    }
    for value in object.values_mut() {
        match value {
            Value::Object(_) => open_objects_for_v2(value),
            Value::Array(items) => items.iter_mut().for_each(open_objects_for_v2),
            _ => {}
        }
    }
}
