use super::*;

#[test]
fn resource_versions_are_opaque_and_round_trip() {
    let texts: Vec<String> = (1..=64).map(rv_text).collect();
    for (i, t) in texts.iter().enumerate() {
        assert!(t.parse::<u64>().is_err(), "{t} reads as a number");
        assert_eq!(rv_order(t), Some(i as u64 + 1));
    }
    let mut sorted = texts.clone();
    sorted.sort();
    assert_ne!(sorted, texts, "their text order follows the counter");
    assert_eq!(rv_text(0), "0");
    assert_eq!(rv_order("0"), Some(0));
    assert_eq!(rv_order("12"), None);
}

fn key() -> ResourceKey {
    ResourceKey {
        group: "".into(),
        plural: "configmaps".into(),
    }
}

fn cm(ns: &str, name: &str) -> Value {
    json!({"metadata": {"namespace": ns, "name": name, "uid": format!("{ns}-{name}")}})
}

/// The followers of the whole stream get the buffer set for them, apart from the
/// watches' own: 40 events overflow 16 but not 64.
/// A watch whose queue fills is cut and counted; one whose client left is dropped
/// without being counted; one that keeps up stays.
#[test]
fn watches_that_fall_behind_are_counted() {
    let mut s = Store::new(100, 16);
    let behind = s.watch(&key(), None, None);
    let left = s.watch(&key(), None, None);
    drop(left);
    let mut reading = s.watch(&key(), None, None);
    for i in 0..40 {
        s.insert(&key(), cm("a", &format!("x{i}")));
        while reading.try_recv().is_ok() {}
    }
    assert_eq!(
        s.cut_behind().iter().collect::<Vec<_>>(),
        [(&key().plural, &1)]
    );
    assert!(!reading.is_closed());
    drop(behind);
}

#[test]
fn the_observers_buffer_is_its_own() {
    let mut s = Store::new(100, 16);
    let mut small = s.subscribe();
    s.set_observer_buffer(64);
    let mut large = s.subscribe();
    for i in 0..40 {
        s.insert(&key(), cm("a", &format!("x{i}")));
    }
    assert!(matches!(
        small.try_recv(),
        Err(broadcast::error::TryRecvError::Closed)
    ));
    let mut got = 0;
    while large.try_recv().is_ok() {
        got += 1;
    }
    assert_eq!(got, 40);
    let mut s = Store::new(100, 16);
    let mut lagging = s.subscribe();
    for i in 0..40 {
        s.insert(&key(), cm("a", &format!("x{i}")));
    }
    assert!(matches!(
        lagging.try_recv(),
        Err(broadcast::error::TryRecvError::Lagged(_))
    ));
}

#[test]
fn one_counter_orders_everything() {
    let mut s = Store::new(100, 16);
    let a = s.insert(&key(), cm("a", "x"));
    let b = s.insert(&key(), cm("b", "x"));
    assert_eq!(a["metadata"]["resourceVersion"], rv_text(2));
    assert_eq!(b["metadata"]["resourceVersion"], rv_text(3));
    let c = s.replace(&key(), (*a).clone());
    assert_eq!(c["metadata"]["resourceVersion"], rv_text(4));
    let d = s.remove(&key(), "b", "x").unwrap();
    assert_eq!(d["metadata"]["resourceVersion"], rv_text(5));
    assert_eq!(s.list(&key(), None).len(), 1);
    assert_eq!(s.list(&key(), Some("a")).len(), 1);
    assert_eq!(s.list(&key(), Some("b")).len(), 0);
    assert!(s.locate_uid("b-x").is_none() && s.locate_uid("a-x").is_some());
    let since: Vec<u64> = s.since(3).unwrap().iter().map(|e| e.rv).collect();
    assert_eq!(since, [4, 5]);
}

#[test]
fn old_versions_are_gone_after_compaction() {
    let mut s = Store::new(2, 16);
    for i in 0..5 {
        s.insert(&key(), cm("a", &i.to_string()));
    }
    // Versions 2..=6 were written; only the last two events are kept.
    assert_eq!(s.since(5).unwrap().len(), 1);
    assert!(s.since(4).is_ok());
    assert_eq!(s.since(3).unwrap_err(), Gone { oldest: 4 });
    s.compact();
    assert!(
        s.since(6).is_err(),
        "even the newest version before compaction is gone"
    );
    assert_eq!(s.rv(), 7);
    assert!(s.since(7).unwrap().is_empty());
}

#[test]
fn watches_get_only_their_events() {
    let mut s = Store::new(100, 16);
    let mut all = s.watch(&key(), None, None);
    let mut in_b = s.watch(&key(), Some("b".into()), None);
    let mut named = s.watch(&key(), Some("a".into()), Some("y".into()));
    s.insert(&key(), cm("a", "x"));
    s.insert(&key(), cm("a", "y"));
    s.insert(&key(), cm("b", "y"));
    let names = |rx: &mut mpsc::Receiver<Arc<Event>>| {
        let mut out = Vec::new();
        while let Ok(e) = rx.try_recv() {
            out.push(format!(
                "{}/{}",
                e.namespace,
                e.object["metadata"]["name"].as_str().unwrap()
            ));
        }
        out
    };
    assert_eq!(names(&mut all), ["a/x", "a/y", "b/y"]);
    assert_eq!(names(&mut in_b), ["b/y"]);
    assert_eq!(names(&mut named), ["a/y"]);
}

#[test]
fn named_watches_get_their_object_only_and_a_named_list_is_a_lookup() {
    let mut s = Store::new(100, 16);
    let mut x = s.watch(&key(), None, Some("x".into()));
    let mut x_again = s.watch(&key(), None, Some("x".into()));
    let mut y = s.watch(&key(), None, Some("y".into()));
    s.insert(&key(), cm("", "x"));
    s.insert(&key(), cm("", "z"));
    s.remove(&key(), "", "x");
    for rx in [&mut x, &mut x_again] {
        let kinds: Vec<EventType> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|e| e.kind)
            .collect();
        assert_eq!(kinds, [EventType::Added, EventType::Deleted]);
    }
    assert!(y.try_recv().is_err(), "no event of y");
    drop(y);
    s.insert(&key(), cm("", "y"));
    assert!(
        !s.sinks[&key()].named.contains_key("y"),
        "the gone watch is forgotten"
    );

    s.insert(&key(), cm("a", "x"));
    let names = |objects: Vec<Arc<Value>>| -> Vec<String> {
        objects
            .iter()
            .map(|o| {
                let m = &o["metadata"];
                format!(
                    "{}/{}",
                    m["namespace"].as_str().unwrap(),
                    m["name"].as_str().unwrap()
                )
            })
            .collect()
    };
    assert_eq!(names(s.list_named(&key(), None, Some("y"), false)), ["/y"]);
    assert_eq!(
        names(s.list_named(&key(), Some("a"), Some("x"), true)),
        ["a/x"]
    );
    assert!(s.list_named(&key(), Some("a"), Some("y"), true).is_empty());
    // A namespaced resource across namespaces: every object, for the caller to filter.
    assert_eq!(s.list_named(&key(), None, Some("x"), true).len(), 3);
}

#[test]
fn a_watch_that_falls_behind_is_dropped() {
    let mut s = Store::new(1000, 16);
    let mut slow = s.watch(&key(), None, None);
    for i in 0..17 {
        s.insert(&key(), cm("a", &i.to_string()));
    }
    let mut received = 0;
    while slow.try_recv().is_ok() {
        received += 1;
    }
    assert_eq!(received, 16, "the queue held what fit");
    assert!(
        slow.is_closed(),
        "then the watch was dropped, ending its stream"
    );
    // History still has everything, for the client to resume from.
    assert_eq!(s.since(1).unwrap().len(), 17);
}
