//! The pool's target: the pinned image it rolls out, decided from the spec, what the
//! registry said this time and the status written before. Every fallback lives here: a
//! tag that cannot be resolved keeps the last target resolved for the same repository,
//! and says why.

use std::time::Duration;

use bootc_crds::ImageRef;
use bootc_crds::pool::BootcNodePoolSpec;
use chrono::{DateTime, Utc};

pub use super::world::Target;
use super::world::{Lookup, Snapshot};

/// Why a pool has no target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetProblem {
    /// The spec is invalid: every problem, with its field path.
    InvalidSpec(Vec<String>),
    /// The tag could not be resolved and there is no earlier target to keep.
    Resolution(String),
}

/// The decision about the target, with what the status reports about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetDecision {
    /// The target rolled out, or why there is none.
    pub target: Result<Target, TargetProblem>,
    /// A problem that leaves the (last good) target rolling out: a tag that could not be
    /// resolved again, a pull Secret that cannot be used.
    pub problem: Option<String>,
    /// The target's version label, when known.
    pub version: Option<String>,
    /// For tags: when the answer in use was obtained and when the tag is asked again.
    pub resolve_times: Option<(DateTime<Utc>, DateTime<Utc>)>,
    /// When to plan again for the next resolution.
    pub requeue_after: Option<Duration>,
    /// `spec.image.ref` pins a digest: there is no tag to resolve.
    pub pinned: bool,
}

/// How often a tag is resolved: `spec.image.resolveIntervalSeconds`, at least 30 s.
pub fn resolve_interval(spec: &bootc_crds::pool::BootcNodePoolSpec) -> Duration {
    Duration::from_secs(u64::try_from(spec.image.resolve_interval_seconds.max(30)).unwrap_or(300))
}

/// The spec's problems, or `None` when it is valid.
pub fn spec_problems(spec: &bootc_crds::pool::BootcNodePoolSpec) -> Option<Vec<String>> {
    spec.validate()
        .err()
        .map(|errors| errors.0.iter().map(ToString::to_string).collect())
}

fn chrono_of(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::minutes(5))
}

/// What the spec alone says of the target: its problems (`None` when it is valid) and
/// the target it pins (`None` for a tag). Found once per spec and kept with a copy of
/// it between plans ([`super::Settled`]): checking a spec and parsing its reference
/// cost a one-change reconcile more than comparing the spec with the last one.
#[derive(Debug)]
pub(super) struct SpecRead {
    spec: BootcNodePoolSpec,
    problems: Option<Vec<String>>,
    pinned: Option<Target>,
}

impl SpecRead {
    fn of(spec: &BootcNodePoolSpec) -> SpecRead {
        SpecRead {
            spec: spec.clone(),
            problems: spec_problems(spec),
            pinned: Target::from_ref(&spec.image.r#ref),
        }
    }
}

/// The spec's problems and pinned target, as [`SpecRead`] found them for this spec.
fn read_spec(snap: &Snapshot) -> (Option<Vec<String>>, Option<Target>) {
    let spec = &snap.pool.spec;
    let mut kept = snap.settled.lock();
    let slot = kept.spec_read();
    match slot {
        Some(read) if read.spec == *spec => (read.problems.clone(), read.pinned.clone()),
        _ => {
            let read = SpecRead::of(spec);
            let found = (read.problems.clone(), read.pinned.clone());
            *slot = Some(read);
            found
        }
    }
}

/// Decides the pool's target.
pub fn decide(snap: &Snapshot) -> TargetDecision {
    let pool = &snap.pool;
    let (problems, pinned) = read_spec(snap);
    let mut out = TargetDecision {
        // Every way below sets the target; a message is written only where it is kept.
        target: Err(TargetProblem::Resolution(String::new())),
        problem: snap.pull_secret.problem.clone(),
        version: None,
        resolve_times: None,
        requeue_after: None,
        pinned: pinned.is_some(),
    };
    if let Some(problems) = problems {
        out.target = Err(TargetProblem::InvalidSpec(problems));
        out.problem = None;
        return out;
    }
    if let Some(target) = pinned {
        // Pinned: nothing to resolve; the version is known once a tag gave this digest
        // (the status's, while the target stays; else the history's entry for it, as
        // after a rollback by digest), and never the version of another digest.
        let digest = target.digest.as_str();
        let status = pool.status.as_ref();
        out.version = status
            .filter(|s| s.target_digest.as_deref() == Some(digest))
            .and_then(|s| s.target_version.clone())
            .or_else(|| {
                status?
                    .deploy_history
                    .iter()
                    .find(|e| e.digest == digest)
                    .and_then(|e| e.version.clone())
            });
        out.target = Ok(target);
        return out;
    }
    let interval = resolve_interval(&pool.spec);
    match &snap.lookup {
        Lookup::NotAsked => {
            out.target = Err(TargetProblem::Resolution(format!(
                "image.ref {:?} is a tag that has not been resolved yet",
                pool.spec.image.r#ref
            )));
        }
        Lookup::Resolved {
            target,
            version,
            at,
        } => {
            let next = *at + chrono_of(interval);
            out.target = Ok(target.clone());
            out.version = version.clone();
            out.resolve_times = Some((*at, next));
            out.requeue_after = Some(until(snap.now, next));
        }
        Lookup::Failed {
            message,
            retry_after,
        } => failed(snap, &mut out, message, (*retry_after).min(interval)),
    }
    out
}

/// The wait until `t`, and a little more so that `t` has passed.
fn until(now: DateTime<Utc>, t: DateTime<Utc>) -> Duration {
    (t - now).to_std().unwrap_or(Duration::ZERO) + Duration::from_millis(10)
}

/// A tag that could not be resolved: the last target resolved for the same repository
/// keeps rolling out, and the problem says so; without one there is no target.
fn failed(snap: &Snapshot, out: &mut TargetDecision, message: &str, retry: Duration) {
    let message = match &snap.pull_secret.problem {
        Some(p) => format!("{message} ({p})"),
        None => message.to_owned(),
    };
    out.requeue_after = Some(retry);
    let reference = ImageRef::parse(&snap.pool.spec.image.r#ref).ok();
    let last = snap.pool.status.as_ref().and_then(|s| {
        let image = s.target_image.as_deref()?;
        let parsed = ImageRef::parse(image).ok()?;
        if parsed.name() != reference.as_ref()?.name() {
            return None;
        }
        let target = Target::from_ref(image)?;
        let last = s
            .last_resolved_time
            .as_ref()
            .and_then(bootc_crds::conditions::from_time)?;
        Some((target, s.target_version.clone(), last))
    });
    match last {
        Some((target, version, last)) => {
            out.target = Ok(target);
            out.version = version;
            out.resolve_times = Some((last, snap.now + chrono_of(retry)));
            out.problem = Some(format!(
                "{message}; still rolling out the last resolved target"
            ));
        }
        None => {
            out.target = Err(TargetProblem::Resolution(message));
            out.problem = None;
        }
    }
}
