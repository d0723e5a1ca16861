//! The per-packet random loss process of one link direction: the running state behind a
//! [`LossSpec`].
//!
//! The RNG is passed in rather than owned so that the link model keeps a single seeded stream per
//! link direction (randomness is seeded from the configuration) and the order of draws is fixed by
//! the order packets leave the bottleneck.

use rand::Rng;

use super::spec::LossSpec;

/// A loss process with its state. Probabilities are used as given: a value at or below 0 (or NaN)
/// never fires and a value at or above 1 always fires, so a malformed spec cannot panic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LossProcess {
    /// Nothing is lost; draws no random numbers.
    None,
    /// Independent losses with probability `p`; one draw per packet.
    Bernoulli {
        /// Loss probability.
        p: f64,
    },
    /// Gilbert-Elliott two-state chain, stepped once per packet; two draws per packet.
    Gilbert {
        /// P(good -> bad) per packet.
        p_gb: f64,
        /// P(bad -> good) per packet.
        p_bg: f64,
        /// Loss probability in the good state.
        loss_good: f64,
        /// Loss probability in the bad state.
        loss_bad: f64,
        /// Whether the chain is in the bad state now.
        bad: bool,
    },
}

impl LossProcess {
    /// The process for `spec`. A Gilbert-Elliott chain starts in a state drawn from its stationary
    /// distribution, so that the loss rate of a short run is unbiased (starting in "good" would
    /// under-count losses for the first 1/p_gb packets).
    pub fn new<R: Rng + ?Sized>(spec: &LossSpec, rng: &mut R) -> Self {
        match *spec {
            LossSpec::None => LossProcess::None,
            LossSpec::Bernoulli { p } => LossProcess::Bernoulli { p },
            LossSpec::Gilbert { p_gb, p_bg, loss_good, loss_bad } => {
                // Same convention as `LossSpec::mean_loss`: a chain that never moves stays good.
                let pi_bad = if p_gb + p_bg > 0.0 { p_gb / (p_gb + p_bg) } else { 0.0 };
                let bad = rng.random::<f64>() < pi_bad;
                LossProcess::Gilbert { p_gb, p_bg, loss_good, loss_bad, bad }
            }
        }
    }

    /// Decides the fate of the next packet: `true` if it is lost.
    ///
    /// Gilbert-Elliott order: first the chain takes its transition for this packet, then the loss
    /// is drawn with the new state's probability. So with `loss_bad = 1, loss_good = 0` a loss
    /// burst is exactly one visit to the bad state, of mean length `1 / p_bg` packets.
    pub fn lost<R: Rng + ?Sized>(&mut self, rng: &mut R) -> bool {
        match self {
            LossProcess::None => false,
            LossProcess::Bernoulli { p } => rng.random::<f64>() < *p,
            LossProcess::Gilbert { p_gb, p_bg, loss_good, loss_bad, bad } => {
                let flip = if *bad { *p_bg } else { *p_gb };
                if rng.random::<f64>() < flip {
                    *bad = !*bad;
                }
                let p = if *bad { *loss_bad } else { *loss_good };
                rng.random::<f64>() < p
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn degenerate_probabilities_do_not_panic() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let specs = [
            LossSpec::Bernoulli { p: f64::NAN },
            LossSpec::Bernoulli { p: -1.0 },
            LossSpec::Bernoulli { p: 2.0 },
            LossSpec::Gilbert { p_gb: f64::NAN, p_bg: -3.0, loss_good: 5.0, loss_bad: f64::INFINITY },
            LossSpec::Gilbert { p_gb: 0.0, p_bg: 0.0, loss_good: 0.0, loss_bad: 1.0 },
        ];
        let fates: Vec<bool> = specs
            .iter()
            .map(|s| {
                let mut l = LossProcess::new(s, &mut rng);
                l.lost(&mut rng)
            })
            .collect();
        // NaN and negative never fire, >= 1 always fires, a frozen chain stays good.
        assert_eq!(fates, [false, false, true, true, false]);
    }

    #[test]
    fn gilbert_transition_comes_before_the_loss_draw() {
        // A chain that always flips and loses only in "bad": starting good, the first packet
        // must see the bad state (transition first), the second the good state again.
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let mut l = LossProcess::Gilbert { p_gb: 1.0, p_bg: 1.0, loss_good: 0.0, loss_bad: 1.0, bad: false };
        assert!(l.lost(&mut rng));
        assert!(!l.lost(&mut rng));
        assert!(l.lost(&mut rng));
    }
}
