//! The declared bounds of the strings, lists and maps of both CRDs, and the schema
//! transforms that put them on the types k8s-openapi brings (`LabelSelector`,
//! `Condition`), whose schemas declare none.
//!
//! kube-apiserver estimates the cost of a CEL rule from the declared bounds of what it
//! reads and refuses a CRD whose rules could cost too much, so every field carries a bound
//! whether or not a rule reads it today (`docs/architecture.md`, "Validation cost"; the
//! test `crds/tests/bounds.rs` fails on a field without one). A status field is bounded
//! too: a writer that exceeds a bound has its whole status write refused, so what comes
//! from outside (an image's version label, a command's error output) is cut to its bound
//! with [`truncate`] before it is written.

use schemars::Schema;
use serde_json::{Map, Value, json};

/// An object name (a DNS-1123 subdomain), such as a Secret's.
pub const NAME_MAX_LEN: usize = 253;
/// A namespace name (a DNS-1123 label).
pub const NAMESPACE_MAX_LEN: usize = 63;
/// A key of a Secret's data.
pub const SECRET_KEY_MAX_LEN: usize = 253;
/// A label key: a DNS subdomain prefix (253), `/`, and a name (63).
pub const LABEL_KEY_MAX_LEN: usize = NAME_MAX_LEN + 1 + LABEL_VALUE_MAX_LEN;
/// A label value, and the name part of a label key.
pub const LABEL_VALUE_MAX_LEN: usize = 63;
/// `matchLabels` entries in one label selector.
pub const SELECTOR_MAX_LABELS: usize = 64;
/// `matchExpressions` in one label selector.
pub const SELECTOR_MAX_EXPRESSIONS: usize = 32;
/// `values` of one `matchExpressions` entry (room for a list of host names).
pub const SELECTOR_MAX_VALUES: usize = 256;
/// A `matchExpressions` operator (the longest valid one, `DoesNotExist`, has 12).
pub const SELECTOR_OPERATOR_MAX_LEN: usize = 32;

/// What holds up a drain (`status.drainBlocked.message` of a BootcNode): a pod's name and
/// the API server's refusal, or the list of pods a drain setting refuses.
pub const DRAIN_MESSAGE_MAX_LEN: usize = 4096;
/// Longest staging step description (bootc's are short).
pub const PROGRESS_STEP_MAX_LEN: usize = 256;

/// A digest as the workspace writes it: `sha256:` and 64 hex characters.
pub const DIGEST_MAX_LEN: usize = 71;
/// `targetShortDigest`: the first 12 hex characters of a digest.
pub const SHORT_DIGEST_LEN: usize = 12;
/// A version: an image's `org.opencontainers.image.version` label, bootc's version, the
/// agent's version.
pub const VERSION_MAX_LEN: usize = 256;
/// An architecture as bootc reports it (`amd64`, `arm64`, `ppc64le`, `s390x`).
pub const ARCHITECTURE_MAX_LEN: usize = 64;
/// A boot ID: a UUID (36 characters, 32 without dashes), with room to spare.
pub const BOOT_ID_MAX_LEN: usize = 64;

/// Conditions in one status: a pool writes three types, a node two.
pub const MAX_CONDITIONS: usize = 8;
/// A condition's `type`, as Kubernetes' Condition declares it.
pub const CONDITION_TYPE_MAX_LEN: usize = 316;
/// A condition's `reason`, as Kubernetes' Condition declares it.
pub const CONDITION_REASON_MAX_LEN: usize = 1024;
/// A condition's `message`, as Kubernetes' Condition declares it.
pub const CONDITION_MESSAGE_MAX_LEN: usize = 32768;
/// A condition's `type`: `[DNS subdomain/]name`, as Kubernetes' Condition declares it.
pub const CONDITION_TYPE_PATTERN: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$";
/// A condition's `reason`: CamelCase, as Kubernetes' Condition declares it.
pub const CONDITION_REASON_PATTERN: &str = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$";

/// Longest systemd unit name.
pub const UNIT_NAME_MAX_LEN: usize = 256;
/// What a systemd unit name looks like: a name and one of the unit types.
pub const UNIT_NAME_PATTERN: &str = r"^[A-Za-z0-9:_.\\@-]+\.(service|socket|target|device|mount|automount|swap|timer|path|slice|scope)$";

/// Bounds and pattern of each unit name in a list.
pub fn unit_items(schema: &mut Schema) {
    if let Some(items) = schema.get_mut("items").and_then(|i| i.as_object_mut()) {
        items.insert("minLength".into(), 1.into());
        items.insert("maxLength".into(), UNIT_NAME_MAX_LEN.into());
        items.insert("pattern".into(), UNIT_NAME_PATTERN.into());
    }
}

/// `text` cut to at most `max` characters (Unicode code points, as kube-apiserver counts
/// `maxLength`); a cut text ends with `…`.
pub fn truncate(text: String, max: usize) -> String {
    if text.chars().count() <= max {
        return text;
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    if max > 0 {
        cut.push('…');
    }
    cut
}

/// Schema transform for a `LabelSelector` field (`nodeSelector`, `podSelector`): bounds on
/// its map, its lists and their strings.
pub fn label_selector(schema: &mut Schema) {
    let Some(selector) = object_schema(schema.as_object_mut()) else {
        return;
    };
    let labels = json!({"maxProperties": SELECTOR_MAX_LABELS});
    bound(selector, &["matchLabels"], labels);
    let value = json!({"maxLength": LABEL_VALUE_MAX_LEN});
    bound(selector, &["matchLabels", "{}"], value);
    let expressions = json!({"maxItems": SELECTOR_MAX_EXPRESSIONS});
    bound(selector, &["matchExpressions"], expressions);
    let key = json!({"maxLength": LABEL_KEY_MAX_LEN});
    bound(selector, &["matchExpressions", "[]", "key"], key);
    let operator = json!({"maxLength": SELECTOR_OPERATOR_MAX_LEN});
    bound(selector, &["matchExpressions", "[]", "operator"], operator);
    let values = json!({"maxItems": SELECTOR_MAX_VALUES});
    bound(selector, &["matchExpressions", "[]", "values"], values);
    let value = json!({"maxLength": LABEL_VALUE_MAX_LEN});
    bound(selector, &["matchExpressions", "[]", "values", "[]"], value);
}

/// Schema transform for a `conditions` list: at most [`MAX_CONDITIONS`], each condition's
/// fields declared as Kubernetes' own Condition declares them.
pub fn conditions(schema: &mut Schema) {
    let Some(list) = object_schema(schema.as_object_mut()) else {
        return;
    };
    list.insert("maxItems".into(), json!(MAX_CONDITIONS));
    let fields = [
        (
            "type",
            json!({"maxLength": CONDITION_TYPE_MAX_LEN, "pattern": CONDITION_TYPE_PATTERN}),
        ),
        ("status", json!({"enum": ["True", "False", "Unknown"]})),
        (
            "reason",
            json!({"minLength": 1, "maxLength": CONDITION_REASON_MAX_LEN, "pattern": CONDITION_REASON_PATTERN}),
        ),
        ("message", json!({"maxLength": CONDITION_MESSAGE_MAX_LEN})),
        ("observedGeneration", json!({"minimum": 0})),
    ];
    for (field, keywords) in fields {
        bound(list, &["[]", field], keywords);
    }
}

/// The schema that describes the value: `schema` itself, or for an optional field
/// wrapped in `anyOf`, its first branch.
fn object_schema(schema: Option<&mut Map<String, Value>>) -> Option<&mut Map<String, Value>> {
    let schema = schema?;
    if schema.contains_key("properties") || schema.contains_key("items") {
        return Some(schema);
    }
    schema
        .get_mut("anyOf")?
        .as_array_mut()?
        .first_mut()?
        .as_object_mut()
}

/// Adds `keywords` to the subschema at `path` under `schema`: a step names a property,
/// `[]` the items of a list, `{}` the values of a map. A path that is not there adds
/// nothing (and the bounds test names the field left unbounded).
fn bound(schema: &mut Map<String, Value>, path: &[&str], keywords: Value) {
    let mut here = schema;
    for step in path {
        let next = match *step {
            "[]" => here.get_mut("items"),
            "{}" => here.get_mut("additionalProperties"),
            name => here
                .get_mut("properties")
                .and_then(|p| p.as_object_mut())
                .and_then(|p| p.get_mut(name)),
        };
        match next.and_then(Value::as_object_mut) {
            Some(next) => here = next,
            None => return,
        }
    }
    if let Value::Object(keywords) = keywords {
        here.extend(keywords);
    }
}

/// A URL as statuses, conditions, Events and logs show it: without the user name and
/// password (which are sent as basic authentication) and without a query or fragment
/// (which may carry a token). It works on the text, so that a URL that cannot be parsed
/// loses them too: the authority ends at the first `/`, `?` or `#`, and its user
/// information at its last `@`, as URL parsers have it.
pub fn shown_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let path = tail.split(['?', '#']).next().unwrap_or_default();
    if scheme.is_empty() {
        format!("{host}{path}")
    } else {
        format!("{scheme}://{host}{path}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncate_counts_characters_and_marks_the_cut() {
        assert_eq!(truncate("abc".into(), 3), "abc");
        assert_eq!(truncate("abcd".into(), 3), "ab…");
        assert_eq!(truncate("ééééé".into(), 4), "ééé…");
        assert_eq!(truncate("abc".into(), 0), "");
        let long = "x".repeat(CONDITION_MESSAGE_MAX_LEN + 10);
        assert_eq!(
            truncate(long, CONDITION_MESSAGE_MAX_LEN).chars().count(),
            CONDITION_MESSAGE_MAX_LEN
        );
    }

    #[test]
    fn bound_follows_properties_items_and_maps() {
        let mut schema =
            json!({"properties": {"a": {"items": {"additionalProperties": {"type": "string"}}}}});
        let map = schema.as_object_mut().unwrap();
        bound(map, &["a", "[]", "{}"], json!({"maxLength": 3}));
        bound(map, &["missing", "[]"], json!({"maxItems": 1}));
        assert_eq!(
            schema,
            json!({"properties": {"a": {"items": {"additionalProperties": {"type": "string", "maxLength": 3}}}}})
        );
    }

    #[test]
    fn optional_fields_are_reached_through_any_of() {
        let mut schema = json!({"anyOf": [{"properties": {"x": {}}}, {"enum": [null]}]});
        let inner = object_schema(schema.as_object_mut()).unwrap();
        assert!(inner.contains_key("properties"));
        assert!(object_schema(json!({}).as_object_mut()).is_none());
    }
}
