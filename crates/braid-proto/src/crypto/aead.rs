//! The transport AEAD: ChaCha20-Poly1305 (default, as WireGuard) or AES-256-GCM (faster on CPUs
//! with AES instructions), both from `ring`.

use super::{KEY_LEN, TAG_LEN};
use ring::aead::{AES_256_GCM, Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};
use std::fmt;
use std::str::FromStr;

/// Which AEAD seals the transport datagrams. The client chooses; the server accepts both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CipherSuite {
    /// ChaCha20-Poly1305 (RFC 8439), as WireGuard. Fast everywhere, constant-time in software.
    #[default]
    ChaCha20Poly1305,
    /// AES-256-GCM: faster where the CPU has AES-NI/ARMv8 crypto extensions.
    Aes256Gcm,
}

impl CipherSuite {
    /// The suite's code in the handshake payload.
    pub fn code(self) -> u8 {
        match self {
            CipherSuite::ChaCha20Poly1305 => 1,
            CipherSuite::Aes256Gcm => 2,
        }
    }

    /// The suite of a handshake payload's code.
    pub fn from_code(c: u8) -> Option<Self> {
        match c {
            1 => Some(CipherSuite::ChaCha20Poly1305),
            2 => Some(CipherSuite::Aes256Gcm),
            _ => None,
        }
    }

    fn algorithm(self) -> &'static ring::aead::Algorithm {
        match self {
            CipherSuite::ChaCha20Poly1305 => &CHACHA20_POLY1305,
            CipherSuite::Aes256Gcm => &AES_256_GCM,
        }
    }
}

impl fmt::Display for CipherSuite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CipherSuite::ChaCha20Poly1305 => "chacha20-poly1305",
            CipherSuite::Aes256Gcm => "aes-256-gcm",
        })
    }
}

impl FromStr for CipherSuite {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "chacha20-poly1305" | "chacha20poly1305" => Ok(CipherSuite::ChaCha20Poly1305),
            "aes-256-gcm" | "aes256gcm" => Ok(CipherSuite::Aes256Gcm),
            other => Err(format!("unknown cipher {other:?}: use chacha20-poly1305 or aes-256-gcm")),
        }
    }
}

/// The 96-bit nonce of a datagram: 3 zero bytes, the link id, the sender's 64-bit per-link counter.
/// Each (direction, key) pair has its own key, and a sender never repeats a counter on a link
/// ([`super::channel`]), so no nonce is used twice under one key.
fn nonce(link: u8, counter: u64) -> Nonce {
    let mut n = [0u8; 12];
    n[3] = link;
    n[4..].copy_from_slice(&counter.to_be_bytes());
    Nonce::assume_unique_for_key(n)
}

/// One direction's key.
pub(crate) struct DirectionKey {
    key: LessSafeKey,
}

impl DirectionKey {
    pub(crate) fn new(suite: CipherSuite, key: &[u8; KEY_LEN]) -> Self {
        // Both algorithms take exactly KEY_LEN (32) bytes, so this cannot fail.
        let unbound = UnboundKey::new(suite.algorithm(), key).expect("32-byte key for a 256-bit AEAD");
        DirectionKey { key: LessSafeKey::new(unbound) }
    }

    /// Encrypts `body` in place and returns the tag; `aad` is authenticated, not encrypted.
    pub(crate) fn seal(&self, link: u8, counter: u64, aad: &[u8], body: &mut [u8]) -> [u8; TAG_LEN] {
        let mut out = [0u8; TAG_LEN];
        // ring fails only for inputs beyond 2^38 bytes; a datagram is below 64 KiB.
        if let Ok(tag) = self.key.seal_in_place_separate_tag(nonce(link, counter), Aad::from(aad), body) {
            out.copy_from_slice(tag.as_ref());
        }
        out
    }

    /// Decrypts `body_and_tag` in place; returns the plaintext length, or `None` if it does not
    /// authenticate (the buffer's contents are then unspecified).
    pub(crate) fn open(&self, link: u8, counter: u64, aad: &[u8], body_and_tag: &mut [u8]) -> Option<usize> {
        self.key.open_in_place(nonce(link, counter), Aad::from(aad), body_and_tag).ok().map(|p| p.len())
    }
}
