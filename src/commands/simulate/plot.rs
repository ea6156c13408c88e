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

/// One panel at `y0`: axes with round ticks, a line per series, a legend on the right.
fn panel(out: &mut String, y0: f64, title: &str, x_label: &str, series: &[Series], y_max: f64, x_max: f64) {
    let (x_max, y_max) = (x_max.max(1e-9), y_max.max(1e-9));
    let plot_w = W - LEFT - RIGHT;
    let sx = |x: f64| LEFT + x / x_max * plot_w;
    let sy = |y: f64| y0 + PANEL - y / y_max * PANEL;
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
    for k in 0..=4 {
        let (xv, yv) = (x_max * f64::from(k) / 4.0, y_max * f64::from(k) / 4.0);
        let _ = writeln!(
            out,
            r##"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end">{}</text><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle">{}</text>"##,
            LEFT - 6.0,
            sy(yv) + 4.0,
            round(yv),
            sx(xv),
            y0 + PANEL + 16.0,
            round(xv)
        );
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
        for (k, (x, y)) in s.points.iter().enumerate() {
            let _ = write!(d, "{}{:.1},{:.1}", if k == 0 { "M" } else { " L" }, sx(*x), sy(y.min(y_max)));
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
    if v >= 100.0 || v == v.trunc() { format!("{v:.0}") } else { format!("{v:.1}") }
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

/// Packing: GPUs unallocated (percent of the fleet) as the GPUs asked reach the fleet's size.
pub fn packing(title: &str, runs: &[Packing]) -> String {
    let series: Vec<Series> = runs
        .iter()
        .enumerate()
        .map(|(i, p)| Series {
            name: format!("{} {}", p.policy.as_str(), p.placement.as_str()),
            points: p.steps.iter().map(|s| (s.arrived * 100.0, s.unallocated * 100.0)).collect(),
            colour: COLOURS[i % COLOURS.len()],
        })
        .collect();
    let x_max = runs.iter().flat_map(|p| p.steps.last()).map(|s| s.arrived * 100.0).fold(1.0, f64::max);
    let mut body = String::new();
    panel(
        &mut body,
        TOP + 20.0,
        "GPUs unallocated, % of the fleet",
        "GPUs asked, % of the fleet",
        &series,
        100.0,
        x_max,
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
}
