//! Node selector matching as the scheduler does it for `allocation.availableOnNodes` and
//! `ResourceClass.suitableNodes`: terms are `ORed`, the requirements of a term are `ANDed`, an empty
//! term matches nothing; `matchFields` knows only `metadata.name`.
//!
//! Pure logic: no I/O, no dependency on other actor modules.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};

/// Whether `node` matches `selector`.
pub fn node_matches(selector: &NodeSelector, node: &Node) -> bool {
    let empty = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
    let name = node.metadata.name.as_deref().unwrap_or_default();
    selector
        .node_selector_terms
        .iter()
        .any(|term| term_matches(term, labels, name))
}

fn term_matches(term: &NodeSelectorTerm, labels: &BTreeMap<String, String>, name: &str) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    expressions
        .iter()
        .all(|req| requirement_matches(req, labels.get(&req.key).map(String::as_str)))
        && fields.iter().all(|req| {
            let value = (req.key == "metadata.name").then_some(name);
            requirement_matches(req, value)
        })
}

fn requirement_matches(req: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = req.values.as_deref().unwrap_or_default();
    match req.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => !value.is_some_and(|v| values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(actual), Some(bound)) = (
                value.and_then(|v| v.parse::<i64>().ok()),
                values.first().and_then(|v| v.parse::<i64>().ok()),
            ) else {
                return false;
            };
            if req.operator == "Gt" {
                actual > bound
            } else {
                actual < bound
            }
        }
        _ => false,
    }
}

/// A selector that matches exactly the node called `name` (by `metadata.name`).
#[cfg(test)]
pub fn node_name_selector(name: &str) -> NodeSelector {
    NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_fields: Some(vec![NodeSelectorRequirement {
                key: "metadata.name".into(),
                operator: "In".into(),
                values: Some(vec![name.into()]),
            }]),
            ..NodeSelectorTerm::default()
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn node(name: &str, labels: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).into(), (*v).into()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            ..Node::default()
        }
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|v| (*v).into()).collect()),
        }
    }

    fn selector(terms: Vec<NodeSelectorTerm>) -> NodeSelector {
        NodeSelector {
            node_selector_terms: terms,
        }
    }

    #[test]
    fn name_selector_matches_only_that_node() {
        let sel = node_name_selector("node-1");
        assert!(node_matches(&sel, &node("node-1", &[])));
        assert!(!node_matches(&sel, &node("node-2", &[])));
    }

    #[test]
    fn terms_are_ored_and_requirements_anded() {
        let sel = selector(vec![
            NodeSelectorTerm {
                match_expressions: Some(vec![
                    expr("zone", "In", &["a"]),
                    expr("gpu", "Exists", &[]),
                ]),
                ..NodeSelectorTerm::default()
            },
            NodeSelectorTerm {
                match_expressions: Some(vec![expr("zone", "In", &["b"])]),
                ..NodeSelectorTerm::default()
            },
        ]);
        assert!(node_matches(
            &sel,
            &node("n", &[("zone", "a"), ("gpu", "1")])
        ));
        assert!(!node_matches(&sel, &node("n", &[("zone", "a")])));
        assert!(node_matches(&sel, &node("n", &[("zone", "b")])));
        assert!(!node_matches(&sel, &node("n", &[("zone", "c")])));
    }

    #[test]
    fn empty_term_matches_nothing() {
        let sel = selector(vec![NodeSelectorTerm::default()]);
        assert!(!node_matches(&sel, &node("n", &[("zone", "a")])));
    }

    #[test]
    fn numeric_and_negative_operators() {
        let big = selector(vec![NodeSelectorTerm {
            match_expressions: Some(vec![
                expr("cpus", "Gt", &["8"]),
                expr("zone", "NotIn", &["x"]),
            ]),
            ..NodeSelectorTerm::default()
        }]);
        assert!(node_matches(&big, &node("n", &[("cpus", "16")])));
        assert!(!node_matches(&big, &node("n", &[("cpus", "4")])));
        assert!(!node_matches(
            &big,
            &node("n", &[("cpus", "16"), ("zone", "x")])
        ));
        assert!(!node_matches(&big, &node("n", &[("cpus", "lots")])));
        let absent = selector(vec![NodeSelectorTerm {
            match_expressions: Some(vec![expr("tainted", "DoesNotExist", &[])]),
            ..NodeSelectorTerm::default()
        }]);
        assert!(node_matches(&absent, &node("n", &[])));
        assert!(!node_matches(&absent, &node("n", &[("tainted", "")])));
    }
}
