//! Location awareness end to end over the pair harness (location.rs; paper 002 section 8): a
//! vehicle drives a stretch where link 0 works and then one where it is dark, twice. On the second
//! lap the client drains link 0 before the dark stretch and, back in the good one, admits it on
//! its first probe reply.

use super::pair::{Pair, packet};
use crate::link::{LinkId, LinkState};
use crate::location::Position;
use crate::recovery::RecoveryKind;
use crate::session::{Role, SessionConfig};
use std::time::Duration;

const SPEED: f64 = 20.0;
const STEP: Duration = Duration::from_millis(100);

fn cfg(location: bool) -> impl Fn(Role) -> SessionConfig {
    move |role| {
        let mut c = SessionConfig::new(role);
        c.recovery = RecoveryKind::None;
        c.seed = 7;
        c.location.enabled = location;
        c
    }
}

fn at(x: f64) -> Position {
    Position { x_m: x, y_m: 0.0, vx_mps: SPEED, vy_mps: 0.0 }
}

/// Drives from `from` to `to` m, link 0 up while `x < 1000`, sending a packet up every step.
fn drive(p: &mut Pair, from: f64, to: f64, seq: &mut u64) {
    let mut x = from;
    while x < to {
        let up = x < 1000.0;
        if p.links[0].up && !up {
            p.links[0].up = false;
        } else if !p.links[0].up && up {
            p.links[0].up = true;
            let now = p.now;
            p.client.handle_link_present(now, LinkId(0));
        }
        let now = p.now;
        p.client.handle_position(now, at(x));
        p.send_up(&packet(*seq, 300));
        *seq += 1;
        p.advance(STEP);
        x += SPEED * STEP.as_secs_f64();
    }
}

#[test]
fn a_learned_route_drains_before_the_dark_and_admits_at_once_after() {
    let mut p = Pair::new(&[(20, 1500.0), (75, 1000.0)], cfg(true));
    p.advance(Duration::from_millis(500));
    let mut seq = 0;
    // Lap 1 learns: good up to 1000 m, dark to 2000 m.
    drive(&mut p, 0.0, 2000.0, &mut seq);
    assert_eq!(p.client.link_status(p.now)[0].state, LinkState::Down);
    // Lap 2: link 0 is back in the good stretch...
    p.links[0].up = true;
    let now = p.now;
    p.client.handle_link_present(now, LinkId(0));
    p.client.handle_position(now, at(0.0));
    // ...admitted on the first reply: one 40 ms round trip, not four.
    p.advance(Duration::from_millis(60));
    assert_eq!(p.client.link_status(p.now)[0].state, LinkState::Active, "admitted on its first reply");
    drive(&mut p, 0.0, 900.0, &mut seq);
    // 3 s before the dark stretch (60 m at 20 m/s) the map expects the fade.
    drive(&mut p, 900.0, 960.0, &mut seq);
    assert!(p.client.link_expectation(LinkId(0)).fades_soon);
    // From then on no new data goes on link 0, though it still works.
    let before = p.client.link_status(p.now)[0].counters.data_sent;
    drive(&mut p, 960.0, 995.0, &mut seq);
    assert_eq!(p.client.link_status(p.now)[0].state, LinkState::Active);
    assert_eq!(p.client.link_status(p.now)[0].counters.data_sent, before, "drained ahead of the fade");
}

#[test]
fn without_location_awareness_nothing_changes() {
    let mut p = Pair::new(&[(20, 1500.0), (75, 1000.0)], cfg(false));
    p.advance(Duration::from_millis(500));
    let mut seq = 0;
    drive(&mut p, 0.0, 2000.0, &mut seq);
    drive(&mut p, 0.0, 960.0, &mut seq);
    assert!(p.client.location_map().is_empty());
    assert!(!p.client.link_expectation(LinkId(0)).fades_soon);
    let before = p.client.link_status(p.now)[0].counters.data_sent;
    drive(&mut p, 960.0, 995.0, &mut seq);
    assert!(p.client.link_status(p.now)[0].counters.data_sent > before, "link 0 still carries data");
}
