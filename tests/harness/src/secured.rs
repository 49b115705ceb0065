//! Servers with authentication on, as `caucus auth init DIR` configures
//! them: nats-server with `DIR/nats.conf`, redis-server with
//! `--aclfile DIR/redis-users.acl`, and caucus binaries started with their
//! role's `DIR/<role>.env`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::process::Proc;
use crate::redis_node::{self, wait_own_server};
use crate::{free_port, Nats, ServiceBuilder};

/// Free ports tried before giving up.
const PORT_ATTEMPTS: u32 = 5;

/// The `KEY=VALUE` lines of an env file (comments and blank lines
/// skipped; `export ` and surrounding double quotes removed).
pub fn read_env_file(path: &Path) -> Vec<(String, String)> {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            let l = l.strip_prefix("export ").unwrap_or(l);
            let (k, v) = l.split_once('=')?;
            let v = v
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(v);
            Some((k.to_string(), v.to_string()))
        })
        .collect()
}

fn lookup<'a>(env: &'a [(String, String)], key: &str) -> Option<&'a str> {
    env.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// A redis-server that loads an ACL file (its `default` user is off, so
/// readiness is checked as a named user).
pub struct AclRedis {
    proc: Proc,
    port: u16,
    dir: tempfile::TempDir,
    user: String,
    password: String,
}

impl AclRedis {
    /// Starts redis-server with `--aclfile acl` and waits until `user`
    /// (e.g. the admin) can authenticate and the server is ours.
    pub fn start(acl: &Path, user: &str, password: &str) -> AclRedis {
        let dir = tempfile::Builder::new()
            .prefix("caucus-redis-acl-")
            .tempdir()
            .expect("tempdir");
        let port = free_port();
        let mut r = AclRedis {
            proc: spawn_acl(port, dir.path(), acl, 0),
            port,
            dir,
            user: user.to_string(),
            password: password.to_string(),
        };
        for attempt in 1..=PORT_ATTEMPTS {
            if r.wait_ready_or_exit() {
                return r;
            }
            if attempt < PORT_ATTEMPTS {
                r.port = free_port();
                r.proc = spawn_acl(r.port, r.dir.path(), acl, attempt);
            }
        }
        panic!(
            "redis-server --aclfile did not start (logs in {})",
            r.dir.path().display()
        );
    }

    /// `redis://127.0.0.1:<port>`, without credentials.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Sends one inline command, after `AUTH user password` when `auth`
    /// is given; returns the raw reply of the command (or of a refused
    /// AUTH).
    pub fn command_as(&self, auth: Option<(&str, &str)>, line: &str) -> String {
        raw_as(self.port, auth, line).unwrap_or_else(|e| panic!("redis {line}: {e}"))
    }

    /// [`AclRedis::command_as`] as the user it was started with.
    pub fn command(&self, line: &str) -> String {
        self.command_as(Some((&self.user, &self.password)), line)
    }

    fn wait_ready_or_exit(&mut self) -> bool {
        let (port, user, password) = (self.port, self.user.clone(), self.password.clone());
        wait_own_server(
            &mut self.proc,
            &format!("redis-server --aclfile ready on {port}"),
            || raw_as(port, Some((&user, &password)), "INFO server").ok(),
        )
    }
}

fn spawn_acl(port: u16, dir: &Path, acl: &Path, starts: u32) -> Proc {
    let mut args = ["--save", "", "--appendonly", "no", "--aclfile"]
        .map(String::from)
        .to_vec();
    args.push(acl.display().to_string());
    redis_node::spawn(port, dir, &args, starts)
}

/// Reads until a whole reply to the last command is in: with AUTH first,
/// two replies are expected; a bulk reply (`$n`) is read to its end.
fn raw_as(port: u16, auth: Option<(&str, &str)>, line: &str) -> std::io::Result<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut req = String::new();
    if let Some((u, p)) = auth {
        req.push_str(&format!("AUTH {u} {p}\r\n"));
    }
    req.push_str(&format!("{line}\r\n"));
    s.write_all(req.as_bytes())?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = s.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf);
        let replies = if auth.is_some() { 2 } else { 1 };
        if let Some(last) = complete_replies(&text, replies) {
            return Ok(last);
        }
        if buf.len() > 1 << 20 {
            break;
        }
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// The length of the whole RESP reply at the start of `text` (simple
/// lines, bulk strings, arrays of them, nested); `None` while incomplete.
fn reply_len(text: &str) -> Option<usize> {
    let end = text.find("\r\n")?;
    let head = &text[..end];
    let after = end + 2;
    if let Some(len) = head.strip_prefix('$') {
        let len: i64 = len.parse().ok()?;
        if len < 0 {
            return Some(after);
        }
        let total = after + len as usize + 2;
        return (text.len() >= total).then_some(total);
    }
    if let Some(n) = head.strip_prefix('*') {
        let n: i64 = n.parse().ok()?;
        let mut at = after;
        for _ in 0..n.max(0) {
            at += reply_len(&text[at..])?;
        }
        return Some(at);
    }
    Some(after)
}

/// The `n`-th reply of `text` when `n` whole replies are in; `None` while
/// incomplete. An error reply to AUTH ends the exchange early: it is
/// returned.
fn complete_replies(text: &str, n: usize) -> Option<String> {
    let mut rest = text;
    for i in 0..n {
        let len = reply_len(rest)?;
        let reply = &rest[..len];
        if i + 1 == n || (n == 2 && i == 0 && reply.starts_with('-')) {
            return Some(reply.to_string());
        }
        rest = &rest[len..];
    }
    None
}

/// NATS and Redis started with the configuration of an auth directory
/// written by `caucus auth init`.
pub struct SecuredStack {
    /// nats-server with `DIR/nats.conf`.
    pub nats: Nats,
    /// redis-server with `DIR/redis-users.acl`.
    pub redis: AclRedis,
    /// The auth directory.
    pub auth_dir: PathBuf,
}

impl SecuredStack {
    /// Starts both servers from `auth_dir` (its `admin.env` gives the
    /// Redis user readiness is checked with).
    pub fn start(auth_dir: &Path) -> SecuredStack {
        let conf_path = auth_dir.join("nats.conf");
        let conf = std::fs::read_to_string(&conf_path)
            .unwrap_or_else(|e| panic!("read {}: {e}", conf_path.display()));
        let admin = read_env_file(&auth_dir.join("admin.env"));
        let user = lookup(&admin, "CAUCUS_REDIS_USERNAME").expect("admin.env: Redis user");
        let password = lookup(&admin, "CAUCUS_REDIS_PASSWORD").expect("admin.env: Redis password");
        SecuredStack {
            nats: Nats::start_with_config(&conf),
            redis: AclRedis::start(&auth_dir.join("redis-users.acl"), user, password),
            auth_dir: auth_dir.to_path_buf(),
        }
    }

    /// The `CAUCUS_*` lines of `<file>` in the auth dir (`worker.env`,
    /// `operator-alice.env`, …).
    pub fn env_of(&self, file: &str) -> Vec<(String, String)> {
        read_env_file(&self.auth_dir.join(file))
    }

    /// Everything a process of role file `file` needs: the servers' URLs
    /// (without credentials) and the file's `CAUCUS_*` lines, as
    /// `scripts/stack` passes them.
    pub fn env(&self, file: &str) -> Vec<(String, String)> {
        let mut out = vec![
            ("CAUCUS_NATS_URL".to_string(), self.nats.url()),
            ("CAUCUS_REDIS_URL".to_string(), self.redis.url()),
        ];
        out.extend(self.env_of(file));
        out
    }

    /// A builder for caucus binary `bin` running as role file `file`
    /// (`coordinator.env`, …).
    pub fn service(&self, bin: &str, file: &str) -> ServiceBuilder {
        let mut b = ServiceBuilder::new(bin);
        for (k, v) in self.env(file) {
            b = b.env(k, v);
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_complete_only_when_whole() {
        assert_eq!(complete_replies("+OK\r\n", 1).as_deref(), Some("+OK\r\n"));
        assert_eq!(complete_replies("+OK\r\n", 2), None);
        assert_eq!(
            complete_replies("+OK\r\n$3\r\nabc\r\n", 2).as_deref(),
            Some("$3\r\nabc\r\n")
        );
        assert_eq!(complete_replies("+OK\r\n$10\r\nabc", 2), None);
        assert_eq!(complete_replies("+OK\r\n*2\r\n$1\r\na\r\n", 2), None);
        assert_eq!(
            complete_replies("+OK\r\n*2\r\n$1\r\na\r\n*1\r\n:1\r\n", 2).as_deref(),
            Some("*2\r\n$1\r\na\r\n*1\r\n:1\r\n")
        );
        assert_eq!(
            complete_replies("-WRONGPASS x\r\n", 2).as_deref(),
            Some("-WRONGPASS x\r\n")
        );
    }

    #[test]
    fn env_files_are_read_as_key_value() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.env");
        std::fs::write(&p, "# c\n\nA=1\nexport B=\"two\"\n").unwrap();
        assert_eq!(
            read_env_file(&p),
            [("A".into(), "1".into()), ("B".into(), "two".into())]
        );
    }
}
