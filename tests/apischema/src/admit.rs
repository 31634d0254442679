//! The whole write path: prune, default, validate, then CEL, in kube-apiserver's order.

use serde_json::Value;

use crate::cel::{has_rules, validate_cel};
use crate::defaults::apply_defaults_in_place;
use crate::error::SchemaError;
use crate::prune::prune_in_place;
use crate::validate::validate;

/// The detail of the error kube-apiserver adds when it skips CEL rules.
pub(crate) const CEL_SKIPPED: &str = "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

/// Runs `value` through what kube-apiserver does to a custom resource on
/// create (`old` is `None`) or update (`old` is the stored object), and
/// returns the object it would store, or every error it would report.
///
/// The steps, in the apiserver's order:
/// 1. [`prune`] unknown fields (the pruned paths are dropped here; call
///    [`prune`] for them);
/// 2. [`apply_defaults`];
/// 3. [`validate`] the OpenAPI schema (then embedded resources, then list types);
/// 4. [`validate_cel`] — only if the schema has rules, and, as the apiserver's
///    `hasBlockingErr` does, only if step 3 found no `Unsupported`,
///    `Required`, `TooLong`, `TooMany` or `TypeInvalid` error: otherwise the
///    rules are skipped and a root error saying so is appended. Other
///    structural errors (a `pattern` or `minimum` violation, say) do not stop
///    the rules. On update, `oldSelf` comes from `old` pruned and defaulted,
///    as the apiserver decodes stored objects.
///
/// Not modelled: `metadata` validation, status/scale subresources,
/// validation ratcheting of unchanged fields on update, and CEL cost limits.
pub fn admit(
    schema: &Value,
    value: &Value,
    old: Option<&Value>,
) -> Result<Value, Vec<SchemaError>> {
    let mut object = value.clone();
    prune_in_place(schema, &mut object);
    admit_pruned(schema, object, old)
}

/// [`admit`] of an object the caller owns and has pruned already
/// ([`crate::prune_in_place`], whose removed paths it may want for warnings):
/// steps 2 to 4, with no copy of the object. A caller that knows no rule of the
/// schema reads `oldSelf` ([`crate::reads_old_self`]) may pass no `old`: the
/// result is the same, without preparing the old object.
pub fn admit_pruned(
    schema: &Value,
    mut object: Value,
    old: Option<&Value>,
) -> Result<Value, Vec<SchemaError>> {
    apply_defaults_in_place(schema, &mut object);
    let mut errors = validate(schema, &object);
    if has_rules(schema) {
        if errors.iter().any(|e| e.kind.blocks_cel()) {
            errors.push(SchemaError::invalid("", Value::Null, CEL_SKIPPED));
        } else {
            let old = old.map(|o| {
                let mut old = o.clone();
                prune_in_place(schema, &mut old);
                apply_defaults_in_place(schema, &mut old);
                old
            });
            errors.extend(validate_cel(schema, &object, old.as_ref()));
        }
    }
    if errors.is_empty() {
        Ok(object)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {
            "type": "object",
            "required": ["n"],
            "properties": {
                "n": {"type": "integer", "default": 1, "x-kubernetes-validations": [{"rule": "self < 5"}]},
                "s": {"type": "string", "pattern": "^a"}
            }
        }}})
    }

    #[test]
    fn prunes_defaults_and_validates() {
        assert_eq!(
            admit(&schema(), &json!({"spec": {"x": 1}}), None),
            Ok(json!({"spec": {"n": 1}}))
        );
    }

    #[test]
    fn blocking_errors_skip_cel() {
        let errs = admit(&schema(), &json!({"spec": {"n": "x"}}), None).unwrap_err();
        assert_eq!(errs.len(), 2);
        assert_eq!(errs[0].kind, ErrorKind::TypeInvalid);
        assert_eq!(
            errs[1].to_string(),
            format!(r#"<nil>: Invalid value: "null": {CEL_SKIPPED}"#)
        );
    }

    #[test]
    fn non_blocking_errors_still_run_cel() {
        let errs = admit(&schema(), &json!({"spec": {"n": 7, "s": "b"}}), None).unwrap_err();
        let kinds: Vec<_> = errs.iter().map(|e| (e.path.as_str(), e.kind)).collect();
        assert_eq!(
            kinds,
            [
                ("spec.s", ErrorKind::Invalid),
                ("spec.n", ErrorKind::Invalid)
            ]
        );
    }

    #[test]
    fn no_rules_no_skip_notice() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "string"}}});
        let errs = admit(&schema, &json!({"spec": 1}), None).unwrap_err();
        assert_eq!(errs.len(), 1);
    }

    #[test]
    fn old_object_is_pruned_and_defaulted_for_transition_rules() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "n": {"type": "integer", "default": 3, "x-kubernetes-validations": [{"rule": "self >= oldSelf", "message": "may not decrease"}]}
        }}}});
        // The stored object predates the default: it reads back as n = 3.
        let old = json!({"spec": {}});
        let errs = admit(&schema, &json!({"spec": {"n": 2}}), Some(&old)).unwrap_err();
        assert_eq!(
            errs[0].to_string(),
            "spec.n: Invalid value: 2: may not decrease"
        );
        assert!(admit(&schema, &json!({"spec": {"n": 4}}), Some(&old)).is_ok());
    }
}
