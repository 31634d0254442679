//! Pods that block a reboot (`spec.disruption.blockingPods`, as kured's
//! `--blocking-pod-selector`): a member waiting for its update gets no slot while a pod
//! the selector matches runs on it; staging goes on, and a node already holding a slot
//! finishes. Pods that cannot be listed block every such node. Nothing watches pods, so
//! while the gate holds a node back the plan looks again every [`RECHECK`].

use std::collections::BTreeSet;
use std::time::Duration;

use bootc_crds::pool::GateReason;

use super::super::world::BlockingPods;
use super::{Facts, Judgement, Verdict};

/// How often a pool with nodes held back by pods lists them again.
const RECHECK: Duration = Duration::from_secs(15);

/// How many pods a node's entry names.
const NAMED_PODS: usize = 3;

pub(super) fn check(facts: &Facts<'_>, _: &mut Judgement) -> Option<Verdict> {
    facts.snap.pool.spec.disruption.blocking_pods.as_ref()?;
    let mut nodes = BTreeSet::new();
    let mut said = Vec::new();
    for view in facts.members {
        let Some(info) = &view.node else { continue };
        let why = match &info.blocking_pods {
            BlockingPods::None => continue,
            BlockingPods::Running(pods) if pods.is_empty() => continue,
            BlockingPods::Running(pods) => {
                let mut named = pods.iter().take(NAMED_PODS).cloned().collect::<Vec<_>>();
                if pods.len() > NAMED_PODS {
                    named.push(format!("{} more", pods.len() - NAMED_PODS));
                }
                named.join(", ")
            }
            BlockingPods::Unknown(error) => format!("pods cannot be listed: {error}"),
        };
        if facts.waits_for_update(&view.name) {
            said.push(format!("{} ({why})", view.name));
            nodes.insert(String::from(&*view.name));
        }
    }
    let message = format!(
        "pods that block a reboot run on {}",
        super::super::list(&said)
    );
    Verdict::nodes(GateReason::BlockingPods, nodes, message).map(|v| v.look_again(RECHECK))
}
