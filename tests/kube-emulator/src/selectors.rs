//! Label and field selectors parsed, validated and matched the way kube-apiserver (apimachinery `labels` and `fields`) does.
//!
//! Known differences from kube-apiserver:
//! - Field values are looked up by walking the dotted path in the JSON object instead of through
//!   each kind's hand-written field set; the server must still refuse fields a kind does not
//!   support (see [`FieldSelector::fields`]). A missing field reads as `""`, except
//!   `spec.unschedulable` and `spec.hostNetwork`, which read as `"false"` like the typed field sets.
//!   Booleans and numbers compare by their JSON text; objects and arrays read as `""`.
//! - The string form of [`LabelSelector::nothing`] is empty (as in apimachinery), the same as
//!   [`LabelSelector::everything`].
//!
//! Map: `label` holds [`LabelSelector`] and its [`Requirement`]s (built from a
//! `metav1.LabelSelector` object, matched against labels), `label_parser` the lexer and
//! parser of their string form ([`parse_label_selector`]), `field` [`FieldSelector`] and
//! [`parse_field_selector`], and `validation` the apimachinery validation helpers
//! (qualified names, label values) and Go-shaped error texts both kinds of selector share.

mod field;
mod label;
mod label_parser;
#[cfg(test)]
mod tests;
mod validation;

pub use field::{FieldOperator, FieldRequirement, FieldSelector, parse_field_selector};
pub use label::{LabelOperator, LabelSelector, Requirement};
pub use label_parser::parse_label_selector;
