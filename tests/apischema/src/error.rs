//! Field errors shaped like kube-apiserver's `field.Error`.

use std::fmt;

use serde_json::Value;

use crate::gofmt;

/// What went wrong with a field; mirrors `field.ErrorType` of
/// `k8s.io/apimachinery/pkg/util/validation/field`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// `Required value`: a `required` property is missing (or a CEL rule with
    /// reason `FieldValueRequired` failed).
    Required,
    /// `Invalid value`: the generic value error (`pattern`, bounds, lengths
    /// below the minimum, `format`, `allOf`/`anyOf`/`oneOf`/`not`, CEL rules).
    Invalid,
    /// `Unsupported value`: the value is not one of the `enum` values.
    Unsupported,
    /// `Invalid value` caused by a type mismatch (`type`, `nullable`,
    /// `x-kubernetes-int-or-string`, string `format`s).
    TypeInvalid,
    /// `Too long`: a string longer than `maxLength`.
    TooLong,
    /// `Too many`: more than `maxItems` items or `maxProperties` properties.
    TooMany,
    /// `Duplicate value`: a repeated item of an `x-kubernetes-list-type: set`
    /// list or key of a `map` list (or a CEL rule with reason
    /// `FieldValueDuplicate`).
    Duplicate,
    /// `Forbidden`: a CEL rule with reason `FieldValueForbidden` failed.
    Forbidden,
    /// `Internal error`: the schema itself is unusable at this node (for
    /// example a `pattern` that does not compile or a `minLength` that is not a
    /// number). kube-apiserver rejects such schemas when the CRD is written.
    Internal,
}

impl ErrorKind {
    /// The text kube-apiserver prints for this kind (`field.ErrorType.String()`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Required => "Required value",
            Self::Invalid | Self::TypeInvalid => "Invalid value",
            Self::Unsupported => "Unsupported value",
            Self::TooLong => "Too long",
            Self::TooMany => "Too many",
            Self::Duplicate => "Duplicate value",
            Self::Forbidden => "Forbidden",
            Self::Internal => "Internal error",
        }
    }

    /// Whether kube-apiserver skips the CEL rules of an object that has an
    /// error of this kind (`hasBlockingErr` of the custom resource strategy).
    #[must_use]
    pub fn blocks_cel(self) -> bool {
        matches!(
            self,
            Self::Unsupported | Self::Required | Self::TooLong | Self::TooMany | Self::TypeInvalid
        )
    }

    /// Whether the bad value is part of the message (`field.Error.ErrorBody`).
    fn shows_value(self) -> bool {
        !matches!(
            self,
            Self::Required | Self::Forbidden | Self::TooLong | Self::Internal
        )
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One error about one field of the object, displayed the way kube-apiserver
/// prints a `field.Error`, e.g.
/// `spec.image: Required value` or
/// `spec.policy: Unsupported value: "Foo": supported values: "A", "B"`.
#[derive(Debug, Clone, PartialEq)]
pub struct SchemaError {
    /// Path of the field: `spec.a.b`, `spec.items[2].name`, map entries as
    /// `spec.labels[key]`; empty for the object itself (displayed `<nil>`).
    pub path: String,
    /// The kind of error.
    pub kind: ErrorKind,
    /// The offending value as shown after `Invalid value:`; `None` when
    /// kube-apiserver omits it.
    pub value: Option<Value>,
    /// The detail text after the value (may be empty).
    pub message: String,
}

impl SchemaError {
    /// An error of `kind` at `path` with the given bad value and detail.
    pub(crate) fn new(
        path: &str,
        kind: ErrorKind,
        value: Option<Value>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            path: path.to_owned(),
            kind,
            value,
            message: message.into(),
        }
    }

    /// `Required value` at `path`.
    pub(crate) fn required(path: &str, message: impl Into<String>) -> Self {
        Self::new(path, ErrorKind::Required, None, message)
    }

    /// `Invalid value: <value>: <message>` at `path`.
    pub(crate) fn invalid(path: &str, value: Value, message: impl Into<String>) -> Self {
        Self::new(path, ErrorKind::Invalid, Some(value), message)
    }

    /// `Internal error: <message>` at `path`, for unusable schemas.
    pub(crate) fn internal(path: &str, message: impl Into<String>) -> Self {
        Self::new(path, ErrorKind::Internal, None, message)
    }
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let field = if self.path.is_empty() {
            "<nil>"
        } else {
            &self.path
        };
        write!(f, "{field}: {}", self.kind)?;
        if let Some(value) = self.value.as_ref().filter(|_| self.kind.shows_value()) {
            write!(f, ": {}", gofmt::bad_value(value))?;
        }
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for SchemaError {}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn required_has_no_value() {
        let e = SchemaError::required("spec.image", "");
        assert_eq!(e.to_string(), "spec.image: Required value");
    }

    #[test]
    fn invalid_quotes_strings_and_prints_numbers_bare() {
        let e = SchemaError::invalid("spec.rollout.maxUnavailable", json!("0%"), "bad");
        assert_eq!(
            e.to_string(),
            r#"spec.rollout.maxUnavailable: Invalid value: "0%": bad"#
        );
        let e = SchemaError::invalid("spec.n", json!(3), "bad");
        assert_eq!(e.to_string(), "spec.n: Invalid value: 3: bad");
    }

    #[test]
    fn empty_path_prints_nil_and_null_prints_quoted() {
        let e = SchemaError::invalid("", Value::Null, "x");
        assert_eq!(e.to_string(), r#"<nil>: Invalid value: "null": x"#);
    }

    #[test]
    fn too_long_and_forbidden_hide_the_value() {
        let e = SchemaError::new(
            "spec.s",
            ErrorKind::TooLong,
            Some(json!("abcdef")),
            "may not be longer than 5",
        );
        assert_eq!(e.to_string(), "spec.s: Too long: may not be longer than 5");
        let e = SchemaError::new("spec.s", ErrorKind::Forbidden, None, "nope");
        assert_eq!(e.to_string(), "spec.s: Forbidden: nope");
    }

    #[test]
    fn value_without_message() {
        let e = SchemaError::new("spec.l[1]", ErrorKind::Duplicate, Some(json!("a")), "");
        assert_eq!(e.to_string(), r#"spec.l[1]: Duplicate value: "a""#);
    }

    #[test]
    fn blocking_kinds() {
        assert!(ErrorKind::TypeInvalid.blocks_cel());
        assert!(ErrorKind::Required.blocks_cel());
        assert!(!ErrorKind::Invalid.blocks_cel());
        assert!(!ErrorKind::Duplicate.blocks_cel());
    }
}
