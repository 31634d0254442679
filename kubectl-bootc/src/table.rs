//! kubectl-style output: tables with upper-case headers and columns padded with three
//! spaces, ages as `kubectl get` prints them, short digests and byte counts.

use chrono::{DateTime, TimeDelta, Utc};

/// A table: headers and rows of cells, printed as `kubectl get` prints.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    /// Column headers, printed upper-case.
    pub headers: Vec<&'static str>,
    /// One row per object; each as long as `headers`.
    pub rows: Vec<Vec<String>>,
}

/// Space between two columns.
const GAP: usize = 3;

impl Table {
    /// A table with these headers and no rows.
    pub fn new(headers: &[&'static str]) -> Self {
        Table {
            headers: headers.to_vec(),
            rows: Vec::new(),
        }
    }

    /// The table as text: every column but the last padded to its widest cell plus
    /// three spaces, no trailing spaces, one line per row, each ending in a newline.
    pub fn render(&self) -> String {
        let header: Vec<String> = self.headers.iter().map(|h| h.to_uppercase()).collect();
        let lines: Vec<&Vec<String>> = std::iter::once(&header).chain(&self.rows).collect();
        let columns = self.headers.len();
        let widths: Vec<usize> = (0..columns)
            .map(|i| {
                lines
                    .iter()
                    .map(|l| l.get(i).map_or(0, |c| c.chars().count()))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for line in lines {
            let mut text = String::new();
            for (i, width) in widths.iter().enumerate() {
                let cell = line.get(i).map_or("", String::as_str);
                text.push_str(cell);
                if i + 1 < columns {
                    let pad = width - cell.chars().count() + GAP;
                    text.push_str(&" ".repeat(pad));
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        }
        out
    }
}

/// How long ago `then` was, as `kubectl get` prints an age (`45s`, `5m`, `3h10m`, `2d`),
/// `<invalid>` for a time more than a second in the future.
pub fn age(then: DateTime<Utc>, now: DateTime<Utc>) -> String {
    human_duration(now - then)
}

/// A duration as kubectl's `HumanDuration` prints it.
pub fn human_duration(d: TimeDelta) -> String {
    let seconds = d.num_seconds();
    if seconds < -1 {
        return "<invalid>".to_owned();
    }
    if seconds < 0 {
        return "0s".to_owned();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return match seconds % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    let days = hours / 24;
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{days}d"),
            h => format!("{days}d{h}h"),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{days}d");
    }
    let years = days / 365;
    if hours < 24 * 365 * 8 {
        return match days % 365 {
            0 => format!("{years}y"),
            d => format!("{years}y{d}d"),
        };
    }
    format!("{years}y")
}

/// The first 12 hex characters of a digest (`sha256:<hex>` or bare hex), as the pool's
/// `targetShortDigest`; anything that is not a digest is shown as it is.
pub fn short_digest(digest: &str) -> String {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    if hex.len() >= 12 && hex.is_char_boundary(12) {
        hex[..12].to_owned()
    } else {
        hex.to_owned()
    }
}

/// A byte count in binary units, as kubectl prints quantities (`512`, `1.5Ki`, `300Mi`).
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    if n < 1024 {
        return n.to_string();
    }
    // Precision beyond one decimal does not matter for display.
    #[allow(clippy::cast_precision_loss)]
    let mut value = n as f64;
    let mut unit = "";
    for u in UNITS {
        if value < 1024.0 {
            break;
        }
        value /= 1024.0;
        unit = u;
    }
    if value >= 100.0 || value.fract() < 0.05 {
        format!("{value:.0}{unit}")
    } else {
        format!("{value:.1}{unit}")
    }
}

#[cfg(test)]
mod tests;
