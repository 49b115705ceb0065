//! Wilson score interval: how far a proportion measured on `n` samples can
//! be trusted (seed: DD-008, z = 1.96).

pub use caucus_shared::api::facilitator::Interval;

/// The Wilson interval of proportion `p` over `n` samples. With no samples
/// nothing is known, and the half-width is 0.5 (the seed's rule). `p` is
/// clamped into 0..=1 so a rounding error can never produce NaN.
pub fn wilson(p: f64, n: u64, z: f64) -> Interval {
    if n == 0 || !p.is_finite() {
        return Interval {
            lower: 0.0,
            upper: 1.0,
            half_width: 0.5,
        };
    }
    let p = p.clamp(0.0, 1.0);
    let n = n as f64;
    let z2 = z * z;
    let denominator = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denominator;
    let margin = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denominator;
    let lower = (center - margin).max(0.0);
    let upper = (center + margin).min(1.0);
    Interval {
        lower,
        upper,
        half_width: (upper - lower) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_values() {
        // 8 of 10 at z = 1.96: the textbook interval is [0.490, 0.943].
        let i = wilson(0.8, 10, 1.96);
        assert!((i.lower - 0.4902).abs() < 1e-3, "{i:?}");
        assert!((i.upper - 0.9433).abs() < 1e-3, "{i:?}");
        assert_eq!(wilson(0.7, 0, 1.96).half_width, 0.5);
        let zero = wilson(0.0, 20, 1.96);
        assert_eq!(zero.lower, 0.0);
        assert!(zero.upper > 0.0 && zero.upper < 0.2);
    }

    proptest! {
        #[test]
        fn bounds_are_ordered_and_within_unit(p in 0.0f64..=1.0, n in 0u64..100_000) {
            let i = wilson(p, n, 1.96);
            prop_assert!(0.0 <= i.lower && i.lower <= i.upper && i.upper <= 1.0);
            prop_assert!((0.0..=0.5).contains(&i.half_width));
        }

        #[test]
        fn narrows_as_samples_grow(p in 0.0f64..=1.0, n in 1u64..50_000, extra in 1u64..50_000) {
            let small = wilson(p, n, 1.96);
            let large = wilson(p, n + extra, 1.96);
            prop_assert!(large.half_width <= small.half_width + 1e-12,
                "n={n}: {small:?} vs n={}: {large:?}", n + extra);
        }
    }
}
