//! What kube-apiserver does to a custom resource on write (prune, default, validate, CEL), against a CRD's structural schema, for tests.
//!
//! Map of the modules:
//!
//! - `admit`: the whole write path ([`admit()`]): prune, default, validate, then CEL.
//! - `prune` ([`prune()`]) and `defaults` ([`apply_defaults`]): pruning unknown fields
//!   and structural defaulting.
//! - `validate` ([`validate()`]): OpenAPI v3 value validation; its submodules hold the
//!   keywords of scalars, of collections, the junctors and the keyword readers.
//! - `cel` ([`validate_cel`]): where `x-kubernetes-validations` rules run; `cel_eval`
//!   compiles and runs one rule, `cel_value` converts JSON values to CEL values.
//! - `pattern` (Go RE2 patterns on the `regex` crate), `format` (string formats) and
//!   `listtype` (`set`/`map` lists): what single keywords need.
//! - `structural` ([`structural_errors`]): whether a schema is structural, as
//!   kube-apiserver checks when a CRD is written.
//! - `schema`: lenient readers of structural-schema keywords; `path`: field paths;
//!   `error` ([`SchemaError`]) and `gofmt`: errors and values printed as the apiserver
//!   prints them.

mod admit;
mod cel;
mod cel_eval;
mod cel_value;
mod defaults;
mod error;
mod format;
mod gofmt;
mod listtype;
mod path;
mod pattern;
mod prune;
mod schema;
mod structural;
mod validate;

pub use admit::{admit, admit_pruned};
pub use cel::{reads_old_self, validate_cel};
pub use defaults::{apply_defaults, apply_defaults_in_place};
pub use error::{ErrorKind, SchemaError};
pub use prune::{prune, prune_in_place};
pub use structural::structural_errors;
pub use validate::validate;
