// The memory blade's listener: one event loop that accepts connections
// within the limits, serves every peer that has not proven the key (each a
// BladeHandshake fed from its non-blocking socket, no thread of its own),
// watches the sessions' connections for their end and the session table for
// fence requests.
//
// The limits on peers that have proven nothing, as sshd's MaxStartups and
// PerSourceMaxStartups:
//   - max_startups_per_source: a source address (IPv4, or an IPv6 /64) with
//     that many pending peers has its longest-waiting one dropped for a
//     newcomer from it, so one address holds no more places than that,
//     and a client sharing an address with a flood still gets in;
//   - max_startups "start:rate:full": with `start` or more pending peers a
//     newcomer is refused with probability rate%; at `full` (or at
//     max_clients) a newcomer is let in by dropping the pending peer that
//     has waited longest instead, so that idle peers cannot hold every place
//     until their connect_timeout_ms runs out.
// Refusals for load say "busy": the client tries again shortly, within its
// connect_timeout_ms.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "smart/logging.h"
#include "smart/resource/handshake.h"
#include "smart/status.h"
#include "smart/target/target_impl.h"

namespace smart {

namespace {

constexpr int kMaxAcceptBackoffMs = 1000;
// How long a listener at its descriptor budget leaves newcomers in the
// backlog before it looks again.
constexpr int kBudgetPauseMs = 5;
constexpr size_t kMaxLingeringRefusals = 64;
constexpr auto kRefusalLinger = std::chrono::seconds(1);
// How often the blade looks for fence requests in its live sessions' words:
// a client taking a lock over from a session that let its lease run out
// waits about this long for the fence.
constexpr int kFenceScanMs = 5;
constexpr size_t kReadChunk = 16 * 1024;

std::chrono::steady_clock::time_point Now() { return std::chrono::steady_clock::now(); }

int MillisecondsUntil(Deadline t) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - Now()).count();
  return ms <= 0 ? 0 : static_cast<int>(std::min<int64_t>(ms, 1 << 30)) + 1;
}

// The part of a peer's address that max_startups_per_source counts by: an
// IPv4 address (IPv4-mapped ones included), or an IPv6 address's /64.
std::string SourceOf(const sockaddr_storage& ss) {
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    return std::string(reinterpret_cast<const char*>(&a->sin_addr), 4);
  }
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) return std::string(reinterpret_cast<const char*>(&a->sin6_addr) + 12, 4);
    return std::string(reinterpret_cast<const char*>(&a->sin6_addr), 8);
  }
  return "";
}

}  // namespace

void Target::Impl::serve() {
  random.seed(std::random_device{}());
  while (!stopping.load()) {
    const bool accepting = Now() >= accept_paused_until;
    // A negative fd is skipped by poll: a paused listener is not watched.
    std::vector<pollfd> fds = {{accepting ? listen_fd : -1, POLLIN, 0}, {wake_pipe[0], POLLIN, 0}};
    std::vector<Session*> watched;
    {
      std::lock_guard<std::mutex> lock(mutex);
      for (auto& s : sessions) {
        fds.push_back({s->fd, POLLIN, 0});
        watched.push_back(s.get());
      }
    }
    int timeout_ms = watched.empty() ? 500 : kFenceScanMs;
    const size_t first_refused = fds.size();
    for (const Refused& r : refused) {
      fds.push_back({r.fd, POLLIN, 0});
      timeout_ms = std::min(timeout_ms, MillisecondsUntil(r.until));
    }
    const size_t first_pending = fds.size();
    for (const PendingPeer& p : pending) {
      fds.push_back({p.fd, static_cast<short>(POLLIN | (p.unsent.empty() ? 0 : POLLOUT)), 0});
      timeout_ms = std::min(timeout_ms, MillisecondsUntil(p.deadline));
    }
    if (!accepting) timeout_ms = std::min(timeout_ms, MillisecondsUntil(accept_paused_until));
    const int n = poll(fds.data(), fds.size(), timeout_ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      SMART_ERROR("memory blade: poll failed: %s", strerror(errno));
      return;
    }
    if (fds[1].revents & POLLIN) {
      char buf[64];
      while (read(wake_pipe[0], buf, sizeof(buf)) > 0) {
      }
    }
    if (stopping.load()) return;
    // A client's TCP connection ending means the client is gone: release
    // its queue pairs.
    for (size_t i = 0; i < watched.size(); ++i) {
      const short ev = fds[2 + i].revents;
      if (ev == 0) continue;
      char buf[64];
      const ssize_t r = recv(watched[i]->fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (r > 0 || (r < 0 && (errno == EAGAIN || errno == EINTR))) continue;  // stray bytes: ignore
      std::unique_ptr<Session> gone;
      {
        std::lock_guard<std::mutex> lock(mutex);
        for (auto it = sessions.begin(); it != sessions.end(); ++it) {
          if (it->get() == watched[i]) {
            SMART_INFO("memory blade: client %s disconnected", (*it)->peer.c_str());
            gone = std::move(*it);
            sessions.erase(it);
            break;
          }
        }
      }
      if (gone) end_session(std::move(gone));
    }
    fence_requested_sessions();
    // The pending peers in the order polled; one that leaves `pending` is
    // never touched again this round.
    {
      size_t i = first_pending;
      const auto now = Now();
      for (auto it = pending.begin(); it != pending.end() && i < fds.size(); ++i) {
        auto next = std::next(it);
        if (fds[i].revents != 0) {
          serve_pending(it, fds[i].revents);
        } else if (now >= it->deadline) {
          it->machine->refuse("the client did not complete its part of the handshake within connect_timeout_ms (" +
                                  std::to_string(smart_config.connect_timeout_ms) + " ms)",
                              BladeHandshake::Refusal::kOther);
          uint64_t suppressed = 0;
          if (failures_log.allow(&suppressed)) {
            SMART_WARN("memory blade: handshake with %s failed: no hello within connect_timeout_ms (%d ms)%s",
                       it->machine->peer().c_str(), smart_config.connect_timeout_ms,
                       LogRateLimit::Suppressed(suppressed).c_str());
          }
          settle(it);
        }
        it = next;
      }
    }
    drain_refused(fds, first_refused);
    reap_handshakes(false);
    if (accepting && (fds[0].revents & POLLIN)) accept_one();
  }
}

void Target::Impl::accept_one() {
  // At the descriptor budget (refusals lingering, handshakes running) the
  // newcomer waits in the backlog a moment: accepting it could take the
  // last descriptor.
  int held;
  {
    std::lock_guard<std::mutex> lock(mutex);
    held = static_cast<int>(sessions.size()) + handshakes_running.load() + static_cast<int>(pending.size()) +
           static_cast<int>(refused.size());
  }
  if (held >= connection_budget) {
    accept_paused_until = Now() + std::chrono::milliseconds(kBudgetPauseMs);
    return;
  }
  sockaddr_storage from{};
  socklen_t from_len = sizeof(from);
  const int fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&from), &from_len, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    if (err != EMFILE && err != ENFILE && err != ENOBUFS && err != ENOMEM) return;  // EAGAIN, ECONNABORTED, ...
    // The connection stays in the backlog, so the socket stays readable:
    // polling it again at once would spin. Wait, longer each time.
    ++accept_failures;
    accept_backoff_ms = std::clamp(accept_backoff_ms * 2, 10, kMaxAcceptBackoffMs);
    accept_paused_until = Now() + std::chrono::milliseconds(accept_backoff_ms);
    if (!accept_trouble_said) {
      accept_trouble_said = true;
      std::string limit;
      rlimit rl{};
      if (err == EMFILE && getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        limit = " (this process may open " + std::to_string(rl.rlim_cur) + " files: ulimit -n)";
      }
      SMART_WARN("memory blade: cannot accept connections: %s%s; pausing accepts, retrying at most once a second "
                 "until descriptors free up",
                 strerror(err), limit.c_str());
    }
    return;
  }
  if (accept_trouble_said) {
    accept_trouble_said = false;
    SMART_INFO("memory blade: accepting connections again (%llu attempts failed meanwhile)",
               static_cast<unsigned long long>(accept_failures));
  }
  accept_failures = 0;
  accept_backoff_ms = 0;
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  const std::string source = SourceOf(from);
  bool busy = false;
  const std::string refusal = admit(source, &busy);
  if (!refusal.empty()) {
    refuse(fd, PeerName(fd), refusal, busy, busy ? &busy_log : &refused_log);
    return;
  }
  BladeHandshake::Settings settings;
  settings.key_set = current_keys();
  for (const SessionKey& k : *settings.key_set) settings.keys.push_back(&k);
  settings.arrived = LocalAddress(fd);
  settings.accept_forwarded = backend_config.accept_forwarded;
  settings.transport = device->kind();
  settings.pool_id = pool_id;
  PendingPeer peer;
  peer.fd = fd;
  peer.source = source;
  peer.started = Now();
  peer.deadline = peer.started + std::chrono::milliseconds(smart_config.connect_timeout_ms);
  peer.machine = std::make_unique<BladeHandshake>(std::move(settings), PeerName(fd));
  pending.push_back(std::move(peer));
  pending_per_source[source] += 1;
  pending_count.store(static_cast<int>(pending.size()));
}

std::string Target::Impl::admit(const std::string& source, bool* busy) {
  *busy = true;
  const BackendConfig& b = backend_config;
  const int per_source = pending_per_source.count(source) != 0 ? pending_per_source[source] : 0;
  if (per_source >= b.max_startups_per_source) {
    // The source's own longest-waiting peer makes room: a flood from one
    // address holds at most this many places, and a client that shares
    // the address (another process on a flooding host) still gets in.
    evict_oldest_pending("max_startups_per_source (" + std::to_string(b.max_startups_per_source) +
                             " handshakes in progress from one address)",
                         &source);
  }
  const int full = std::min(b.max_startups.full, b.max_clients);
  const int start = std::min(b.max_startups.start, full);
  const int waiting = static_cast<int>(pending.size());
  if (waiting >= full) {
    if (evict_oldest_pending("max_startups (" + std::to_string(full) + " handshakes in progress)", nullptr)) return "";
  } else if (waiting >= start) {
    // Early drop, at rate% from `start` up to `full` (not rising to 100% as
    // sshd's does: with the longest waiting dropped at `full`, a rising
    // chance would make the place just below `full` the hardest to get,
    // and a flood that holds that many idle peers would lock clients out).
    if (std::uniform_int_distribution<int>(0, 99)(random) < b.max_startups.rate) {
      return "the memory blade has " + std::to_string(waiting) +
             " handshakes in progress and drops some newcomers (max_startups " + std::to_string(start) + ":" +
             std::to_string(b.max_startups.rate) + ":" + std::to_string(full) + "); try again shortly";
    }
  }
  int established;
  {
    // One snapshot: a handshake leaves the count when its session joins
    // `sessions`, under this mutex.
    std::lock_guard<std::mutex> lock(mutex);
    established = static_cast<int>(sessions.size());
  }
  const int proven = handshakes_running.load();
  // A full blade makes room by dropping its longest-waiting pending peer;
  // only when every place is a session or a proven peer is the newcomer
  // refused.
  if (established + proven + static_cast<int>(pending.size()) >= b.max_clients &&
      !evict_oldest_pending("max_clients (" + std::to_string(b.max_clients) + ")", nullptr)) {
    *busy = false;
    return "the memory blade is at max_clients (" + std::to_string(b.max_clients) + "): " +
           std::to_string(established) + " sessions and " + std::to_string(proven) +
           " handshakes in progress; try again later";
  }
  return "";
}

bool Target::Impl::evict_oldest_pending(const std::string& limit, const std::string* source) {
  auto oldest = pending.begin();  // accept order
  while (oldest != pending.end() && source != nullptr && oldest->source != *source) ++oldest;
  if (oldest == pending.end()) return false;
  const std::string peer = oldest->machine->peer();
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Now() - oldest->started);
  uint64_t suppressed = 0;
  if (evicted_log.allow(&suppressed)) {
    SMART_WARN("memory blade: at %s: dropped the handshake of %s, unauthenticated after %lld ms and the longest "
               "waiting, to admit a new connection%s",
               limit.c_str(), peer.c_str(), static_cast<long long>(waited.count()),
               LogRateLimit::Suppressed(suppressed).c_str());
  }
  oldest->machine->refuse("the memory blade is at " + limit +
                              " and dropped this handshake, the longest waiting without proving the key, for a "
                              "newer connection; try again",
                          BladeHandshake::Refusal::kOther, true);
  settle(oldest);
  return true;
}

bool Target::Impl::serve_pending(std::list<PendingPeer>::iterator it, short revents) {
  PendingPeer& p = *it;
  if ((revents & POLLOUT) && !flush(p)) {
    forget_pending(it);
    return false;
  }
  if (revents & (POLLIN | POLLHUP | POLLERR)) {
    char buf[kReadChunk];
    for (;;) {
      const ssize_t r = recv(p.fd, buf, sizeof(buf), 0);
      if (r > 0) {
        p.machine->receive(buf, static_cast<size_t>(r));
        if (p.machine->state() != BladeHandshake::State::kAwaitingAuthHello &&
            p.machine->state() != BladeHandshake::State::kAwaitingClientHello) {
          break;
        }
        continue;
      }
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (r == 0) {
        // The peer closed its side before it finished: say why, in case it
        // still reads.
        p.machine->refuse("the connection to client " + p.machine->peer() +
                              " was closed by the peer during the handshake" +
                              (p.machine->buffered() > 0
                                   ? " (" + std::to_string(p.machine->buffered()) + " bytes of a message received)"
                                   : ""),
                          BladeHandshake::Refusal::kMalformed);
        settle(it);
        return false;
      }
      uint64_t suppressed = 0;
      if (failures_log.allow(&suppressed)) {
        SMART_WARN("memory blade: handshake with %s failed: %s%s", p.machine->peer().c_str(), strerror(errno),
                   LogRateLimit::Suppressed(suppressed).c_str());
      }
      forget_pending(it);
      return false;
    }
  }
  p.unsent += p.machine->take_output();
  if (!flush(p)) {
    forget_pending(it);
    return false;
  }
  if (p.machine->state() == BladeHandshake::State::kAwaitingAuthHello ||
      p.machine->state() == BladeHandshake::State::kAwaitingClientHello) {
    return true;
  }
  settle(it);
  return false;
}

bool Target::Impl::flush(PendingPeer& p) {
  while (!p.unsent.empty()) {
    const ssize_t w = send(p.fd, p.unsent.data(), p.unsent.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w > 0) {
      p.unsent.erase(0, static_cast<size_t>(w));
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    return w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
  return true;
}

void Target::Impl::forget_pending(std::list<PendingPeer>::iterator it) {
  if (it->fd >= 0) close(it->fd);
  auto count = pending_per_source.find(it->source);
  if (count != pending_per_source.end() && --count->second <= 0) pending_per_source.erase(count);
  pending.erase(it);
  pending_count.store(static_cast<int>(pending.size()));
}

void Target::Impl::settle(std::list<PendingPeer>::iterator it) {
  PendingPeer& p = *it;
  BladeHandshake& m = *p.machine;
  p.unsent += m.take_output();
  flush(p);  // best effort: an answer the socket cannot take is lost with the connection
  switch (m.state()) {
    case BladeHandshake::State::kRefused: {
      LogRateLimit* log = nullptr;
      switch (m.refusal()) {
        case BladeHandshake::Refusal::kWrongKey: log = &wrong_key_log; break;
        case BladeHandshake::Refusal::kForwarded: log = &forwarded_log; break;
        case BladeHandshake::Refusal::kOther: log = nullptr; break;  // logged where it was decided
        case BladeHandshake::Refusal::kMalformed: log = &failures_log; break;
        default: log = &refusals_log; break;
      }
      uint64_t suppressed = 0;
      if (log != nullptr && log->allow(&suppressed)) {
        SMART_WARN("memory blade: refused client %s: %s%s", m.peer().c_str(), m.reason().c_str(),
                   LogRateLimit::Suppressed(suppressed).c_str());
      }
      const int fd = p.fd;
      p.fd = -1;
      forget_pending(it);
      linger(fd);
      return;
    }
    case BladeHandshake::State::kGaveUp: {
      // The client's own words, unproven: escaped and cut short.
      uint64_t suppressed = 0;
      if (gave_up_log.allow(&suppressed)) {
        SMART_WARN("memory blade: client %s gave up the handshake: %s%s", m.peer().c_str(),
                   PeerText(m.client_error()).c_str(), LogRateLimit::Suppressed(suppressed).c_str());
      }
      forget_pending(it);
      return;
    }
    case BladeHandshake::State::kProven: {
      const int fd = p.fd;
      const Deadline deadline = p.deadline;
      std::unique_ptr<BladeHandshake> machine = std::move(p.machine);
      p.fd = -1;
      forget_pending(it);
      start_handshake_thread(fd, std::move(machine), deadline);
      return;
    }
    default:
      return;  // still in progress: stays
  }
}

void Target::Impl::refuse(int fd, const std::string& peer, const std::string& reason, bool busy,
                          LogRateLimit* log) {
  // At most a line a second, not one per connection of a flood.
  uint64_t suppressed = 0;
  if (log != nullptr && log->allow(&suppressed)) {
    SMART_WARN("memory blade: refused connection from %s: %s%s", peer.c_str(), reason.c_str(),
               LogRateLimit::Suppressed(suppressed).c_str());
  }
  AuthChallenge answer;
  answer.error = reason;
  answer.busy = busy;
  WireWriter frame;
  const std::string body = answer.Encode();
  frame.u32(static_cast<uint32_t>(body.size()));
  frame.bytes(body.data(), body.size());
  ssize_t ignored = send(fd, frame.data().data(), frame.data().size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  (void)ignored;
  linger(fd);
}

void Target::Impl::linger(int fd) {
  shutdown(fd, SHUT_WR);
  // Closing now, with the peer's bytes unread, would reset the connection
  // and could discard the answer before the peer reads it.
  if (refused.size() >= kMaxLingeringRefusals) {
    close(fd);
    return;
  }
  refused.push_back(Refused{fd, Now() + kRefusalLinger});
}

void Target::Impl::drain_refused(const std::vector<pollfd>& fds, size_t first) {
  const auto now = Now();
  std::vector<Refused> keep;
  // Refusals added this round (after the poll) are not in `fds`.
  for (size_t i = 0; i < refused.size(); ++i) {
    bool done = now >= refused[i].until;
    if (!done && first + i < fds.size() && fds[first + i].fd == refused[i].fd && fds[first + i].revents != 0) {
      char buf[256];
      const ssize_t r = recv(refused[i].fd, buf, sizeof(buf), MSG_DONTWAIT);
      done = r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR);
    }
    if (done) {
      close(refused[i].fd);
    } else {
      keep.push_back(refused[i]);
    }
  }
  refused.swap(keep);
}

}  // namespace smart
