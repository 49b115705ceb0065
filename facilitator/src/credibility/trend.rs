//! Performance trend: least-squares line through the rolling accuracy of a
//! track record (seed: "linear regression on rolling accuracy").

pub use caucus_shared::api::facilitator::Trend;

/// Fits `y = a + b·x` to `points` (x in years). `None` with fewer than three
/// points or when every x is the same (no time spread, no trend). A flat
/// series has R² 0: it explains nothing, so it never counts as a trend.
pub fn fit(points: &[(f64, f64)]) -> Option<Trend> {
    let n = points.len();
    if n < 3 {
        return None;
    }
    let nf = n as f64;
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / nf;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / nf;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    let syy: f64 = points.iter().map(|p| (p.1 - mean_y).powi(2)).sum();
    if sxx <= f64::EPSILON {
        return None;
    }
    let slope = sxy / sxx;
    let r2 = if syy <= f64::EPSILON {
        0.0
    } else {
        ((sxy * sxy) / (sxx * syy)).clamp(0.0, 1.0)
    };
    Some(Trend {
        slope_per_year: slope,
        r2,
        points: n,
    })
}

/// Rolling accuracy: for each record from the `window`-th on (sorted by
/// time), the mean outcome of the last `window` records, placed at that
/// record's time. `series` is `(years, outcome)` sorted by time.
pub fn rolling(series: &[(f64, f64)], window: usize) -> Vec<(f64, f64)> {
    let w = window.max(1);
    if series.len() < w {
        return Vec::new();
    }
    let mut out = Vec::with_capacity(series.len() + 1 - w);
    let mut sum: f64 = series[..w].iter().map(|p| p.1).sum();
    out.push((series[w - 1].0, sum / w as f64));
    for i in w..series.len() {
        sum += series[i].1 - series[i - w].1;
        out.push((series[i].0, sum / w as f64));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_a_line() {
        let pts: Vec<(f64, f64)> = (0..10).map(|i| (i as f64, 0.5 + 0.02 * i as f64)).collect();
        let t = fit(&pts).unwrap();
        assert!((t.slope_per_year - 0.02).abs() < 1e-9);
        assert!((t.r2 - 1.0).abs() < 1e-9);
        assert_eq!(fit(&pts[..2]), None);
        let flat: Vec<(f64, f64)> = (0..5).map(|i| (i as f64, 0.7)).collect();
        assert_eq!(fit(&flat).unwrap().r2, 0.0);
        let same_x = vec![(1.0, 0.1), (1.0, 0.9), (1.0, 0.5)];
        assert_eq!(fit(&same_x), None);
    }

    #[test]
    fn rolling_means() {
        let s = vec![(0.0, 1.0), (1.0, 0.0), (2.0, 1.0), (3.0, 1.0)];
        assert_eq!(rolling(&s, 2), vec![(1.0, 0.5), (2.0, 0.5), (3.0, 1.0)]);
        assert!(rolling(&s, 5).is_empty());
    }
}
