//! `allOf`, `anyOf`, `oneOf` and `not`, as pure value validations.

use serde_json::{Map, Value};

use super::{WalkMode, Walker};
use crate::error::SchemaError;
use crate::path;

impl Walker {
    pub(super) fn check_junctors(
        &mut self,
        s: &Map<String, Value>,
        value: &Value,
        path: &str,
        depth: usize,
    ) {
        let body = path::in_body(path);
        if let Some(branches) = self.kw_schemas(s, "anyOf", path) {
            let results: Vec<_> = branches
                .iter()
                .map(|b| self.branch(b, value, path, depth))
                .collect();
            if !results.iter().any(Vec::is_empty) {
                self.composite(
                    path,
                    format!("{body} must validate at least one schema (anyOf)"),
                );
                self.openapi.extend(best(results));
            }
        }
        if let Some(branches) = self.kw_schemas(s, "oneOf", path) {
            let results: Vec<_> = branches
                .iter()
                .map(|b| self.branch(b, value, path, depth))
                .collect();
            let valid = results.iter().filter(|r| r.is_empty()).count();
            if valid == 0 {
                self.composite(
                    path,
                    format!(
                        "{body} must validate one and only one schema (oneOf). Found none valid"
                    ),
                );
                self.openapi.extend(best(results));
            } else if valid > 1 {
                self.composite(
                    path,
                    format!("{body} must validate one and only one schema (oneOf). Found {valid} valid alternatives"),
                );
            }
        }
        if let Some(branches) = self.kw_schemas(s, "allOf", path) {
            let mut valid = 0;
            for b in branches {
                let errs = self.branch(b, value, path, depth);
                if errs.is_empty() {
                    valid += 1;
                }
                self.openapi.extend(errs);
            }
            if valid != branches.len() {
                let none = if valid == 0 { ". Found none valid" } else { "" };
                self.composite(
                    path,
                    format!("{body} must validate all the schemas (allOf){none}"),
                );
            }
        }
        if let Some(not) = s.get("not")
            && self.branch(not, value, path, depth).is_empty()
        {
            self.composite(path, format!("{body} must not validate the schema (not)"));
        }
    }

    /// The errors of `value` against one junctor branch.
    pub(super) fn branch(
        &self,
        schema: &Value,
        value: &Value,
        path: &str,
        depth: usize,
    ) -> Vec<SchemaError> {
        let mut sub = Walker::default();
        sub.node(schema, value, path, depth + 1, WalkMode::Junctor);
        sub.openapi
    }

    pub(super) fn composite(&mut self, path: &str, message: String) {
        self.openapi.push(SchemaError::invalid(
            path,
            Value::String(String::new()),
            message,
        ));
    }
}

/// The errors of the branch with the fewest errors (go-openapi merges the
/// errors of its best-matching branch).
fn best(results: Vec<Vec<SchemaError>>) -> Vec<SchemaError> {
    results
        .into_iter()
        .filter(|r| !r.is_empty())
        .min_by_key(Vec::len)
        .unwrap_or_default()
}
