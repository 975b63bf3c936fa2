#!/usr/bin/env bash
# The configuration reference in the tree is what the parsers say today:
# runs smart_config_reference and compares its output with
# docs/config_reference.md.
#   check_config_reference.sh GENERATOR SOURCE_DIR OUT_FILE
set -euo pipefail
generator=$1 source=$2 out=$3
"$generator" >"$out"
if ! diff -u "$source/docs/config_reference.md" "$out"; then
  echo "docs/config_reference.md is out of date with the parsers; regenerate it:" >&2
  echo "  build/bin/smart_config_reference > docs/config_reference.md" >&2
  exit 1
fi
echo "docs/config_reference.md matches the parsers"
