// tatp_backend: a memory blade for TATP on SMART-DTX.
//
// Serves a pool of backend.json's capacity MiB on tcp_port (0: any free
// port) and prints "listening on port N". Its CPU does nothing for clients:
// the first client builds the tables and the log directory in the pool and
// every client finds them through the named root "dtx/tatp".
#include "smart/target.h"

int main(int argc, char** argv) {
  return smart::RunMemoryBladeMain(argc, argv, "tatp_backend", "memory blade for TATP on SMART-DTX");
}
