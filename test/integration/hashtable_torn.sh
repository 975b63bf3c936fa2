#!/usr/bin/env bash
# A block torn on purpose is detected by its checksum and re-read until it
# is whole; the reader then returns the right value.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/hashtable_lib.sh"
start_hashtable_blade 128
SERVERS=("127.0.0.1:$BLADE_PORT")
check torn --expected-keys 1000 --threads 1 --coros 1
pass "torn block detected and re-read"
