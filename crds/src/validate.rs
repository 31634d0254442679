//! Checks on a spec that its schema cannot express (or that an old or missing CRD would
//! not enforce), each reported with its field path. The controller calls these before it
//! acts on a spec. (The agent does not call them: it accepts a `desiredImage` only when it
//! is a canonical digest pin, and refuses anything else before the host is touched.)

use std::collections::BTreeSet;
use std::fmt;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::MANAGED_LABEL;
use crate::bounds::SECRET_KEY_MAX_LEN;
use crate::bounds::UNIT_NAME_MAX_LEN;
use crate::budget::Budget;
pub use crate::field_error::{FieldError, FieldErrors};
use crate::image_ref::ImageRef;
use crate::node::BootcNodeSpec;
use crate::pool::{
    AlertGateSpec, BootcNodePoolSpec, DrainSpec, HealthSpec, MAX_AFTER, MAX_HEALTH_UNITS,
    MAX_HISTORY, MAX_MAINTENANCE_WINDOWS, MAX_MATCHERS, MaintenanceWindow, RolloutSpec,
    SecretKeyRef, SecretRef, URL_MAX_LEN,
};
use crate::selector::{check_dns_label, check_dns_subdomain, check_selector, mentions_key};
use crate::window::{parse_duration, parse_start, parse_time_zone};

impl fmt::Display for FieldErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

fn finish(errors: Vec<FieldError>) -> Result<(), FieldErrors> {
    if errors.is_empty() {
        Ok(())
    } else {
        Err(FieldErrors(errors))
    }
}

impl BootcNodePoolSpec {
    /// Every problem in the spec, or `Ok` when the controller may act on it.
    pub fn validate(&self) -> Result<(), FieldErrors> {
        let mut errors = Vec::new();
        check_selector(&self.node_selector, "spec.nodeSelector", &mut errors);
        if mentions_key(&self.node_selector, MANAGED_LABEL) {
            errors.push(FieldError::new(
                "spec.nodeSelector",
                format!("must not select on {MANAGED_LABEL}, which the controller itself sets on member nodes"),
            ));
        }
        if let Err(e) = ImageRef::parse(&self.image.r#ref) {
            errors.push(FieldError::new(
                "spec.image.ref",
                format!("{:?} is not a valid image reference: {e}", self.image.r#ref),
            ));
        }
        if self.image.resolve_interval_seconds < 30 {
            errors.push(FieldError::new(
                "spec.image.resolveIntervalSeconds",
                format!(
                    "{} is below the minimum of 30",
                    self.image.resolve_interval_seconds
                ),
            ));
        }
        check_rollout(&self.rollout, &mut errors);
        if let Some(health) = &self.health {
            check_health(health, &mut errors);
        }
        check_drain(&self.disruption.drain, &mut errors);
        if let Some(secret) = &self.pull_secret_ref {
            check_secret_ref(secret, "spec.pullSecretRef", &mut errors);
        }
        let webhook = self.notifications.as_ref().and_then(|n| n.webhook.as_ref());
        if let Some(webhook) = webhook {
            let path = "spec.notifications.webhook.secretRef";
            check_secret_key_ref(&webhook.secret_ref, path, &mut errors);
        }
        if !(1..=MAX_HISTORY).contains(&self.history.limit) {
            errors.push(FieldError::new(
                "spec.history.limit",
                format!(
                    "{} is out of range: keep from 1 to {MAX_HISTORY} entries",
                    self.history.limit
                ),
            ));
        }
        finish(errors)
    }
}

/// Said after the refusal of a `maxUnavailable` that bootc-operator reads as "no reboot
/// slots" (0, a negative integer, `0%`), so that an admin bringing such a pool over knows
/// what to write instead (`docs/compatibility.md`).
pub const NO_SLOTS_HINT: &str = "bootc-operator reads this as \"approve no reboots\"; \
     here, set spec.rollout.paused: true for that";

/// Whether bootc-operator would resolve this `maxUnavailable` to no reboot slots.
fn means_no_slots(value: &IntOrString) -> bool {
    match value {
        IntOrString::Int(n) => *n <= 0,
        IntOrString::String(s) => s == "0%",
    }
}

fn check_rollout(rollout: &RolloutSpec, errors: &mut Vec<FieldError>) {
    if let Err(e) = Budget::parse(&rollout.max_unavailable) {
        let message = if means_no_slots(&rollout.max_unavailable) {
            format!("{e} ({NO_SLOTS_HINT})")
        } else {
            e.to_string()
        };
        errors.push(FieldError::new("spec.rollout.maxUnavailable", message));
    }
    if let Some(Err(e)) = rollout.max_staging.as_ref().map(Budget::parse) {
        errors.push(FieldError::new("spec.rollout.maxStaging", e.to_string()));
    }
    let minimums = [
        ("drainTimeoutSeconds", rollout.drain_timeout_seconds, 0),
        (
            "rebootTimeoutSeconds",
            Some(rollout.reboot_timeout_seconds),
            1,
        ),
        (
            "haltAfterUnhealthy",
            Some(i64::from(rollout.halt_after_unhealthy)),
            1,
        ),
        (
            "postRebootDelaySeconds",
            Some(rollout.post_reboot_delay_seconds),
            0,
        ),
    ];
    for (field, value, min) in minimums {
        if let Some(v) = value.filter(|v| *v < min) {
            errors.push(FieldError::new(
                format!("spec.rollout.{field}"),
                format!("{v} is below the minimum of {min}"),
            ));
        }
    }
    check_canary_and_after(rollout, errors);
    let windows = rollout.maintenance_windows.len();
    if windows > MAX_MAINTENANCE_WINDOWS {
        errors.push(FieldError::new(
            "spec.rollout.maintenanceWindows",
            format!("has {windows} windows, more than the limit of {MAX_MAINTENANCE_WINDOWS}"),
        ));
    }
    for (i, window) in rollout.maintenance_windows.iter().enumerate() {
        check_window(
            window,
            &format!("spec.rollout.maintenanceWindows[{i}]"),
            errors,
        );
    }
}

fn check_canary_and_after(rollout: &RolloutSpec, errors: &mut Vec<FieldError>) {
    if let Some(canary) = &rollout.canary {
        if let Err(e) = Budget::parse(&canary.nodes) {
            errors.push(FieldError::new("spec.rollout.canary.nodes", e.to_string()));
        }
        if !(0..=MAX_SOAK_SECONDS).contains(&canary.soak_seconds) {
            errors.push(FieldError::new(
                "spec.rollout.canary.soakSeconds",
                format!(
                    "{} is out of range: from 0 to {MAX_SOAK_SECONDS} (a week)",
                    canary.soak_seconds
                ),
            ));
        }
    }
    let after = Names {
        path: "spec.rollout.after",
        kind: "pools",
        max: MAX_AFTER,
        check: check_dns_subdomain,
    };
    after.check(&rollout.after, errors);
}

/// A list of names: at most `max` of them, each passing `check`, none twice.
struct Names {
    path: &'static str,
    /// What they name, plural, for the messages.
    kind: &'static str,
    max: usize,
    check: fn(&str) -> Result<(), String>,
}

impl Names {
    fn check(&self, names: &[String], errors: &mut Vec<FieldError>) {
        let Names {
            path, kind, max, ..
        } = self;
        if names.len() > *max {
            errors.push(FieldError::new(
                *path,
                format!("names {} {kind}, more than the limit of {max}", names.len()),
            ));
        }
        let mut seen = BTreeSet::new();
        for (i, name) in names.iter().enumerate() {
            if let Err(m) = (self.check)(name) {
                errors.push(FieldError::new(
                    format!("{path}[{i}]"),
                    format!("{name:?} {m}"),
                ));
            } else if !seen.insert(name) {
                errors.push(FieldError::new(
                    format!("{path}[{i}]"),
                    format!("{name:?} is listed twice"),
                ));
            }
        }
    }
}

/// Longest canary soak: a week.
pub const MAX_SOAK_SECONDS: i64 = 604_800;

fn check_health(health: &HealthSpec, errors: &mut Vec<FieldError>) {
    let units = Names {
        path: "spec.health.units",
        kind: "units",
        max: MAX_HEALTH_UNITS,
        check: check_unit_name,
    };
    units.check(&health.units, errors);
    if !(1..=86_400).contains(&health.timeout_seconds) {
        errors.push(FieldError::new(
            "spec.health.timeoutSeconds",
            format!(
                "{} is out of range: from 1 to 86400",
                health.timeout_seconds
            ),
        ));
    }
    if let Some(alerts) = &health.alerts {
        check_alert_gate(alerts, errors);
    }
}

fn check_alert_gate(alerts: &AlertGateSpec, errors: &mut Vec<FieldError>) {
    let url = &alerts.url;
    let scheme_ok = url.starts_with("http://") || url.starts_with("https://");
    let rest = url.split_once("://").map_or("", |(_, r)| r);
    if !scheme_ok
        || rest.is_empty()
        || url.len() > URL_MAX_LEN
        || url.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        errors.push(FieldError::new(
            "spec.health.alerts.url",
            format!("{:?} must be an http:// or https:// URL of at most {URL_MAX_LEN} characters without spaces", crate::bounds::shown_url(url)),
        ));
    } else if rest
        .split(['/', '?', '#'])
        .next()
        .is_some_and(|authority| authority.contains('@'))
    {
        errors.push(FieldError::new(
            "spec.health.alerts.url",
            format!(
                "{:?} carries credentials (user:password@), which anyone who may read the pool reads too: \
                 put them in a Secret (keys username and password, or token) and name it in \
                 spec.health.alerts.credentialsSecretRef",
                crate::bounds::shown_url(url)
            ),
        ));
    }
    if let Some(r) = &alerts.credentials_secret_ref {
        check_secret_ref(r, "spec.health.alerts.credentialsSecretRef", errors);
    }
    if alerts.matchers.len() > MAX_MATCHERS {
        errors.push(FieldError::new(
            "spec.health.alerts.matchers",
            format!(
                "has {} matchers, more than the limit of {MAX_MATCHERS}",
                alerts.matchers.len()
            ),
        ));
    }
    for (i, m) in alerts.matchers.iter().enumerate() {
        if let Err(problem) = crate::matcher::Matcher::parse(m) {
            errors.push(FieldError::new(
                format!("spec.health.alerts.matchers[{i}]"),
                problem,
            ));
        }
    }
    if !(1..=3600).contains(&alerts.interval_seconds) {
        errors.push(FieldError::new(
            "spec.health.alerts.intervalSeconds",
            format!(
                "{} is out of range: from 1 to 3600",
                alerts.interval_seconds
            ),
        ));
    }
}

/// Whether `unit` is a systemd unit name: letters, digits and `:_.\@-`, then one of the
/// unit types.
pub fn check_unit_name(unit: &str) -> Result<(), String> {
    const TYPES: [&str; 11] = [
        "service",
        "socket",
        "target",
        "device",
        "mount",
        "automount",
        "swap",
        "timer",
        "path",
        "slice",
        "scope",
    ];
    if unit.is_empty() || unit.len() > UNIT_NAME_MAX_LEN {
        return Err(format!("must have 1 to {UNIT_NAME_MAX_LEN} characters"));
    }
    let Some((name, kind)) = unit.rsplit_once('.') else {
        return Err("is not a unit name: it needs a type such as .service or .target".into());
    };
    if !TYPES.contains(&kind) {
        return Err(format!(
            "has unit type {kind:?}, which systemd does not know"
        ));
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || ":_.\\@-".contains(c);
    if name.is_empty() || !name.chars().all(allowed) {
        return Err(
            "must consist of letters, digits and ':', '_', '.', '\\', '@' or '-' before its type"
                .into(),
        );
    }
    Ok(())
}

fn check_window(window: &MaintenanceWindow, path: &str, errors: &mut Vec<FieldError>) {
    if window.days.is_empty() {
        errors.push(FieldError::new(
            format!("{path}.days"),
            "must name at least one day",
        ));
    }
    let mut seen = BTreeSet::new();
    for day in &window.days {
        if !seen.insert(day) {
            errors.push(FieldError::new(
                format!("{path}.days"),
                format!("{day:?} is listed twice"),
            ));
        }
    }
    let checks = [
        ("start", parse_start(&window.start).err()),
        ("duration", parse_duration(&window.duration).err()),
        ("timeZone", parse_time_zone(&window.time_zone).err()),
    ];
    for (field, problem) in checks {
        if let Some(message) = problem {
            errors.push(FieldError::new(format!("{path}.{field}"), message));
        }
    }
}

fn check_drain(drain: &DrainSpec, errors: &mut Vec<FieldError>) {
    if let Some(g) = drain.grace_period_seconds.filter(|g| *g < 0) {
        errors.push(FieldError::new(
            "spec.disruption.drain.gracePeriodSeconds",
            format!("{g} is below the minimum of 0 (leave it unset to use each pod's own)"),
        ));
    }
    if let Some(selector) = &drain.pod_selector {
        check_selector(selector, "spec.disruption.drain.podSelector", errors);
    }
}

fn check_secret_ref(secret: &SecretRef, path: &str, errors: &mut Vec<FieldError>) {
    if let Err(m) = check_dns_subdomain(&secret.name) {
        errors.push(FieldError::new(
            format!("{path}.name"),
            format!("{:?} {m}", secret.name),
        ));
    }
    if let Err(m) = check_dns_label(&secret.namespace) {
        errors.push(FieldError::new(
            format!("{path}.namespace"),
            format!("{:?} {m}", secret.namespace),
        ));
    }
}

fn check_secret_key_ref(secret: &SecretKeyRef, path: &str, errors: &mut Vec<FieldError>) {
    let named = SecretRef {
        name: secret.name.clone(),
        namespace: secret.namespace.clone(),
    };
    check_secret_ref(&named, path, errors);
    let key = &secret.key;
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-._".contains(c);
    let problem = if key.is_empty() || key.len() > SECRET_KEY_MAX_LEN {
        Some(format!("must have 1 to {SECRET_KEY_MAX_LEN} characters"))
    } else if !key.chars().all(allowed) || key == "." || key == ".." {
        Some("must consist of letters, digits, '-', '_' or '.', and not be '.' or '..'".into())
    } else {
        None
    };
    if let Some(problem) = problem {
        errors.push(FieldError::new(
            format!("{path}.key"),
            format!("{key:?} {problem}"),
        ));
    }
}

impl BootcNodeSpec {
    /// Every problem in the spec, or `Ok` when it is fit for an agent to act on. `desiredImage`
    /// must be a canonical pin: no tag, a sha256 digest, nothing a command line could
    /// misread.
    pub fn validate(&self) -> Result<(), FieldErrors> {
        let mut errors = Vec::new();
        match ImageRef::parse(&self.desired_image) {
            Err(e) => errors.push(FieldError::new(
                "spec.desiredImage",
                format!(
                    "{:?} is not a valid image reference: {e}",
                    self.desired_image
                ),
            )),
            Ok(r) if !r.is_pin() || r.pinned().as_deref() != Some(self.desired_image.as_str()) => {
                errors.push(FieldError::new(
                    "spec.desiredImage",
                    format!(
                        "{:?} must be a canonical pin registry/repo@sha256:<hex> without a tag",
                        self.desired_image
                    ),
                ))
            }
            Ok(_) => {}
        }
        if let Some(secret) = &self.pull_secret_ref {
            check_secret_ref(secret, "spec.pullSecretRef", &mut errors);
        }
        for (i, unit) in self.health_units.iter().enumerate() {
            if let Err(m) = check_unit_name(unit) {
                errors.push(FieldError::new(
                    format!("spec.healthUnits[{i}]"),
                    format!("{unit:?} {m}"),
                ));
            }
        }
        finish(errors)
    }
}
