//! The vehicle's position fed to the session, and the location map it learns and acts on
//! (location.rs; paper 002 section 8).

use super::{Role, Session};
use crate::link::{LinkState, Phase};
use crate::location::{Expectation, Position, QualityMap};
use std::time::Duration;

/// An active link counts as seen working at a place only if something arrived on it within this
/// long; an idle one hears at least a keepalive reply a second.
const FRESH: Duration = Duration::from_millis(1500);

/// Loss at which an active link's observation counts as worthless: from none (1) to this (0).
const USELESS_LOSS: f64 = 0.2;

impl Session {
    /// The client's position at `now` (the daemon reads it from gpsd, the simulator from the
    /// scenario's vehicle). With location awareness on, the client records how good each link is
    /// here and what the map expects of it here and just ahead: a link expected good is admitted
    /// on its first probe reply and probed at the probing period while down; one expected to fade
    /// within the lookahead carries no new data while another healthy link exists. Does nothing
    /// on the server or with the feature off.
    pub fn handle_position(&mut self, now: crate::time::Instant, pos: Position) {
        let cfg = self.cfg.location;
        if !cfg.enabled || self.cfg.role != Role::Client {
            return;
        }
        for s in &mut self.links {
            let key = link_key(s);
            let fresh = s.rx.last().is_some_and(|(_, at)| now.saturating_duration_since(at) <= FRESH);
            let quality = match (s.tx.state, s.life.phase()) {
                (LinkState::Active, Phase::Active) if fresh => {
                    Some(1.0 - (s.tx.loss().max(s.rx.loss()) / USELESS_LOSS).clamp(0.0, 1.0))
                }
                // Active but nothing heard lately: it may be fading unnoticed, so it says nothing.
                (LinkState::Active, Phase::Active) => None,
                _ => Some(0.0),
            };
            if let Some(q) = quality {
                self.map.observe(&cfg, &key, pos, q);
            }
            s.expect = self.map.expect(&cfg, &key, pos);
        }
    }

    /// The location map learned so far (for the daemon to save).
    pub fn location_map(&self) -> &QualityMap {
        &self.map
    }

    /// Replaces the location map (the daemon's saved one, at start).
    pub fn set_location_map(&mut self, map: QualityMap) {
        self.map = map;
    }

    /// What the location map expects of link `id` now; all false with the feature off.
    pub fn link_expectation(&self, id: crate::link::LinkId) -> Expectation {
        self.slot(id).map_or_else(Expectation::default, |s| s.expect)
    }
}

/// The map's key for a link: its name where it has one (stable across restarts), else its id.
fn link_key(s: &super::LinkSlot) -> String {
    match s.name {
        Some(n) => n.as_str().to_owned(),
        None => format!("link{}", s.tx.id.0),
    }
}
