//! The host's `bootc status --format=json --format-version=1` output, parsed into types, and what the agent reports from it.
//!
//! - [`parse`] reads the document, and says where it breaks bootc's schema;
//! - [`schema`]: the document's types ([`BootcHost`] and its parts);
//! - [`report`]: digest matching and what the agent reports in `BootcNode.status`.

use serde::Deserialize;
use serde_json::Value;

pub mod report;
pub mod schema;

pub use schema::*;

/// The `kind` of bootc's status document.
pub const KIND: &str = "BootcHost";
/// The current `apiVersion`.
pub const API_VERSION_V1: &str = "org.containers.bootc/v1";
/// The `apiVersion` older bootc releases (and most of bootc's own fixtures) write.
pub const API_VERSION_V1ALPHA1: &str = "org.containers.bootc/v1alpha1";
/// Every `apiVersion` [`parse`] accepts.
pub const SUPPORTED_API_VERSIONS: &[&str] = &[API_VERSION_V1, API_VERSION_V1ALPHA1];

/// Why bootc's status output could not be read.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// The bytes are not one JSON document.
    #[error("bootc status output is not valid JSON")]
    ParseJson(#[source] serde_json::Error),
    /// The document is JSON but not an object.
    #[error("bootc status output is a JSON {found}, not an object")]
    NotAnObject {
        /// The JSON type found (`array`, `string`, …).
        found: &'static str,
    },
    /// `kind` or `apiVersion` is absent.
    #[error("bootc status output has no `{field}`")]
    MissingField {
        /// The missing key.
        field: &'static str,
    },
    /// `kind` is not `BootcHost`.
    #[error("bootc status output has kind {found}, expected \"BootcHost\"")]
    WrongKind {
        /// The value found, as JSON.
        found: String,
    },
    /// `apiVersion` is not one this parser knows.
    #[error(
        "bootc status output has apiVersion {found}, expected \"org.containers.bootc/v1\" or \"org.containers.bootc/v1alpha1\""
    )]
    UnsupportedApiVersion {
        /// The value found, as JSON.
        found: String,
    },
    /// A part of the document does not have the shape the schema gives it: a required
    /// field is missing, a value has the wrong type, or `imageDigest` is not sha256.
    #[error("bootc status output: `{path}` does not match bootc's status schema")]
    DecodeField {
        /// Where in the document, as a dotted path (`status.booted`, `spec`, or `.` for
        /// the whole document).
        path: String,
        /// What exactly is wrong there.
        #[source]
        source: serde_json::Error,
    },
}

/// Parses the output of `bootc status --format=json --format-version=1`.
///
/// Never panics. The types follow bootc's published schema (`host-v1.schema.json`), so
/// that one agent reads every bootc it may meet:
///
/// - `kind` must be `BootcHost`, `apiVersion` `org.containers.bootc/v1` or
///   `org.containers.bootc/v1alpha1`; the fields the schema requires must be there, and
///   `imageDigest` must be a sha256 digest;
/// - every field bootc added after 2025 (`architecture`, `stateroot`, `softRebootCapable`,
///   `composefs`, `downloadOnly`, `usrOverlay`, `readOnly`) is optional, and `null`
///   `metadata`, `spec`, `status` or `otherDeployments` read as empty;
/// - unknown keys are kept (`extra` on each object), so a newer bootc's output parses and
///   re-serialises without loss, and old outputs with `isContainer` parse too;
/// - string enumerations the agent does not act on (`type`, `store`, the `/usr` overlay
///   modes, composefs boot types) are kept as strings, and an image signature of a form
///   this code does not know is kept as [`ImageSignature::Other`].
///
/// The output carries no bootc version (the schema has no such field): ask
/// `bootc --version` for it.
pub fn parse(json: &[u8]) -> Result<BootcHost, StatusError> {
    let value: Value = serde_json::from_slice(json).map_err(StatusError::ParseJson)?;
    let Value::Object(root) = &value else {
        return Err(StatusError::NotAnObject {
            found: json_type(&value),
        });
    };
    match root.get("kind") {
        None => return Err(StatusError::MissingField { field: "kind" }),
        Some(Value::String(kind)) if kind == KIND => {}
        Some(other) => {
            return Err(StatusError::WrongKind {
                found: other.to_string(),
            });
        }
    }
    match root.get("apiVersion") {
        None => {
            return Err(StatusError::MissingField {
                field: "apiVersion",
            });
        }
        Some(Value::String(v)) if SUPPORTED_API_VERSIONS.contains(&v.as_str()) => {}
        Some(other) => {
            return Err(StatusError::UnsupportedApiVersion {
                found: other.to_string(),
            });
        }
    }
    BootcHost::deserialize(&value).map_err(|source| locate_error(&value, source))
}

/// The parts of the document that [`locate_error`] checks on their own.
#[derive(Debug, Clone, Copy)]
enum Part {
    Metadata,
    Spec,
    Reference,
    Status,
    Entry,
    Image,
}

impl Part {
    /// The error of reading `v` as this part, if any.
    fn check(self, v: &Value) -> Option<serde_json::Error> {
        match self {
            Part::Metadata => HostMetadata::deserialize(v).err(),
            Part::Spec => HostSpec::deserialize(v).err(),
            Part::Reference => ImageReference::deserialize(v).err(),
            Part::Status => HostStatus::deserialize(v).err(),
            Part::Entry => BootEntry::deserialize(v).err(),
            Part::Image => DeploymentImage::deserialize(v).err(),
        }
    }
}

/// Finds the innermost known part of the document that fails on its own, so that the
/// error says where the problem is (serde_json's messages carry no path).
fn locate_error(root: &Value, whole: serde_json::Error) -> StatusError {
    let at = |pointer: &str| root.pointer(pointer).filter(|v| !v.is_null());
    // Innermost first: the first part that fails is the one to name.
    let mut parts: Vec<(String, String, Part)> = Vec::new();
    for slot in ["booted", "staged", "rollback"] {
        for (key, part) in [
            ("image", Part::Image),
            ("cachedUpdate", Part::Image),
            ("", Part::Entry),
        ] {
            let (path, pointer) = if key.is_empty() {
                (format!("status.{slot}"), format!("/status/{slot}"))
            } else {
                (
                    format!("status.{slot}.{key}"),
                    format!("/status/{slot}/{key}"),
                )
            };
            parts.push((path, pointer, part));
        }
    }
    if let Some(Value::Array(items)) = at("/status/otherDeployments") {
        for i in 0..items.len() {
            parts.push((
                format!("status.otherDeployments[{i}]"),
                format!("/status/otherDeployments/{i}"),
                Part::Entry,
            ));
        }
    }
    for (path, part) in [
        ("status", Part::Status),
        ("spec.image", Part::Reference),
        ("spec", Part::Spec),
        ("metadata", Part::Metadata),
    ] {
        parts.push((
            path.to_string(),
            format!("/{}", path.replace('.', "/")),
            part,
        ));
    }
    for (path, pointer, part) in parts {
        if let Some(source) = at(&pointer).and_then(|v| part.check(v)) {
            return StatusError::DecodeField { path, source };
        }
    }
    StatusError::DecodeField {
        path: ".".to_string(),
        source: whole,
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests;
