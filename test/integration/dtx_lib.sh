# Helpers of the SMART-DTX tests and benches; source after lib.sh.
#
#   start_dtx_blades BACKEND MIB   two memory blades (BACKEND, MIB MiB each);
#                                  sets DTX_SERVERS, the memory_servers JSON
#                                  array that names them
#   use_transaction_config FILE    the benches read FILE (APP_CONFIG_PATH) and
#                                  the test transport's smart_config.json

start_dtx_blades() {
  local backend=$1 mib=$2
  cat >"$WORK_DIR/backend.json" <<JSON
{ "dev_dax_path": "", "capacity": $mib, "tcp_port": 0, "nic_numa_node": -1 }
JSON
  start_blade "$backend" "$WORK_DIR/backend.json"
  local port0=$BLADE_PORT
  start_blade "$backend" "$WORK_DIR/backend.json"
  DTX_SERVERS="[{\"hostname\": \"127.0.0.1\", \"port\": $port0}, {\"hostname\": \"127.0.0.1\", \"port\": $BLADE_PORT}]"
}

use_transaction_config() {
  export APP_CONFIG_PATH=$1
  export SMART_CONFIG_PATH
  SMART_CONFIG_PATH=$(smart_test_config)
}
