//! One event for what one plan did alike to several nodes. Each node's events still wait
//! for that node's writes; the plan's events that say the same thing about different
//! nodes (`node n1 drained; approved to reboot into …`, `node n2 drained; …`) become one
//! (`nodes n1, n2 drained; …`). A rollout of N nodes then records far fewer than 2N
//! events once its plans move several nodes at a time, which is exactly when there are
//! many; a plan that moves one node records the same event as before.

use crate::plan::PlannedEvent;

/// The longest note an Event may carry (events.k8s.io/v1 allows 1 kB).
const NOTE_MAX: usize = 1024;

/// `message` as an Event's note: whole when it fits in [`NOTE_MAX`] bytes, else cut at a
/// character boundary and ended with `… (N more bytes)`, so that the API server never
/// refuses it (a refused event is lost exactly when it names the most nodes).
pub(super) fn fit_note(message: &str) -> String {
    if message.len() <= NOTE_MAX {
        return message.to_owned();
    }
    // The tail's own length: at most 20 digits.
    let room = NOTE_MAX - " … (99999999999999999999 more bytes)".len();
    let mut cut = room;
    while !message.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{} … ({} more bytes)", &message[..cut], message.len() - cut)
}

/// `events` with those that differ only in their node merged, in first-seen order.
pub(super) fn merge(events: &[&PlannedEvent]) -> Vec<PlannedEvent> {
    let mut merged: Vec<(Option<Key<'_>>, Vec<&str>, PlannedEvent)> = Vec::new();
    for event in events {
        let key = Key::of(event);
        let found = key.as_ref().and_then(|k| {
            merged
                .iter_mut()
                .find(|(other, ..)| other.as_ref().is_some_and(|o| o.same(k)))
        });
        match (found, &key) {
            (Some((_, nodes, _)), Some(k)) => nodes.push(k.node),
            _ => {
                let nodes = key.iter().map(|k| k.node).collect();
                merged.push((key, nodes, (*event).clone()));
            }
        }
    }
    merged
        .into_iter()
        .map(|(key, nodes, event)| match key {
            Some(key) if nodes.len() > 1 => PlannedEvent {
                node: None,
                warning: key.warning,
                reason: key.reason,
                message: several(&nodes, key.rest),
            },
            _ => event,
        })
        .collect()
}

/// What makes two node events alike: all but the node.
struct Key<'e> {
    reason: &'static str,
    warning: bool,
    /// The message after `node NAME`.
    rest: &'e str,
    node: &'e str,
}

impl<'e> Key<'e> {
    /// The event's key, when it is about one node and says so first.
    fn of(event: &'e PlannedEvent) -> Option<Self> {
        let node = event.node.as_deref()?;
        let rest = event.message.strip_prefix("node ")?.strip_prefix(node)?;
        Some(Key {
            reason: event.reason,
            warning: event.warning,
            rest,
            node,
        })
    }
}

impl Key<'_> {
    fn same(&self, other: &Key<'_>) -> bool {
        (self.reason, self.warning, self.rest) == (other.reason, other.warning, other.rest)
    }
}

/// `nodes a, b, c{rest}`, the list cut short (`… and K more`) to fit an Event's note.
fn several(nodes: &[&str], rest: &str) -> String {
    let mut listed = String::new();
    for (i, node) in nodes.iter().enumerate() {
        let more = format!(" and {} more", nodes.len() - i);
        let separator = if i == 0 { "" } else { ", " };
        let fits =
            "nodes ".len() + listed.len() + separator.len() + node.len() + rest.len() + more.len()
                <= NOTE_MAX;
        if !fits {
            listed.push_str(&more);
            break;
        }
        listed.push_str(separator);
        listed.push_str(node);
    }
    format!("nodes {listed}{rest}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::events::{DRAIN_FAILED, NODE_UPDATED, REBOOT_APPROVED};

    fn event(node: &str, reason: &'static str, rest: &str) -> PlannedEvent {
        PlannedEvent {
            node: Some(node.to_owned()),
            warning: reason == DRAIN_FAILED,
            reason,
            message: format!("node {node}{rest}"),
        }
    }

    #[test]
    fn alike_node_events_become_one_in_first_seen_order() {
        let approved = " drained; approved to reboot into reg/os@sha256:aa";
        let events = [
            event("n1", REBOOT_APPROVED, approved),
            event(
                "n2",
                NODE_UPDATED,
                " runs reg/os@sha256:aa after a reboot; slot freed",
            ),
            event("n3", REBOOT_APPROVED, approved),
            event(
                "n4",
                NODE_UPDATED,
                " runs reg/os@sha256:aa after a soft reboot; slot freed",
            ),
            event("n5", REBOOT_APPROVED, approved),
        ];
        let refs: Vec<&PlannedEvent> = events.iter().collect();
        let merged = merge(&refs);
        let notes: Vec<(&str, &str)> = merged
            .iter()
            .map(|e| (e.reason, e.message.as_str()))
            .collect();
        assert_eq!(
            notes,
            vec![
                (
                    REBOOT_APPROVED,
                    "nodes n1, n3, n5 drained; approved to reboot into reg/os@sha256:aa"
                ),
                (
                    NODE_UPDATED,
                    "node n2 runs reg/os@sha256:aa after a reboot; slot freed"
                ),
                (
                    NODE_UPDATED,
                    "node n4 runs reg/os@sha256:aa after a soft reboot; slot freed"
                ),
            ]
        );
        assert_eq!(merged[0].node, None);
        assert_eq!(merged[1].node.as_deref(), Some("n2"));
    }

    #[test]
    fn events_not_about_one_node_stay_as_they_are() {
        let pool = PlannedEvent {
            node: None,
            warning: false,
            reason: "RolloutStarted",
            message: "rolling out".into(),
        };
        let odd = PlannedEvent {
            node: Some("n1".into()),
            warning: true,
            reason: DRAIN_FAILED,
            message: "drain of n1 timed out".into(),
        };
        let merged = merge(&[&pool, &odd, &pool, &odd]);
        assert_eq!(merged, vec![pool.clone(), odd.clone(), pool, odd]);
        // A warning and a normal event with the same words are not merged.
        let a = event("n1", REBOOT_APPROVED, " x");
        let mut b = event("n2", REBOOT_APPROVED, " x");
        b.warning = true;
        assert_eq!(merge(&[&a, &b]).len(), 2);
    }

    #[test]
    fn every_note_fits_whatever_its_message() {
        for message in [
            "short".to_owned(),
            "x".repeat(NOTE_MAX),
            "é".repeat(NOTE_MAX),
            format!(
                "halted: {}",
                "node n-1: Error: a long error from bootc; ".repeat(300)
            ),
        ] {
            let note = super::fit_note(&message);
            assert!(note.len() <= NOTE_MAX, "{}", note.len());
            if message.len() <= NOTE_MAX {
                assert_eq!(note, message);
            } else {
                assert!(note.ends_with(" more bytes)"), "{note}");
                let kept = note.split(" … (").next().unwrap();
                assert!(message.starts_with(kept));
            }
        }
    }

    #[test]
    fn a_long_list_is_cut_to_fit_the_note() {
        let names: Vec<String> = (0..500).map(|i| format!("node-{i:04}")).collect();
        let rest = " runs reg/os@sha256:aa after a reboot; slot freed";
        let events: Vec<PlannedEvent> =
            names.iter().map(|n| event(n, NODE_UPDATED, rest)).collect();
        let refs: Vec<&PlannedEvent> = events.iter().collect();
        let merged = merge(&refs);
        assert_eq!(merged.len(), 1);
        let note = &merged[0].message;
        assert!(note.len() <= NOTE_MAX, "{}", note.len());
        assert!(note.starts_with("nodes node-0000, node-0001, "), "{note}");
        assert!(note.ends_with(rest), "{note}");
        let listed = note.matches("node-").count();
        let more: usize = note
            .split(" and ")
            .nth(1)
            .and_then(|s| s.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap();
        assert_eq!(listed + more, 500, "{note}");
    }
}
