//! CSRF tokens: an HMAC of what the request is bound to (the session id
//! when logged in, else the browser's random cookie) under a key derived
//! from `console.session_secret`, so a page of another site can neither
//! read nor compute the token a form must carry, and every console
//! sharing the secret accepts it.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The key tokens are computed with.
#[derive(Clone)]
pub struct CsrfKey([u8; 32]);

impl std::fmt::Debug for CsrfKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CsrfKey(***)")
    }
}

impl CsrfKey {
    /// The key for `secret` (domain-separated from the cookie key).
    pub fn derive(secret: &[u8]) -> CsrfKey {
        use sha2::Digest;
        let mut h = Sha256::new();
        h.update(b"caucus-console-csrf\0");
        h.update(secret);
        CsrfKey(h.finalize().into())
    }

    /// The token for `binding`: 64 hex characters.
    pub fn token(&self, binding: &str) -> String {
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        mac.update(binding.as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_depend_on_the_secret_and_the_binding() {
        let k = CsrfKey::derive(b"secret one");
        let t = k.token("session-a");
        assert_eq!(t.len(), 64);
        assert_eq!(t, CsrfKey::derive(b"secret one").token("session-a"));
        assert_ne!(t, k.token("session-b"));
        assert_ne!(t, CsrfKey::derive(b"secret two").token("session-a"));
    }
}
