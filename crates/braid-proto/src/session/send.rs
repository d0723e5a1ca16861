//! The transmit path: what goes out next, and on which link.
//!
//! Priority: probe replies and probes (tiny, keep links alive), feedback when due, re-sends and
//! scheme repairs (ARQ, duplicates, FEC), new data, and last, coded packets into links whose
//! estimated queue is empty (OEC, PluriBus 4.1). Coded packets therefore never delay data by more
//! than the one packet already on the wire.

use super::{SentMeta, Session, Transmit, TransmitKind};
use crate::link::{LinkId, OUTER_OVERHEAD};
use crate::recovery::Repair;
use crate::scheduler::{Eat, LinkView, Scheduler, SchedulerKind};
use crate::seq;
use crate::time::Instant;
use crate::wire::{
    CodeKind, CodedRepr, Coverage, DataRepr, FLAG_NACK_WANTED, FLAG_REPLY, FeedbackRepr, HEADER_LEN, Header,
    LinkReport, MAX_CARRIER_OVERHEAD, NackRange, PacketType, ProbeRepr,
};
use bytes::Bytes;

/// The longest a passenger packet waits in braid for a full link before it takes the next best
/// one: CoDel drops long before this on a flow that responds; it bounds what an unresponsive one
/// can make braid hold.
const MAX_DATA_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// New data that meets more than this queue on its link marks the session as loaded, and links are
/// probed for capacity for a moment after ([`Session::probing_wanted`]).
const PROBE_LOAD_QUEUE: std::time::Duration = std::time::Duration::from_millis(5);

/// A link that was carrying data and then brought nothing for this long is silent: the peer is
/// told at once, and feedback avoids it ([`Session::feedback_link`]). A link carrying a bulk
/// flow delivers a datagram every millisecond or so; one carrying a few flows' acknowledgements,
/// every few milliseconds.
pub(crate) const RX_SILENCE: std::time::Duration = std::time::Duration::from_millis(30);

/// Resends (a link's unacknowledged packets when it went down) go out only while some link's
/// modelled queue is at most this long. A bulk flow's link that goes dark leaves up to a buffer's
/// worth of packets to re-send, on links whose buffers the same flows already fill (the blackout
/// scenario: 150 kB each on WiFi and LTE); sent at once, most overflowed LTE's buffer and the
/// passengers' TCP waited out its own timeout for them. Held here, they go as the queue drains,
/// in order, and arrive no later than they would have behind the full queue.
pub(crate) const RESEND_QUEUE_CAP: std::time::Duration = std::time::Duration::from_millis(50);

/// Capacity-probe copies rotate over this many of the newest data packets.
const PROBE_COPIES: u64 = 32;

/// The least share of the links' summed capacity a slower link must add before braid holds
/// packets for its delay ([`Session::equalized_delay_us`]).
const EQUALIZE_MIN_SHARE: f64 = 0.1;

/// Where a new data packet goes.
enum DataPick {
    /// Out on this link now.
    Link(LinkId),
    /// Waits in braid until then, for a full link that still delivers it first.
    WaitUntil(Instant),
    /// No link is usable.
    NoLink,
}

impl Session {
    /// Smallest buffer [`Session::poll_transmit`] accepts: the largest datagram braid sends.
    pub fn min_transmit_buffer(&self) -> usize {
        self.cfg.max_packet + MAX_CARRIER_OVERHEAD
    }

    /// Writes the next datagram to send into `buf` and says where it goes; `None` when there is
    /// nothing to send now. Call until `None` after every input and timeout. `buf` must hold at
    /// least [`Session::min_transmit_buffer`] bytes.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        if buf.len() < self.min_transmit_buffer() {
            return None;
        }
        self.advance_probes(now);
        if let Some(t) = self.poll_probe(now, buf) {
            return Some(t);
        }
        if self.feedback_due(now)
            && let Some(t) = self.send_feedback(now, buf)
        {
            return Some(t);
        }
        let resend_room = self.resend_room(now);
        self.resend_wait_until = None;
        while resend_room && let Some(&(seq, link)) = self.resends.front() {
            if let Some(t) = self.resend_brim_wait(now, seq, link) {
                self.resend_wait_until = Some(t);
                break;
            }
            self.resends.pop_front();
            if let Some(t) = self.send_data(now, buf, seq, link, true) {
                return Some(t);
            }
        }
        while let Some(r) = self.recovery.poll_repair(now) {
            match r {
                Repair::Resend { seq, link } => {
                    // Behind resends already held, or at its link's brim itself: held too, in
                    // order, and the new data behind them.
                    if !self.resends.is_empty() || self.resend_brim_wait(now, seq, link).is_some() {
                        self.hold_resend(seq, link);
                        continue;
                    }
                    if let Some(t) = self.send_data(now, buf, seq, link, true) {
                        return Some(t);
                    }
                }
                Repair::Duplicate { seq, except } => {
                    let others: Vec<LinkId> = self.usable_slots().map(|s| s.tx.id).filter(|&id| id != except).collect();
                    self.resends.extend(others.into_iter().map(|id| (seq, Some(id))));
                    if let Some((seq, link)) = self.resends.pop_front()
                        && let Some(t) = self.send_data(now, buf, seq, link, true)
                    {
                        return Some(t);
                    }
                }
                Repair::Code { kind, coverage } => {
                    // Sent ahead of reports for rare random losses, of no use on a lone link
                    // that has none, as the opportunistic ones ([`Session::quiet_lone_link`]).
                    if self.quiet_lone_link().is_some() {
                        continue;
                    }
                    if let Some(t) = self.send_coded(now, buf, kind, &coverage, None) {
                        return Some(t);
                    }
                }
                Repair::CodeOn { kind, coverage, link } => {
                    // Only under a bulk load over more than one link. Otherwise the links have
                    // spare capacity, which opportunistic coded packets already fill right after
                    // the data; and a lone link's holes hold back no other link's packets, while
                    // these take capacity from its own data (PluriBus Fig. 10's sweep, one
                    // 1.5 Mbit/s link losing 35 % in bursts: mean FCT 0.79 s without, 3.1 s with).
                    if !self.load_is_bulk(now) || self.usable_slots().nth(1).is_none() {
                        continue;
                    }
                    let max = self.min_transmit_buffer();
                    let usable = self.usable_slots().any(|s| s.tx.id == link);
                    let Some(slot) = self.slot_mut(link).filter(|_| usable) else { continue };
                    if !slot.meter.allows(max) {
                        slot.meter.on_withheld();
                        continue;
                    }
                    if let Some(t) = self.send_coded(now, buf, kind, &coverage, Some(link)) {
                        return Some(t);
                    }
                }
            }
        }
        self.data_wait_until = None;
        // New data waits behind resends held for room: they are older, and the passengers'
        // receivers wait for them before anything newer is of use.
        while self.resends.is_empty()
            && let Some((arrived, packet)) = self.pending_data.pop_front()
        {
            let ack = self.ack_pending_since.map(|_| 0);
            let size = HEADER_LEN + DataRepr { seq: 0, ack, payload: &packet }.len();
            let link = match self.pick_data_link(now, size, arrived) {
                DataPick::Link(_) if let Some(t) = self.burst_wait(now, size) => {
                    self.data_wait_until = Some(t);
                    self.pending_data.push_front(arrived, packet);
                    break;
                }
                DataPick::Link(link) => link,
                DataPick::WaitUntil(t) => {
                    self.data_wait_until = Some(t);
                    self.pending_data.push_front(arrived, packet);
                    break;
                }
                DataPick::NoLink => {
                    // No link can carry it now; keep it for when one can.
                    self.pending_data.push_front(arrived, packet);
                    break;
                }
            };
            if self.aqm_drops(now, link, arrived) {
                self.stats.aqm_dropped += 1;
                continue;
            }
            let seq = self.next_seq;
            self.next_seq += 1;
            self.sent.insert(now, seq, packet, SentMeta { link, dequeued_at: now, resent_at: None });
            if let Some(t) = self.send_data(now, buf, seq, Some(link), false) {
                return Some(t);
            }
        }
        let opportunistic = self.recovery.wants_opportunity();
        // Only links whose coding budget covers the largest coded packet, so that the scheme is
        // not asked for one that then cannot go.
        let max = self.min_transmit_buffer();
        let quiet = self.quiet_lone_link();
        let empty: Vec<(LinkId, f64, bool)> = self
            .usable_slots()
            .filter(|s| {
                // Capacity probes stop on a queue by themselves (`TxLink::check_queue`); other
                // coded packets also wait for the queue the peer measured to go. Neither goes
                // into a link whose sends have gone unconfirmed too long: no echo can stop them.
                let ri = self.cfg.report_interval;
                let room = (s.tx.is_probing() && !s.tx.coding_stalled(now, ri)) || s.tx.coding_open(now, ri);
                // A restore probe's packets go beside a busy modelled queue, at their own pace.
                let free = s.tx.queue_is_empty(now) || s.tx.beside_probe_due(now);
                (opportunistic || s.tx.is_probing()) && room && free && s.meter.allows(max) && quiet != Some(s.tx.id)
            })
            .map(|s| (s.tx.id, s.tx.loss(), s.tx.is_probing()))
            .collect();
        for (id, loss, probing) in empty {
            if opportunistic
                && let Some((kind, cov)) = self.recovery.poll_opportunistic(now, id, loss)
                && let Some(t) = self.send_coded(now, buf, kind, &cov, Some(id))
            {
                return Some(t);
            }
            if probing
                && let Some(cov) = self.probe_coverage()
                && let Some(t) = self.send_coded(now, buf, CodeKind::Xor, &cov, Some(id))
            {
                return Some(t);
            }
        }
        None
    }

    /// The data packets capacity-probe copies are drawn from: the newest [`PROBE_COPIES`] sent and
    /// not yet acknowledged.
    fn probe_range(&self) -> (u64, u64) {
        let end = self.next_seq;
        (end.saturating_sub(PROBE_COPIES).max(self.sent.base()).max(self.peer_cum_ack), end)
    }

    /// Whether there is anything a capacity probe could carry.
    pub(crate) fn probe_material(&self) -> bool {
        let (start, end) = self.probe_range();
        start < end
    }

    /// What a capacity-probe packet carries when the recovery scheme has no coded packet to give:
    /// a copy of one of the last [`PROBE_COPIES`] data packets sent, in turn, so the probe's bytes
    /// still repair a loss if one happened. Probe packets are coded packets like any other, so
    /// whatever bounds coding on a link bounds them too.
    fn probe_coverage(&mut self) -> Option<Coverage> {
        let (start, end) = self.probe_range();
        if start >= end {
            return None;
        }
        if self.probe_cursor < start || self.probe_cursor >= end {
            self.probe_cursor = start;
        }
        let seq = self.probe_cursor;
        self.probe_cursor += 1;
        Some(Coverage::all(seq, 1))
    }

    /// Writes the header for a datagram of `body_len` body bytes on `link`, accounting for it in
    /// the link's queue model and counters. Returns the header length and the destination.
    fn start_datagram(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        link: LinkId,
        ptype: PacketType,
        flags: u8,
        body_len: usize,
    ) -> Option<(usize, Option<std::net::SocketAddr>)> {
        let session = self.cfg.session_id;
        // In a quiet session a report or a probe reply only answers the peer: it asks for no
        // confirmation, or the two ends would confirm each other's answers with probes for ever
        // (the peer's own probes still find out whether the link works).
        let answer = self.idle_reports >= super::IDLE_REPORTS
            && (ptype == PacketType::Feedback || (ptype == PacketType::Probe && flags & FLAG_REPLY != 0));
        let slot = self.slot_mut(link)?;
        let size = HEADER_LEN + body_len;
        // The coding budget's gate: every coded datagram passes here, whichever scheme or probe
        // built it ([`crate::link::CodingMeter`]).
        match ptype {
            PacketType::Coded if !slot.meter.allows(size) => {
                slot.meter.on_withheld();
                return None;
            }
            PacketType::Coded => slot.meter.on_coded(size),
            PacketType::Data => slot.meter.on_data(size),
            _ => {}
        }
        let link_seq = if ptype == PacketType::Coded {
            slot.tx.on_send_spare(now, size + OUTER_OVERHEAD)
        } else if answer {
            slot.tx.on_send_answer(now, size + OUTER_OVERHEAD)
        } else {
            slot.tx.on_send(now, size + OUTER_OVERHEAD)
        };
        slot.counters.datagrams_sent += 1;
        slot.counters.bytes_sent += size as u64;
        let h =
            Header { ptype, flags, session, link, link_seq: seq::truncate(link_seq), timestamp: now.wire_timestamp() };
        let remote = slot.tx.remote;
        let n = h.emit(buf).ok()?;
        self.stats.bytes_sent += size as u64;
        Some((n, remote))
    }

    /// What the scheduler sees of each usable link. Operator weights act on the arrival estimate:
    /// a link of weight `w`, where the highest weight in use is `w_max`, has its queue and
    /// transmission time counted `w_max / w` times, as if it were that much slower. So the
    /// delay-based schedulers (`min-delay`, `eat`) fill the higher-weight links first and give a
    /// lower-weight one data only once the others' queues make it the earlier one after all: a
    /// preference that still uses every link under load, where `wrr` fixes the shares outright.
    /// Equal weights (the default, 1 everywhere) leave the estimate as it is.
    fn link_views(&self, now: Instant, size: usize) -> Vec<LinkView> {
        let reference = self.reference_owd();
        let w_max = self.usable_slots().map(|s| s.tx.weight).max().unwrap_or(1);
        self.usable_slots()
            .map(|s| LinkView {
                id: s.tx.id,
                arrival_us: weighted_arrival_us(
                    s.tx.busy_us(now, size + OUTER_OVERHEAD),
                    s.tx.relative_owd_us(reference),
                    s.tx.weight,
                    w_max,
                ),
                capacity_bps: s.tx.capacity_bps(),
                loss: s.tx.loss(),
                weight: s.tx.weight,
                srtt_us: s.tx.srtt.map(|d| d.as_micros().min(u128::from(u32::MAX)) as u32),
            })
            .collect()
    }

    /// The link the scheduler picks for a new data packet of `size` bytes that came in at
    /// `arrived`. Under the delay-based schedulers (`min-delay`, `eat`) with the AQM on, a link
    /// whose estimated queue is above [`crate::aqm::AqmConfig::link_queue_limit`] takes no new
    /// data: PluriBus 4.3's earliest-arrival rule would keep filling the fastest link until its
    /// queue matched the slower link's extra delay, and a modem's buffer is often smaller than that
    /// (FMTCP Table II: 400 ms of extra delay against 200 ms of buffer). If such a full link would
    /// still deliver the packet first, the packet waits in braid until the link's queue is back at
    /// the limit, in the queue CoDel judges, rather than go 400 ms late on the slow link.
    ///
    /// "First" counts the backlog waiting behind the packet: the full links must carry all of it
    /// before anything newer, so once draining it takes as long as the slower link's extra delay,
    /// the slower link takes the packet at the head, and the stream is still delivered no later
    /// than the backlog's newest packet would be (the ones between wait for the head at the peer
    /// rather than in braid). The head itself has already waited out most of that backlog; sending
    /// the newest packet on the slower link instead would spare it that wait, but needs sequence
    /// numbers given on arrival, which OEC's and RLNC's windows of consecutive numbers do not take.
    /// Judged by the head packet alone, the slower link never looked faster (the head is always
    /// next on the fast link), the backlog grew until CoDel dropped, and FMTCP Table II case 8's
    /// 500 ms path carried no data (`oec-aqm`, 7.4 Mbit/s of 19.9); with CoDel judging from
    /// [`crate::aqm::AqmConfig::equalize_limit`] but the head alone, 2 % and 9.2; with the backlog
    /// counted too, 33 % and 14.7 (1 run each).
    ///
    /// A link of weight 0 takes no data under any scheduler while another link can (a backup);
    /// it still carries repairs, feedback and probes.
    fn pick_data_link(&mut self, now: Instant, size: usize, arrived: Instant) -> DataPick {
        let mut views = self.link_views(now, size);
        if views.iter().any(|v| v.weight > 0) {
            views.retain(|v| v.weight > 0);
        }
        if views.is_empty() {
            return DataPick::NoLink;
        }
        let aqm = self.cfg.aqm;
        if !(self.aqm_active(now) && self.scheduler_shares_load()) {
            return DataPick::Link(self.scheduler.pick(now, size, &views));
        }
        let over = |v: &LinkView| self.slot(v.id).map(|s| s.tx.queue_delay(now).saturating_sub(aqm.link_queue_limit));
        let (open, full): (Vec<LinkView>, Vec<LinkView>) =
            views.iter().copied().partition(|v| over(v).is_none_or(|o| o.is_zero()));
        let first_full = full.iter().min_by_key(|v| (v.arrival_us, v.id));
        let waited_long = now.saturating_duration_since(arrived) >= MAX_DATA_WAIT;
        let first_open = open.iter().map(|v| v.arrival_us).min();
        // The full links would carry the whole backlog behind this packet before any of it could
        // go elsewhere, so the passenger's in-order stream is only as early as that backlog's tail.
        let full_bps: f64 = full.iter().map(|v| v.capacity_bps).sum();
        let drain_us =
            if full_bps > 0.0 { (self.pending_data.bytes() as f64 * 8.0 / full_bps * 1e6) as i64 } else { 0 };
        match first_full {
            Some(f) if !waited_long && first_open.is_none_or(|o| f.arrival_us + drain_us < o) => {
                DataPick::WaitUntil(now + over(f).unwrap_or_default().max(std::time::Duration::from_micros(1)))
            }
            _ if !open.is_empty() => DataPick::Link(self.scheduler.pick(now, size, &open)),
            _ => DataPick::Link(self.pick_within_buffers(now, size, &views)),
        }
    }

    /// The scheduler's pick for a packet that must go even though every link is over the AQM's
    /// limit (it waited [`MAX_DATA_WAIT`]), among the links whose buffer it fits
    /// ([`crate::link::TxLink::buffer_room_at`]); where it fits none, among all.
    ///
    /// By earliest arrival alone it went to the fastest link whatever that link's buffer holds:
    /// a full 100 ms path still looks earlier than an idle 500 ms one until its queue is 400 ms
    /// deep, twice its 200 ms buffer (FMTCP Table II case 8). When held resends had kept the
    /// passengers' data waiting, the whole backlog went there at once: its modelled queue reached
    /// 630 ms, the buffer overflowed, and the holes' resends held the next data back in turn; the
    /// passengers' TCP stalled for 1-2 s twice a minute. Where it fits nowhere, sending it to the
    /// link least beyond its buffer instead moved whole backlogs onto the 500 ms path, and one
    /// run stalled for 10.9 s: there the earliest arrival is kept.
    fn pick_within_buffers(&mut self, now: Instant, size: usize, views: &[LinkView]) -> LinkId {
        let within: Vec<LinkView> = views
            .iter()
            .filter(|v| {
                self.slot(v.id)
                    .is_some_and(|s| s.tx.buffer_room_at(now, size + OUTER_OVERHEAD, RESEND_QUEUE_CAP).is_none())
            })
            .copied()
            .collect();
        self.scheduler.pick(now, size, if within.is_empty() { views } else { &within })
    }

    /// Whether the scheduler moves traffic to whichever link is least loaded (so congestion means
    /// every link is queued), rather than following a fixed rule (so congestion is the picked
    /// link's queue).
    fn scheduler_shares_load(&self) -> bool {
        matches!(self.scheduler.kind(), SchedulerKind::MinDelay | SchedulerKind::Eat)
    }

    /// Whether the AQM drops a new passenger packet bound for `link` that came in at `arrived`
    /// ([`crate::aqm`]). The sojourn judged is the time it waited in braid plus the delay it meets
    /// beyond what an idle network would give it: under a
    /// fixed rule (`wrr`, `round-robin`, `single`) the picked link's estimated queue; under the
    /// load-sharing schedulers, the picked link's queue plus its extra one-way delay over the
    /// fastest link's (PluriBus 5.3's d + δ), since there a queue on one link is only congestion
    /// once every link that could take the packet delivers it late. Counting the queue alone, a
    /// packet moved from a full 100 ms path to an idle 500 ms one (FMTCP Table II case 8) looked
    /// unqueued, CoDel never dropped, and the fast path's buffer overflowed instead.
    ///
    /// Under the load-sharing schedulers that delay is counted from
    /// [`Session::equalized_delay_us`], not from the fastest link: the wait that makes a full fast
    /// link as late as a slower one (`pick_data_link`) is what using the slower link's capacity
    /// costs, not a standing queue, and CoDel judging it dropped before the slower link ever
    /// took data.
    fn aqm_drops(&mut self, now: Instant, link: LinkId, arrived: Instant) -> bool {
        let aqm = self.cfg.aqm;
        if !self.aqm_active(now) {
            return false;
        }
        let Some(slot) = self.slot(link) else { return false };
        let waited = now.saturating_duration_since(arrived);
        let sojourn = if self.scheduler_shares_load() {
            let reference = self.reference_owd();
            let late_us = slot.tx.arrival_us(now, 0, reference).max(0) + waited.as_micros() as i64;
            let floor_us = self.equalized_delay_us(reference);
            std::time::Duration::from_micros((late_us - floor_us).max(0) as u64)
        } else {
            // Plus the time it waited in braid for a full link (`pick_data_link`).
            slot.tx.queue_delay(now) + waited
        };
        let (target, interval) = aqm.effective(self.aqm_round_trip());
        let drop = self.codel.should_drop(now, sojourn, target, interval);
        // Every judgement, to see when CoDel engages, on what sojourn and what it drops:
        // `--log braid_proto::aqm=trace`.
        tracing::trace!(
            target: "braid_proto::aqm",
            %now,
            sojourn_us = sojourn.as_micros() as u64,
            target_us = target.as_micros() as u64,
            interval_us = interval.as_micros() as u64,
            drop,
            "aqm"
        );
        drop
    }

    /// The passengers' round trip that CoDel's target and interval follow
    /// ([`crate::aqm::AqmConfig::effective`]): the uplinks' smallest path round trip, and under
    /// the load-sharing schedulers that plus the one-way delay braid fills the fastest link up
    /// to before it opens a slower one ([`Session::equalized_delay_us`]): once the load spreads,
    /// every passenger packet arrives that late, so the passengers' window and the queue that
    /// keeps the uplinks busy through a CUBIC back-off grow with it. Following the fastest path
    /// alone, CoDel's target on two modems of 60 and 120 ms round trip (20 and 8 Mbit/s,
    /// `scenarios/testbed-two-modems.toml`) was 30 ms, each drop left the uplinks short for
    /// seconds, and the default carried 18.7 Mbit/s (8 runs); at 45 ms, 20.5.
    ///
    /// Or, when larger, the peer's mean hold of a delivered packet ([`FeedbackRepr::hold_ms`]),
    /// the largest it reported over the last [`super::PEER_HOLD_WINDOW`]:
    /// the packets behind a hole wait in its sequencing buffer until the hole's repair comes, and
    /// the passengers' round trip and window grow by that wait just as by a slower link's delay.
    /// Without it, the target on FMTCP Table II's 100 ms paths was 100 ms while the packets held
    /// there waited 130-210 ms on average, and each CUBIC back-off left both paths short
    /// (seeds 1-3, the default: cases 1, 2 and 5 carried 15.84, 15.99 and 15.60 Mbit/s without
    /// it and 16.21, 16.79 and 16.63 with it; the two modems 22.88 and 23.15). The larger of the
    /// two and not their sum: where the load spreads to a far slower link (cases 6-8), the
    /// packets that waited for it are most of what is held, and the sum cost case 6 3 % (seed 1).
    /// The largest over a while, not the latest: each report's mean follows about the last second,
    /// and on a 1 % path whose holes were mostly decoded it fell to 10-40 ms between the slower
    /// repairs; the target fell from 190 to 110 ms, and the bursts those repairs released (150-300
    /// ms of sojourn) were dropped every few seconds, before CUBIC had regrown (FMTCP Table II
    /// case 5, seed 3: back-offs at 22, 24, 39 and 43 s, 15.0 Mbit/s; with the largest of 20 s
    /// the target stayed at 180-220 ms, 16.1 Mbit/s; seeds 1-10, 16.25 against 16.96).
    ///
    /// At most twice the fast path's round trip, and of the paths, not the smoothed ones: an
    /// interval of three inflated round trips let a 200 ms path's queue pass its 200 ms buffer
    /// before the first drop (FMTCP Table II case 8), and following its 500 ms path's extra
    /// 400 ms CoDel did not drop within 2.7 s at 125 % of both paths
    /// (`aqm_opens_a_slower_link_once_the_backlog_is_as_late_as_it_is`).
    pub(crate) fn aqm_round_trip(&self) -> Option<std::time::Duration> {
        let min_rtt = self.usable_slots().filter_map(|s| s.tx.min_rtt()).min()?;
        if !self.scheduler_shares_load() {
            return Some(min_rtt);
        }
        let reference = self.reference_owd();
        let fastest = self.usable_slots().map(|s| s.tx.relative_owd_us(reference)).min().unwrap_or(0).max(0);
        let extra = std::time::Duration::from_micros((self.equalized_delay_us(reference) - fastest).max(0) as u64);
        let hold = self.peer_hold.map_or(std::time::Duration::ZERO, |(h, _)| h);
        Some(min_rtt + extra.max(hold).min(min_rtt))
    }

    /// The one-way delay (µs, relative to `reference`) up to which braid fills a full link before
    /// it opens a slower one, and so the floor of the delay CoDel judges: the largest empty-queue
    /// delay among links no more than [`crate::aqm::AqmConfig::equalize_limit`] slower than the
    /// fastest that add at least [`EQUALIZE_MIN_SHARE`] of the links' capacity. A link that
    /// adds little is not worth holding everyone's packets for its delay.
    pub(crate) fn equalized_delay_us(&self, reference: u32) -> i64 {
        let limit = self.cfg.aqm.equalize_limit.min(MAX_DATA_WAIT).as_micros() as i64;
        // Three passes over the two or three links rather than a Vec per dequeued packet.
        let links = || self.usable_slots().map(|s| (s.tx.relative_owd_us(reference), s.tx.capacity_bps()));
        let fastest = links().map(|(d, _)| d).min().unwrap_or(0);
        let total: f64 = links().map(|(_, c)| c).sum();
        links()
            .filter(|&(d, c)| d - fastest <= limit && c >= total * EQUALIZE_MIN_SHARE)
            .map(|(d, _)| d)
            .max()
            .unwrap_or(0)
            .max(0)
    }

    /// The link for resends, repairs and feedback, whatever the data scheduler: the earliest
    /// *expected* arrival, losses included, so a repair goes where it is expected to arrive first
    /// (FMTCP V-B, Algorithm 1, for its repair symbols). A repair is what the receiver is already
    /// waiting for; by earliest arrival alone, with equal delays it went to the emptier queue,
    /// often the lossy link, and a fifth of the repairs for FMTCP Table II case 3's 20 %-loss path
    /// were lost again, each costing another round trip.
    fn fastest_link(&mut self, now: Instant, size: usize) -> Option<LinkId> {
        let views = self.link_views(now, size);
        if views.is_empty() {
            return None;
        }
        Some(Eat.pick(now, size, &views))
    }

    /// Whether a resend may go now: some usable link's modelled queue is within
    /// [`RESEND_QUEUE_CAP`] ([`Session::resend_room_at`] is when it will be), or the peer measured
    /// no such queue on it. The model alone is not enough: a link that carried only a trickle
    /// before the other went down has a capacity estimate far below what it can carry, its
    /// modelled queue grows by seconds with each resend, and held to it the resends (and the
    /// new data behind them) crawled: a real daemon's transfer paused for 1.5 s.
    ///
    /// With no usable link at all they are not held: they go the way they always went (dropped
    /// when no link takes them), rather than pile up and hold new data back once a lone link
    /// returns (a drive-by pass over WiFi alone).
    pub(crate) fn resend_room(&self, now: Instant) -> bool {
        let mut usable = self.usable_slots().peekable();
        usable.peek().is_none()
            || usable.any(|s| s.tx.queue_delay(now) <= RESEND_QUEUE_CAP || s.tx.echoed_queue() <= RESEND_QUEUE_CAP / 2)
    }

    /// Until when resend `seq` must wait for room in the buffer of the link it would take (`link`,
    /// or the earliest arrival's): `None` when it fits now ([`crate::link::TxLink::brim_room_at`],
    /// at least [`RESEND_QUEUE_CAP`] deep).
    ///
    /// A resend is what the peer's sequencing buffer waits on, with the passengers' packets behind
    /// it held. Sent into a full buffer it is lost again, and the hole waits another report's
    /// round trip. Traced in the blackout scenario (seed 6): when WiFi went dark the passengers'
    /// TCP, its window freed by the repairs, sent 155 packets at once into LTE's 150 kB buffer
    /// and 53 overflowed; their resends went 200 ms later into the same buffer, refilled by the
    /// next burst, and 51 were lost again, so one flow's receiver got nothing for 443 ms. Held
    /// here until the modelled queue drains to half the deepest the peer has seen
    /// ([`crate::link::BRIM_SHARE`]), they arrive no later than behind the full queue (a link
    /// delivers in order), and the new data waits behind them, as behind [`RESEND_QUEUE_CAP`]'s:
    /// the peer could deliver none of it before them anyway.
    pub(crate) fn resend_brim_wait(&mut self, now: Instant, seq: u64, link: Option<LinkId>) -> Option<Instant> {
        let len = self.sent.get(seq)?.packet.len();
        let size = HEADER_LEN + DataRepr { seq: 0, ack: Some(0), payload: &[] }.len() + len + OUTER_OVERHEAD;
        let link = match link {
            Some(l) => l,
            None => self.fastest_link(now, size)?,
        };
        let slot = self.usable_slots().find(|s| s.tx.id == link)?;
        slot.tx.brim_room_at(now, size, RESEND_QUEUE_CAP)
    }

    /// Until when new data waits in braid because every usable link's modelled queue is at the
    /// deepest queue the peer has measured on it (its buffer, as far as braid knows), while what
    /// waits in braid is no more than one such buffer's worth; `None` to send now.
    ///
    /// A passenger's burst that a full buffer would drop is a burst braid's own sequencing made:
    /// the peer releases a repaired hole's backlog at once, the passengers' acknowledgements
    /// come back together, and their TCP answers with a window's worth at once. In the blackout
    /// scenario (seed 34) 150 packets left the server within 0.2 ms into LTE's 150 kB buffer, 57
    /// overflowed, all the tail of one flow's burst, and that flow waited out its TCP's timeout
    /// (537 ms with no data). Held here, the burst goes as the buffer drains. Beyond one
    /// buffer's worth the load is more than a burst, and the overflow is the passengers'
    /// congestion signal, as before.
    fn burst_wait(&self, now: Instant, size: usize) -> Option<Instant> {
        let mut wait: Option<Instant> = None;
        let mut capacity = 0.0;
        let mut buffer = std::time::Duration::ZERO;
        for s in self.usable_slots() {
            let t = s.tx.buffer_room_at(now, size + OUTER_OVERHEAD, RESEND_QUEUE_CAP)?;
            wait = Some(wait.map_or(t, |w| w.min(t)));
            capacity += s.tx.capacity_bps();
            buffer = buffer.max(s.tx.peak_queue());
        }
        let backlog = std::time::Duration::from_secs_f64(self.pending_data.bytes() as f64 * 8.0 / capacity.max(1.0));
        wait.filter(|_| backlog <= buffer)
    }

    /// Queues resend `seq` among the held ones, in sequence order (the peer delivers in that
    /// order, so the oldest hole is the one its passengers wait on), once.
    fn hold_resend(&mut self, seq: u64, link: Option<LinkId>) {
        if self.resends.iter().any(|&(s, l)| s == seq && l == link) {
            return;
        }
        let at = self.resends.partition_point(|&(s, _)| s <= seq);
        self.resends.insert(at, (seq, link));
    }

    /// When the first usable link's modelled queue is back within [`RESEND_QUEUE_CAP`] (in the
    /// past when it is already).
    pub(crate) fn resend_room_at(&self) -> Option<Instant> {
        self.usable_slots().map(|s| s.tx.queue_drained_at().saturating_sub(RESEND_QUEUE_CAP)).min()
    }

    /// The link feedback goes on: the fastest, but not one that has gone silent here (it was
    /// carrying data when its last datagram came, [`RX_SILENCE`] or more ago). When the fastest link goes dark both ways, feedback sent on it is lost, and the
    /// peer, which sends on it too, learns nothing until its own liveness timeout; over another
    /// link, the report that this end has heard nothing on it ([`TxLink::overdue_sends`]) takes
    /// it down at the peer within a round trip of that link.
    ///
    /// [`TxLink::overdue_sends`]: crate::link::TxLink::overdue_sends
    fn feedback_link(&mut self, now: Instant, size: usize) -> Option<LinkId> {
        let silent = |s: &super::LinkSlot| s.silent_since().is_some_and(|at| now >= at + RX_SILENCE);
        let silent: Vec<LinkId> = self.usable_slots().filter(|s| silent(s)).map(|s| s.tx.id).collect();
        let views: Vec<LinkView> = self.link_views(now, size).into_iter().filter(|v| !silent.contains(&v.id)).collect();
        if views.is_empty() {
            return self.fastest_link(now, size);
        }
        Some(Eat.pick(now, size, &views))
    }

    /// [`Session::fastest_link`] among the links whose coding budget allows a coded packet of
    /// `size` bytes; `None` (and the packet counted as withheld) when none does.
    fn fastest_coding_link(&mut self, now: Instant, size: usize) -> Option<LinkId> {
        let views: Vec<LinkView> = self
            .link_views(now, size)
            .into_iter()
            .filter(|v| self.slot(v.id).is_some_and(|s| s.meter.allows(size)))
            .collect();
        if views.is_empty() {
            if let Some(id) = self.fastest_link(now, size)
                && let Some(s) = self.slot_mut(id)
            {
                s.meter.on_withheld();
            }
            return None;
        }
        Some(Eat.pick(now, size, &views))
    }

    /// Sends data packet `seq` from the sent store on `link`, or on the fastest link (resends).
    fn send_data(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        seq: u64,
        link: Option<LinkId>,
        resend: bool,
    ) -> Option<Transmit> {
        let packet: Bytes = self.sent.get(seq)?.packet.clone();
        let ack = self.ack_pending_since.map(|_| seq::truncate_ack(self.reorder.next_expected()));
        let body = DataRepr { seq: seq::truncate(seq), ack, payload: &packet };
        let size = HEADER_LEN + body.len();
        let link = match link {
            Some(l) if self.slot(l).is_some_and(|s| s.tx.remote.is_some()) => l,
            Some(_) => return None,
            None => self.fastest_link(now, size)?,
        };
        let queued = self
            .slot_mut(link)
            .map_or(std::time::Duration::ZERO, |s| s.tx.queue_delay(now) + s.tx.tx_time(size + OUTER_OVERHEAD));
        let predicted =
            self.slot_mut(link).and_then(|s| s.tx.owd_us()).map(|o| o.wrapping_add(queued.as_micros() as u32));
        let mut flags = body.flags();
        if self.recovery.wants_nacks() {
            flags |= FLAG_NACK_WANTED;
        }
        let (n, destination) = self.start_datagram(now, buf, link, PacketType::Data, flags, body.len())?;
        let m = body.emit(&mut buf[n..]).ok()?;
        if ack.is_some() {
            self.ack_pending_since = None;
        }
        let loss = self.slot_mut(link).map_or(0.0, |s| {
            s.counters.data_sent += 1;
            s.tx.loss()
        });
        let kind = if resend {
            self.stats.data_resent += 1;
            if let Some(st) = self.sent.get_mut(seq) {
                st.meta.resent_at = Some(now);
            }
            TransmitKind::Resend { seq }
        } else {
            self.stats.data_sent += 1;
            self.stats.payload_bytes_sent += packet.len() as u64;
            // Data that meets a queue on the link that delivers it first: the load needs every
            // link's capacity, so the links are probed for more (a packet that meets one coded
            // packet ahead of it, or a short burst, does not count).
            let tx = self.slot_mut(link).map_or(std::time::Duration::ZERO, |s| s.tx.tx_time(size + OUTER_OVERHEAD));
            self.note_data_rate(now, (packet.len() * 8) as f64);
            let near = self.load_near_estimates(now);
            if near {
                self.last_near = Some(now);
            }
            if queued > PROBE_LOAD_QUEUE.max(tx * 4) {
                if near {
                    self.last_loaded = Some(now);
                }
                self.last_queue_met = Some(now);
                self.loaded_since.get_or_insert(now);
            }
            if let Some(st) = self.sent.get_mut(seq) {
                st.meta = SentMeta { link, dequeued_at: now + queued, resent_at: None };
            }
            self.recovery.on_data_sent(now, seq, link, loss);
            TransmitKind::Data { seq, predicted_owd_us: predicted }
        };
        Some(Transmit { link, destination, len: n + m, kind })
    }

    /// Builds and sends a coded packet of `kind` over `coverage` on `link` (or the fastest link).
    fn send_coded(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        kind: CodeKind,
        coverage: &Coverage,
        link: Option<LinkId>,
    ) -> Option<Transmit> {
        let seqs = coverage.members();
        let mut members: Vec<(u64, &[u8])> = Vec::with_capacity(seqs.len());
        for &m in &seqs {
            match self.sent.get(m) {
                Some(st) => members.push((m, &st.packet[..])),
                None => {
                    // A member left the store (age or count bound): this repair cannot be built,
                    // and the scheme must not keep asking for it.
                    self.stats.coded_unbuildable += 1;
                    let floor = self.sent.base().max(self.peer_cum_ack);
                    self.recovery.on_ack(now, floor);
                    return None;
                }
            }
        }
        let encoder = &mut self.encoders.iter_mut().find(|(k, _)| *k == kind)?.1;
        let (payload, len_field) = encoder.encode(coverage, &members)?;
        if payload.is_empty() {
            return None;
        }
        let body = CodedRepr {
            kind,
            base: seq::truncate(coverage.base),
            span: coverage.span,
            degree: coverage.degree,
            seed: coverage.seed,
            len_xor: len_field,
            payload: &payload,
        };
        let size = HEADER_LEN + body.len();
        let link = match link {
            Some(l) => l,
            None => self.fastest_coding_link(now, size)?,
        };
        let (n, destination) = self.start_datagram(now, buf, link, PacketType::Coded, 0, body.len())?;
        let m = body.emit(&mut buf[n..]).ok()?;
        self.stats.coded_sent += 1;
        if let Some(s) = self.slot_mut(link) {
            s.counters.coded_sent += 1;
        }
        Some(Transmit { link, destination, len: n + m, kind: TransmitKind::Coded })
    }

    /// When the next report is due: the configured interval after the last, or `ack_delay` after
    /// it while the capacity of a link this end receives on is still being found
    /// ([`crate::link::RxEstimator::finding`]). A passenger's slow start fills every uplink
    /// within tens of milliseconds, and until the sender hears each uplink's queue and rate its
    /// model splits by a guess: on bench-bond's 20 + 5 Mbit/s the 5 Mbit/s uplink got half of
    /// the first burst, met 35 ms of queue, and the passenger's HyStart left slow start there.
    pub(crate) fn next_report_at(&self) -> Instant {
        let soon = self.last_report + self.cfg.ack_delay.min(self.cfg.report_interval);
        if self.links.iter().any(|s| s.rx.finding(soon)) { soon } else { self.last_report + self.cfg.report_interval }
    }

    fn feedback_due(&self, now: Instant) -> bool {
        !self.pending_nacks.is_empty()
            || self.ack_pending_since.is_some_and(|t| now >= t + self.cfg.ack_delay)
            || self.loss_news_since.is_some_and(|t| now >= t + self.cfg.ack_delay)
            || (self.rx_since_report && now >= self.next_report_at())
    }

    fn send_feedback(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let links: Vec<LinkReport> = self
            .links
            .iter()
            .filter_map(|s| {
                let (ts, at) = s.rx.last()?;
                Some(LinkReport {
                    link: s.tx.id,
                    loss: LinkReport::encode_loss(s.rx.loss()),
                    capacity_kbps: s.rx.capacity_kbps(),
                    reverse_hint_kbps: crate::link::bps_to_kbps(s.tx.bootstrap_bps()),
                    owd_us: s.rx.owd_us().unwrap_or(0),
                    echo_timestamp: ts,
                    echo_delay_us: (now - at).as_micros().min(u128::from(u32::MAX)) as u32,
                })
            })
            .take(FeedbackRepr::MAX_LINKS)
            .collect();
        let mut nacks = Vec::new();
        self.pending_nacks.sort_unstable();
        for &s in &self.pending_nacks {
            if let Some(NackRange { start, len }) = nacks.last_mut()
                && seq::expand(s, *start) + u64::from(*len) == s
                && *len < u8::MAX
            {
                *len += 1;
                continue;
            }
            if nacks.len() == FeedbackRepr::MAX_NACKS {
                break;
            }
            nacks.push(NackRange { start: seq::truncate(s), len: 1 });
        }
        let hold = self.recent_hold.update(&self.reorder.stats());
        let body = FeedbackRepr {
            cum_ack: seq::truncate(self.reorder.next_expected()),
            highest: seq::truncate(self.highest_rx.unwrap_or(0)),
            hold_ms: ((hold.as_micros() + 500) / 1000).min(u128::from(u16::MAX)) as u16,
            links,
            nacks,
        };
        let size = HEADER_LEN + body.len();
        let link = self.feedback_link(now, size)?;
        let (n, destination) = self.start_datagram(now, buf, link, PacketType::Feedback, 0, body.len())?;
        let m = body.emit(&mut buf[n..]).ok()?;
        self.stats.feedback_sent += 1;
        self.stats.nacks_sent += self.pending_nacks.len() as u64;
        self.pending_nacks.clear();
        self.ack_pending_since = None;
        self.loss_news_since = None;
        self.rx_since_report = false;
        self.last_report = now;
        self.idle_reports = self.idle_reports.saturating_add(1);
        Some(Transmit { link, destination, len: n + m, kind: TransmitKind::Feedback })
    }

    fn poll_probe(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let life_cfg = self.cfg.lifecycle;
        for idx in 0..self.links.len() {
            let slot = &mut self.links[idx];
            if slot.replies.is_empty() && !slot.probe_due {
                continue;
            }
            let id = slot.tx.id;
            if slot.tx.remote.is_none() {
                slot.replies.clear();
                slot.probe_due = false;
                continue;
            }
            let (flags, body) = if let Some((pid, ts, at)) = slot.replies.pop_front() {
                let echo_delay_us = (now - at).as_micros() as u32;
                (FLAG_REPLY, ProbeRepr { id: pid, echo_timestamp: ts, echo_delay_us, name: None, request: None })
            } else {
                slot.probe_due = false;
                slot.tx.last_probe = Some(now);
                slot.tx.probe_id = slot.tx.probe_id.wrapping_add(1);
                slot.life.handle_probe_sent(slot.tx.probe_id, now, &life_cfg);
                // The link's name while it is being admitted, and on every 32nd probe after (a
                // few bytes, so that a peer that missed it, or restarted, learns it again).
                // Also while a changed request is announced (`Session::set_link_request`); a
                // named probe always says what this end asks, so none means nothing.
                let named =
                    slot.tx.state != crate::link::LinkState::Active || slot.tx.probe_id % 32 == 1 || slot.announce > 0;
                slot.announce = slot.announce.saturating_sub(1);
                let name = slot.name.filter(|_| named);
                let request = (slot.request != crate::wire::LinkRequest::default()).then_some(slot.request);
                (0, ProbeRepr { id: slot.tx.probe_id, echo_timestamp: 0, echo_delay_us: 0, name, request })
            };
            let (n, destination) = self.start_datagram(now, buf, id, PacketType::Probe, flags, body.len())?;
            let m = body.emit(&mut buf[n..]).ok()?;
            self.stats.probes_sent += 1;
            if flags & FLAG_REPLY == 0
                && let Some(slot) = self.slot_mut(id)
                && slot.tx.state == crate::link::LinkState::Active
            {
                slot.tx.on_liveness_probe();
            }
            return Some(Transmit { link: id, destination, len: n + m, kind: TransmitKind::Probe });
        }
        None
    }
}

/// A link's arrival estimate under operator weights ([`Session::link_views`]): its `busy_us`
/// (queue plus transmission time) scaled by `w_max / weight`, plus its relative one-way delay. A
/// link of weight 0 (kept off data while another can carry it) is scaled as weight 1.
fn weighted_arrival_us(busy_us: i64, relative_owd_us: i64, weight: u32, w_max: u32) -> i64 {
    let w = i64::from(weight.max(1));
    let w_max = i64::from(w_max.max(1));
    busy_us.saturating_mul(w_max.max(w)) / w + relative_owd_us
}
