//! Inline SVG charts: small, dependency-free, accessible (a `<title>` and `<desc>`
//! on every chart; the page puts the numbers in a table beside it), and scalable (a
//! `viewBox`, no fixed pixel width) so they read on a phone and print cleanly.

/// Escapes text for XML/HTML.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Colours for series, chosen to stay distinct in greyscale print and for the common
/// colour-vision deficiencies (Okabe-Ito palette).
pub const PALETTE: [&str; 6] = [
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00",
];

/// A series: a name and one value per category (None: not measured).
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Values, one per category.
    pub values: Vec<Option<f64>>,
    /// Each value's 95 % interval (low, high), drawn as a whisker; empty, or None
    /// for a value, where there is none (a ratio of too few rounds, a figure that
    /// is not a ratio).
    pub intervals: Vec<Option<(f64, f64)>>,
}

impl Series {
    /// A series without intervals.
    pub fn new(name: impl Into<String>, values: Vec<Option<f64>>) -> Self {
        Series {
            name: name.into(),
            values,
            intervals: Vec::new(),
        }
    }

    /// The same series with an interval per value.
    pub fn with_intervals(mut self, intervals: Vec<Option<(f64, f64)>>) -> Self {
        self.intervals = intervals;
        self
    }
}

/// The legend line of a chart that draws whiskers.
pub const WHISKER_LEGEND: &str = "whiskers: 95 % interval";

/// A grouped bar chart.
#[derive(Debug, Clone)]
pub struct BarChart {
    /// Element id (for links and tests).
    pub id: String,
    /// Title shown above and read by screen readers.
    pub title: String,
    /// Longer description for screen readers.
    pub description: String,
    /// Category labels along the x axis.
    pub categories: Vec<String>,
    /// The series.
    pub series: Vec<Series>,
    /// Y axis label, with the unit.
    pub y_label: String,
    /// A horizontal reference line (such as 1.0 for ratios), if any.
    pub reference: Option<f64>,
    /// Formats a value for bar labels.
    pub format: fn(f64) -> String,
}

/// The opening `<svg>` with its title and description (the chart's text
/// equivalent, referenced by `aria-labelledby`).
fn open_svg(id: &str, title: &str, description: &str, width: f64, height: f64) -> String {
    format!(
        "<svg id=\"{id}\" class=\"chart\" viewBox=\"0 0 {width} {height}\" role=\"img\" aria-labelledby=\"{id}-t {id}-d\" xmlns=\"http://www.w3.org/2000/svg\">\
<title id=\"{id}-t\">{title}</title><desc id=\"{id}-d\">{desc}</desc>",
        id = escape(id),
        title = escape(title),
        desc = escape(description)
    )
}

/// Horizontal grid lines with their labels, from 0 to `max` every `step`, across
/// `x` (left, right); `y` maps a value to its vertical position.
fn y_grid(svg: &mut String, x: (f64, f64), max: f64, step: f64, y: impl Fn(f64) -> f64) {
    let (left, right) = x;
    let mut tick = 0.0;
    while tick <= max + step * 0.01 {
        let ty = y(tick);
        svg.push_str(&format!(
            "<line x1=\"{left}\" x2=\"{right}\" y1=\"{ty:.1}\" y2=\"{ty:.1}\" class=\"grid\"/>\
<text x=\"{tx}\" y=\"{ty2:.1}\" class=\"tick\" text-anchor=\"end\">{label}</text>",
            tx = left - 6.0,
            ty2 = ty + 4.0,
            label = escape(&trim_number(tick))
        ));
        tick += step;
    }
}

/// Picks a "nice" axis maximum and step above `max`.
pub fn nice_axis(max: f64) -> (f64, f64) {
    if max <= 0.0 || !max.is_finite() {
        return (1.0, 0.25);
    }
    let magnitude = 10f64.powf(max.log10().floor());
    for step_factor in [0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 2.5, 5.0] {
        let step = magnitude * step_factor;
        if max / step <= 6.0 {
            return ((max / step).ceil() * step, step);
        }
    }
    (max.ceil(), max.ceil() / 4.0)
}

impl BarChart {
    /// Renders the chart.
    #[expect(
        clippy::too_many_lines,
        reason = "the chart's parts in drawing order: axes, ticks, series, labels, legend"
    )]
    pub fn render(&self) -> String {
        let width = 720.0;
        let height = 320.0;
        let (left, right, top, bottom) = (64.0, 16.0, 16.0, 72.0);
        let plot_w = width - left - right;
        let plot_h = height - top - bottom;
        // The axis holds the whiskers' upper ends as well as the bars.
        let max = self
            .series
            .iter()
            .flat_map(|s| s.values.iter().flatten())
            .cloned()
            .chain(
                self.series
                    .iter()
                    .flat_map(|s| s.intervals.iter().flatten())
                    .map(|(_, hi)| *hi),
            )
            .filter(|v| v.is_finite())
            .fold(self.reference.unwrap_or(0.0), f64::max);
        let (axis_max, step) = nice_axis(max);
        let y = |v: f64| top + plot_h - (v / axis_max) * plot_h;
        let mut svg = open_svg(&self.id, &self.title, &self.description, width, height);
        y_grid(&mut svg, (left, width - right), axis_max, step, y);
        svg.push_str(&format!(
            "<text transform=\"translate(14 {cy}) rotate(-90)\" class=\"axis\" text-anchor=\"middle\">{}</text>",
            escape(&self.y_label),
            cy = top + plot_h / 2.0
        ));
        let groups = self.categories.len().max(1) as f64;
        let group_w = plot_w / groups;
        let n_series = self.series.len().max(1) as f64;
        let bar_w = (group_w * 0.8) / n_series;
        for (g, category) in self.categories.iter().enumerate() {
            let gx = left + g as f64 * group_w;
            for (s, series) in self.series.iter().enumerate() {
                let Some(Some(v)) = series.values.get(g) else {
                    continue;
                };
                let x = gx + group_w * 0.1 + s as f64 * bar_w;
                let by = y(*v);
                svg.push_str(&format!(
                    "<rect x=\"{x:.1}\" y=\"{by:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" fill=\"{c}\"><title>{name}, {cat}: {val}</title></rect>",
                    w = (bar_w - 2.0).max(1.0),
                    h = (top + plot_h - by).max(0.0),
                    c = PALETTE[s % PALETTE.len()],
                    name = escape(&series.name),
                    cat = escape(category),
                    val = escape(&(self.format)(*v))
                ));
                let whisker = series
                    .intervals
                    .get(g)
                    .copied()
                    .flatten()
                    .filter(|(lo, hi)| lo.is_finite() && hi.is_finite() && lo <= hi);
                if let Some((lo, hi)) = whisker {
                    // A vertical line from the interval's low end to its high end
                    // with a cap at each, over the bar's centre.
                    let (cx, cap) = (x + bar_w / 2.0 - 1.0, (bar_w / 4.0).clamp(2.0, 6.0));
                    let (ylo, yhi) = (y(lo.max(0.0)), y(hi));
                    svg.push_str(&format!(
                        "<g class=\"whisker\" stroke=\"#24292f\" stroke-width=\"1.5\"><title>{name}, {cat}: 95 % interval {l}–{h}</title>\
<line x1=\"{cx:.1}\" x2=\"{cx:.1}\" y1=\"{ylo:.1}\" y2=\"{yhi:.1}\"/>\
<line x1=\"{a:.1}\" x2=\"{b:.1}\" y1=\"{ylo:.1}\" y2=\"{ylo:.1}\"/>\
<line x1=\"{a:.1}\" x2=\"{b:.1}\" y1=\"{yhi:.1}\" y2=\"{yhi:.1}\"/></g>",
                        name = escape(&series.name),
                        cat = escape(category),
                        l = escape(&(self.format)(lo)),
                        h = escape(&(self.format)(hi)),
                        a = cx - cap,
                        b = cx + cap,
                    ));
                }
                if bar_w >= 28.0 {
                    // Above the whisker's cap where there is one.
                    let top_of = whisker.map_or(by, |(_, hi)| by.min(y(hi)));
                    svg.push_str(&format!(
                        "<text x=\"{cx:.1}\" y=\"{ly:.1}\" class=\"value\" text-anchor=\"middle\">{}</text>",
                        escape(&(self.format)(*v)),
                        cx = x + bar_w / 2.0 - 1.0,
                        ly = top_of - 3.0
                    ));
                }
            }
            svg.push_str(&format!(
                "<text x=\"{cx:.1}\" y=\"{ly}\" class=\"tick\" text-anchor=\"middle\">{}</text>",
                escape(category),
                cx = gx + group_w / 2.0,
                ly = top + plot_h + 16.0
            ));
        }
        if let Some(r) = self.reference {
            let ry = y(r);
            svg.push_str(&format!(
                "<line x1=\"{left}\" x2=\"{x2}\" y1=\"{ry:.1}\" y2=\"{ry:.1}\" class=\"reference\"/>",
                x2 = width - right
            ));
        }
        // Legend, below the axis.
        let mut lx = left;
        for (s, series) in self.series.iter().enumerate() {
            let ly = height - 24.0;
            svg.push_str(&format!(
                "<rect x=\"{lx:.1}\" y=\"{ry}\" width=\"12\" height=\"12\" fill=\"{c}\"/>\
<text x=\"{tx:.1}\" y=\"{ly}\" class=\"legend\">{name}</text>",
                ry = ly - 10.0,
                c = PALETTE[s % PALETTE.len()],
                tx = lx + 16.0,
                name = escape(&series.name)
            ));
            lx += 24.0 + 7.0 * series.name.chars().count() as f64;
        }
        if self
            .series
            .iter()
            .any(|s| s.intervals.iter().any(Option::is_some))
        {
            svg.push_str(&format!(
                "<text x=\"{left}\" y=\"{ly}\" class=\"legend\">{}</text>",
                escape(WHISKER_LEGEND),
                ly = height - 6.0
            ));
        }
        svg.push_str(&format!(
            "<line x1=\"{left}\" x2=\"{x2}\" y1=\"{b}\" y2=\"{b}\" class=\"axisline\"/></svg>",
            x2 = width - right,
            b = top + plot_h
        ));
        svg
    }
}

/// A line of a [`LineChart`]: (x, y) points in order.
#[derive(Debug, Clone)]
pub struct Line {
    /// Legend text.
    pub name: String,
    /// Points.
    pub points: Vec<(f64, f64)>,
    /// Drawn dashed (to tell series apart without colour).
    pub dashed: bool,
}

/// A line chart with numeric axes (a time series, such as the ramp's requests per
/// second).
#[derive(Debug, Clone)]
pub struct LineChart {
    /// Element id.
    pub id: String,
    /// Title.
    pub title: String,
    /// Description for screen readers.
    pub description: String,
    /// X axis label, with the unit.
    pub x_label: String,
    /// Y axis label, with the unit.
    pub y_label: String,
    /// The lines.
    pub lines: Vec<Line>,
}

impl LineChart {
    /// Renders the chart.
    pub fn render(&self) -> String {
        let width = 720.0;
        let height = 300.0;
        let (left, right, top, bottom) = (64.0, 16.0, 16.0, 76.0);
        let plot_w = width - left - right;
        let plot_h = height - top - bottom;
        let all = || self.lines.iter().flat_map(|l| l.points.iter());
        let (x_max, x_step) = nice_axis(all().map(|p| p.0).fold(0.0, f64::max));
        let (y_max, y_step) = nice_axis(all().map(|p| p.1).fold(0.0, f64::max));
        let x = |v: f64| left + (v / x_max) * plot_w;
        let y = |v: f64| top + plot_h - (v / y_max) * plot_h;
        let mut svg = open_svg(&self.id, &self.title, &self.description, width, height);
        y_grid(&mut svg, (left, width - right), y_max, y_step, y);
        let mut tick = 0.0;
        while tick <= x_max + x_step * 0.01 {
            svg.push_str(&format!(
                "<text x=\"{tx:.1}\" y=\"{ty}\" class=\"tick\" text-anchor=\"middle\">{label}</text>",
                tx = x(tick),
                ty = top + plot_h + 16.0,
                label = escape(&trim_number(tick))
            ));
            tick += x_step;
        }
        svg.push_str(&format!(
            "<text transform=\"translate(14 {cy}) rotate(-90)\" class=\"axis\" text-anchor=\"middle\">{}</text>\
<text x=\"{cx}\" y=\"{ly}\" class=\"axis\" text-anchor=\"middle\">{}</text>",
            escape(&self.y_label),
            escape(&self.x_label),
            cy = top + plot_h / 2.0,
            cx = left + plot_w / 2.0,
            ly = top + plot_h + 34.0
        ));
        for (i, line) in self.lines.iter().enumerate() {
            let points: Vec<String> = line
                .points
                .iter()
                .map(|&(px, py)| format!("{:.1},{:.1}", x(px), y(py)))
                .collect();
            svg.push_str(&format!(
                "<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"2\"{dash} points=\"{}\"><title>{}</title></polyline>",
                points.join(" "),
                escape(&line.name),
                c = PALETTE[i % PALETTE.len()],
                dash = if line.dashed { " stroke-dasharray=\"5 3\"" } else { "" }
            ));
        }
        let mut lx = left;
        for (i, line) in self.lines.iter().enumerate() {
            let ly = height - 14.0;
            svg.push_str(&format!(
                "<line x1=\"{lx:.1}\" x2=\"{lx2:.1}\" y1=\"{ry}\" y2=\"{ry}\" stroke=\"{c}\" stroke-width=\"2\"{dash}/>\
<text x=\"{tx:.1}\" y=\"{ly}\" class=\"legend\">{name}</text>",
                lx2 = lx + 14.0,
                ry = ly - 4.0,
                c = PALETTE[i % PALETTE.len()],
                dash = if line.dashed { " stroke-dasharray=\"5 3\"" } else { "" },
                tx = lx + 18.0,
                name = escape(&line.name)
            ));
            lx += 28.0 + 6.5 * line.name.chars().count() as f64;
        }
        svg.push_str(&format!(
            "<line x1=\"{left}\" x2=\"{x2}\" y1=\"{b}\" y2=\"{b}\" class=\"axisline\"/></svg>",
            x2 = width - right,
            b = top + plot_h
        ));
        svg
    }
}

fn trim_number(v: f64) -> String {
    if v >= 100.0 || v == v.round() {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_axes_cover_the_maximum() {
        for max in [0.3, 1.0, 4.2, 17.0, 999.0, 1.2e9] {
            let (axis, step) = nice_axis(max);
            assert!(axis >= max, "{max} -> {axis}");
            assert!(axis / step <= 6.5);
        }
        assert_eq!(nice_axis(0.0), (1.0, 0.25));
    }

    #[test]
    fn renders_an_accessible_chart_with_escaped_text() {
        let chart = BarChart {
            id: "c1".into(),
            title: "GCM <vs> CBC".into(),
            description: "ratio".into(),
            categories: vec!["16 B".into(), "1 KiB".into()],
            series: vec![Series::new("accel", vec![Some(2.0), None])],
            y_label: "ratio".into(),
            reference: Some(1.0),
            format: |v| format!("{v:.1}x"),
        };
        let svg = chart.render();
        assert!(svg.contains("<title id=\"c1-t\">GCM &lt;vs&gt; CBC</title>"));
        assert!(svg.contains("role=\"img\""));
        assert_eq!(
            svg.matches("<rect x=").count(),
            2,
            "one bar and one legend swatch"
        );
        assert!(svg.contains("accel, 16 B: 2.0x"));
    }

    /// The numbers of `attr="..."` in the order they appear in `svg`.
    fn numbers(svg: &str, attr: &str) -> Vec<f64> {
        svg.split(&format!(" {attr}=\""))
            .skip(1)
            .map(|rest| rest[..rest.find('"').unwrap()].parse().unwrap())
            .collect()
    }

    #[test]
    fn whiskers_span_the_interval_around_the_bar_top_with_a_legend_line() {
        let chart = BarChart {
            id: "w".into(),
            title: "gain".into(),
            description: "gain".into(),
            categories: vec!["a".into(), "b".into(), "c".into()],
            series: vec![Series::new("x / y", vec![Some(3.0), Some(1.02), Some(2.0)])
                .with_intervals(vec![Some((2.5, 4.5)), Some((0.9, 1.1)), None])],
            y_label: "ratio".into(),
            reference: Some(1.0),
            format: |v| format!("{v:.2}x"),
        };
        let svg = chart.render();
        assert_eq!(svg.matches("<g class=\"whisker\"").count(), 2, "{svg}");
        assert!(svg.contains(WHISKER_LEGEND));
        assert!(svg.contains("x / y, a: 95 % interval 2.50x–4.50x"));
        // The axis reaches the highest whisker (4.5), not only the highest bar (3).
        assert!(svg.contains(">5</text>"), "{svg}");
        // In pixel space (y grows downward): the high end above the bar's top, the
        // low end below it.
        let bars: Vec<f64> = svg
            .split("<rect x=")
            .skip(1)
            .take(3)
            .map(|r| numbers(&format!(" x={r}"), "y")[0])
            .collect();
        for (k, g) in svg.split("<g class=\"whisker\"").skip(1).enumerate() {
            let g = &g[..g.find("</g>").unwrap()];
            let (y1, y2) = (numbers(g, "y1"), numbers(g, "y2"));
            let (lo, hi) = (y1[0], y2[0]);
            assert!(
                hi <= bars[k] && bars[k] <= lo,
                "whisker {k}: {hi} {} {lo}",
                bars[k]
            );
            assert!(hi < lo);
        }
        // No interval anywhere: no whisker and no legend line.
        let plain = BarChart {
            series: vec![Series::new("x", vec![Some(1.0)])],
            categories: vec!["a".into()],
            ..chart
        }
        .render();
        assert!(!plain.contains("whisker"));
    }

    #[test]
    fn renders_lines_with_a_legend() {
        let chart = LineChart {
            id: "l1".into(),
            title: "ramp".into(),
            description: "requests per second".into(),
            x_label: "second".into(),
            y_label: "requests".into(),
            lines: vec![
                Line {
                    name: "attempted".into(),
                    points: vec![(0.0, 0.0), (1.0, 10.0), (2.0, 20.0)],
                    dashed: true,
                },
                Line {
                    name: "successful <ok>".into(),
                    points: vec![(0.0, 0.0), (1.0, 9.0)],
                    dashed: false,
                },
            ],
        };
        let svg = chart.render();
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("successful &lt;ok&gt;"));
        assert!(svg.contains("stroke-dasharray"));
    }
}
