// hashtable_backend: the memory blade of SMART-HT.
//
// Serves a pool of backend.json's capacity MiB on tcp_port (0: any free
// port) and prints "listening on port N". Its CPU does nothing for clients:
// the first client builds the table in the pool (sized from its max_key)
// and every client finds it through the named root "hashtable".
#include "smart/target.h"

int main(int argc, char** argv) { return smart::RunMemoryBladeMain(argc, argv, "hashtable_backend", "memory blade for the SMART-HT hash table"); }
