//! `bootc-sim scaling`: a table and a picture of several bench runs against node count.
//! It reads the JSON that `bench --json` wrote, one file per run, and prints a Markdown
//! table (each row with the command that reproduces it) and writes an SVG of the makespan
//! ratio and the controller's peak memory against the number of nodes.

use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Deserialize;

/// Arguments of `bootc-sim scaling`.
#[derive(Debug, clap::Args)]
pub struct ScalingArgs {
    /// The bench runs' JSON files (`bench --json`).
    #[arg(required = true)]
    pub runs: Vec<PathBuf>,
    /// Where to write the picture.
    #[arg(long)]
    pub svg: Option<PathBuf>,
}

/// What the table and the picture use of one run.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Run {
    pub nodes: u64,
    pub max_unavailable: String,
    pub stage_ms: u64,
    pub reboot_ms: u64,
    pub ready_ms: u64,
    #[serde(default)]
    pub controller_process: bool,
    pub makespan_s: f64,
    pub ideal_s: f64,
    pub makespan_ratio: f64,
    pub first_reboot_s: Option<f64>,
    pub slot_utilisation: Option<f64>,
    pub reconcile_p50_ms: Option<f64>,
    pub reconcile_p99_ms: Option<f64>,
    pub controller_peak_rss_mib: Option<f64>,
    pub controller_cpu_s: Option<f64>,
    /// The bench process's own CPU (reports before it was measured have none).
    #[serde(default)]
    pub bench_cpu_s: Option<f64>,
    pub writes_per_node_controller: f64,
    pub writes_per_node_total: f64,
    pub invariant_violations: u64,
}

impl Run {
    /// The bench command that produced this run.
    pub fn command(&self) -> String {
        format!(
            "bootc-sim bench{} --nodes {} --max-unavailable {} --stage-ms {} --reboot-ms {} --ready-ms {}",
            if self.controller_process {
                " --controller-process"
            } else {
                ""
            },
            self.nodes,
            self.max_unavailable,
            self.stage_ms,
            self.reboot_ms,
            self.ready_ms
        )
    }
}

/// Reads the runs, prints the table, writes the picture.
pub fn run(args: &ScalingArgs) -> Result<bool, String> {
    let mut runs = Vec::new();
    for path in &args.runs {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let run: Run = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not a bench report: {e}", path.display()))?;
        runs.push(run);
    }
    runs.sort_by_key(|r| r.nodes);
    print!("{}", table(&runs));
    if let Some(path) = &args.svg {
        std::fs::write(path, svg(&runs))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(runs.iter().all(|r| r.invariant_violations == 0))
}

/// CPU seconds over a rollout of `nodes` as milliseconds per node update.
fn per_update(cpu_s: Option<f64>, nodes: u64) -> Option<f64> {
    cpu_s.map(|s| s * 1000.0 / nodes.max(1) as f64)
}

fn num(value: Option<f64>, places: usize) -> String {
    crate::stats::or_dash(value, places, "–")
}

/// The Markdown table: one row per run, then each row's command.
pub fn table(runs: &[Run]) -> String {
    let mut out = String::from(
        "| nodes | budget | stage/reboot/ready ms | makespan s (ideal) | ratio | first reboot s | slot use | reconcile p50 / p99 ms | controller RSS MiB | controller CPU s (ms/update) | bench CPU ms/update | writes/node controller (all) | violations |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in runs {
        let _ = writeln!(
            out,
            "| {} | {} | {}/{}/{} | {:.2} ({:.2}) | {:.2} | {} | {} | {} / {} | {} | {} ({}) | {} | {:.2} ({:.2}) | {} |",
            r.nodes,
            r.max_unavailable,
            r.stage_ms,
            r.reboot_ms,
            r.ready_ms,
            r.makespan_s,
            r.ideal_s,
            r.makespan_ratio,
            num(r.first_reboot_s, 3),
            num(r.slot_utilisation, 3),
            num(r.reconcile_p50_ms, 1),
            num(r.reconcile_p99_ms, 1),
            num(r.controller_peak_rss_mib, 1),
            num(r.controller_cpu_s, 2),
            num(per_update(r.controller_cpu_s, r.nodes), 2),
            num(per_update(r.bench_cpu_s, r.nodes), 2),
            r.writes_per_node_controller,
            r.writes_per_node_total,
            r.invariant_violations
        );
    }
    out.push('\n');
    for r in runs {
        let _ = writeln!(out, "- {} nodes: `{}`", r.nodes, r.command());
    }
    out
}

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 360.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 72.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 48.0;

/// Node counts on a log scale across, the ratio (left axis, from 1) and the controller's
/// peak RSS (right axis, from 0) up.
pub fn svg(runs: &[Run]) -> String {
    let w = WIDTH - LEFT - RIGHT;
    let h = HEIGHT - TOP - BOTTOM;
    let n_min = runs.iter().map(|r| r.nodes).min().unwrap_or(1).max(1) as f64;
    let n_max = runs.iter().map(|r| r.nodes).max().unwrap_or(10).max(10) as f64;
    let (lo, hi) = (
        n_min.log10().floor(),
        n_max.log10().ceil().max(n_min.log10().floor() + 1.0),
    );
    let x = |n: f64| LEFT + (n.max(1.0).log10() - lo) / (hi - lo) * w;
    let ratio_max = runs
        .iter()
        .map(|r| r.makespan_ratio)
        .fold(2.0, f64::max)
        .ceil();
    let y_ratio = |v: f64| TOP + h - (v - 1.0) / (ratio_max - 1.0) * h;
    let rss_max = runs
        .iter()
        .filter_map(|r| r.controller_peak_rss_mib)
        .fold(64.0, f64::max);
    let rss_max = (rss_max / 32.0).ceil() * 32.0;
    let y_rss = |v: f64| TOP + h - v / rss_max * h;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{LEFT}\" y=\"22\" font-size=\"14\">makespan ratio (blue, left) and controller peak RSS in MiB (orange, right) against nodes</text>\n"
    );
    let _ = writeln!(
        s,
        "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{w}\" height=\"{h}\" fill=\"none\" stroke=\"#888\"/>"
    );
    for decade in lo as i32..=hi as i32 {
        let n = 10f64.powi(decade);
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{n}</text>",
            x(n),
            TOP + h + 18.0
        );
    }
    for i in 0..=4 {
        let v = 1.0 + (ratio_max - 1.0) * f64::from(i) / 4.0;
        let r = rss_max * f64::from(i) / 4.0;
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#1f5fa8\">{v:.2}</text>\n<text x=\"{:.1}\" y=\"{:.1}\" fill=\"#c8620a\">{r:.0}</text>",
            LEFT - 6.0,
            y_ratio(v) + 4.0,
            LEFT + w + 6.0,
            y_rss(r) + 4.0
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">nodes (log scale)</text>",
        LEFT + w / 2.0,
        HEIGHT - 8.0
    );
    let ratio: Vec<(f64, f64)> = runs
        .iter()
        .map(|r| (x(r.nodes as f64), y_ratio(r.makespan_ratio)))
        .collect();
    let rss: Vec<(f64, f64)> = runs
        .iter()
        .filter_map(|r| Some((x(r.nodes as f64), y_rss(r.controller_peak_rss_mib?))))
        .collect();
    s.push_str(&line(&ratio, "#1f5fa8"));
    s.push_str(&line(&rss, "#c8620a"));
    s.push_str("</svg>\n");
    s
}

/// A polyline through `points`, with a dot on each.
fn line(points: &[(f64, f64)], colour: &str) -> String {
    let path: Vec<String> = points
        .iter()
        .map(|(px, py)| format!("{px:.1},{py:.1}"))
        .collect();
    let mut out = format!(
        "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"/>\n",
        path.join(" ")
    );
    for (px, py) in points {
        let _ = writeln!(
            out,
            "<circle cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"3.5\" fill=\"{colour}\"/>"
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(nodes: u64, ratio: f64, rss: Option<f64>) -> Run {
        Run {
            nodes,
            max_unavailable: "5%".into(),
            stage_ms: 50,
            reboot_ms: 100,
            ready_ms: 50,
            controller_process: rss.is_some(),
            makespan_s: ratio * 3.05,
            ideal_s: 3.05,
            makespan_ratio: ratio,
            first_reboot_s: Some(0.2),
            slot_utilisation: Some(0.9),
            reconcile_p50_ms: Some(3.0),
            reconcile_p99_ms: Some(20.0),
            controller_peak_rss_mib: rss,
            controller_cpu_s: Some(1.5),
            bench_cpu_s: Some(4.0),
            writes_per_node_controller: 5.5,
            writes_per_node_total: 12.25,
            invariant_violations: 0,
        }
    }

    #[test]
    fn the_table_has_a_row_and_a_command_per_run() {
        let runs = [run(100, 1.2, Some(20.0)), run(1000, 1.5, None)];
        let t = table(&runs);
        assert!(
            t.contains("| 100 | 5% | 50/100/50 | 3.66 (3.05) | 1.20 | 0.200 | 0.900 | 3.0 / 20.0 | 20.0 | 1.50 (15.00) | 40.00 | 5.50 (12.25) | 0 |"),
            "{t}"
        );
        assert!(t.contains("| 1000 | 5% |"), "{t}");
        assert!(
            t.contains("| – |"),
            "a run without the controller's own RSS: {t}"
        );
        assert!(
            t.contains("- 100 nodes: `bootc-sim bench --controller-process --nodes 100 --max-unavailable 5% --stage-ms 50 --reboot-ms 100 --ready-ms 50`"),
            "{t}"
        );
        assert!(
            t.contains("- 1000 nodes: `bootc-sim bench --nodes 1000 "),
            "{t}"
        );
    }

    #[test]
    fn the_picture_places_each_run_by_its_node_count() {
        let runs = [
            run(100, 1.0, Some(16.0)),
            run(1000, 2.0, Some(64.0)),
            run(10000, 3.0, Some(128.0)),
        ];
        let svg = svg(&runs);
        assert!(svg.starts_with("<svg"), "{svg}");
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert_eq!(svg.matches("<circle").count(), 6);
        // Log scale: 100, 1000 and 10000 nodes are evenly spaced across.
        let xs: Vec<f64> = svg
            .lines()
            .filter(|l| l.starts_with("<circle") && l.contains("#1f5fa8"))
            .map(|l| {
                let at = l.find("cx=\"").unwrap() + 4;
                l[at..].split('"').next().unwrap().parse().unwrap()
            })
            .collect();
        assert_eq!(xs.len(), 3);
        assert!(((xs[1] - xs[0]) - (xs[2] - xs[1])).abs() < 0.2, "{xs:?}");
        assert!(xs[0] < xs[1] && xs[1] < xs[2]);
    }

    /// The scaling runs kept in the docs, smallest first.
    fn kept_runs() -> Vec<Run> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/img");
        let mut runs: Vec<Run> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                name.starts_with("scale-") && name.ends_with(".json")
            })
            .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
            .collect();
        runs.sort_by_key(|r| r.nodes);
        runs
    }

    #[test]
    fn the_docs_picture_and_table_are_what_the_kept_runs_give() {
        let runs = kept_runs();
        assert!(runs.len() >= 5, "{} runs kept", runs.len());
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
        let picture = std::fs::read_to_string(root.join("img/scaling.svg")).unwrap();
        assert_eq!(
            picture,
            svg(&runs),
            "regenerate: bootc-sim scaling docs/img/scale-*.json --svg docs/img/scaling.svg"
        );
        let doc = std::fs::read_to_string(root.join("performance.md")).unwrap();
        assert!(
            doc.contains(table(&runs).trim_end()),
            "docs/performance.md must carry the table `bootc-sim scaling docs/img/scale-*.json` prints"
        );
    }

    #[test]
    fn a_file_that_is_not_a_report_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.json");
        std::fs::write(&path, "{\"nodes\": 3}").unwrap();
        let err = super::run(&ScalingArgs {
            runs: vec![path.clone()],
            svg: None,
        })
        .unwrap_err();
        assert!(err.contains("is not a bench report"), "{err}");
        let err = super::run(&ScalingArgs {
            runs: vec![dir.path().join("missing.json")],
            svg: None,
        })
        .unwrap_err();
        assert!(err.contains("cannot read"), "{err}");
    }
}
