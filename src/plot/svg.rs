//! A small SVG writer: elements with escaped attributes and text, linear scales, "nice"
//! ticks, axes with labels, and the labels of the graph's units (bytes in KiB/MiB/GiB by
//! `crate::budget::human_bytes`, costs with the graph's `cost_unit`). Colours are the Okabe-Ito palette, which stays
//! distinguishable under the common forms of colour blindness. No fonts are embedded: the
//! text asks for the viewer's `sans-serif`.

use crate::budget::{byte_unit, significant};
use std::fmt::Write;

/// Okabe & Ito's colour-blind-safe palette (black first).
pub const BLACK: &str = "#000000";
pub const ORANGE: &str = "#E69F00";
pub const SKY_BLUE: &str = "#56B4E9";
pub const GREEN: &str = "#009E73";
pub const BLUE: &str = "#0072B2";
pub const VERMILLION: &str = "#D55E00";
pub const PURPLE: &str = "#CC79A7";
pub const GREY: &str = "#999999";

/// The colours of successive series, in order.
pub const SERIES: [&str; 6] = [BLUE, ORANGE, GREEN, PURPLE, SKY_BLUE, VERMILLION];

/// Text and XML attribute values with `& < > " '` escaped.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if c.is_control() && c != '\n' && c != '\t' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// A coordinate with two decimals at most (shorter files, exact enough on screen).
pub fn px(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// An SVG document being written.
pub struct Svg {
    out: String,
}

/// Attributes as name/value pairs (values are escaped when written).
pub type Attrs<'a> = &'a [(&'a str, String)];

impl Svg {
    /// The root element, `width` × `height` pixels, with `data-*` attributes describing
    /// the figure (read by tests and by scripts).
    pub fn new(width: f64, height: f64, title: &str, data: Attrs) -> Svg {
        let mut svg = Svg { out: String::new() };
        svg.out
            .push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let (w, h) = (px(width), px(height));
        let mut root = vec![
            ("xmlns", "http://www.w3.org/2000/svg".to_string()),
            ("width", w.clone()),
            ("height", h.clone()),
            ("viewBox", format!("0 0 {w} {h}")),
            ("font-family", "sans-serif".into()),
            ("font-size", "13".into()),
        ];
        root.extend(data.iter().cloned());
        svg.open("svg", &root);
        svg.text_el("title", &[], title);
        svg.el(
            "rect",
            &[
                ("width", "100%".into()),
                ("height", "100%".into()),
                ("fill", "#ffffff".into()),
            ],
        );
        svg
    }

    fn tag(&mut self, name: &str, attrs: Attrs) {
        self.out.push('<');
        self.out.push_str(name);
        for (k, v) in attrs {
            let _ = write!(self.out, " {k}=\"{}\"", escape(v));
        }
    }

    /// An empty element.
    pub fn el(&mut self, name: &str, attrs: Attrs) {
        self.tag(name, attrs);
        self.out.push_str("/>\n");
    }

    /// An element holding text.
    pub fn text_el(&mut self, name: &str, attrs: Attrs, text: &str) {
        self.tag(name, attrs);
        let _ = writeln!(self.out, ">{}</{name}>", escape(text));
    }

    pub fn open(&mut self, name: &str, attrs: Attrs) {
        self.tag(name, attrs);
        self.out.push_str(">\n");
    }

    pub fn close(&mut self, name: &str) {
        let _ = writeln!(self.out, "</{name}>");
    }

    /// A text label at (`x`, `y`); `anchor` is start, middle or end.
    pub fn label(&mut self, x: f64, y: f64, anchor: &str, text: &str, extra: Attrs) {
        let mut attrs = vec![
            ("x", px(x)),
            ("y", px(y)),
            ("text-anchor", anchor.to_string()),
        ];
        attrs.extend(extra.iter().cloned());
        self.text_el("text", &attrs, text);
    }

    /// A straight line.
    pub fn line(&mut self, (x1, y1): (f64, f64), (x2, y2): (f64, f64), stroke: &str, extra: Attrs) {
        let mut attrs = vec![
            ("x1", px(x1)),
            ("y1", px(y1)),
            ("x2", px(x2)),
            ("y2", px(y2)),
            ("stroke", stroke.to_string()),
        ];
        attrs.extend(extra.iter().cloned());
        self.el("line", &attrs);
    }

    /// A polyline through `points`.
    pub fn polyline(&mut self, points: &[(f64, f64)], stroke: &str, extra: Attrs) {
        let mut list = String::with_capacity(points.len() * 12);
        for (i, &(x, y)) in points.iter().enumerate() {
            if i > 0 {
                list.push(' ');
            }
            let _ = write!(list, "{},{}", px(x), px(y));
        }
        let mut attrs = vec![
            ("points", list),
            ("fill", "none".into()),
            ("stroke", stroke.to_string()),
        ];
        attrs.extend(extra.iter().cloned());
        self.el("polyline", &attrs);
    }

    /// A legend row per `(colour, dash, label)`, from (`x`, `y`) rightwards.
    pub fn legend(&mut self, x: f64, y: f64, entries: &[(&str, &str, String)]) {
        let mut at = x;
        for (colour, dash, text) in entries {
            self.line(
                (at, y - 4.0),
                (at + 24.0, y - 4.0),
                colour,
                &[
                    ("stroke-width", "2.5".into()),
                    ("stroke-dasharray", dash.to_string()),
                ],
            );
            self.label(at + 30.0, y, "start", text, &[]);
            at += 40.0 + 7.0 * text.chars().count() as f64;
        }
    }

    pub fn finish(mut self) -> String {
        self.close("svg");
        self.out
    }
}

/// A linear map from data values `lo..hi` onto pixels `from..to`.
#[derive(Clone, Copy, Debug)]
pub struct Scale {
    pub lo: f64,
    pub hi: f64,
    pub from: f64,
    pub to: f64,
}

impl Scale {
    /// A scale over `lo..hi` (an empty range is widened to `lo..lo + 1`).
    pub fn new(lo: f64, hi: f64, from: f64, to: f64) -> Scale {
        let hi = if hi > lo { hi } else { lo + 1.0 };
        Scale { lo, hi, from, to }
    }

    pub fn at(&self, v: f64) -> f64 {
        self.from + (v - self.lo) / (self.hi - self.lo) * (self.to - self.from)
    }
}

/// About `count` round tick values covering `lo..=hi` (steps of 1, 2 or 5 × 10^k).
pub fn ticks(lo: f64, hi: f64, count: usize) -> Vec<f64> {
    if hi <= lo || !lo.is_finite() || !hi.is_finite() {
        return vec![lo];
    }
    let raw = (hi - lo) / count.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).map(|k| k as f64 * step).collect()
}

/// Tick values for bytes, round in the binary unit of `hi` (1 KiB, 512 MiB, ...).
pub fn byte_ticks(lo: f64, hi: f64, count: usize) -> Vec<f64> {
    let unit = byte_unit(hi).1;
    ticks(lo / unit, hi / unit, count)
        .into_iter()
        .map(|t| t * unit)
        .collect()
}

/// A number in at most four significant digits, with k, M, G, T, P beyond 10^4.
pub fn short(v: f64) -> String {
    const SUFFIX: [(&str, f64); 5] = [("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)];
    if v.abs() >= 1e4 {
        if let Some((s, size)) = SUFFIX.iter().find(|(_, size)| v.abs() >= *size) {
            return format!("{}{s}", short(v / size));
        }
    }
    significant(v)
}

/// The plot area of a figure, in pixels.
#[derive(Clone, Copy, Debug)]
pub struct Frame {
    pub left: f64,
    pub top: f64,
    pub right: f64,
    pub bottom: f64,
}

impl Frame {
    /// The frame of a chart with a title and a line of figures above it and the y-axis
    /// labels on its left, ending at `right` and `bottom`.
    pub const fn below_title(right: f64, bottom: f64) -> Frame {
        Frame {
            left: 92.0,
            top: 78.0,
            right,
            bottom,
        }
    }

    /// Draws the axes, the tick labels (`xfmt`, `yfmt`) with light grid lines, and the axis
    /// titles. `x` and `y` map onto this frame.
    #[allow(clippy::too_many_arguments)]
    pub fn axes(
        &self,
        svg: &mut Svg,
        (x, xticks, xfmt): (&Scale, &[f64], &dyn Fn(f64) -> String),
        (y, yticks, yfmt): (&Scale, &[f64], &dyn Fn(f64) -> String),
        xtitle: &str,
        ytitle: &str,
    ) {
        let grid = [("stroke-width", "1".to_string())];
        for &t in yticks {
            let py = y.at(t);
            svg.line((self.left, py), (self.right, py), "#e6e6e6", &grid);
            svg.label(self.left - 6.0, py + 4.0, "end", &yfmt(t), &[]);
        }
        for &t in xticks {
            let px_ = x.at(t);
            svg.line((px_, self.top), (px_, self.bottom), "#f0f0f0", &grid);
            svg.label(px_, self.bottom + 18.0, "middle", &xfmt(t), &[]);
        }
        let axis = [("stroke-width", "1.5".to_string())];
        svg.line(
            (self.left, self.bottom),
            (self.right, self.bottom),
            BLACK,
            &axis,
        );
        svg.line(
            (self.left, self.top),
            (self.left, self.bottom),
            BLACK,
            &axis,
        );
        svg.label(
            (self.left + self.right) / 2.0,
            self.bottom + 40.0,
            "middle",
            xtitle,
            &[],
        );
        let (cx, cy) = (16.0, (self.top + self.bottom) / 2.0);
        svg.label(
            cx,
            cy,
            "middle",
            ytitle,
            &[("transform", format!("rotate(-90 {} {})", px(cx), px(cy)))],
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_numbers_and_ticks() {
        assert_eq!(escape("a<b & 'c'"), "a&lt;b &amp; &apos;c&apos;");
        assert_eq!(short(12.345), "12.35");
        assert_eq!(short(1234.4), "1234");
        assert_eq!(short(123456.0), "123.5k");
        assert_eq!(short(0.0), "0");
        assert_eq!(ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(
            byte_ticks(0.0, 4096.0, 4),
            vec![0.0, 1024.0, 2048.0, 3072.0, 4096.0]
        );
        let s = Scale::new(0.0, 10.0, 100.0, 0.0);
        assert_eq!(s.at(5.0), 50.0);
    }
}
