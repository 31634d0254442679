use super::*;
use crate::pool::Weekday::{self, Fri, Mon, Sat, Sun, Thu, Tue, Wed};
use proptest::prelude::*;

fn win(days: &[Weekday], start: &str, duration: &str, zone: &str) -> MaintenanceWindow {
    MaintenanceWindow {
        days: days.to_vec(),
        start: start.into(),
        duration: duration.into(),
        time_zone: zone.into(),
    }
}

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s)
        .unwrap_or_else(|e| panic!("{s}: {e}"))
        .with_timezone(&Utc)
}

fn open(until: &str) -> WindowState {
    WindowState::Open { until: at(until) }
}

fn closed(next: &str) -> WindowState {
    WindowState::Closed {
        next: Some(at(next)),
    }
}

const ALL_DAYS: [Weekday; 7] = [Mon, Tue, Wed, Thu, Fri, Sat, Sun];

#[test]
fn starts() {
    assert_eq!(parse_start("00:00"), Ok(NaiveTime::MIN));
    assert_eq!(
        parse_start("23:59"),
        Ok(NaiveTime::from_hms_opt(23, 59, 0).unwrap())
    );
    assert_eq!(
        parse_start("02:30"),
        Ok(NaiveTime::from_hms_opt(2, 30, 0).unwrap())
    );
    for bad in [
        "24:00", "2:30", "02:60", "0230", "02:30:00", "", "ab:cd", "+1:00", "02:3",
    ] {
        assert!(parse_start(bad).is_err(), "{bad:?}");
    }
    let pattern = regex::Regex::new(START_PATTERN).unwrap();
    for s in ["00:00", "23:59", "24:00", "2:30", "02:60"] {
        assert_eq!(pattern.is_match(s), parse_start(s).is_ok(), "{s:?}");
    }
}

#[test]
fn durations() {
    let cases = [
        ("3h", 180),
        ("90m", 90),
        ("1h30m", 90),
        ("1m", 1),
        ("168h", 10080),
        ("0h1m", 1),
    ];
    for (s, minutes) in cases {
        assert_eq!(parse_duration(s), Ok(TimeDelta::minutes(minutes)), "{s}");
    }
    for bad in [
        "", "0h", "0m", "169h", "10081m", "3", "h", "m", "1h30", "30m1h", "1.5h", "-1h", "1d",
        " 3h", "3h ", "1hm",
    ] {
        assert!(parse_duration(bad).is_err(), "{bad:?}");
    }
    assert_eq!(
        parse_duration("169h").unwrap_err(),
        "\"169h\" is out of range: a window lasts from 1m to 168h"
    );
    let pattern = regex::Regex::new(DURATION_PATTERN).unwrap();
    for s in ["3h", "90m", "1h30m", "1d", "1.5h", "30m1h"] {
        assert_eq!(pattern.is_match(s), parse_duration(s).is_ok(), "{s:?}");
    }
}

#[test]
fn zones() {
    assert!(parse_time_zone("UTC").is_ok());
    assert!(parse_time_zone("Europe/Berlin").is_ok());
    assert!(parse_time_zone("America/Argentina/Buenos_Aires").is_ok());
    assert!(parse_time_zone("Mars/Olympus").is_err());
    assert!(parse_time_zone("").is_err());
}

#[test]
fn window_states() {
    // (what, windows, now, expected)
    let cases: Vec<(&str, Vec<MaintenanceWindow>, &str, WindowState)> = vec![
        // UTC basics; 2025-06-02 is a Monday. Intervals are half-open.
        (
            "utc before",
            vec![win(&[Mon], "09:00", "3h", "UTC")],
            "2025-06-02T08:59:00Z",
            closed("2025-06-02T09:00:00Z"),
        ),
        (
            "utc at start",
            vec![win(&[Mon], "09:00", "3h", "UTC")],
            "2025-06-02T09:00:00Z",
            open("2025-06-02T12:00:00Z"),
        ),
        (
            "utc inside",
            vec![win(&[Mon], "09:00", "3h", "UTC")],
            "2025-06-02T11:59:59Z",
            open("2025-06-02T12:00:00Z"),
        ),
        (
            "utc at end",
            vec![win(&[Mon], "09:00", "3h", "UTC")],
            "2025-06-02T12:00:00Z",
            closed("2025-06-09T09:00:00Z"),
        ),
        (
            "utc one minute",
            vec![win(&[Mon], "09:00", "1m", "UTC")],
            "2025-06-02T09:00:59Z",
            open("2025-06-02T09:01:00Z"),
        ),
        (
            "utc 1h30m",
            vec![win(&[Mon], "09:00", "1h30m", "UTC")],
            "2025-06-02T10:00:00Z",
            open("2025-06-02T10:30:00Z"),
        ),
        (
            "every day",
            vec![win(&ALL_DAYS, "02:00", "90m", "UTC")],
            "2025-06-04T05:00:00Z",
            closed("2025-06-05T02:00:00Z"),
        ),
        // The weekday is the day the window starts: Sat 22:00 + 4h runs into Sunday.
        (
            "midnight sat",
            vec![win(&[Sat], "22:00", "4h", "UTC")],
            "2025-06-07T23:00:00Z",
            open("2025-06-08T02:00:00Z"),
        ),
        (
            "midnight sun 01:00",
            vec![win(&[Sat], "22:00", "4h", "UTC")],
            "2025-06-08T01:00:00Z",
            open("2025-06-08T02:00:00Z"),
        ),
        (
            "midnight sun 02:01",
            vec![win(&[Sat], "22:00", "4h", "UTC")],
            "2025-06-08T02:01:00Z",
            closed("2025-06-14T22:00:00Z"),
        ),
        (
            "midnight sun does not open",
            vec![win(&[Sun], "22:00", "4h", "UTC")],
            "2025-06-07T23:00:00Z",
            closed("2025-06-08T22:00:00Z"),
        ),
        (
            "mon 23:00 covers tue",
            vec![win(&[Mon], "23:00", "3h", "UTC")],
            "2025-06-03T01:30:00Z",
            open("2025-06-03T02:00:00Z"),
        ),
        // Time zones.
        (
            "new york summer",
            vec![win(&[Fri], "17:00", "2h", "America/New_York")],
            "2025-06-06T20:59:00Z",
            closed("2025-06-06T21:00:00Z"),
        ),
        (
            "new york winter",
            vec![win(&[Fri], "17:00", "2h", "America/New_York")],
            "2025-01-10T21:00:00Z",
            closed("2025-01-10T22:00:00Z"),
        ),
        (
            "new york winter inside",
            vec![win(&[Fri], "17:00", "2h", "America/New_York")],
            "2025-01-10T23:59:00Z",
            open("2025-01-11T00:00:00Z"),
        ),
        // Tue 01:00 in Kolkata (+05:30) is Monday 19:30 UTC.
        (
            "kolkata",
            vec![win(&[Tue], "01:00", "90m", "Asia/Kolkata")],
            "2025-06-02T20:00:00Z",
            open("2025-06-02T21:00:00Z"),
        ),
        (
            "kolkata before",
            vec![win(&[Tue], "01:00", "90m", "Asia/Kolkata")],
            "2025-06-02T19:00:00Z",
            closed("2025-06-02T19:30:00Z"),
        ),
        // Auckland: +12 in the southern winter, +13 in the southern summer.
        (
            "auckland june",
            vec![win(&[Sun], "03:00", "1h", "Pacific/Auckland")],
            "2025-06-07T12:00:00Z",
            closed("2025-06-07T15:00:00Z"),
        ),
        (
            "auckland december",
            vec![win(&[Sun], "03:00", "1h", "Pacific/Auckland")],
            "2025-12-06T12:00:00Z",
            closed("2025-12-06T14:00:00Z"),
        ),
        // Auckland springs forward 2025-09-28 02:00 -> 03:00: 02:30 becomes 03:30 NZDT.
        (
            "auckland gap",
            vec![win(&[Sun], "02:30", "1h", "Pacific/Auckland")],
            "2025-09-27T14:00:00Z",
            closed("2025-09-27T14:30:00Z"),
        ),
        // Auckland falls back 2025-04-06 03:00 -> 02:00: 02:30 is the earlier (NZDT) one.
        (
            "auckland fold",
            vec![win(&[Sun], "02:30", "1h", "Pacific/Auckland")],
            "2025-04-05T13:00:00Z",
            closed("2025-04-05T13:30:00Z"),
        ),
        // Chatham: +12:45, +13:45 in summer.
        (
            "chatham june",
            vec![win(&[Mon], "00:00", "30m", "Pacific/Chatham")],
            "2025-06-01T11:00:00Z",
            closed("2025-06-01T11:15:00Z"),
        ),
        (
            "chatham june inside",
            vec![win(&[Mon], "00:00", "30m", "Pacific/Chatham")],
            "2025-06-01T11:15:00Z",
            open("2025-06-01T11:45:00Z"),
        ),
        (
            "chatham december",
            vec![win(&[Mon], "00:00", "30m", "Pacific/Chatham")],
            "2025-11-30T10:00:00Z",
            closed("2025-11-30T10:15:00Z"),
        ),
        // Europe/Berlin springs forward 2025-03-30 02:00 CET -> 03:00 CEST. 02:30 does not
        // exist: shifted forward by the gap to 03:30 CEST = 01:30 UTC.
        (
            "berlin gap before",
            vec![win(&[Sun], "02:30", "1h", "Europe/Berlin")],
            "2025-03-30T01:00:00Z",
            closed("2025-03-30T01:30:00Z"),
        ),
        (
            "berlin gap inside",
            vec![win(&[Sun], "02:30", "1h", "Europe/Berlin")],
            "2025-03-30T01:30:00Z",
            open("2025-03-30T02:30:00Z"),
        ),
        // Duration is elapsed time: 01:00 CET (00:00 UTC) + 3h = 03:00 UTC = 05:00 CEST.
        (
            "berlin spring 3h",
            vec![win(&[Sun], "01:00", "3h", "Europe/Berlin")],
            "2025-03-30T02:59:00Z",
            open("2025-03-30T03:00:00Z"),
        ),
        (
            "berlin spring 3h start",
            vec![win(&[Sun], "01:00", "3h", "Europe/Berlin")],
            "2025-03-29T23:59:00Z",
            closed("2025-03-30T00:00:00Z"),
        ),
        // Europe/Berlin falls back 2025-10-26 03:00 CEST -> 02:00 CET: 02:30 happens twice,
        // the window opens at the first (CEST, 00:30 UTC) and lasts one elapsed hour.
        (
            "berlin fold before",
            vec![win(&[Sun], "02:30", "1h", "Europe/Berlin")],
            "2025-10-26T00:29:00Z",
            closed("2025-10-26T00:30:00Z"),
        ),
        (
            "berlin fold inside",
            vec![win(&[Sun], "02:30", "1h", "Europe/Berlin")],
            "2025-10-26T01:00:00Z",
            open("2025-10-26T01:30:00Z"),
        ),
        (
            "berlin fold second 02:30",
            vec![win(&[Sun], "02:30", "1h", "Europe/Berlin")],
            "2025-10-26T01:30:00Z",
            closed("2025-11-02T01:30:00Z"),
        ),
        // New York springs forward 2025-03-09 02:00 EST -> 03:00 EDT: 02:30 -> 03:30 EDT.
        (
            "new york gap",
            vec![win(&[Sun], "02:30", "1h", "America/New_York")],
            "2025-03-09T07:00:00Z",
            closed("2025-03-09T07:30:00Z"),
        ),
        (
            "new york gap inside",
            vec![win(&[Sun], "02:30", "1h", "America/New_York")],
            "2025-03-09T08:00:00Z",
            open("2025-03-09T08:30:00Z"),
        ),
        // New York falls back 2025-11-02 02:00 EDT -> 01:00 EST: 01:30 EDT = 05:30 UTC.
        (
            "new york fold before",
            vec![win(&[Sun], "01:30", "1h", "America/New_York")],
            "2025-11-02T05:00:00Z",
            closed("2025-11-02T05:30:00Z"),
        ),
        (
            "new york fold inside",
            vec![win(&[Sun], "01:30", "1h", "America/New_York")],
            "2025-11-02T06:29:00Z",
            open("2025-11-02T06:30:00Z"),
        ),
        (
            "new york fold second 01:30",
            vec![win(&[Sun], "01:30", "1h", "America/New_York")],
            "2025-11-02T06:30:00Z",
            closed("2025-11-09T06:30:00Z"),
        ),
        // Week-long windows. Wed 12:00 Berlin + 168h over the fall-back weekend ends at
        // 11:00 CET on the next Wednesday, one hour before the next one opens.
        (
            "berlin 168h open",
            vec![win(&[Wed], "12:00", "168h", "Europe/Berlin")],
            "2025-10-29T09:59:00Z",
            open("2025-10-29T10:00:00Z"),
        ),
        (
            "berlin 168h gap",
            vec![win(&[Wed], "12:00", "168h", "Europe/Berlin")],
            "2025-10-29T10:30:00Z",
            closed("2025-10-29T11:00:00Z"),
        ),
        (
            "utc 167h",
            vec![win(&[Wed], "12:00", "167h", "UTC")],
            "2025-06-11T11:30:00Z",
            closed("2025-06-11T12:00:00Z"),
        ),
        (
            "utc 167h open",
            vec![win(&[Wed], "12:00", "167h", "UTC")],
            "2025-06-12T11:30:00Z",
            open("2025-06-18T11:00:00Z"),
        ),
        // Several windows: any open one opens; next is the earliest.
        (
            "several next",
            vec![
                win(&[Thu], "10:00", "1h", "UTC"),
                win(&[Wed], "23:00", "2h", "Asia/Kolkata"),
                win(&[Tue], "23:00", "1h", "America/New_York"),
            ],
            "2025-06-03T12:00:00Z",
            closed("2025-06-04T03:00:00Z"),
        ),
        (
            "several next kolkata",
            vec![
                win(&[Thu], "10:00", "1h", "UTC"),
                win(&[Wed], "23:00", "2h", "Asia/Kolkata"),
                win(&[Wed], "23:00", "1h", "America/New_York"),
            ],
            "2025-06-04T12:00:00Z",
            closed("2025-06-04T17:30:00Z"),
        ),
        (
            "several one open",
            vec![
                win(&[Thu], "10:00", "1h", "UTC"),
                win(&[Wed], "23:00", "2h", "Asia/Kolkata"),
            ],
            "2025-06-04T18:00:00Z",
            open("2025-06-04T19:30:00Z"),
        ),
        (
            "touching merge",
            vec![
                win(&[Mon], "10:00", "1h", "UTC"),
                win(&[Mon], "09:00", "1h", "UTC"),
            ],
            "2025-06-02T09:30:00Z",
            open("2025-06-02T11:00:00Z"),
        ),
        (
            "overlap across zones",
            vec![
                win(&[Mon], "09:00", "2h", "UTC"),
                win(&[Mon], "12:30", "1h", "Europe/Berlin"),
            ],
            "2025-06-02T09:30:00Z",
            open("2025-06-02T11:30:00Z"),
        ),
        (
            "gap not merged",
            vec![
                win(&[Mon], "09:00", "1h", "UTC"),
                win(&[Mon], "10:01", "1h", "UTC"),
            ],
            "2025-06-02T09:30:00Z",
            open("2025-06-02T10:00:00Z"),
        ),
        (
            "nested",
            vec![
                win(&[Mon], "09:00", "3h", "UTC"),
                win(&[Mon], "10:00", "1h", "UTC"),
            ],
            "2025-06-02T10:30:00Z",
            open("2025-06-02T12:00:00Z"),
        ),
        (
            "no days plus one",
            vec![
                win(&[], "09:00", "1h", "UTC"),
                win(&[Fri], "09:00", "1h", "UTC"),
            ],
            "2025-06-02T09:30:00Z",
            closed("2025-06-06T09:00:00Z"),
        ),
        // Edge cases.
        (
            "no windows",
            vec![],
            "2025-06-02T09:30:00Z",
            WindowState::Always,
        ),
        (
            "no days",
            vec![win(&[], "09:00", "1h", "UTC")],
            "2025-06-02T09:30:00Z",
            WindowState::Closed { next: None },
        ),
    ];
    for (what, windows, now, expected) in cases {
        assert_eq!(window_state(&windows, at(now)), Ok(expected), "{what}");
    }
}

#[test]
fn always_open_schedules() {
    // Back to back all week: open, with an `until` at least a week ahead.
    let now = at("2025-06-04T13:37:00Z");
    for windows in [
        vec![win(&[Mon], "00:00", "168h", "UTC")],
        vec![win(&ALL_DAYS, "00:00", "24h", "Europe/Berlin")],
        vec![win(&[Mon, Thu], "06:00", "96h", "Pacific/Chatham")],
    ] {
        match window_state(&windows, now) {
            Ok(WindowState::Open { until }) => {
                assert!(until >= now + TimeDelta::days(7), "{windows:?}: {until}")
            }
            other => panic!("{windows:?}: {other:?}"),
        }
    }
    assert!(window_state(&[], now).unwrap().is_open());
    assert!(
        !window_state(&[win(&[], "00:00", "1h", "UTC")], now)
            .unwrap()
            .is_open()
    );
}

#[test]
fn window_errors() {
    let good = win(&[Mon], "09:00", "1h", "UTC");
    let now = at("2025-06-02T09:30:00Z");
    let cases = [
        (
            vec![good.clone(), win(&[Mon], "09:00", "1h", "Mars/Olympus")],
            1,
            "timeZone",
        ),
        (vec![win(&[Mon], "9:00", "1h", "UTC")], 0, "start"),
        (vec![win(&[Mon], "24:00", "1h", "UTC")], 0, "start"),
        (
            vec![
                good.clone(),
                good.clone(),
                win(&[Mon], "09:00", "169h", "UTC"),
            ],
            2,
            "duration",
        ),
        (vec![win(&[Mon], "09:00", "", "UTC")], 0, "duration"),
        // The first bad field of the first bad window.
        (
            vec![win(&[], "x", "y", "z"), win(&[Mon], "x", "1h", "UTC")],
            0,
            "start",
        ),
    ];
    for (windows, index, field) in cases {
        let err = window_state(&windows, now).unwrap_err();
        assert_eq!((err.index, err.field), (index, field), "{windows:?}");
    }
    let err = window_state(&[good, win(&[Mon], "09:00", "1h", "Mars/Olympus")], now).unwrap_err();
    assert_eq!(
        err.to_string(),
        "spec.rollout.maintenanceWindows[1].timeZone: \"Mars/Olympus\" is not an IANA time zone \
         name such as \"UTC\" or \"Europe/Berlin\""
    );
}

#[test]
fn gap_of_a_whole_day() {
    // Samoa skipped Friday 2011-12-30 (UTC-10 -> UTC+14). A Friday 02:00 window is read
    // with the offset before the gap: 12:00 UTC, the same instant as Saturday 02:00.
    let windows = [win(&[Fri], "02:00", "1h", "Pacific/Apia")];
    assert_eq!(
        window_state(&windows, at("2011-12-30T11:00:00Z")),
        Ok(closed("2011-12-30T12:00:00Z"))
    );
}

const ZONES: &[&str] = &[
    "UTC",
    "America/New_York",
    "Europe/Berlin",
    "Asia/Kolkata",
    "Pacific/Auckland",
    "Pacific/Chatham",
    "Australia/Lord_Howe",
    "America/Santiago",
    "Pacific/Apia",
    "Asia/Tehran",
];

fn window_strategy() -> impl Strategy<Value = MaintenanceWindow> {
    (
        proptest::sample::subsequence(ALL_DAYS.to_vec(), 0..=7),
        0u32..24,
        0u32..60,
        prop_oneof![1i64..=240, 1i64..=MAX_DURATION_MINUTES],
        proptest::sample::select(ZONES),
    )
        .prop_map(|(days, h, m, minutes, zone)| MaintenanceWindow {
            days,
            start: format!("{h:02}:{m:02}"),
            duration: format!("{}h{}m", minutes / 60, minutes % 60),
            time_zone: zone.into(),
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn next_opens_and_nothing_opens_before(
        windows in proptest::collection::vec(window_strategy(), 1..4),
        // 2000-01-01 .. 2040-01-01, to the second.
        secs in 946_684_800i64..2_208_988_800,
        samples in proptest::collection::vec(0.0f64..1.0, 6),
    ) {
        let now = DateTime::from_timestamp(secs, 0).unwrap();
        let state = window_state(&windows, now).unwrap();
        match state {
            WindowState::Always => prop_assert!(false, "windows are set"),
            WindowState::Closed { next: None } => {
                prop_assert!(windows.iter().all(|w| w.days.is_empty()));
            }
            WindowState::Closed { next: Some(next) } => {
                prop_assert!(next > now);
                prop_assert!(next - now <= TimeDelta::days(8), "{next} is too far from {now}");
                prop_assert!(window_state(&windows, next).unwrap().is_open(), "closed at next {next}");
                let gap = (next - now).num_seconds();
                for f in samples {
                    let t = now + TimeDelta::seconds((gap as f64 * f) as i64);
                    prop_assert_eq!(window_state(&windows, t).unwrap(), state, "at {}", t);
                }
                let last = next - TimeDelta::seconds(1);
                prop_assert_eq!(window_state(&windows, last).unwrap(), state, "at {}", last);
            }
            WindowState::Open { until } => {
                prop_assert!(until > now);
                let span = (until - now).num_seconds();
                for f in samples {
                    let t = now + TimeDelta::seconds((span as f64 * f) as i64);
                    prop_assert!(window_state(&windows, t).unwrap().is_open(), "closed at {}", t);
                }
                let last = until - TimeDelta::seconds(1);
                prop_assert!(window_state(&windows, last).unwrap().is_open(), "closed at {}", last);
                if until - now < TimeDelta::days(7) {
                    prop_assert!(
                        !window_state(&windows, until).unwrap().is_open(),
                        "still open at until {}", until
                    );
                }
            }
        }
    }
}

/// Every whole minute of `[from, to)` (and `from` itself): windows start and end on
/// whole minutes of their zones, and the zones of these years are whole minutes off UTC,
/// so the state can change only there.
fn minutes(from: DateTime<Utc>, to: DateTime<Utc>) -> impl Iterator<Item = DateTime<Utc>> {
    let first = from.timestamp().div_euclid(60) * 60 + 60;
    std::iter::once(from).chain(
        (first..to.timestamp())
            .step_by(60)
            .filter_map(|s| DateTime::from_timestamp(s, 0)),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Not six samples: every minute up to the next change is checked.
    #[test]
    fn the_state_holds_at_every_minute_until_it_changes(
        windows in proptest::collection::vec(window_strategy(), 1..4),
        secs in 946_684_800i64..2_208_988_800,
    ) {
        let now = DateTime::from_timestamp(secs, 0).unwrap();
        match window_state(&windows, now).unwrap() {
            WindowState::Always => prop_assert!(false, "windows are set"),
            WindowState::Closed { next } => {
                // Never opening: a week and a day shows it, as every window is weekly.
                let next = next.unwrap_or(now + TimeDelta::days(8));
                for t in minutes(now, next) {
                    prop_assert!(!window_state(&windows, t).unwrap().is_open(), "open at {}", t);
                }
            }
            WindowState::Open { until } => {
                for t in minutes(now, until.min(now + TimeDelta::days(8))) {
                    prop_assert!(window_state(&windows, t).unwrap().is_open(), "closed at {}", t);
                }
            }
        }
    }
}
