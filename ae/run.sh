#!/usr/bin/env bash
# Reproduces the paper's figures: collects every point (ae/collect), draws
# each figure beside the paper's numbers (ae/plot) and writes a summary page.
set -euo pipefail

AE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$AE_DIR/.." && pwd)

usage() {
  cat <<EOF
Usage: ae/run.sh (--local | --softroce | --cluster HOSTS) [OPTIONS]

Reproduces the SMART paper's figures with this build and draws each beside
the paper's numbers (REFERENCE 7.3).

Mode (one is required):
  --local              everything on this machine, benches on shm with their
                       memory blades inside the process; sized for 2 cores
  --softroce           everything over verbs inside the Soft-RoCE guest of
                       test/softroce/guest.sh (rxe, no RNIC needed): one boot,
                       a backend and a bench process per point on the guest's
                       loopback, sized to finish in about 20 minutes on 2
                       cores; plots and summary are drawn on this machine
                       after the guest is done (guest memory: SOFTROCE_MEM,
                       default 4096 MiB here; its log in OUT/guest/)
  --cluster HOSTS      run on the hosts of HOSTS through clush (clustershell):
                       one host a line, 'memory HOST' (backends) or
                       'compute HOST' (benches); '#' starts a comment

Options:
  --quick              a smoke run of every figure: tiny durations, few points
  --figure N           run figure N only (repeatable): ${FIGURE_LIST}
                       ('3' means 3a and 3b, '12' means 12 and 12so)
  --force              run figures again even when their CSVs are complete
                       (without it a run resumes: points recorded ok are kept)
  --bin DIR            binaries (default: build/bin; on a cluster the same
                       path on every host)
  --out DIR            results (default: ae/results/<machine>-<mode>[-quick]/)
  --dry-run            with --cluster: print the commands per host, run nothing
  --remote-dir DIR     with --cluster: working directory on the hosts
                       (default: /tmp/smart-ae)
  --duration SEC       seconds per point instead of the profile's
  --timeout SEC        time limit per point instead of the profile's
  --max-key N          keys of the hash table and B+tree instead of the profile's
  --repeat N           run every point N times (default: 3 with --local, else 1);
                       plots and summary take the median
  --shm-latency-ns N   with --local: delay every shm completion by N ns to
                       model a network round trip (default 0)
  --no-nic-model       with --local: run the test_rdma figures (3, 4, 13,
                       Table 1) on plain shm; by default they run with the
                       shm transport's NIC model (docs/nic_model.md), scaled
                       to the threads used, and are labeled "modeled"
  --apps-on-nic-model  with --local: the application figures (5a, 5b, 7, 8, 9,
                       10, 11, 12, 14) run on the NIC model too, and their
                       verdicts are marked "modeled"; give --out to keep such
                       a run apart from a plain one
  --no-plot            collect only
  -h, --help           this help

Output, per figure in OUT/fig-<id>/: one CSV per series (the bench's upstream
columns after a header line), points.csv (each point: ok, or failed and why,
with its log under OUT/logs/), fig-<id>.png and .svg; OUT/index.md lists the
figures, the claim each supports and whether this run shows it.
Exit status: 0 all points ok, 1 a point failed, 2 bad arguments.
EOF
}

die() {
  echo "run.sh: $*" >&2
  exit 2
}

# python3 with matplotlib (pyenv shims may hide the system's).
find_python() {
  local p
  for p in "${PYTHON:-}" python3 /usr/bin/python3; do
    [[ -n $p ]] && command -v "$p" >/dev/null 2>&1 || continue
    if [[ ${1:-} != plot ]] || "$p" -c 'import matplotlib' 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

# The plots and the summary (unless --no-plot), then the closing lines and
# the exit status: 1 when a point failed ($status non-zero).
finish_run() {
  if ((plot)); then
    PLOT_PY=$(find_python plot) || die "plots need python3 with matplotlib (Debian: apt-get install python3-matplotlib)"
    "$PLOT_PY" "$AE_DIR/plot/plot.py" --out "$out" "${figures[@]}" || exit 1
    "$PLOT_PY" "$AE_DIR/plot/summary.py" --out "$out" || exit 1
  fi
  echo "run.sh: results in $out ($(($(date +%s) - start)) s)" >&2
  ((status == 0)) || { echo "run.sh: some points failed; see points.csv of each figure" >&2; exit 1; }
  exit 0
}

# The whole run is one function, called on the last line: bash then reads
# the file to its end before it starts, so editing it during a run cannot
# change the run.
main() {
  PY=$(find_python) || die "python3 is needed"
  FIGURE_LIST=$("$PY" -c "import sys; sys.path.insert(0, '$AE_DIR/collect'); import figures; print(', '.join(f.id for f in figures.FIGURES))")

  all_args=("$@")
  mode="" hosts="" quick=0 force=0 dry_run=0 plot=1 nic_model=1 apps_nic=0
  bin="$ROOT/build/bin" out="" remote_dir=/tmp/smart-ae
  figures=() extra=()
  while (($#)); do
    case $1 in
      -h | --help) usage; exit 0 ;;
      --local) [[ -z $mode ]] || die "give one of --local, --softroce and --cluster"; mode=local ;;
      --softroce) [[ -z $mode ]] || die "give one of --local, --softroce and --cluster"; mode=softroce ;;
      --cluster)
        [[ -z $mode ]] || die "give one of --local, --softroce and --cluster"
        (($# >= 2)) || die "--cluster needs a hosts file"
        mode=cluster hosts=$2; shift ;;
      --quick) quick=1 ;;
      --force) force=1 ;;
      --dry-run) dry_run=1 ;;
      --no-plot) plot=0 ;;
      --no-nic-model) nic_model=0 ;;
      --apps-on-nic-model) apps_nic=1 ;;
      --figure | --bin | --out | --remote-dir | --duration | --timeout | --max-key | --shm-latency-ns | --repeat)
        (($# >= 2)) || die "$1 needs a value"
        case $1 in
          --figure) figures+=(--figure "$2") ;;
          --bin) bin=$2 ;;
          --out) out=$2 ;;
          --remote-dir) remote_dir=$2 ;;
          --duration | --timeout | --max-key | --shm-latency-ns | --repeat)
            [[ $2 =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "$1: expected a non-negative number, found '$2'"
            [[ $1 == --duration || $2 =~ ^[0-9]+$ ]] || die "$1: expected a whole number, found '$2'"
            extra+=("$1" "$2") ;;
        esac
        shift ;;
      *) die "unknown argument '$1' (see --help)" ;;
    esac
    shift
  done
  [[ -n $mode ]] || die "give --local, --softroce or --cluster HOSTS (see --help)"
  ((dry_run == 0)) || [[ $mode == cluster ]] || die "--dry-run needs --cluster"
  [[ $mode != cluster || -f $hosts ]] || die "hosts file '$hosts' not found"
  [[ -d $bin ]] || die "binary directory '$bin' not found (build with ./build.sh, or give --bin DIR)"

  profile=$mode
  ((quick == 0)) || profile=quick
  if [[ -z $out ]]; then
    out="$AE_DIR/results/$(hostname -s)-$mode"
    ((quick == 0)) || out+=-quick
  fi
  rig=$mode
  if [[ $mode == softroce ]]; then
    mkdir -p "$out" || die "cannot make the output folder '$out'"
    out=$(cd "$out" && pwd -P) bin=$(cd "$bin" && pwd -P)
    if [[ -z ${SOFTROCE_GUEST:-} ]]; then
      # On the host: boot the guest once and run this script in it; it finds
      # the host's files at the same paths (the guest mounts the host's /).
      guest="$ROOT/test/softroce/guest.sh"
      [[ -f $guest ]] || die "--softroce needs $guest (a source tree)"
      echo "run.sh: booting the Soft-RoCE guest; the figures' progress follows (guest log: $out/guest/)" >&2
      start=$(date +%s)
      status=0
      SOFTROCE_MEM=${SOFTROCE_MEM:-4096} bash "$guest" --timeout "${SOFTROCE_AE_TIMEOUT:-3600}" --out "$out/guest" -- \
        bash "$AE_DIR/run.sh" "${all_args[@]}" --out "$out" --bin "$bin" --no-plot || status=$?
      case $status in
        0 | 1) ;;
        2) exit 2 ;;
        124) echo "run.sh: the guest did not finish within ${SOFTROCE_AE_TIMEOUT:-3600} s (SOFTROCE_AE_TIMEOUT); run again to resume" >&2; exit 1 ;;
        *) echo "run.sh: the Soft-RoCE guest failed (exit $status; see $out/guest/)" >&2; exit 1 ;;
      esac
      finish_run
    fi
    # In the guest: cluster mode on localhost, commands run here by the
    # local stand-in for clush, the backends' files on the guest's tmpfs.
    hosts="$out/hosts.txt"
    printf 'memory localhost\ncompute localhost\n' >"$hosts"
    export PATH="$AE_DIR/collect/local-clush:$PATH"
    [[ $remote_dir != /tmp/smart-ae ]] || remote_dir=/run/smart-ae
    mode=cluster
    ((quick)) || profile=softroce
  fi

  args=(--mode "$mode" --profile "$profile" --rig "$rig" --bin "$bin" --out "$out" --config-dir "$ROOT/config"
        --remote-dir "$remote_dir" "${figures[@]}" "${extra[@]}")
  ((force)) && args+=(--force)
  [[ $mode == cluster ]] && args+=(--hosts "$hosts")
  ((dry_run)) && args+=(--dry-run)
  ((nic_model)) || args+=(--no-nic-model)
  ((apps_nic == 0)) || [[ $mode == local ]] || die "--apps-on-nic-model needs --local"
  ((apps_nic == 0)) || ((nic_model)) || die "--apps-on-nic-model and --no-nic-model contradict each other"
  ((apps_nic == 0)) || args+=(--apps-on-nic-model)

  start=$(date +%s)
  status=0
  "$PY" "$AE_DIR/collect/sweep.py" "${args[@]}" || status=$?
  case $status in
    0 | 3) ;;
    2) exit 2 ;;
    *) echo "run.sh: the collector stopped (exit $status)" >&2; exit 1 ;;
  esac
  ((dry_run)) && exit 0
  finish_run
}

main "$@"
