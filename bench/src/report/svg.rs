//! A small SVG line-chart writer for the report's charts: plain string building, no plotting
//! library. A [`Chart`] has a title, two axes (linear or logarithmic, or categories along x),
//! and series drawn as lines, steps (a CDF) or markers, with a legend above the plot area.

use std::fmt::Write as _;

/// Width and height of every chart, in SVG user units (pixels).
const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 420.0;
/// Room left of the plot area (y tick labels and the y axis label), right of it, below it
/// (x tick labels and the x axis label) and above it before the legend (title, subtitle).
const LEFT: f64 = 78.0;
const RIGHT: f64 = 24.0;
const BOTTOM: f64 = 58.0;
const HEADER: f64 = 48.0;
/// Height of one legend row, and the width the legend may use per row.
const LEGEND_ROW: f64 = 20.0;
/// Approximate width of one character at the 12 px legend and tick font.
const CHAR_WIDTH: f64 = 6.8;

/// How an axis maps values to positions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scale {
    Linear,
    /// Base 10; values at or below zero are drawn at the axis' low end.
    Log,
}

#[derive(Clone, Debug)]
pub struct Axis {
    pub label: String,
    pub scale: Scale,
    /// The low end; the data's smallest value (a linear axis: at most 0) when not set.
    pub min: Option<f64>,
    /// The high end; the data's largest value, rounded up to a tick, when not set.
    pub max: Option<f64>,
    /// Labels of the categories 0, 1, 2, ... (x only): ticks at the whole numbers.
    pub categories: Vec<String>,
}

impl Axis {
    pub fn linear(label: &str) -> Self {
        Self {
            label: label.into(),
            scale: Scale::Linear,
            min: None,
            max: None,
            categories: Vec::new(),
        }
    }

    pub fn log(label: &str) -> Self {
        Self {
            scale: Scale::Log,
            ..Self::linear(label)
        }
    }

    pub fn categories(label: &str, names: Vec<String>) -> Self {
        Self {
            categories: names,
            ..Self::linear(label)
        }
    }

    pub fn with_max(mut self, max: f64) -> Self {
        self.max = Some(max);
        self
    }
}

/// How a series is drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Style {
    /// Straight lines between the points.
    Line,
    /// Horizontal then vertical (a CDF: the value holds until the next point).
    Step,
    /// Only the markers.
    Markers,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Marker {
    None,
    Circle,
    Square,
    Triangle,
}

#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    /// An SVG colour (`#rrggbb`).
    pub color: &'static str,
    pub dashed: bool,
    pub style: Style,
    pub marker: Marker,
    pub points: Vec<(f64, f64)>,
}

impl Series {
    pub fn new(name: impl Into<String>, color: &'static str, points: Vec<(f64, f64)>) -> Self {
        Self {
            name: name.into(),
            color,
            dashed: false,
            style: Style::Line,
            marker: Marker::None,
            points,
        }
    }

    pub fn style(mut self, style: Style) -> Self {
        self.style = style;
        self
    }

    pub fn marker(mut self, marker: Marker) -> Self {
        self.marker = marker;
        self
    }

    pub fn dashed(mut self, dashed: bool) -> Self {
        self.dashed = dashed;
        self
    }
}

#[derive(Clone, Debug)]
pub struct Chart {
    pub title: String,
    /// A smaller line under the title (what was measured, how).
    pub subtitle: String,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
    /// Stretches of x named along the top of the plot (a run's phases), every other one
    /// shaded.
    pub bands: Vec<(f64, f64, String)>,
}

/// `text` cut to `max` characters, with `…` when cut.
pub fn fit(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// An axis' value range and its mapping onto a pixel range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Map {
    scale: Scale,
    lo: f64,
    hi: f64,
    from: f64,
    to: f64,
}

impl Map {
    /// The pixel position of `v`; values outside the range are clamped to its ends.
    pub fn at(&self, v: f64) -> f64 {
        let (lo, hi, v) = match self.scale {
            Scale::Linear => (self.lo, self.hi, v),
            Scale::Log => (
                self.lo.log10(),
                self.hi.log10(),
                if v > 0.0 { v.log10() } else { f64::MIN },
            ),
        };
        let share = if hi > lo {
            ((v - lo) / (hi - lo)).clamp(0.0, 1.0)
        } else {
            0.0
        };
        self.from + share * (self.to - self.from)
    }
}

/// 1, 2 or 5 times a power of ten, the smallest at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|s| *s >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * p)
}

/// The axis' range and ticks for data from `lo` to `hi` (finite, `lo <= hi`).
pub fn ticks(axis: &Axis, lo: f64, hi: f64) -> (f64, f64, Vec<f64>) {
    if !axis.categories.is_empty() {
        let n = axis.categories.len();
        return (-0.5, n as f64 - 0.5, (0..n).map(|i| i as f64).collect());
    }
    match axis.scale {
        Scale::Linear => {
            let lo = axis.min.unwrap_or(lo.min(0.0));
            let hi = axis.max.unwrap_or(hi).max(lo);
            let step = nice_step(if hi > lo { (hi - lo) / 5.0 } else { 1.0 });
            let hi = if axis.max.is_some() {
                hi
            } else {
                ((hi / step).ceil() * step).max(lo + step)
            };
            let first = (lo / step).ceil() as i64;
            let last = (hi / step + 1e-9).floor() as i64;
            let ticks = (first..=last).map(|i| i as f64 * step).collect();
            (lo, hi, ticks)
        }
        Scale::Log => {
            let lo = axis.min.unwrap_or(lo).max(1e-12);
            let hi = axis.max.unwrap_or(hi).max(lo);
            let lo = 10f64.powf(lo.log10().floor());
            let hi = 10f64.powf(hi.log10().ceil()).max(lo * 10.0);
            let (a, b) = (lo.log10().round() as i32, hi.log10().round() as i32);
            // Two decades or fewer: 2 and 5 times each power of ten as well.
            let steps: &[f64] = if b - a <= 2 { &[1.0, 2.0, 5.0] } else { &[1.0] };
            let ticks = (a..=b)
                .flat_map(|e| steps.iter().map(move |m| m * 10f64.powi(e)))
                .filter(|t| *t <= hi * (1.0 + 1e-9))
                .collect();
            (lo, hi, ticks)
        }
    }
}

/// A tick label: no needless digits, thousands as `k`, millions as `M`.
pub fn number(v: f64) -> String {
    let a = v.abs();
    let (v, suffix) = if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let mut s = format!("{v:.3}");
    while s.contains('.') && (s.ends_with('0') || s.ends_with('.')) {
        s.pop();
    }
    if s == "-0" {
        s = "0".into();
    }
    s + suffix
}

/// `&`, `<`, `>` and `"` escaped for SVG text and attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

/// The legend's rows: each entry's width, placed left to right, wrapped at `width`.
fn legend_rows(names: &[&str], width: f64) -> Vec<Vec<(usize, f64)>> {
    let mut rows: Vec<Vec<(usize, f64)>> = vec![Vec::new()];
    let mut x = 0.0;
    for (i, name) in names.iter().enumerate() {
        let w = 34.0 + name.chars().count() as f64 * CHAR_WIDTH + 18.0;
        if x > 0.0 && x + w > width {
            rows.push(Vec::new());
            x = 0.0;
        }
        if let Some(row) = rows.last_mut() {
            row.push((i, x));
        }
        x += w;
    }
    rows
}

impl Chart {
    /// The finite data range of the points (x, then y); positive values only on a log axis.
    fn data_range(&self) -> ((f64, f64), (f64, f64)) {
        let mut range = [(f64::INFINITY, f64::NEG_INFINITY); 2];
        for (x, y) in self.series.iter().flat_map(|s| s.points.iter().copied()) {
            for ((v, axis), r) in [(x, &self.x), (y, &self.y)].into_iter().zip(&mut range) {
                if v.is_finite() && (axis.scale == Scale::Linear || v > 0.0) {
                    r.0 = r.0.min(v);
                    r.1 = r.1.max(v);
                }
            }
        }
        let fix = |(lo, hi): (f64, f64)| if lo <= hi { (lo, hi) } else { (1.0, 1.0) };
        (fix(range[0]), fix(range[1]))
    }

    /// The series the legend names: those with a name.
    fn legend(&self) -> impl Iterator<Item = &Series> {
        self.series.iter().filter(|s| !s.name.is_empty())
    }

    /// The axes' mappings onto the plot area, and their ticks.
    pub fn layout(&self) -> (Map, Vec<f64>, Map, Vec<f64>, f64) {
        let names: Vec<&str> = self.legend().map(|s| s.name.as_str()).collect();
        let legend = legend_rows(&names, WIDTH - LEFT - RIGHT).len() as f64 * LEGEND_ROW;
        let top = HEADER + legend + 8.0;
        let ((x0, x1), (y0, y1)) = self.data_range();
        let (xlo, xhi, xt) = ticks(&self.x, x0, x1);
        let (ylo, yhi, yt) = ticks(&self.y, y0, y1);
        let xm = Map {
            scale: self.x.scale,
            lo: xlo,
            hi: xhi,
            from: LEFT,
            to: WIDTH - RIGHT,
        };
        let ym = Map {
            scale: self.y.scale,
            lo: ylo,
            hi: yhi,
            from: HEIGHT - BOTTOM,
            to: top,
        };
        (xm, xt, ym, yt, top)
    }

    pub fn render(&self) -> String {
        let (xm, xt, ym, yt, top) = self.layout();
        let mut o = String::new();
        let _ = writeln!(
            o,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">"#
        );
        let _ = writeln!(
            o,
            r##"<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>"##
        );
        // The title at 15 px bold is about 9 px a character, the subtitle at 11 px about 6.
        let _ = writeln!(
            o,
            r#"<text x="{LEFT}" y="20" font-size="15" font-weight="bold">{}</text>"#,
            escape(&fit(&self.title, ((WIDTH - LEFT - RIGHT) / 9.0) as usize))
        );
        if !self.subtitle.is_empty() {
            let _ = writeln!(
                o,
                r##"<text x="{LEFT}" y="38" font-size="11" fill="#555555">{}</text>"##,
                escape(&fit(
                    &self.subtitle,
                    ((WIDTH - LEFT - RIGHT) / 6.0) as usize
                ))
            );
        }
        self.write_legend(&mut o);
        self.write_bands(&mut o, &xm, top);
        self.write_axes(&mut o, (&xm, &xt), (&ym, &yt), top);
        let clip = format!(
            r#"<clipPath id="plot"><rect x="{LEFT}" y="{top:.1}" width="{:.1}" height="{:.1}"/></clipPath>"#,
            WIDTH - LEFT - RIGHT,
            HEIGHT - BOTTOM - top
        );
        let _ = writeln!(o, "<defs>{clip}</defs>");
        for s in &self.series {
            write_series(&mut o, s, &xm, &ym);
        }
        o.push_str("</svg>\n");
        o
    }

    fn write_bands(&self, o: &mut String, xm: &Map, top: f64) {
        let bottom = HEIGHT - BOTTOM;
        for (i, (from, to, label)) in self.bands.iter().enumerate() {
            let (a, b) = (xm.at(*from), xm.at(*to));
            if i % 2 == 1 {
                let _ = writeln!(
                    o,
                    r##"<rect x="{a:.1}" y="{top:.1}" width="{:.1}" height="{:.1}" fill="#f3f3f3"/>"##,
                    (b - a).max(0.0),
                    bottom - top
                );
            }
            // A label as long as its stretch is wide, at the top (10 px: about 6 px a
            // character).
            let room = ((b - a - 4.0) / 6.0).max(0.0) as usize;
            if room >= 3 {
                let _ = writeln!(
                    o,
                    r##"<text x="{:.1}" y="{:.1}" font-size="10" fill="#777777">{}</text>"##,
                    a + 3.0,
                    top + 12.0,
                    escape(&fit(label, room))
                );
            }
        }
    }

    fn write_legend(&self, o: &mut String) {
        let names: Vec<&str> = self.legend().map(|s| s.name.as_str()).collect();
        let entries: Vec<&Series> = self.legend().collect();
        for (r, row) in legend_rows(&names, WIDTH - LEFT - RIGHT)
            .into_iter()
            .enumerate()
        {
            let y = HEADER + r as f64 * LEGEND_ROW + 10.0;
            for (i, dx) in row {
                let s = entries[i];
                let x = LEFT + dx;
                if s.style != Style::Markers {
                    let _ = writeln!(
                        o,
                        r#"<line x1="{x:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{}" stroke-width="2.5"{}/>"#,
                        x + 26.0,
                        s.color,
                        dash(s.dashed)
                    );
                }
                marker(o, s.marker, s.color, x + 13.0, y);
                let _ = writeln!(
                    o,
                    r#"<text x="{:.1}" y="{:.1}">{}</text>"#,
                    x + 32.0,
                    y + 4.0,
                    escape(&s.name)
                );
            }
        }
    }

    fn write_axes(&self, o: &mut String, x: (&Map, &[f64]), y: (&Map, &[f64]), top: f64) {
        let (xm, xt) = x;
        let (ym, yt) = y;
        let bottom = HEIGHT - BOTTOM;
        let right = WIDTH - RIGHT;
        for &t in yt {
            let py = ym.at(t);
            let _ = writeln!(
                o,
                r##"<line x1="{LEFT}" y1="{py:.1}" x2="{right}" y2="{py:.1}" stroke="#e3e3e3"/>"##
            );
            let _ = writeln!(
                o,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                LEFT - 6.0,
                py + 4.0,
                number(t)
            );
        }
        // At most one x label per 60 px: thin the ticks' labels out when they are dense.
        let every = ((xt.len() as f64 * 60.0) / (right - LEFT)).ceil().max(1.0) as usize;
        for (i, &t) in xt.iter().enumerate() {
            let px = xm.at(t);
            let _ = writeln!(
                o,
                r##"<line x1="{px:.1}" y1="{top:.1}" x2="{px:.1}" y2="{bottom}" stroke="#eeeeee"/>"##
            );
            let label = match self.x.categories.get(i) {
                Some(c) => escape(c),
                None if i % every == 0 => number(t),
                None => continue,
            };
            let _ = writeln!(
                o,
                r#"<text x="{px:.1}" y="{:.1}" text-anchor="middle">{label}</text>"#,
                bottom + 17.0
            );
        }
        let _ = writeln!(
            o,
            r##"<rect x="{LEFT}" y="{top:.1}" width="{:.1}" height="{:.1}" fill="none" stroke="#888888"/>"##,
            right - LEFT,
            bottom - top
        );
        let _ = writeln!(
            o,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            (LEFT + right) / 2.0,
            HEIGHT - 12.0,
            escape(&self.x.label)
        );
        let cy = (top + bottom) / 2.0;
        let _ = writeln!(
            o,
            r#"<text x="16" y="{cy:.1}" text-anchor="middle" transform="rotate(-90 16 {cy:.1})">{}</text>"#,
            escape(&self.y.label)
        );
    }
}

fn dash(dashed: bool) -> &'static str {
    if dashed {
        r#" stroke-dasharray="7 4""#
    } else {
        ""
    }
}

fn marker(o: &mut String, m: Marker, color: &str, x: f64, y: f64) {
    let _ = match m {
        Marker::None => Ok(()),
        Marker::Circle => writeln!(
            o,
            r#"<circle cx="{x:.1}" cy="{y:.1}" r="4" fill="{color}"/>"#
        ),
        Marker::Square => writeln!(
            o,
            r#"<rect x="{:.1}" y="{:.1}" width="8" height="8" fill="{color}"/>"#,
            x - 4.0,
            y - 4.0
        ),
        Marker::Triangle => writeln!(
            o,
            r#"<path d="M{:.1} {:.1}L{:.1} {:.1}L{:.1} {:.1}Z" fill="{color}"/>"#,
            x,
            y - 5.0,
            x + 5.0,
            y + 4.0,
            x - 5.0,
            y + 4.0
        ),
    };
}

/// The pixel path of a series: its points in order, with the corners of a step line.
pub fn path_points(s: &Series, xm: &Map, ym: &Map) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::new();
    for &(x, y) in s
        .points
        .iter()
        .filter(|(x, y)| x.is_finite() && y.is_finite())
    {
        let p = (xm.at(x), ym.at(y));
        if s.style == Style::Step
            && let Some(&(_, prev_y)) = out.last()
        {
            out.push((p.0, prev_y));
        }
        out.push(p);
    }
    out
}

fn write_series(o: &mut String, s: &Series, xm: &Map, ym: &Map) {
    let pts = path_points(s, xm, ym);
    if s.style != Style::Markers && pts.len() > 1 {
        let coords: Vec<String> = pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
        let _ = writeln!(
            o,
            r#"<polyline clip-path="url(#plot)" fill="none" stroke="{}" stroke-width="2" stroke-linejoin="round"{} points="{}"/>"#,
            s.color,
            dash(s.dashed),
            coords.join(" ")
        );
    }
    if s.marker != Marker::None {
        for &(x, y) in s
            .points
            .iter()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
        {
            marker(o, s.marker, s.color, xm.at(x), ym.at(y));
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Checks that `svg` is well-formed XML as far as this writer produces it: every element
    /// closed in order, attributes quoted, no bare `&` or `<` in text. Returns the element
    /// names in document order.
    pub(crate) fn check_xml(svg: &str) -> Result<Vec<String>, String> {
        let mut stack: Vec<String> = Vec::new();
        let mut names = Vec::new();
        let mut rest = svg;
        while let Some(open) = rest.find('<') {
            check_text(&rest[..open])?;
            let close = rest[open..]
                .find('>')
                .ok_or_else(|| format!("unclosed tag at {:?}", &rest[open..]))?;
            let tag = &rest[open + 1..open + close];
            rest = &rest[open + close + 1..];
            if let Some(name) = tag.strip_prefix('/') {
                match stack.pop() {
                    Some(top) if top == name => {}
                    other => return Err(format!("</{name}> closes {other:?}")),
                }
                continue;
            }
            let self_closing = tag.ends_with('/');
            let body = tag.trim_end_matches('/');
            let name: String = body.chars().take_while(|c| !c.is_whitespace()).collect();
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
                return Err(format!("bad element name in <{tag}>"));
            }
            check_attributes(&body[name.len()..])?;
            names.push(name.clone());
            if !self_closing {
                stack.push(name);
            }
        }
        check_text(rest)?;
        if stack.is_empty() {
            Ok(names)
        } else {
            Err(format!("unclosed elements {stack:?}"))
        }
    }

    fn check_text(text: &str) -> Result<(), String> {
        let mut rest = text;
        while let Some(i) = rest.find('&') {
            rest = &rest[i + 1..];
            let end = rest.find(';').ok_or("bare &")?;
            if !["amp", "lt", "gt", "quot"].contains(&&rest[..end]) {
                return Err(format!("unknown entity &{};", &rest[..end]));
            }
        }
        Ok(())
    }

    fn check_attributes(attrs: &str) -> Result<(), String> {
        let mut rest = attrs.trim();
        while !rest.is_empty() {
            let eq = rest
                .find('=')
                .ok_or_else(|| format!("no value in {rest:?}"))?;
            let name = rest[..eq].trim();
            if name.is_empty() || name.contains(char::is_whitespace) {
                return Err(format!("bad attribute name {name:?}"));
            }
            let value = rest[eq + 1..]
                .strip_prefix('"')
                .ok_or_else(|| format!("unquoted value of {name}"))?;
            let end = value.find('"').ok_or("unterminated value")?;
            check_text(&value[..end])?;
            rest = value[end + 1..].trim_start();
        }
        Ok(())
    }

    #[test]
    fn the_checker_rejects_what_is_not_well_formed() {
        for bad in [
            "<svg><g></svg>",
            "<svg>",
            "<svg a=1/>",
            "<svg>a & b</svg>",
            "<svg></g>",
            "<svg a=\"x\"",
        ] {
            assert!(check_xml(bad).is_err(), "{bad}");
        }
        assert_eq!(
            check_xml(r#"<svg a="1"><g/><text>a &amp; b</text></svg>"#).unwrap(),
            ["svg", "g", "text"]
        );
    }

    fn chart(series: Vec<Series>) -> Chart {
        Chart {
            title: "RSS <over> time & more".into(),
            subtitle: "sampled \"every\" second".into(),
            x: Axis::linear("seconds"),
            y: Axis::linear("MiB"),
            series,
            bands: vec![
                (0.0, 2.0, "create".into()),
                (2.0, 5.0, "roll & scale".into()),
            ],
        }
    }

    #[test]
    fn a_chart_is_well_formed_and_escapes_its_text() {
        let c = chart(vec![
            Series::new("upstream <kcm>", "#e66101", vec![(0.0, 10.0), (5.0, 40.0)]),
            Series::new("rkcm", "#5e3c99", vec![(0.0, 5.0), (5.0, 20.0)])
                .style(Style::Step)
                .marker(Marker::Triangle)
                .dashed(true),
            Series::new("points", "#000000", vec![(1.0, 1.0)])
                .style(Style::Markers)
                .marker(Marker::Square),
            Series::new("", "#000000", vec![(2.0, 2.0)]).marker(Marker::Circle),
        ]);
        let svg = c.render();
        let names = check_xml(&svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
        assert_eq!(names.first().map(String::as_str), Some("svg"));
        assert_eq!(names.iter().filter(|n| *n == "polyline").count(), 2);
        assert!(svg.contains("RSS &lt;over&gt; time &amp; more"), "{svg}");
        assert!(svg.contains("sampled &quot;every&quot; second"), "{svg}");
        assert!(svg.contains("upstream &lt;kcm&gt;"), "{svg}");
        assert!(svg.contains(r#"stroke-dasharray="7 4""#));
        assert!(svg.contains(">roll &amp; scale</text>"), "{svg}");
        // A series without a name is drawn but not in the legend.
        assert!(!svg.contains(">empty</text>"));
    }

    #[test]
    fn long_text_is_cut_to_fit() {
        assert_eq!(fit("abc", 3), "abc");
        assert_eq!(fit("abcdef", 4), "abc…");
        let mut c = chart(Vec::new());
        c.title = "t".repeat(300);
        let svg = c.render();
        assert!(
            svg.contains(&format!("{}…</text>", "t".repeat(72))),
            "{svg}"
        );
    }

    #[test]
    fn values_map_onto_the_plot_area() {
        let c = chart(vec![Series::new(
            "a",
            "#000000",
            vec![(0.0, 0.0), (100.0, 50.0)],
        )]);
        let (xm, xt, ym, yt, top) = c.layout();
        // x: 0 ..= 100 in steps of 20 across the plot's width; y: 0 ..= 50 in steps of 10,
        // 0 at the bottom.
        assert_eq!(xt, [0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        assert_eq!(yt, [0.0, 10.0, 20.0, 30.0, 40.0, 50.0]);
        assert_eq!(xm.at(0.0), LEFT);
        assert_eq!(xm.at(100.0), WIDTH - RIGHT);
        assert_eq!(xm.at(50.0), (LEFT + WIDTH - RIGHT) / 2.0);
        assert_eq!(ym.at(0.0), HEIGHT - BOTTOM);
        assert_eq!(ym.at(50.0), top);
        // Outside the range: clamped.
        assert_eq!(xm.at(-5.0), LEFT);
        assert_eq!(ym.at(99.0), top);
        let svg = c.render();
        let line = format!(
            "points=\"{:.1},{:.1} {:.1},{:.1}\"",
            LEFT,
            HEIGHT - BOTTOM,
            WIDTH - RIGHT,
            top
        );
        assert!(svg.contains(&line), "{line}\n{svg}");
    }

    #[test]
    fn a_step_line_holds_each_value_until_the_next_point() {
        let c = chart(vec![
            Series::new("cdf", "#000000", vec![(0.0, 0.0), (10.0, 0.5), (20.0, 1.0)])
                .style(Style::Step),
        ]);
        let (xm, _, ym, _, _) = c.layout();
        let pts = path_points(&c.series[0], &xm, &ym);
        let px = |x: f64| xm.at(x);
        let py = |y: f64| ym.at(y);
        assert_eq!(
            pts,
            [
                (px(0.0), py(0.0)),
                (px(10.0), py(0.0)),
                (px(10.0), py(0.5)),
                (px(20.0), py(0.5)),
                (px(20.0), py(1.0)),
            ]
        );
    }

    #[test]
    fn a_log_axis_spans_whole_decades() {
        let mut c = chart(vec![Series::new(
            "a",
            "#000000",
            vec![(0.0, 0.5), (3.0, 1.0), (2000.0, 0.7)],
        )]);
        c.x = Axis::log("ms");
        c.y.max = Some(1.0);
        let (xm, xt, ym, yt, top) = c.layout();
        assert_eq!(xt, [1.0, 10.0, 100.0, 1000.0, 10000.0]);
        assert_eq!(yt, [0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]);
        assert_eq!(ym.at(1.0), top);
        assert_eq!(xm.at(1.0), LEFT);
        assert!((xm.at(100.0) - (LEFT + (WIDTH - RIGHT - LEFT) / 2.0)).abs() < 1e-9);
        let (_, _, few) = ticks(&Axis::log(""), 3.0, 40.0);
        assert_eq!(few, [1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]);
        // Zero and negative values sit at the low end of a log axis.
        assert_eq!(xm.at(0.0), LEFT);
        assert_eq!(xm.at(-1.0), LEFT);
    }

    #[test]
    fn ticks_are_round_numbers() {
        let cases = [
            (0.0, 7.3, vec![0.0, 2.0, 4.0, 6.0, 8.0]),
            (0.0, 0.0, vec![0.0, 1.0]),
            (0.0, 1234.0, vec![0.0, 500.0, 1000.0, 1500.0]),
            (12.0, 13.0, vec![0.0, 5.0, 10.0, 15.0]),
        ];
        for (lo, hi, want) in cases {
            let (_, _, got) = ticks(&Axis::linear(""), lo, hi);
            assert_eq!(got, want, "{lo}..{hi}");
        }
        let (lo, hi, cats) = ticks(
            &Axis::categories("", vec!["a".into(), "b".into()]),
            0.0,
            1.0,
        );
        assert_eq!((lo, hi, cats), (-0.5, 1.5, vec![0.0, 1.0]));
    }

    #[test]
    fn numbers_are_short() {
        let cases = [
            (0.0, "0"),
            (2.5, "2.5"),
            (0.1, "0.1"),
            (1000.0, "1000"),
            (10000.0, "10k"),
            (150000.0, "150k"),
            (2_000_000.0, "2M"),
            (0.6000000000000001, "0.6"),
            (-0.0, "0"),
        ];
        for (v, want) in cases {
            assert_eq!(number(v), want, "{v}");
        }
    }

    #[test]
    fn the_legend_wraps_when_it_is_wide() {
        let long = "a".repeat(40);
        let rows = legend_rows(&[&long, &long, &long, "b"], 700.0);
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!(rows[0].len(), 2);
        assert_eq!(rows[1][0], (2, 0.0));
    }
}
