//! The fuzz targets: one per decoder, each a plain `fn(&[u8]) -> Verdict` that must never panic on
//! any input, with a seed corpus of valid inputs built by the real emitters.
//!
//! A target may also assert properties that hold for every input it accepts (a parsed packet emits
//! back to the same bytes, recovered packets lie inside the coverage that produced them): a failed
//! assertion is a panic, so the runner reports it like any other.

mod coders;
mod config;
mod crypto;
mod sealed;
mod session;
mod sim;
mod wire;

/// What a target made of an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The decoder accepted it (or some of it, for inputs that are sequences of operations).
    Accepted,
    /// The decoder refused it with an error.
    Rejected,
}

impl Verdict {
    /// `Accepted` when `ok`.
    pub fn from_ok(ok: bool) -> Self {
        if ok { Verdict::Accepted } else { Verdict::Rejected }
    }
}

/// One fuzz target.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    /// Name, for `--target` and reports.
    pub name: &'static str,
    /// What it exercises.
    pub about: &'static str,
    /// Whether the input is text (the mutator then also edits words, numbers and lines).
    pub text: bool,
    /// Largest input worth generating.
    pub max_len: usize,
    /// Runs one input. Must not panic.
    pub run: fn(&[u8]) -> Verdict,
    /// The seed corpus: valid inputs from the real emitters and the repository's files.
    pub seeds: fn() -> Vec<Vec<u8>>,
}

/// Every target, in the order reports list them.
pub const TARGETS: &[Target] = &[
    wire::HEADER,
    wire::DATA,
    wire::CODED,
    wire::FEEDBACK,
    wire::PROBE,
    wire::CLOSE,
    wire::DATAGRAM,
    coders::XOR,
    coders::RLNC,
    coders::FOUNTAIN,
    session::PAIR,
    session::SEALED_PAIR,
    sealed::MUTATE,
    config::DAEMON_CONFIG,
    sim::SCENARIO,
    sim::SCHEDULE,
    sim::TRACE,
    crypto::RESPONDER,
    crypto::INITIATOR,
    crypto::CHANNEL,
    crypto::REPLAY,
];

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

/// A text target's input as text: invalid UTF-8 is replaced rather than refused, so every input
/// reaches the parser.
pub(crate) fn text(data: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(data)
}

/// Reads a byte-string of operations; every read past the end yields zeros, so any input is a
/// valid (if short) program.
pub(crate) struct Ops<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Ops<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Ops { data, pos: 0 }
    }

    pub(crate) fn done(&self) -> bool {
        self.pos >= self.data.len()
    }

    pub(crate) fn u8(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    pub(crate) fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }

    /// The next `n` bytes, or what is left.
    pub(crate) fn bytes(&mut self, n: usize) -> &'a [u8] {
        let start = self.pos.min(self.data.len());
        let end = start.saturating_add(n).min(self.data.len());
        self.pos = end.max(self.pos);
        &self.data[start..end]
    }

    /// A chunk framed by a 16-bit big-endian length.
    pub(crate) fn chunk(&mut self) -> &'a [u8] {
        let n = usize::from(self.u16());
        self.bytes(n)
    }
}

/// Writes operations in the format [`Ops`] reads, for building seeds.
#[derive(Default)]
pub(crate) struct OpsWriter(pub(crate) Vec<u8>);

impl OpsWriter {
    pub(crate) fn u8(&mut self, b: u8) -> &mut Self {
        self.0.push(b);
        self
    }

    pub(crate) fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub(crate) fn chunk(&mut self, b: &[u8]) -> &mut Self {
        let n = u16::try_from(b.len()).expect("seed chunks are built under 64 KiB");
        self.u16(n);
        self.0.extend_from_slice(b);
        self
    }
}
