#!/usr/bin/env bash
# ae/run.sh --local --quick --figure FIG: every point ok, one CSV per series
# with the bench's upstream columns after a header line and one row per
# point, a non-empty PNG and SVG, and the figure in index.md. Run again
# without --force, the complete figure is not run again. VERDICT, when
# given, is the kind of verdict the figure must get: "modeled" (it ran on
# the shm transport's NIC model) or "plain" (it ran without, so a hardware
# claim cannot be shown); RUN-ARGS go to run.sh.
#   quick_figure.sh FIG BENCH-COLUMN-COUNT SERIES ROWS-PER-SERIES [VERDICT [RUN-ARGS...]]
source "$(dirname "$0")/ae_lib.sh"
fig=$1 columns=$2 series=$3 rows=$4 kind=${5:-}
shift $(($# < 5 ? $# : 5))
out="$WORK_DIR/out"

"$RUN" --local --quick --figure "$fig" --bin "$SMART_BIN" --out "$out" "$@" >"$WORK_DIR/run.log" 2>&1 ||
  { cat "$WORK_DIR/run.log"; fail "run.sh --local --quick --figure $fig exited non-zero"; }
dir="$out/fig-$fig"
[[ -f $dir/points.csv ]] || fail "no $dir/points.csv"

python3 - "$dir" "$columns" "$series" "$rows" <<'PY' || fail "fig $fig: CSVs are not as expected"
import csv, glob, os, sys
d, columns, series, rows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
points = list(csv.DictReader(open(os.path.join(d, "points.csv"))))
bad = [p for p in points if p["status"] != "ok"]
assert not bad, "failed points: %s" % [(p["point"], p["status"], p["log"]) for p in bad]
assert len(points) == series * rows, "points.csv: %d points, expected %d" % (len(points), series * rows)
files = sorted(f for f in glob.glob(os.path.join(d, "*.csv")) if not f.endswith("points.csv"))
assert len(files) == series, "%d series CSVs, expected %d: %s" % (len(files), series, files)
for f in files:
    lines = open(f).read().splitlines()
    header = [c.strip() for c in lines[0].split(",")]
    assert len(header) == columns, "%s: header has %d columns, expected %d" % (f, len(header), columns)
    assert not any(c.replace(".", "").isdigit() for c in header), "%s: no header line: %s" % (f, lines[0])
    assert len(lines) == rows + 1, "%s: %d rows, expected %d" % (f, len(lines) - 1, rows)
    for l in lines[1:]:
        fields = [c.strip() for c in l.split(",")]
        assert len(fields) == columns, "%s: row has %d fields: %s" % (f, len(fields), l)
        assert ", " in l, "%s: row not in the bench's layout: %s" % (f, l)
PY
for ext in png svg; do
  [[ -s $dir/fig-$fig.$ext ]] || fail "no plot $dir/fig-$fig.$ext"
done
[[ $(head -c 8 "$dir/fig-$fig.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] || fail "fig-$fig.png is not a PNG"
grep -q '<svg' "$dir/fig-$fig.svg" || fail "fig-$fig.svg is not an SVG"
grep -q "fig-$fig/fig-$fig.png" "$out/index.md" || fail "index.md does not show fig $fig"
if head=$(git -C "$SMART_SOURCE" rev-parse --short=12 HEAD 2>/dev/null); then
  grep -q "\"commit\": \"$head" "$out/run.json" || fail "run.json does not name the source commit $head"
  grep -q "source commit $head" "$out/index.md" || fail "index.md does not name the source commit $head"
fi
grep -Eq "^\| $fig \| .*\*\*(shown|not shown|cannot be shown on shm)( \(modeled\))?\*\*" "$out/index.md" ||
  fail "index.md has no verdict for fig $fig"
# The table of claims against rigs carries this run's verdict for the
# figure, and exits 0 only when every claim in it has one ("cannot be
# shown on shm", what a plain run says of a hardware claim, is none).
want=$(sed -n "s/^| $fig | .* | \*\*\(.*\)\*\* |\$/\1/p" "$out/index.md" | head -n 1)
[[ -n $want ]] || fail "no verdict for fig $fig in index.md"
if [[ $kind == plain ]]; then
  if python3 "$SMART_SOURCE/ae/plot/rigs.py" --out "$WORK_DIR/rigs.md" "$out" 2>"$WORK_DIR/rigs.err"; then
    fail "rigs.py took '$want' for a verdict"
  fi
  grep -q "^- $fig: " "$WORK_DIR/rigs.md" || fail "rigs.md does not name fig $fig as undecided"
  grep -Fq "| $want |" "$WORK_DIR/rigs.md" || fail "rigs.md does not carry fig $fig's '$want'"
else
  python3 "$SMART_SOURCE/ae/plot/rigs.py" --out "$WORK_DIR/rigs.md" "$out" 2>"$WORK_DIR/rigs.err" ||
    fail "rigs.py refused a run that decided every claim: $(cat "$WORK_DIR/rigs.err")"
  grep -Fq "| **$want** |" "$WORK_DIR/rigs.md" || fail "rigs.md does not carry fig $fig's verdict '$want'"
fi
case $kind in
  modeled)
    grep -Eq "^\| $fig \| .*\*\*(shown|not shown) \(modeled\)\*\*" "$out/index.md" ||
      fail "fig $fig did not run on the NIC model: $(grep "^| $fig |" "$out/index.md")"
    grep -q '"nic_model": {' "$out/run.json" || fail "run.json does not record the NIC model"
    grep -q '"nic_model"' "$out/configs/smart_config.nic.json" || fail "no NIC model config written"
    # Every point of the figure ran with a NIC model config.
    for log in "$out"/logs/fig-"$fig"/*.log; do
      head -n 1 "$log" | grep -q 'SMART_CONFIG_PATH=[^ ]*nic\.json' || fail "$log: not run on the NIC model: $(head -n 1 "$log")"
    done ;;
  plain)
    grep -Eq "^\| $fig \| .*\*\*cannot be shown on shm\*\*" "$out/index.md" ||
      fail "fig $fig ran on a NIC model though --no-nic-model: $(grep "^| $fig |" "$out/index.md")" ;;
esac

# Run again into the same folder, beside a figure folder with no points in
# it (plots copied from elsewhere): the complete figure is not run again
# and keeps its verdict, and the other is "not run here" in the summary,
# not a run that measured nothing.
other=10; [[ $fig == 10 ]] && other=12
mkdir -p "$out/fig-$other"
"$RUN" --local --quick --figure "$fig" --bin "$SMART_BIN" --out "$out" "$@" >"$WORK_DIR/again.log" 2>&1 ||
  fail "second run exited non-zero"
grep -q "fig $fig: complete" "$WORK_DIR/again.log" || { cat "$WORK_DIR/again.log"; fail "a complete figure ran again"; }
grep -Eq "^\| $other \| .* \| not run here \|" "$out/index.md" ||
  fail "fig $other, never run here, is not said to be: $(grep "^| $other |" "$out/index.md")"
grep -Eq "^\| $fig \| .*\*\*(shown|not shown|cannot be shown on shm)( \(modeled\))?\*\*" "$out/index.md" ||
  fail "fig $fig lost its verdict when the summary was written again"
# Now fig $other has no verdict in this folder: rigs.py names it and fails,
# unless another run decided it.
if python3 "$SMART_SOURCE/ae/plot/rigs.py" --out "$WORK_DIR/rigs.md" "$out" 2>"$WORK_DIR/rigs.err"; then
  fail "rigs.py passed with fig $other not run anywhere"
fi
grep -q "^- $other: " "$WORK_DIR/rigs.md" || fail "rigs.md does not name fig $other as undecided"
pass "fig $fig: $series series x $rows points, CSVs, plots and summary"
