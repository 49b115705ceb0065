//! Merging the layers: defaults → file → env → flags.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::{Config, SECTIONS};
use crate::Error;

/// Flags every caucus binary accepts (flatten into the binary's own `Parser`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct CommonArgs {
    /// TOML config file (also `CAUCUS_CONFIG`).
    #[arg(long, env = "CAUCUS_CONFIG", global = true)]
    pub config: Option<PathBuf>,
    /// Print the effective configuration as TOML and exit.
    #[arg(long, global = true)]
    pub dump_config: bool,
    /// NATS URL (overrides file and env).
    #[arg(long, global = true)]
    pub nats_url: Option<String>,
    /// Redis URL (overrides file and env).
    #[arg(long, global = true)]
    pub redis_url: Option<String>,
    /// `pretty` or `json`.
    #[arg(long, global = true)]
    pub log_format: Option<String>,
    /// Any key, e.g. `--set worker.lease_ttl=3s` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE", global = true)]
    pub set: Vec<String>,
}

impl CommonArgs {
    /// Loads the configuration with these flags as the top layer.
    pub fn load(&self) -> Result<Config, Error> {
        let mut loader = ConfigLoader::new().env_from_process();
        if let Some(f) = &self.config {
            loader = loader.file(f);
        }
        if let Some(u) = &self.nats_url {
            loader = loader.set("nats.url", u);
        }
        if let Some(u) = &self.redis_url {
            loader = loader.set("redis.url", u);
        }
        if let Some(f) = &self.log_format {
            loader = loader.set("telemetry.log_format", f);
        }
        for kv in &self.set {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| Error::Config(format!("--set `{kv}`: expected KEY=VALUE")))?;
            loader = loader.set(k.trim(), v.trim());
        }
        loader.load()
    }
}

/// Builds a [`Config`] from layers; later layers win.
#[derive(Debug, Default, Clone)]
pub struct ConfigLoader {
    file: Option<PathBuf>,
    env: Vec<(String, String)>,
    flags: Vec<(String, String)>,
}

impl ConfigLoader {
    /// Defaults only.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a TOML file layer (it must exist).
    pub fn file(mut self, path: impl AsRef<Path>) -> Self {
        self.file = Some(path.as_ref().to_path_buf());
        self
    }

    /// Takes the `CAUCUS_*` variables of this process.
    pub fn env_from_process(self) -> Self {
        self.env(std::env::vars())
    }

    /// Takes `CAUCUS_*` variables from an iterator (tests pass their own).
    pub fn env(mut self, vars: impl IntoIterator<Item = (String, String)>) -> Self {
        self.env = vars
            .into_iter()
            .filter(|(k, _)| k.starts_with("CAUCUS_"))
            .collect();
        self
    }

    /// Sets one dotted key in the flag layer.
    pub fn set(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.flags.push((key.into(), value.into()));
        self
    }

    /// Merges the layers and validates the result.
    pub fn load(&self) -> Result<Config, Error> {
        let defaults = serde_json::to_value(Config::default())?;
        let mut tree = defaults.clone();
        if let Some(path) = &self.file {
            let text = std::fs::read_to_string(path)
                .map_err(|e| Error::Config(format!("cannot read {}: {e}", path.display())))?;
            let file: toml::Value = toml::from_str(&text)
                .map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
            let file = serde_json::to_value(file)?;
            merge_checked(&mut tree, &file, "", &path.display().to_string())?;
        }
        let mut env = self.env.clone();
        env.sort();
        for (k, v) in &env {
            if let Some(path) = env_key_to_path(k, &tree, &defaults) {
                set_path(&mut tree, &path, v, &format!("env {k}"))?;
            }
        }
        for (k, v) in &self.flags {
            let path: Vec<String> = k.split('.').map(str::to_string).collect();
            if lookup(&tree, &path).is_none() && !in_free_map(&path, &defaults) {
                return Err(Error::Config(format!("unknown config key `{k}`")));
            }
            set_path(&mut tree, &path, v, &format!("flag {k}"))?;
        }
        let cfg: Config = serde_json::from_value(tree)
            .map_err(|e| Error::Config(format!("invalid configuration: {e}")))?;
        cfg.validate()?;
        Ok(cfg)
    }
}

/// Deep-merges `over` into `base`, refusing keys `base` does not have.
fn merge_checked(base: &mut Value, over: &Value, at: &str, origin: &str) -> Result<(), Error> {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                let here = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                match b.get_mut(k) {
                    // Maps with free keys (e.g. capacity_cap) are empty objects by default.
                    Some(slot @ Value::Object(_)) if v.is_object() => {
                        if slot.as_object().is_some_and(Map::is_empty) {
                            *slot = v.clone();
                        } else {
                            merge_checked(slot, v, &here, origin)?;
                        }
                    }
                    Some(slot) => *slot = v.clone(),
                    None => {
                        return Err(Error::Config(format!("{origin}: unknown key `{here}`")));
                    }
                }
            }
            Ok(())
        }
        (b, o) => {
            *b = o.clone();
            Ok(())
        }
    }
}

/// `CAUCUS_WORKER_LEASE_TTL` → `["worker","lease_ttl"]` when that key exists.
fn env_key_to_path(var: &str, tree: &Value, defaults: &Value) -> Option<Vec<String>> {
    let rest = var.strip_prefix("CAUCUS_")?.to_ascii_lowercase();
    let mut parts: Vec<String> = rest.split("__").map(str::to_string).collect();
    let first = parts.remove(0);
    let mut path = Vec::new();
    match SECTIONS
        .iter()
        .find(|s| first.starts_with(&format!("{s}_")))
    {
        Some(s) => {
            path.push(s.to_string());
            path.push(first[s.len() + 1..].to_string());
        }
        None => path.push(first),
    }
    path.extend(parts);
    // The parent must exist; the leaf may be new only inside a free-key map.
    let parent = lookup(tree, &path[..path.len() - 1])?;
    match parent {
        Value::Object(m) if m.contains_key(path.last()?) => Some(path),
        Value::Object(_) if in_free_map(&path, defaults) => Some(path),
        _ => None,
    }
}

/// Whether `path` names a key of a free-key map (one whose default is
/// empty, e.g. `worker.capacity_cap`): any key may be added to it, however
/// many other layers or variables added keys before.
fn in_free_map(path: &[String], defaults: &Value) -> bool {
    path.len() > 2
        && matches!(lookup(defaults, &path[..path.len() - 1]), Some(Value::Object(m)) if m.is_empty())
}

fn lookup<'a>(tree: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(tree, |v, k| v.get(k))
}

/// Sets a string value at `path`, typed after the default it replaces.
fn set_path(tree: &mut Value, path: &[String], raw: &str, origin: &str) -> Result<(), Error> {
    let (leaf, parents) = path.split_last().expect("non-empty path");
    let mut node = tree;
    for p in parents {
        node = node
            .as_object_mut()
            .and_then(|m| m.get_mut(p))
            .ok_or_else(|| Error::Config(format!("{origin}: unknown key")))?;
    }
    let map = node
        .as_object_mut()
        .ok_or_else(|| Error::Config(format!("{origin}: not a table")))?;
    let typed = match map.get(leaf) {
        Some(Value::Bool(_)) => Value::Bool(match raw.to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => true,
            "0" | "false" | "no" | "off" => false,
            _ => return Err(Error::Config(format!("{origin}: `{raw}` is not a boolean"))),
        }),
        Some(Value::Number(_)) | None if raw.parse::<f64>().is_ok() => {
            serde_json::from_str(raw).map_err(|e| Error::Config(format!("{origin}: {e}")))?
        }
        Some(Value::Number(_)) => {
            return Err(Error::Config(format!("{origin}: `{raw}` is not a number")))
        }
        Some(Value::Array(_)) => Value::Array(
            raw.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| Value::String(s.to_string()))
                .collect(),
        ),
        _ => Value::String(raw.to_string()),
    };
    map.insert(leaf.clone(), typed);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn several_env_keys_of_one_free_map_all_count() {
        let c = ConfigLoader::new()
            .env([
                (
                    "CAUCUS_WORKER_CAPACITY_CAP__VALUATION".to_string(),
                    "2".to_string(),
                ),
                (
                    "CAUCUS_WORKER_CAPACITY_CAP__BUSINESS".to_string(),
                    "3".to_string(),
                ),
            ])
            .set("worker.capacity_cap.report", "4")
            .load()
            .unwrap();
        assert_eq!(c.worker.capacity_cap.get("valuation"), Some(&2));
        assert_eq!(c.worker.capacity_cap.get("business"), Some(&3));
        assert_eq!(c.worker.capacity_cap.get("report"), Some(&4));
    }

    #[test]
    fn defaults_are_valid() {
        let c = ConfigLoader::new().load().unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(c.max_body_bytes, 1024 * 1024);
        assert_eq!(c.subject_prefix, "caucus");
    }

    #[test]
    fn layers_override_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.toml");
        std::fs::write(
            &f,
            "subject_prefix = \"filepfx\"\n[nats]\nurl = \"nats://file:1\"\n[worker]\nslots = 3\nlease_ttl = \"7s\"\n",
        )
        .unwrap();
        let c = ConfigLoader::new()
            .file(&f)
            .env(env(&[
                ("CAUCUS_NATS_URL", "nats://env:2"),
                ("CAUCUS_REDIS_URL", "rediss://:pw@env:3"),
                ("CAUCUS_WORKER_AGENTS", "valuation, report"),
                ("CAUCUS_WORKER_CAPACITY_CAP__VALUATION", "2"),
                ("CAUCUS_CONFIG", "/ignored/by/mapping"),
                ("CAUCUS_BIN_DIR", "/ignored"),
            ]))
            .set("worker.slots", "5")
            .load()
            .unwrap();
        assert_eq!(c.subject_prefix, "filepfx");
        assert_eq!(c.nats.url, "nats://env:2");
        assert_eq!(c.redis.url, "rediss://:pw@env:3");
        assert_eq!(c.worker.slots, 5);
        assert_eq!(c.worker.lease_ttl, Duration::from_secs(7));
        assert_eq!(c.worker.agents, vec!["valuation", "report"]);
        assert_eq!(c.worker.capacity_cap.get("valuation"), Some(&2));
    }

    #[test]
    fn unknown_file_key_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.toml");
        std::fs::write(&f, "[worker]\nslotz = 3\n").unwrap();
        let e = ConfigLoader::new().file(&f).load().unwrap_err().to_string();
        assert!(e.contains("worker.slotz"), "{e}");
    }

    #[test]
    fn bad_values_are_specific() {
        let e = ConfigLoader::new()
            .set("worker.slots", "many")
            .load()
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a number"), "{e}");
        let e = ConfigLoader::new()
            .set("worker.lease_ttl", "soon")
            .load()
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid"), "{e}");
        let e = ConfigLoader::new()
            .set("nope.key", "1")
            .load()
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown config key `nope.key`"), "{e}");
        let e = ConfigLoader::new()
            .set("subject_prefix", "a.b")
            .load()
            .unwrap_err()
            .to_string();
        assert!(e.contains("subject_prefix"), "{e}");
    }

    #[test]
    fn dump_and_debug_show_no_secret() {
        let c = ConfigLoader::new()
            .env(env(&[
                ("CAUCUS_NATS_URL", "nats://u:natsurlpw@h:1,nats://h:2"),
                ("CAUCUS_NATS_USER", "worker"),
                ("CAUCUS_NATS_PASSWORD", "natspw"),
                ("CAUCUS_NATS_TOKEN", "natstok"),
                ("CAUCUS_NATS_NKEY_SEED", "SUSEED"),
                ("CAUCUS_REDIS_URL", "rediss://x:redisurlpw@h:3"),
                ("CAUCUS_REDIS_USERNAME", "worker"),
                ("CAUCUS_REDIS_PASSWORD", "redispw"),
                ("CAUCUS_TELEMETRY_OTLP_ENDPOINT", "http://o:otlppw@h:4317"),
            ]))
            .load()
            .unwrap();
        // The values are there, typed, for the code that connects.
        assert_eq!(c.redis.username.as_deref(), Some("worker"));
        assert_eq!(c.redis.password.as_ref().unwrap().expose(), "redispw");
        assert_eq!(c.nats.password.as_deref(), Some("natspw"));
        let secrets = [
            "natsurlpw",
            "natspw",
            "natstok",
            "SUSEED",
            "redisurlpw",
            "redispw",
            "otlppw",
        ];
        let dump = c.to_toml();
        for s in secrets {
            assert!(!dump.contains(s), "{s} in dump:\n{dump}");
        }
        // Debug of the connection sections (telemetry's endpoint is not a
        // credential field; the dump still strips a password from it).
        let debug = format!("{:?} {:?}", c.nats, c.redis);
        for s in &secrets[..6] {
            assert!(!debug.contains(s), "{s} in Debug:\n{debug}");
        }
        assert!(dump.contains("password = \"***\""), "{dump}");
        assert!(dump.contains("nkey_seed = \"***\""), "{dump}");
        assert!(dump.contains("\"nats://u:***@h:1,nats://h:2\""), "{dump}");
        assert!(dump.contains("\"rediss://x:***@h:3\""), "{dump}");
        assert!(dump.contains("username = \"worker\""), "{dump}");
    }

    #[test]
    fn dump_round_trips() {
        let c = ConfigLoader::new().set("worker.slots", "4").load().unwrap();
        let text = c.to_toml();
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("dump.toml");
        std::fs::write(&f, &text).unwrap();
        assert_eq!(ConfigLoader::new().file(&f).load().unwrap(), c);
    }
}
