//! braid: two sockets joined by a simulated pipe, for the tests of braid's changes that only
//! show in a whole connection (SACK recovery, HyStart, RACK, F-RTO, Linux's RTO). The same
//! experiments run in braid-sim over its own hosts; these run on the socket alone, so that the
//! vendored crate tests its own patch.
//!
//! A sender connects to a receiver and writes a transfer of `bytes`; the receiver reads
//! everything. Time advances in 1 ms steps; the sender-to-receiver direction may have a rate
//! limit with a drop-tail queue (a bottleneck), and `fate` decides per packet whether it is
//! delivered, dropped or held back longer.

use std::collections::BTreeMap;
use std::vec;
use std::vec::Vec;

use super::super::{CongestionControl, Socket, SocketBuffer, State};
use crate::iface::Context;
use crate::phy::Medium;
use crate::time::{Duration, Instant};
use crate::wire::{IpAddress, IpCidr, IpEndpoint, IpRepr, TcpRepr};

/// The side a packet leaves from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Side {
    Sender,
    Receiver,
}

/// What happens to one packet.
pub(super) enum Fate {
    Deliver,
    Drop,
    /// Delivered this much later than the pipe's delay.
    Hold(Duration),
}

/// What `fate` is told of a packet: its side, its index among that side's packets with a
/// payload (data) or without (ACKs), counted separately, and the segment itself.
pub(super) struct Seen<'a> {
    pub now: Instant,
    pub side: Side,
    pub index: usize,
    pub repr: &'a TcpRepr<'a>,
}

/// The TCP options both ends use, as braid-sim's host configuration sets them.
#[derive(Clone, Copy, Default)]
pub(super) struct Options {
    pub sack: bool,
    pub hystart: bool,
    pub linux_rto: bool,
    pub byte_counting: bool,
    pub rack: bool,
}

/// A segment in flight, its payload owned.
struct InFlight {
    to: Side,
    ip: IpRepr,
    repr: TcpRepr<'static>,
    payload: Vec<u8>,
}

pub(super) struct Pipe {
    pub sender: Socket<'static>,
    pub receiver: Socket<'static>,
    sender_cx: Context,
    receiver_cx: Context,
    pub now: Instant,
    delay: Duration,
    /// The bottleneck on the sender's side: bytes per second, and how long its queue may be.
    rate: Option<(u64, Duration)>,
    busy_until: Instant,
    in_flight: BTreeMap<(Instant, u64), InFlight>,
    seq: u64,
    pub fate: Option<std::boxed::Box<dyn FnMut(&Seen) -> Fate>>,
    /// Payload bytes the sender put on the wire (resends included), and packets the queue dropped.
    pub sent_payload: usize,
    pub queue_drops: usize,
    counts: [[usize; 2]; 2],
    to_send: usize,
    pub received: usize,
    scratch: Vec<u8>,
}

const SENDER: (IpAddress, u16) = (IpAddress::v4(10, 0, 0, 1), 40000);
const RECEIVER: (IpAddress, u16) = (IpAddress::v4(10, 0, 0, 2), 80);

fn socket(buffer: usize, options: Options) -> Socket<'static> {
    let mut socket = Socket::new(
        SocketBuffer::new(vec![0; buffer]),
        SocketBuffer::new(vec![0; buffer]),
    );
    socket.set_congestion_control(CongestionControl::Cubic);
    socket.set_sack_recovery(options.sack);
    socket.set_hystart(options.hystart);
    socket.set_linux_rto(options.linux_rto);
    socket.set_byte_counting(options.byte_counting);
    socket.set_rack(options.rack);
    socket.set_nagle_enabled(false);
    socket
}

/// An interface context that owns `addr` (a socket resets itself when its context lacks its
/// local address).
fn context(addr: IpAddress) -> Context {
    let mut iface = crate::tests::setup(Medium::Ip).0;
    iface.update_ip_addrs(|addrs| {
        addrs.clear();
        addrs.push(IpCidr::new(addr, 24)).unwrap();
    });
    iface.inner
}

impl Pipe {
    /// A connection of `bytes` over a pipe of `delay` one way, with socket buffers of `buffer`
    /// bytes and no rate limit.
    pub fn new(options: Options, delay: Duration, buffer: usize, bytes: usize) -> Pipe {
        let mut receiver = socket(buffer, options);
        receiver.listen(RECEIVER.1).unwrap();
        let mut sender = socket(buffer, options);
        let mut sender_cx = context(SENDER.0);
        sender
            .connect(
                &mut sender_cx,
                IpEndpoint::new(RECEIVER.0, RECEIVER.1),
                IpEndpoint::new(SENDER.0, SENDER.1),
            )
            .unwrap();
        Pipe {
            sender,
            receiver,
            sender_cx,
            receiver_cx: context(RECEIVER.0),
            now: Instant::ZERO,
            delay,
            rate: None,
            busy_until: Instant::ZERO,
            in_flight: BTreeMap::new(),
            seq: 0,
            fate: None,
            sent_payload: 0,
            queue_drops: 0,
            counts: [[0; 2]; 2],
            to_send: bytes,
            received: 0,
            scratch: vec![0; 64 * 1024],
        }
    }

    /// Limits the sender's direction to `bits_per_second` behind a drop-tail queue that holds
    /// `queue` worth of that rate.
    pub fn with_bottleneck(mut self, bits_per_second: u64, queue: Duration) -> Pipe {
        self.rate = Some((bits_per_second / 8, queue));
        self
    }

    /// Runs until the receiver has every byte, or `limit` has passed; returns when it finished.
    pub fn run(&mut self, limit: Duration, total: usize) -> Option<Instant> {
        while self.now < Instant::ZERO + limit {
            self.step();
            if self.received >= total {
                return Some(self.now);
            }
        }
        None
    }

    /// One millisecond: the applications, every segment each socket wants to send, and every
    /// segment due.
    pub fn step(&mut self) {
        let now = self.now;
        if self.sender.may_send() && self.to_send > 0 {
            let chunk = self.to_send.min(self.scratch.len());
            let n = self.sender.send_slice(&self.scratch[..chunk]).unwrap();
            self.to_send -= n;
        }
        while self.receiver.can_recv() {
            let n = self.receiver.recv_slice(&mut self.scratch).unwrap();
            if n == 0 {
                break;
            }
            self.received += n;
        }
        for side in [Side::Sender, Side::Receiver] {
            // A socket sends at most one segment per dispatch.
            for _ in 0..10_000 {
                let mut out = None;
                let (socket, cx) = self.socket(side);
                cx.set_now(now);
                socket
                    .dispatch(cx, |_, _, (ip, repr)| {
                        out = Some((ip, own(&repr), repr.payload.to_vec()));
                        Ok::<(), ()>(())
                    })
                    .unwrap();
                let Some((ip, repr, payload)) = out else {
                    break;
                };
                self.emit(side, ip, repr, payload);
            }
        }
        while let Some(entry) = self.in_flight.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let packet = entry.remove();
            let repr = TcpRepr {
                payload: &packet.payload,
                ..packet.repr
            };
            let (socket, cx) = self.socket(packet.to);
            cx.set_now(now);
            if socket.accepts(cx, &packet.ip, &repr)
                && let Some((ip, reply)) = socket.process(cx, &packet.ip, &repr)
            {
                let payload = reply.payload.to_vec();
                let reply = own(&reply);
                let from = packet.to;
                self.emit(from, ip, reply, payload);
            }
        }
        self.now += Duration::from_millis(1);
    }

    fn socket(&mut self, side: Side) -> (&mut Socket<'static>, &mut Context) {
        match side {
            Side::Sender => (&mut self.sender, &mut self.sender_cx),
            Side::Receiver => (&mut self.receiver, &mut self.receiver_cx),
        }
    }

    fn emit(&mut self, from: Side, ip: IpRepr, repr: TcpRepr<'static>, payload: Vec<u8>) {
        let data = !payload.is_empty();
        let counter = &mut self.counts[from as usize][data as usize];
        let index = *counter;
        *counter += 1;
        if from == Side::Sender {
            self.sent_payload += payload.len();
        }
        let full = TcpRepr {
            payload: &payload,
            ..repr
        };
        let fate = match self.fate.as_mut() {
            Some(fate) => fate(&Seen {
                now: self.now,
                side: from,
                index,
                repr: &full,
            }),
            None => Fate::Deliver,
        };
        let extra = match fate {
            Fate::Drop => return,
            Fate::Deliver => Duration::ZERO,
            Fate::Hold(extra) => extra,
        };
        let mut leaves = self.now;
        if let (Side::Sender, Some((bytes_per_second, queue))) = (from, self.rate) {
            let backlog = self.busy_until.max(self.now) - self.now;
            if backlog > queue {
                self.queue_drops += 1;
                return;
            }
            let size = ip.buffer_len() as u64;
            let serialise = Duration::from_micros(size * 1_000_000 / bytes_per_second);
            self.busy_until = self.busy_until.max(self.now) + serialise;
            leaves = self.busy_until;
        }
        let to = match from {
            Side::Sender => Side::Receiver,
            Side::Receiver => Side::Sender,
        };
        self.seq += 1;
        self.in_flight.insert(
            (leaves + self.delay + extra, self.seq),
            InFlight {
                to,
                ip,
                repr,
                payload,
            },
        );
    }

    /// Whether both ends are established.
    pub fn established(&self) -> bool {
        self.sender.state() == State::Established && self.receiver.state() == State::Established
    }
}

/// A segment's header fields with no payload, so that it can outlive the socket's buffer.
fn own(repr: &TcpRepr) -> TcpRepr<'static> {
    TcpRepr {
        src_port: repr.src_port,
        dst_port: repr.dst_port,
        control: repr.control,
        seq_number: repr.seq_number,
        ack_number: repr.ack_number,
        window_len: repr.window_len,
        window_scale: repr.window_scale,
        max_seg_size: repr.max_seg_size,
        sack_permitted: repr.sack_permitted,
        sack_ranges: repr.sack_ranges,
        timestamp: repr.timestamp,
        payload: &[],
    }
}
