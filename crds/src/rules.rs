//! Format rules a person can act on. A schema `pattern` makes kube-apiserver answer
//! with the regular expression itself (`should match '^(?:(?:…'`); each pattern here is
//! turned into a CEL rule with the same expression and a message that says what the
//! field must hold, with an example.

use schemars::Schema;
use serde_json::{Value, json};

/// Replaces `schema`'s `pattern` by an `x-kubernetes-validations` rule matching the same
/// expression, refusing with `message` (appended to rules already there).
fn explained(schema: &mut Schema, message: &str) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    let Some(Value::String(pattern)) = object.remove("pattern") else {
        return;
    };
    let literal = pattern.replace('\\', "\\\\").replace('\'', "\\'");
    let rule = json!({"rule": format!("self.matches('{literal}')"), "message": message});
    match object.get_mut("x-kubernetes-validations") {
        Some(Value::Array(rules)) => rules.push(rule),
        _ => {
            object.insert("x-kubernetes-validations".into(), Value::Array(vec![rule]));
        }
    }
}

/// `spec.image.ref`.
pub fn image_ref(schema: &mut Schema) {
    explained(
        schema,
        "must be an image reference: a lowercase repository, optionally after a registry host[:port], with a :tag, an @sha256:<64 hex digits> digest or both, e.g. quay.io/example/os:stable",
    );
}

/// A BootcNode's `spec.desiredImage`.
pub fn image_pin(schema: &mut Schema) {
    explained(
        schema,
        "must be an image pinned by digest, registry/repository@sha256:<64 hex digits>",
    );
}

/// A Secret's data key.
pub fn secret_key(schema: &mut Schema) {
    explained(
        schema,
        "must be a Secret data key: letters, digits, '-', '_' and '.' only",
    );
}

/// The alert gate's URL.
pub fn alert_url(schema: &mut Schema) {
    explained(
        schema,
        "must be an http:// or https:// URL without spaces and without user:password@ (name a Secret in credentialsSecretRef instead), e.g. http://alertmanager.monitoring:9093",
    );
}

/// A maintenance window's start.
pub fn window_start(schema: &mut Schema) {
    explained(schema, "must be a 24-hour time HH:MM, e.g. 02:30");
}

/// A maintenance window's duration.
pub fn window_duration(schema: &mut Schema) {
    explained(schema, "must be hours and minutes such as 3h, 90m or 1h30m");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_becomes_a_rule_with_the_same_expression_escaped_for_cel() {
        let mut schema: Schema = json!({
            "type": "string",
            "pattern": r"^a\.b'c$",
            "x-kubernetes-validations": [{"rule": "size(self) > 1"}],
        })
        .try_into()
        .unwrap();
        explained(&mut schema, "must be a.b'c");
        assert_eq!(
            schema.as_value(),
            &json!({
                "type": "string",
                "x-kubernetes-validations": [
                    {"rule": "size(self) > 1"},
                    {"rule": r"self.matches('^a\\.b\'c$')", "message": "must be a.b'c"},
                ],
            })
        );
    }
}
