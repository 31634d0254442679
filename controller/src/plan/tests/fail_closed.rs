//! Every value of the spec the plan can fail to use, and what it decides then: the gate
//! closes, never opens, and a condition names the cause.

use std::time::Duration;

use bootc_crds::pool::MaintenanceWindow;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::super::limits;
use super::*;

fn bad_window() -> MaintenanceWindow {
    serde_json::from_value(serde_json::json!({
        "days": ["Mon"],
        "start": "15:00",
        "duration": "1h",
        "timeZone": "Mars/Olympus_Mons",
    }))
    .unwrap()
}

/// One input that can fail: how to break the spec, and the field the problem names.
struct Case {
    field: &'static str,
    breaks: fn(&mut BootcNodePoolSpec),
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            field: "maxUnavailable",
            breaks: |s| s.rollout.max_unavailable = IntOrString::String("0%".into()),
        },
        Case {
            field: "maxStaging",
            breaks: |s| s.rollout.max_staging = Some(IntOrString::String("lots".into())),
        },
        Case {
            field: "haltAfterUnhealthy",
            breaks: |s| s.rollout.halt_after_unhealthy = -1,
        },
        Case {
            field: "postRebootDelaySeconds",
            breaks: |s| s.rollout.post_reboot_delay_seconds = -1,
        },
        Case {
            field: "rebootTimeoutSeconds",
            breaks: |s| s.rollout.reboot_timeout_seconds = -1,
        },
        Case {
            field: "maintenanceWindows",
            breaks: |s| s.rollout.maintenance_windows = vec![bad_window()],
        },
    ]
}

#[test]
fn each_value_the_plan_cannot_use_closes_its_gate() {
    let mut spec = pool_spec(IntOrString::Int(1));
    let rollout = &mut spec.rollout;

    rollout.max_unavailable = IntOrString::String("0%".into());
    let (slots, problem) = limits::budget(rollout, 10);
    assert_eq!(slots, 0, "no slot when the budget cannot be resolved");
    assert!(problem.unwrap().contains("maxUnavailable"));

    rollout.max_staging = Some(IntOrString::String("lots".into()));
    let (limit, problem) = limits::staging(rollout, 10);
    assert_eq!(limit, Some(0), "nobody starts pulling");
    assert!(problem.unwrap().contains("maxStaging"));

    rollout.halt_after_unhealthy = -1;
    let (halt_at, problem) = limits::halt_threshold(rollout);
    assert_eq!(
        halt_at, 1,
        "halts at the first unhealthy node, never 'never'"
    );
    assert!(problem.unwrap().contains("haltAfterUnhealthy"));

    rollout.post_reboot_delay_seconds = -1;
    let (soak, problem) = limits::soak(rollout);
    assert_eq!(soak, Duration::MAX, "the slot is kept");
    assert!(problem.unwrap().contains("postRebootDelaySeconds"));

    rollout.reboot_timeout_seconds = -1;
    let (timeout, problem) = limits::reboot_timeout(rollout);
    assert_eq!(
        timeout,
        Duration::ZERO,
        "an approved node counts as unhealthy"
    );
    assert!(problem.unwrap().contains("rebootTimeoutSeconds"));

    rollout.maintenance_windows = vec![bad_window()];
    let (closed, problem) = limits::window(rollout, now());
    assert_eq!(closed, Some(None), "closed, never to open");
    assert!(problem.unwrap().contains("maintenanceWindows"));
}

#[test]
fn usable_values_give_no_problem() {
    let spec = pool_spec(IntOrString::String("50%".into()));
    let rollout = &spec.rollout;
    assert_eq!(limits::budget(rollout, 10), (5, None));
    assert_eq!(limits::staging(rollout, 10), (None, None));
    assert_eq!(limits::halt_threshold(rollout).1, None);
    assert_eq!(limits::soak(rollout).1, None);
    assert_eq!(limits::reboot_timeout(rollout).1, None);
    assert_eq!(limits::window(rollout, now()), (None, None));
}

#[test]
fn a_plan_of_a_spec_it_cannot_use_rolls_nothing_and_says_why_at_once() {
    for case in cases() {
        let mut spec = pool_spec(IntOrString::Int(2));
        (case.breaks)(&mut spec);
        let mut snap = snapshot(
            spec,
            &[node("n1").staged(), node("n2"), node("n3").staged()],
        );
        // However long nothing has moved, the reason is the spec, not a stall.
        let unchanged = super::super::plan(&snap).progress;
        snap.progress = Some(Progress {
            since: now() - chrono::Duration::hours(1),
            ..unchanged
        });
        let plan = super::super::plan(&snap);
        assert!(
            granted(&plan).is_empty(),
            "{}: {:?}",
            case.field,
            plan.actions
        );
        assert!(
            !plan
                .actions
                .iter()
                .any(|a| matches!(a, Action::Create { .. })),
            "{}: nothing is created under a spec the plan cannot use",
            case.field
        );
        let degraded = condition_of(&plan, "Degraded");
        assert_eq!(degraded.reason, "InvalidSpec", "{}", case.field);
        assert!(
            degraded.message.contains(case.field),
            "{}: {}",
            case.field,
            degraded.message
        );
        let progressing = condition_of(&plan, "Progressing");
        assert_eq!(
            (progressing.status.as_str(), progressing.reason.as_str()),
            ("False", "InvalidSpec"),
            "{}",
            case.field
        );
    }
}
