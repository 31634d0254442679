//! bootc's progress reports: the JSON lines it writes to `--progress-fd` while it pulls
//! and stages (protocol 0.1: `Start`, then `ProgressBytes` while layers are fetched, then
//! `ProgressSteps` while the image is imported and deployed), folded into one
//! [`StageProgress`] that says how far a staging has got.
//!
//! Reports are read against the version the stream's last `Start` announced: only a
//! protocol this reader knows (0.x) is read; reports before any `Start`, or after one of
//! another major version, are skipped rather than guessed at. A total of zero means
//! "unspecified" (the protocol says so; bootc's composefs backend reports no byte total):
//! such a report shows its steps and no percentage.
//!
//! A line that is not one of those events (a partial line, anything else) is skipped:
//! progress is a nicety, never a reason to fail a staging.

use serde::Deserialize;

/// How far the staging of one digest has got.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StageProgress {
    /// The digest being staged (`sha256:<hex>`), as the agent asked for it.
    pub digest: String,
    /// Bytes fetched so far, cached ones included.
    pub bytes_done: u64,
    /// Bytes to fetch in all; 0 while unknown.
    pub bytes_total: u64,
    /// bootc's machine-readable task (`pulling`, `importing`, `staging`).
    pub task: String,
    /// bootc's description of the task (`Deploying Image`).
    pub description: String,
    /// Steps of the task done.
    pub steps_done: u64,
    /// Steps of the task (0: unspecified).
    pub steps_total: u64,
    /// The protocol version the last `Start` announced; `None` before one.
    pub protocol: Option<String>,
}

/// The major version of the progress protocol this reader knows.
const KNOWN_MAJOR: &str = "0";

/// One event of the protocol, with the fields the agent uses.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "type")]
pub enum Event {
    /// The stream starts.
    Start {
        /// The protocol's version.
        version: String,
    },
    /// Layers being fetched.
    #[serde(rename_all = "camelCase")]
    ProgressBytes {
        /// The task (`pulling`).
        task: String,
        /// Its description.
        description: String,
        /// Bytes fetched.
        bytes: u64,
        /// Bytes in all (0: unknown).
        bytes_total: u64,
        /// Layers fetched.
        steps: u64,
        /// Layers in all.
        steps_total: u64,
    },
    /// Discrete steps (importing, deploying).
    #[serde(rename_all = "camelCase")]
    ProgressSteps {
        /// The task (`importing`, `staging`).
        task: String,
        /// Its description.
        description: String,
        /// Steps done.
        steps: u64,
        /// Steps in all.
        steps_total: u64,
    },
}

/// The event on one line; `None` for anything else.
pub fn parse_line(line: &str) -> Option<Event> {
    let line = line.trim();
    if line.is_empty() {
        return None;
    }
    serde_json::from_str(line).ok()
}

/// The longest description kept (bootc's are a few words).
const DESCRIPTION_MAX: usize = 200;

impl StageProgress {
    /// Nothing reported yet for `digest`.
    pub fn new(digest: impl Into<String>) -> Self {
        StageProgress {
            digest: digest.into(),
            ..StageProgress::default()
        }
    }

    /// Takes `event` in. Bytes stay as the last `ProgressBytes` left them while the later
    /// steps run, so a finished pull reads 100%.
    pub fn apply(&mut self, event: Event) {
        if !matches!(event, Event::Start { .. }) && !self.reads_protocol() {
            return;
        }
        match event {
            Event::Start { version } => self.protocol = Some(cut(version)),
            Event::ProgressBytes {
                task,
                description,
                bytes,
                bytes_total,
                steps,
                steps_total,
            } => {
                self.bytes_done = bytes;
                self.bytes_total = bytes_total;
                self.set_task(task, description, steps, steps_total);
            }
            Event::ProgressSteps {
                task,
                description,
                steps,
                steps_total,
            } => self.set_task(task, description, steps, steps_total),
        }
    }

    /// Whether the stream announced a protocol version this reader knows.
    pub fn reads_protocol(&self) -> bool {
        self.protocol
            .as_deref()
            .is_some_and(|v| v.split('.').next() == Some(KNOWN_MAJOR))
    }

    fn set_task(&mut self, task: String, description: String, steps: u64, total: u64) {
        self.task = cut(task);
        self.description = cut(description);
        self.steps_done = steps;
        self.steps_total = total;
    }

    /// The share of bytes fetched, in percent; `None` while the total is unknown.
    pub fn percent(&self) -> Option<u64> {
        (self.bytes_total > 0)
            .then(|| self.bytes_done.min(self.bytes_total) * 100 / self.bytes_total)
    }

    /// One short phrase for a column: `42%` while pulling with a known byte total, else
    /// the step (`Deploying Image 2/3`; `Pulling Image 2` when no step total is known
    /// either).
    pub fn summary(&self) -> String {
        let what = if self.description.is_empty() {
            &self.task
        } else {
            &self.description
        };
        match self.percent() {
            Some(p) if self.task == "pulling" || what.is_empty() => format!("{p}%"),
            _ if what.is_empty() => "starting".to_owned(),
            _ if self.steps_total > 0 => {
                format!("{what} {}/{}", self.steps_done, self.steps_total)
            }
            _ if self.steps_done > 0 => format!("{what} {}", self.steps_done),
            _ => what.clone(),
        }
    }
}

fn cut(mut s: String) -> String {
    if s.len() > DESCRIPTION_MAX {
        let mut end = DESCRIPTION_MAX;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const PULLING: &str = r#"{"bytes":8756225,"bytesCached":0,"bytesTotal":156624583,"description":"Pulling Image: sha256:0eb9","id":"sha256:0eb9","steps":0,"stepsCached":0,"stepsTotal":1,"subtasks":[],"task":"pulling","type":"ProgressBytes"}"#;
    const START: &str = r#"{"type":"Start","version":"0.1.0"}"#;
    const DEPLOYING: &str = r#"{"description":"Deploying Image","id":"sha256:0eb9","steps":2,"stepsCached":0,"stepsTotal":3,"subtasks":[],"task":"staging","type":"ProgressSteps"}"#;

    #[test]
    fn bytes_then_steps() {
        let mut p = StageProgress::new("sha256:ab");
        p.apply(parse_line(r#"{"type":"Start","version":"0.1.0"}"#).expect("start"));
        assert_eq!(p.percent(), None);
        p.apply(parse_line(PULLING).expect("bytes"));
        assert_eq!((p.bytes_done, p.bytes_total), (8_756_225, 156_624_583));
        assert_eq!(p.summary(), "5%");
        p.apply(parse_line(DEPLOYING).expect("steps"));
        assert_eq!(
            p.bytes_done, 8_756_225,
            "bytes kept through the later steps"
        );
        assert_eq!(p.summary(), "Deploying Image 2/3");
    }

    #[test]
    fn anything_else_is_skipped() {
        for line in [
            "",
            "not json",
            r#"{"type":"Unknown","x":1}"#,
            r#"{"type":"ProgressBytes","bytes":-1}"#,
            &PULLING[..40],
        ] {
            assert_eq!(parse_line(line), None, "{line}");
        }
    }

    #[test]
    fn long_descriptions_are_cut_on_a_character_boundary() {
        let mut p = StageProgress::new("sha256:ab");
        p.apply(parse_line(START).expect("start"));
        p.apply(Event::ProgressSteps {
            task: "t".into(),
            description: "é".repeat(150),
            steps: 0,
            steps_total: 0,
        });
        assert!(p.description.len() <= DESCRIPTION_MAX);
        assert_eq!(p.summary(), p.description);
    }

    /// A pull as bootc's composefs backend reports it: bytes with no total ("unspecified").
    const PULLING_NO_TOTAL: &str = r#"{"bytes":1048576,"bytesCached":0,"bytesTotal":0,"description":"Pulling Image: sha256:0eb9","id":"sha256:0eb9","steps":1,"stepsCached":0,"stepsTotal":3,"subtasks":[],"task":"pulling","type":"ProgressBytes"}"#;
    /// Steps with no total either.
    const STEPS_NO_TOTAL: &str = r#"{"description":"Importing","id":"sha256:0eb9","steps":2,"stepsCached":0,"stepsTotal":0,"subtasks":[],"task":"importing","type":"ProgressSteps"}"#;

    #[test]
    fn a_zero_total_shows_steps_and_no_percentage() {
        let mut p = StageProgress::new("sha256:ab");
        p.apply(parse_line(START).expect("start"));
        p.apply(parse_line(PULLING_NO_TOTAL).expect("bytes"));
        assert_eq!((p.bytes_done, p.bytes_total), (1_048_576, 0));
        assert_eq!(p.percent(), None);
        assert_eq!(p.summary(), "Pulling Image: sha256:0eb9 1/3");
        let shown = crate::report::progress_status(&p, chrono::Utc::now(), "q.io/os@sha256:ab")
            .expect("shown for its digest");
        assert_eq!(
            (shown.bytes_total, shown.steps_done, shown.steps_total),
            (0, 1, 3)
        );
        assert_eq!(shown.summary, "Pulling Image: sha256:0eb9 1/3");
        p.apply(parse_line(STEPS_NO_TOTAL).expect("steps"));
        assert_eq!(p.summary(), "Importing 2");
    }

    #[test]
    fn reports_are_read_against_the_start_events_version() {
        let mut p = StageProgress::new("sha256:ab");
        // Before any Start: no version to read it against.
        p.apply(parse_line(PULLING).expect("bytes"));
        assert_eq!((p.bytes_done, p.summary().as_str()), (0, "starting"));
        // A protocol of another major version: its reports are not guessed at.
        p.apply(parse_line(r#"{"type":"Start","version":"1.0.0"}"#).expect("start"));
        p.apply(parse_line(PULLING).expect("bytes"));
        assert_eq!(p.bytes_done, 0);
        assert!(!p.reads_protocol());
        // 0.x (bootc's 0.1.0): read.
        p.apply(parse_line(START).expect("start"));
        p.apply(parse_line(PULLING).expect("bytes"));
        assert_eq!((p.bytes_done, p.summary().as_str()), (8_756_225, "5%"));
        assert_eq!(p.protocol.as_deref(), Some("0.1.0"));
    }
}
