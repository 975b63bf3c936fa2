// The memory blade's insides, shared by target.cc (the pool, session slots,
// start and stop), listener.cc (accepting, the limits and the handshakes
// before the proof) and target_sessions.cc (proven handshakes, sessions).
#pragma once

#include <atomic>
#include <climits>
#include <deque>
#include <poll.h>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <unordered_map>
#include <string>
#include <thread>
#include <vector>

#include "smart/config.h"
#include "smart/resource/auth.h"
#include "smart/resource/net.h"
#include "smart/target/blade_handshake.h"
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
  // The keys clients may prove: auth.key_file first, then auth.also_accept
  // (a rotation). Empty: clients are not asked for a proof. Swapped whole
  // by Target::reload_keys (under `mutex`); a handshake keeps the set it
  // started with.
  std::shared_ptr<const std::vector<SessionKey>> keys;
  std::shared_ptr<const std::vector<SessionKey>> current_keys() const {
    std::lock_guard<std::mutex> lock(mutex);
    return keys;
  }
  uint64_t pool_id = 0;  // the pool's stamp (Target::pool_id)
  std::unique_ptr<Device> device;
  std::unique_ptr<MemoryRegion> pool;
  int listen_fd = -1;
  int wake_pipe[2] = {-1, -1};
  std::thread listener;
  std::atomic<bool> stopping{false};
  mutable std::mutex mutex;  // guards sessions and free_slots
  std::list<std::unique_ptr<Session>> sessions;

  // A peer that has not proven the key: the listener's event loop serves
  // it (listener.cc), with no thread of its own.
  struct PendingPeer {
    int fd = -1;
    std::string source;  // its address for max_startups_per_source (IPv4 /32, IPv6 /64)
    Deadline started{};
    Deadline deadline{};
    std::unique_ptr<BladeHandshake> machine;
    std::string unsent;  // answer bytes the socket did not take yet
  };
  std::list<PendingPeer> pending;  // listener thread only; in accept order
  std::unordered_map<std::string, int> pending_per_source;  // listener thread only
  std::atomic<int> pending_count{0};  // pending.size(), for other threads

  // A peer that proved the key: its own thread makes its queue pairs and
  // answers with the pool's details (target_sessions.cc).
  struct HandshakeState {
    std::atomic<bool> done{false};
    int fd = -1;  // guarded by `mutex`; -1 once the handshake let go of it
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
  // Connections refused: the refusal is sent, then the socket lingers until
  // the peer closes or a second passes, so the peer reads the reason
  // instead of a reset. Listener thread only.
  struct Refused {
    int fd;
    Deadline until;
  };
  std::vector<Refused> refused;
  std::mt19937_64 random;  // max_startups' early drops; listener thread only
  // Lines about refused or failed peers, each kind at most once a second: a
  // flood of bad handshakes must not flood the log.
  LogRateLimit refused_log;    // refused at accept
  LogRateLimit busy_log;       // dropped early at max_startups or max_startups_per_source
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
  // Connections the listener may hold at once (sessions, handshakes,
  // refused ones lingering), from the open-file limit at start
  // (FitClientsToDescriptors): at the budget it leaves newcomers in the
  // backlog for a moment instead of taking a descriptor it may not have.
  // INT_MAX: no limit.
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

  // listener.cc
  void serve();
  void accept_one();
  // Decides whether a newcomer from `source` may start its handshake
  // (max_clients, max_startups, max_startups_per_source), making room by
  // dropping the longest-waiting pending peer where the rules say so.
  // Returns the refusal, or "" to admit it; *busy: the newcomer may retry.
  std::string admit(const std::string& source, bool* busy);
  // Drops the longest-waiting pending peer (of `source`, when given;
  // `limit` names the limit in messages); false when there is none.
  bool evict_oldest_pending(const std::string& limit, const std::string* source);
  // Reads what a pending peer sent, feeds its handshake and acts on the
  // outcome; false when the peer left `pending`.
  bool serve_pending(std::list<PendingPeer>::iterator it, short revents);
  // Sends what a pending peer's handshake answered; false on a dead socket.
  bool flush(PendingPeer& p);
  // Takes the peer out of `pending` and closes, lingers or hands it over
  // according to its handshake's state.
  void settle(std::list<PendingPeer>::iterator it);
  void forget_pending(std::list<PendingPeer>::iterator it);
  void refuse(int fd, const std::string& peer, const std::string& reason, bool busy, LogRateLimit* log);
  void linger(int fd);
  void drain_refused(const std::vector<pollfd>& fds, size_t first);

  // target_sessions.cc
  // The proven peer's thread: queue pairs, the pool's details, readiness.
  void finish_handshake(int fd, std::unique_ptr<BladeHandshake> machine, Deadline deadline,
                        HandshakeState* state);
  void start_handshake_thread(int fd, std::unique_ptr<BladeHandshake> machine, Deadline deadline);
  void reap_handshakes(bool all);
  void wake();
};

// host:port of a connected socket's peer ("unknown peer" when it is gone).
std::string PeerName(int fd);

}  // namespace smart
