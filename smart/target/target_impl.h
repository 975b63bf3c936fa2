// The memory blade's insides, shared by target.cc (the pool, session slots,
// start and stop) and target_sessions.cc (the listener and the handshake).
#pragma once

#include <atomic>
#include <climits>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "smart/config.h"
#include "smart/resource/auth.h"
#include "smart/resource/net.h"
#include "smart/target.h"
#include "smart/transport.h"
#include "smart/util/peer_text.h"

namespace smart {

// One connected client: its queue pairs live as long as its TCP connection.
struct Session {
  int fd = -1;
  int slot = 0;  // in the session table; 0: none taken yet
  std::string peer;
  std::unique_ptr<CompletionQueue> cq;
  std::vector<std::unique_ptr<QueuePair>> qps;
  std::vector<std::unique_ptr<AccessGrant>> grants;  // one per queue pair, where the transport gives them
  ~Session() {
    grants.clear();  // revoked first: the keys die before their queue pairs
    qps.clear();
    cq.reset();
    CloseFd(&fd);
  }
};

struct Target::Impl {
  SmartConfig smart_config;
  BackendConfig backend_config;
  AuthConfig auth;                 // backend.json's, else smart_config.json's
  std::optional<SessionKey> key;   // none: clients are not asked for a proof
  std::unique_ptr<Device> device;
  std::unique_ptr<MemoryRegion> pool;
  int listen_fd = -1;
  int wake_pipe[2] = {-1, -1};
  std::thread listener;
  std::atomic<bool> stopping{false};
  mutable std::mutex mutex;  // guards sessions and free_slots
  std::list<std::unique_ptr<Session>> sessions;
  struct HandshakeState {
    std::atomic<bool> done{false};
    int fd = -1;  // guarded by `mutex`; -1 once the handshake let go of it
    Deadline started = std::chrono::steady_clock::now();
    // The peer proved the key (or, without a key, sent a hello the blade
    // accepts): it is no longer a candidate for eviction.
    std::atomic<bool> proven{false};
    // Dropped at max_clients for a newer connection (evict_idle_handshake).
    std::atomic<bool> evicted{false};
    // Its session joined `sessions` and left handshakes_running at that
    // moment (under `mutex`), so that max_clients never counts it twice.
    bool counted_as_session = false;
  };
  struct Handshake {
    std::thread thread;
    std::shared_ptr<HandshakeState> state;
  };
  std::list<Handshake> handshakes;  // touched by the listener thread and stop()
  std::atomic<int> handshakes_running{0};
  // Of those, the ones evicted and not yet finished: they no longer count
  // against max_clients.
  std::atomic<int> handshakes_evicted{0};
  // Connections refused at accept (max_clients): the refusal is sent, then
  // the socket lingers until the peer closes or a second passes, so the
  // peer reads the reason instead of a reset. Listener thread only.
  struct Refused {
    int fd;
    Deadline until;
  };
  std::vector<Refused> refused;
  // Lines about refused or failed peers, each kind at most once a second: a
  // flood of bad handshakes must not flood the log.
  LogRateLimit refused_log;    // refused at accept
  LogRateLimit refusals_log;   // refused during the handshake
  LogRateLimit wrong_key_log;  // refused: the client's key ID is not the blade's
  LogRateLimit forwarded_log;  // refused: the client dialled another address
  LogRateLimit gave_up_log;    // clients that gave up
  LogRateLimit failures_log;   // handshakes that failed
  LogRateLimit evicted_log;    // handshakes dropped for newer connections
  // accept() failing for want of descriptors or memory (EMFILE, ENFILE,
  // ENOBUFS, ENOMEM): the listener stops polling the socket for a while
  // instead of spinning on it, and says so once per episode.
  Deadline accept_paused_until{};
  // Connections the listener may hold at once (sessions, handshakes, evicted
  // ones still finishing, refused ones lingering), from the open-file limit
  // at start (FitClientsToDescriptors): at the budget it leaves newcomers in
  // the backlog for a moment instead of taking a descriptor it may not
  // have. INT_MAX: no limit.
  int connection_budget = INT_MAX;
  int accept_backoff_ms = 0;
  bool accept_trouble_said = false;
  uint64_t accept_failures = 0;  // in the current episode
  // Session slots not in use, oldest released first, so that a slot's
  // incarnation moves on slowly. Guarded by `mutex`.
  std::deque<int> free_slots;
  uint64_t* session_table = nullptr;  // in the pool, chunk 0
  std::string backing_description = "anonymous shared memory";
  bool reopened = false;
  bool persistent = false;  // a file or device: synced when the blade stops

  // Releases a session taken out of `sessions` (or never put there) and
  // then its slot.
  void end_session(std::unique_ptr<Session> session);
  // Ends every session whose word carries the fence bit (a lock taker's
  // request), as if its client had disconnected.
  void fence_requested_sessions();
  // Hands out a session slot and publishes it as alive; 0 when none is free.
  int open_session_slot(SessionId* id);
  // Publishes the slot's session as gone and returns the slot.
  void close_session_slot(int slot);
  void serve();
  void accept_one();
  // At max_clients: drops the handshake that has waited longest without its
  // peer proving the key, so that a flood of idle or half-open peers cannot
  // lock a legitimate client out. False when there is none to drop.
  bool evict_idle_handshake();
  void refuse(int fd, const std::string& peer, const std::string& reason);
  void drain_refused(const std::vector<pollfd>& fds, size_t first);
  void handshake(int fd, HandshakeState* state);
  void reap_handshakes(bool all);
  void wake();
};

// host:port of a connected socket's peer ("unknown peer" when it is gone).
std::string PeerName(int fd);

}  // namespace smart
