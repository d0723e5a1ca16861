//! Random distributions for workload parameters (flow sizes, inter-arrival times), as written in a
//! scenario file's `{ dist = "...", ... }` tables (docs/design.md 5).
//!
//! Every distribution here is over non-negative values, because sizes and times are what it
//! describes. An optional `max` on the heavy-tailed kinds *clamps* draws (a draw above `max` becomes
//! `max`; it is not redrawn), so that one enormous flow cannot dominate a run; [`Dist::mean`]
//! accounts for that clamping analytically.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::Rng;
use rand_distr::{Distribution, Exp1, StandardNormal};

use crate::link::SpecFileError;

/// A distribution of non-negative values.
///
/// Construct it from a scenario file (which validates it) or by hand and then call
/// [`Dist::check`]; sampling an unchecked distribution never panics but may return nonsense.
#[derive(Debug, Clone, PartialEq)]
pub enum Dist {
    /// Log-normal: `exp(ln(median) + sigma * Z)`, `Z` standard normal, clamped to `max`.
    LogNormal {
        /// Median (`exp(mu)`), > 0.
        median: f64,
        /// Standard deviation of the logarithm, >= 0.
        sigma: f64,
        /// Draws above this become this.
        max: Option<f64>,
    },
    /// Pareto (type I): `P(X > x) = (scale / x)^shape` for `x >= scale`, clamped to `max`.
    Pareto {
        /// Minimum value, > 0.
        scale: f64,
        /// Tail index, > 0; the mean is infinite for `shape <= 1`, so then `max` is required.
        shape: f64,
        /// Draws above this become this.
        max: Option<f64>,
    },
    /// Always the same value.
    Fixed {
        /// The value, >= 0.
        value: f64,
    },
    /// Exponential with the given mean.
    Exponential {
        /// Mean, > 0.
        mean: f64,
    },
    /// Uniform on `[min, max)` (or exactly `min` when they are equal).
    Uniform {
        /// Lower bound, >= 0.
        min: f64,
        /// Upper bound, >= `min`.
        max: f64,
    },
    /// Draws uniformly among the values of a file (one value per line).
    Empirical {
        /// Where the values came from (resolved path), for reports.
        file: PathBuf,
        /// The values, at least one, each finite and >= 0.
        values: Arc<[f64]>,
    },
}

/// A distribution parameter that is out of range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{param}: {what}")]
pub struct DistError {
    /// The offending parameter's key (`median`, `shape`, ...).
    pub param: &'static str,
    /// What is wrong with it.
    pub what: String,
}

impl Dist {
    /// The `dist = "..."` names, in the order the scenario format documents them.
    pub const KINDS: &'static [&'static str] = &["lognormal", "pareto", "fixed", "exponential", "uniform", "empirical"];

    /// The `dist = "..."` name of this distribution.
    pub fn kind(&self) -> &'static str {
        match self {
            Dist::LogNormal { .. } => "lognormal",
            Dist::Pareto { .. } => "pareto",
            Dist::Fixed { .. } => "fixed",
            Dist::Exponential { .. } => "exponential",
            Dist::Uniform { .. } => "uniform",
            Dist::Empirical { .. } => "empirical",
        }
    }

    /// Checks every parameter's range (all finite; see each variant for its bounds).
    pub fn check(&self) -> Result<(), DistError> {
        fn err(param: &'static str, what: impl Into<String>) -> Result<(), DistError> {
            Err(DistError { param, what: what.into() })
        }
        fn positive(param: &'static str, v: f64) -> Result<(), DistError> {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                err(param, format!("must be a finite number > 0, found {v}"))
            }
        }
        fn non_negative(param: &'static str, v: f64) -> Result<(), DistError> {
            if v.is_finite() && v >= 0.0 {
                Ok(())
            } else {
                err(param, format!("must be a finite number >= 0, found {v}"))
            }
        }
        match self {
            Dist::LogNormal { median, sigma, max } => {
                positive("median", *median)?;
                non_negative("sigma", *sigma)?;
                if let Some(m) = max {
                    positive("max", *m)?;
                }
                Ok(())
            }
            Dist::Pareto { scale, shape, max } => {
                positive("scale", *scale)?;
                positive("shape", *shape)?;
                match max {
                    Some(m) => {
                        positive("max", *m)?;
                        if m < scale {
                            return err("max", format!("must be >= scale ({scale}), found {m}"));
                        }
                        Ok(())
                    }
                    None if *shape <= 1.0 => {
                        err("max", format!("required when shape <= 1 (shape {shape} gives an infinite mean)"))
                    }
                    None => Ok(()),
                }
            }
            Dist::Fixed { value } => non_negative("value", *value),
            Dist::Exponential { mean } => positive("mean", *mean),
            Dist::Uniform { min, max } => {
                non_negative("min", *min)?;
                non_negative("max", *max)?;
                if max < min {
                    return err("max", format!("must be >= min ({min}), found {max}"));
                }
                Ok(())
            }
            Dist::Empirical { values, .. } => {
                if values.is_empty() {
                    return err("file", "has no values");
                }
                match values.iter().find(|v| !(v.is_finite() && **v >= 0.0)) {
                    Some(v) => err("file", format!("values must be finite and >= 0, found {v}")),
                    None => Ok(()),
                }
            }
        }
    }

    /// Reads an empirical distribution: one number per line; blank lines and lines starting with
    /// `#` are ignored. Values must be finite and non-negative, and there must be at least one.
    pub fn empirical_from_file(path: &Path) -> Result<Self, SpecFileError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| SpecFileError::Io { path: path.display().to_string(), source })?;
        let values = Self::parse_empirical(&path.display().to_string(), &text)?;
        Ok(Dist::Empirical { file: path.to_path_buf(), values: values.into() })
    }

    /// Parses the text of an empirical distribution file (see [`Dist::empirical_from_file`]);
    /// `name` labels errors.
    pub fn parse_empirical(name: &str, text: &str) -> Result<Vec<f64>, SpecFileError> {
        let mut values = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |what: String| SpecFileError::Format { path: name.to_string(), line: i + 1, what };
            let v: f64 = line.parse().map_err(|_| bad(format!("expected a number, found {line:?}")))?;
            if !(v.is_finite() && v >= 0.0) {
                return Err(bad(format!("values must be finite and >= 0, found {v}")));
            }
            values.push(v);
        }
        if values.is_empty() {
            return Err(SpecFileError::Format { path: name.to_string(), line: 0, what: "no values".into() });
        }
        Ok(values)
    }

    /// Draws one value.
    pub fn sample(&self, rng: &mut impl Rng) -> f64 {
        let clamp = |x: f64, max: Option<f64>| max.map_or(x, |m| x.min(m));
        match self {
            Dist::LogNormal { median, sigma, max } => {
                let z: f64 = StandardNormal.sample(rng);
                clamp(median * (sigma * z).exp(), *max)
            }
            Dist::Pareto { scale, shape, max } => {
                // ln(X / scale) is exponential with rate `shape`.
                let e: f64 = Exp1.sample(rng);
                clamp(scale * (e / shape).exp(), *max)
            }
            Dist::Fixed { value } => *value,
            Dist::Exponential { mean } => {
                let e: f64 = Exp1.sample(rng);
                mean * e
            }
            Dist::Uniform { min, max } => min + (max - min) * rng.random::<f64>(),
            Dist::Empirical { values, .. } => {
                if values.is_empty() {
                    return 0.0;
                }
                values[rng.random_range(0..values.len())]
            }
        }
    }

    /// The mean, analytic for every kind. With `max`, it is the mean of the clamped variable,
    /// `E[min(X, max)]`, exact for Pareto and exact up to the normal CDF approximation (relative
    /// error below 1.2e-7) for log-normal. Infinite for an unclamped Pareto with `shape <= 1`.
    pub fn mean(&self) -> f64 {
        match self {
            Dist::LogNormal { median, sigma, max } => lognormal_clamped_mean(*median, *sigma, *max),
            Dist::Pareto { scale, shape, max } => pareto_clamped_mean(*scale, *shape, *max),
            Dist::Fixed { value } => *value,
            Dist::Exponential { mean } => *mean,
            Dist::Uniform { min, max } => (min + max) / 2.0,
            Dist::Empirical { values, .. } => {
                if values.is_empty() {
                    return 0.0;
                }
                values.iter().sum::<f64>() / values.len() as f64
            }
        }
    }
}

/// `E[min(X, max)]` for log-normal `X` with the given median and sigma:
/// `E[X; X < m] + m P(X >= m)`, where `E[X; X < m] = e^(mu + s^2/2) Phi((ln m - mu - s^2) / s)`.
fn lognormal_clamped_mean(median: f64, sigma: f64, max: Option<f64>) -> f64 {
    let full = median * (sigma * sigma / 2.0).exp();
    let Some(m) = max else { return full };
    if sigma <= 0.0 {
        return median.min(m);
    }
    let mu = median.ln();
    let lm = m.ln();
    full * normal_cdf((lm - mu - sigma * sigma) / sigma) + m * (1.0 - normal_cdf((lm - mu) / sigma))
}

/// `E[min(X, max)] = scale + integral from scale to max of (scale / x)^shape dx`.
fn pareto_clamped_mean(scale: f64, shape: f64, max: Option<f64>) -> f64 {
    let Some(m) = max else {
        return if shape > 1.0 { shape * scale / (shape - 1.0) } else { f64::INFINITY };
    };
    if m <= scale {
        return m;
    }
    let one_minus = 1.0 - shape;
    if one_minus.abs() < 1e-12 {
        scale + scale * (m / scale).ln()
    } else {
        scale + scale * ((m / scale).powf(one_minus) - 1.0) / one_minus
    }
}

/// Standard normal CDF, via the complementary error function.
fn normal_cdf(x: f64) -> f64 {
    0.5 * erfc(-x / std::f64::consts::SQRT_2)
}

/// Complementary error function, Chebyshev fit with fractional error below 1.2e-7 everywhere
/// (Numerical Recipes in C, 2nd ed., section 6.2, `erfcc`).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98 + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    /// Sample mean of `n` draws, and checks every draw is finite, non-negative and within bounds.
    fn sample_mean(d: &Dist, n: usize, lo: f64, hi: f64) -> f64 {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut sum = 0.0;
        for _ in 0..n {
            let x = d.sample(&mut rng);
            assert!(x.is_finite() && x >= lo && x <= hi, "{d:?} drew {x}");
            sum += x;
        }
        sum / n as f64
    }

    fn assert_mean(d: Dist, lo: f64, hi: f64, rel_tol: f64) {
        d.check().unwrap();
        let want = d.mean();
        let got = sample_mean(&d, 400_000, lo, hi);
        assert!(((got - want) / want).abs() < rel_tol, "{d:?}: sample mean {got}, mean() {want}");
    }

    #[test]
    fn lognormal_mean_matches_samples() {
        assert_mean(Dist::LogNormal { median: 1000.0, sigma: 1.0, max: None }, 0.0, f64::MAX, 0.01);
        // Clamped hard: about 16 % of draws hit the cap, so a wrong truncation term shows.
        assert_mean(Dist::LogNormal { median: 1000.0, sigma: 1.0, max: Some(2700.0) }, 0.0, 2700.0, 0.005);
        // The bus workload's shape: heavy tail, cap far out.
        assert_mean(Dist::LogNormal { median: 2000.0, sigma: 1.8, max: Some(2e6) }, 0.0, 2e6, 0.03);
    }

    #[test]
    fn lognormal_clamped_mean_is_below_unclamped() {
        let full = Dist::LogNormal { median: 1000.0, sigma: 1.0, max: None }.mean();
        assert!((full - 1000.0 * 0.5f64.exp()).abs() < 1e-9);
        let cut = Dist::LogNormal { median: 1000.0, sigma: 1.0, max: Some(2700.0) }.mean();
        assert!(cut < full * 0.95, "{cut} vs {full}");
        assert_eq!(Dist::LogNormal { median: 5.0, sigma: 0.0, max: Some(3.0) }.mean(), 3.0);
    }

    #[test]
    fn pareto_mean_matches_samples() {
        assert_mean(Dist::Pareto { scale: 100.0, shape: 3.0, max: None }, 100.0, f64::MAX, 0.01);
        assert_mean(Dist::Pareto { scale: 100.0, shape: 1.2, max: Some(10_000.0) }, 100.0, 10_000.0, 0.01);
        assert_mean(Dist::Pareto { scale: 100.0, shape: 1.0, max: Some(10_000.0) }, 100.0, 10_000.0, 0.01);
        assert_mean(Dist::Pareto { scale: 100.0, shape: 0.8, max: Some(5_000.0) }, 100.0, 5_000.0, 0.01);
        assert_eq!(Dist::Pareto { scale: 1.0, shape: 1.0, max: None }.mean(), f64::INFINITY);
    }

    #[test]
    fn simple_kinds_mean_matches_samples() {
        assert_mean(Dist::Fixed { value: 42.0 }, 42.0, 42.0, 1e-12);
        assert_mean(Dist::Exponential { mean: 0.6 }, 0.0, f64::MAX, 0.01);
        assert_mean(Dist::Uniform { min: 2.0, max: 10.0 }, 2.0, 10.0, 0.005);
        let values: Arc<[f64]> = vec![1.0, 2.0, 3.0, 100.0].into();
        assert_mean(Dist::Empirical { file: "x".into(), values }, 1.0, 100.0, 0.01);
    }

    #[test]
    fn erfc_is_accurate() {
        // Reference values: erfc(0) = 1, erfc(1) = 0.157299207050285, erfc(-2) = 1.995322265018953.
        for (x, want) in [(0.0, 1.0), (1.0, 0.157_299_207_050_285), (-2.0, 1.995_322_265_018_953)] {
            assert!(((erfc(x) - want) / want).abs() < 2e-7, "erfc({x}) = {}", erfc(x));
        }
        assert!((normal_cdf(1.959_963_985) - 0.975).abs() < 1e-7);
    }

    #[test]
    fn check_rejects_bad_parameters() {
        let bad = [
            (Dist::LogNormal { median: 0.0, sigma: 1.0, max: None }, "median"),
            (Dist::LogNormal { median: 1.0, sigma: f64::NAN, max: None }, "sigma"),
            (Dist::LogNormal { median: 1.0, sigma: 1.0, max: Some(-1.0) }, "max"),
            (Dist::Pareto { scale: 1.0, shape: 0.0, max: Some(2.0) }, "shape"),
            (Dist::Pareto { scale: 1.0, shape: 1.0, max: None }, "max"),
            (Dist::Pareto { scale: 10.0, shape: 2.0, max: Some(5.0) }, "max"),
            (Dist::Fixed { value: -1.0 }, "value"),
            (Dist::Exponential { mean: 0.0 }, "mean"),
            (Dist::Exponential { mean: f64::INFINITY }, "mean"),
            (Dist::Uniform { min: 3.0, max: 2.0 }, "max"),
            (Dist::Empirical { file: "x".into(), values: Vec::new().into() }, "file"),
        ];
        for (d, param) in bad {
            assert_eq!(d.check().unwrap_err().param, param, "{d:?}");
        }
    }

    #[test]
    fn empirical_file_parses_and_reports_bad_lines() {
        assert_eq!(Dist::parse_empirical("e", "# sizes\n1\n\n2.5\n").unwrap(), vec![1.0, 2.5]);
        let e = Dist::parse_empirical("e", "1\nx\n").unwrap_err().to_string();
        assert!(e.contains("e:2"), "{e}");
        assert!(Dist::parse_empirical("e", "-1\n").is_err());
        assert!(Dist::parse_empirical("e", "\n# nothing\n").is_err());
    }

    #[test]
    fn unchecked_distributions_never_panic() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let empty = Dist::Empirical { file: "x".into(), values: Vec::new().into() };
        assert_eq!(empty.sample(&mut rng), 0.0);
        assert_eq!(empty.mean(), 0.0);
        let _ = Dist::Uniform { min: f64::NAN, max: -1.0 }.sample(&mut rng);
        let _ = Dist::Pareto { scale: 1.0, shape: 0.0, max: None }.sample(&mut rng);
    }
}
