/// @file
/// The memory blade: a pool of memory registered with the transport, the
/// super chunk at its start, and a TCP listener whose handshake hands clients
/// what they need to reach the pool with one-sided operations. After the
/// handshake its CPU does nothing for them.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "smart/common.h"
#include "smart/config.h"
#include "smart/transport_kind.h"

namespace smart {

/// A memory blade (see the file's description).
class Target {
 public:
  /// Opens the transport and allocates backend.capacity MiB (zeroed), with
  /// the super chunk initialised; or, with a file or devdax backing that
  /// already holds a pool of this capacity, reopens it as it was (named
  /// roots, allocation watermark, data), with every earlier session marked
  /// gone. Throws smart::Error.
  Target(const SmartConfig& smart_config, const BackendConfig& backend_config);
  /// Stops serving and releases the pool.
  ~Target();
  Target(const Target&) = delete;
  Target& operator=(const Target&) = delete;

  /// Listens on backend_config.bind, port backend_config.tcp_port (0: a
  /// free port), and serves clients from a background thread. Throws when
  /// the port cannot be bound, or when the address reaches beyond loopback
  /// and the blade has no key and no explicit `"auth": "none"`.
  void start();
  /// Stops listening and disconnects every client. Idempotent.
  void stop();
  /// The listening port (after start()).
  int port() const { return port_; }
  /// The address it listens on (backend.json's `bind`).
  const std::string& listen_address() const;
  /// True when clients must prove they hold the key (`auth.key_file`).
  bool authenticates() const;
  /// Reads the keys again from the `auth` these configs give (key_file and
  /// also_accept), for a key rotation without a restart: handshakes from
  /// then on may prove the new set; sessions and handshakes in progress go
  /// on. Cannot turn authentication on or off. Throws smart::Error naming
  /// the file, and keeps the old keys, when a key cannot be loaded.
  void reload_keys(const SmartConfig& smart_config, const BackendConfig& backend_config);
  /// Connections accepted whose handshake has not ended yet.
  int handshakes_in_progress() const;
  /// The pool's ID: random, stamped into the pool when it is formatted (a
  /// file pool keeps it across restarts). Clients may pin it
  /// (`memory_servers`' `"pool_id"`); both proofs of a keyed handshake
  /// cover it.
  uint64_t pool_id() const;
  /// The pool ID as 16 hex digits, as a config pins it.
  std::string pool_id_text() const;

  /// Start of the pool in this process.
  char* base() const { return base_; }
  /// Bytes of the pool.
  uint64_t capacity() const { return capacity_; }
  /// The transport serving the pool.
  TransportKind transport() const;
  /// The transport and device, for the startup line.
  std::string transport_description() const;
  /// Where the pool lives ("anonymous shared memory", "file /x (reopened)").
  const std::string& backing_description() const;
  /// True when the pool was reopened from its backing, not formatted.
  bool reopened() const;

  /// Takes `count` contiguous chunks from the pool (the same watermark
  /// clients advance with remote CAS). Null when the pool is exhausted.
  GlobalAddress alloc_chunk(uint64_t count);
  /// Address of `p`, which must lie inside the pool.
  GlobalAddress rel_ptr(const void* p) const;
  /// Pointer in this process to `addr` (node and region ignored).
  void* local_ptr(GlobalAddress addr) const { return base_ + addr.offset; }
  /// Sets root entry `index` of the super chunk.
  void set_root_entry(int index, uint64_t value);
  /// Root entry `index` of the super chunk.
  uint64_t get_root_entry(int index) const;
  /// Chunk 0: the allocation watermark and the root entries.
  SuperChunk* super_chunk() const { return reinterpret_cast<SuperChunk*>(base_); }

  /// Clients whose session is open.
  int connected_clients() const;
  /// Bytes of the pool backed by memory right now (pages touched so far).
  uint64_t resident_bytes() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  char* base_ = nullptr;
  uint64_t capacity_ = 0;
  int port_ = -1;
};

/// Blocks until the process receives SIGINT or SIGTERM; returns the signal.
/// Installs handlers the first time it (or InstallTerminationHandlers) runs.
int WaitForTerminationSignal();
/// Makes SIGINT and SIGTERM set a flag (and wake WaitForTerminationSignal) instead of ending the process.
void InstallTerminationHandlers();
/// True once SIGINT or SIGTERM arrived (after InstallTerminationHandlers).
bool TerminationRequested();
/// Makes SIGHUP ask for a reload (WaitForTerminationOrReload) instead of
/// ending the process.
void InstallReloadHandler();
/// Waits for SIGINT or SIGTERM (returned) or SIGHUP (returned once per
/// reload asked for; after InstallReloadHandler).
int WaitForTerminationOrReload();

/// The whole main() of an application's memory-blade program (e.g.
/// hashtable_backend): options CONFIG, --port, --bind, --capacity and
/// --backing over backend.json, "listening on port N at ADDRESS" on stdout, serving until SIGINT or
/// SIGTERM. With --etcd URL --blade-id ID (and --cluster, --advertise,
/// --lease-ms) it also joins the membership in etcd (smart/membership.h)
/// and, once its registration is lost, ends every session and exits 3.
/// Returns the exit status: 0, 1 (a runtime failure), 2 (a usage error) or
/// 3 (out of the membership). `program` names it in messages; `description`
/// heads --help.
int RunMemoryBladeMain(int argc, char** argv, const char* program, const char* description);

}  // namespace smart
