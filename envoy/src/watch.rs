//! The configuration directory: every file under
//! `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY` (recursively, dotfiles
//! unless `RUNTIME_IGNOREDOTFILES`, symlinked files followed, symlinked directories
//! not, as the reference's runtime loader reads them), loaded at start and again when
//! anything under it or a swap of the `RUNTIME_ROOT` symlink changes it. A file that
//! does not load keeps the last good configuration and is named in the log.

use crate::config::Config;
use crate::service::State;
use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The files of the configuration directory as (name, text), sorted by name: the
/// name is the path under `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY`, `/` as `.`, without its
/// extension (`config.ratelimit`), as the reference names them in its messages.
pub fn read_dir(
    settings_dir: &Path,
    base: &Path,
    ignore_dotfiles: bool,
) -> std::io::Result<Vec<(String, String)>> {
    let mut files = Vec::new();
    walk(settings_dir, base, ignore_dotfiles, &mut files)?;
    files.sort();
    Ok(files)
}

fn walk(
    dir: &Path,
    base: &Path,
    ignore_dotfiles: bool,
    out: &mut Vec<(String, String)>,
) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        if ignore_dotfiles && name.to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            walk(&path, base, ignore_dotfiles, out)?;
        } else if kind.is_file() || (kind.is_symlink() && path.is_file()) {
            let text = std::fs::read_to_string(&path)?;
            out.push((file_key(&path, base), text));
        }
    }
    Ok(())
}

fn file_key(path: &Path, base: &Path) -> String {
    let rel = path.strip_prefix(base).unwrap_or(path);
    let rel = rel.with_extension("");
    rel.to_string_lossy().replace('/', ".")
}

/// What a (re)load did.
#[derive(Debug, PartialEq)]
pub enum Loaded {
    Changed,
    Unchanged,
    Refused(String),
}

/// What one read of the configuration directory gave: its files, or why it could not
/// be read.
pub type Read = Result<Vec<(String, String)>, String>;

/// Read the configuration directory and, when it differs from the last read (`last`),
/// load it: installed when it loads, refused (and named in the log, once) when not,
/// the configuration in force staying.
pub async fn reload(state: &State, last: &mut Option<Read>) -> Loaded {
    let s = &state.settings;
    let base = s.runtime_root.join(&s.runtime_subdirectory);
    let dir = s.config_dir();
    let read = read_dir(&dir, &base, s.runtime_ignore_dotfiles)
        .map_err(|e| format!("cannot read {}: {e}", dir.display()));
    if last.as_ref() == Some(&read) {
        return Loaded::Unchanged;
    }
    *last = Some(read.clone());
    let files = match read {
        Ok(files) => files,
        Err(why) => return refused(state, why),
    };
    match Config::load(&files, s.merge_domain_config) {
        Ok(config) => {
            let domains = config.domain_count();
            *state.config.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(config));
            state.stats.config_load_success.inc();
            state.health.set("config", domains > 0).await;
            tracing::info!(
                "loaded the configuration: {} file(s), {domains} domain(s)",
                files.len()
            );
            Loaded::Changed
        }
        Err(e) => refused(state, e.0),
    }
}

fn refused(state: &State, why: String) -> Loaded {
    state.stats.config_load_error.inc();
    tracing::error!("error loading new configuration (the last good one stays): {why}");
    Loaded::Refused(why)
}

/// The paths to watch: the parent of `RUNTIME_ROOT` (a swap of its symlink), the
/// directories down to the configuration directory (their targets after a swap), and
/// the configuration directory itself, recursively; each once.
fn watch_paths(state: &State) -> Vec<(PathBuf, RecursiveMode)> {
    let s = &state.settings;
    let mut paths = Vec::new();
    if let Some(parent) = s.runtime_root.parent().filter(|p| p.is_dir()) {
        paths.push((parent.to_path_buf(), RecursiveMode::NonRecursive));
    }
    let config_dir = s.config_dir().canonicalize().ok();
    for dir in [
        s.runtime_root.clone(),
        s.runtime_root.join(&s.runtime_subdirectory),
    ] {
        if let Ok(real) = dir.canonicalize() {
            if Some(&real) != config_dir.as_ref() && !paths.iter().any(|(p, _)| *p == real) {
                paths.push((real, RecursiveMode::NonRecursive));
            }
        }
    }
    if let Some(real) = config_dir {
        paths.push((real, RecursiveMode::Recursive));
    }
    paths
}

/// Watch the configuration directory, load the configuration, and reload it on every
/// change from then on, in a task of its own. Changes that come together are read once
/// (after a short quiet time), and the watches follow the directory when the root
/// symlink moves.
pub async fn start(state: Arc<State>) -> tokio::task::JoinHandle<()> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let watcher = RecommendedWatcher::new(
        move |event: notify::Result<notify::Event>| {
            let _ = tx.send(event.is_ok());
        },
        notify::Config::default(),
    );
    let mut watcher = match watcher {
        Ok(w) => Some(w),
        Err(e) => {
            tracing::error!(
                "cannot watch the configuration directory, it will not be reloaded: {e}"
            );
            None
        }
    };
    let mut watched = match &mut watcher {
        Some(w) => rewatch(&state, w, Vec::new()),
        None => Vec::new(),
    };
    let mut last = None;
    reload(&state, &mut last).await;
    tokio::spawn(async move {
        let Some(mut watcher) = watcher else { return };
        while rx.recv().await.is_some() {
            // Let a burst of events (an editor's save, a symlink swap) settle.
            loop {
                match tokio::time::timeout(Duration::from_millis(100), rx.recv()).await {
                    Ok(Some(_)) => continue,
                    Ok(None) => return,
                    Err(_) => break,
                }
            }
            reload(&state, &mut last).await;
            watched = rewatch(&state, &mut watcher, watched);
        }
    })
}

fn rewatch(
    state: &State,
    watcher: &mut RecommendedWatcher,
    old: Vec<(PathBuf, RecursiveMode)>,
) -> Vec<(PathBuf, RecursiveMode)> {
    let new = watch_paths(state);
    if new == old {
        return old;
    }
    for (p, _) in &old {
        let _ = watcher.unwatch(p);
    }
    let mut done = Vec::new();
    for (p, mode) in new {
        match watcher.watch(&p, mode) {
            Ok(()) => done.push((p, mode)),
            Err(e) => tracing::warn!("cannot watch {}: {e}", p.display()),
        }
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_named_as_the_reference_names_them() {
        let dir =
            std::env::temp_dir().join(format!("ratelimit-envoy-watch-{}", std::process::id()));
        let conf = dir.join("ratelimit").join("config");
        std::fs::create_dir_all(conf.join("more")).unwrap();
        std::fs::write(conf.join("a.yaml"), "domain: a\n").unwrap();
        std::fs::write(conf.join("more").join("b.yml"), "domain: b\n").unwrap();
        std::fs::write(conf.join(".hidden.yaml"), "domain: h\n").unwrap();
        let base = dir.join("ratelimit");
        let names = |ignore| -> Vec<String> {
            read_dir(&conf, &base, ignore)
                .unwrap()
                .into_iter()
                .map(|(n, _)| n)
                .collect()
        };
        assert_eq!(names(true), vec!["config.a", "config.more.b"]);
        assert_eq!(
            names(false),
            vec!["config..hidden", "config.a", "config.more.b"]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
