//! Summaries of repeated benchmark runs, shared by the examples that report medians
//! (`#[path = "support/stats.rs"] mod stats;`: an example is one crate, so a shared file is
//! included, not imported).

/// The median (the mean of the middle two for an even count).
pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// The smallest and largest value (the spread reported beside a median).
pub fn min_max(v: &[f64]) -> (f64, f64) {
    (
        v.iter().copied().fold(f64::INFINITY, f64::min),
        v.iter().copied().fold(0.0, f64::max),
    )
}
