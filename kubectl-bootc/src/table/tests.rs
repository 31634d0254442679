use chrono::TimeDelta;

use super::*;

#[test]
fn columns_are_padded_to_the_widest_cell_plus_three_spaces_and_headers_are_upper_case() {
    let mut t = Table::new(&["name", "state"]);
    t.rows.push(vec!["worker-1".into(), "Idle".into()]);
    t.rows.push(vec!["w2".into(), "Rebooting".into()]);
    assert_eq!(
        t.render(),
        "NAME       STATE\nworker-1   Idle\nw2         Rebooting\n"
    );
}

#[test]
fn the_last_column_is_not_padded_and_no_line_ends_in_spaces() {
    let mut t = Table::new(&["a", "b", "c"]);
    t.rows.push(vec!["x".into(), "".into(), "".into()]);
    for line in t.render().lines() {
        assert_eq!(line, line.trim_end(), "{line:?}");
    }
    assert_eq!(t.render(), "A   B   C\nx\n");
}

#[test]
fn ages_read_as_kubectl_prints_them() {
    let cases = [
        (-5, "<invalid>"),
        (-1, "0s"),
        (0, "0s"),
        (45, "45s"),
        (119, "119s"),
        (120, "2m"),
        (150, "2m30s"),
        (600, "10m"),
        (179 * 60, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 600, "3h10m"),
        (8 * 3600, "8h"),
        (47 * 3600, "47h"),
        (48 * 3600, "2d"),
        (50 * 3600, "2d2h"),
        (8 * 86400, "8d"),
        (730 * 86400, "2y"),
        (735 * 86400, "2y5d"),
        (9 * 365 * 86400, "9y"),
    ];
    for (seconds, want) in cases {
        assert_eq!(
            human_duration(TimeDelta::seconds(seconds)),
            want,
            "{seconds}s"
        );
    }
    let now = chrono::Utc::now();
    assert_eq!(age(now - TimeDelta::minutes(5), now), "5m");
}

#[test]
fn short_digests_take_twelve_hex_characters() {
    let d = format!("sha256:{}", "ab".repeat(32));
    assert_eq!(short_digest(&d), "abababababab");
    assert_eq!(short_digest("abc"), "abc");
    assert_eq!(short_digest("sha256:"), "");
}

#[test]
fn byte_counts_use_binary_units() {
    assert_eq!(bytes(0), "0");
    assert_eq!(bytes(1023), "1023");
    assert_eq!(bytes(1024), "1Ki");
    assert_eq!(bytes(1536), "1.5Ki");
    assert_eq!(bytes(300 * 1024 * 1024), "300Mi");
    assert_eq!(bytes(u64::MAX), "16Ei");
}
