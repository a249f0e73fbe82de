//! The protobuf encoding of the v2 document (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`),
//! which kubectl 1.27 and 1.28 ask for and decode into gnostic's `openapi.v2.Document`. The
//! messages below are the part of gnostic's `OpenAPIv2.proto` the document uses, with its field
//! numbers; a `oneof` is written as its members, which encode the same way. Extensions
//! (`x-kubernetes-...`) are `NamedAny` entries whose value is the extension in YAML (JSON text is
//! YAML), as gnostic writes them.
//!
//! Pure: a JSON document in, bytes out.

use prost::Message;
use serde_json::{Map, Value};

#[derive(Clone, PartialEq, Message)]
struct Document {
    #[prost(string, tag = "1")]
    swagger: String,
    #[prost(message, optional, tag = "2")]
    info: Option<Info>,
    #[prost(message, optional, tag = "8")]
    paths: Option<Paths>,
    #[prost(message, optional, tag = "9")]
    definitions: Option<NamedSchemas>,
}

#[derive(Clone, PartialEq, Message)]
struct Info {
    #[prost(string, tag = "1")]
    title: String,
    #[prost(string, tag = "2")]
    version: String,
}

#[derive(Clone, PartialEq, Message)]
struct Paths {
    #[prost(message, repeated, tag = "2")]
    path: Vec<NamedPathItem>,
}

#[derive(Clone, PartialEq, Message)]
struct NamedPathItem {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<PathItem>,
}

#[derive(Clone, PartialEq, Message)]
struct PathItem {
    #[prost(message, optional, tag = "2")]
    get: Option<Operation>,
    #[prost(message, optional, tag = "3")]
    put: Option<Operation>,
    #[prost(message, optional, tag = "4")]
    post: Option<Operation>,
    #[prost(message, optional, tag = "5")]
    delete: Option<Operation>,
    #[prost(message, optional, tag = "8")]
    patch: Option<Operation>,
    #[prost(message, repeated, tag = "9")]
    parameters: Vec<ParametersItem>,
}

#[derive(Clone, PartialEq, Message)]
struct Operation {
    /// `operation_id` in gnostic's message.
    #[prost(string, tag = "5")]
    id: String,
    #[prost(message, repeated, tag = "8")]
    parameters: Vec<ParametersItem>,
    #[prost(message, optional, tag = "9")]
    responses: Option<Responses>,
    #[prost(message, repeated, tag = "13")]
    vendor_extension: Vec<NamedAny>,
}

/// `ParametersItem { oneof { Parameter parameter = 1; ... } }`.
#[derive(Clone, PartialEq, Message)]
struct ParametersItem {
    #[prost(message, optional, tag = "1")]
    parameter: Option<Parameter>,
}

/// `Parameter { oneof { BodyParameter body_parameter = 1; NonBodyParameter non_body_parameter = 2; } }`.
#[derive(Clone, PartialEq, Message)]
struct Parameter {
    #[prost(message, optional, tag = "1")]
    body_parameter: Option<BodyParameter>,
    #[prost(message, optional, tag = "2")]
    non_body_parameter: Option<NonBodyParameter>,
}

#[derive(Clone, PartialEq, Message)]
struct BodyParameter {
    #[prost(string, tag = "2")]
    name: String,
    #[prost(string, tag = "3")]
    r#in: String,
    #[prost(bool, tag = "4")]
    required: bool,
    #[prost(message, optional, tag = "5")]
    schema: Option<Schema>,
}

/// `NonBodyParameter { oneof { ...; QueryParameterSubSchema query_parameter_sub_schema = 3;
/// PathParameterSubSchema path_parameter_sub_schema = 4; } }`.
#[derive(Clone, PartialEq, Message)]
struct NonBodyParameter {
    #[prost(message, optional, tag = "3")]
    query_parameter_sub_schema: Option<QueryParameter>,
    #[prost(message, optional, tag = "4")]
    path_parameter_sub_schema: Option<PathParameter>,
}

#[derive(Clone, PartialEq, Message)]
struct QueryParameter {
    #[prost(bool, tag = "1")]
    required: bool,
    #[prost(string, tag = "2")]
    r#in: String,
    #[prost(string, tag = "4")]
    name: String,
    #[prost(string, tag = "6")]
    r#type: String,
    #[prost(bool, tag = "20")]
    unique_items: bool,
}

#[derive(Clone, PartialEq, Message)]
struct PathParameter {
    #[prost(bool, tag = "1")]
    required: bool,
    #[prost(string, tag = "2")]
    r#in: String,
    #[prost(string, tag = "4")]
    name: String,
    #[prost(string, tag = "5")]
    r#type: String,
}

#[derive(Clone, PartialEq, Message)]
struct Responses {
    #[prost(message, repeated, tag = "1")]
    response_code: Vec<NamedResponseValue>,
}

#[derive(Clone, PartialEq, Message)]
struct NamedResponseValue {
    #[prost(string, tag = "1")]
    name: String,
    /// `ResponseValue { oneof { Response response = 1; ... } }`.
    #[prost(message, optional, tag = "2")]
    value: Option<ResponseValue>,
}

#[derive(Clone, PartialEq, Message)]
struct ResponseValue {
    #[prost(message, optional, tag = "1")]
    response: Option<Response>,
}

#[derive(Clone, PartialEq, Message)]
struct Response {
    #[prost(string, tag = "1")]
    description: String,
    /// `SchemaItem { oneof { Schema schema = 1; ... } }`.
    #[prost(message, optional, tag = "2")]
    schema: Option<SchemaItem>,
}

#[derive(Clone, PartialEq, Message)]
struct SchemaItem {
    #[prost(message, optional, tag = "1")]
    schema: Option<Schema>,
}

/// `Definitions` and `Properties`: `repeated NamedSchema additional_properties = 1`.
#[derive(Clone, PartialEq, Message)]
struct NamedSchemas {
    #[prost(message, repeated, tag = "1")]
    additional_properties: Vec<NamedSchema>,
}

#[derive(Clone, PartialEq, Message)]
struct NamedSchema {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<Schema>,
}

#[derive(Clone, PartialEq, Message)]
struct Schema {
    #[prost(string, tag = "1")]
    r#ref: String,
    #[prost(string, tag = "2")]
    format: String,
    #[prost(string, tag = "3")]
    title: String,
    #[prost(string, tag = "4")]
    description: String,
    #[prost(message, optional, tag = "5")]
    default: Option<Any>,
    #[prost(double, tag = "7")]
    maximum: f64,
    #[prost(double, tag = "9")]
    minimum: f64,
    #[prost(int64, tag = "11")]
    max_length: i64,
    #[prost(int64, tag = "12")]
    min_length: i64,
    #[prost(string, tag = "13")]
    pattern: String,
    #[prost(int64, tag = "14")]
    max_items: i64,
    #[prost(int64, tag = "15")]
    min_items: i64,
    #[prost(bool, tag = "16")]
    unique_items: bool,
    #[prost(string, repeated, tag = "19")]
    required: Vec<String>,
    #[prost(message, repeated, tag = "20")]
    r#enum: Vec<Any>,
    #[prost(message, optional, tag = "21")]
    additional_properties: Option<AdditionalProperties>,
    #[prost(message, optional, tag = "22")]
    r#type: Option<Strings>,
    /// `ItemsItem { repeated Schema schema = 1; }`.
    #[prost(message, optional, tag = "23")]
    items: Option<Schemas>,
    #[prost(message, repeated, tag = "24")]
    all_of: Vec<Schema>,
    #[prost(message, optional, tag = "25")]
    properties: Option<NamedSchemas>,
    #[prost(bool, tag = "27")]
    read_only: bool,
    #[prost(message, repeated, tag = "31")]
    vendor_extension: Vec<NamedAny>,
}

/// `AdditionalPropertiesItem { oneof { Schema schema = 1; bool boolean = 2; } }`.
#[derive(Clone, PartialEq, Message)]
struct AdditionalProperties {
    #[prost(message, optional, boxed, tag = "1")]
    schema: Option<Box<Schema>>,
    #[prost(bool, optional, tag = "2")]
    boolean: Option<bool>,
}

/// `TypeItem { repeated string value = 1; }`.
#[derive(Clone, PartialEq, Message)]
struct Strings {
    #[prost(string, repeated, tag = "1")]
    value: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
struct Schemas {
    #[prost(message, repeated, tag = "1")]
    schema: Vec<Schema>,
}

#[derive(Clone, PartialEq, Message)]
struct NamedAny {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<Any>,
}

/// `Any { google.protobuf.Any value = 1; string yaml = 2; }`: only the YAML form is written.
#[derive(Clone, PartialEq, Message)]
struct Any {
    #[prost(string, tag = "2")]
    yaml: String,
}

fn any(value: &Value) -> Any {
    Any {
        yaml: value.to_string(),
    }
}

fn text(object: &Map<String, Value>, key: &str) -> String {
    object
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn extensions(object: &Map<String, Value>) -> Vec<NamedAny> {
    object
        .iter()
        .filter(|(k, _)| k.starts_with("x-"))
        .map(|(name, value)| NamedAny {
            name: name.clone(),
            value: Some(any(value)),
        })
        .collect()
}

fn named_schemas(value: Option<&Value>) -> Option<NamedSchemas> {
    let object = value?.as_object()?;
    Some(NamedSchemas {
        additional_properties: object
            .iter()
            .map(|(name, s)| NamedSchema {
                name: name.clone(),
                value: Some(schema(s)),
            })
            .collect(),
    })
}

fn schema(value: &Value) -> Schema {
    let Some(o) = value.as_object() else {
        return Schema::default();
    };
    let int = |key: &str| o.get(key).and_then(Value::as_i64).unwrap_or_default();
    let float = |key: &str| o.get(key).and_then(Value::as_f64).unwrap_or_default();
    let types = match o.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .map(Into::into)
            .collect(),
        _ => Vec::new(),
    };
    let additional_properties = match o.get("additionalProperties") {
        Some(Value::Bool(b)) => Some(AdditionalProperties {
            schema: None,
            boolean: Some(*b),
        }),
        Some(s @ Value::Object(_)) => Some(AdditionalProperties {
            schema: Some(Box::new(schema(s))),
            boolean: None,
        }),
        _ => None,
    };
    let list = |key: &str| {
        o.get(key)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    Schema {
        r#ref: text(o, "$ref"),
        format: text(o, "format"),
        title: text(o, "title"),
        description: text(o, "description"),
        default: o.get("default").map(any),
        maximum: float("maximum"),
        minimum: float("minimum"),
        max_length: int("maxLength"),
        min_length: int("minLength"),
        pattern: text(o, "pattern"),
        max_items: int("maxItems"),
        min_items: int("minItems"),
        unique_items: o.get("uniqueItems") == Some(&Value::Bool(true)),
        required: list("required")
            .iter()
            .filter_map(Value::as_str)
            .map(Into::into)
            .collect(),
        r#enum: list("enum").iter().map(any).collect(),
        additional_properties,
        r#type: (!types.is_empty()).then_some(Strings { value: types }),
        items: o.get("items").map(|items| Schemas {
            schema: vec![schema(items)],
        }),
        all_of: list("allOf").iter().map(schema).collect(),
        properties: named_schemas(o.get("properties")),
        read_only: o.get("readOnly") == Some(&Value::Bool(true)),
        vendor_extension: extensions(o),
    }
}

fn parameter(value: &Value) -> ParametersItem {
    let o = value.as_object().cloned().unwrap_or_default();
    let required = o.get("required") == Some(&Value::Bool(true));
    let parameter = match text(&o, "in").as_str() {
        "body" => Parameter {
            body_parameter: Some(BodyParameter {
                name: text(&o, "name"),
                r#in: "body".into(),
                required,
                schema: o.get("schema").map(schema),
            }),
            non_body_parameter: None,
        },
        "path" => Parameter {
            body_parameter: None,
            non_body_parameter: Some(NonBodyParameter {
                query_parameter_sub_schema: None,
                path_parameter_sub_schema: Some(PathParameter {
                    required,
                    r#in: "path".into(),
                    name: text(&o, "name"),
                    r#type: text(&o, "type"),
                }),
            }),
        },
        _ => Parameter {
            body_parameter: None,
            non_body_parameter: Some(NonBodyParameter {
                query_parameter_sub_schema: Some(QueryParameter {
                    required,
                    r#in: text(&o, "in"),
                    name: text(&o, "name"),
                    r#type: text(&o, "type"),
                    unique_items: o.get("uniqueItems") == Some(&Value::Bool(true)),
                }),
                path_parameter_sub_schema: None,
            }),
        },
    };
    ParametersItem {
        parameter: Some(parameter),
    }
}

fn parameters(value: Option<&Value>) -> Vec<ParametersItem> {
    value
        .and_then(Value::as_array)
        .map(|ps| ps.iter().map(parameter).collect())
        .unwrap_or_default()
}

fn operation(value: Option<&Value>) -> Option<Operation> {
    let o = value?.as_object()?;
    let responses = o
        .get("responses")
        .and_then(Value::as_object)
        .map(|rs| Responses {
            response_code: rs
                .iter()
                .map(|(code, r)| NamedResponseValue {
                    name: code.clone(),
                    value: Some(ResponseValue {
                        response: Some(Response {
                            description: r["description"].as_str().unwrap_or_default().into(),
                            schema: r.get("schema").map(|s| SchemaItem {
                                schema: Some(schema(s)),
                            }),
                        }),
                    }),
                })
                .collect(),
        });
    Some(Operation {
        id: text(o, "operationId"),
        parameters: parameters(o.get("parameters")),
        responses,
        vendor_extension: extensions(o),
    })
}

/// The protobuf encoding of a v2 document given as JSON.
pub fn encode_v2(document: &Value) -> Vec<u8> {
    let paths = document["paths"].as_object().map(|paths| Paths {
        path: paths
            .iter()
            .map(|(name, item)| NamedPathItem {
                name: name.clone(),
                value: Some(PathItem {
                    get: operation(item.get("get")),
                    put: operation(item.get("put")),
                    post: operation(item.get("post")),
                    delete: operation(item.get("delete")),
                    patch: operation(item.get("patch")),
                    parameters: parameters(item.get("parameters")),
                }),
            })
            .collect(),
    });
    Document {
        swagger: document["swagger"].as_str().unwrap_or("2.0").into(),
        info: Some(Info {
            title: document["info"]["title"]
                .as_str()
                .unwrap_or_default()
                .into(),
            version: document["info"]["version"]
                .as_str()
                .unwrap_or_default()
                .into(),
        }),
        paths,
        definitions: named_schemas(document.get("definitions")),
    }
    .encode_to_vec()
}
