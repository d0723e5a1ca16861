//! The receive path: datagrams from the uplinks.

use super::{DatagramError, Event, IDLE_REPORTS, LinkSlot, Role, Session};
use crate::link::{LinkId, LinkState, OUTER_OVERHEAD, RxEstimator, TxLink};
use crate::recovery::Known;
use crate::seq;
use crate::time::Instant;
use crate::wire::{
    CloseRepr, CodedRepr, DataRepr, FLAG_NACK_WANTED, FLAG_REPLY, FeedbackRepr, Header, PacketType, ProbeRepr,
};
use bytes::Bytes;
use std::net::SocketAddr;
use std::time::Duration;

impl Session {
    /// Takes a datagram that arrived at `now` from `from`. `link` is the uplink it arrived on when
    /// the driver knows it (the client, which has one socket per uplink); the server passes `None`
    /// and the header's link id is used. Anything malformed, for another session or for an unknown
    /// link is counted and dropped, never a panic.
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        link: Option<LinkId>,
        from: SocketAddr,
        datagram: &[u8],
    ) -> Result<(), DatagramError> {
        let (h, body) = match Header::parse(datagram) {
            Ok(x) => x,
            Err(e) => {
                self.stats.malformed += 1;
                return Err(e.into());
            }
        };
        if h.session != self.cfg.session_id {
            self.stats.wrong_session += 1;
            return Err(DatagramError::WrongSession { got: h.session, ours: self.cfg.session_id });
        }
        if link.is_some_and(|l| l != h.link) {
            self.stats.unknown_link += 1;
            return Err(DatagramError::UnknownLink { named: h.link });
        }
        // Parse the body before touching any state, so a malformed datagram changes nothing.
        let parsed = match parse_body(&h, body) {
            Ok(p) => p,
            Err(e) => {
                self.stats.malformed += 1;
                return Err(e.into());
            }
        };
        if self.slot_mut(h.link).is_none() {
            match self.cfg.role {
                Role::Server if self.links.len() < FeedbackRepr::MAX_LINKS => {
                    let metering = self.metering_of(h.link);
                    let tx = TxLink::new(h.link, Some(from), 0.0, LinkState::Active, now);
                    self.links.push(LinkSlot::new(tx, RxEstimator::new(0.0), metering, None, now));
                    self.links.sort_by_key(|s| s.tx.id);
                    self.events.push_back(Event::LinkAddress(h.link, from));
                }
                _ => {
                    self.stats.unknown_link += 1;
                    return Err(DatagramError::UnknownLink { named: h.link });
                }
            }
        }
        let role = self.cfg.role;
        let slot = self.slot_mut(h.link).expect("slot exists: found or created above");
        if role == Role::Server && slot.tx.remote != Some(from) {
            // The vehicle's modem got a new address: follow it (issue 5 adds: only once authenticated).
            slot.tx.remote = Some(from);
            self.events.push_back(Event::LinkAddress(h.link, from));
        }
        let data_seq = match &parsed {
            Body::Data(d) => Some(seq::expand(self.expected_rx(), d.seq)),
            _ => None,
        };
        let slot = self.slot_mut(h.link).expect("slot exists");
        let sample = slot.rx.handle(now, h.link_seq, h.timestamp, datagram.len() + OUTER_OVERHEAD);
        slot.counters.datagrams_received += 1;
        slot.silence_reports = 0;
        let mut congestion = None;
        if let Some(seq) = data_seq {
            // The link dropped a packet at a full queue: one of the data packets it was to carry
            // between its previous one and this may be it.
            if sample.congested
                && let Some(prev) = slot.highest_data.filter(|&p| p < seq)
            {
                congestion = Some((prev + 1, seq));
            }
            slot.highest_data = Some(slot.highest_data.map_or(seq, |h| h.max(seq)));
        }
        if let Some((from, to)) = congestion
            && self.all_links_queued(now, h.link)
        {
            self.note_congestion_loss(now, from, to);
        }
        let slot = self.slot_mut(h.link).expect("slot exists");
        match parsed {
            Body::Data(_) => slot.last_data = Some(now),
            Body::Coded(_) => slot.last_coded = Some(now),
            _ => {}
        }
        slot.counters.bytes_received += datagram.len() as u64;
        self.stats.datagrams_received += 1;
        match parsed {
            // Reports answered by reports would never stop: two idle sessions' links carried
            // about 20 datagrams/s each, and a server with a fleet of idle vehicles spent its time
            // on them. A report earns a report only for a few rounds after the last passenger
            // packet (enough for the estimates of a session that starts, or just fell quiet, to
            // settle); after that, the links' keepalive probes (each answered by a report) carry
            // the estimates of an idle session.
            Body::Feedback(_) => self.rx_since_report |= self.idle_reports < IDLE_REPORTS,
            Body::Data(_) | Body::Coded(_) => {
                self.idle_reports = 0;
                self.rx_since_report = true;
            }
            _ => self.rx_since_report = true,
        }
        if sample.newly_lost > 0 {
            self.loss_news_since.get_or_insert(now);
        }

        match parsed {
            Body::Data(d) => self.on_data(now, h.flags, d),
            Body::Coded(c) => self.on_coded(now, c),
            Body::Feedback(f) => self.on_feedback(now, h.timestamp, &f),
            Body::Probe(p) => self.on_probe(now, &h, p),
            Body::Close(c) => {
                tracing::debug!(reason = c.reason, "peer closed the session");
                self.closed = true;
                self.events.push_back(Event::Closed);
            }
        }
        Ok(())
    }

    fn expected_rx(&self) -> u64 {
        self.highest_rx.map_or(0, |h| h + 1)
    }

    fn on_data(&mut self, now: Instant, flags: u8, d: DataRepr<'_>) {
        self.peer_wants_nacks = flags & FLAG_NACK_WANTED != 0;
        if let Some(ack) = d.ack.and_then(|a| seq::expand_ack(self.peer_cum_ack, self.next_seq, a)) {
            self.on_ack(now, ack);
        }
        let seq = seq::expand(self.expected_rx(), d.seq);
        self.accept_packet(now, seq, Bytes::copy_from_slice(d.payload), false);
        self.release_congestion_holes(now);
    }

    /// A data packet arrived (`recovered` false) or was recovered: store it for decoding, sequence
    /// it, and let the decoder peel any coded packet waiting for it, recursively.
    fn accept_packet(&mut self, now: Instant, seq: u64, packet: Bytes, recovered: bool) {
        let mut work = vec![(seq, packet, recovered)];
        let mut out = Vec::new();
        while let Some((seq, packet, recovered)) = work.pop() {
            if self.reorder.has(seq) {
                if !recovered {
                    self.stats.duplicates += 1;
                }
                continue;
            }
            if recovered {
                self.stats.recovered += 1;
            }
            self.highest_rx = Some(self.highest_rx.map_or(seq, |h| h.max(seq)));
            let hold = self.hold_time();
            self.received.insert(now, seq, packet.clone(), ());
            for (_, d) in &mut self.decoders {
                d.handle_packet(seq, &packet, &mut out);
            }
            self.reorder.insert(now, seq, packet, hold);
            work.extend(out.drain(..).map(|(s, p)| (s, Bytes::from(p), true)));
        }
        self.ack_pending_since.get_or_insert(now);
    }

    fn on_coded(&mut self, now: Instant, c: CodedRepr<'_>) {
        let coverage = c.coverage(self.expected_rx());
        let mut recovered = Vec::new();
        {
            let (received, reorder) = (&self.received, &self.reorder);
            let known = |s: u64| match received.get(s) {
                Some(st) => Known::Have(&st.packet),
                None if reorder.has(s) => Known::Forgotten,
                None => Known::Missing,
            };
            if let Some((_, d)) = self.decoders.iter_mut().find(|(k, _)| *k == c.kind) {
                d.handle_coded(now, &coverage, c.len_xor, c.payload, &known, &mut recovered);
            }
        }
        for (seq, p) in recovered {
            self.accept_packet(now, seq, Bytes::from(p), true);
        }
    }

    /// A 24-bit cumulative ack from a feedback packet.
    fn on_cum_ack(&mut self, now: Instant, wire_ack: u32) {
        let ack = seq::expand(self.peer_cum_ack, wire_ack).min(self.next_seq);
        self.on_ack(now, ack);
    }

    /// The peer has every packet below `ack`.
    fn on_ack(&mut self, now: Instant, ack: u64) {
        if ack > self.peer_cum_ack {
            self.peer_cum_ack = ack;
            self.recovery.on_ack(now, ack);
            self.resends.retain(|&(s, _)| s >= ack);
            // Decoded at the peer while their repair waited ([`Session::repair_wait`]).
            self.waiting_repairs.retain(|&(_, s)| s >= ack);
            let keep_from = self.recovery.oldest_needed().map_or(ack, |o| o.min(ack));
            self.sent.remove_below(keep_from);
        }
    }

    /// A feedback body; `sent_ts` is the peer's wire timestamp on the datagram that carried it.
    fn on_feedback(&mut self, now: Instant, sent_ts: u32, f: &FeedbackRepr) {
        self.on_cum_ack(now, f.cum_ack);
        let hold = Duration::from_millis(u64::from(f.hold_ms));
        crate::time::take_windowed(&mut self.peer_hold, now, hold, super::PEER_HOLD_WINDOW, |h, max| h >= max);
        let silent = self.silent_links(sent_ts, f);
        for r in &f.links {
            let Some(slot) = self.slot_mut(r.link) else { continue };
            slot.tx.on_report(now, r.capacity_kbps, r.loss_rate(), Some(r.owd_us));
            // The echoed datagram reached the peer `echo_delay` before this report left (the
            // peer's clock); less our send time, that is its one-way delay plus the clocks'
            // offset, and less the empty-queue delay the peer measures with the same offset
            // (d + δ), the queue it met.
            let arrived = sent_ts.wrapping_sub(r.echo_delay_us);
            let queued = i64::from(arrived.wrapping_sub(r.echo_timestamp).wrapping_sub(r.owd_us) as i32);
            if r.owd_us == 0 {
                slot.tx.on_echo(r.echo_timestamp);
            } else if slot.tx.check_queue(now, r.echo_timestamp, queued) {
                slot.counters.queue_corrections += 1;
            }
            slot.rx.bootstrap(f64::from(r.reverse_hint_kbps) * 1000.0);
            // The echo is our own timestamp: when we sent the newest packet the peer got here.
            let age = now.wire_timestamp().wrapping_sub(r.echo_timestamp);
            if age < 60_000_000 {
                slot.tx.on_confirmed(now.saturating_sub(Duration::from_micros(u64::from(age))));
                let rtt = Duration::from_micros(u64::from(age.saturating_sub(r.echo_delay_us)));
                slot.tx.on_echo_rtt_sample(now, rtt);
            }
        }
        for id in silent {
            self.declare_down(now, id);
        }
        self.detect_tail_loss(now, f.highest);
        let base = self.peer_cum_ack;
        // A resend cannot be reported missing sooner than a round trip after it left: the peer
        // repeats its reports every round trip, and a repeat that crossed the resend would make
        // it go again (on FMTCP Table II's 200 ms paths, a third of `arq`'s traffic).
        let fresh = self.min_rtt();
        for n in &f.nacks {
            let start = seq::expand(base, n.start);
            for s in start..start + u64::from(n.len) {
                let crossed = self.sent.get(s).and_then(|st| st.meta.resent_at).is_some_and(|at| now < at + fresh);
                if s >= self.next_seq || crossed {
                    continue;
                }
                match self.repair_wait(s) {
                    Some(_) if self.waiting_repairs.iter().any(|&(_, w)| w == s) => {}
                    Some(wait) => {
                        self.recovery.on_hole_waiting(now, s);
                        self.waiting_repairs.push_back((now + wait, s));
                    }
                    None => self.recovery.on_nack(now, s),
                }
            }
        }
    }

    /// The active links a report from the peer (sent at `sent_ts`, its wire clock) shows gone
    /// dark: the peer has heard nothing on one since a send that [`crate::link::OVERDUE_DOWN`]
    /// later ones (more on a lossy link, [`crate::link::TxLink::overdue_to_prove_silence`])
    /// should have followed by the time it reported, and said so in two reports
    /// [`crate::link::SILENCE_CONFIRM`] apart ([`crate::link::TxLink::confirm_silence`]). Taken
    /// down on this evidence, which comes over whichever link still works, such a link (an
    /// access point left behind, an interface gone) moves its traffic within a round trip of the
    /// other link, rather than after its own liveness timeout (docs/drive-by.md, the link
    /// lifecycle). On one report alone, a vehicle's daemon that was stopped for 250 ms, well
    /// inside the liveness timeout (400 ms at least), took both its uplinks down at the server
    /// now and then: the report it sent on resuming predated the backlog in its sockets.
    ///
    /// Only with another active link to take over: a lone link (a drive-by pass over WiFi
    /// alone) loses runs of packets in its fringe and comes back, and taking it down there only
    /// held the passengers' packets back (pass share 0.64 against 0.70).
    fn silent_links(&mut self, sent_ts: u32, f: &FeedbackRepr) -> Vec<LinkId> {
        let active = self.links.iter().filter(|s| s.tx.state == LinkState::Active && s.tx.remote.is_some()).count();
        let mut silent = Vec::new();
        for r in &f.links {
            let Some(slot) = self.slot_mut(r.link).filter(|s| s.tx.state == LinkState::Active) else { continue };
            let overdue = slot.tx.overdue_sends(r.echo_timestamp, r.echo_delay_us);
            if slot.tx.confirm_silence(sent_ts, r.echo_timestamp, overdue) && active > 1 {
                tracing::debug!(link = %r.link, overdue, silent_ms = r.echo_delay_us / 1000, "the peer's reports show the link silent");
                silent.push(r.link);
            }
        }
        silent
    }

    /// Holes are revealed by later arrivals, so the last packets of a burst can be lost unnoticed.
    /// With a NACK-driven scheme, the receiver's highest sequence number stands in: packets above it
    /// sent longer ago than the slowest link's RTT are reported missing (like TCP's tail-loss
    /// probe). "Sent" is when the packet left the link's queue in braid's queue model: counted
    /// from when it was handed to the link, a bulk flow's packets behind a standing queue looked
    /// lost, and on FMTCP Table II's 200 ms paths this check re-sent a third of the traffic.
    ///
    /// Nor a packet on a link whose model the peer's newest echo caught far behind
    /// ([`crate::link::TxLink::model_behind`]): there the model's departures are seconds early.
    /// On the bus route's LTE modem alone (bus-route-lte-only.toml, 788 s) the rate collapsed
    /// under a full 400 kB buffer, 150 kB of packets still queued were taken for a lost tail and
    /// re-sent into it, they overflowed it, and the passenger's packets behind them were lost:
    /// its TCP sat out a second (1.3 Mbit/s that second against plain TCP's 5.7).
    fn detect_tail_loss(&mut self, now: Instant, wire_highest: u32) {
        if !self.recovery.wants_nacks() {
            return;
        }
        let highest = seq::expand(self.peer_cum_ack, wire_highest);
        let wait = self.links.iter().filter_map(|s| s.tx.srtt).max().unwrap_or(Duration::from_millis(200))
            + Duration::from_millis(20);
        let from = (highest + 1).max(self.peer_cum_ack).max(self.sent.base());
        let behind: Vec<LinkId> = self.links.iter().filter(|s| s.tx.model_behind()).map(|s| s.tx.id).collect();
        for s in from..self.next_seq.min(from + 64) {
            match self.sent.get(s) {
                Some(st) if behind.contains(&st.meta.link) => {}
                Some(st) if now >= st.meta.dequeued_at + wait => self.recovery.on_nack(now, s),
                _ => break,
            }
        }
    }

    fn on_probe(&mut self, now: Instant, h: &Header, p: ProbeRepr) {
        let keepalive = self.cfg.keepalive;
        let life_cfg = self.cfg.lifecycle;
        let Some(slot) = self.slot_mut(h.link) else { return };
        if h.flags & FLAG_REPLY == 0 {
            if p.name.is_some() {
                slot.peer_name = p.name;
                // A named request says what the peer asks of this end's sends now: nothing
                // when it carries no request byte.
                let asked = p.request.unwrap_or_default();
                if asked != slot.peer_request {
                    slot.peer_request = asked;
                    slot.apply_metering();
                    tracing::debug!(link = %slot.tx.id, no_coding = asked.no_coding, backup = asked.backup, "peer's metering request");
                }
            }
            if slot.replies.len() < 16 {
                slot.replies.push_back((p.id, h.timestamp, now));
            }
            return;
        }
        let age = now.wire_timestamp().wrapping_sub(p.echo_timestamp);
        let rtt = Duration::from_micros(u64::from(age.saturating_sub(p.echo_delay_us)));
        if rtt > keepalive * 10 {
            return;
        }
        slot.tx.on_rtt_sample(rtt);
        slot.tx.on_min_rtt_sample(now, rtt);
        slot.tx.on_path_rtt_sample(now, p.echo_timestamp, rtt);
        slot.tx.on_confirmed(now.saturating_sub(Duration::from_micros(u64::from(age))));
        slot.life.handle_probe_reply(p.id);
        if slot.tx.state != LinkState::Active {
            slot.tx.probe_streak += 1;
            // A new or returning link answered: probe it again at once rather than at the probe
            // period, so that it is admitted within a few of its round trips.
            slot.probe_due = true;
            // Admission (link/lifecycle.rs): replies in a row and enough of the recent probes
            // answered, so a link at the fringe of its range is not taken into use.
            let timeout = super::probe_timeout(slot);
            // Where the location map has seen this link good, its first reply admits it: the
            // fringe it would otherwise have to prove itself in lies behind (paper 002 section 8).
            if slot.life.admissible(now, timeout, &life_cfg)
                || (slot.expect.good_here && slot.life.streak(now, timeout) >= 1)
            {
                slot.tx.set_state(LinkState::Active, now);
                slot.life.enter(crate::link::Phase::Active, now);
                let id = slot.tx.id;
                tracing::debug!(link = %id, "link up");
                self.events.push_back(Event::LinkUp(id));
            }
        }
    }
}

enum Body<'a> {
    Data(DataRepr<'a>),
    Coded(CodedRepr<'a>),
    Feedback(FeedbackRepr),
    Probe(ProbeRepr),
    Close(CloseRepr),
}

fn parse_body<'a>(h: &Header, body: &'a [u8]) -> Result<Body<'a>, crate::wire::WireError> {
    Ok(match h.ptype {
        PacketType::Data => Body::Data(DataRepr::parse(h.flags, body)?),
        PacketType::Coded => Body::Coded(CodedRepr::parse(body)?),
        PacketType::Feedback => Body::Feedback(FeedbackRepr::parse(body)?),
        PacketType::Probe => Body::Probe(ProbeRepr::parse(body)?),
        PacketType::Close => Body::Close(CloseRepr::parse(body)?),
        PacketType::Handshake => {
            return Err(crate::wire::WireError::Invalid {
                field: "packet type",
                why: "handshake outside the crypto layer",
            });
        }
    })
}
