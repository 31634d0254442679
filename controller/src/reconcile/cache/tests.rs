//! The overlay with opaque resource versions: nothing here orders them.

use std::sync::Arc;

use bootc_crds::node::{BootcNode, BootcNodeSpec};
use kube::runtime::watcher::Event;

use super::Overlay;

fn object(rv: &str, uid: &str, image: &str) -> BootcNode {
    let mut b = BootcNode::new("n1", BootcNodeSpec::staged(image));
    b.metadata.resource_version = Some(rv.into());
    b.metadata.uid = Some(uid.into());
    b
}

fn image(picked: Option<Arc<BootcNode>>) -> Option<String> {
    picked.map(|b| b.spec.desired_image.clone())
}

#[test]
fn a_write_is_used_until_the_watch_delivers_that_very_version() {
    let mut overlay = Overlay::default();
    let old = Arc::new(object("zz9", "u1", "old"));
    // "a1" would sort before "zz9": an order would take the cache for newer.
    overlay.wrote("n1", object("a1", "u1", "new"));
    assert_eq!(
        image(overlay.pick("n1", Some(old.clone()))).as_deref(),
        Some("new")
    );
    overlay.observe(&Event::Apply(object("zz9", "u1", "old")));
    assert_eq!(image(overlay.pick("n1", Some(old))).as_deref(), Some("new"));
    assert_eq!(overlay.names().count(), 1);

    overlay.observe(&Event::Apply(object("a1", "u1", "new")));
    let cached = Arc::new(object("a1", "u1", "new"));
    assert_eq!(
        image(overlay.pick("n1", Some(cached))).as_deref(),
        Some("new")
    );
    assert_eq!(overlay.names().count(), 0, "caught up: the entry is gone");
    // Later versions come from the cache, whatever they look like.
    let later = Arc::new(object("0", "u1", "someone else's"));
    assert_eq!(
        image(overlay.pick("n1", Some(later))).as_deref(),
        Some("someone else's")
    );
}

#[test]
fn a_write_whose_response_comes_after_its_watch_event_is_not_kept() {
    let mut overlay = Overlay::default();
    overlay.observe(&Event::Apply(object("v7", "u1", "new")));
    overlay.observe(&Event::Apply(object("v8", "u1", "newer")));
    overlay.wrote("n1", object("v7", "u1", "new"));
    let cached = Arc::new(object("v8", "u1", "newer"));
    assert_eq!(
        image(overlay.pick("n1", Some(cached))).as_deref(),
        Some("newer")
    );
    assert_eq!(overlay.names().count(), 0);
}

#[test]
fn a_write_whose_response_comes_after_its_deletion_is_kept_until_forgotten() {
    let mut overlay = Overlay::default();
    overlay.observe(&Event::Apply(object("v7", "u1", "last")));
    overlay.observe(&Event::Delete(object("v8", "u1", "last")));
    // The write that let it go answers after its deletion was delivered.
    overlay.wrote("n1", object("v8", "u1", "last"));
    assert_eq!(image(overlay.pick("n1", None)).as_deref(), Some("last"));
    overlay.forget("n1");
    assert_eq!(image(overlay.pick("n1", None)), None);
    assert_eq!(overlay.names().count(), 0);
}

#[test]
fn a_relist_that_began_after_a_write_replaces_it() {
    let mut overlay = Overlay::default();
    overlay.wrote("n1", object("w", "u1", "ours"));
    overlay.observe(&Event::Init);
    // Written during the relist: kept until delivered.
    let mut other = object("q", "u2", "during");
    other.metadata.name = Some("n2".into());
    overlay.wrote("n2", other);
    overlay.observe(&Event::InitApply(object("x", "u1", "listed")));
    overlay.observe(&Event::InitDone);
    let listed = Arc::new(object("x", "u1", "listed"));
    assert_eq!(
        image(overlay.pick("n1", Some(listed))).as_deref(),
        Some("listed")
    );
    assert_eq!(overlay.names().cloned().collect::<Vec<_>>(), ["n2"]);
}

#[test]
fn a_deletion_hides_the_object_until_the_watch_sees_it_go() {
    let mut overlay = Overlay::default();
    let cached = Arc::new(object("5", "u1", "old"));
    overlay.deleted("n1", Some("u1".into()));
    assert!(overlay.pick("n1", Some(cached)).is_none());
    overlay.observe(&Event::Delete(object("6", "u1", "old")));
    assert!(overlay.pick("n1", None).is_none());
    // A new object of the same name (another uid) shows.
    let new = Arc::new(object("1", "u2", "recreated"));
    assert_eq!(
        image(overlay.pick("n1", Some(new))).as_deref(),
        Some("recreated")
    );

    // Recreated before the watch reported the deletion: the new uid shows at once.
    let mut overlay = Overlay::default();
    overlay.deleted("n1", Some("u1".into()));
    let new = Arc::new(object("2", "u3", "again"));
    assert_eq!(
        image(overlay.pick("n1", Some(new))).as_deref(),
        Some("again")
    );
}

/// The names read from a write among some names (members and moved names, which may
/// share a name) are those of all of them that are among those names, each once,
/// whichever is the shorter (the overlay walks that one).
#[test]
fn the_names_among_some_are_those_of_all_that_are_among_them() {
    use crate::plan::NodeView;
    use crate::reconcile::views::Among;
    let mut overlay = Overlay::default();
    for i in (0..40).step_by(3) {
        overlay.wrote(&format!("n{i:02}"), object("1", "u1", "x"));
    }
    overlay.deleted("n41", Some("u2".into()));
    let mut all = overlay.all_names(None);
    all.sort();
    assert_eq!(all.len(), 15);
    let names = |from: usize, step: usize| -> Vec<String> {
        (from..45)
            .step_by(step)
            .map(|i| format!("n{i:02}"))
            .collect()
    };
    let mut walked = (0, 0);
    for ((from, step), (moved_from, moved_step)) in [
        ((0, 1), (0, 50)),
        ((0, 7), (3, 9)),
        ((1, 3), (0, 3)),
        ((0, 3), (0, 3)),
        ((30, 1), (44, 1)),
        ((40, 1), (0, 50)),
        ((44, 1), (44, 1)),
        ((39, 3), (39, 1)),
    ] {
        let nodes: Vec<NodeView> = names(from, step)
            .into_iter()
            .map(|name| NodeView {
                name: name.into(),
                node: None,
                bootc: None,
            })
            .collect();
        let moved = names(moved_from, moved_step);
        let among = Among {
            nodes: &nodes,
            moved: &moved,
        };
        let mut got = overlay.all_names(Some(among));
        got.sort();
        let expected: Vec<String> = all
            .iter()
            .filter(|n| nodes.iter().any(|v| *v.name == **n) || moved.contains(n))
            .cloned()
            .collect();
        assert_eq!(
            got, expected,
            "among {from}/{step} and {moved_from}/{moved_step}"
        );
        if among.len() < all.len() {
            walked.0 += 1;
        } else {
            walked.1 += 1;
        }
    }
    assert!(walked.0 > 0 && walked.1 > 0, "both walked: {walked:?}");
}
