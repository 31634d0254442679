//! Nodes and pools as every part reads them: a Node's `Ready` condition, and the pool
//! that owns a BootcNode through its controller owner reference.

use bootc_crds::node::BootcNode;
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use kube::ResourceExt;

/// The Node's `Ready` condition.
pub fn ready_condition(node: &Node) -> Option<&NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
}

/// The Node's `Ready` condition is `True`.
pub fn node_ready(node: &Node) -> bool {
    ready_condition(node).is_some_and(|c| c.status == "True")
}

/// The pool named in a BootcNode's controller owner reference (as the controller sets it).
pub fn owner_pool(bootc: &BootcNode) -> Option<String> {
    bootc
        .owner_references()
        .iter()
        .find(|o| o.kind == "BootcNodePool" && o.controller == Some(true))
        .map(|o| o.name.clone())
}

#[cfg(test)]
mod tests {
    use bootc_crds::node::BootcNodeSpec;
    use k8s_openapi::api::core::v1::NodeStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use super::*;

    fn node(conditions: &[(&str, &str)]) -> Node {
        Node {
            status: Some(NodeStatus {
                conditions: Some(
                    conditions
                        .iter()
                        .map(|(type_, status)| NodeCondition {
                            type_: (*type_).to_owned(),
                            status: (*status).to_owned(),
                            ..NodeCondition::default()
                        })
                        .collect(),
                ),
                ..NodeStatus::default()
            }),
            ..Node::default()
        }
    }

    #[test]
    fn ready_is_the_ready_condition_true() {
        assert!(node_ready(&node(&[
            ("MemoryPressure", "False"),
            ("Ready", "True")
        ])));
        assert!(!node_ready(&node(&[("Ready", "Unknown")])));
        assert!(!node_ready(&node(&[("MemoryPressure", "True")])));
        assert!(!node_ready(&Node::default()));
    }

    #[test]
    fn the_owner_is_the_controlling_pool() {
        let reference = |kind: &str, name: &str, controller| OwnerReference {
            kind: kind.to_owned(),
            name: name.to_owned(),
            controller,
            ..OwnerReference::default()
        };
        let unowned = BootcNode::new("n", BootcNodeSpec::staged("registry.example/os@sha256:0"));
        let mut owned = unowned.clone();
        owned.metadata.owner_references = Some(vec![
            reference("BootcNodePool", "other", None),
            reference("Deployment", "d", Some(true)),
            reference("BootcNodePool", "pool", Some(true)),
        ]);
        assert_eq!(owner_pool(&owned).as_deref(), Some("pool"));
        assert_eq!(owner_pool(&unowned), None);
    }
}
