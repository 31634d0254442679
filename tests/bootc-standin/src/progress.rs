//! `--progress-fd N`: the JSON lines bootc 1.16.9 writes while it pulls and stages
//! (protocol 0.1, the same events, fields and order as the real one's; see
//! `agent/tests/fixtures/bootc-1.16.9/progress-upgrade-download-only.jsonl`), written to
//! descriptor N, which must be a pipe above 2 as bootc requires.
//!
//! The stand-in fetches no layers, so the byte counts are the layer sizes its manifest
//! lists, reported fetched in two halves per layer.

use std::cell::RefCell;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileTypeExt;

use serde_json::{Value, json};

use crate::Error;
use crate::resolver::{ImageInfo, ImageResolver};

/// clap's value parser of `--progress-fd`: bootc refuses 0, 1 and 2.
pub fn parse_fd(value: &str) -> Result<u32, String> {
    let fd: u32 = value.parse().map_err(|e| format!("{e}"))?;
    if fd <= 2 {
        return Err(format!("Cannot use fd {fd} for progress JSON"));
    }
    Ok(fd)
}

/// Where the reports go: descriptor N (through `/proc/self/fd/N`, which opens the same
/// pipe), or nowhere.
#[derive(Debug, Default)]
pub struct Reporter {
    out: Option<File>,
}

impl Reporter {
    /// The reporter for `--progress-fd fd`; an error when the descriptor is not an open
    /// pipe.
    pub fn open(fd: Option<u32>) -> Result<Self, Error> {
        let Some(fd) = fd else {
            return Ok(Reporter::default());
        };
        let path = format!("/proc/self/fd/{fd}");
        let io = |source| Error::Io {
            what: format!("Initializing progress: fd {fd}"),
            source,
        };
        let meta = std::fs::metadata(&path).map_err(io)?;
        if !meta.file_type().is_fifo() {
            return Err(Error::Other(format!(
                "Initializing progress: fd {fd} is not a pipe"
            )));
        }
        let out = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(io)?;
        let mut reporter = Reporter { out: Some(out) };
        reporter.send(&json!({"type": "Start", "version": "0.1.0"}));
        Ok(reporter)
    }

    fn send(&mut self, event: &Value) {
        if let Some(out) = &mut self.out {
            // As bootc: a report that cannot be written does not fail the command.
            let _ = writeln!(out, "{event}");
        }
    }

    /// The pull of `info`: one report per half layer, then the import.
    fn pulled(&mut self, info: &ImageInfo) {
        if self.out.is_none() {
            return;
        }
        let total: u64 = info.layers.iter().sum();
        let steps_total = info.layers.len();
        let description = format!("Pulling Image: {}", info.digest);
        let mut done = 0u64;
        for (i, size) in info.layers.iter().enumerate() {
            let layer = format!("layer: {}", short_hex(&info.digest, i));
            for part in [size / 2, size - size / 2] {
                done += part;
                self.send(&json!({
                    "type": "ProgressBytes", "task": "pulling", "description": description,
                    "id": info.digest, "bytesCached": 0, "bytes": done, "bytesTotal": total,
                    "stepsCached": 0, "steps": i, "stepsTotal": steps_total,
                    "subtasks": [{"subtask": "layer", "description": layer, "id": layer,
                                  "bytesCached": 0, "bytes": done, "bytesTotal": total}],
                }));
            }
        }
        for steps in 0..=1 {
            self.steps(&info.digest, "importing", "Importing Image", steps, 1);
        }
    }

    /// The deployment, after a successful command.
    pub fn deployed(&mut self, digest: &str) {
        for steps in 0..=3 {
            self.steps(digest, "staging", "Deploying Image", steps, 3);
        }
    }

    fn steps(&mut self, id: &str, task: &str, description: &str, steps: u64, total: u64) {
        self.send(&json!({
            "type": "ProgressSteps", "task": task, "description": description, "id": id,
            "stepsCached": 0, "steps": steps, "stepsTotal": total, "subtasks": [],
        }));
    }
}

/// The first 20 hex digits of `digest`, made distinct per layer index.
fn short_hex(digest: &str, index: usize) -> String {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    format!("{}{index}", &hex[..hex.len().min(19)])
}

/// A resolver that reports each pull it makes.
#[allow(missing_debug_implementations)]
pub struct Reporting<'a> {
    inner: &'a dyn ImageResolver,
    reporter: RefCell<Reporter>,
    last: RefCell<Option<String>>,
}

impl<'a> Reporting<'a> {
    /// Wraps `inner`.
    pub fn new(inner: &'a dyn ImageResolver, reporter: Reporter) -> Self {
        Reporting {
            inner,
            reporter: RefCell::new(reporter),
            last: RefCell::new(None),
        }
    }

    /// Reports the deployment of the image last pulled, if any.
    pub fn finish(&self) {
        if let Some(digest) = self.last.borrow().as_deref() {
            self.reporter.borrow_mut().deployed(digest);
        }
    }
}

impl ImageResolver for Reporting<'_> {
    fn resolve(&self, image: &str) -> Result<ImageInfo, Error> {
        let info = self.inner.resolve(image)?;
        self.reporter.borrow_mut().pulled(&info);
        *self.last.borrow_mut() = Some(info.digest.clone());
        Ok(info)
    }
}
