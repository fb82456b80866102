#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a running openlaked on its embedded default:
# S3 on 127.0.0.1:9000, KV pool on 127.0.0.1:9400, drives under ./data (created).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh build
exec ./build/cmd/openlaked/openlaked "$@"
