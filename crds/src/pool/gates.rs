//! The parts of a pool's spec and status that gate a rollout on health: the alert gate,
//! boot health units, the canary, what a failure does, the pools it follows, how nodes
//! are disrupted (with the pods that block a reboot), and the gates' verdicts.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::bounds::{DIGEST_MAX_LEN, NAME_MAX_LEN};

/// Most pools one pool may wait for (`rollout.after`).
pub const MAX_AFTER: usize = 16;

/// Bounds of each item of a list of names (`rollout.after`, a verdict's nodes).
pub(crate) fn name_items(schema: &mut schemars::Schema) {
    if let Some(items) = schema.get_mut("items").and_then(|i| i.as_object_mut()) {
        items.insert("minLength".into(), 1.into());
        items.insert("maxLength".into(), NAME_MAX_LEN.into());
    }
}

/// The first nodes of each rollout, and how long the pool watches them.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CanarySpec {
    /// How many nodes update first: an integer (at least 1) or a percentage of the pool
    /// ("10%", rounded down, but at least one node).
    #[schemars(transform = crate::budget::schema)]
    pub nodes: IntOrString,

    /// Seconds the canary nodes must stay healthy (and every alert gate open) after the
    /// last of them came back, before the rest of the pool goes on. A problem meanwhile
    /// starts the count again.
    #[serde(default)]
    #[schemars(range(min = 0, max = 604800))]
    pub soak_seconds: i64,
}

/// What reaching haltAfterUnhealthy does.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum FailurePolicy {
    /// Grant no new reboot slot; the admin decides.
    #[default]
    Halt,
    /// Mark the target failed and roll the nodes that booted it back.
    Rollback,
}

/// Health checks on a rollout.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthSpec {
    /// An Alertmanager or Prometheus asked before each approval: while an alert matching
    /// every matcher fires, no new node is approved (nodes mid-reboot finish).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alerts: Option<AlertGateSpec>,

    /// systemd units on the host that must be active after a reboot, within
    /// timeoutSeconds, for the node to count healthy (`boot-complete.target` is the usual
    /// choice). A unit that fails, or is not active in time, makes the node unhealthy:
    /// it keeps its slot and counts toward haltAfterUnhealthy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = MAX_HEALTH_UNITS),
        extend("x-kubernetes-list-type" = "set"),
        transform = crate::bounds::unit_items
    )]
    pub units: Vec<String>,

    /// Seconds after a node came back on the target within which its units must be
    /// active.
    #[serde(default = "default_health_timeout")]
    #[schemars(range(min = 1, max = 86400))]
    pub timeout_seconds: i64,
}

/// Most units in `health.units`.
pub const MAX_HEALTH_UNITS: usize = 16;
/// Most matchers in `health.alerts.matchers`.
pub const MAX_MATCHERS: usize = 32;
/// Longest matcher.
pub const MATCHER_MAX_LEN: usize = 1024;
/// Longest alert gate URL.
pub const URL_MAX_LEN: usize = 2048;
/// An alert gate URL: http or https, a host with no `user:password@`, then anything
/// without white space.
pub const URL_PATTERN: &str = r"^https?://[^\s/?#@]+([/?#][^\s]*)?$";

/// An alert source that gates approvals.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AlertGateSpec {
    /// Base URL of an Alertmanager (its v2 API, /api/v2/alerts, is asked for active,
    /// unsilenced, uninhibited alerts) or of a Prometheus (/api/v1/alerts, firing alerts),
    /// e.g. http://alertmanager.monitoring:9093. Which one is found out from its answers.
    /// Credentials in the URL (`user:password@`) are refused: name a Secret in
    /// credentialsSecretRef instead.
    #[schemars(
        length(min = 1, max = URL_MAX_LEN),
        regex(pattern = URL_PATTERN),
        transform = crate::rules::alert_url
    )]
    pub url: String,

    /// A Secret holding what the URL is asked with: keys `username` and `password`
    /// (HTTP basic authentication) or a key `token` (sent as a bearer token). It must be in
    /// a namespace the controller may read Secrets in (its own, unless the admin allowed
    /// more). Its content is never shown in the pool's status, conditions, Events, logs or
    /// metrics; a Secret that cannot be read closes the gate like an unreachable URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_secret_ref: Option<super::SecretRef>,

    /// Alertmanager matchers, every one of which an alert's labels must match for it to
    /// close the gate: `severity="critical"`, `alertname=~"Node.*"`, `team!="dev"`,
    /// `env!~"test|dev"`. Empty: every firing alert closes it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_MATCHERS), transform = matcher_items)]
    pub matchers: Vec<String>,

    /// When the URL cannot be asked (or answers nonsense), approve nothing (true, the
    /// default) or go on as if no alert fired (false).
    #[serde(default = "default_true")]
    pub fail_closed: bool,

    /// How often, in seconds, the URL is asked while the pool has something to approve.
    #[serde(default = "default_alert_interval")]
    #[schemars(range(min = 1, max = 3600))]
    pub interval_seconds: i64,
}

/// Bounds of each matcher.
fn matcher_items(schema: &mut schemars::Schema) {
    if let Some(items) = schema.get_mut("items").and_then(|i| i.as_object_mut()) {
        items.insert("minLength".into(), 1.into());
        items.insert("maxLength".into(), MATCHER_MAX_LEN.into());
    }
}

/// How nodes are disrupted.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DisruptionSpec {
    /// RebootOnly always reboots fully; AllowSoftReboot uses a systemd soft reboot
    /// (userspace restart, same kernel) when the staged deployment is soft-reboot capable,
    /// and a full reboot otherwise.
    #[serde(default)]
    pub reboot_policy: super::RebootPolicy,

    /// How a node is drained before its reboot.
    #[serde(default)]
    pub drain: super::DrainSpec,

    /// Leave alone a node someone else cordoned: it is not given a reboot slot while it
    /// is unschedulable (it may still stage), and it is never uncordoned by the
    /// controller. False: such a node is updated too, and stays cordoned afterwards.
    #[serde(default = "default_true")]
    pub respect_cordon: bool,

    /// Pods that keep a node from rebooting, as kured's `--blocking-pod-selector`: while
    /// a pod these select runs on a node, the node is given no reboot slot (it may still
    /// stage; one that holds a slot already goes on). The gate names the pods in the
    /// pool's status.gates. A selector the API refuses holds back every node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocking_pods: Option<BlockingPodsSpec>,
}

/// Which pods keep their node from rebooting.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockingPodsSpec {
    /// The pods' labels (matchLabels and matchExpressions, as a Deployment's selector).
    #[schemars(transform = crate::bounds::label_selector)]
    pub selector: LabelSelector,

    /// Only pods in these namespaces block; empty: pods in every namespace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = MAX_BLOCKING_NAMESPACES),
        extend("x-kubernetes-list-type" = "set"),
        transform = namespace_items
    )]
    pub namespaces: Vec<String>,
}

/// Most namespaces in `blockingPods.namespaces`.
pub const MAX_BLOCKING_NAMESPACES: usize = 32;

/// Bounds of each namespace name.
fn namespace_items(schema: &mut schemars::Schema) {
    if let Some(items) = schema.get_mut("items").and_then(|i| i.as_object_mut()) {
        items.insert("minLength".into(), 1.into());
        items.insert("maxLength".into(), 63.into());
    }
}

impl Default for DisruptionSpec {
    fn default() -> Self {
        DisruptionSpec {
            reboot_policy: super::RebootPolicy::default(),
            drain: super::DrainSpec::default(),
            respect_cordon: true,
            blocking_pods: None,
        }
    }
}

/// Most entries in `status.gates`.
pub const MAX_GATE_VERDICTS: usize = 16;
/// Most nodes a verdict names.
pub const MAX_VERDICT_NODES: usize = 10;
/// Longest verdict message.
pub const VERDICT_MESSAGE_MAX_LEN: usize = 4096;

/// One gate that holds the rollout back now, as the controller judged it in its last
/// plan. The list is in order of precedence: the first that holds back the pool gives
/// the UpToDate reason.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GateVerdict {
    /// Which gate, and why it is closed.
    pub reason: GateReason,

    /// What it closes: Slots (no new node is given a reboot slot), Approvals (a drained
    /// node is not approved to reboot) or SlotsAndApprovals.
    pub closes: GatePhase,

    /// What it waits for, in words.
    #[schemars(length(max = VERDICT_MESSAGE_MAX_LEN))]
    pub message: String,

    /// The wait is on purpose (a pause, a window, a soak, a hold, a blocking pod): it
    /// never counts as a stall.
    pub deliberate: bool,

    /// The nodes it holds back, when it holds back nodes rather than the pool: at most
    /// ten, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_VERDICT_NODES), transform = name_items)]
    pub nodes: Vec<String>,

    /// How many nodes it holds back in all (with nodes only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_count: Option<i32>,
}

/// What a closed gate closes.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum GatePhase {
    /// No new reboot slot is granted.
    Slots,
    /// No drained node is approved to reboot.
    Approvals,
    /// Both.
    SlotsAndApprovals,
}

impl GatePhase {
    /// New slots are closed.
    pub fn slots(self) -> bool {
        matches!(self, GatePhase::Slots | GatePhase::SlotsAndApprovals)
    }

    /// Approvals are closed.
    pub fn approvals(self) -> bool {
        matches!(self, GatePhase::Approvals | GatePhase::SlotsAndApprovals)
    }
}

/// Why a gate is closed.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum GateReason {
    /// spec.rollout.paused is true.
    Paused,
    /// No maintenance window is open (or the windows cannot be evaluated).
    OutsideMaintenanceWindow,
    /// haltAfterUnhealthy slot holders are unhealthy.
    RolloutHalted,
    /// Alerts matching spec.health.alerts fire.
    AlertsFiring,
    /// The alert gate cannot be asked and fails closed.
    AlertGateUnreachable,
    /// Pools named in spec.rollout.after are not up to date, or halted.
    WaitingForPools,
    /// spec.rollout.after forms a cycle.
    OrderingCycle,
    /// The canary nodes update first.
    CanaryUpdating,
    /// The canary nodes run the target and soak.
    CanarySoaking,
    /// The target failed and the pool ran no other image before.
    NothingToRollBackTo,
    /// Pods matching spec.disruption.blockingPods run on the nodes named.
    BlockingPods,
    /// An admin holds the nodes named (label node.bootc.dev/hold=true).
    Held,
    /// Someone else cordoned the nodes named (spec.disruption.respectCordon).
    CordonedByOthers,
    /// Every slot of maxUnavailable is in use while staged nodes wait.
    BudgetFull,
}

impl GateReason {
    /// The reason as status.gates and the Degraded condition spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            GateReason::Paused => "Paused",
            GateReason::OutsideMaintenanceWindow => "OutsideMaintenanceWindow",
            GateReason::RolloutHalted => "RolloutHalted",
            GateReason::AlertsFiring => "AlertsFiring",
            GateReason::AlertGateUnreachable => "AlertGateUnreachable",
            GateReason::WaitingForPools => "WaitingForPools",
            GateReason::OrderingCycle => "OrderingCycle",
            GateReason::CanaryUpdating => "CanaryUpdating",
            GateReason::CanarySoaking => "CanarySoaking",
            GateReason::NothingToRollBackTo => "NothingToRollBackTo",
            GateReason::BlockingPods => "BlockingPods",
            GateReason::Held => "Held",
            GateReason::CordonedByOthers => "CordonedByOthers",
            GateReason::BudgetFull => "BudgetFull",
        }
    }
}

/// Longest `failedReason`.
pub const FAILED_REASON_MAX_LEN: usize = 4096;

/// Where a canary is.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CanaryStatus {
    /// The target digest this canary is for.
    #[schemars(length(max = DIGEST_MAX_LEN))]
    pub digest: String,

    /// Updating: the canary nodes are updating. Soaking: they all run the target and are
    /// watched for soakSeconds. Complete: the rest of the pool may go on.
    pub phase: CanaryPhase,

    /// How many nodes the canary has.
    pub nodes: i32,

    /// When the current soak began (phase Soaking and Complete).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soak_started_time: Option<Time>,
}

/// The phases of a canary.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum CanaryPhase {
    /// The canary nodes update.
    Updating,
    /// The canary nodes run the target and are watched.
    Soaking,
    /// The soak passed: the rest of the pool goes on.
    Complete,
}

/// What the alert gate last said.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AlertGateStatus {
    /// Open (no matching alert), Firing (matching alerts fire) or Unreachable.
    pub state: AlertGateState,

    /// The matching alerts (up to five, by name and labels), or the error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = FAILED_REASON_MAX_LEN))]
    pub message: Option<String>,

    /// When the gate was first seen in this state with this message (asking again and
    /// hearing the same writes nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_time: Option<Time>,
}

/// The states of an alert gate.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum AlertGateState {
    /// No matching alert fires.
    Open,
    /// Matching alerts fire: no approvals.
    Firing,
    /// The URL could not be asked.
    Unreachable,
}

fn default_health_timeout() -> i64 {
    600
}

fn default_alert_interval() -> i64 {
    30
}

fn default_true() -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::GateReason;

    #[test]
    fn as_str_is_the_serde_spelling() {
        for reason in [
            GateReason::Paused,
            GateReason::OutsideMaintenanceWindow,
            GateReason::RolloutHalted,
            GateReason::AlertsFiring,
            GateReason::AlertGateUnreachable,
            GateReason::WaitingForPools,
            GateReason::OrderingCycle,
            GateReason::CanaryUpdating,
            GateReason::CanarySoaking,
            GateReason::NothingToRollBackTo,
            GateReason::BlockingPods,
            GateReason::Held,
            GateReason::CordonedByOthers,
            GateReason::BudgetFull,
        ] {
            let written = serde_json::to_value(reason).unwrap();
            assert_eq!(written.as_str(), Some(reason.as_str()), "{reason:?}");
        }
    }
}
