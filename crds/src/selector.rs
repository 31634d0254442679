//! Label selector checks (the syntax kube-apiserver enforces for built-in kinds, which a
//! custom resource's schema cannot).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::bounds::{
    LABEL_VALUE_MAX_LEN, NAME_MAX_LEN, SELECTOR_MAX_EXPRESSIONS, SELECTOR_MAX_LABELS,
    SELECTOR_MAX_VALUES,
};
use crate::field_error::FieldError;

const NAME_MAX: usize = LABEL_VALUE_MAX_LEN;
const PREFIX_MAX: usize = NAME_MAX_LEN;

/// Operators a `matchExpressions` entry may use.
pub const OPERATORS: [&str; 4] = ["In", "NotIn", "Exists", "DoesNotExist"];

/// Appends every problem in `selector` to `errors`, with paths under `path`.
pub fn check_selector(selector: &LabelSelector, path: &str, errors: &mut Vec<FieldError>) {
    check_counts(selector, path, errors);
    let labels = selector.match_labels.as_ref();
    for (key, value) in labels.into_iter().flat_map(BTreeMap::iter) {
        let here = format!("{path}.matchLabels[{key}]");
        if let Err(msg) = check_key(key) {
            errors.push(FieldError::new(&here, msg));
        }
        if let Err(msg) = check_value(value) {
            errors.push(FieldError::new(&here, msg));
        }
    }
    let expressions = selector.match_expressions.as_deref().unwrap_or_default();
    for (i, expr) in expressions.iter().enumerate() {
        let here = format!("{path}.matchExpressions[{i}]");
        if let Err(msg) = check_key(&expr.key) {
            errors.push(FieldError::new(format!("{here}.key"), msg));
        }
        let values = expr.values.as_deref().unwrap_or_default();
        match expr.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => errors.push(FieldError::new(
                format!("{here}.values"),
                format!("must be non-empty when operator is {}", expr.operator),
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => errors.push(FieldError::new(
                format!("{here}.values"),
                format!("must be empty when operator is {}", expr.operator),
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => errors.push(FieldError::new(
                format!("{here}.operator"),
                format!(
                    "unsupported operator {other:?}: use one of {}",
                    OPERATORS.join(", ")
                ),
            )),
        }
        for (j, value) in values.iter().enumerate() {
            if let Err(msg) = check_value(value) {
                errors.push(FieldError::new(format!("{here}.values[{j}]"), msg));
            }
        }
    }
}

/// The schema's bounds on how many labels, expressions and values a selector holds.
fn check_counts(selector: &LabelSelector, path: &str, errors: &mut Vec<FieldError>) {
    let mut at_most = |field: String, what: &str, count: usize, max: usize| {
        if count > max {
            errors.push(FieldError::new(
                field,
                format!("has {count} {what}, more than the limit of {max}"),
            ));
        }
    };
    let labels = selector.match_labels.as_ref().map_or(0, BTreeMap::len);
    at_most(
        format!("{path}.matchLabels"),
        "labels",
        labels,
        SELECTOR_MAX_LABELS,
    );
    let expressions = selector.match_expressions.as_deref().unwrap_or_default();
    at_most(
        format!("{path}.matchExpressions"),
        "expressions",
        expressions.len(),
        SELECTOR_MAX_EXPRESSIONS,
    );
    for (i, expr) in expressions.iter().enumerate() {
        let values = expr.values.as_ref().map_or(0, Vec::len);
        at_most(
            format!("{path}.matchExpressions[{i}].values"),
            "values",
            values,
            SELECTOR_MAX_VALUES,
        );
    }
}

/// True when `labels` satisfy `selector` (every `matchLabels` pair and every
/// `matchExpressions` entry, as kube-apiserver evaluates them). An empty selector matches
/// everything; an expression with an unknown operator matches nothing.
pub fn matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let pairs = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let expressions = selector.match_expressions.iter().flatten().all(|e| {
        let values = e.values.as_deref().unwrap_or_default();
        let value = labels.get(&e.key);
        match e.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        }
    });
    pairs && expressions
}

/// True when the selector names `key` anywhere (as a label or in an expression).
pub fn mentions_key(selector: &LabelSelector, key: &str) -> bool {
    let in_labels = selector
        .match_labels
        .as_ref()
        .is_some_and(|l| l.contains_key(key));
    let in_exprs = selector
        .match_expressions
        .as_deref()
        .unwrap_or_default()
        .iter()
        .any(|e| e.key == key);
    in_labels || in_exprs
}

/// A label key: `[prefix/]name`, prefix a DNS subdomain, name a qualified name.
pub fn check_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        check_dns_subdomain(prefix).map_err(|m| format!("label key prefix {prefix:?} {m}"))?;
    }
    if name.is_empty() {
        return Err(format!("label key {key:?} has an empty name"));
    }
    if name.len() > NAME_MAX || !is_qualified_name(name) {
        return Err(format!(
            "label key {key:?} is invalid: the name must be at most 63 characters of letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
        ));
    }
    Ok(())
}

/// A label value: empty, or a qualified name of at most 63 characters.
pub fn check_value(value: &str) -> Result<(), String> {
    if value.is_empty() || (value.len() <= NAME_MAX && is_qualified_name(value)) {
        Ok(())
    } else {
        Err(format!(
            "label value {value:?} is invalid: it must be empty or at most 63 characters of letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
        ))
    }
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn is_qualified_name(s: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    edge(s.chars().next())
        && edge(s.chars().last())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// A DNS-1123 subdomain (object names such as a Secret's).
pub fn check_dns_subdomain(s: &str) -> Result<(), String> {
    if s.is_empty() || s.len() > PREFIX_MAX {
        return Err("must be 1 to 253 characters".into());
    }
    if s.split('.').all(is_dns_label) {
        Ok(())
    } else {
        Err("must be lowercase letters, digits, '-' and '.', each part starting and ending with a letter or digit".into())
    }
}

/// A DNS-1123 label (namespace names).
pub fn check_dns_label(s: &str) -> Result<(), String> {
    if is_dns_label(s) {
        Ok(())
    } else {
        Err("must be 1 to 63 lowercase letters, digits or '-', starting and ending with a letter or digit".into())
    }
}

fn is_dns_label(s: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    !s.is_empty()
        && s.len() <= NAME_MAX
        && edge(s.chars().next())
        && edge(s.chars().last())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
        }
    }

    fn problems(sel: LabelSelector) -> Vec<String> {
        let mut errors = Vec::new();
        check_selector(&sel, "spec.nodeSelector", &mut errors);
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn keys() {
        for good in [
            "a",
            "node-role.kubernetes.io/worker",
            "example.com/x_y.z",
            "A1",
        ] {
            assert_eq!(check_key(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "/a",
            "a/",
            "-a",
            "a-",
            "Example.com/a",
            "a b",
            "a/b/c",
            &"x".repeat(64),
        ] {
            assert!(check_key(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn values() {
        for good in ["", "a", "true", "v1.2-3_x"] {
            assert_eq!(check_value(good), Ok(()), "{good}");
        }
        for bad in ["-a", "a b", "a/b", &"x".repeat(64)] {
            assert!(check_value(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn selectors_report_every_problem_with_its_path() {
        let sel = LabelSelector {
            match_labels: Some(BTreeMap::from([
                ("ok".to_string(), "yes".to_string()),
                ("bad key".to_string(), "bad value".to_string()),
            ])),
            match_expressions: Some(vec![
                expr("zone", "In", &[]),
                expr("gpu", "Exists", &["x"]),
                expr("arch", "Has", &["amd64"]),
                expr("os", "NotIn", &["-bad"]),
                expr("fine", "DoesNotExist", &[]),
            ]),
        };
        assert_eq!(
            problems(sel),
            vec![
                r#"spec.nodeSelector.matchLabels[bad key]: label key "bad key" is invalid: the name must be at most 63 characters of letters, digits, '-', '_' or '.', starting and ending with a letter or digit"#,
                r#"spec.nodeSelector.matchLabels[bad key]: label value "bad value" is invalid: it must be empty or at most 63 characters of letters, digits, '-', '_' or '.', starting and ending with a letter or digit"#,
                "spec.nodeSelector.matchExpressions[0].values: must be non-empty when operator is In",
                "spec.nodeSelector.matchExpressions[1].values: must be empty when operator is Exists",
                r#"spec.nodeSelector.matchExpressions[2].operator: unsupported operator "Has": use one of In, NotIn, Exists, DoesNotExist"#,
                r#"spec.nodeSelector.matchExpressions[3].values[0]: label value "-bad" is invalid: it must be empty or at most 63 characters of letters, digits, '-', '_' or '.', starting and ending with a letter or digit"#,
            ]
        );
        assert!(problems(LabelSelector::default()).is_empty());
    }

    #[test]
    fn mentions() {
        let sel = LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![expr("a/b", "Exists", &[])]),
        };
        assert!(mentions_key(&sel, "a/b"));
        assert!(!mentions_key(&sel, "a"));
    }

    #[test]
    fn dns_names() {
        assert!(check_dns_subdomain("pull-secret.v2").is_ok());
        assert!(check_dns_subdomain("Pull").is_err());
        assert!(check_dns_subdomain("a..b").is_err());
        assert!(check_dns_label("bootc-system").is_ok());
        assert!(check_dns_label("a.b").is_err());
        assert!(check_dns_label("").is_err());
    }
}

#[cfg(test)]
mod matching_tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| (*v).to_owned()).collect()),
        }
    }

    #[test]
    fn selector_matching_table() {
        let node = labels(&[("role", "worker"), ("zone", "a")]);
        let cases: Vec<(LabelSelector, bool)> = vec![
            (LabelSelector::default(), true),
            (
                LabelSelector {
                    match_labels: Some(labels(&[("role", "worker")])),
                    ..Default::default()
                },
                true,
            ),
            (
                LabelSelector {
                    match_labels: Some(labels(&[("role", "worker"), ("zone", "b")])),
                    ..Default::default()
                },
                false,
            ),
            (
                LabelSelector {
                    match_expressions: Some(vec![expr("zone", "In", &["a", "b"])]),
                    ..Default::default()
                },
                true,
            ),
            (
                LabelSelector {
                    match_expressions: Some(vec![expr("zone", "NotIn", &["a"])]),
                    ..Default::default()
                },
                false,
            ),
            (
                LabelSelector {
                    match_expressions: Some(vec![expr("gpu", "NotIn", &["yes"])]),
                    ..Default::default()
                },
                true,
            ),
            (
                LabelSelector {
                    match_expressions: Some(vec![expr("gpu", "Exists", &[])]),
                    ..Default::default()
                },
                false,
            ),
            (
                LabelSelector {
                    match_expressions: Some(vec![expr("gpu", "DoesNotExist", &[])]),
                    ..Default::default()
                },
                true,
            ),
            (
                LabelSelector {
                    match_labels: Some(labels(&[("role", "worker")])),
                    match_expressions: Some(vec![expr("zone", "Bogus", &["a"])]),
                },
                false,
            ),
        ];
        for (i, (selector, want)) in cases.iter().enumerate() {
            assert_eq!(matches(selector, &node), *want, "case {i}: {selector:?}");
        }
    }
}
