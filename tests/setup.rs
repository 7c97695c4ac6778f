//! The set-up script (`scripts/deps.sh`) against a bare machine's view: fake library
//! trees and a PATH of stub programs, so that what it decides to install does not depend
//! on what happens to be installed on the machine running the tests.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A fresh directory for one case.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rl-setup-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// Create the empty files `paths` (relative to `root`).
fn files(root: &Path, paths: &[&str]) {
    for p in paths {
        let path = root.join(p);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, b"").expect("write");
    }
}

/// A directory of stub programs for PATH: each name runs `true` unless given a body.
fn stub_bin(dir: &Path, stubs: &[(&str, &str)]) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("mkdir bin");
    for (name, body) in stubs {
        let path = bin.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write stub");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    bin
}

/// Every program a fully set-up machine has, as stubs.
const ALL_PROGRAMS: &[(&str, &str)] = &[
    ("cc", "true"),
    ("redis-server", "true"),
    ("redis-cli", "true"),
    ("python3", "true"),
];

/// What `scripts/deps.sh --list goal` would install, with library directories under
/// `root`, PATH set to `path` and `extra` environment variables.
fn missing(goal: &str, root: &Path, path: &Path, extra: &[(&str, &str)]) -> Vec<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/deps.sh");
    let mut cmd = Command::new("/bin/bash");
    cmd.arg(&script)
        .args(["--list", goal])
        .env_clear()
        .env("PATH", path)
        .env("DEPS_ROOT", root)
        // No llvm-config on a bare machine.
        .env("LLVM_CONFIG_PATH", root.join("no-llvm-config"));
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run deps.sh");
    assert!(
        out.status.success(),
        "deps.sh --list failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn libclang_cpp_alone_is_not_libclang() {
    // What a bare Debian 12 with other packages installed has: the C++ library only.
    let dir = scratch("cpp-only");
    files(&dir, &["usr/lib/x86_64-linux-gnu/libclang-cpp.so.14"]);
    let bin = stub_bin(&dir, ALL_PROGRAMS);
    assert_eq!(missing("build", &dir, &bin, &[]), ["libclang-dev"]);
}

#[test]
fn a_versioned_libclang_needs_nothing() {
    for (name, lib) in [
        ("llvm-dir", "usr/lib/llvm-14/lib/libclang-14.so.1"),
        ("multiarch", "usr/lib/x86_64-linux-gnu/libclang-14.so.1"),
        ("plain", "usr/lib/libclang.so"),
        ("local", "usr/local/lib/libclang.so.17"),
    ] {
        let dir = scratch(name);
        files(&dir, &[lib, "usr/lib/x86_64-linux-gnu/libclang-cpp.so.14"]);
        let bin = stub_bin(&dir, ALL_PROGRAMS);
        assert!(missing("build", &dir, &bin, &[]).is_empty(), "{lib}");
    }
}

#[test]
fn libclang_path_and_llvm_config_are_honoured() {
    let dir = scratch("libclang-path");
    files(&dir, &["opt/llvm/lib/libclang.so"]);
    let elsewhere = dir.join("opt/llvm/lib");
    let bin = stub_bin(&dir, ALL_PROGRAMS);
    let libclang_path = elsewhere.to_str().expect("utf-8 path");
    assert!(missing("build", &dir, &bin, &[("LIBCLANG_PATH", libclang_path)]).is_empty());
    assert_eq!(missing("build", &dir, &bin, &[]), ["libclang-dev"]);
    // llvm-config --libdir pointing at it.
    let config = format!("echo {libclang_path}");
    let bin = stub_bin(&dir, &[("llvm-config", config.as_str())]);
    let cfg = bin.join("llvm-config");
    let cfg = cfg.to_str().expect("utf-8 path");
    assert!(missing("build", &dir, &bin, &[("LLVM_CONFIG_PATH", cfg)]).is_empty());
}

#[test]
fn a_bare_machine_gets_every_package_the_tests_need() {
    // Only a shell: no compiler, no servers, no python.
    let dir = scratch("bare");
    let bin = stub_bin(&dir, &[]);
    assert_eq!(
        missing("test", &dir, &bin, &[]),
        [
            "libclang-dev",
            "gcc",
            "redis-server",
            "redis-tools",
            "python3",
            "python3-venv"
        ]
    );
    // Building needs no server and no python.
    assert_eq!(missing("build", &dir, &bin, &[]), ["libclang-dev", "gcc"]);
}

#[test]
fn python_without_ensurepip_needs_python3_venv() {
    // Debian's python3 before python3-venv: `import venv, ensurepip` fails.
    let dir = scratch("no-venv");
    files(&dir, &["usr/lib/llvm-14/lib/libclang-14.so.1"]);
    let bin = stub_bin(
        &dir,
        &[
            ("cc", "true"),
            ("redis-server", "true"),
            ("redis-cli", "true"),
            ("python3", "exit 1"),
        ],
    );
    assert_eq!(missing("test", &dir, &bin, &[]), ["python3-venv"]);
    assert!(missing("build", &dir, &bin, &[]).is_empty());
}
