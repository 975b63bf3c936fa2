#!/usr/bin/env bash
# The checker's own tests (main_test.go): hand-written histories, among them
# non-linearizable ones that must exit 1 with Porcupine's visualization, and
# the table's semantics. Needs GO and SMART_GO_DIR (set by ctest).
set -euo pipefail
source "$(dirname "$0")/go_env.sh"
cd "$LINEARIZABILITY_SOURCE"
"$GO" version
"$GO" vet .
"$GO" test -count=1 -v .
