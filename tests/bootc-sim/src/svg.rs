//! A hand-written SVG of a rollout: nodes per state over time as stacked areas, the
//! unavailable count as a line and the budget as a dashed line.

use std::fmt::Write as _;

use crate::track::{Counts, STATES};

/// One sample: seconds since the pool was applied, and the counts then.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Seconds since the start.
    pub t: f64,
    /// The counts.
    pub counts: Counts,
}

/// Fill colours of [`STATES`], in order.
const COLOURS: [&str; 5] = ["#2e9e44", "#d62728", "#ff9f1c", "#4a90d9", "#c8c8c8"];

const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 480.0;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 180.0;
const TOP: f64 = 44.0;
const BOTTOM: f64 = 50.0;

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A "nice" tick step (1, 2 or 5 × 10^k) giving at most about `ticks` ticks over `span`.
fn tick_step(span: f64, ticks: f64) -> f64 {
    if span <= 0.0 || !span.is_finite() {
        return 1.0;
    }
    let raw = span / ticks;
    let magnitude = 10f64.powf(raw.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * magnitude >= raw {
            return m * magnitude;
        }
    }
    10.0 * magnitude
}

/// The plot area and its scales: `t_max` seconds across, `n_max` nodes up.
struct Plot {
    t_max: f64,
    n_max: f64,
}

impl Plot {
    const W: f64 = WIDTH - LEFT - RIGHT;
    const H: f64 = HEIGHT - TOP - BOTTOM;

    fn x(&self, t: f64) -> f64 {
        LEFT + t / self.t_max * Self::W
    }

    fn y(&self, v: f64) -> f64 {
        TOP + Self::H - v / self.n_max * Self::H
    }
}

/// The picture: `nodes` on the y axis, the samples' time span on the x axis.
pub fn render(title: &str, samples: &[Sample], nodes: usize, budget: usize) -> String {
    let plot = Plot {
        t_max: samples.last().map(|s| s.t).unwrap_or(1.0).max(f64::EPSILON),
        n_max: nodes.max(1) as f64,
    };
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        svg,
        r#"<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#
    );
    let _ = writeln!(
        svg,
        r#"<text x="{LEFT}" y="24" font-size="14" font-weight="bold">{}</text>"#,
        escape(title)
    );
    if !samples.is_empty() {
        layers(&mut svg, &plot, samples);
        unavailable_line(&mut svg, &plot, samples);
    }
    // The budget.
    let yb = plot.y(budget as f64);
    let _ = writeln!(
        svg,
        r#"<line x1="{LEFT}" y1="{yb:.1}" x2="{:.1}" y2="{yb:.1}" stroke="black" stroke-dasharray="6,4"/>"#,
        LEFT + Plot::W
    );
    axes(&mut svg, &plot);
    legend(&mut svg, budget);
    svg.push_str("</svg>\n");
    svg
}

/// Stacked areas, bottom (on target) to top (pending).
fn layers(svg: &mut String, plot: &Plot, samples: &[Sample]) {
    for (layer, colour) in COLOURS.iter().enumerate() {
        let below = |s: &Sample| s.counts.states[..layer].iter().sum::<usize>() as f64;
        let upper = |s: &Sample| below(s) + s.counts.states[layer] as f64;
        let mut points = String::new();
        for s in samples {
            let _ = write!(points, "{:.1},{:.1} ", plot.x(s.t), plot.y(upper(s)));
        }
        for s in samples.iter().rev() {
            let _ = write!(points, "{:.1},{:.1} ", plot.x(s.t), plot.y(below(s)));
        }
        let _ = writeln!(
            svg,
            r#"<polygon points="{}" fill="{colour}" stroke="none"/>"#,
            points.trim_end()
        );
    }
}

/// The unavailable nodes, as a line.
fn unavailable_line(svg: &mut String, plot: &Plot, samples: &[Sample]) {
    let mut points = String::new();
    for s in samples {
        let _ = write!(
            points,
            "{:.1},{:.1} ",
            plot.x(s.t),
            plot.y(s.counts.unavailable as f64)
        );
    }
    let _ = writeln!(
        svg,
        r#"<polyline points="{}" fill="none" stroke="black" stroke-width="1.5"/>"#,
        points.trim_end()
    );
}

/// The axes, their ticks and labels.
fn axes(svg: &mut String, plot: &Plot) {
    let bottom = TOP + Plot::H;
    let _ = writeln!(
        svg,
        r#"<path d="M{LEFT},{TOP} V{bottom} H{:.1}" fill="none" stroke="black"/>"#,
        LEFT + Plot::W
    );
    let step = tick_step(plot.t_max, 10.0);
    let mut t = 0.0;
    while t <= plot.t_max + step * 1e-9 {
        let xt = plot.x(t);
        let label = if step < 1.0 {
            format!("{t:.1}")
        } else {
            format!("{t:.0}")
        };
        let _ = writeln!(
            svg,
            r#"<line x1="{xt:.1}" y1="{bottom}" x2="{xt:.1}" y2="{:.1}" stroke="black"/><text x="{xt:.1}" y="{:.1}" text-anchor="middle">{label}</text>"#,
            bottom + 5.0,
            bottom + 18.0
        );
        t += step;
    }
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">seconds since the pool was applied</text>"#,
        LEFT + Plot::W / 2.0,
        HEIGHT - 10.0
    );
    let step = tick_step(plot.n_max, 8.0).max(1.0);
    let mut v = 0.0;
    while v <= plot.n_max + 1e-9 {
        let yv = plot.y(v);
        let _ = writeln!(
            svg,
            r#"<line x1="{:.1}" y1="{yv:.1}" x2="{LEFT}" y2="{yv:.1}" stroke="black"/><text x="{:.1}" y="{:.1}" text-anchor="end">{v:.0}</text>"#,
            LEFT - 5.0,
            LEFT - 8.0,
            yv + 4.0
        );
        v += step;
    }
    let _ = writeln!(
        svg,
        r#"<text transform="translate(16,{:.1}) rotate(-90)" text-anchor="middle">nodes</text>"#,
        TOP + Plot::H / 2.0
    );
}

/// The legend, top state first (as stacked), then the two lines.
fn legend(svg: &mut String, budget: usize) {
    let lx = LEFT + Plot::W + 20.0;
    let mut ly = TOP + 10.0;
    for (name, colour) in STATES.iter().zip(COLOURS).rev() {
        let _ = writeln!(
            svg,
            r#"<rect x="{lx:.1}" y="{:.1}" width="14" height="14" fill="{colour}"/><text x="{:.1}" y="{ly:.1}">{name}</text>"#,
            ly - 11.0,
            lx + 20.0
        );
        ly += 22.0;
    }
    let _ = writeln!(
        svg,
        r#"<line x1="{lx:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="black" stroke-width="1.5"/><text x="{:.1}" y="{ly:.1}">unavailable</text>"#,
        ly - 4.0,
        lx + 14.0,
        ly - 4.0,
        lx + 20.0
    );
    ly += 22.0;
    let _ = writeln!(
        svg,
        r#"<line x1="{lx:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="black" stroke-dasharray="6,4"/><text x="{:.1}" y="{ly:.1}">budget ({budget})</text>"#,
        ly - 4.0,
        lx + 14.0,
        ly - 4.0,
        lx + 20.0
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_nice() {
        assert_eq!(tick_step(10.0, 10.0), 1.0);
        assert_eq!(tick_step(3.0, 10.0), 0.5);
        assert_eq!(tick_step(120.0, 10.0), 20.0);
        assert_eq!(tick_step(0.0, 10.0), 1.0);
    }

    #[test]
    fn renders_layers_lines_and_legend() {
        let samples = [
            Sample {
                t: 0.0,
                counts: Counts {
                    states: [0, 0, 0, 0, 4],
                    unavailable: 0,
                },
            },
            Sample {
                t: 1.0,
                counts: Counts {
                    states: [2, 2, 0, 0, 0],
                    unavailable: 2,
                },
            },
        ];
        let svg = render("a <test>", &samples, 4, 2);
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polygon").count(), 5);
        assert!(svg.contains("a &lt;test&gt;"));
        assert!(svg.contains("budget (2)"));
    }
}
