//! The link lifecycle end to end over the pair harness: an interface the driver sees vanish is
//! down at once and its in-flight packets reach the peer over the other link well before silence
//! alone would have taken it down; a link that reappears is probed and admitted at once.

use super::pair::{Pair, index_of, packet};
use crate::link::{LinkId, LinkState, Phase};
use crate::recovery::RecoveryKind;
use crate::scheduler::SchedulerKind;
use crate::session::{Role, SessionConfig};
use std::collections::HashSet;
use std::time::Duration;

fn cfg(role: Role) -> SessionConfig {
    let mut c = SessionConfig::new(role);
    c.recovery = RecoveryKind::None;
    c.scheduler = SchedulerKind::MinDelay;
    c.seed = 7;
    c
}

fn run_cut(tell_session: bool) -> (usize, u64) {
    let mut p = Pair::new(&[(20, 1500.0), (75, 1000.0)], cfg);
    p.advance(Duration::from_millis(500));
    for i in 0..50 {
        p.send_up(&packet(i, 300));
        p.advance(Duration::from_millis(10));
    }
    // Link 0 vanishes with packets in flight on it.
    for i in 50..60 {
        p.send_up(&packet(i, 300));
    }
    p.links[0].up = false;
    if tell_session {
        let now = p.now;
        p.client.handle_link_gone(now, LinkId(0));
    }
    p.advance(Duration::from_millis(250));
    let got: HashSet<u64> = p.delivered_up.iter().map(|d| index_of(d)).collect();
    (got.len(), p.client.link_status(p.now)[0].counters.downs)
}

#[test]
fn a_vanished_interface_is_down_at_once_and_its_packets_move() {
    // Told by the driver: everything, within 250 ms (the other link's one-way delay is 75 ms).
    assert_eq!(run_cut(true), (60, 1));
    // Left to silence, 250 ms is too early: the link is not down yet. (Its packets may still
    // arrive: capacity probes on the other link repeat recent unacknowledged data.)
    let (got, downs) = run_cut(false);
    assert!(downs == 0, "{got} delivered, {downs} downs");
}

#[test]
fn a_reappearing_interface_is_probed_and_admitted_at_once() {
    let mut p = Pair::new(&[(20, 1500.0), (75, 1000.0)], cfg);
    p.advance(Duration::from_millis(500));
    p.links[0].up = false;
    let now = p.now;
    p.client.handle_link_gone(now, LinkId(0));
    p.advance(Duration::from_secs(3));
    p.links[0].up = true;
    let back = p.now;
    p.client.handle_link_present(back, LinkId(0));
    // Four replies in a row, each probe sent as the previous reply arrives: four 40 ms round trips.
    p.advance(Duration::from_millis(200));
    let st = &p.client.link_status(p.now)[0];
    assert_eq!((st.state, st.phase), (LinkState::Active, Phase::Active));
    let down = st.time_in.iter().find(|t| t.0 == Phase::Down).unwrap();
    assert!(down.1 >= Duration::from_secs(3) && down.2 == 1, "{down:?}");
}
