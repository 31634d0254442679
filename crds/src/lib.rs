//! API types of the bootc node-pool updater (`node.bootc.dev/v1alpha1`) and the checks on
//! them. Both binaries depend on this crate and on nothing of each other.
//!
//! - [`pool`]: `BootcNodePool`, what an admin writes, and its status;
//! - [`node`]: `BootcNode`, the only channel between the controller and an agent;
//! - [`image_ref`]: image references, digests, and the one digest-matching rule;
//! - [`budget`]: int-or-percent budgets resolved against a pool's size, and their schema;
//! - [`bounds`]: the declared bounds of the schemas' strings, lists and maps;
//! - [`window`]: maintenance windows in their time zones;
//! - [`selector`]: label selectors, matched and checked;
//! - [`matcher`]: Alertmanager's label matchers, as alert gates hold them;
//! - [`validate`]: every check the schema cannot express, with field paths;
//! - [`field_error`]: a problem with the path of its field;
//! - [`conditions`]: condition types, reasons and their transition times;
//! - [`crdgen`]: the CRDs rendered from the types (`cargo xtask gen` writes them).

pub mod bounds;
pub mod budget;
pub mod conditions;
pub mod crdgen;
pub mod field_error;
pub mod image_ref;
pub mod matcher;
pub mod node;
pub mod pool;
pub mod rules;
pub mod selector;
pub mod validate;
pub mod window;

pub use budget::{Budget, BudgetError};
pub use image_ref::{Digest, ImageRef, ImageRefError};
pub use node::{BootcNode, BootcNodeSpec, BootcNodeStatus};
pub use pool::{BootcNodePool, BootcNodePoolSpec, BootcNodePoolStatus};
pub use validate::{FieldError, FieldErrors};

/// The API group of both kinds.
pub const GROUP: &str = "node.bootc.dev";
/// The API version of both kinds.
pub const VERSION: &str = "v1alpha1";

/// Label the controller puts on every member Node (the agent DaemonSet's nodeSelector).
pub const MANAGED_LABEL: &str = "node.bootc.dev/managed";
/// Label an admin puts on a Node (value `true`) to keep it where it is: the node is not
/// staged or rebooted while the label is there.
pub const HOLD_LABEL: &str = "node.bootc.dev/hold";
/// Annotation on a BootcNode that holds a reboot slot; survives controller restarts.
pub const REBOOT_SLOT_ANNOTATION: &str = "node.bootc.dev/reboot-slot";
/// Annotation on a BootcNode whose Node was unschedulable before the controller cordoned
/// it, so the controller must not uncordon it.
pub const WAS_CORDONED_ANNOTATION: &str = "node.bootc.dev/was-cordoned";
/// Annotation on a BootcNode: when the controller approved its reboot (RFC 3339), the
/// start of `rebootTimeoutSeconds`.
pub const APPROVED_AT_ANNOTATION: &str = "node.bootc.dev/approved-at";
/// Annotation on a BootcNode: when the controller first saw the node back on its target
/// after the approved reboot (RFC 3339, the controller's clock), the start of
/// `postRebootDelaySeconds` and of the boot-health timeout. Node clocks never shorten
/// either.
pub const BACK_AT_ANNOTATION: &str = "node.bootc.dev/back-at";
/// Annotation on a BootcNode whose drain timed out: the target digest it was for. The
/// node is not given a slot again for that digest until the annotation is removed (by an
/// admin, to retry) or the target changes.
pub const DRAIN_FAILED_ANNOTATION: &str = "node.bootc.dev/drain-failed";
