#!/usr/bin/env bash
# One exit-status rule for every installed program: 0 when it did its job, 1
# when it failed at run time, 2 for a usage or configuration error, named.
# Each program gets a flag it does not have, then (those that read
# configuration files) a smart_config.json with a value of the wrong type
# and one that is out of range, and must exit 2 naming the flag, the file
# and the key, before it starts anything.
source "$(dirname "$0")/lib.sh"

# PROGRAM ARGS...: what each needs to get as far as reading its configuration.
declare -A RUN=(
  [hashtable_backend]="" [btree_backend]="" [smallbank_backend]="" [tatp_backend]=""
  [hashtable_bench]="1 1" [btree_bench]="1 1" [smallbank_bench]="1 1" [tatp_bench]="1 1"
  [hashtable_check]="--server 127.0.0.1:1 verify" [btree_check]="--server 127.0.0.1:1 verify"
  [test_rdma]="1 1" [test_rdma_dyn]="1 1"
)
# Programs that read no configuration file: only the flag.
NO_CONFIG=(dtx_check_history smart_keygen)

# status_of CMD...: runs CMD (output to $WORK_DIR/out) and prints its exit status.
status_of() {
  set +e
  "$@" >"$WORK_DIR/out" 2>&1
  echo $?
  set -e
}
expect_2() {
  local what=$1 word=$2
  shift 2
  local status
  status=$(status_of "$@")
  ((status == 2)) || { cat "$WORK_DIR/out" >&2; fail "$what: '$*' exited $status, expected 2"; }
  grep -q -- "$word" "$WORK_DIR/out" || { cat "$WORK_DIR/out" >&2; fail "$what: '$*' does not name $word"; }
}

printf '{"max_nodes": "eight"}\n' >"$WORK_DIR/wrong_type.json"
printf '{"qp_param": {"timeout": 99}}\n' >"$WORK_DIR/out_of_range.json"
: >"$WORK_DIR/empty.history"
declare -A FLAG_ONLY=([dtx_check_history]="$WORK_DIR/empty.history" [smart_keygen]="")
count=0
for program in "${!RUN[@]}" "${NO_CONFIG[@]}"; do
  [[ -x $SMART_BIN/$program ]] || fail "$program is not built"
  read -r -a args <<<"${RUN[$program]:-${FLAG_ONLY[$program]:-}}"
  expect_2 "a flag it does not have" "--no-such-flag" "$SMART_BIN/$program" "${args[@]}" --no-such-flag
  count=$((count + 1))
done
for program in "${!RUN[@]}"; do
  read -r -a args <<<"${RUN[$program]}"
  SMART_CONFIG_PATH=$WORK_DIR/wrong_type.json expect_2 "a value of the wrong type" max_nodes \
    "$SMART_BIN/$program" "${args[@]}"
  grep -q "wrong_type.json" "$WORK_DIR/out" || { cat "$WORK_DIR/out" >&2; fail "$program does not name the file"; }
  SMART_CONFIG_PATH=$WORK_DIR/out_of_range.json expect_2 "a value out of range" qp_param.timeout \
    "$SMART_BIN/$program" "${args[@]}"
done
pass "all $count installed programs exit 2 naming a flag they do not have; the ${#RUN[@]} that read" \
  "smart_config.json exit 2 naming the file and the key of a wrong or out-of-range value"

# A runtime failure is 1: a bench whose configured memory blade is not there.
printf '{"memory_servers": ["127.0.0.1:1"], "dump_file_path": ""}\n' >"$WORK_DIR/datastructure.json"
status=$(APP_CONFIG_PATH=$WORK_DIR/datastructure.json status_of "$SMART_BIN/hashtable_bench" 1 1 --duration 0.1)
((status == 1)) || { cat "$WORK_DIR/out" >&2; fail "a bench with no blade to reach exited $status, expected 1"; }
pass "a bench that cannot reach its memory blade exits 1"
