use bootc_crds::node::ImageStatus as ReportedImage;
use chrono::{DateTime, Utc};

use super::report::to_kube_time;
use super::*;

const DIGEST_A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

#[test]
fn unparseable_timestamp_is_dropped_not_fatal() {
    let doc = format!(
        r#"{{"apiVersion":"org.containers.bootc/v1","kind":"BootcHost",
        "status":{{"booted":{{"incompatible":false,"pinned":false,
        "image":{{"image":{{"image":"q.io/a/b:1","transport":"registry"}},
        "imageDigest":"{DIGEST_A}","timestamp":"yesterday"}}}}}}}}"#
    );
    let host = parse(doc.as_bytes()).unwrap();
    let (booted, _, _) = host.report();
    let booted = booted.unwrap();
    assert_eq!(booted.image.timestamp, None);
    assert_eq!(booted.image.image_digest, DIGEST_A);
}

#[test]
fn kube_time_keeps_the_instant() {
    let t = DateTime::parse_from_rfc3339("2023-10-14T21:22:15.42+02:00")
        .unwrap()
        .with_timezone(&Utc);
    let reported = ReportedImage {
        timestamp: to_kube_time(&t),
        ..ReportedImage::default()
    };
    let json = serde_json::to_value(&reported).unwrap();
    assert_eq!(json["timestamp"], "2023-10-14T19:22:15Z");
}
