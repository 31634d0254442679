//! Label selectors: requirements, the selectors they make up, built from a
//! `metav1.LabelSelector` object and matched against label sets.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::Value;

use super::validation::{
    aggregate, go_quote, go_string_slice, invalid, label_value_errors, parse_go_int,
    qualified_name_errors,
};

/// The operator of one label requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelOperator {
    /// `key in (a,b)`: the label is present with one of the values.
    In,
    /// `key notin (a,b)`: the label is absent or has none of the values.
    NotIn,
    /// `key=v`.
    Equals,
    /// `key==v` (same meaning as `=`).
    DoubleEquals,
    /// `key!=v`: the label is absent or has another value.
    NotEquals,
    /// `key`: the label is present.
    Exists,
    /// `!key`: the label is absent.
    DoesNotExist,
    /// `key>n`: the label is present and is an integer greater than `n`.
    GreaterThan,
    /// `key<n`: the label is present and is an integer less than `n`.
    LessThan,
}

/// One requirement of a label selector: a key, an operator and (sorted, unique) values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub(super) key: String,
    pub(super) operator: LabelOperator,
    pub(super) values: Vec<String>,
}

/// A label selector: the conjunction of its requirements (or the selector that matches nothing).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    pub(super) requirements: Vec<Requirement>,
    pub(super) nothing: bool,
}

impl Requirement {
    /// Builds a requirement, validating it like `labels.NewRequirement`: the key must be a
    /// qualified name, each value a label value, and the number of values must suit the operator.
    /// Values are sorted and de-duplicated.
    pub fn new(key: &str, operator: LabelOperator, values: Vec<String>) -> Result<Self, String> {
        let mut errs = Vec::new();
        let key_errs = qualified_name_errors(key);
        if !key_errs.is_empty() {
            errs.push(invalid("key", &go_quote(key), &key_errs.join("; ")));
        }
        match operator {
            LabelOperator::In | LabelOperator::NotIn => {
                if values.is_empty() {
                    errs.push(invalid(
                        "values",
                        &go_string_slice(&values),
                        "for 'in', 'notin' operators, values set can't be empty",
                    ));
                }
            }
            LabelOperator::Equals | LabelOperator::DoubleEquals | LabelOperator::NotEquals => {
                if values.len() != 1 {
                    errs.push(invalid(
                        "values",
                        &go_string_slice(&values),
                        "exact-match compatibility requires one single value",
                    ));
                }
            }
            LabelOperator::Exists | LabelOperator::DoesNotExist => {
                if !values.is_empty() {
                    errs.push(invalid(
                        "values",
                        &go_string_slice(&values),
                        "values set must be empty for exists and does not exist",
                    ));
                }
            }
            LabelOperator::GreaterThan | LabelOperator::LessThan => {
                if values.len() != 1 {
                    errs.push(invalid(
                        "values",
                        &go_string_slice(&values),
                        "for 'Gt', 'Lt' operators, exactly one value is required",
                    ));
                }
                for (i, v) in values.iter().enumerate() {
                    if parse_go_int(v).is_none() {
                        errs.push(invalid(
                            &format!("values[{i}]"),
                            &go_quote(v),
                            "for 'Gt', 'Lt' operators, the value must be an integer",
                        ));
                    }
                }
            }
        }
        for (i, v) in values.iter().enumerate() {
            let value_errs = label_value_errors(v);
            if !value_errs.is_empty() {
                errs.push(invalid(
                    &format!("values[{i}][{key}]"),
                    &go_quote(v),
                    &value_errs.join("; "),
                ));
            }
        }
        aggregate(errs)?;
        let values: BTreeSet<String> = values.into_iter().collect();
        Ok(Requirement {
            key: key.to_string(),
            operator,
            values: values.into_iter().collect(),
        })
    }

    /// The label key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The operator.
    pub fn operator(&self) -> LabelOperator {
        self.operator
    }

    /// The values (sorted, unique; empty for `Exists`/`DoesNotExist`).
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Whether a label set satisfies this requirement (`Requirement.Matches`).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let got = labels.get(&self.key);
        match self.operator {
            LabelOperator::In | LabelOperator::Equals | LabelOperator::DoubleEquals => {
                got.is_some_and(|v| self.values.contains(v))
            }
            LabelOperator::NotIn | LabelOperator::NotEquals => {
                got.is_none_or(|v| !self.values.contains(v))
            }
            LabelOperator::Exists => got.is_some(),
            LabelOperator::DoesNotExist => got.is_none(),
            LabelOperator::GreaterThan | LabelOperator::LessThan => {
                let Some(have) = got.and_then(|v| parse_go_int(v)) else {
                    return false;
                };
                let [want] = self.values.as_slice() else {
                    return false;
                };
                let Some(want) = parse_go_int(want) else {
                    return false;
                };
                if self.operator == LabelOperator::GreaterThan {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let one = self.values.first().map(String::as_str).unwrap_or("");
        match self.operator {
            LabelOperator::In => write!(f, "{} in ({})", self.key, self.values.join(",")),
            LabelOperator::NotIn => write!(f, "{} notin ({})", self.key, self.values.join(",")),
            LabelOperator::Equals => write!(f, "{}={one}", self.key),
            LabelOperator::DoubleEquals => write!(f, "{}=={one}", self.key),
            LabelOperator::NotEquals => write!(f, "{}!={one}", self.key),
            LabelOperator::Exists => write!(f, "{}", self.key),
            LabelOperator::DoesNotExist => write!(f, "!{}", self.key),
            LabelOperator::GreaterThan => write!(f, "{}>{one}", self.key),
            LabelOperator::LessThan => write!(f, "{}<{one}", self.key),
        }
    }
}

fn expect_string_list(v: Option<&Value>, what: &str) -> Result<Vec<String>, String> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| match i {
                Value::String(s) => Ok(s.clone()),
                other => Err(format!("{what}: expected a string, got {other}")),
            })
            .collect(),
        Some(other) => Err(format!("{what}: expected a list of strings, got {other}")),
    }
}

/// The requirement of `matchExpressions[i]`: `{key, operator: In|NotIn|Exists|DoesNotExist, values}`.
fn match_expression(i: usize, expr: &Value) -> Result<Requirement, String> {
    let Value::Object(expr) = expr else {
        return Err(format!(
            "matchExpressions[{i}]: expected an object, got {expr}"
        ));
    };
    let key = match expr.get("key") {
        Some(Value::String(k)) => k.as_str(),
        None | Some(Value::Null) => "",
        Some(other) => {
            return Err(format!(
                "matchExpressions[{i}].key: expected a string, got {other}"
            ));
        }
    };
    let op_name = match expr.get("operator") {
        Some(Value::String(o)) => o.as_str(),
        None | Some(Value::Null) => "",
        Some(other) => {
            return Err(format!(
                "matchExpressions[{i}].operator: expected a string, got {other}"
            ));
        }
    };
    let op = match op_name {
        "In" => LabelOperator::In,
        "NotIn" => LabelOperator::NotIn,
        "Exists" => LabelOperator::Exists,
        "DoesNotExist" => LabelOperator::DoesNotExist,
        other => {
            return Err(format!(
                "{} is not a valid label selector operator",
                go_quote(other)
            ));
        }
    };
    let values = expect_string_list(expr.get("values"), &format!("matchExpressions[{i}].values"))?;
    Requirement::new(key, op, values)
}

impl LabelSelector {
    /// The selector that matches every label set.
    pub fn everything() -> Self {
        LabelSelector::default()
    }

    /// The selector that matches nothing (`labels.Nothing()`, what apimachinery's
    /// `LabelSelectorAsSelector` returns for a nil selector, e.g. a `null` PDB selector in
    /// policy/v1).
    pub fn nothing() -> Self {
        LabelSelector {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    /// Builds a selector from a `metav1.LabelSelector` JSON object
    /// (`{matchLabels: {k: v}, matchExpressions: [{key, operator: In|NotIn|Exists|DoesNotExist, values}]}`).
    ///
    /// `null`, an absent selector and `{}` select everything (in policy/v1 an empty PDB selector
    /// selects every pod of the namespace; callers that want apimachinery's "nil selects nothing"
    /// use [`LabelSelector::nothing`] themselves). Keys and values are validated like the
    /// apiserver does.
    pub fn from_label_selector_json(sel: &Value) -> Result<Self, String> {
        let obj = match sel {
            Value::Null => return Ok(Self::everything()),
            Value::Object(o) => o,
            other => return Err(format!("a label selector must be an object, got {other}")),
        };
        let mut requirements = Vec::new();
        match obj.get("matchLabels") {
            None | Some(Value::Null) => {}
            Some(Value::Object(labels)) => {
                for (k, v) in labels {
                    let Value::String(v) = v else {
                        return Err(format!("matchLabels[{k}]: expected a string, got {v}"));
                    };
                    requirements.push(Requirement::new(k, LabelOperator::Equals, vec![v.clone()])?);
                }
            }
            Some(other) => return Err(format!("matchLabels: expected an object, got {other}")),
        }
        match obj.get("matchExpressions") {
            None | Some(Value::Null) => {}
            Some(Value::Array(exprs)) => {
                for (i, expr) in exprs.iter().enumerate() {
                    requirements.push(match_expression(i, expr)?);
                }
            }
            Some(other) => {
                return Err(format!("matchExpressions: expected a list, got {other}"));
            }
        }
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector {
            requirements,
            nothing: false,
        })
    }

    /// Whether the label set satisfies every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Whether the object's `metadata.labels` satisfy the selector (non-string label values are
    /// ignored).
    pub fn matches_object(&self, obj: &Value) -> bool {
        if self.nothing {
            return false;
        }
        if self.requirements.is_empty() {
            return true;
        }
        let labels: BTreeMap<String, String> = obj
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        self.matches(&labels)
    }

    /// Whether the selector has no requirements (and so matches everything).
    pub fn is_everything(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }

    /// Whether this is the selector that matches nothing.
    pub fn is_nothing(&self) -> bool {
        self.nothing
    }

    /// The requirements, sorted by key.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }
}

impl fmt::Display for LabelSelector {
    /// The canonical string form (requirements sorted by key, comma-separated).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}
