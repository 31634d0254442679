//! [`Column`]: a `Table` column's definition and how its cells are computed; the columns of a CRD version, whose
//! cells come from JSONPath expressions, as the apiextensions table convertor computes them.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::docs::docs;
use super::fields::{str_at, time_at};
use super::time::{age, date_cell};
use crate::jsonpath;

/// A function computing a cell of a built-in kind's column from the object and the current time.
pub type CellFn = fn(&Value, DateTime<Utc>) -> Value;

/// One column of a `Table`: its definition, and how its cells are computed.
#[derive(Debug, Clone)]
pub struct Column {
    /// Column header (kubectl upper-cases it).
    pub name: String,
    /// OpenAPI type of the cells: `string`, `integer`, `number`, `boolean` or `date` (CRD columns).
    pub type_: String,
    /// OpenAPI format; `name` marks the column holding the object's name.
    pub format: String,
    /// Human-readable description.
    pub description: String,
    /// 0 for default columns; kubectl shows higher priorities only with `-o wide`.
    pub priority: i32,
    /// A CRD column's JSONPath; `None` (without `compute`) means the object's name.
    pub json_path: Option<String>,
    /// Computes a built-in kind's cell, as kube-apiserver's printers do; takes precedence over `json_path`.
    pub compute: Option<CellFn>,
}

impl Column {
    pub(super) fn new(name: &str, type_: &str, description: &str) -> Column {
        Column {
            name: name.to_string(),
            type_: type_.to_string(),
            format: String::new(),
            description: description.to_string(),
            priority: 0,
            json_path: None,
            compute: None,
        }
    }

    pub(super) fn computed(name: &str, type_: &str, description: &str, compute: CellFn) -> Column {
        Column {
            compute: Some(compute),
            ..Column::new(name, type_, description)
        }
    }

    pub(super) fn wide(mut self) -> Column {
        self.priority = 1;
        self
    }

    /// The column's `TableColumnDefinition`.
    pub fn definition(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.type_,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }

    /// The cell of this column for `obj`, as kube-apiserver computes it.
    pub fn cell(&self, obj: &Value, now: DateTime<Utc>) -> Value {
        if let Some(compute) = self.compute {
            return compute(obj, now);
        }
        match &self.json_path {
            None => Value::String(str_at(obj, &["metadata", "name"]).to_string()),
            Some(path) => crd_cell(path, &self.type_, obj, now),
        }
    }
}

/// A CRD column cell, as the apiextensions table convertor computes it: the first result of the path, printed like
/// `kubectl -o jsonpath` for `string` columns and converted to the column's type otherwise; `null` when the path
/// finds nothing, fails, or the value does not fit the type.
fn crd_cell(path: &str, type_: &str, obj: &Value, now: DateTime<Utc>) -> Value {
    let Ok(results) = jsonpath::find_results(path, obj) else {
        return Value::Null;
    };
    let Some(value) = results.first().and_then(|set| set.first()) else {
        return Value::Null;
    };
    if type_ == "string" {
        return Value::String(jsonpath::go_text(value));
    }
    if value.is_null() {
        return Value::Null;
    }
    match type_ {
        "integer" => match value {
            Value::Number(n) => match n.as_i64() {
                Some(i) => Value::from(i),
                None => Value::from(go_float_to_int(n.as_f64().unwrap_or(f64::NAN))),
            },
            _ => Value::Null,
        },
        "number" => match value {
            Value::Number(n) => go_json_float(n.as_f64().unwrap_or(f64::NAN)),
            _ => Value::Null,
        },
        "boolean" => match value {
            Value::Bool(b) => Value::Bool(*b),
            _ => Value::Null,
        },
        "date" => match value {
            Value::String(s) => Value::String(date_cell(s, now)),
            _ => Value::Null,
        },
        _ => Value::Null,
    }
}

/// Go's `int64(float64)` on amd64: truncation, and the minimum int64 for what does not fit.
fn go_float_to_int(f: f64) -> i64 {
    if f.is_finite() && f > -9.223_372_036_854_776e18 && f < 9.223_372_036_854_776e18 {
        f as i64
    } else {
        i64::MIN
    }
}

/// A float as Go's encoding/json writes it: integral values without a fraction.
fn go_json_float(f: f64) -> Value {
    if f.is_finite() && f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 {
        Value::from(f as i64)
    } else {
        serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
    }
}

/// The columns kube-apiserver shows for a CRD version (an element of the CRD's `spec.versions`): Name first, then its
/// `additionalPrinterColumns`, or Age when it has none. Like kube-apiserver, stops at a column whose JSONPath does not
/// parse.
pub fn crd_columns(crd_version: &Value) -> Vec<Column> {
    let mut columns = vec![name_column()];
    let defined = crd_version
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
        .filter(|cols| !cols.is_empty());
    let Some(defined) = defined else {
        columns.push(Column {
            json_path: Some(".metadata.creationTimestamp".to_string()),
            ..Column::new("Age", "date", &docs().creation_timestamp)
        });
        return columns;
    };
    for col in defined {
        let path = str_at(col, &["jsonPath"]).to_string();
        if jsonpath::validate(&path).is_err() {
            break;
        }
        let description = match str_at(col, &["description"]) {
            "" => format!("Custom resource definition column (in JSONPath format): {path}"),
            d => d.to_string(),
        };
        columns.push(Column {
            name: str_at(col, &["name"]).to_string(),
            type_: str_at(col, &["type"]).to_string(),
            format: str_at(col, &["format"]).to_string(),
            description,
            priority: col
                .get("priority")
                .and_then(Value::as_i64)
                .and_then(|p| i32::try_from(p).ok())
                .unwrap_or(0),
            json_path: Some(path),
            compute: None,
        });
    }
    columns
}

pub(super) fn name_column() -> Column {
    Column {
        format: "name".to_string(),
        ..Column::new("Name", "string", &docs().name)
    }
}

pub(super) fn age_column() -> Column {
    Column::computed("Age", "string", &docs().creation_timestamp, |obj, now| {
        Value::String(age(time_at(obj, &["metadata", "creationTimestamp"]), now))
    })
}
