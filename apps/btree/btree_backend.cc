// btree_backend: the memory blade of SMART-BT.
//
// Serves a pool of backend.json's capacity MiB on tcp_port (0: any free
// port) and prints "listening on port N". Its CPU does nothing for clients:
// the first client builds the tree's lock table and root leaf in the pool
// and every client finds them through the named root "btree".
#include "smart/target.h"

int main(int argc, char** argv) { return smart::RunMemoryBladeMain(argc, argv, "btree_backend", "memory blade for the SMART-BT B+tree"); }
