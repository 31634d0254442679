//! The keywords of strings (`minLength`/`maxLength`, `pattern`, `format`) and
//! numbers (integer formats, `multipleOf`, `minimum`/`maximum`), and exact
//! comparison of JSON numbers.

use std::cmp::Ordering;

use serde_json::{Map, Number, Value};

use super::{Walker, is_integer};
use crate::error::{ErrorKind, SchemaError};
use crate::{format, gofmt, path, pattern};

/// `maximum` or `minimum`, each with its boolean `exclusive…` keyword.
#[derive(Debug, Clone, Copy)]
enum Bound {
    Maximum,
    Minimum,
}

impl Bound {
    /// The bound's keyword and its `exclusive…` keyword.
    fn keywords(self) -> (&'static str, &'static str) {
        match self {
            Self::Maximum => ("maximum", "exclusiveMaximum"),
            Self::Minimum => ("minimum", "exclusiveMinimum"),
        }
    }

    /// How a value beyond the bound compares with it.
    fn beyond(self) -> Ordering {
        match self {
            Self::Maximum => Ordering::Greater,
            Self::Minimum => Ordering::Less,
        }
    }

    /// The relation a valid value has to the bound, as the error puts it.
    fn relation(self, exclusive: bool) -> &'static str {
        match (self, exclusive) {
            (Self::Maximum, true) => "less than",
            (Self::Maximum, false) => "less than or equal to",
            (Self::Minimum, true) => "greater than",
            (Self::Minimum, false) => "greater than or equal to",
        }
    }
}

impl Walker {
    pub(super) fn check_string(
        &mut self,
        s: &Map<String, Value>,
        text: &str,
        value: &Value,
        path: &str,
    ) {
        let len = text.chars().count() as u64;
        if let Some(max) = self.kw_uint(s, "maxLength", path).filter(|max| len > *max) {
            self.openapi.push(SchemaError::new(
                path,
                ErrorKind::TooLong,
                Some(value.clone()),
                format!("may not be longer than {max}"),
            ));
        }
        if let Some(min) = self.kw_uint(s, "minLength", path).filter(|min| len < *min) {
            self.openapi.push(SchemaError::invalid(
                path,
                value.clone(),
                format!(
                    "{} should be at least {min} chars long",
                    path::in_body(path)
                ),
            ));
        }
        if let Some(p) = self.kw_str(s, "pattern", path) {
            match pattern::is_match(p, text) {
                Ok(true) => {}
                Ok(false) => self.openapi.push(SchemaError::invalid(
                    path,
                    value.clone(),
                    format!("{} should match '{p}'", path::in_body(path)),
                )),
                Err(e) => self.bad_schema(
                    path,
                    format!("pattern {} does not compile: {e}", gofmt::quote(p)),
                ),
            }
        }
        if let Some(f) = self.kw_str(s, "format", path)
            && format::check(f, text) == Some(false)
        {
            self.openapi.push(SchemaError::new(
                path,
                ErrorKind::TypeInvalid,
                Some(value.clone()),
                format!(
                    "{} must be of type {f}: {}",
                    path::in_body(path),
                    gofmt::quote(text)
                ),
            ));
        }
    }

    pub(super) fn check_number(
        &mut self,
        s: &Map<String, Value>,
        n: &Number,
        value: &Value,
        ty: Option<&str>,
        path: &str,
    ) {
        if ty == Some("integer") && is_integer(value) {
            self.check_integer_format(s, n, value, path);
        }
        if let Some(factor) = self.kw_num(s, "multipleOf", path) {
            if factor <= 0.0 {
                self.bad_schema(
                    path,
                    format!(
                        "multipleOf must be greater than 0, got {}",
                        gofmt::float(factor)
                    ),
                );
            } else if !is_multiple_of(n, factor) {
                self.openapi.push(SchemaError::invalid(
                    path,
                    value.clone(),
                    format!(
                        "{} should be a multiple of {}",
                        path::in_body(path),
                        gofmt::float(factor)
                    ),
                ));
            }
        }
        self.check_bound(s, n, value, path, Bound::Maximum);
        self.check_bound(s, n, value, path, Bound::Minimum);
    }

    /// `format: int32`/`int64` on an integer: the value must fit.
    fn check_integer_format(
        &mut self,
        s: &Map<String, Value>,
        n: &Number,
        value: &Value,
        path: &str,
    ) {
        let fits = match self.kw_str(s, "format", path) {
            Some("int32") => n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
            Some("int64") => n.is_i64(),
            _ => true,
        };
        if !fits {
            let f = self.kw_str(s, "format", path).unwrap_or_default();
            self.openapi.push(SchemaError::invalid(
                path,
                value.clone(),
                format!("Checked value must be of type integer with format {f} in {path}"),
            ));
        }
    }

    /// `maximum` or `minimum`, inclusive unless its `exclusive…` keyword says not.
    fn check_bound(
        &mut self,
        s: &Map<String, Value>,
        n: &Number,
        value: &Value,
        path: &str,
        bound: Bound,
    ) {
        let (key, exclusive_key) = bound.keywords();
        let Some(limit) = self.kw_num(s, key, path) else {
            return;
        };
        let exclusive = self.kw_bool(s, exclusive_key, path);
        let ord = compare(n, limit);
        let bad = if exclusive {
            ord != Some(bound.beyond().reverse())
        } else {
            ord == Some(bound.beyond())
        };
        if bad {
            self.openapi.push(SchemaError::invalid(
                path,
                value.clone(),
                format!(
                    "{} should be {} {}",
                    path::in_body(path),
                    bound.relation(exclusive),
                    gofmt::float(limit)
                ),
            ));
        }
    }
}

pub(super) fn compare_numbers(x: &Number, y: &Number) -> Option<Ordering> {
    if let (Some(a), Some(b)) = (as_i128(x), as_i128(y)) {
        return Some(a.cmp(&b));
    }
    x.as_f64()?.partial_cmp(&y.as_f64()?)
}

fn as_i128(n: &Number) -> Option<i128> {
    n.as_i64()
        .map(i128::from)
        .or_else(|| n.as_u64().map(i128::from))
}

/// `n` compared with a bound given as a float, exactly when both are integral.
fn compare(n: &Number, bound: f64) -> Option<Ordering> {
    if let Some(i) = as_i128(n)
        && bound.fract() == 0.0
        && bound.abs() < 1.0e30
    {
        return Some(i.cmp(&(bound as i128)));
    }
    n.as_f64()?.partial_cmp(&bound)
}

/// `multipleOf`: exact for integers and integral factors, otherwise
/// go-openapi's float test (the quotient is an integer within 1e-9).
fn is_multiple_of(n: &Number, factor: f64) -> bool {
    if let Some(i) = as_i128(n)
        && factor.fract() == 0.0
        && factor < 1.0e30
    {
        let f = factor as i128;
        return f != 0 && i % f == 0;
    }
    let Some(data) = n.as_f64() else {
        return false;
    };
    let quotient = if factor < 1.0 {
        1.0 / factor * data
    } else {
        data / factor
    };
    if !quotient.is_finite() {
        return false;
    }
    let whole = quotient.trunc();
    if quotient == whole {
        return true;
    }
    let diff = (quotient - whole).abs();
    diff / (quotient.abs() + whole.abs()).min(f64::MAX) < 1e-9
}
