//! Plots of benchmark figures, written as SVG with `plotters`.

use std::path::Path;

use plotters::prelude::*;

/// Colours of the series, in order.
const COLOURS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// Throughput per client thread count: on the left operations/s (log scale), on the right
/// each series as a fraction of its own best, with a dashed line at `floor`.
#[expect(
    clippy::cast_possible_truncation,
    reason = "x is log2 of a thread count (below 64): x and 2^x at a tick are small non-negative \
              integers"
)]
pub(crate) fn per_thread_count(
    path: &Path,
    title: &str,
    threads: &[usize],
    series: &[(&str, &[f64])],
    floor: f64,
) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("cannot draw {}: {e}", path.display());
    let xs: Vec<f64> = threads.iter().map(|&t| (t.max(1) as f64).log2()).collect();
    let x_hi = xs.iter().cloned().fold(0.0, f64::max).max(1.0);
    let finite = series
        .iter()
        .flat_map(|(_, v)| v.iter().cloned())
        .filter(|v| v.is_finite() && *v > 0.0);
    let (lo, hi) = finite.fold((f64::INFINITY, 0.0f64), |(l, h), v| (l.min(v), h.max(v)));
    if hi <= 0.0 {
        return Err(format!("nothing to draw in {}", path.display()));
    }
    let root = SVGBackend::new(path, (1200, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let root = root
        .titled(title, ("sans-serif", 22))
        .map_err(|e| err(&e))?;
    let (left, right) = root.split_horizontally(600);
    let label = |x: &f64| {
        if (x - x.round()).abs() < 1e-6 {
            format!("{}", 2f64.powf(x.round()) as u64)
        } else {
            String::new()
        }
    };
    let ticks = x_hi.round() as usize + 1;

    let mut abs = ChartBuilder::on(&left)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.2..x_hi + 0.2, (lo / 1.5..hi * 1.5).log_scale())
        .map_err(|e| err(&e))?;
    abs.configure_mesh()
        .light_line_style(TRANSPARENT)
        .x_labels(ticks)
        .x_label_formatter(&label)
        .x_desc("client threads")
        .y_desc("operations/s")
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()
        .map_err(|e| err(&e))?;

    let mut rel = ChartBuilder::on(&right)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(-0.2..x_hi + 0.2, 0.0..1.1)
        .map_err(|e| err(&e))?;
    rel.configure_mesh()
        .light_line_style(TRANSPARENT)
        .x_labels(ticks)
        .x_label_formatter(&label)
        .x_desc("client threads")
        .y_desc("fraction of the phase's best")
        .draw()
        .map_err(|e| err(&e))?;
    rel.draw_series(DashedLineSeries::new(
        [(-0.2, floor), (x_hi + 0.2, floor)],
        6,
        4,
        BLACK.stroke_width(1),
    ))
    .map_err(|e| err(&e))?;

    for (i, (name, ys)) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let pts: Vec<(f64, f64)> = xs
            .iter()
            .zip(ys.iter())
            .filter(|(_, y)| y.is_finite() && **y > 0.0)
            .map(|(x, y)| (*x, *y))
            .collect();
        let best = pts.iter().map(|p| p.1).fold(0.0, f64::max);
        abs.draw_series(LineSeries::new(pts.clone(), colour.stroke_width(2)))
            .map_err(|e| err(&e))?;
        abs.draw_series(pts.iter().map(|p| Circle::new(*p, 3, colour.filled())))
            .map_err(|e| err(&e))?;
        let scaled: Vec<(f64, f64)> = pts.iter().map(|(x, y)| (*x, y / best)).collect();
        rel.draw_series(LineSeries::new(scaled.clone(), colour.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(name.to_string())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], colour.stroke_width(2)));
        rel.draw_series(scaled.iter().map(|p| Circle::new(*p, 3, colour.filled())))
            .map_err(|e| err(&e))?;
    }
    // Below the dashed line, to the right, the fractions chart is empty.
    rel.configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// Series of `(x, y)` points over a run (throughput over time or progress), on linear axes
/// from zero.
pub(crate) fn over_run(
    path: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[(&str, &[(f64, f64)])],
) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("cannot draw {}: {e}", path.display());
    let pts = || {
        series
            .iter()
            .flat_map(|(_, p)| p.iter())
            .filter(|p| p.1.is_finite())
    };
    let x_hi = pts().map(|p| p.0).fold(0.0, f64::max);
    let y_hi = pts().map(|p| p.1).fold(0.0, f64::max);
    if x_hi <= 0.0 || y_hi <= 0.0 {
        return Err(format!("nothing to draw in {}", path.display()));
    }
    let root = SVGBackend::new(path, (900, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let root = root
        .titled(title, ("sans-serif", 20))
        .map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_hi * 1.02, 0.0..y_hi * 1.15)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .x_desc(x_desc)
        .y_desc(y_desc)
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()
        .map_err(|e| err(&e))?;
    for (i, (name, p)) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        // A NaN point breaks the line: each run of finite points is drawn on its own.
        let runs: Vec<Vec<(f64, f64)>> = p
            .split(|q| !q.1.is_finite())
            .filter(|r| !r.is_empty())
            .map(|r| r.to_vec())
            .collect();
        for (k, run) in runs.iter().enumerate() {
            let drawn = chart
                .draw_series(LineSeries::new(run.clone(), colour.stroke_width(2)))
                .map_err(|e| err(&e))?;
            if k == 0 {
                drawn.label(name.to_string()).legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 18, y)], colour.stroke_width(2))
                });
            }
            chart
                .draw_series(run.iter().map(|q| Circle::new(*q, 2, colour.filled())))
                .map_err(|e| err(&e))?;
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// Grouped bars: one group per label on the x axis (a range width, a dataset), one bar per
/// series in each group (a store, a setting). `log` draws the y axis on a log scale (for
/// figures that differ by orders of magnitude, as latencies across servers do).
#[expect(
    clippy::cast_possible_truncation,
    reason = "a tick at a non-negative integral x names group x (past the end: none)"
)]
pub(crate) fn bars(
    path: &Path,
    title: &str,
    y_desc: &str,
    groups: &[String],
    series: &[(&str, Vec<f64>)],
    log: bool,
) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("cannot draw {}: {e}", path.display());
    let vals = || {
        series
            .iter()
            .flat_map(|(_, v)| v.iter().cloned())
            .filter(|v| v.is_finite() && *v > 0.0)
    };
    let hi = vals().fold(0.0, f64::max);
    let lo = vals().fold(f64::INFINITY, f64::min);
    if hi <= 0.0 || groups.is_empty() {
        return Err(format!("nothing to draw in {}", path.display()));
    }
    let n = series.len().max(1) as f64;
    let width = 0.8 / n;
    let root = SVGBackend::new(path, (1000, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let root = root
        .titled(title, ("sans-serif", 20))
        .map_err(|e| err(&e))?;
    let x_range = -0.5..groups.len() as f64 - 0.5;
    let label = |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 1e-6 && i >= 0.0 {
            groups.get(i as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    macro_rules! draw {
        ($chart:expr, $base:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .light_line_style(TRANSPARENT)
                .disable_x_mesh()
                .x_labels(groups.len() * 2 + 1)
                .x_label_formatter(&label)
                .y_desc(y_desc)
                .y_label_formatter(&|y| format!("{y:.0}"))
                .draw()
                .map_err(|e| err(&e))?;
            for (k, (name, v)) in series.iter().enumerate() {
                let colour = COLOURS[k % COLOURS.len()];
                let off = -0.4 + width * k as f64;
                chart
                    .draw_series(
                        v.iter()
                            .enumerate()
                            .filter(|(_, y)| y.is_finite() && **y > 0.0)
                            .map(|(g, y)| {
                                let x0 = g as f64 + off;
                                Rectangle::new(
                                    [(x0, $base), (x0 + width * 0.9, *y)],
                                    colour.filled(),
                                )
                            }),
                    )
                    .map_err(|e| err(&e))?
                    .label(name.to_string())
                    .legend(move |(x, y)| {
                        Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled())
                    });
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperLeft)
                .draw()
                .map_err(|e| err(&e))?;
        }};
    }
    if log {
        let base = lo / 2.0;
        let chart = ChartBuilder::on(&root)
            .margin(14)
            .x_label_area_size(40)
            .y_label_area_size(80)
            .build_cartesian_2d(x_range, (base..hi * 3.0).log_scale())
            .map_err(|e| err(&e))?;
        draw!(chart, base);
    } else {
        let chart = ChartBuilder::on(&root)
            .margin(14)
            .x_label_area_size(40)
            .y_label_area_size(80)
            .build_cartesian_2d(x_range, 0.0..hi * 1.15)
            .map_err(|e| err(&e))?;
        draw!(chart, 0.0);
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_an_svg() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("w3.svg");
        per_thread_count(
            &p,
            "W3",
            &[1, 2, 4, 64],
            &[
                ("insert", &[10.0, 20.0, 40.0, 35.0]),
                ("point", &[5.0, f64::NAN, 9.0, 8.0]),
            ],
            0.8,
        )
        .unwrap();
        let s = std::fs::read_to_string(&p).unwrap();
        assert!(s.starts_with("<svg"), "{}", &s[..80.min(s.len())]);
        assert!(s.contains("insert") && s.contains("client threads"));
    }

    #[test]
    fn draws_bars() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("w4.svg");
        let groups = vec!["10".to_string(), "100".to_string()];
        bars(
            &p,
            "W4",
            "µs",
            &groups,
            &[("silt", vec![5.0, 50.0]), ("peer", vec![500.0, f64::NAN])],
            true,
        )
        .unwrap();
        let s = std::fs::read_to_string(&p).unwrap();
        assert!(s.starts_with("<svg") && s.contains("peer") && s.contains("µs"));
        bars(&p, "W5", "MiB", &groups, &[("silt", vec![1.0, 2.0])], false).unwrap();
        assert!(bars(&p, "W5", "MiB", &[], &[("silt", vec![])], false).is_err());
    }

    #[test]
    fn draws_a_run() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("w2.svg");
        let a = [(0.1, 100.0), (1.0, 90.0), (2.0, f64::NAN)];
        over_run(&p, "W2", "documents", "inserts/s", &[("delete", &a)]).unwrap();
        let s = std::fs::read_to_string(&p).unwrap();
        assert!(s.starts_with("<svg") && s.contains("delete") && s.contains("inserts/s"));
        assert!(over_run(&p, "W2", "x", "y", &[("none", &[])]).is_err());
    }
}
