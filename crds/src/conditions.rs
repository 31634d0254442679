//! Condition types and reasons written by the controller (pools) and the agent (nodes).

use crate::bounds::{CONDITION_MESSAGE_MAX_LEN, truncate};

/// Pool condition: every node runs the target.
pub const UP_TO_DATE: &str = "UpToDate";
/// Pool and node condition: something needs an admin's attention.
pub const DEGRADED: &str = "Degraded";
/// Pool condition: the rollout is advancing (False/`Stalled` when it is not).
pub const PROGRESSING: &str = "Progressing";
/// Node condition: the agent has nothing to do.
pub const IDLE: &str = "Idle";
/// Node condition: the booted system is not the image it claims to be.
pub const DRIFTED: &str = "Drifted";

/// Reasons of the pool's `UpToDate` condition.
pub mod up_to_date {
    /// True: every node runs the target.
    pub const ALL_UPDATED: &str = "AllUpdated";
    /// False: nodes are being updated.
    pub const ROLLOUT_IN_PROGRESS: &str = "RolloutInProgress";
    /// False: work is left but `rollout.paused` is set.
    pub const PAUSED: &str = "Paused";
    /// False: work is left but no maintenance window is open.
    pub const OUTSIDE_MAINTENANCE_WINDOW: &str = "OutsideMaintenanceWindow";
    /// False: work is left but the alert gate is closed (matching alerts fire, or the
    /// gate cannot be asked and fails closed).
    pub const ALERT_GATE_CLOSED: &str = "AlertGateClosed";
    /// False: the canary nodes are updating or soaking; the rest of the pool waits.
    pub const CANARY: &str = "Canary";
    /// False: work is left but pools named in `rollout.after` are not up to date yet.
    pub const WAITING_FOR_POOLS: &str = "WaitingForPools";
    /// False: the target failed and the pool rolls back to the image it ran before.
    pub const ROLLING_BACK: &str = "RollingBack";
}

/// Reasons of the pool's `Degraded` condition, in order of precedence (first wins).
pub mod pool_degraded {
    /// The spec cannot be acted on; nothing is rolled out.
    pub const INVALID_SPEC: &str = "InvalidSpec";
    /// A node is selected by this pool and owned by another.
    pub const NODE_CONFLICT: &str = "NodeConflict";
    /// Too many unhealthy nodes hold reboot slots; no new approvals.
    pub const ROLLOUT_HALTED: &str = "RolloutHalted";
    /// `rollout.after` names pools that wait on this one: nothing is approved.
    pub const ORDERING_CYCLE: &str = "OrderingCycle";
    /// The target reached `haltAfterUnhealthy` with `onFailure: Rollback`: it is marked
    /// failed in `deployHistory` and the pool rolls back (or stays) on the image before.
    pub const TARGET_FAILED: &str = "TargetFailed";
    /// The alert gate cannot be asked (and fails closed): nothing is approved.
    pub const ALERT_GATE_UNREACHABLE: &str = "AlertGateUnreachable";
    /// The pool names a pull Secret in a namespace the controller may not read Secrets
    /// in: nothing of it is copied, and the nodes get no credentials from it.
    pub const PULL_SECRET_NOT_ALLOWED: &str = "PullSecretNotAllowed";
    /// The tag could not be resolved; the last good target is kept.
    pub const TAG_RESOLUTION_ERROR: &str = "TagResolutionError";
    /// One or more nodes report Degraded.
    pub const NODE_DEGRADED: &str = "NodeDegraded";
    /// False: nothing is wrong.
    pub const HEALTHY: &str = "Healthy";
    /// Every reason that sets `Degraded=True`, highest precedence first.
    pub const PRECEDENCE: [&str; 9] = [
        INVALID_SPEC,
        NODE_CONFLICT,
        ORDERING_CYCLE,
        TARGET_FAILED,
        ROLLOUT_HALTED,
        ALERT_GATE_UNREACHABLE,
        PULL_SECRET_NOT_ALLOWED,
        TAG_RESOLUTION_ERROR,
        NODE_DEGRADED,
    ];
}

/// Reasons of the pool's `Progressing` condition.
pub mod progressing {
    /// True: work remains and a node advanced in the last 10 minutes, or the rollout
    /// waits on purpose (a deliberate gate in status.gates).
    pub const ADVANCING: &str = "Advancing";
    /// False: work remains and no node has advanced for 10 minutes.
    pub const STALLED: &str = "Stalled";
    /// True: every node runs the target; nothing left to do.
    pub const COMPLETE: &str = "Complete";
    /// False: the spec is invalid, so nothing can advance until it is fixed.
    pub const INVALID_SPEC: &str = "InvalidSpec";
    /// True: every node that is not held runs the target; the held nodes (label
    /// `node.bootc.dev/hold=true`) wait for their hold to be lifted. Not a stall.
    pub const HELD_NODES_LEFT: &str = "HeldNodesLeft";
}

/// Reasons of the node's `Idle` condition.
pub mod idle {
    /// True: booted is desired.
    pub const IDLE: &str = "Idle";
    /// False: pulling the desired image.
    pub const STAGING: &str = "Staging";
    /// False: the desired image is staged, waiting for approval.
    pub const STAGED: &str = "Staged";
    /// False: rebooting into the desired image.
    pub const REBOOTING: &str = "Rebooting";
}

/// Reasons of the node's `Drifted` condition.
pub mod drifted {
    /// True: `/usr` carries a writable overlay (`bootc usr-overlay`): what runs may differ
    /// from the image until the next boot (or for good, with a persistent overlay).
    pub const USR_OVERLAY: &str = "UsrOverlay";
    /// True: bootc marks the booted deployment incompatible: it carries local changes
    /// (local package layering) that are not in the image.
    pub const LOCAL_CHANGES: &str = "LocalChanges";
    /// False: the booted system is its image, as far as bootc can tell.
    pub const IN_SYNC: &str = "InSync";
}

/// Reasons of the node's `Degraded` condition.
pub mod node_degraded {
    /// True: a host command failed; the message carries its stderr.
    pub const ERROR: &str = "Error";
    /// True: the registry refused the pull's credentials (wrong or missing pull Secret);
    /// the message carries bootc's `error:` line.
    pub const REGISTRY_AUTH_FAILED: &str = "RegistryAuthFailed";
    /// True: the host has too little free disk space to pull and stage the image: ostree
    /// refused to write below its free-space floor (`min-free-space-size` or
    /// `min-free-space-percent` "would be exceeded"), bootc's own check before a pull
    /// (bootc 1.14 and later: "Insufficient free space"), or the disk is full ("No space
    /// left on device"). Nothing was staged; the message carries bootc's `error:` line.
    pub const INSUFFICIENT_SPACE: &str = "InsufficientSpace";
    /// True: the registry has no such image ("manifest unknown", "name unknown", HTTP
    /// 404): the pool's image names a repository or digest the registry does not hold.
    /// The message carries bootc's `error:` line.
    pub const IMAGE_NOT_FOUND: &str = "ImageNotFound";
    /// True: the node cannot reach the registry ("connection refused", "no such host",
    /// "i/o timeout", …). The message carries bootc's `error:` line.
    pub const REGISTRY_UNREACHABLE: &str = "RegistryUnreachable";
    /// True: with `signaturePolicy: Enforce`, the host's container signature policy
    /// (`/etc/containers/policy.json`) refused the image, or bootc refused the policy
    /// itself (one that accepts anything by default); nothing was staged. The message
    /// carries bootc's own words.
    pub const SIGNATURE_POLICY_REJECTED: &str = "SignaturePolicyRejected";
    /// True: the host rebooted for this approval but came back on another image.
    pub const REBOOT_DID_NOT_APPLY: &str = "RebootDidNotApply";
    /// True: the host's own update timer (`bootc-fetch-apply-updates.timer`) could not be
    /// masked, so the host may update and reboot itself; the message names the error.
    pub const UPDATE_TIMER_NOT_MASKED: &str = "UpdateTimerNotMasked";
    /// True: after a staging or locking command, or right before unlocking, `bootc
    /// status` did not show the desired image staged and locked (`downloadOnly`): e.g. a
    /// bootc that answers `switch --download-only` of an image already staged unlocked
    /// with "Image specification is unchanged" and leaves it unlocked. The message says
    /// what the status showed; nothing is unlocked or rebooted, and the agent retries
    /// with the same backoff as `Error`.
    pub const STAGING_NOT_LOCKED: &str = "StagingNotLocked";
    /// False: nothing is wrong.
    pub const HEALTHY: &str = "Healthy";
    /// Every reason of the node's `Degraded` condition (`HEALTHY` last).
    pub const ALL: [&str; 10] = [
        ERROR,
        REGISTRY_AUTH_FAILED,
        INSUFFICIENT_SPACE,
        IMAGE_NOT_FOUND,
        REGISTRY_UNREACHABLE,
        SIGNATURE_POLICY_REJECTED,
        REBOOT_DID_NOT_APPLY,
        UPDATE_TIMER_NOT_MASKED,
        STAGING_NOT_LOCKED,
        HEALTHY,
    ];
}

/// Converts a chrono time to the Kubernetes type, at second precision (as the API keeps
/// it); `None` outside the years 0000 to 9999 (the API's four-digit years).
pub fn to_time(
    t: chrono::DateTime<chrono::Utc>,
) -> Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time> {
    use chrono::Datelike;
    if !(0..=9999).contains(&t.year()) {
        return None;
    }
    k8s_openapi::jiff::Timestamp::from_second(t.timestamp())
        .ok()
        .map(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time)
}

/// Converts a Kubernetes time to chrono, at second precision (as the API writes it);
/// `None` outside the years 0000 to 9999.
pub fn from_time(
    t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
) -> Option<chrono::DateTime<chrono::Utc>> {
    use chrono::Datelike;
    chrono::DateTime::from_timestamp(t.0.as_second(), 0).filter(|d| (0..=9999).contains(&d.year()))
}

/// What a condition should say now, before its transition time is decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewCondition<'a> {
    /// `type`.
    pub type_: &'a str,
    /// `True` or `False`.
    pub status: bool,
    /// `reason`.
    pub reason: &'a str,
    /// `message`.
    pub message: String,
}

/// A condition as it should be reported now: `lastTransitionTime` is kept from the
/// previous condition of the same type while its status stays, so that reporting the
/// same situation again gives an identical condition (and no write). The message is cut
/// to the schema's bound ([`CONDITION_MESSAGE_MAX_LEN`]), so that a long error output
/// cannot get the whole status write refused.
pub fn next(
    previous: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    new: NewCondition<'_>,
    generation: Option<i64>,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    let status = if new.status { "True" } else { "False" }.to_owned();
    let old = previous.iter().find(|c| c.type_ == new.type_);
    let last_transition_time = match old {
        Some(c) if c.status == status => c.last_transition_time.clone(),
        _ => to_time(now)?,
    };
    Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
        type_: new.type_.to_owned(),
        status,
        reason: new.reason.to_owned(),
        message: truncate(new.message, CONDITION_MESSAGE_MAX_LEN),
        observed_generation: generation,
        last_transition_time,
    })
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    #[test]
    fn transition_time_moves_only_when_the_status_flips() {
        let t0 = chrono::Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let t1 = t0 + chrono::Duration::minutes(5);
        let new = |status, reason, message: &str| NewCondition {
            type_: IDLE,
            status,
            reason,
            message: message.into(),
        };
        let first = next(&[], new(false, "Staging", "a"), Some(1), t0).unwrap();
        let same = next(
            std::slice::from_ref(&first),
            new(false, "Staged", "b"),
            Some(2),
            t1,
        )
        .unwrap();
        assert_eq!(same.last_transition_time, first.last_transition_time);
        assert_eq!(
            (same.reason.as_str(), same.observed_generation),
            ("Staged", Some(2))
        );
        let flipped = next(
            std::slice::from_ref(&same),
            new(true, "Idle", "c"),
            Some(2),
            t1,
        )
        .unwrap();
        assert_eq!(flipped.last_transition_time, to_time(t1).unwrap());
        assert_eq!(from_time(&flipped.last_transition_time), Some(t1));
    }

    /// The conversions give what the API's text form gives: RFC 3339 at whole seconds,
    /// nothing outside four-digit years.
    #[test]
    fn times_convert_as_their_text_does() {
        let utc = |y, mo, d, h, mi, s| chrono::Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap();
        let text =
            |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        for t in [
            utc(2026, 11, 22, 12, 0, 0) + chrono::Duration::milliseconds(999),
            utc(1969, 12, 31, 23, 59, 59) + chrono::Duration::milliseconds(500),
            utc(0, 1, 1, 0, 0, 0),
            utc(9999, 1, 1, 0, 0, 0),
        ] {
            let text = text(t);
            let k: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time =
                serde_json::from_value(serde_json::json!(text)).unwrap();
            assert_eq!(to_time(t).as_ref(), Some(&k), "{text}");
            assert_eq!(serde_json::to_value(&k).unwrap(), serde_json::json!(text));
            let whole = chrono::DateTime::parse_from_rfc3339(&text)
                .unwrap()
                .to_utc();
            assert_eq!(from_time(&k), Some(whole), "{text}");
        }
        // The API's clock ends a little before the year does.
        for t in [
            utc(9999, 12, 31, 23, 59, 59),
            utc(10000, 1, 1, 0, 0, 0),
            utc(-1, 6, 1, 0, 0, 0),
        ] {
            let text = text(t);
            let k: Result<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time, _> =
                serde_json::from_value(serde_json::json!(text));
            assert!(k.is_err(), "{text} has an API form");
            assert_eq!(to_time(t), None, "{text}");
        }
        // A time before the year 0 has no text the API reads back.
        let early = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::from_second(utc(-1, 6, 1, 0, 0, 0).timestamp()).unwrap(),
        );
        assert_eq!(from_time(&early), None);
    }

    #[test]
    fn a_long_message_is_cut_to_the_schema_bound() {
        let t0 = chrono::Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let new = NewCondition {
            type_: DEGRADED,
            status: true,
            reason: node_degraded::ERROR,
            message: "e".repeat(CONDITION_MESSAGE_MAX_LEN * 2),
        };
        let condition = next(&[], new, None, t0).unwrap();
        assert_eq!(condition.message.chars().count(), CONDITION_MESSAGE_MAX_LEN);
        assert!(condition.message.ends_with('…'));
    }
}
