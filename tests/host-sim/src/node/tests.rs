use super::launch::{machine_uuid, valid_name};
use super::*;

#[test]
fn machine_uuid_is_stable_and_well_formed() {
    let a = machine_uuid("node-a");
    assert_eq!(a, machine_uuid("node-a"));
    assert_ne!(a, machine_uuid("node-b"));
    assert_eq!(a.len(), 36);
    assert_eq!(&a[14..15], "4");
    assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"));
}

#[test]
fn names() {
    assert!(valid_name("sim-node-1"));
    assert!(!valid_name("Sim"));
    assert!(!valid_name("-a"));
    assert!(!valid_name(""));
}

#[test]
fn discard_staged_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("state.json"),
        r#"{"booted":{"x":1},"staged":{"y":2},"rollback":null,"rollbackQueued":true}"#,
    )
    .unwrap();
    discard_staged(dir.path()).unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("state.json")).unwrap())
            .unwrap();
    assert_eq!(v["booted"]["x"], 1);
    assert!(v["staged"].is_null());
    assert_eq!(v["rollbackQueued"], false);
}
