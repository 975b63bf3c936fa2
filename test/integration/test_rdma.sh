#!/usr/bin/env bash
# test_rdma as two processes, memory blade and client, for every operation
# type: each run must print the upstream result line with a non-zero rate and
# append its CSV line.
source "$(dirname "$0")/lib.sh"
start_blade "$SMART_BIN/test_rdma" --config "$(test_rdma_config 64)"
config="$WORK_DIR/client.json"
sed -e 's/"servers": \[\]/"servers": ["127.0.0.1"]/' -e "s/\"port\": 0/\"port\": $BLADE_PORT/" \
  -e "s|\"dump_file_path\": \"\"|\"dump_file_path\": \"$WORK_DIR/out.csv\"|" \
  "$(test_rdma_config 64)" >"$config"
for type in read write cas faa; do
  out=$("$SMART_BIN/test_rdma" --config "$config" --type $type --duration ${TEST_RDMA_SECONDS:-0.5} 2 4) ||
    fail "test_rdma $type"
  echo "$out"
  [[ $out =~ ^rdma-$type:\ \#threads=2,\ \#depth=4,\ \#block_size=8,\ BW=([0-9.]+)\ MB/s\ \(([0-9.]+)\ MiB/s\),\ IOPS=([0-9.]+)\ M/s ]] ||
    fail "unexpected result line for $type"
  # BW (10^6 bytes) and MiB/s (2^20) describe the same rate, and 8-byte
  # requests at IOPS M/s move 8 * IOPS MB/s.
  python3 - "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}" "${BASH_REMATCH[3]}" <<'PY' || fail "$type: inconsistent or zero rates: $out"
import sys
mb, mib, iops = map(float, sys.argv[1:4])
ok = iops > 0 and abs(mb - mib * 1.048576) <= 0.01 * mb + 0.002 and abs(mb - 8 * iops) <= 0.01 * mb + 0.01
sys.exit(0 if ok else 1)
PY
done
# A header line of column names, then one line per run.
[[ $(head -n 1 "$WORK_DIR/out.csv") == "prefix, threads, depth, block_size, bw_mb_s, iops_m, conn_ms, p50_us, p99_us" ]] ||
  fail "the CSV does not start with its header: $(head -n 1 "$WORK_DIR/out.csv")"
lines=$(grep -c '^rdma-' "$WORK_DIR/out.csv")
((lines == 4)) || fail "expected 4 CSV lines after the header, found $lines"
# --dump-file names another file, which gets its own header.
"$SMART_BIN/test_rdma" --config "$config" --duration 0.2 --dump-file "$WORK_DIR/other.csv" 1 1 >/dev/null ||
  fail "test_rdma --dump-file"
[[ $(wc -l <"$WORK_DIR/other.csv") -eq 2 && $(head -c 7 "$WORK_DIR/other.csv") == "prefix," ]] ||
  fail "--dump-file: expected a header and one line: $(cat "$WORK_DIR/other.csv")"

# A server entry that names its own port ("host:port", as memory_servers
# takes it) wins over the port key, here a port nothing listens on.
closed_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
sed -e "s/\"servers\": \[\"127.0.0.1\"\]/\"servers\": [\"127.0.0.1:$BLADE_PORT\"]/" \
  -e "s/\"port\": $BLADE_PORT/\"port\": $closed_port/" "$config" >"$WORK_DIR/own_port.json"
grep -q "127.0.0.1:$BLADE_PORT" "$WORK_DIR/own_port.json" || fail "could not write the host:port config"
"$SMART_BIN/test_rdma" --config "$WORK_DIR/own_port.json" --duration 0.2 1 1 >"$WORK_DIR/own_port.out" 2>&1 ||
  { cat "$WORK_DIR/own_port.out"; fail "test_rdma with servers [\"127.0.0.1:$BLADE_PORT\"] did not connect"; }
pass "test_rdma read, write, cas and faa across two processes; a host:port server entry"
