//! The pool's degraded nodes counted by reason (`status.degradedByReason`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::bounds::{CONDITION_REASON_MAX_LEN, CONDITION_REASON_PATTERN};

/// The most reasons `status.degradedByReason` lists (every node reason and every reason
/// the controller itself finds fit several times over).
pub const MAX_DEGRADED_REASONS: usize = 32;

/// How many of the pool's degraded nodes have one reason.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DegradedReason {
    /// The node's own `Degraded` reason (`InsufficientSpace`, `ImageNotFound`, …), or
    /// the one the controller found (`DrainTimeout`, `RebootTimeout`, `UnhealthyUnits`,
    /// `BootHealthTimeout`).
    #[schemars(length(min = 1, max = CONDITION_REASON_MAX_LEN), regex(pattern = CONDITION_REASON_PATTERN))]
    pub reason: String,

    /// How many degraded nodes have it.
    #[schemars(range(min = 1))]
    pub count: i32,
}

/// `status.degradedByReason` from each degraded node's reason: most nodes first, then by
/// reason; at most [`MAX_DEGRADED_REASONS`] entries.
pub fn degraded_by_reason<'a>(reasons: impl IntoIterator<Item = &'a str>) -> Vec<DegradedReason> {
    let mut counts = std::collections::BTreeMap::<&str, i32>::new();
    for reason in reasons {
        *counts.entry(reason).or_default() += 1;
    }
    let mut list: Vec<DegradedReason> = counts
        .into_iter()
        .map(|(reason, count)| DegradedReason {
            reason: reason.to_owned(),
            count,
        })
        .collect();
    list.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.reason.cmp(&b.reason)));
    list.truncate(MAX_DEGRADED_REASONS);
    list
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_counted_most_first_then_by_name() {
        let list = degraded_by_reason([
            "ImageNotFound",
            "InsufficientSpace",
            "Error",
            "InsufficientSpace",
        ]);
        let pairs: Vec<(&str, i32)> = list.iter().map(|r| (r.reason.as_str(), r.count)).collect();
        assert_eq!(
            pairs,
            [("InsufficientSpace", 2), ("Error", 1), ("ImageNotFound", 1)]
        );
    }
}
