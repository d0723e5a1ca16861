//! Key files and their text form: 32 bytes in standard base64 on one line, as WireGuard's
//! `wg genkey` / `wg pubkey` (`braid genkey > private.key`, `braid pubkey < private.key`).

use anyhow::{Context, bail};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use braid_proto::crypto::{KEY_LEN, PublicKey, StaticSecret};
use std::io::{Read, Write};
use std::path::Path;

/// Parses a base64 key.
pub fn parse_key(text: &str) -> anyhow::Result<[u8; KEY_LEN]> {
    let bytes = STANDARD.decode(text.trim()).map_err(|e| anyhow::anyhow!("not base64: {e}"))?;
    <[u8; KEY_LEN]>::try_from(bytes.as_slice())
        .map_err(|_| anyhow::anyhow!("a key is {KEY_LEN} bytes (44 base64 characters), this is {}", bytes.len()))
}

/// The base64 text of a key.
pub fn encode_key(key: &[u8; KEY_LEN]) -> String {
    STANDARD.encode(key)
}

/// Parses a base64 public key.
pub fn parse_public(text: &str) -> anyhow::Result<PublicKey> {
    parse_key(text).map(PublicKey)
}

/// Reads a secret key file (a private key or a pre-shared key), refusing one that the group or
/// others can read: a key anyone on the machine can read is no secret (`chmod 600 FILE`).
pub fn read_secret_file(path: &Path) -> anyhow::Result<[u8; KEY_LEN]> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).with_context(|| format!("key file {}", path.display()))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        bail!(
            "key file {} has loose permissions {mode:03o}: group or others can read it; run `chmod 600 {}`",
            path.display(),
            path.display()
        );
    }
    let text = std::fs::read_to_string(path).with_context(|| format!("reading key file {}", path.display()))?;
    parse_key(&text).with_context(|| format!("key file {}", path.display()))
}

/// Reads a private key file.
pub fn read_private_key(path: &Path) -> anyhow::Result<StaticSecret> {
    read_secret_file(path).map(StaticSecret::from_bytes)
}

/// `braid genkey`: a new private key from the OS random source, base64, on stdout.
pub fn genkey() -> anyhow::Result<()> {
    let mut b = [0u8; KEY_LEN];
    getrandom::fill(&mut b).map_err(|e| anyhow::anyhow!("OS random source: {e}"))?;
    let key = StaticSecret::from_bytes(b);
    writeln!(std::io::stdout(), "{}", encode_key(&key.to_bytes()))?;
    Ok(())
}

/// `braid pubkey`: reads a private key on stdin, prints its public key.
pub fn pubkey() -> anyhow::Result<()> {
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text)?;
    let key = StaticSecret::from_bytes(parse_key(&text).context("stdin")?);
    writeln!(std::io::stdout(), "{}", encode_key(&key.public_key().0))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_bad_text() {
        let k = [7u8; KEY_LEN];
        assert_eq!(parse_key(&encode_key(&k)).unwrap(), k);
        assert!(parse_key("not a key").is_err());
        assert!(format!("{:#}", parse_key("AAAA").unwrap_err()).contains("32 bytes"));
    }

    #[test]
    fn loose_permissions_are_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("braid-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("k");
        std::fs::write(&f, encode_key(&[9; KEY_LEN])).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = format!("{:#}", read_private_key(&f).unwrap_err());
        assert!(e.contains("loose permissions 644") && e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(read_private_key(&f).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
