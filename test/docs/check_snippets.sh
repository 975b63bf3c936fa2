#!/usr/bin/env bash
# The shell snippets of the README and the docs that run on one machine,
# run as written, so that a command that drifts from the code fails here.
#
#   check_snippets.sh SOURCE_DIR BUILD_DIR
#
# A snippet opts in with the line `<!-- snippet: runs -->` right above its
# ```sh fence (the quick start does not: it installs packages). The
# snippets of one file run in order in one scratch folder that looks like
# a checkout: build/ is BUILD_DIR, config/ a copy of the source's, the
# other folders links to the source; HOME is the scratch folder. Each
# must exit 0.
set -euo pipefail
SOURCE=$(cd "${1:?usage: check_snippets.sh SOURCE_DIR BUILD_DIR}" && pwd)
BUILD=$(cd "${2:?usage: check_snippets.sh SOURCE_DIR BUILD_DIR}" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/smart-snippets.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

files=("$SOURCE/README.md" "$SOURCE"/docs/*.md "$SOURCE"/apps/*/DESIGN.md "$SOURCE/ae/README.md")
total=0
for file in "${files[@]}"; do
  [[ -f $file ]] || continue
  rel=${file#"$SOURCE"/}
  out="$WORK/$(echo "$rel" | tr '/' '_')"
  mkdir -p "$out.snippets"
  # Each opted-in block to its own file, numbered in order.
  python3 - "$file" "$out.snippets" <<'PY'
import sys
path, out = sys.argv[1], sys.argv[2]
lines = open(path).read().split("\n")
count, i = 0, 0
while i < len(lines):
    if lines[i].strip() == "<!-- snippet: runs -->":
        if i + 1 >= len(lines) or lines[i + 1].strip() not in ("```sh", "```bash"):
            sys.exit("%s:%d: '<!-- snippet: runs -->' is not right above a ```sh fence" % (path, i + 1))
        j = i + 2
        body = []
        while j < len(lines) and lines[j].strip() != "```":
            body.append(lines[j])
            j += 1
        count += 1
        with open("%s/%02d.sh" % (out, count), "w") as f:
            f.write("# %s:%d\n" % (path, i + 3) + "\n".join(body) + "\n")
        i = j
    i += 1
PY
  shopt -s nullglob
  snippets=("$out.snippets"/*.sh)
  shopt -u nullglob
  ((${#snippets[@]} > 0)) || continue
  scratch="$out.tree"
  mkdir -p "$scratch"
  ln -s "$BUILD" "$scratch/build"
  cp -r "$SOURCE/config" "$scratch/config"
  rm -f "$scratch/config/smart.key"
  for d in examples tools ae test apps docs; do ln -s "$SOURCE/$d" "$scratch/$d"; done
  for snippet in "${snippets[@]}"; do
    total=$((total + 1))
    if ! (cd "$scratch" && HOME=$scratch bash -euo pipefail "$snippet") >"$snippet.log" 2>&1; then
      echo "FAIL: the snippet at $(head -n 1 "$snippet" | cut -c3-) did not run as written:" >&2
      sed 's/^/  | /' "$snippet" >&2
      tail -n 30 "$snippet.log" >&2
      exit 1
    fi
    echo "ok: $(head -n 1 "$snippet" | cut -c3- | sed "s|$SOURCE/||")"
  done
done
((total > 0)) || { echo "FAIL: no snippet opted in with '<!-- snippet: runs -->'" >&2; exit 1; }
echo "ok: $total snippet(s) of the README and the docs ran as written"
