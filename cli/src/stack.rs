//! `caucus up` / `down` run scripts/stack; other commands pick up the URLs
//! it recorded in `.caucus/stack.env` when the environment has none.

use std::path::{Path, PathBuf};

/// The repository root: `$CAUCUS_HOME` or the nearest ancestor of the
/// current directory holding `scripts/stack`.
pub fn repo_root() -> Option<PathBuf> {
    if let Some(h) = std::env::var_os("CAUCUS_HOME") {
        return Some(PathBuf::from(h));
    }
    let cwd = std::env::current_dir().ok()?;
    cwd.ancestors()
        .find(|d| d.join("scripts").join("stack").is_file())
        .map(Path::to_path_buf)
}

/// The local stack's state directory: `$CAUCUS_STATE` (what
/// `scripts/stack` uses) or `.caucus` in the repository root.
pub fn state_dir() -> Option<PathBuf> {
    if let Some(s) = std::env::var_os("CAUCUS_STATE").filter(|s| !s.is_empty()) {
        return Some(PathBuf::from(s));
    }
    repo_root().map(|r| r.join(".caucus"))
}

/// Exports `KEY=VALUE` lines of the stack's `stack.env` not already set.
pub fn load_stack_env() {
    let Some(dir) = state_dir() else { return };
    let Ok(text) = std::fs::read_to_string(dir.join("stack.env")) else {
        return;
    };
    for line in text.lines() {
        let line = line.trim().trim_start_matches("export ");
        if line.starts_with('#') {
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            let v = v.trim_matches('"').trim_matches('\'');
            if std::env::var_os(k).is_none() {
                // Called from main before the runtime starts any thread.
                std::env::set_var(k, v);
            }
        }
    }
}

/// Runs `scripts/stack VERB`.
pub fn script(verb: &str) -> anyhow::Result<i32> {
    let root = repo_root().ok_or_else(|| {
        anyhow::anyhow!(
            "cannot find scripts/stack: run from the caucus checkout or set CAUCUS_HOME"
        )
    })?;
    let st = std::process::Command::new("bash")
        .arg(root.join("scripts").join("stack"))
        .arg(verb)
        .current_dir(&root)
        .status()?;
    Ok(st.code().unwrap_or(1))
}
