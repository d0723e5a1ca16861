//! The application on each end of one flow: writes or reads and checks the pattern, closes, and
//! decides when the flow is over and its socket may go.

use std::collections::VecDeque;
use std::time::Duration;

use braid_proto::Instant;
use smoltcp::iface::SocketHandle;
use smoltcp::socket::tcp::{self, State};
use smoltcp::time::Duration as SmolDuration;

use super::pattern;
use super::{FailReason, FlowEvent, FlowId, Transfer};

/// smoltcp's default delayed-ACK time, used once a connection is established.
pub(crate) const DATA_ACK_DELAY: SmolDuration = SmolDuration::from_millis(10);

/// What this host's application does on the flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// Write this many bytes (`None`: forever), then close.
    Sender(Option<u64>),
    /// Read this many bytes (`None`: forever), checking each against the pattern.
    Receiver(Option<u64>),
}

/// Where the flow is, from the application's point of view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Data still has to move.
    Running,
    /// The application is done (all read, or all written and acknowledged); the socket is
    /// closing down.
    Finished { at: Instant },
    /// Reported as failed; the socket has been aborted.
    Failed { at: Instant },
}

/// Timers that apply to every flow of a host.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// A running flow with no progress for this long fails.
    pub(crate) idle_timeout: Duration,
    /// A finished or failed flow's socket is dropped after this long even if not yet closed.
    pub(crate) linger: Duration,
}

/// The outcome of one pass of [`Flow::drive`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Drive {
    /// The application touched the socket (wrote, read, closed, aborted): smoltcp must run
    /// again at this instant to emit what follows.
    pub(crate) touched: bool,
    /// The socket can be removed and the flow forgotten.
    pub(crate) remove: bool,
}

/// One flow held by a host.
#[derive(Debug)]
pub(crate) struct Flow {
    /// The flow's socket in the host's `SocketSet`.
    pub(crate) handle: SocketHandle,
    /// The local TCP port the flow holds.
    pub(crate) local_port: u16,
    role: Role,
    /// Pattern key (`pattern::key` of the flow id).
    key: u64,
    /// Bytes written into the socket so far.
    written: u64,
    /// Bytes read from the socket and checked so far.
    read: u64,
    /// Whether `Established` has been reported.
    established: bool,
    /// Whether this side has closed its sending half.
    closed: bool,
    phase: Phase,
    /// Last time progress was seen; `None` until the first poll after a passive open.
    last_progress: Option<Instant>,
    /// What progress is measured against: (TCP state, bytes read, bytes acknowledged).
    mark: (State, u64, u64),
}

impl Flow {
    /// A flow whose socket is `handle`; `now` starts its idle clock (`None` for a passive open,
    /// whose clock starts at the next poll).
    pub(crate) fn new(
        id: FlowId,
        handle: SocketHandle,
        local_port: u16,
        transfer: Transfer,
        now: Option<Instant>,
    ) -> Self {
        let role = match transfer {
            Transfer::Send(n) => Role::Sender(Some(n)),
            Transfer::SendForever => Role::Sender(None),
            Transfer::Receive(n) => Role::Receiver(Some(n)),
            Transfer::ReceiveForever => Role::Receiver(None),
        };
        Flow {
            handle,
            local_port,
            role,
            key: pattern::key(id),
            written: 0,
            read: 0,
            established: false,
            closed: false,
            phase: Phase::Running,
            last_progress: now,
            mark: (State::Closed, 0, 0),
        }
    }

    /// Bytes read and verified so far.
    pub(crate) fn bytes_read(&self) -> u64 {
        self.read
    }

    /// Whether data still has to move on this flow.
    pub(crate) fn is_running(&self) -> bool {
        self.phase == Phase::Running
    }

    /// When the flow's own timer (idle timeout or linger) next needs a poll.
    pub(crate) fn deadline(&self, limits: &Limits) -> Option<Instant> {
        match self.phase {
            Phase::Running => self.last_progress.map(|t| t + limits.idle_timeout),
            Phase::Finished { at } | Phase::Failed { at } => Some(at + limits.linger),
        }
    }

    /// Run the application after smoltcp has processed everything due at `now`.
    pub(crate) fn drive(
        &mut self,
        id: FlowId,
        socket: &mut tcp::Socket<'_>,
        now: Instant,
        limits: &Limits,
        events: &mut VecDeque<FlowEvent>,
    ) -> Drive {
        let mut touched = false;
        if self.phase == Phase::Running {
            touched = self.run(id, socket, now, limits, events);
        }
        let remove = match self.phase {
            Phase::Running => false,
            Phase::Finished { at } | Phase::Failed { at } => {
                let state = socket.state();
                // TIME-WAIT only re-acknowledges a lost final FIN; a fresh RST from the peer's
                // stack covers that case well enough for a finished flow. A CLOSED socket without
                // a remote endpoint has nothing left to send (an aborted one keeps its endpoint
                // until its RST is out).
                state == State::TimeWait
                    || (state == State::Closed && socket.remote_endpoint().is_none())
                    || now >= at + limits.linger
            }
        };
        Drive { touched, remove }
    }

    /// The running part of [`Flow::drive`]; returns whether the socket was touched.
    fn run(
        &mut self,
        id: FlowId,
        socket: &mut tcp::Socket<'_>,
        now: Instant,
        limits: &Limits,
        events: &mut VecDeque<FlowEvent>,
    ) -> bool {
        let mut touched = false;
        let state = socket.state();
        if !self.established && is_synchronized(state) {
            self.established = true;
            socket.set_ack_delay(Some(DATA_ACK_DELAY));
            tracing::debug!(flow = id.0, %now, "established");
            events.push_back(FlowEvent::Established { flow: id, at: now });
        }

        if state == State::Closed {
            // smoltcp closes a socket on its own only when it receives an RST: no smoltcp
            // timeout is set, the idle timeout below is ours.
            let reason = if self.established { FailReason::Reset } else { FailReason::Refused };
            self.fail(id, socket, now, reason, events);
            return false;
        }

        match self.role {
            Role::Sender(total) => {
                touched |= self.write(socket, total);
                if total == Some(self.written) && !self.closed && socket.may_send() {
                    // All data is queued: send FIN behind it, as an HTTP server does.
                    socket.close();
                    self.closed = true;
                    touched = true;
                }
                if self.closed && socket.send_queue() == 0 {
                    // Everything written has been acknowledged: the peer holds all of it.
                    self.phase = Phase::Finished { at: now };
                    return touched;
                }
            }
            Role::Receiver(total) => {
                let (read_any, corrupt) = self.read(socket, total);
                touched |= read_any;
                if let Some(offset) = corrupt {
                    self.fail(id, socket, now, FailReason::Corrupt { offset }, events);
                    return true;
                }
                if self.established && total.is_some_and(|n| self.read >= n) {
                    tracing::debug!(flow = id.0, %now, bytes = self.read, "completed");
                    events.push_back(FlowEvent::Completed { flow: id, at: now, bytes: self.read });
                    socket.close();
                    self.closed = true;
                    self.phase = Phase::Finished { at: now };
                    return true;
                }
                let peer_closed = matches!(state, State::CloseWait | State::LastAck | State::Closing | State::TimeWait);
                if peer_closed && !socket.can_recv() && total.is_some() {
                    let reason = FailReason::Truncated { received: self.read };
                    self.fail(id, socket, now, reason, events);
                    return true;
                }
            }
        }

        let acked = self.written - socket.send_queue() as u64;
        let mark = (socket.state(), self.read, acked);
        let last = match self.last_progress {
            Some(t) if mark == self.mark => t,
            _ => {
                self.mark = mark;
                self.last_progress = Some(now);
                now
            }
        };
        if now >= last + limits.idle_timeout {
            self.fail(id, socket, now, FailReason::Timeout, events);
            return true;
        }
        touched
    }

    /// Queue as much of the pattern as the transmit buffer takes; returns whether any was.
    fn write(&mut self, socket: &mut tcp::Socket<'_>, total: Option<u64>) -> bool {
        let mut wrote = false;
        // Two rounds at most: the ring buffer's free space is in at most two pieces.
        for _ in 0..2 {
            let want = total.map_or(u64::MAX, |n| n - self.written);
            if want == 0 || !socket.can_send() {
                break;
            }
            let (key, offset) = (self.key, self.written);
            let n = socket
                .send(|buf| {
                    let n = usize::try_from(want).map_or(buf.len(), |w| w.min(buf.len()));
                    pattern::fill(key, offset, &mut buf[..n]);
                    (n, n)
                })
                .unwrap_or(0);
            if n == 0 {
                break;
            }
            self.written += n as u64;
            wrote = true;
        }
        wrote
    }

    /// Read and check everything buffered; returns whether any byte was read, and the offset of
    /// the first byte that is not the pattern (or lies past the expected total).
    fn read(&mut self, socket: &mut tcp::Socket<'_>, total: Option<u64>) -> (bool, Option<u64>) {
        let mut read_any = false;
        for _ in 0..2 {
            let (key, offset) = (self.key, self.read);
            let allowed = total.map_or(u64::MAX, |n| n.saturating_sub(offset));
            let result = socket.recv(|buf| {
                let ok_len = usize::try_from(allowed).map_or(buf.len(), |a| a.min(buf.len()));
                let bad = pattern::first_mismatch(key, offset, &buf[..ok_len]).or(
                    // Bytes beyond the announced size are an error as well.
                    (ok_len < buf.len()).then_some(offset + ok_len as u64),
                );
                (buf.len(), (buf.len(), bad))
            });
            match result {
                Ok((0, _)) | Err(_) => break,
                Ok((n, bad)) => {
                    self.read += n as u64;
                    read_any = true;
                    if bad.is_some() {
                        return (true, bad);
                    }
                }
            }
        }
        (read_any, None)
    }

    /// Report a failure and abort the socket (one RST to the peer, if it was connected).
    fn fail(
        &mut self,
        id: FlowId,
        socket: &mut tcp::Socket<'_>,
        now: Instant,
        reason: FailReason,
        events: &mut VecDeque<FlowEvent>,
    ) {
        tracing::debug!(flow = id.0, %now, ?reason, "failed");
        events.push_back(FlowEvent::Failed { flow: id, at: now, reason });
        socket.abort();
        self.phase = Phase::Failed { at: now };
    }
}

/// Whether the three-way handshake has completed in `state`.
fn is_synchronized(state: State) -> bool {
    !matches!(state, State::Closed | State::Listen | State::SynSent | State::SynReceived)
}
