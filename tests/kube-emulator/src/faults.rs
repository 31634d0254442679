//! Fault injection (latency, a share of requests failing) and the request log that tests and benchmarks count API calls from.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::ApiError;

/// What to inject. The default injects nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaultConfig {
    /// Added before every request is served (see `latency_user_agent`).
    pub latency: Duration,
    /// Only requests whose User-Agent contains this wait the `latency` (all when unset):
    /// one client made slow, as a replica whose requests are held up in the network.
    pub latency_user_agent: Option<String>,
    /// Share (0.0 to 1.0) of matching requests answered with an error instead of being served.
    pub error_rate: f64,
    /// The codes injected errors use, picked at random: 500, 409 and 429 are meaningful.
    /// Empty means 500.
    pub error_codes: Vec<u16>,
    /// Only writes (create, update, patch, delete, deletecollection, eviction) fail.
    pub writes_only: bool,
    /// Only requests whose User-Agent contains this fail.
    pub user_agent: Option<String>,
    /// Only requests for this resource (plural, e.g. `bootcnodes`) fail.
    pub resource: Option<String>,
    /// Seed of the choice of failing requests, so a run can be repeated.
    pub seed: u64,
}

/// One request, as the log keeps it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RequestRecord {
    /// Arrival order, from 0.
    pub seq: u64,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`, or
    /// `discovery` for everything that is not a resource.
    pub verb: String,
    /// API group (`""` for core).
    pub group: String,
    /// Resource plural (`""` for discovery).
    pub resource: String,
    /// Subresource (`status`, `eviction`) or `""`.
    pub subresource: String,
    /// Namespace or `""`.
    pub namespace: String,
    /// Object name or `""`.
    pub name: String,
    /// The client's User-Agent.
    pub user_agent: String,
    /// The HTTP status answered (for watches: the status the stream started with).
    pub code: u16,
    /// True when the answer was an injected fault (the request was not served).
    pub injected: bool,
    /// True for `dryRun=All` requests (nothing stored).
    pub dry_run: bool,
    /// The request path, for debugging.
    pub path: String,
}

impl RequestRecord {
    /// True for verbs that change state.
    pub fn is_write(&self) -> bool {
        matches!(
            self.verb.as_str(),
            "create" | "update" | "patch" | "delete" | "deletecollection"
        )
    }

    /// `resource` or `resource/subresource`.
    pub fn full_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

/// Counts of logged requests.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RequestCounts {
    /// All requests.
    pub total: u64,
    /// Requests answered with an injected fault.
    pub injected: u64,
    /// By verb.
    pub by_verb: BTreeMap<String, u64>,
    /// By `verb resource[/subresource]`.
    pub by_verb_resource: BTreeMap<String, u64>,
    /// By User-Agent.
    pub by_user_agent: BTreeMap<String, u64>,
}

impl RequestCounts {
    /// Counts `records`.
    pub fn of<'a>(records: impl IntoIterator<Item = &'a RequestRecord>) -> Self {
        let mut c = RequestCounts::default();
        for r in records {
            c.total += 1;
            c.injected += u64::from(r.injected);
            *c.by_verb.entry(r.verb.clone()).or_default() += 1;
            *c.by_verb_resource
                .entry(format!("{} {}", r.verb, r.full_resource()))
                .or_default() += 1;
            *c.by_user_agent.entry(r.user_agent.clone()).or_default() += 1;
        }
        c
    }
}

/// The fault injector: a config and its random stream.
#[derive(Debug, Default)]
pub struct ApiFaults {
    config: FaultConfig,
    state: u64,
}

impl ApiFaults {
    /// Replaces the configuration and restarts its random stream from the seed.
    pub fn set(&mut self, config: FaultConfig) {
        self.state = config.seed ^ 0x9e37_79b9_7f4a_7c15;
        self.config = config;
    }

    /// The configuration.
    pub fn config(&self) -> &FaultConfig {
        &self.config
    }

    /// SplitMix64: small, good enough, and repeatable from a seed.
    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// The error to answer `request` with instead of serving it, if any.
    pub fn decide(&mut self, request: &RequestRecord) -> Option<ApiError> {
        let c = &self.config;
        if c.error_rate <= 0.0 || request.verb == "discovery" {
            return None;
        }
        let eviction = request.subresource == "eviction";
        if c.writes_only && !(request.is_write() || eviction) {
            return None;
        }
        if let Some(ua) = &c.user_agent
            && !request.user_agent.contains(ua.as_str())
        {
            return None;
        }
        if c.resource.as_ref().is_some_and(|r| *r != request.resource) {
            return None;
        }
        let draw = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        if draw >= self.config.error_rate {
            return None;
        }
        let codes = if self.config.error_codes.is_empty() {
            vec![500]
        } else {
            self.config.error_codes.clone()
        };
        let code = codes[(self.next() % codes.len() as u64) as usize];
        let mut e = match code {
            409 => ApiError::new(409, "Conflict", "injected fault: conflict"),
            429 => ApiError::too_many_requests(
                "injected fault: too many requests, please try again later",
                1,
            ),
            c => {
                let mut e = ApiError::internal("injected fault: internal error");
                e.code = c;
                e
            }
        };
        e.message = format!(
            "{} ({} {})",
            e.message,
            request.verb,
            request.full_resource()
        );
        Some(e)
    }
}

/// How long the injector asks `request` to wait.
pub fn latency(faults: &ApiFaults, request: &RequestRecord) -> Duration {
    let c = &faults.config;
    match &c.latency_user_agent {
        Some(ua) if !request.user_agent.contains(ua.as_str()) => Duration::ZERO,
        _ => c.latency,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(verb: &str) -> RequestRecord {
        RequestRecord {
            seq: 0,
            verb: verb.into(),
            group: "".into(),
            resource: "configmaps".into(),
            subresource: "".into(),
            namespace: "default".into(),
            name: "x".into(),
            user_agent: "test".into(),
            code: 200,
            injected: false,
            dry_run: false,
            path: "/".into(),
        }
    }

    #[test]
    fn nothing_is_injected_by_default() {
        let mut f = ApiFaults::default();
        assert!((0..1000).all(|_| f.decide(&req("create")).is_none()));
    }

    #[test]
    fn rate_is_respected_and_repeatable() {
        let config = FaultConfig {
            error_rate: 0.1,
            error_codes: vec![500, 409, 429],
            writes_only: true,
            seed: 7,
            ..Default::default()
        };
        let mut f = ApiFaults::default();
        f.set(config.clone());
        let first: Vec<Option<u16>> = (0..10_000)
            .map(|_| f.decide(&req("patch")).map(|e| e.code))
            .collect();
        let failed = first.iter().filter(|c| c.is_some()).count();
        assert!((800..1200).contains(&failed), "{failed}");
        for code in [500, 409, 429] {
            assert!(first.contains(&Some(code)), "{code}");
        }
        assert!(
            (0..1000).all(|_| f.decide(&req("get")).is_none()),
            "reads are spared"
        );
        f.set(config);
        let again: Vec<Option<u16>> = (0..10_000)
            .map(|_| f.decide(&req("patch")).map(|e| e.code))
            .collect();
        assert_eq!(first, again);
    }

    #[test]
    fn faults_can_be_kept_to_one_resource() {
        let mut f = ApiFaults::default();
        f.set(FaultConfig {
            error_rate: 1.0,
            resource: Some("bootcnodes".into()),
            ..Default::default()
        });
        let mut other = req("patch");
        other.resource = "nodes".into();
        let mut ours = req("patch");
        ours.resource = "bootcnodes".into();
        assert!(f.decide(&other).is_none());
        assert!(f.decide(&ours).is_some());
    }

    #[test]
    fn counters_count() {
        let mut a = req("get");
        let mut b = req("patch");
        b.subresource = "status".into();
        b.injected = true;
        a.user_agent = "agent".into();
        let c = RequestCounts::of([&a, &b, &b]);
        assert_eq!(c.total, 3);
        assert_eq!(c.injected, 2);
        assert_eq!(c.by_verb_resource["patch configmaps/status"], 2);
        assert_eq!(c.by_user_agent["agent"], 1);
    }
}
