//! Server-side printing: the meta.k8s.io `Table` kube-apiserver returns to kubectl for CRDs and built-in kinds.
//!
//! - `negotiate`: whether an `Accept` header asks for a `Table` ([`wants_table`], [`accept_is_satisfiable`]).
//! - `columns`: [`Column`], and the columns of a CRD version from its `additionalPrinterColumns` ([`crd_columns`]).
//! - `builtin`: the columns of built-in kinds ([`builtin_columns`]); the printers of Node, Pod and Event, which
//!   compute their cells, are in `node`, `pod` and `event`.
//! - `render`: the `Table` of a list or one object ([`to_table`]) and of a watch event ([`watch_event_table`]).
//! - `fields` (lenient field access), `time` (ages, [`human_duration`]) and `docs` (column descriptions from the API
//!   documentation): what the printers share.

mod builtin;
mod columns;
mod docs;
mod event;
mod fields;
mod negotiate;
mod node;
mod pod;
mod render;
#[cfg(test)]
mod tests;
mod time;

pub use builtin::builtin_columns;
pub use columns::{CellFn, Column, crd_columns};
pub use negotiate::{accept_is_satisfiable, wants_table};
pub use render::{TableFormat, to_table, valid_include_object, watch_event_table};
pub use time::human_duration;

/// The version of meta.k8s.io a client asked its `Table` in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableVersion {
    /// `meta.k8s.io/v1`.
    V1,
    /// `meta.k8s.io/v1beta1`.
    V1Beta1,
}

impl TableVersion {
    /// The `apiVersion` of a `Table` (and of the `PartialObjectMetadata` in its rows) in this version.
    pub fn api_version(self) -> &'static str {
        match self {
            TableVersion::V1 => "meta.k8s.io/v1",
            TableVersion::V1Beta1 => "meta.k8s.io/v1beta1",
        }
    }
}
