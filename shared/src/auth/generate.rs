//! `caucus auth init DIR`: writes `nats.conf`, `redis-users.acl` and one
//! env file per role (and per person) into DIR, files 0600, DIR 0700.
//!
//! The env files are where the secrets live: a second run reads them back
//! and keeps every secret, adding only what is missing (a new person);
//! `rotate` makes new secrets for everybody. `nats.conf` and the ACL file
//! are always rewritten from the secrets, so a changed role table reaches
//! them without rotation.

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::subjects::Subjects;

use super::render::{acl_file, env_file, nats_conf};
use super::secrets::Credentials;
use super::{validate_person, Role, ROLES};

/// File name of the NATS server configuration.
pub const NATS_CONF: &str = "nats.conf";
/// File name of the Redis ACL file.
pub const REDIS_ACL: &str = "redis-users.acl";
/// Largest env file read back (ours are a few hundred bytes).
const MAX_ENV_BYTES: u64 = 64 * 1024;
/// Most persons in one directory (each is a NATS user and a file).
pub const MAX_PERSONS: usize = 1000;

/// What to generate.
#[derive(Debug, Clone)]
pub struct InitOptions {
    /// The directory to write.
    pub dir: PathBuf,
    /// Subject and Redis key prefix.
    pub prefix: String,
    /// Persons to add (`operator-<name>` users); those already in DIR are
    /// kept.
    pub operators: Vec<String>,
    /// New secrets for everybody.
    pub rotate: bool,
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InitReport {
    /// Users whose secrets were made in this run.
    pub created: Vec<String>,
    /// Users whose secrets were kept.
    pub kept: Vec<String>,
    /// Every file written.
    pub files: Vec<PathBuf>,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// A file or the directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// An operator name or the prefix is not a plain token.
    #[error("{0}")]
    Invalid(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> InitError + '_ {
    move |source| InitError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Runs the generator (see the module doc).
pub fn init(opts: &InitOptions) -> Result<InitReport, InitError> {
    validate_person(&opts.prefix).map_err(|e| {
        InitError::Invalid(format!("prefix: {}", e.replace("operator name", "prefix")))
    })?;
    for name in &opts.operators {
        validate_person(name).map_err(InitError::Invalid)?;
    }
    let dir = &opts.dir;
    fs::create_dir_all(dir).map_err(io(dir))?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(io(dir))?;

    let mut persons: BTreeSet<String> = existing_persons(dir)?;
    persons.extend(opts.operators.iter().cloned());
    if persons.len() > MAX_PERSONS {
        return Err(InitError::Invalid(format!(
            "at most {MAX_PERSONS} operators per directory, got {}",
            persons.len()
        )));
    }
    let roles: Vec<Role> = ROLES
        .into_iter()
        .chain(persons.into_iter().map(Role::Person))
        .collect();

    let mut report = InitReport::default();
    let mut users = Vec::with_capacity(roles.len());
    for role in roles {
        let path = dir.join(role.env_file());
        let kept = if opts.rotate { None } else { read_back(&path)? };
        let creds = match kept {
            Some(c) => {
                report.kept.push(role.user());
                c
            }
            None => {
                report.created.push(role.user());
                Credentials::generate()
            }
        };
        write_secret(&path, &env_file(&role, &creds, &opts.prefix))?;
        report.files.push(path);
        users.push((role, creds));
    }
    let subjects = Subjects::new(opts.prefix.clone());
    for (name, text) in [
        (NATS_CONF, nats_conf(&users, &subjects)),
        (REDIS_ACL, acl_file(&users, &opts.prefix)),
    ] {
        let path = dir.join(name);
        write_secret(&path, &text)?;
        report.files.push(path);
    }
    Ok(report)
}

/// Persons whose env files DIR already holds.
fn existing_persons(dir: &Path) -> Result<BTreeSet<String>, InitError> {
    let mut out = BTreeSet::new();
    for entry in fs::read_dir(dir).map_err(io(dir))? {
        let entry = entry.map_err(io(dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(person) = name
            .strip_prefix("operator-")
            .and_then(|n| n.strip_suffix(".env"))
        {
            if validate_person(person).is_ok() {
                out.insert(person.to_string());
            }
        }
    }
    Ok(out)
}

/// The secrets of an env file, if it exists and holds them.
fn read_back(path: &Path) -> Result<Option<Credentials>, InitError> {
    match fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(path)(e)),
        Ok(m) if m.len() > MAX_ENV_BYTES => {
            return Err(InitError::Invalid(format!(
                "{}: {} bytes is not an env file caucus auth init wrote",
                path.display(),
                m.len()
            )))
        }
        Ok(_) => {}
    }
    let text = fs::read_to_string(path).map_err(io(path))?;
    Ok(Credentials::from_env_text(&text))
}

/// Writes `text` to `path` with mode 0600, through a temp file renamed
/// over it (a reader never sees half a file; the mode holds from the
/// first byte).
fn write_secret(path: &Path, text: &str) -> Result<(), InitError> {
    let tmp = path.with_extension("tmp");
    let _ = fs::remove_file(&tmp);
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io(&tmp))?;
    f.write_all(text.as_bytes()).map_err(io(&tmp))?;
    f.sync_all().map_err(io(&tmp))?;
    drop(f);
    fs::rename(&tmp, path).map_err(io(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::secrets::{value, CONSOLE_SESSION_SECRET, NATS_PASSWORD, REDIS_PASSWORD};

    fn opts(dir: &Path, operators: &[&str], rotate: bool) -> InitOptions {
        InitOptions {
            dir: dir.to_path_buf(),
            prefix: "caucus".into(),
            operators: operators.iter().map(|s| s.to_string()).collect(),
            rotate,
        }
    }

    fn secret(dir: &Path, file: &str, key: &str) -> String {
        value(&fs::read_to_string(dir.join(file)).unwrap(), key).unwrap()
    }

    #[test]
    fn writes_every_file_private_and_keeps_secrets_until_rotated() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("auth");
        let first = init(&opts(&dir, &["alice"], false)).unwrap();
        assert_eq!(first.created.len(), ROLES.len() + 1);
        assert_eq!(
            fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        for f in &first.files {
            let mode = fs::metadata(f).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", f.display());
        }
        let w = secret(&dir, "worker.env", NATS_PASSWORD);
        let wr = secret(&dir, "worker.env", REDIS_PASSWORD);
        let session = secret(&dir, "console.env", CONSOLE_SESSION_SECRET);
        let conf = fs::read_to_string(dir.join(NATS_CONF)).unwrap();
        assert!(conf.contains(&w));

        // Again, with one more person: everything kept, alice too.
        let second = init(&opts(&dir, &["bob"], false)).unwrap();
        assert_eq!(second.created, ["operator-bob"]);
        assert!(second.kept.contains(&"operator-alice".to_string()));
        assert_eq!(secret(&dir, "worker.env", NATS_PASSWORD), w);
        assert_eq!(secret(&dir, "worker.env", REDIS_PASSWORD), wr);
        assert_eq!(
            secret(&dir, "console.env", CONSOLE_SESSION_SECRET),
            session,
            "console sessions survive a re-run"
        );
        assert_eq!(
            fs::read_to_string(dir.join(NATS_CONF))
                .unwrap()
                .matches(&w)
                .count(),
            1
        );

        // Rotation: new secrets for all, the old ones gone from the configs.
        let third = init(&opts(&dir, &[], true)).unwrap();
        assert!(third.kept.is_empty());
        assert_eq!(third.created.len(), ROLES.len() + 2);
        let w2 = secret(&dir, "worker.env", NATS_PASSWORD);
        assert_ne!(w2, w);
        let conf = fs::read_to_string(dir.join(NATS_CONF)).unwrap();
        assert!(!conf.contains(&w) && conf.contains(&w2));
        let acl = fs::read_to_string(dir.join(REDIS_ACL)).unwrap();
        assert!(!acl.contains(&wr));
    }

    #[test]
    fn bad_names_write_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("auth");
        assert!(matches!(
            init(&opts(&dir, &["a.b"], false)),
            Err(InitError::Invalid(_))
        ));
        assert!(!dir.exists());
    }
}
