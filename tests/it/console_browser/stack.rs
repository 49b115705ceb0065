//! The console the browser tests use: a `caucus-console` process on a free
//! loopback port with `auth = "users"` and a users file written by
//! `caucus console add-user`, plus logging a person in through the page.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use caucus_harness::{bin_path, free_port, Service, Stack};

use super::browser::Browser;

/// The person the tests log in as; decisions must be recorded under it.
pub const PERSON: &str = "ana";
/// Ana's password (the users file holds only its argon2 hash).
pub const PASSWORD: &str = "gate-keeper-7 staple";

/// A running console and where to reach it.
pub struct Console {
    /// The process.
    _service: Service,
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    _dir: tempfile::TempDir,
}

impl Console {
    /// Starts a console on `stack` that requires a login, with [`PERSON`]
    /// in its users file; `extra` env on top.
    pub fn start(stack: &Stack, extra: &[(&str, &str)]) -> Console {
        let dir = tempfile::tempdir().expect("tempdir");
        let users = add_user(dir.path(), PERSON, PASSWORD);
        let listen = format!("127.0.0.1:{}", free_port());
        let mut b = stack
            .service("caucus-console")
            .env("CAUCUS_CONSOLE_LISTEN", &listen)
            .env("CAUCUS_CONSOLE_AUTH", "users")
            .env("CAUCUS_CONSOLE_USERS_FILE", users.display().to_string())
            .env("CAUCUS_TELEMETRY_LOG_LEVEL", "info")
            .env("CAUCUS_SHUTDOWN_GRACE", "5s");
        for (k, v) in extra {
            b = b.env(*k, *v);
        }
        Console {
            _service: b.start(),
            url: format!("http://{listen}"),
            _dir: dir,
        }
    }
}

/// `caucus console add-user <name> --users-file <dir>/users
/// --password-stdin`, as an administrator would run it; returns the file.
pub fn add_user(dir: &Path, name: &str, password: &str) -> PathBuf {
    let file = dir.join("users");
    let mut child = Command::new(bin_path("caucus"))
        .args(["console", "add-user", name, "--users-file"])
        .arg(&file)
        .arg("--password-stdin")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("CAUCUS_HOME", "/nonexistent")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run caucus console add-user");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(format!("{password}\n").as_bytes())
        .expect("write the password");
    let out = child.wait_with_output().expect("caucus console add-user");
    assert!(
        out.status.success(),
        "caucus console add-user {name}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&file).expect("the users file");
    assert!(text.contains(name), "{name} in the users file: {text}");
    assert!(
        !text.contains(password),
        "the users file keeps a hash, not the password"
    );
    file
}

/// Logs `name` in through the login form: a page that needs a login sends
/// the browser to it, and after the login the header names the person.
pub async fn login(browser: &Browser, name: &str, password: &str) {
    browser.goto("/gates").await;
    let at = browser.location().await;
    assert!(
        at.starts_with("/login"),
        "a page without a session leads to the login form, not {at}"
    );
    browser.screenshot("login").await;
    browser
        .wait_css("form#login input[name=name]")
        .await
        .send_keys(name)
        .await
        .expect("type the name");
    browser
        .wait_css("form#login input[name=password]")
        .await
        .send_keys(password)
        .await
        .expect("type the password");
    let submit = browser.wait_css("form#login button[type=submit]").await;
    let at = browser.submit(&submit).await;
    assert!(!at.starts_with("/login"), "logged in, not still on {at}");
    browser
        .wait_text("header .who", "the person's name in the header", |t| {
            t.contains(name)
        })
        .await;
}
