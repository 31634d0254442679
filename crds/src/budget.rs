//! `maxUnavailable` / `maxStaging`: an integer or a percentage of the pool, resolved to a count.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use schemars::Schema;
use serde_json::json;

/// A budget written as a percentage: `1%` to `100%`, no leading zeros.
pub const PERCENT_PATTERN: &str = "^(100|[1-9][0-9]?)%$";
/// The longest budget string, `100%`.
pub const PERCENT_MAX_LEN: usize = 4;

/// Schema transform for a budget field (an int-or-string): OpenAPI keywords, each of which
/// applies only to the kind of value it fits, say what [`Budget::parse`] accepts (but for
/// leading zeros): an integer from 1 to the int32 maximum (`minimum`, `maximum`), or a
/// percentage (`pattern`, `maxLength`). No CEL rule: kube-apiserver before 1.34 ignores
/// `maxLength` on an int-or-string when it estimates a rule's cost, so a rule reading one
/// counts as reading a string of unbounded length (`docs/architecture.md`, "Validation
/// cost"). `anyOf` branches with their own `type` would say the same, but a structural
/// schema allows typed branches under an int-or-string only as the bare
/// `anyOf: [{type: integer}, {type: string}]`.
pub fn schema(schema: &mut Schema) {
    if let Some(object) = schema.as_object_mut() {
        object.extend([
            ("minimum".to_owned(), json!(1)),
            ("maximum".to_owned(), json!(i32::MAX)),
            ("maxLength".to_owned(), json!(PERCENT_MAX_LEN)),
            ("pattern".to_owned(), json!(PERCENT_PATTERN)),
        ]);
    }
}

/// Why a budget value cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    /// An integer below 1.
    #[error("{value} is not allowed: use an integer of at least 1 or a percentage from 1% to 100%")]
    NotPositive {
        /// The integer given.
        value: i32,
    },
    /// A percentage outside 1%..=100%.
    #[error("{value} is out of range: a percentage must be from 1% to 100%")]
    PercentOutOfRange {
        /// The string given.
        value: String,
    },
    /// A string that is not `<digits>%`.
    #[error("{value:?} is neither an integer nor a percentage such as \"25%\"")]
    Malformed {
        /// The string given.
        value: String,
    },
}

/// A checked budget: a fixed count or a percentage of the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// At most this many nodes (at least 1).
    Count(u32),
    /// This percentage of the pool, rounded down, but at least one node (1..=100).
    Percent(u32),
}

impl Budget {
    /// Checks a budget as written in a spec.
    pub fn parse(value: &IntOrString) -> Result<Self, BudgetError> {
        match value {
            IntOrString::Int(n) => u32::try_from(*n)
                .ok()
                .filter(|n| *n >= 1)
                .map(Budget::Count)
                .ok_or(BudgetError::NotPositive { value: *n }),
            IntOrString::String(s) => {
                let digits = s
                    .strip_suffix('%')
                    .ok_or_else(|| BudgetError::Malformed { value: s.clone() })?;
                if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
                    return Err(BudgetError::Malformed { value: s.clone() });
                }
                // Many digits overflow u32: that is out of range, not malformed.
                match digits.parse::<u32>() {
                    Ok(p) if (1..=100).contains(&p) => Ok(Budget::Percent(p)),
                    _ => Err(BudgetError::PercentOutOfRange { value: s.clone() }),
                }
            }
        }
    }

    /// The number of nodes this budget allows in a pool of `pool_size` nodes: a count as
    /// given, a percentage rounded down, never less than 1.
    pub fn resolve(self, pool_size: u32) -> u32 {
        match self {
            Budget::Count(n) => n,
            Budget::Percent(p) => {
                let scaled = u64::from(pool_size) * u64::from(p) / 100;
                u32::try_from(scaled).unwrap_or(u32::MAX).max(1)
            }
        }
    }
}

/// Parses and resolves in one step; `None` (an unset field) resolves to `unset`.
pub fn resolve_budget(
    value: Option<&IntOrString>,
    pool_size: u32,
    unset: u32,
) -> Result<u32, BudgetError> {
    match value {
        None => Ok(unset),
        Some(v) => Ok(Budget::parse(v)?.resolve(pool_size)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> IntOrString {
        IntOrString::String(v.to_string())
    }

    #[test]
    fn resolution_table() {
        let cases: &[(IntOrString, u32, u32)] = &[
            (IntOrString::Int(1), 10, 1),
            (IntOrString::Int(3), 10, 3),
            (IntOrString::Int(50), 10, 50),
            (IntOrString::Int(2), 0, 2),
            (s("10%"), 10, 1),
            (s("10%"), 9, 1),
            (s("10%"), 19, 1),
            (s("10%"), 20, 2),
            (s("25%"), 10, 2),
            (s("30%"), 10, 3),
            (s("33%"), 100, 33),
            (s("50%"), 5, 2),
            (s("99%"), 100, 99),
            (s("100%"), 7, 7),
            (s("1%"), 1000, 10),
            (s("1%"), 99, 1),
            (s("5%"), 1000, 50),
            (s("10%"), 200, 20),
            (s("50%"), 0, 1),
            (s("100%"), 1, 1),
            (s("100%"), u32::MAX, u32::MAX),
            (s("007%"), 100, 7),
        ];
        for (value, size, want) in cases {
            let got = Budget::parse(value).map(|b| b.resolve(*size));
            assert_eq!(got, Ok(*want), "{value:?} of {size}");
        }
    }

    #[test]
    fn refusal_table() {
        let cases: &[(IntOrString, BudgetError)] = &[
            (IntOrString::Int(0), BudgetError::NotPositive { value: 0 }),
            (IntOrString::Int(-1), BudgetError::NotPositive { value: -1 }),
            (
                IntOrString::Int(i32::MIN),
                BudgetError::NotPositive { value: i32::MIN },
            ),
            (
                s("0%"),
                BudgetError::PercentOutOfRange { value: "0%".into() },
            ),
            (
                s("101%"),
                BudgetError::PercentOutOfRange {
                    value: "101%".into(),
                },
            ),
            (
                s("99999999999%"),
                BudgetError::PercentOutOfRange {
                    value: "99999999999%".into(),
                },
            ),
            (
                s("-5%"),
                BudgetError::Malformed {
                    value: "-5%".into(),
                },
            ),
            (s("10"), BudgetError::Malformed { value: "10".into() }),
            (s("%"), BudgetError::Malformed { value: "%".into() }),
            (s(""), BudgetError::Malformed { value: "".into() }),
            (
                s("10.5%"),
                BudgetError::Malformed {
                    value: "10.5%".into(),
                },
            ),
            (
                s(" 10%"),
                BudgetError::Malformed {
                    value: " 10%".into(),
                },
            ),
            (
                s("ten%"),
                BudgetError::Malformed {
                    value: "ten%".into(),
                },
            ),
            (
                s("10%%"),
                BudgetError::Malformed {
                    value: "10%%".into(),
                },
            ),
        ];
        for (value, want) in cases {
            assert_eq!(Budget::parse(value).as_ref(), Err(want), "{value:?}");
        }
    }

    #[test]
    fn unset_uses_the_default() {
        assert_eq!(resolve_budget(None, 10, 1), Ok(1));
        assert_eq!(resolve_budget(None, 10, u32::MAX), Ok(u32::MAX));
        assert_eq!(resolve_budget(Some(&s("20%")), 10, 1), Ok(2));
        assert!(resolve_budget(Some(&IntOrString::Int(0)), 10, 1).is_err());
    }

    #[test]
    fn messages_name_the_value() {
        let msg = Budget::parse(&s("0%")).unwrap_err().to_string();
        assert_eq!(
            msg,
            "0% is out of range: a percentage must be from 1% to 100%"
        );
        let msg = Budget::parse(&s("10")).unwrap_err().to_string();
        assert_eq!(
            msg,
            "\"10\" is neither an integer nor a percentage such as \"25%\""
        );
    }
}
