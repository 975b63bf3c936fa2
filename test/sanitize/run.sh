#!/usr/bin/env bash
# The sanitizer stage of CI (docs/testing.md): with clang,
#   1. AddressSanitizer + UndefinedBehaviorSanitizer: builds what the unit and
#      integration tiers run (one tree, also compiled for libFuzzer) and runs
#      those tiers with ctest;
#   2. ThreadSanitizer: builds the library and tsan_tests (the scheduler's,
#      the shm transport's and the initiator's tests) and runs them;
#   3. libFuzzer: runs every fuzz target of the ASan tree for FUZZ_SECONDS,
#      starting from the corpus fuzz_seeds writes.
# Any sanitizer report, failed test or fuzzer crash fails the stage (exit 1);
# the failures are listed at the end, and the last line is "N passed, N failed".
#
#   test/sanitize/run.sh              build and run everything, in build-sanitize/
#   test/sanitize/run.sh build        the two builds only (.ci/run: beside ctest)
#   test/sanitize/run.sh test         the runs only (ASan tiers, TSan, libFuzzer)
#   test/sanitize/run.sh asan|tsan|fuzz   one of them (fuzz needs asan's build)
#   OUT=dir JOBS=2 FUZZ_SECONDS=25 SANITIZE_CXX=clang++-14 test/sanitize/run.sh
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$src/build-sanitize}
jobs=${JOBS:-2}
fuzz_seconds=${FUZZ_SECONDS:-25}
args=("$@")
((${#args[@]})) || args=(build test)
steps=()
for arg in "${args[@]}"; do
  case $arg in
    build) steps+=(asan_build tsan_build) ;;
    test) steps+=(asan_test tsan_test fuzz) ;;
    asan) steps+=(asan_build asan_test) ;;
    tsan) steps+=(tsan_build tsan_test) ;;
    fuzz) steps+=(fuzz) ;;
    *) echo "run.sh: unknown step '$arg' (build, test, asan, tsan, fuzz)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
suppressions=$src/test/sanitize

# clang whatever CXX says: libFuzzer and the flags below are clang's.
export CXX=${SANITIZE_CXX:-clang++}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# -O1: fast enough to run, quick to build; line tables name the source lines.
common=(-DCMAKE_BUILD_TYPE=Sanitize "-DCMAKE_CXX_FLAGS_SANITIZE=-O1 -gline-tables-only")

# What the unit and integration tiers run (test/integration/*.sh name their
# binaries as $SMART_BIN/NAME), and the fuzz targets.
asan_targets=(unit_tests hashtable_unit_tests btree_unit_tests dtx_unit_tests
  integration_client smart_keygen smart_config_reference test_rdma test_rdma_dyn
  hashtable_backend hashtable_bench hashtable_check
  btree_backend btree_bench btree_check
  smallbank_backend smallbank_bench tatp_backend tatp_bench dtx_check_history
  smart_membership_tool
  fuzz_seeds fuzz_handshake fuzz_blade_handshake fuzz_config fuzz_hashtable fuzz_btree fuzz_dtx fuzz_dtx_history
  fuzz_etcd)
fuzz_targets=(handshake blade_handshake config hashtable btree dtx dtx_history etcd)

passed=0
failed=0
failures=()
fail() { failures+=("$1"); }
now() { date +%s; }
timing() { echo "sanitize: $1 took $(($(now) - $2)) s"; }

# Prints the sanitizer reports written under DIR (log_path): the first three
# whole, then the names of the others. Returns 1 if there is any.
reports() {
  local dir=$1 n=0 f
  for f in "$dir"/*; do
    [[ -s $f ]] || continue
    n=$((n + 1))
    if ((n <= 3)); then
      echo "---- sanitizer report $f"
      head -n 80 "$f"
    else
      echo "---- sanitizer report $f (not shown)"
    fi
  done
  ((n == 0))
}

# The *SAN_OPTIONS for a run whose reports go to DIR. Some tests run a client
# as another user (integration.security runs one as nobody), and a clone may
# sit in a directory only root can enter (mktemp -d): so the reports are
# written to a scratch directory under /tmp that every user can write, with
# copies of the suppression files every user can read, and collect_reports
# moves them to DIR after the run.
scratch=
sanitizer_env() {
  local dir=$1
  rm -rf "$dir" && mkdir -p "$dir"
  [[ -n $scratch ]] && rm -rf "$scratch"
  scratch=$(mktemp -d /tmp/smart-sanitize.XXXXXX) || exit 1
  chmod 0755 "$scratch"
  cp "$suppressions"/*.supp "$scratch"/ && chmod 0644 "$scratch"/*.supp
  mkdir "$scratch/reports" && chmod 1777 "$scratch/reports"
  local r=$scratch/reports
  export ASAN_OPTIONS="log_path=$r/asan:log_exe_name=1:detect_leaks=1:strict_string_checks=1:check_initialization_order=1:detect_stack_use_after_return=1"
  export UBSAN_OPTIONS="log_path=$r/ubsan:log_exe_name=1:print_stacktrace=1:halt_on_error=1:suppressions=$scratch/ubsan.supp"
  export LSAN_OPTIONS="suppressions=$scratch/lsan.supp:print_suppressions=0"
  export TSAN_OPTIONS="log_path=$r/tsan:log_exe_name=1:halt_on_error=0:second_deadlock_stack=1:suppressions=$scratch/tsan.supp"
}

# Moves the reports of the last run into DIR (see sanitizer_env).
collect_reports() {
  local dir=$1
  [[ -n $scratch ]] || return 0
  find "$scratch/reports" -mindepth 1 -maxdepth 1 -exec mv -t "$dir" {} + 2>/dev/null
  rm -rf "$scratch"
  scratch=
}
trap '[[ -n $scratch ]] && rm -rf "$scratch"' EXIT

# ctest's "N tests failed out of M" into the counters.
count_ctest() {
  local log=$1 line total bad
  line=$(grep -E 'tests? failed out of [0-9]+' "$log" | tail -n 1)
  if [[ -z $line ]]; then
    failed=$((failed + 1))
    return
  fi
  bad=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")
  total=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\2/' <<<"$line")
  passed=$((passed + total - bad))
  failed=$((failed + bad))
  while read -r name; do fail "asan: $name"; done < <(sed -n 's/^[[:space:]]*[0-9]* - \([^ ]*\) (.*/\1/p' "$log")
}

asan_build() {
  local t0 build=$out/asan
  t0=$(now)
  echo "== sanitize: ASan+UBSan build ($build)"
  if ! cmake -S "$src" -B "$build" "${generator[@]}" "${common[@]}" \
      -DSMART_SANITIZE=address,undefined,fuzzer-no-link -DSMART_LIBFUZZER=ON >"$out/asan-configure.log" 2>&1 ||
     ! cmake --build "$build" -j "$jobs" --target "${asan_targets[@]}" >"$out/asan-build.log" 2>&1; then
    tail -n 60 "$out/asan-configure.log" "$out/asan-build.log" 2>/dev/null
    fail "asan: build (log $out/asan-build.log)"; failed=$((failed + 1)); return
  fi
  timing "ASan+UBSan build" "$t0"
}

asan_test() {
  local t0 build=$out/asan log
  t0=$(now)
  [[ -x $build/bin/unit_tests ]] || { fail "asan: not built"; failed=$((failed + 1)); return; }
  echo "== sanitize: unit and integration tiers under ASan+UBSan"
  sanitizer_env "$out/reports-asan"
  log=$out/asan-ctest.log
  # Left out: linearizability_checker, the Go checker's own test (nothing to
  # sanitize), and hashtable_grow_far, 5 million inserts that take over its
  # 180 s limit under ASan (its code paths run in the other hashtable tests,
  # only the depths past 12 and the second directory move are its own).
  ctest --test-dir "$build" -L 'unit|integration' \
    -E '^integration\.(linearizability_checker|hashtable_grow_far)$' \
    -j "$jobs" --output-on-failure >"$log" 2>&1
  grep -E '\*\*\*|tests passed|tests failed|^The following|^[[:space:]]+[0-9]+ - ' "$log" || true
  count_ctest "$log"
  collect_reports "$out/reports-asan"
  if ! reports "$out/reports-asan"; then fail "asan: reports in $out/reports-asan"; failed=$((failed + 1)); fi
  timing "ASan+UBSan tests" "$t0"
}

tsan_build() {
  local t0 build=$out/tsan
  t0=$(now)
  echo "== sanitize: TSan build ($build)"
  if ! cmake -S "$src" -B "$build" "${generator[@]}" "${common[@]}" -DSMART_SANITIZE=thread >"$out/tsan-configure.log" 2>&1 ||
     ! cmake --build "$build" -j "$jobs" --target tsan_tests >"$out/tsan-build.log" 2>&1; then
    tail -n 60 "$out/tsan-configure.log" "$out/tsan-build.log" 2>/dev/null
    fail "tsan: build (log $out/tsan-build.log)"; failed=$((failed + 1)); return
  fi
  timing "TSan build" "$t0"
}

tsan_test() {
  local t0 build=$out/tsan log rc ok bad
  t0=$(now)
  [[ -x $build/bin/tsan_tests ]] || { fail "tsan: not built"; failed=$((failed + 1)); return; }
  echo "== sanitize: scheduler, shm transport and initiator tests under TSan"
  sanitizer_env "$out/reports-tsan"
  log=$out/tsan-tests.log
  # Death tests fork a threaded process, which TSan does not follow.
  (cd "$build" && bin/tsan_tests --gtest_filter='-*DeathTest*') >"$log" 2>&1
  rc=$?
  ok=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\?\..*/\1/p' "$log" | tail -n 1)
  bad=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) tests\?, listed below.*/\1/p' "$log" | tail -n 1)
  passed=$((passed + ${ok:-0}))
  failed=$((failed + ${bad:-0}))
  while read -r name; do fail "tsan: $name"; done < <(sed -n 's/^\[  FAILED  \] \([A-Za-z0-9_./]*\)\( (.*\)\{0,1\}$/\1/p' "$log" | sort -u)
  grep -E '^\[  (PASSED|FAILED)  \]' "$log" | head -n 20
  collect_reports "$out/reports-tsan"
  if ! reports "$out/reports-tsan"; then fail "tsan: reports in $out/reports-tsan"; failed=$((failed + 1)); fi
  if ((rc != 0)) && [[ -z ${bad:-} ]] && [[ -z $(ls -A "$out/reports-tsan") ]]; then
    tail -n 40 "$log"; fail "tsan: tsan_tests exited with $rc (log $log)"; failed=$((failed + 1))
  fi
  timing "TSan tests" "$t0"
}

# Runs one libFuzzer target; its crash lands in $out/fuzz/crashes/TARGET-*.
fuzz_one() {
  local target=$1 dir=$out/fuzz
  mkdir -p "$dir/corpus/$target" "$dir/crashes"
  "$out/asan/bin/fuzz_$target" -max_total_time="$fuzz_seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$dir/crashes/$target-" "$dir/corpus/$target" "$dir/seeds/$target" >"$dir/$target.log" 2>&1
}

fuzz() {
  local t0 dir=$out/fuzz target pids=() names=() i
  t0=$(now)
  [[ -x $out/asan/bin/fuzz_seeds ]] || { fail "fuzz: no ASan build"; failed=$((failed + 1)); return; }
  echo "== sanitize: libFuzzer, ${fuzz_seconds} s per target"
  rm -rf "$dir/seeds" "$dir/crashes" && mkdir -p "$dir"
  unset ASAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS LSAN_OPTIONS
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  "$out/asan/bin/fuzz_seeds" "$dir/seeds" >/dev/null
  # Two at a time (JOBS).
  for target in "${fuzz_targets[@]}"; do
    fuzz_one "$target" &
    pids+=($!) names+=("$target")
    while (($(jobs -rp | wc -l) >= jobs)); do wait -n; done
  done
  for i in "${!pids[@]}"; do
    if wait "${pids[$i]}"; then
      passed=$((passed + 1))
      echo "fuzz_${names[$i]}: $(grep -E 'stat::number_of_executed_units' "$dir/${names[$i]}.log" | awk '{print $2}') runs, no crash"
    else
      failed=$((failed + 1)); fail "fuzz: ${names[$i]} (log $dir/${names[$i]}.log, input in $dir/crashes/)"
      grep -E -A30 'ERROR|runtime error|==[0-9]+==' "$dir/${names[$i]}.log" | head -n 60
    fi
  done
  timing "libFuzzer runs" "$t0"
}

start=$(now)
for step in "${steps[@]}"; do
  "$step"
done
echo "== sanitize: done in $(($(now) - start)) s"
if ((${#failures[@]})); then
  echo "sanitize: FAILED:"
  printf '  %s\n' "${failures[@]}"
fi
echo "$passed passed, $failed failed"
((failed == 0 && ${#failures[@]} == 0))
