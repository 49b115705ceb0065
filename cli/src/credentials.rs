//! Where the CLI finds its credentials when none are configured.
//!
//! `caucus auth init DIR` (and `scripts/stack up`, which runs it into
//! `.caucus/auth/`) writes one env file per role. A person at the local
//! stack should not have to export the operator's password by hand: when
//! the configuration (file, `CAUCUS_*` environment, flags) names no NATS
//! credentials at all, the CLI reads the operator's file and applies its
//! `CAUCUS_*` values through the same environment mapping the services use,
//! without changing the process environment (so nothing it starts inherits
//! them). Configured credentials always win: the file is then not read.
//!
//! Looked for, first found wins: `$CAUCUS_AUTH_DIR/operator.env`,
//! `.caucus/auth/operator.env` under the current directory, then `auth/` in
//! the local stack's state directory (`$CAUCUS_STATE` or `.caucus` in the
//! checkout, [`crate::stack::state_dir`]).

use std::path::{Path, PathBuf};

use anyhow::Context;

use caucus_shared::config::{CommonArgs, ConfigLoader, NatsConfig};
use caucus_shared::Config;

/// The operator role's env file in an auth directory.
const OPERATOR_FILE: &str = "operator.env";

/// Larger files are not env files `caucus auth init` wrote.
const MAX_FILE_BYTES: u64 = 64 * 1024;

/// Loads the CLI's configuration as [`CommonArgs::load`] does, then, when it
/// names no NATS credentials, takes the operator's from the first env file
/// found (see the module doc).
pub fn load_config(common: &CommonArgs) -> anyhow::Result<Config> {
    let config = common.load()?;
    if has_nats_credentials(&config.nats) {
        return Ok(config);
    }
    let found = candidates().into_iter().find(|p| p.is_file());
    let Some(file) = found else {
        return Ok(config);
    };
    let config = apply_file(config, &file)?;
    if wants_debug(&config) {
        // Says where, never what: the file holds the password.
        eprintln!(
            "caucus: no NATS credentials configured: using user `{}` from {}",
            config.nats.user.as_deref().unwrap_or("-"),
            file.display()
        );
    }
    Ok(config)
}

/// The `CAUCUS_*` variables of another role's env file, from the first auth
/// directory (in [`load_config`]'s order) that has `<role>.env`; empty when
/// none has (authentication off). For a process the CLI starts as that role:
/// `caucus demo`'s extra valuation worker runs as `worker`, not as the
/// operator whose credentials the CLI holds.
pub fn role_env(role: &str) -> anyhow::Result<Vec<(String, String)>> {
    role_env_in(candidates(), role)
}

/// [`role_env`] beside the operator files `candidates` (tests pass their own).
fn role_env_in(candidates: Vec<PathBuf>, role: &str) -> anyhow::Result<Vec<(String, String)>> {
    let name = format!("{role}.env");
    let found = candidates
        .into_iter()
        .filter_map(|f| f.parent().map(|d| d.join(&name)))
        .find(|f| f.is_file());
    match found {
        Some(file) => read_env_file(&file),
        None => Ok(Vec::new()),
    }
}

/// Whether any way of authenticating to NATS is configured.
fn has_nats_credentials(nats: &NatsConfig) -> bool {
    nats.user.is_some()
        || nats.password.is_some()
        || nats.token.is_some()
        || nats.nkey_seed.is_some()
        || nats.credentials_file.is_some()
}

/// The files to try, in order.
fn candidates() -> Vec<PathBuf> {
    let explicit = std::env::var_os("CAUCUS_AUTH_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from);
    let cwd = std::env::current_dir().ok();
    let state = crate::stack::state_dir();
    candidate_files(explicit, cwd.as_deref(), state.as_deref())
}

/// [`candidates`] from its inputs (tests pass their own).
fn candidate_files(
    auth_dir: Option<PathBuf>,
    cwd: Option<&Path>,
    state_dir: Option<&Path>,
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    out.extend(auth_dir.map(|d| d.join(OPERATOR_FILE)));
    out.extend(cwd.map(|d| d.join(".caucus").join("auth").join(OPERATOR_FILE)));
    out.extend(state_dir.map(|d| d.join("auth").join(OPERATOR_FILE)));
    out.dedup();
    out
}

/// `config` with the NATS credentials of the env file `file`.
fn apply_file(mut config: Config, file: &Path) -> anyhow::Result<Config> {
    // Typed by the services' own env mapping (CAUCUS_NATS_USER → nats.user).
    let found = ConfigLoader::new()
        .env(read_env_file(file)?)
        .load()
        .with_context(|| format!("{}: invalid credentials file", file.display()))?;
    let from = found.nats;
    config.nats.user = from.user;
    config.nats.password = from.password;
    config.nats.token = from.token;
    config.nats.nkey_seed = from.nkey_seed;
    config.nats.credentials_file = from.credentials_file;
    Ok(config)
}

/// The `CAUCUS_*` pairs of the env file `file` (bounded, see [`parse_env`]).
fn read_env_file(file: &Path) -> anyhow::Result<Vec<(String, String)>> {
    warn_if_readable_by_others(file);
    let size = std::fs::metadata(file)
        .with_context(|| format!("cannot read {}", file.display()))?
        .len();
    anyhow::ensure!(
        size <= MAX_FILE_BYTES,
        "{} is {size} bytes: not an env file of `caucus auth init` (at most {MAX_FILE_BYTES})",
        file.display()
    );
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    Ok(parse_env(&text))
}

/// The `CAUCUS_*` pairs of an env file: `KEY=VALUE` lines, an optional
/// `export ` before them, `#` comments, values optionally quoted.
fn parse_env(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(str::trim)
        .map(|l| l.strip_prefix("export ").unwrap_or(l))
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| k.starts_with("CAUCUS_"))
        .map(|(k, v)| (k.trim().to_string(), unquote(v.trim()).to_string()))
        .collect()
}

fn unquote(v: &str) -> &str {
    for q in ['"', '\''] {
        if let Some(inner) = v.strip_prefix(q).and_then(|r| r.strip_suffix(q)) {
            return inner;
        }
    }
    v
}

/// Whether the person asked for debug output (`RUST_LOG` or
/// `telemetry.log_level` naming debug or trace).
fn wants_debug(config: &Config) -> bool {
    let rust_log = std::env::var("RUST_LOG").unwrap_or_default();
    [rust_log.as_str(), config.telemetry.log_level.as_str()]
        .iter()
        .any(|l| l.contains("debug") || l.contains("trace"))
}

/// `caucus auth init` writes its files 0600; anything looser is said once.
fn warn_if_readable_by_others(file: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(m) = std::fs::metadata(file) {
            if m.permissions().mode() & 0o077 != 0 {
                eprintln!(
                    "caucus: warning: {} can be read by other users (chmod 600 it)",
                    file.display()
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory of its own under the system temp dir, removed on drop
    /// (the CLI has no tempfile dev-dependency).
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            let d = std::env::temp_dir().join(format!(
                "caucus-cli-credentials-{name}-{}",
                std::process::id()
            ));
            std::fs::create_dir_all(&d).unwrap();
            Scratch(d)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn write(dir: &Path, text: &str) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let f = dir.join(OPERATOR_FILE);
        std::fs::write(&f, text).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        f
    }

    #[test]
    fn env_files_parse_as_generated_and_as_people_write_them() {
        let pairs = parse_env(
            "# caucus auth init\nCAUCUS_NATS_USER=operator\nexport CAUCUS_NATS_PASSWORD=\"a=b\"\n\
             CAUCUS_REDIS_USERNAME='operator'\nOTHER=x\nnot a pair\n\n",
        );
        assert_eq!(
            pairs,
            vec![
                ("CAUCUS_NATS_USER".into(), "operator".into()),
                ("CAUCUS_NATS_PASSWORD".into(), "a=b".into()),
                ("CAUCUS_REDIS_USERNAME".into(), "operator".into()),
            ]
        );
    }

    #[test]
    fn the_explicit_dir_comes_first_then_the_current_dir_then_the_stack() {
        let files = candidate_files(
            Some(PathBuf::from("/a")),
            Some(Path::new("/w")),
            Some(Path::new("/s")),
        );
        assert_eq!(
            files,
            vec![
                PathBuf::from("/a/operator.env"),
                PathBuf::from("/w/.caucus/auth/operator.env"),
                PathBuf::from("/s/auth/operator.env"),
            ]
        );
        let same = candidate_files(None, Some(Path::new("/w")), Some(Path::new("/w/.caucus")));
        assert_eq!(same, vec![PathBuf::from("/w/.caucus/auth/operator.env")]);
    }

    #[test]
    fn a_file_supplies_the_nats_user_and_password_and_nothing_else() {
        let dir = Scratch::new("supply");
        let f = write(
            &dir.0,
            "CAUCUS_NATS_USER=operator\nCAUCUS_NATS_PASSWORD=s3cret\nCAUCUS_NATS_URL=nats://elsewhere:1\n",
        );
        let base = ConfigLoader::new()
            .set("nats.url", "nats://here:4222")
            .load()
            .unwrap();
        let c = apply_file(base, &f).unwrap();
        assert_eq!(c.nats.user.as_deref(), Some("operator"));
        assert_eq!(c.nats.password.as_deref(), Some("s3cret"));
        // Only credentials come from the file: the URL stays the configured one.
        assert_eq!(c.nats.url, "nats://here:4222");
    }

    #[test]
    fn another_roles_file_comes_from_the_first_directory_that_has_it() {
        let a = Scratch::new("role-a");
        let b = Scratch::new("role-b");
        write(&a.0, "CAUCUS_NATS_USER=operator\n");
        std::fs::write(b.0.join("worker.env"), "CAUCUS_NATS_USER=worker\n").unwrap();
        let files = vec![a.0.join(OPERATOR_FILE), b.0.join(OPERATOR_FILE)];
        assert_eq!(
            role_env_in(files.clone(), "worker").unwrap(),
            vec![("CAUCUS_NATS_USER".to_string(), "worker".to_string())]
        );
        assert!(role_env_in(files, "admin").unwrap().is_empty());
    }

    #[test]
    fn any_configured_nats_credential_means_the_file_is_not_read() {
        assert!(!has_nats_credentials(&NatsConfig::default()));
        let token = NatsConfig {
            token: Some("t".into()),
            ..NatsConfig::default()
        };
        assert!(has_nats_credentials(&token));
        let creds = NatsConfig {
            credentials_file: Some(PathBuf::from("/x.creds")),
            ..NatsConfig::default()
        };
        assert!(has_nats_credentials(&creds));
    }

    #[test]
    fn an_oversized_or_invalid_file_is_an_error_naming_it() {
        let dir = Scratch::new("invalid");
        let f = write(&dir.0, &"#".repeat(MAX_FILE_BYTES as usize + 1));
        let e = apply_file(Config::default(), &f).unwrap_err().to_string();
        assert!(e.contains("operator.env"), "{e}");
        let f = write(&dir.0, "CAUCUS_NATS_CONNECT_ATTEMPTS=many\n");
        let e = format!("{:#}", apply_file(Config::default(), &f).unwrap_err());
        assert!(
            e.contains("operator.env") && e.contains("not a number"),
            "{e}"
        );
    }
}
