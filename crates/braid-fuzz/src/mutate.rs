//! The mutator: coverage-free but structure-aware.
//!
//! There is no coverage feedback on stable Rust, so the structure comes from elsewhere: every
//! target's seed corpus is made of valid inputs produced by the real emitters (datagrams from a
//! live session pair, coded packets from the real encoders, the repository's scenario files), and
//! the mutations are the ones that break parsers: bit flips, interesting values written over
//! big-endian length and count fields (1 to 4 bytes), small arithmetic on them, truncation,
//! splices with other corpus entries, chunk deletion and duplication, dictionary tokens (words and
//! numbers taken from the seeds, for text formats), number swaps in text, and random bytes.
//! Inputs a target accepts are kept in a bounded pool and mutated further, the cheapest stand-in
//! for coverage guidance (a mutant that still parses reached deeper code than one that did not).

/// xorshift64*: tiny, fast and fixed, so a campaign is reproducible from its seed on every
/// platform and Rust version (no dependency on a general-purpose RNG crate's stream).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed` (any value, zero included).
    pub fn new(seed: u64) -> Self {
        Rng((seed ^ 0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n`; 0 when `n` is 0.
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// True with probability 1/`n`.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }
}

/// Values that break length, count and index fields: zero, one, the type's limits and their
/// neighbours, powers of two around the protocol's own bounds (MTU, window, block sizes).
const INTERESTING: &[u32] = &[
    0,
    1,
    2,
    3,
    4,
    7,
    8,
    12,
    15,
    16,
    17,
    31,
    32,
    33,
    63,
    64,
    65,
    127,
    128,
    129,
    255,
    256,
    257,
    511,
    512,
    1023,
    1024,
    1025,
    1400,
    1432,
    1500,
    2047,
    2048,
    4096,
    8191,
    8192,
    32767,
    32768,
    65534,
    65535,
    65536,
    0x7f_ffff,
    0x80_0000,
    0xff_fffe,
    0xff_ffff,
    0x0100_0000,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_fffe,
    0xffff_ffff,
];

/// Numbers that break text parsers and the checks behind them.
const TEXT_NUMBERS: &[&str] = &[
    "0",
    "-0",
    "1",
    "-1",
    "0.5",
    "1e308",
    "-1e308",
    "1e-320",
    "nan",
    "inf",
    "-inf",
    "+inf",
    "255",
    "256",
    "65535",
    "65536",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999",
    "0x10",
    "1_000",
    "3.",
    ".5",
    "1e",
    "00",
    "",
];

/// Mutates inputs of one target.
#[derive(Debug, Clone)]
pub struct Mutator {
    /// The random stream.
    pub rng: Rng,
    /// Tokens for text formats (words, numbers, punctuation runs from the seeds); empty for binary.
    dict: Vec<Vec<u8>>,
    /// Largest input produced.
    max_len: usize,
}

impl Mutator {
    /// A mutator drawing from `seed`, with dictionary tokens taken from `seeds` when `text` is set,
    /// producing inputs of at most `max_len` bytes.
    pub fn new(seed: u64, seeds: &[Vec<u8>], text: bool, max_len: usize) -> Self {
        let mut dict: Vec<Vec<u8>> = Vec::new();
        if text {
            for s in seeds {
                for tok in tokens(s) {
                    if !dict.contains(&tok) {
                        dict.push(tok);
                    }
                }
            }
            for n in TEXT_NUMBERS {
                dict.push(n.as_bytes().to_vec());
            }
            for p in ["=", "\n", "[", "]", "[[", "]]", "{", "}", ",", "\"", "'", "\"\"\"", "#", ".", " "] {
                dict.push(p.as_bytes().to_vec());
            }
        }
        Mutator { rng: Rng::new(seed), dict, max_len: max_len.max(1) }
    }

    /// A new input: `base` with one to a few stacked mutations, `other` available for splicing.
    pub fn mutate(&mut self, base: &[u8], other: &[u8]) -> Vec<u8> {
        let mut v = base.to_vec();
        let n = 1 + self.rng.below(4);
        for _ in 0..n {
            self.mutate_once(&mut v, other);
        }
        v.truncate(self.max_len);
        v
    }

    fn mutate_once(&mut self, v: &mut Vec<u8>, other: &[u8]) {
        let text = !self.dict.is_empty();
        let r = &mut self.rng;
        // Text formats get mostly token-level edits; binary formats mostly field-level ones.
        let op = if text && r.one_in(2) { 100 + r.below(4) } else { r.below(12) };
        match op {
            // Bit flip.
            0 if !v.is_empty() => {
                let i = r.below(v.len());
                v[i] ^= 1 << r.below(8);
            }
            // Random byte.
            1 if !v.is_empty() => {
                let i = r.below(v.len());
                v[i] = r.next_u64() as u8;
            }
            // An interesting value over a 1..4-byte big-endian field (lengths, counts, spans).
            2 | 3 if !v.is_empty() => {
                let width = 1 + r.below(4);
                let val = INTERESTING[r.below(INTERESTING.len())];
                let bytes = val.to_be_bytes();
                let i = r.below(v.len());
                for (k, b) in bytes[4 - width..].iter().enumerate() {
                    if let Some(d) = v.get_mut(i + k) {
                        *d = *b;
                    }
                }
            }
            // Small arithmetic on a byte or a 16-bit field (off-by-one lengths).
            4 if v.len() >= 2 => {
                let i = r.below(v.len() - 1);
                let delta = r.below(33) as i32 - 16;
                let x = u16::from_be_bytes([v[i], v[i + 1]]) as i32 + delta;
                v[i..i + 2].copy_from_slice(&(x as u16).to_be_bytes());
            }
            // Truncation.
            5 if !v.is_empty() => {
                let keep = r.below(v.len());
                v.truncate(keep);
            }
            // Delete a chunk.
            6 if !v.is_empty() => {
                let a = r.below(v.len());
                let len = 1 + r.below((v.len() - a).min(64));
                v.drain(a..a + len);
            }
            // Duplicate a chunk in place (repeated fields, longer bodies).
            7 if !v.is_empty() && v.len() < self.max_len => {
                let a = r.below(v.len());
                let len = 1 + r.below((v.len() - a).min(64));
                let chunk = v[a..a + len].to_vec();
                let at = r.below(v.len() + 1);
                v.splice(at..at, chunk);
            }
            // Splice: our head, the other input's tail.
            8 if !other.is_empty() => {
                let cut = r.below(v.len() + 1);
                let from = r.below(other.len());
                v.truncate(cut);
                v.extend_from_slice(&other[from..]);
            }
            // Insert a chunk of the other input (another datagram's fields, another file's lines).
            9 if !other.is_empty() => {
                let a = r.below(other.len());
                let len = 1 + r.below((other.len() - a).min(128));
                let at = r.below(v.len() + 1);
                v.splice(at..at, other[a..a + len].iter().copied());
            }
            // Append random bytes.
            10 => {
                let n = 1 + r.below(16);
                v.extend((0..n).map(|_| r.next_u64() as u8));
            }
            // Rarely, entirely random bytes.
            11 if r.one_in(8) => {
                let n = r.below(256);
                *v = (0..n).map(|_| r.next_u64() as u8).collect();
            }
            // Text: replace a token with a dictionary token.
            100 | 101 => {
                let tok = self.dict[r.below(self.dict.len())].clone();
                let spans = token_spans(v);
                if let Some(&(a, b)) = spans.get(r.below(spans.len().max(1))) {
                    v.splice(a..b, tok);
                } else {
                    v.extend_from_slice(&tok);
                }
            }
            // Text: insert a dictionary token anywhere.
            102 => {
                let tok = self.dict[r.below(self.dict.len())].clone();
                let at = r.below(v.len() + 1);
                v.splice(at..at, tok);
            }
            // Text: duplicate or drop a whole line.
            103 => {
                let lines: Vec<usize> = std::iter::once(0)
                    .chain(v.iter().enumerate().filter(|(_, b)| **b == b'\n').map(|(i, _)| i + 1))
                    .collect();
                let a = lines[r.below(lines.len())];
                let b = v[a..].iter().position(|&c| c == b'\n').map_or(v.len(), |p| a + p + 1);
                if r.one_in(2) {
                    v.drain(a..b);
                } else {
                    let line = v[a..b].to_vec();
                    v.splice(a..a, line);
                }
            }
            _ => {
                // The chosen edit did not apply (empty input): flip to a fresh random byte.
                v.push(r.next_u64() as u8);
            }
        }
    }
}

/// Byte ranges of words (alphanumerics, `_`, `-`, `.`) in text.
fn token_spans(v: &[u8]) -> Vec<(usize, usize)> {
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.';
    let mut out = Vec::new();
    let mut start = None;
    for (i, &b) in v.iter().enumerate() {
        match (is_word(b), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((s, v.len()));
    }
    out
}

/// The distinct words of a seed, for the dictionary.
fn tokens(v: &[u8]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    for (a, b) in token_spans(v) {
        let t = v[a..b].to_vec();
        if t.len() <= 40 && !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_bounded() {
        let seeds = vec![b"name = \"x\"\nrate_kbps = 100\n".to_vec()];
        let mut a = Mutator::new(7, &seeds, true, 64);
        let mut b = Mutator::new(7, &seeds, true, 64);
        for _ in 0..1000 {
            let x = a.mutate(&seeds[0], &seeds[0]);
            assert_eq!(x, b.mutate(&seeds[0], &seeds[0]));
            assert!(x.len() <= 64);
        }
    }

    #[test]
    fn mutations_change_inputs() {
        let seed = vec![0u8; 32];
        let mut m = Mutator::new(1, &[], false, 4096);
        let changed = (0..1000).filter(|_| m.mutate(&seed, &[1, 2, 3]) != seed).count();
        assert!(changed > 900, "{changed}");
    }
}
