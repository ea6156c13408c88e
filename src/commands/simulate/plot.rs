//! `simulate --plot FILE.svg`: one picture, drawn by hand as SVG: GPUs held and jobs waiting
//! over time with a line per policy (replay), or GPUs left unallocated as arrivals fill the
//! fleet with a line per placement (packing).

use std::fmt::Write;

use crate::simulate::{Packing, Report};

const W: f64 = 900.0;
const PANEL: f64 = 260.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 170.0;
const TOP: f64 = 40.0;
const GAP: f64 = 60.0;
/// Colours that stay apart for the common colour-vision deficiencies (Okabe and Ito).
const COLOURS: [&str; 7] = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#000000"];

struct Series<'a> {
    name: String,
    points: Vec<(f64, f64)>,
    colour: &'a str,
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            // XML allows no control characters (not even as references); bidi overrides and
            // invisible characters would make a path read as another: shown as escapes.
            c if c.is_control()
                || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}') =>
            {
                out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out
}

/// A round tick step for a span: 1, 2 or 5 times a power of ten, about `n` ticks.
fn nice_step(span: f64, n: f64) -> f64 {
    let raw = (span / n).max(1e-9);
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    mag * if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    }
}

/// Round ticks from `lo` to at least `hi`: (first, step, last).
fn ticks(lo: f64, hi: f64) -> (f64, f64, f64) {
    let step = nice_step(hi - lo, 4.0);
    let first = (lo / step).floor() * step;
    let last = (hi / step).ceil() * step;
    (first, step, last.max(first + step))
}

/// One panel at `y0`: axes with round ticks, a line per series, a legend on the right.
fn panel(out: &mut String, y0: f64, title: &str, x_label: &str, series: &[Series], y_max: f64, x_max: f64) {
    panel_in(out, y0, title, x_label, series, (0.0, x_max), y_max);
}

/// A panel over x from `xr.0` to `xr.1` and y from 0, both stretched to round ticks.
fn panel_in(out: &mut String, y0: f64, title: &str, x_label: &str, series: &[Series], xr: (f64, f64), y_max: f64) {
    let (x_lo, x_step, x_hi) = ticks(xr.0, xr.1.max(xr.0 + 1e-9));
    let (_, y_step, y_hi) = ticks(0.0, y_max.max(1e-9));
    let plot_w = W - LEFT - RIGHT;
    let sx = |x: f64| LEFT + (x - x_lo) / (x_hi - x_lo) * plot_w;
    let sy = |y: f64| y0 + PANEL - y / y_hi * PANEL;
    let _ = writeln!(
        out,
        r#"<text x="{LEFT}" y="{}" font-size="14" font-weight="bold">{}</text>"#,
        y0 - 10.0,
        escape(title)
    );
    let _ = writeln!(
        out,
        r##"<rect x="{LEFT}" y="{y0}" width="{plot_w}" height="{PANEL}" fill="none" stroke="#888" stroke-width="1"/>"##
    );
    let mut yv = 0.0;
    while yv <= y_hi + y_step * 1e-6 {
        let _ = writeln!(
            out,
            r##"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end">{}</text>"##,
            LEFT - 6.0,
            sy(yv) + 4.0,
            round(yv)
        );
        yv += y_step;
    }
    let mut xv = x_lo;
    while xv <= x_hi + x_step * 1e-6 {
        let _ = writeln!(
            out,
            r##"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle">{}</text>"##,
            sx(xv),
            y0 + PANEL + 16.0,
            round(xv)
        );
        xv += x_step;
    }
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle">{}</text>"#,
        LEFT + plot_w / 2.0,
        y0 + PANEL + 32.0,
        escape(x_label)
    );
    for (i, s) in series.iter().enumerate() {
        let mut d = String::new();
        for (k, (x, y)) in s.points.iter().filter(|p| p.0 >= x_lo).enumerate() {
            let _ = write!(d, "{}{:.1},{:.1}", if k == 0 { "M" } else { " L" }, sx(*x), sy(y.min(y_hi)));
        }
        let _ = writeln!(out, r#"<path d="{d}" fill="none" stroke="{}" stroke-width="1.6"/>"#, s.colour);
        let ly = y0 + 14.0 + 18.0 * i as f64;
        let _ = writeln!(
            out,
            r#"<line x1="{:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{}" stroke-width="3"/><text x="{:.1}" y="{:.1}" font-size="12">{}</text>"#,
            W - RIGHT + 12.0,
            W - RIGHT + 32.0,
            s.colour,
            W - RIGHT + 38.0,
            ly + 4.0,
            escape(&s.name)
        );
    }
}

fn round(v: f64) -> String {
    let v = (v * 1000.0).round() / 1000.0;
    if v >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else if (v * 10.0).fract().abs() < 1e-9 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn document(title: &str, body: &str, panels: usize) -> String {
    let h = TOP + panels as f64 * (PANEL + GAP) + 10.0;
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{h}\" viewBox=\"0 0 {W} {h}\" font-family=\"sans-serif\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{LEFT}\" y=\"20\" font-size=\"15\">{}</text>\n{body}</svg>\n",
        escape(title)
    )
}

/// Replay: GPUs held (with the fleet's size) and jobs waiting, hours on the x axis.
pub fn replay(title: &str, reports: &[Report]) -> String {
    let t0 = reports.iter().flat_map(|r| r.timeline.first()).map(|p| p.t).min().unwrap_or(0);
    let hours = |t: i64| (t - t0) as f64 / 3600.0;
    let x_max = reports.iter().flat_map(|r| r.timeline.last()).map(|p| hours(p.t)).fold(0.0, f64::max);
    let gpus = reports.iter().map(|r| r.gpus).max().unwrap_or(0) as f64;
    let held: Vec<Series> = reports
        .iter()
        .enumerate()
        .map(|(i, r)| Series {
            name: r.policy.as_str().to_string(),
            points: r.timeline.iter().map(|p| (hours(p.t), p.held_gpus)).collect(),
            colour: COLOURS[i % COLOURS.len()],
        })
        .collect();
    let waiting: Vec<Series> = reports
        .iter()
        .enumerate()
        .map(|(i, r)| Series {
            name: r.policy.as_str().to_string(),
            points: r.timeline.iter().map(|p| (hours(p.t), f64::from(p.waiting))).collect(),
            colour: COLOURS[i % COLOURS.len()],
        })
        .collect();
    let wait_max = waiting.iter().flat_map(|s| s.points.iter().map(|p| p.1)).fold(1.0, f64::max);
    let mut body = String::new();
    panel(&mut body, TOP + 20.0, &format!("GPUs held (of {gpus:.0})"), "hours", &held, gpus, x_max);
    panel(&mut body, TOP + 20.0 + PANEL + GAP, "jobs waiting", "hours", &waiting, wait_max, x_max);
    document(title, &body, 2)
}

/// Where the placements' curves part: the last arrived percent, ten by ten, before their
/// medians first differ by half a point (50 % where they never do).
fn tail_start(series: &[Series]) -> f64 {
    let xs: Vec<f64> = series.first().map(|s| s.points.iter().map(|p| p.0).collect()).unwrap_or_default();
    for x in xs {
        let ys: Vec<f64> =
            series.iter().filter_map(|s| s.points.iter().find(|p| (p.0 - x).abs() < 1e-9).map(|p| p.1)).collect();
        let (lo, hi) = ys.iter().fold((f64::MAX, f64::MIN), |(a, b), y| (a.min(*y), b.max(*y)));
        if hi - lo > 0.5 {
            return ((x - 5.0) / 10.0).floor().max(0.0) * 10.0;
        }
    }
    50.0
}

/// Packing: GPUs unallocated (percent of the fleet, the median of the runs) against the GPUs
/// arrived, over the tail where the placements part.
pub fn packing(title: &str, runs: &[Packing]) -> String {
    let many = runs.windows(2).any(|w| w[0].policy != w[1].policy);
    let series: Vec<Series> = runs
        .iter()
        .enumerate()
        .map(|(i, p)| Series {
            name: if many {
                format!("{} {}", p.policy.as_str(), p.placement.as_str())
            } else {
                p.placement.as_str().to_string()
            },
            points: p.steps.iter().map(|s| (s.arrived * 100.0, s.unallocated * 100.0)).collect(),
            colour: COLOURS[i % COLOURS.len()],
        })
        .collect();
    let x_max = runs.iter().flat_map(|p| p.steps.last()).map(|s| s.arrived * 100.0).fold(1.0, f64::max);
    let x_min = tail_start(&series).min(x_max - 1.0).max(0.0);
    let y_max = series.iter().flat_map(|s| s.points.iter().filter(|p| p.0 >= x_min).map(|p| p.1)).fold(1.0, f64::max);
    let n = runs.first().map_or(0, |p| p.runs);
    let mut body = String::new();
    panel_in(
        &mut body,
        TOP + 20.0,
        &format!("GPUs unallocated, % of the fleet (median of {n} runs)"),
        "GPUs arrived, % of the fleet",
        &series,
        (x_min, x_max),
        y_max,
    );
    document(title, &body, 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_escaped_and_the_document_closes() {
        let svg = document("a <b> & \"c\"", "", 1);
        assert!(svg.contains("a &lt;b&gt; &amp; &quot;c&quot;"));
        // Control characters are not well-formed XML; a bidi override reverses what follows.
        let svg = document("trace\u{1b}[31m\u{202e}vsc.x", "", 1);
        assert!(svg.contains("trace\\u{1b}[31m\\u{202e}vsc.x"), "{svg}");
        assert!(!svg.chars().any(|c| c.is_control() && c != '\n'));
        assert!(svg.trim_end().ends_with("</svg>"));
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(ticks(0.0, 13.7), (0.0, 5.0, 15.0));
        assert_eq!(ticks(60.0, 130.0), (60.0, 20.0, 140.0));
        assert_eq!(ticks(0.0, 100.0), (0.0, 50.0, 100.0));
        assert_eq!(round(0.25), "0.25");
        assert_eq!(round(2.5), "2.5");
    }
}
