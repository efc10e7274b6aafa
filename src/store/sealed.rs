//! Credentials at rest: AES-256-GCM under the gateway's master key. A sealed value is base64 of
//! a fresh 96-bit nonce followed by the ciphertext and tag; the document id is bound in as
//! associated data, so a sealed credential cannot be moved to another document.

use std::path::Path;

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

/// Why sealing or opening failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SealError {
    /// The key is missing or malformed.
    #[error("master key: {0}")]
    Key(String),
    /// A sealed value did not decrypt (wrong key, or tampered).
    #[error("a stored credential cannot be decrypted with this gateway's master key")]
    Open,
}

/// Seals and opens credentials.
pub struct Sealer {
    key: LessSafeKey,
    rng: SystemRandom,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer([REDACTED])")
    }
}

impl Sealer {
    /// A sealer over a 32-byte key.
    pub fn new(key: &[u8]) -> Result<Self, SealError> {
        if key.len() != 32 {
            return Err(SealError::Key(format!(
                "must be 32 bytes (base64 of 32 random bytes), got {}",
                key.len()
            )));
        }
        crate::redact::register(&STANDARD.encode(key));
        let unbound =
            UnboundKey::new(&AES_256_GCM, key).map_err(|_| SealError::Key("rejected".into()))?;
        Ok(Self {
            key: LessSafeKey::new(unbound),
            rng: SystemRandom::new(),
        })
    }

    /// A sealer over base64 key text (as kept in a key file or env var).
    pub fn from_base64(text: &str) -> Result<Self, SealError> {
        let key = STANDARD
            .decode(text.trim())
            .map_err(|_| SealError::Key("is not base64".into()))?;
        Self::new(&key)
    }

    /// The key in `path`, generating it (readable by the owner only) when the file is missing.
    pub fn from_file_or_generate(path: &Path) -> Result<Self, SealError> {
        match std::fs::read_to_string(path) {
            Ok(text) if text.trim().len() >= 44 => Self::from_base64(&text),
            Ok(_) => Self::from_base64(&read_whole(path)?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut key = [0u8; 32];
                SystemRandom::new()
                    .fill(&mut key)
                    .map_err(|_| SealError::Key("no randomness".into()))?;
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)
                        .map_err(|e| SealError::Key(format!("{}: {e}", dir.display())))?;
                }
                match write_private(path, STANDARD.encode(key).as_bytes()) {
                    Ok(()) => {
                        tracing::info!(path = %path.display(), "generated a new master key for stored credentials");
                        Self::new(&key)
                    }
                    // Another process generated it first: use theirs.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        Self::from_base64(&read_whole(path)?)
                    }
                    Err(e) => Err(SealError::Key(format!("{}: {e}", path.display()))),
                }
            }
            Err(e) => Err(SealError::Key(format!("{}: {e}", path.display()))),
        }
    }

    /// Encrypts `value` for the document `id`.
    pub fn seal(&self, id: &str, value: &Value) -> Result<String, SealError> {
        // What is sealed is secret from now on, wherever a copy of it travels.
        crate::redact::register_json(value);
        let mut nonce = [0u8; NONCE_LEN];
        self.rng
            .fill(&mut nonce)
            .map_err(|_| SealError::Key("no randomness".into()))?;
        let mut data = value.to_string().into_bytes();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(id.as_bytes()),
                &mut data,
            )
            .map_err(|_| SealError::Open)?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&data);
        Ok(STANDARD.encode(out))
    }

    /// Decrypts what [`Sealer::seal`] made for `id`.
    pub fn open(&self, id: &str, sealed: &str) -> Result<Value, SealError> {
        let raw = STANDARD.decode(sealed).map_err(|_| SealError::Open)?;
        if raw.len() < NONCE_LEN {
            return Err(SealError::Open);
        }
        let (nonce, rest) = raw.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| SealError::Open)?;
        let mut data = rest.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(id.as_bytes()), &mut data)
            .map_err(|_| SealError::Open)?;
        let value: Value = serde_json::from_slice(plain).map_err(|_| SealError::Open)?;
        crate::redact::register_json(&value);
        Ok(value)
    }
}

/// Reads a key file another process may still be writing (it writes 44 bytes at once, so a
/// short read only happens in that instant).
fn read_whole(path: &Path) -> Result<String, SealError> {
    for _ in 0..50 {
        let text = std::fs::read_to_string(path)
            .map_err(|e| SealError::Key(format!("{}: {e}", path.display())))?;
        if text.trim().len() >= 44 {
            return Ok(text);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    Err(SealError::Key(format!(
        "{}: incomplete key file",
        path.display()
    )))
}

#[cfg(unix)]
fn write_private(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(data)
}

#[cfg(not(unix))]
fn write_private(path: &Path, data: &[u8]) -> std::io::Result<()> {
    std::fs::write(path, data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_master_key_and_what_it_seals_are_known_to_the_redactor() {
        use base64::Engine;
        let key = [42u8; 32];
        let text = base64::engine::general_purpose::STANDARD.encode(key);
        let s = Sealer::new(&key).unwrap();
        assert_eq!(
            crate::redact::redact(&format!("key {text}")),
            "key [REDACTED]"
        );
        let sealed = s
            .seal("doc-r", &json!({"api_key": "sk-sealed-UNIT-7777"}))
            .unwrap();
        assert_eq!(
            crate::redact::redact("echo sk-sealed-UNIT-7777"),
            "echo [REDACTED]"
        );
        assert_eq!(
            s.open("doc-r", &sealed).unwrap()["api_key"],
            "sk-sealed-UNIT-7777"
        );
    }

    #[test]
    fn sealed_values_open_only_for_their_document_and_key() {
        let s = Sealer::new(&[7u8; 32]).unwrap();
        let secret = json!({"access_key": "AKIAEXAMPLE", "secret_key": "wJalrXUtnFEMI"});
        let sealed = s.seal("doc1", &secret).unwrap();
        assert!(!sealed.contains("AKIA") && !sealed.contains("wJalr"));
        assert_ne!(
            sealed,
            s.seal("doc1", &secret).unwrap(),
            "fresh nonce per seal"
        );
        assert_eq!(s.open("doc1", &sealed).unwrap(), secret);
        assert!(s.open("doc2", &sealed).is_err());
        assert!(
            Sealer::new(&[8u8; 32])
                .unwrap()
                .open("doc1", &sealed)
                .is_err()
        );
        assert!(Sealer::new(&[1u8; 16]).is_err());
    }

    #[test]
    fn a_missing_key_file_is_generated_once_and_reused() {
        let dir = std::env::temp_dir().join(format!("agui-key-{}", uuid::Uuid::new_v4().simple()));
        let path = dir.join("master.key");
        let a = Sealer::from_file_or_generate(&path).unwrap();
        let sealed = a.seal("x", &json!("s3cret")).unwrap();
        let b = Sealer::from_file_or_generate(&path).unwrap();
        assert_eq!(b.open("x", &sealed).unwrap(), json!("s3cret"));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn processes_starting_together_agree_on_one_key() {
        let dir = std::env::temp_dir().join(format!("agui-key-{}", uuid::Uuid::new_v4().simple()));
        let path = dir.join("master.key");
        let sealers: Vec<Sealer> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| Sealer::from_file_or_generate(&path).unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let sealed = sealers[0].seal("x", &json!(1)).unwrap();
        for s in &sealers {
            assert_eq!(s.open("x", &sealed).unwrap(), json!(1));
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}
