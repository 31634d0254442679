//! The Pod printer: the columns of `kubectl get pods` and how their cells are computed (`printPod`).

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::columns::{Column, age_column, name_column};
use super::docs::docs;
use super::fields::{bool_at, int_at, list_at, none_if_empty, str_at, time_at};
use super::time::{human_duration, is_zero_time};

/// Name, Ready, Status, Restarts, Age; wide: IP, Node, Nominated Node, Readiness Gates.
pub(super) fn columns() -> Vec<Column> {
    let d = docs();
    vec![
        name_column(),
        Column::computed(
            "Ready",
            "string",
            "The aggregate readiness state of this pod for accepting traffic.",
            |o, n| Value::String(pod_summary(o, n).ready),
        ),
        Column::computed(
            "Status",
            "string",
            "The aggregate status of the containers in this pod.",
            |o, n| Value::String(pod_summary(o, n).reason),
        ),
        Column::computed(
            "Restarts",
            "string",
            "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
            |o, n| Value::String(pod_summary(o, n).restarts),
        ),
        age_column(),
        Column::computed("IP", "string", &d.pod_ip, |o, _| {
            let ip = o
                .pointer("/status/podIPs/0/ip")
                .and_then(Value::as_str)
                .unwrap_or("");
            Value::String(none_if_empty(ip))
        })
        .wide(),
        Column::computed("Node", "string", &d.node_name, |o, _| {
            Value::String(none_if_empty(str_at(o, &["spec", "nodeName"])))
        })
        .wide(),
        Column::computed(
            "Nominated Node",
            "string",
            &d.nominated_node_name,
            |o, _| Value::String(none_if_empty(str_at(o, &["status", "nominatedNodeName"]))),
        )
        .wide(),
        Column::computed(
            "Readiness Gates",
            "string",
            &d.readiness_gates,
            pod_readiness_gates,
        )
        .wide(),
    ]
}

/// The Ready, Status and Restarts cells of a pod, as kube-apiserver's `printPod` computes them.
#[derive(Debug)]
struct PodSummary {
    ready: String,
    reason: String,
    restarts: String,
}

/// What `printPod` accumulates while it goes through a pod's container statuses.
#[derive(Debug, Default)]
struct Tally {
    /// The Status cell so far.
    reason: String,
    restarts: i64,
    /// Restarts of restartable (sidecar) init containers, which count once the pod is initialized.
    restartable_init_restarts: i64,
    ready: usize,
    last_restart: Option<DateTime<Utc>>,
    last_restartable_init_restart: Option<DateTime<Utc>>,
}

fn pod_summary(pod: &Value, now: DateTime<Utc>) -> PodSummary {
    let init_specs = list_at(pod, &["spec", "initContainers"]);
    let mut total = list_at(pod, &["spec", "containers"]).len();
    total += init_specs
        .iter()
        .filter(|c| str_at(c, &["restartPolicy"]) == "Always")
        .count();
    let phase = str_at(pod, &["status", "phase"]);
    let mut tally = Tally {
        reason: initial_reason(pod),
        ..Tally::default()
    };
    let initializing = tally.init_containers(pod, init_specs);
    let initialized = list_at(pod, &["status", "conditions"])
        .iter()
        .any(|c| str_at(c, &["type"]) == "Initialized" && str_at(c, &["status"]) == "True");
    if !initializing || initialized {
        tally.containers(pod);
    }
    let Tally {
        mut reason,
        restarts,
        ready,
        last_restart,
        ..
    } = tally;

    let deleting = pod
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null());
    if deleting && str_at(pod, &["status", "reason"]) == "NodeLost" {
        reason = "Unknown".to_string();
    } else if deleting && phase != "Failed" && phase != "Succeeded" {
        reason = "Terminating".to_string();
    }

    let mut restarts_text = restarts.to_string();
    if restarts != 0
        && let Some(t) = last_restart.filter(|t| !is_zero_time(*t))
    {
        restarts_text = format!("{restarts} ({} ago)", human_duration(now - t));
    }
    PodSummary {
        ready: format!("{ready}/{total}"),
        reason,
        restarts: restarts_text,
    }
}

/// The Status cell before the containers are looked at: the phase, or the pod's reason, or `SchedulingGated`.
fn initial_reason(pod: &Value) -> String {
    let mut reason = str_at(pod, &["status", "phase"]).to_string();
    if !str_at(pod, &["status", "reason"]).is_empty() {
        reason = str_at(pod, &["status", "reason"]).to_string();
    }
    for c in list_at(pod, &["status", "conditions"]) {
        if str_at(c, &["type"]) == "PodScheduled" && str_at(c, &["reason"]) == "SchedulingGated" {
            reason = "SchedulingGated".to_string();
        }
    }
    reason
}

/// The later of two optional times.
fn later(cur: Option<DateTime<Utc>>, t: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
    match (cur, t) {
        (Some(c), Some(t)) if t > c => Some(t),
        (None, Some(t)) => Some(t),
        (c, _) => c,
    }
}

/// When a container last terminated, if its `lastState` says it did.
fn last_finished(status: &Value) -> Option<DateTime<Utc>> {
    time_at(status, &["lastState", "terminated", "finishedAt"])
        .filter(|_| status.pointer("/lastState/terminated").is_some())
}

impl Tally {
    /// Goes through the init container statuses; whether the pod is still initializing (then the Status cell says
    /// which init container it waits for).
    fn init_containers(&mut self, pod: &Value, init_specs: &[Value]) -> bool {
        let restartable = |name: &str| -> bool {
            init_specs
                .iter()
                .any(|c| str_at(c, &["name"]) == name && str_at(c, &["restartPolicy"]) == "Always")
        };
        for (i, status) in list_at(pod, &["status", "initContainerStatuses"])
            .iter()
            .enumerate()
        {
            let count = int_at(status, &["restartCount"]);
            self.restarts += count;
            let finished = last_finished(status);
            self.last_restart = later(self.last_restart, finished);
            let is_restartable = restartable(str_at(status, &["name"]));
            if is_restartable {
                self.restartable_init_restarts += count;
                self.last_restartable_init_restart =
                    later(self.last_restartable_init_restart, finished);
            }
            let terminated = status
                .pointer("/state/terminated")
                .filter(|t| t.is_object());
            let waiting_reason = str_at(status, &["state", "waiting", "reason"]);
            match terminated {
                Some(t) if int_at(t, &["exitCode"]) == 0 => continue,
                _ if is_restartable && bool_at(status, &["started"]) => {
                    if bool_at(status, &["ready"]) {
                        self.ready += 1;
                    }
                    continue;
                }
                Some(t) => {
                    self.reason = match str_at(t, &["reason"]) {
                        "" if int_at(t, &["signal"]) != 0 => {
                            format!("Init:Signal:{}", int_at(t, &["signal"]))
                        }
                        "" => format!("Init:ExitCode:{}", int_at(t, &["exitCode"])),
                        r => format!("Init:{r}"),
                    };
                }
                None if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" => {
                    self.reason = format!("Init:{waiting_reason}");
                }
                None => self.reason = format!("Init:{i}/{}", init_specs.len()),
            }
            return true;
        }
        false
    }

    /// Goes through the (regular) container statuses of an initialized pod, last first.
    fn containers(&mut self, pod: &Value) {
        self.restarts = self.restartable_init_restarts;
        self.last_restart = self.last_restartable_init_restart;
        let mut has_running = false;
        for status in list_at(pod, &["status", "containerStatuses"]).iter().rev() {
            self.restarts += int_at(status, &["restartCount"]);
            self.last_restart = later(self.last_restart, last_finished(status));
            let terminated = status
                .pointer("/state/terminated")
                .filter(|t| t.is_object());
            let waiting_reason = str_at(status, &["state", "waiting", "reason"]);
            if !waiting_reason.is_empty() {
                self.reason = waiting_reason.to_string();
            } else if let Some(t) = terminated {
                self.reason = match str_at(t, &["reason"]) {
                    "" if int_at(t, &["signal"]) != 0 => {
                        format!("Signal:{}", int_at(t, &["signal"]))
                    }
                    "" => format!("ExitCode:{}", int_at(t, &["exitCode"])),
                    r => r.to_string(),
                };
            } else if bool_at(status, &["ready"])
                && status
                    .pointer("/state/running")
                    .is_some_and(Value::is_object)
            {
                has_running = true;
                self.ready += 1;
            }
        }
        if self.reason == "Completed" && has_running {
            let pod_ready = list_at(pod, &["status", "conditions"])
                .iter()
                .any(|c| str_at(c, &["type"]) == "Ready" && str_at(c, &["status"]) == "True");
            self.reason = if pod_ready { "Running" } else { "NotReady" }.to_string();
        }
    }
}

fn pod_readiness_gates(pod: &Value, _: DateTime<Utc>) -> Value {
    let gates = list_at(pod, &["spec", "readinessGates"]);
    if gates.is_empty() {
        return Value::String("<none>".to_string());
    }
    let conditions = list_at(pod, &["status", "conditions"]);
    let true_count = gates
        .iter()
        .filter(|g| {
            let wanted = str_at(g, &["conditionType"]);
            conditions
                .iter()
                .find(|c| str_at(c, &["type"]) == wanted)
                .is_some_and(|c| str_at(c, &["status"]) == "True")
        })
        .count();
    Value::String(format!("{true_count}/{}", gates.len()))
}
