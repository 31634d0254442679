//! Which rollout events a status write announces: a pure function of the status the write
//! replaced and the status written, and the JSON each event is sent as.

use bootc_crds::bounds::truncate;
use bootc_crds::conditions::{self, pool_degraded};
use bootc_crds::pool::BootcNodePoolStatus;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};

/// The longest `text` and `message` sent (characters): a chat line, not a log.
pub const TEXT_MAX_LEN: usize = 1000;

/// A rollout event a webhook receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// The target digest changed and nodes need it.
    RolloutStarted,
    /// The target digest changed to one the pool's `deployHistory` already held.
    RolledBack,
    /// The pool's `Degraded` condition became `RolloutHalted`.
    RolloutHalted,
    /// `UpToDate` became True after a rollout.
    RolloutCompleted,
}

/// Every event, in the order one status write announces them.
pub const EVENT_KINDS: [EventKind; 4] = [
    EventKind::RolloutStarted,
    EventKind::RolledBack,
    EventKind::RolloutHalted,
    EventKind::RolloutCompleted,
];

impl EventKind {
    /// The name sent as `event` and used as the metrics label.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::RolloutStarted => "RolloutStarted",
            EventKind::RolledBack => "RolledBack",
            EventKind::RolloutHalted => "RolloutHalted",
            EventKind::RolloutCompleted => "RolloutCompleted",
        }
    }
}

/// One event to announce: what happened to which pool, with the target as the new
/// status names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// What happened.
    pub event: EventKind,
    /// The pool's name.
    pub pool: String,
    /// The target digest, when the status has one.
    pub digest: Option<String>,
    /// The pinned target image, when the status has one.
    pub image: Option<String>,
    /// The target's version label, when known.
    pub version: Option<String>,
    /// What the status says about it (for a halt, the `Degraded` message).
    pub message: String,
    /// One line for people: what a chat shows.
    pub text: String,
}

fn condition<'a>(status: Option<&'a BootcNodePoolStatus>, type_: &str) -> Option<(bool, &'a str)> {
    status?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status == "True", c.reason.as_str()))
}

/// The events that the write of `new` over `old` announces, in order: a new target
/// (`RolledBack` when the pool ran it before, else `RolloutStarted` when nodes need it),
/// a halt, a completion. A write that changes none of these announces nothing, so
/// writing the same status again never repeats an event.
pub fn transitions(old: Option<&BootcNodePoolStatus>, new: &BootcNodePoolStatus) -> Vec<EventKind> {
    let mut out = Vec::new();
    let old_digest = old.and_then(|s| s.target_digest.as_deref());
    let up_to_date = condition(Some(new), conditions::UP_TO_DATE).is_some_and(|(t, _)| t);
    if let Some(digest) = new.target_digest.as_deref()
        && old_digest != Some(digest)
    {
        let ran_before = old_digest.is_some()
            && old.is_some_and(|s| s.deploy_history.iter().any(|e| e.digest == digest));
        if ran_before {
            out.push(EventKind::RolledBack);
        } else if !up_to_date {
            out.push(EventKind::RolloutStarted);
        }
    }
    let degraded = |s| condition(s, conditions::DEGRADED).map(|(_, reason)| reason);
    if degraded(Some(new)) == Some(pool_degraded::ROLLOUT_HALTED)
        && degraded(old) != Some(pool_degraded::ROLLOUT_HALTED)
    {
        out.push(EventKind::RolloutHalted);
    }
    let was_up = condition(old, conditions::UP_TO_DATE).map(|(t, _)| t);
    if up_to_date && was_up == Some(false) {
        out.push(EventKind::RolloutCompleted);
    }
    out
}

/// `event` of `pool` described from the status written.
pub fn describe(event: EventKind, pool: &str, new: &BootcNodePoolStatus) -> Notice {
    let image = new.target_image.clone();
    let shown = image.clone().unwrap_or_else(|| "(no target)".to_owned());
    let short = new.target_short_digest.clone().unwrap_or_else(|| {
        let digest = new.target_digest.as_deref().unwrap_or_default();
        digest
            .trim_start_matches("sha256:")
            .chars()
            .take(12)
            .collect()
    });
    let what = match &new.target_version {
        Some(v) => format!("version {v} ({short})"),
        None => short,
    };
    let total = new.node_count;
    let to_update = total.saturating_sub(new.updated_count);
    let (message, sentence) = match event {
        EventKind::RolloutStarted => (
            format!("rolling out {shown} to {to_update} of {total} nodes"),
            format!("rollout of {what} started, {to_update} of {total} nodes to update"),
        ),
        EventKind::RolledBack => (
            format!(
                "back to {shown}, which the pool ran before; {to_update} of {total} nodes to update"
            ),
            format!("rolled back to {what}, {to_update} of {total} nodes to update"),
        ),
        EventKind::RolloutHalted => {
            let why = condition_message(new, conditions::DEGRADED);
            (why.clone(), format!("rollout of {what} halted: {why}"))
        }
        EventKind::RolloutCompleted => (
            format!("all {total} nodes run {shown}"),
            format!("rollout of {what} completed, all {total} nodes updated"),
        ),
    };
    Notice {
        event,
        pool: pool.to_owned(),
        digest: new.target_digest.clone(),
        image,
        version: new.target_version.clone(),
        message: one_line(message),
        text: one_line(format!("Pool {pool}: {sentence}.")),
    }
}

fn condition_message(status: &BootcNodePoolStatus, type_: &str) -> String {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

/// `text` on one line (line breaks and tabs become spaces), cut to [`TEXT_MAX_LEN`].
fn one_line(text: String) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    truncate(flat, TEXT_MAX_LEN)
}

impl Notice {
    /// The JSON body a webhook receives; `time` is when the event was seen.
    pub fn payload(&self, time: DateTime<Utc>) -> Value {
        json!({
            "event": self.event.as_str(),
            "pool": self.pool,
            "digest": self.digest,
            "image": self.image,
            "version": self.version,
            "message": self.message,
            "time": time.to_rfc3339_opts(SecondsFormat::Secs, true),
            "text": self.text,
        })
    }
}
