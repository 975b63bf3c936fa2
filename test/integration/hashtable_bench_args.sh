#!/usr/bin/env bash
# hashtable_bench refuses each bad value with exit 2 and a message naming
# it, and a run on an empty table reports its misses instead of counting
# them as throughput.
source "$(dirname "$0")/lib.sh"
bench="$SMART_BIN/hashtable_bench"
bad --max-key 0 -- max_key
bad --duration -3 -- duration
bad --duration 0 -- duration
bad --value-length 0 -- value_length
bad --key-length 3 --max-key 100000 -- "key_length 3"
bad --dataset ycsb-e -- scan
bad --dataset ycsb-q -- ycsb-q
bad --zipf 1.5 -- zipfian
bad --no-such-flag -- no-such-flag
bad --lease-ms 5 -- lease-ms
pass "every bad argument was refused with exit 2 and named"

# The other programs: a usage error exits 2 and names what was wrong; --help
# exits 0 and lists the flags.
usage_error() {
  local word=$1
  shift
  set +e
  "$@" >"$WORK_DIR/out" 2>&1
  local status=$?
  set -e
  ((status == 2)) || { cat "$WORK_DIR/out" >&2; fail "'$*' exited $status, expected 2"; }
  grep -q -- "$word" "$WORK_DIR/out" || { cat "$WORK_DIR/out" >&2; fail "'$*': the message does not name $word"; }
}
usage_error "--port" "$SMART_BIN/hashtable_backend" --port 70000
usage_error "--bogus" "$SMART_BIN/hashtable_backend" --bogus
usage_error "--server" "$SMART_BIN/hashtable_check" verify
usage_error "--bogus" "$SMART_BIN/hashtable_check" --server 127.0.0.1:1 --bogus verify
usage_error "--type" "$SMART_BIN/test_rdma" --type swap
usage_error "extra" "$SMART_BIN/smart_config_reference" extra
programs=(hashtable_backend hashtable_bench hashtable_check test_rdma smart_config_reference)
# crc32c_bench is built where ISA-L is installed (deps.sh installs it).
if [[ -x $SMART_BIN/crc32c_bench ]]; then
  usage_error "--bogus" "$SMART_BIN/crc32c_bench" --bogus
  programs+=(crc32c_bench)
fi
for program in "${programs[@]}"; do
  "$SMART_BIN/$program" --help >"$WORK_DIR/out" 2>&1 || fail "$program --help exited $?"
  grep -q -- "--help" "$WORK_DIR/out" || fail "$program --help lists no flags"
  # Help is all it does: no benchmark table, no reference.
  ! grep -q -e "isa-l ns" -e "^| \`" "$WORK_DIR/out" || fail "$program --help ran the program"
done
pass "hashtable_backend, hashtable_check, test_rdma, crc32c_bench and smart_config_reference refuse bad arguments with exit 2 and name them; --help exits 0 and only helps"

out=$("$bench" 2 4 --no-load --max-key 10000 --duration 0.3 --dump-file "" --quiet)
echo "$out"
[[ $out =~ throughput\ =\ ([0-9.]+)\ M.*succeeded\ =\ ([0-9]+),\ not\ found\ =\ ([0-9]+),\ failed\ =\ ([0-9]+) ]] ||
  fail "unexpected result line"
[[ ${BASH_REMATCH[1]} == 0.00 && ${BASH_REMATCH[2]} == 0 && ${BASH_REMATCH[4]} == 0 ]] ||
  fail "an empty table gave throughput ${BASH_REMATCH[1]} and ${BASH_REMATCH[2]} successes"
((BASH_REMATCH[3] > 0)) || fail "the misses were not counted"
out=$("$bench" 2 4 --max-key 10000 --duration 0.3 --dump-file "" --quiet --verify --dataset ycsb-a)
[[ $out =~ succeeded\ =\ ([0-9]+),\ not\ found\ =\ 0,\ failed\ =\ 0 ]] && ((BASH_REMATCH[1] > 0)) ||
  fail "a verified ycsb-a run did not succeed cleanly: $out"
pass "misses are reported, not counted as throughput; a verified run reads only the right values"
