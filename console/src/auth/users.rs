//! The users file of `console.auth = "users"`: one `name:argon2-hash` per
//! line, written by `caucus console add-user` and read at each login (so
//! a user added or changed needs no restart).

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;

/// Why the users file could not be read, written or used.
#[derive(Debug, thiserror::Error)]
pub enum UsersError {
    /// The file could not be read or written.
    #[error("users file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A line is not `name:hash` with a valid name and an argon2 hash.
    #[error("users file {path}, line {line}: {why}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        why: String,
    },
    /// The name cannot be a person (it becomes a subject token).
    #[error("{0}")]
    BadName(String),
    /// The password is empty.
    #[error("the password is empty")]
    EmptyPassword,
    /// argon2 refused to hash.
    #[error("cannot hash the password: {0}")]
    Hash(String),
}

/// Name → argon2 PHC hash, sorted by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Users {
    hashes: BTreeMap<String, String>,
}

impl Users {
    /// Reads `path`; a missing file is an empty list (the first
    /// `add-user` creates it).
    pub fn load(path: &Path) -> Result<Users, UsersError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Users::parse(&text, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Users::default()),
            Err(source) => Err(UsersError::Io {
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// Parses the file's text (`#` comments and blank lines skipped);
    /// `path` only names the file in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Users, UsersError> {
        let mut hashes = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |why: String| UsersError::Malformed {
                path: path.to_path_buf(),
                line: i + 1,
                why,
            };
            let (name, hash) = line
                .split_once(':')
                .ok_or_else(|| bad("expected `name:argon2-hash`".into()))?;
            caucus_shared::auth::validate_person(name).map_err(bad)?;
            PasswordHash::new(hash).map_err(|e| bad(format!("not an argon2 hash: {e}")))?;
            hashes.insert(name.to_string(), hash.to_string());
        }
        Ok(Users { hashes })
    }

    /// The file's text.
    pub fn render(&self) -> String {
        let mut out =
            String::from("# caucus console users (caucus console add-user); name:argon2-hash\n");
        for (name, hash) in &self.hashes {
            out.push_str(&format!("{name}:{hash}\n"));
        }
        out
    }

    /// Sets `name`'s password; `true` when the user is new.
    pub fn set(&mut self, name: &str, password: &str) -> Result<bool, UsersError> {
        caucus_shared::auth::validate_person(name)
            .map_err(|e| UsersError::BadName(e.replace("operator name", "user name")))?;
        let hash = hash_password(password)?;
        Ok(self.hashes.insert(name.to_string(), hash).is_none())
    }

    /// Whether `name` exists and `password` is theirs. Takes as long for
    /// an unknown name as for a wrong password, so the answer's time does
    /// not tell which names exist.
    pub fn verify(&self, name: &str, password: &str) -> bool {
        match self.hashes.get(name) {
            Some(hash) => verify_password(hash, password),
            None => {
                let _ = verify_password(dummy_hash(), password);
                false
            }
        }
    }

    /// How many users.
    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// Writes the file (mode 0600, through a temp file renamed over it).
    pub fn save(&self, path: &Path) -> Result<(), UsersError> {
        let io = |source| UsersError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let tmp = path.with_extension("tmp");
        let _ = std::fs::remove_file(&tmp);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(io)?;
        f.write_all(self.render().as_bytes()).map_err(io)?;
        f.sync_all().map_err(io)?;
        drop(f);
        std::fs::rename(&tmp, path).map_err(io)
    }
}

/// An argon2id PHC string for `password` with a random salt.
pub fn hash_password(password: &str) -> Result<String, UsersError> {
    if password.is_empty() {
        return Err(UsersError::EmptyPassword);
    }
    let salt = SaltString::encode_b64(&rand::random::<[u8; 16]>())
        .map_err(|e| UsersError::Hash(e.to_string()))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| UsersError::Hash(e.to_string()))
}

/// Whether `password` matches the PHC string `hash` (false for a hash
/// that does not parse).
pub fn verify_password(hash: &str, password: &str) -> bool {
    PasswordHash::new(hash)
        .map(|h| {
            Argon2::default()
                .verify_password(password.as_bytes(), &h)
                .is_ok()
        })
        .unwrap_or(false)
}

/// A hash of nothing anybody types, verified against for unknown names.
fn dummy_hash() -> &'static str {
    static DUMMY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DUMMY.get_or_init(|| hash_password("\u{0}no such user").unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_verify_their_password_only() {
        let h = hash_password("s3cret").unwrap();
        assert!(h.starts_with("$argon2id$"), "{h}");
        assert!(verify_password(&h, "s3cret"));
        assert!(!verify_password(&h, "s3creT"));
        assert!(!verify_password("not a hash", "s3cret"));
        assert_ne!(h, hash_password("s3cret").unwrap(), "salted");
        assert!(matches!(hash_password(""), Err(UsersError::EmptyPassword)));
    }

    #[test]
    fn the_file_round_trips_and_rejects_bad_lines() {
        let mut users = Users::default();
        assert!(users.set("alice", "pw1").unwrap());
        assert!(!users.set("alice", "pw2").unwrap(), "changed, not new");
        assert!(users.set("bob", "pw3").unwrap());
        assert!(users.set("a.b", "x").is_err());
        let p = Path::new("users");
        let back = Users::parse(&users.render(), p).unwrap();
        assert_eq!(back, users);
        assert!(back.verify("alice", "pw2"));
        assert!(!back.verify("alice", "pw1"));
        assert!(!back.verify("carol", "pw2"));
        let e = Users::parse("# c\n\nalice\n", p).unwrap_err().to_string();
        assert!(
            e.contains("line 3") && e.contains("name:argon2-hash"),
            "{e}"
        );
        let e = Users::parse("alice:plain\n", p).unwrap_err().to_string();
        assert!(e.contains("not an argon2 hash"), "{e}");
    }

    #[test]
    fn saved_files_are_private_and_a_missing_file_is_empty() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("caucus-users-{:x}", rand::random::<u64>()));
        let path = dir.join("sub/users");
        assert!(Users::load(&path).unwrap().is_empty());
        let mut users = Users::default();
        users.set("alice", "pw").unwrap();
        users.save(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(Users::load(&path).unwrap().verify("alice", "pw"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
