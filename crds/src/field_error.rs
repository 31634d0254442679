//! A problem found in an object, with the path of the field it is about.

use std::fmt;

/// One problem, at one field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Path of the field, e.g. `spec.rollout.maintenanceWindows[0].timeZone`.
    pub path: String,
    /// What is wrong, in words an admin can act on.
    pub message: String,
}

impl FieldError {
    /// A problem at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Every problem found in one object, in field order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct FieldErrors(pub Vec<FieldError>);
