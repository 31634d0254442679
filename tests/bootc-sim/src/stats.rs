//! Small measuring helpers: a seeded random stream, the process's peak resident size,
//! and percentiles from a Prometheus histogram's buckets.

use std::collections::BTreeMap;

/// SplitMix64: small and repeatable from a seed (for choosing agents to kill).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A stream from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x5851_f42d_4c95_7f2d)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A `kB` field of `/proc/self/status` (`VmHWM`, `VmRSS`), in MiB.
pub fn self_status_mib(field: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    Some(status_kib(&status, field)? / 1024.0)
}

/// A `kB` field of a `/proc/<pid>/status` text.
pub fn status_kib(status: &str, field: &str) -> Option<f64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// A histogram family as encoded: cumulative bucket counts by upper bound (summed over
/// every label set), the sum and the count.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    /// Upper bound (`f64::INFINITY` for `+Inf`) → cumulative count.
    pub buckets: Vec<(f64, u64)>,
    /// Sum of the observed values.
    pub sum: f64,
    /// Number of observations.
    pub count: u64,
}

/// The histogram `name` (e.g. `bootc_pool_reconcile_duration_seconds`) from an
/// OpenMetrics text, its series summed.
pub fn parse_histogram(text: &str, name: &str) -> Histogram {
    let mut buckets: BTreeMap<u64, (f64, u64)> = BTreeMap::new();
    let mut out = Histogram::default();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        let Some((series, value)) = rest.rsplit_once(' ') else {
            continue;
        };
        let value: f64 = match value.parse() {
            Ok(v) => v,
            Err(_) => continue,
        };
        if series.starts_with("_bucket{") {
            let Some(le) = series
                .split_once("le=\"")
                .and_then(|(_, r)| r.split_once('"'))
                .map(|(le, _)| le)
            else {
                continue;
            };
            let bound = if le == "+Inf" {
                f64::INFINITY
            } else {
                match le.parse::<f64>() {
                    Ok(b) => b,
                    Err(_) => continue,
                }
            };
            // Keyed by the bound's bits: bounds are positive, so their order is kept.
            let entry = buckets.entry(bound.to_bits()).or_insert((bound, 0));
            entry.1 += value as u64;
        } else if series.starts_with("_sum") {
            out.sum += value;
        } else if series.starts_with("_count") {
            out.count += value as u64;
        }
    }
    out.buckets = buckets.into_values().collect();
    out
}

impl Histogram {
    /// The `q` quantile (0..=1), interpolated linearly inside the bucket it falls in (as
    /// Prometheus' `histogram_quantile` does); `None` without observations. A quantile
    /// in the `+Inf` bucket is reported as the largest finite bound.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.buckets.last().map(|b| b.1)?;
        if total == 0 {
            return None;
        }
        let rank = q * total as f64;
        let mut lower = 0.0;
        let mut below = 0u64;
        for &(bound, cumulative) in &self.buckets {
            if cumulative as f64 >= rank && cumulative > below {
                if bound.is_infinite() {
                    return Some(lower);
                }
                let share = (rank - below as f64) / (cumulative - below) as f64;
                return Some(lower + (bound - lower) * share.clamp(0.0, 1.0));
            }
            lower = if bound.is_finite() { bound } else { lower };
            below = cumulative;
        }
        Some(lower)
    }
}

impl Histogram {
    /// What was observed after `earlier` (a scrape of the same process before this one):
    /// each bucket's count, the sum and the count less `earlier`'s.
    pub fn since(&self, earlier: &Histogram) -> Histogram {
        let before = |bound: f64| {
            earlier
                .buckets
                .iter()
                .find(|b| b.0.to_bits() == bound.to_bits())
                .map_or(0, |b| b.1)
        };
        Histogram {
            buckets: self
                .buckets
                .iter()
                .map(|&(bound, n)| (bound, n.saturating_sub(before(bound))))
                .collect(),
            sum: (self.sum - earlier.sum).max(0.0),
            count: self.count.saturating_sub(earlier.count),
        }
    }
}

/// `x` with `places` decimals, or `dash` when there is none.
pub fn or_dash(x: Option<f64>, places: usize, dash: &str) -> String {
    x.map_or_else(|| dash.to_owned(), |x| format!("{x:.places$}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn quantiles_from_buckets() {
        let text = "\
# TYPE x_seconds histogram
x_seconds_sum{pool=\"a\"} 1.5
x_seconds_count{pool=\"a\"} 10
x_seconds_bucket{le=\"0.01\",pool=\"a\"} 5
x_seconds_bucket{le=\"0.02\",pool=\"a\"} 9
x_seconds_bucket{le=\"+Inf\",pool=\"a\"} 10
x_seconds_sum{pool=\"b\"} 0.5
x_seconds_count{pool=\"b\"} 10
x_seconds_bucket{le=\"0.01\",pool=\"b\"} 5
x_seconds_bucket{le=\"0.02\",pool=\"b\"} 10
x_seconds_bucket{le=\"+Inf\",pool=\"b\"} 10
# EOF
";
        let h = parse_histogram(text, "x_seconds");
        assert_eq!(h.count, 20);
        assert_eq!(h.buckets.len(), 3);
        assert!((h.sum - 2.0).abs() < 1e-9);
        assert!((h.quantile(0.5).unwrap() - 0.01).abs() < 1e-9);
        // rank 19 of 20: in the +Inf bucket → the largest finite bound.
        assert!((h.quantile(0.99).unwrap() - 0.02).abs() < 1e-9);
        // rank 14: 0.01 + 0.01 * (14 - 10) / 9.
        assert!((h.quantile(0.7).unwrap() - (0.01 + 0.01 * 4.0 / 9.0)).abs() < 1e-9);
        assert_eq!(Histogram::default().quantile(0.5), None);
    }

    #[test]
    fn what_was_observed_since_an_earlier_scrape() {
        let at = |fast: u64, slow: u64| Histogram {
            buckets: vec![
                (0.01, fast),
                (0.1, fast + slow),
                (f64::INFINITY, fast + slow),
            ],
            sum: fast as f64 * 0.005 + slow as f64 * 0.05,
            count: fast + slow,
        };
        // 100 fast reconciles, then 1 fast and 99 slow ones.
        let later = at(101, 99).since(&at(100, 0));
        assert_eq!(later.count, 100);
        assert_eq!(
            later.buckets,
            vec![(0.01, 1), (0.1, 100), (f64::INFINITY, 100)]
        );
        assert!(later.quantile(0.5).unwrap() > 0.01);
        assert!(at(101, 99).quantile(0.5).unwrap() <= 0.01);
        assert_eq!(at(5, 5).since(&at(5, 5)).quantile(0.99), None);
    }

    #[test]
    fn rng_is_repeatable_and_in_range() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        for _ in 0..100 {
            let x = a.next_f64();
            assert!((0.0..1.0).contains(&x));
            assert_eq!(x.to_bits(), b.next_f64().to_bits());
        }
    }

    #[test]
    fn peak_rss_is_read() {
        assert!(self_status_mib("VmHWM").unwrap() > 0.0);
    }
}
