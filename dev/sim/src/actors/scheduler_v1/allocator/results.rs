//! The allocation result of one claim once the search succeeded: the picked devices in
//! allocation order, the configuration of the classes (once per class, naming the requests
//! that used it, as 1.34.2+) and of the claim (an entry without requests once, one naming
//! requests once per request of the claim it names), and the node selector (the node of a
//! node-local slice, else the merged single-term selectors of the slices, else none). A share
//! of a multi-allocation device records a fresh `shareID` and its `consumedCapacity`.
//!
//! Pure: no I/O.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};

use super::Search;
use dra_types::resource_v1::{
    AllocationResult, DeviceAllocationConfiguration, DeviceAllocationResult,
    DeviceRequestAllocationResult, FROM_CLAIM, FROM_CLASS,
};

fn add_new(from: Option<&Vec<NodeSelectorRequirement>>, to: &mut Vec<NodeSelectorRequirement>) {
    for requirement in from.into_iter().flatten() {
        if !to.contains(requirement) {
            to.push(requirement.clone());
        }
    }
}

impl Search<'_, '_> {
    /// The allocation of claim `index`.
    pub(super) fn result(&self, index: usize, node: &str) -> AllocationResult {
        let picked = &self.picked[index];
        // The chosen (sub)request of every request, with its name.
        let chosen: Vec<_> = (0..self.requests[index].len())
            .map(|request| {
                let sub = self.chosen_sub.get(&(index, request)).copied().unwrap_or(0);
                &self.requests[index][request][sub]
            })
            .collect();
        // As upstream, each result carries the tolerations of its (sub)request.
        let tolerations = |request: &str| {
            chosen
                .iter()
                .find(|data| data.name() == request)
                .map(|data| data.tolerations.to_vec())
                .unwrap_or_default()
        };
        let results = picked
            .iter()
            .map(|p| DeviceRequestAllocationResult {
                request: p.request.clone(),
                driver: p.id.driver.clone(),
                pool: p.id.pool.clone(),
                device: p.id.device.clone(),
                admin_access: p.admin.then_some(true),
                tolerations: tolerations(&p.request),
                // As upstream, a share of a multi-allocation device gets a fresh UUID.
                share_id: p.share.as_ref().map(|_| uuid::Uuid::new_v4().to_string()),
                consumed_capacity: p
                    .share
                    .iter()
                    .flatten()
                    .map(|c| (c.name.clone(), c.written.clone()))
                    .collect(),
                ..DeviceRequestAllocationResult::default()
            })
            .collect();
        let mut config: Vec<DeviceAllocationConfiguration> = Vec::new();
        let mut class_entries: HashMap<String, (usize, usize)> = HashMap::new();
        for data in &chosen {
            let class = data.class.metadata.name.clone().unwrap_or_default();
            if let Some((start, end)) = class_entries.get(&class) {
                for entry in &mut config[*start..*end] {
                    entry.requests.push(data.name());
                }
                continue;
            }
            let start = config.len();
            for entry in &data.class.spec.config {
                config.push(DeviceAllocationConfiguration {
                    source: FROM_CLASS.to_owned(),
                    requests: vec![data.name()],
                    opaque: entry.opaque.clone(),
                });
            }
            class_entries.insert(class, (start, config.len()));
        }
        let from_claim = |requests: &[String]| DeviceAllocationConfiguration {
            source: FROM_CLAIM.to_owned(),
            requests: requests.to_vec(),
            opaque: None,
        };
        for entry in &self.claims[index].spec.config {
            let with_opaque = || DeviceAllocationConfiguration {
                opaque: entry.opaque.clone(),
                ..from_claim(&entry.requests)
            };
            if entry.requests.is_empty() {
                config.push(with_opaque());
                continue;
            }
            for data in &chosen {
                if entry
                    .requests
                    .iter()
                    .any(|r| *r == data.base || *r == data.name())
                {
                    config.push(with_opaque());
                }
            }
        }
        AllocationResult {
            devices: DeviceAllocationResult { results, config },
            node_selector: self.node_selector(index, node),
            ..AllocationResult::default()
        }
    }

    fn node_selector(&self, index: usize, node: &str) -> Option<NodeSelector> {
        let mut term = NodeSelectorTerm::default();
        for picked in &self.picked[index] {
            let slice = self.slice(picked.candidate);
            if slice
                .spec
                .node_name
                .as_deref()
                .is_some_and(|n| !n.is_empty())
            {
                let name = slice
                    .spec
                    .node_name
                    .clone()
                    .unwrap_or_else(|| node.to_owned());
                return Some(NodeSelector {
                    node_selector_terms: vec![NodeSelectorTerm {
                        match_fields: Some(vec![NodeSelectorRequirement {
                            key: "metadata.name".into(),
                            operator: "In".into(),
                            values: Some(vec![name]),
                        }]),
                        match_expressions: None,
                    }],
                });
            }
            if let Some([only]) = slice
                .spec
                .node_selector
                .as_ref()
                .map(|s| &s.node_selector_terms[..])
            {
                add_new(
                    only.match_fields.as_ref(),
                    term.match_fields.get_or_insert_with(Vec::new),
                );
                add_new(
                    only.match_expressions.as_ref(),
                    term.match_expressions.get_or_insert_with(Vec::new),
                );
            }
        }
        let empty =
            |list: &Option<Vec<NodeSelectorRequirement>>| list.as_ref().is_none_or(Vec::is_empty);
        if empty(&term.match_fields) && empty(&term.match_expressions) {
            return None;
        }
        if empty(&term.match_fields) {
            term.match_fields = None;
        }
        if empty(&term.match_expressions) {
            term.match_expressions = None;
        }
        Some(NodeSelector {
            node_selector_terms: vec![term],
        })
    }
}
