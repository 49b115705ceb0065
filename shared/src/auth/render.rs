//! The text of the files `caucus auth init` writes, from the role table.

use crate::subjects::Subjects;

use super::nats::permissions;
use super::redis_acl::rules;
use super::secrets::{
    Credentials, CONSOLE_SESSION_SECRET, IDENTITY, NATS_PASSWORD, NATS_USER, REDIS_PASSWORD,
    REDIS_USERNAME, REQUIRE_IDENTITY, SUBJECT_PREFIX,
};
use super::Role;

/// A quoted string of the NATS configuration format. Every subject and
/// password we write is plain ASCII without quotes or backslashes;
/// escape them anyway so a future subject cannot break the file.
fn quoted(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

fn list(items: &[String]) -> String {
    let q: Vec<String> = items.iter().map(|i| quoted(i)).collect();
    format!("[{}]", q.join(", "))
}

/// `nats.conf`: an `authorization` block with one user per role, for
/// `nats-server -c nats.conf -js …` (or `include`d by another file). No
/// `no_auth_user`: a connection without credentials is refused.
pub fn nats_conf(users: &[(Role, Credentials)], subjects: &Subjects) -> String {
    let mut out = String::from(
        "# Written by `caucus auth init` (docs/SECURITY.md); keep it secret.\n\
         # One user per role; anonymous connections are refused.\n\
         authorization {\n  users = [\n",
    );
    for (role, creds) in users {
        let p = permissions(role, subjects);
        out.push_str(&format!(
            "    {{\n      user: {}\n      password: {}\n      permissions: {{\n        \
             publish: {{\n          allow: {}\n          deny: {}\n        }}\n        \
             subscribe: {{\n          allow: {}\n        }}\n        \
             allow_responses: true\n      }}\n    }}\n",
            quoted(&role.user()),
            quoted(&creds.nats_password),
            list(&p.publish_allow),
            list(&p.publish_deny),
            list(&p.subscribe_allow),
        ));
    }
    out.push_str("  ]\n}\n");
    out
}

/// `redis-users.acl`: `user default off`, then one user per role that
/// uses Redis.
pub fn acl_file(users: &[(Role, Credentials)], prefix: &str) -> String {
    let mut out = String::from("user default off resetkeys resetchannels -@all\n");
    for (role, creds) in users {
        if let Some(r) = rules(role, prefix) {
            out.push_str(&format!(
                "user {} on >{} {r}\n",
                role.user(),
                creds.redis_password
            ));
        }
    }
    out
}

/// `<role>.env`: the role's credentials as `CAUCUS_*` variables.
pub fn env_file(role: &Role, creds: &Credentials, prefix: &str) -> String {
    let mut out = format!(
        "# Credentials of `{}` (caucus auth init; docs/SECURITY.md). Keep secret.\n\
         {NATS_USER}={}\n{NATS_PASSWORD}={}\n",
        role.user(),
        role.user(),
        creds.nats_password
    );
    if role.uses_redis() {
        out.push_str(&format!(
            "{REDIS_USERNAME}={}\n{REDIS_PASSWORD}={}\n",
            role.user(),
            creds.redis_password
        ));
    }
    if role.requires_identity() {
        out.push_str(&format!("{REQUIRE_IDENTITY}=true\n"));
    }
    if let Role::Person(name) = role {
        out.push_str(&format!("{IDENTITY}={name}\n"));
    }
    if *role == Role::Console {
        // Every console behind one load balancer reads this file, so they
        // all accept each other's sessions.
        out.push_str(&format!(
            "{CONSOLE_SESSION_SECRET}={}\n",
            creds.session_secret
        ));
    }
    if prefix != Subjects::default().prefix() {
        out.push_str(&format!("{SUBJECT_PREFIX}={prefix}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::secrets::value;

    fn creds() -> Credentials {
        Credentials {
            nats_password: "n".repeat(40),
            redis_password: "r".repeat(40),
            session_secret: "s".repeat(40),
        }
    }

    #[test]
    fn env_files_carry_what_the_role_needs_only() {
        let w = env_file(&Role::Worker, &creds(), "caucus");
        assert_eq!(value(&w, REDIS_USERNAME).as_deref(), Some("worker"));
        assert!(value(&w, REQUIRE_IDENTITY).is_none());
        let o = env_file(&Role::Operator, &creds(), "caucus");
        assert!(value(&o, REDIS_PASSWORD).is_none());
        let c = env_file(&Role::Coordinator, &creds(), "x");
        assert_eq!(value(&c, REQUIRE_IDENTITY).as_deref(), Some("true"));
        assert_eq!(value(&c, SUBJECT_PREFIX).as_deref(), Some("x"));
        let a = env_file(&Role::Person("alice".into()), &creds(), "caucus");
        assert_eq!(value(&a, IDENTITY).as_deref(), Some("alice"));
        assert_eq!(value(&a, NATS_USER).as_deref(), Some("operator-alice"));
        assert!(value(&a, CONSOLE_SESSION_SECRET).is_none());
        let k = env_file(&Role::Console, &creds(), "caucus");
        assert_eq!(value(&k, NATS_USER).as_deref(), Some("console"));
        assert_eq!(
            value(&k, CONSOLE_SESSION_SECRET).as_deref(),
            Some("s".repeat(40).as_str())
        );
        assert!(value(&k, REDIS_PASSWORD).is_none());
    }

    #[test]
    fn the_acl_file_turns_the_default_user_off() {
        let users = vec![(Role::Worker, creds()), (Role::Publisher, creds())];
        let acl = acl_file(&users, "caucus");
        assert!(acl.starts_with("user default off"));
        assert!(acl.contains("user worker on >rrrr"));
        assert!(!acl.contains("publisher"), "no Redis for the publisher");
    }

    #[test]
    fn nats_conf_has_no_anonymous_user() {
        let conf = nats_conf(&[(Role::Worker, creds())], &Subjects::default());
        assert!(!conf.contains("no_auth_user"));
        assert!(conf.contains("user: \"worker\""));
        assert!(conf.contains("\"$JS.API.STREAM.DELETE.>\""));
    }
}
