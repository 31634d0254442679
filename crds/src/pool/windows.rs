//! Maintenance windows as the spec writes them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Schema pattern for `start`.
pub const START_PATTERN: &str = r"^([01][0-9]|2[0-3]):[0-5][0-9]$";
/// Schema pattern for `duration`.
pub const DURATION_PATTERN: &str = r"^([0-9]{1,3}h)?([0-9]{1,4}m)?$";

/// A recurring period in which reboots may be approved.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceWindow {
    /// Days of the week on which the window opens (in timeZone).
    #[schemars(length(min = 1, max = 7), extend("x-kubernetes-list-type" = "set"))]
    pub days: Vec<Weekday>,

    /// Local time the window opens, 24-hour "HH:MM".
    #[schemars(
        length(min = 5, max = 5),
        regex(pattern = START_PATTERN),
        transform = crate::rules::window_start
    )]
    pub start: String,

    /// How long the window stays open: "3h", "90m" or "1h30m", from 1m to 168h. A window
    /// may run past midnight.
    #[schemars(
        length(min = 2, max = 9),
        regex(pattern = DURATION_PATTERN),
        extend("x-kubernetes-validations" = [{
            "rule": "duration(self) >= duration('1m') && duration(self) <= duration('168h')",
            "message": "must be from 1m to 168h"
        }]),
        transform = crate::rules::window_duration
    )]
    pub duration: String,

    /// IANA time zone of start and days, e.g. "Europe/Berlin". Daylight-saving changes
    /// are followed.
    #[serde(default = "default_time_zone")]
    #[schemars(length(min = 1, max = 64))]
    pub time_zone: String,
}

/// A day of the week.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema,
)]
pub enum Weekday {
    /// Monday.
    Mon,
    /// Tuesday.
    Tue,
    /// Wednesday.
    Wed,
    /// Thursday.
    Thu,
    /// Friday.
    Fri,
    /// Saturday.
    Sat,
    /// Sunday.
    Sun,
}

impl From<Weekday> for chrono::Weekday {
    fn from(day: Weekday) -> Self {
        match day {
            Weekday::Mon => chrono::Weekday::Mon,
            Weekday::Tue => chrono::Weekday::Tue,
            Weekday::Wed => chrono::Weekday::Wed,
            Weekday::Thu => chrono::Weekday::Thu,
            Weekday::Fri => chrono::Weekday::Fri,
            Weekday::Sat => chrono::Weekday::Sat,
            Weekday::Sun => chrono::Weekday::Sun,
        }
    }
}

fn default_time_zone() -> String {
    "UTC".into()
}
