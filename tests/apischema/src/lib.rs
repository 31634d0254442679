//! What kube-apiserver does to a custom resource on write (prune, default, validate, CEL), against a CRD's structural schema, for tests.

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
mod validate;

pub use admit::admit;
pub use cel::validate_cel;
pub use defaults::apply_defaults;
pub use error::{ErrorKind, SchemaError};
pub use prune::prune;
pub use validate::validate;
