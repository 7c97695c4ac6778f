#!/usr/bin/env bash
# Print the directory cargo builds into (`target_directory` of `cargo metadata`), which
# honours CARGO_TARGET_DIR and build.target-dir in a cargo config.
set -euo pipefail
cd "$(dirname "$0")/.."
"${CARGO:-cargo}" metadata --format-version 1 --no-deps --offline 2>/dev/null \
  | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p'
