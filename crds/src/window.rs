//! Maintenance-window fields: `start` ("HH:MM"), `duration` ("3h", "90m", "1h30m") and
//! `timeZone` (an IANA name). The scheduling itself belongs to the controller.

use chrono::{NaiveTime, TimeDelta};
use chrono_tz::Tz;

/// Schema pattern for `start`.
pub const START_PATTERN: &str = r"^([01][0-9]|2[0-3]):[0-5][0-9]$";
/// Schema pattern for `duration`.
pub const DURATION_PATTERN: &str = r"^([0-9]{1,3}h)?([0-9]{1,4}m)?$";
/// Shortest window.
pub const MIN_DURATION_MINUTES: i64 = 1;
/// Longest window (a week: longer windows are always open; leave windows unset instead).
pub const MAX_DURATION_MINUTES: i64 = 7 * 24 * 60;

/// Parses `HH:MM` (24-hour clock).
pub fn parse_start(s: &str) -> Result<NaiveTime, String> {
    let bad = || format!("{s:?} is not a time of day in 24-hour HH:MM form, e.g. \"02:30\"");
    let (h, m) = s.split_once(':').ok_or_else(bad)?;
    if h.len() != 2 || m.len() != 2 || !h.chars().chain(m.chars()).all(|c| c.is_ascii_digit()) {
        return Err(bad());
    }
    let (h, m) = (h.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?);
    NaiveTime::from_hms_opt(h, m, 0).ok_or_else(bad)
}

/// Parses `<hours>h<minutes>m` (either part may be left out) into a duration between one
/// minute and a week.
pub fn parse_duration(s: &str) -> Result<TimeDelta, String> {
    let bad = || format!("{s:?} is not a duration such as \"3h\", \"90m\" or \"1h30m\"");
    let (hours, rest) = match s.split_once('h') {
        Some((h, rest)) => (Some(h), rest),
        None => (None, s),
    };
    let minutes = match rest {
        "" => None,
        m => Some(m.strip_suffix('m').ok_or_else(bad)?),
    };
    if hours.is_none() && minutes.is_none() {
        return Err(bad());
    }
    let number = |part: Option<&str>, max_len: usize| -> Result<i64, String> {
        match part {
            None => Ok(0),
            Some(p)
                if !p.is_empty() && p.len() <= max_len && p.chars().all(|c| c.is_ascii_digit()) =>
            {
                p.parse().map_err(|_| bad())
            }
            Some(_) => Err(bad()),
        }
    };
    let total = number(hours, 3)? * 60 + number(minutes, 4)?;
    if !(MIN_DURATION_MINUTES..=MAX_DURATION_MINUTES).contains(&total) {
        return Err(format!(
            "{s:?} is out of range: a window lasts from 1m to 168h"
        ));
    }
    Ok(TimeDelta::minutes(total))
}

/// Parses an IANA time zone name such as `Europe/Berlin` or `UTC`.
pub fn parse_time_zone(s: &str) -> Result<Tz, String> {
    s.parse::<Tz>().map_err(|_| {
        format!("{s:?} is not an IANA time zone name such as \"UTC\" or \"Europe/Berlin\"")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
