// The memory blade's listener and handshake: accepting connections within
// max_clients, authenticating each client before anything about the pool
// leaves the blade, and noticing when a client's connection ends.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <system_error>

#include "smart/fault_injection.h"
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

std::chrono::steady_clock::time_point Now() { return std::chrono::steady_clock::now(); }

int MillisecondsUntil(Deadline t) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - Now()).count();
  return ms <= 0 ? 0 : static_cast<int>(std::min<int64_t>(ms, 1 << 30)) + 1;
}

}  // namespace

std::string PeerName(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "unknown peer";
  char host[128] = "?";
  int port = 0;
  if (ss.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    port = ntohs(a->sin6_port);
    if (strncmp(host, "::ffff:", 7) == 0) memmove(host, host + 7, strlen(host + 7) + 1);
  }
  return std::string(host) + ":" + std::to_string(port);
}

void Target::Impl::reap_handshakes(bool all) {
  for (auto it = handshakes.begin(); it != handshakes.end();) {
    if (all || it->state->done.load()) {
      if (it->thread.joinable()) it->thread.join();
      it = handshakes.erase(it);
    } else {
      ++it;
    }
  }
}

void Target::Impl::wake() {
  char c = 'n';
  ssize_t ignored = write(wake_pipe[1], &c, 1);
  (void)ignored;
}

void Target::Impl::serve() {
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
    const size_t first_refused = fds.size();
    int timeout_ms = watched.empty() ? 500 : kFenceScanMs;
    for (const Refused& r : refused) {
      fds.push_back({r.fd, POLLIN, 0});
      timeout_ms = std::min(timeout_ms, MillisecondsUntil(r.until));
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
    drain_refused(fds, first_refused);
    reap_handshakes(false);
    if (accepting && (fds[0].revents & POLLIN)) accept_one();
  }
}

void Target::Impl::end_session(std::unique_ptr<Session> session) {
  // Windows, then queue pairs (~Session), then the slot: once waiters see
  // the session gone, nothing of it can reach the pool.
  const int slot = session->slot;
  session.reset();
  close_session_slot(slot);
}

void Target::Impl::fence_requested_sessions() {
  std::vector<std::unique_ptr<Session>> fenced;
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto it = sessions.begin(); it != sessions.end();) {
      const uint64_t word = __atomic_load_n(&session_table[(*it)->slot], __ATOMIC_ACQUIRE);
      if ((word & kSessionFenceBit) != 0) {
        fenced.push_back(std::move(*it));
        it = sessions.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (std::unique_ptr<Session>& gone : fenced) {
    if (device->kind() == TransportKind::kVerbs) {
      SMART_WARN("memory blade: fencing client %s (session %d): another client found a lock of it past its lease; "
                 "its memory windows and queue pairs go, and it must connect again",
                 gone->peer.c_str(), gone->slot);
    } else {
      SMART_WARN("memory blade: fencing client %s (session %d): another client found a lock of it past its lease; "
                 "over shm the client keeps the pool mapped and its own provider refuses its writes from now on "
                 "(a soft fence); it must connect again",
                 gone->peer.c_str(), gone->slot);
    }
    // Why, for the client's log; best effort, the connection closes next.
    const std::string why = "fenced: another client found a lock of this session past its lease";
    ssize_t ignored = send(gone->fd, why.data(), why.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)ignored;
    end_session(std::move(gone));
  }
}

void Target::Impl::accept_one() {
  // At the descriptor budget (dropped handshakes still letting go of their
  // sockets, refusals lingering) the newcomer waits in the backlog a moment:
  // accepting it could take the last descriptor.
  int held;
  {
    std::lock_guard<std::mutex> lock(mutex);
    held = static_cast<int>(sessions.size()) + handshakes_running.load() + static_cast<int>(refused.size());
  }
  if (held >= connection_budget) {
    accept_paused_until = Now() + std::chrono::milliseconds(kBudgetPauseMs);
    return;
  }
  const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
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
  int established, in_handshake;
  {
    // One snapshot: a handshake leaves the count when its session joins
    // `sessions`, under this mutex.
    std::lock_guard<std::mutex> lock(mutex);
    established = static_cast<int>(sessions.size());
    in_handshake = handshakes_running.load() - handshakes_evicted.load();
  }
  // A full blade makes room by dropping its longest-waiting unauthenticated
  // handshake; only when every slot is a session or a proven peer, or the
  // dropped ones have yet to finish (bounded by max_clients again), is the
  // newcomer refused.
  if (established + in_handshake >= backend_config.max_clients &&
      (handshakes_evicted.load() >= backend_config.max_clients || !evict_idle_handshake())) {
    refuse(fd, PeerName(fd),
           "the memory blade is at max_clients (" + std::to_string(backend_config.max_clients) + "): " +
               std::to_string(established) + " sessions and " + std::to_string(in_handshake) +
               " handshakes in progress; try again later");
    return;
  }
  // Each handshake runs in its own thread so that a slow or silent client
  // cannot hold up the others; max_clients bounds the threads.
  handshakes_running.fetch_add(1);
  auto state = std::make_shared<HandshakeState>();
  state->fd = fd;
  handshakes.push_back(Handshake{std::thread(), state});
  try {
    FaultPoint("blade.handshake.thread");
    handshakes.back().thread = std::thread([this, fd, s = state.get()] {
      handshake(fd, s);
      if (s->evicted.load()) handshakes_evicted.fetch_sub(1);
      if (!s->counted_as_session) handshakes_running.fetch_sub(1);
      s->done.store(true);
      wake();
    });
  } catch (const std::system_error& e) {
    // No thread (EAGAIN: the process or the system is at its thread limit):
    // this client is refused, the blade serves on.
    handshakes.pop_back();
    handshakes_running.fetch_sub(1);
    refuse(fd, PeerName(fd),
           std::string("the memory blade cannot start a handshake now (") + e.what() + "); try again later");
  }
}

bool Target::Impl::evict_idle_handshake() {
  // `handshakes` is in accept order: the first candidate is the oldest.
  for (Handshake& h : handshakes) {
    HandshakeState& state = *h.state;
    if (state.done.load() || state.evicted.load()) continue;
    std::string peer;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (state.fd < 0 || state.proven.load()) continue;
      peer = PeerName(state.fd);
      state.evicted.store(true);
      handshakes_evicted.fetch_add(1);
      // Its thread's next read ends at once; it tells the peer why and
      // lets go of the socket.
      shutdown(state.fd, SHUT_RD);
    }
    uint64_t suppressed = 0;
    if (evicted_log.allow(&suppressed)) {
      const auto waited =
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - state.started);
      SMART_WARN("memory blade: at max_clients (%d): dropped the handshake of %s, unauthenticated after %lld ms and "
                 "the longest waiting, to admit a new connection%s",
                 backend_config.max_clients, peer.c_str(), static_cast<long long>(waited.count()),
                 LogRateLimit::Suppressed(suppressed).c_str());
    }
    return true;
  }
  return false;
}

void Target::Impl::refuse(int fd, const std::string& peer, const std::string& reason) {
  // At most a line a second, not one per connection of a flood.
  uint64_t suppressed = 0;
  if (refused_log.allow(&suppressed)) {
    SMART_WARN("memory blade: refused connection from %s: %s%s", peer.c_str(), reason.c_str(),
               LogRateLimit::Suppressed(suppressed).c_str());
  }
  AuthChallenge answer;
  answer.error = reason;
  WireWriter frame;
  const std::string body = answer.Encode();
  frame.u32(static_cast<uint32_t>(body.size()));
  frame.bytes(body.data(), body.size());
  ssize_t ignored = send(fd, frame.data().data(), frame.data().size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  (void)ignored;
  shutdown(fd, SHUT_WR);
  // Closing now, with the peer's hello unread, would reset the connection
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
  for (size_t i = 0; i < refused.size(); ++i) {
    bool done = now >= refused[i].until;
    if (!done && first + i < fds.size() && fds[first + i].revents != 0) {
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

void Target::Impl::handshake(int fd, HandshakeState* state) {
  auto session = std::make_unique<Session>();
  session->fd = fd;
  session->peer = PeerName(fd);
  const std::string& peer = session->peer;
  const Deadline deadline = Now() + std::chrono::milliseconds(smart_config.connect_timeout_ms);
  // Which answer the client waits for, should the handshake fail.
  enum class Stage { kChallenge, kServerHello, kDone } stage = Stage::kChallenge;
  // Refuses the client with `reason`, logged through `log` (each kind of
  // refusal at most once a second; nullptr: not logged).
  auto refuse_client = [&](const std::string& reason, LogRateLimit* log) {
    uint64_t suppressed = 0;
    if (log != nullptr && log->allow(&suppressed)) {
      SMART_WARN("memory blade: refused client %s: %s%s", peer.c_str(), reason.c_str(),
                 LogRateLimit::Suppressed(suppressed).c_str());
    }
    if (stage == Stage::kChallenge) {
      AuthChallenge answer;
      answer.error = reason;
      SendFrame(fd, answer.Encode(), peer);
    } else if (stage == Stage::kServerHello) {
      ServerHello answer;
      answer.error = reason;
      SendFrame(fd, answer.Encode(), peer);
    }
    stage = Stage::kDone;
  };
  auto run = [&] {
    SetSocketTimeouts(fd, smart_config.connect_timeout_ms);
    // Every message so far, for the proofs (smart/resource/auth.h).
    Transcript transcript;
    const std::string auth_frame = RecvFrame(fd, peer, kMaxAuthFrame, deadline);
    const AuthHello auth_hello = AuthHello::Decode(auth_frame, peer);
    transcript.add(auth_frame);
    if (key && !auth_hello.has_key) {
      refuse_client("the memory blade requires a key and the client has none: set \"auth\": {\"key_file\": ...} "
                    "in the client's smart_config.json to a copy of the memory blade's key file",
                    &refusals_log);
      return;
    }
    if (key && auth_hello.key_id != key->id()) {
      refuse_client("the client's key (ID " + auth_hello.key_id + ") is not the memory blade's (ID " + key->id() +
                    "): give both sides the same key file (smart_keygen prints a key's ID, and so does the first "
                    "line of every refusal)",
                    &wrong_key_log);
      return;
    }
    // The client's proof will cover the address it dialled: a relay that
    // passed the connection on to this blade cannot change it.
    const SocketAddress arrived = LocalAddress(fd);
    if (key && !backend_config.accept_forwarded && auth_hello.dialled != arrived) {
      refuse_client("the client dialled " + auth_hello.dialled.ToString() + " but its connection arrived at " +
                    arrived.ToString() + ": something forwards connections between them (a relay, NAT or a port "
                    "mapping), so the client may not be talking to the memory blade it meant; if the forwarding is "
                    "intended, set \"accept_forwarded\": true in this blade's backend.json",
                    &forwarded_log);
      return;
    }
    // No proof here: the blade proves the key only to a client that proved
    // it first (handshake.h).
    AuthChallenge challenge;
    challenge.nonce = RandomNonce();
    challenge.has_key = key.has_value();
    const std::string challenge_frame = challenge.Encode();
    transcript.add(challenge_frame);
    SendFrame(fd, challenge_frame, peer);
    stage = Stage::kServerHello;

    const std::string hello_frame = RecvFrame(fd, peer, kMaxHelloFrame, deadline);
    const ClientHello hello = ClientHello::Decode(hello_frame, peer);
    transcript.add(Unproven(hello_frame, hello.error.empty() && hello.has_proof));
    if (!hello.error.empty()) {
      // The client's own words, unproven: escaped and cut short.
      uint64_t suppressed = 0;
      if (gave_up_log.allow(&suppressed)) {
        SMART_WARN("memory blade: client %s gave up the handshake: %s%s", peer.c_str(), PeerText(hello.error).c_str(),
                   LogRateLimit::Suppressed(suppressed).c_str());
      }
      stage = Stage::kDone;
    } else if (key && !hello.has_proof) {
      refuse_client("authentication failed: the client sent no proof of the key", &refusals_log);
    } else if (key && !key->verify(AuthRole::kClient, transcript, hello.proof)) {
      refuse_client("authentication failed: the client's proof does not match the memory blade's key and this "
                    "handshake (the two sides' auth.key_file hold different keys, or messages were altered in "
                    "transit)",
                    &refusals_log);
    } else if (hello.transport != device->kind()) {
      refuse_client(std::string("the memory blade uses the ") + TransportKindName(device->kind()) +
                    " transport and the client " + TransportKindName(hello.transport) +
                    ": set \"transport\" in smart_config.json to the same value on both",
                    &refusals_log);
    }
    if (stage == Stage::kDone) return;  // refused: nothing more to do or say
    {
      // From here on the peer keeps its place at max_clients.
      std::lock_guard<std::mutex> lock(mutex);
      if (state->evicted.load()) throw Error("dropped at max_clients before it proved the key");
      state->proven.store(true);
    }

    // The client proved the key (or none is required): only now does
    // anything about the pool leave the blade.
    ServerHello reply;
    session->cq = device->create_cq(16, nullptr, false);
    QueuePairOptions options;
    options.cq = session->cq.get();
    options.max_send_wr = 1;
    options.max_recv_wr = 1;
    options.max_sge = 1;
    options.max_inline_data = 0;
    for (const QueuePairEndpoint& remote : hello.endpoints) {
      session->qps.push_back(device->create_qp(options));
      session->qps.back()->connect(remote, nullptr);
      reply.endpoints.push_back(session->qps.back()->endpoint());
      if (auto grant = device->grant_access(*pool, *session->qps.back())) {
        reply.window_rkeys.push_back(grant->rkey());
        session->grants.push_back(std::move(grant));
        if (Now() > deadline) {
          throw Error("binding " + std::to_string(session->grants.size()) + " memory windows took longer than "
                      "connect_timeout_ms");
        }
      }
    }
    reply.regions[kMainMemoryRegion] = pool->remote();
    reply.exported = device->export_regions({pool.get()});
    session->slot = open_session_slot(&reply.session);
    if (session->slot == 0) throw Error("no free session slot (" + std::to_string(kMaxSessions - 1) + " sessions)");
    // The client checks this proof before it uses anything the reply says.
    reply.has_proof = key.has_value();
    transcript.add(reply.EncodeUnproven());
    if (key) reply.proof = key->prove(AuthRole::kBladeHello, transcript);
    SendFrame(fd, reply.Encode(), peer);
    stage = Stage::kDone;
    const char ready = RecvByte(fd, peer, deadline);
    if (ready != kClientReady) throw Error("client " + peer + " sent a bad readiness byte");
    SendByte(fd, kServerReady, peer);
    // From here on only EOF matters; no timeout on an idle connection.
    SetSocketTimeouts(fd, 0);
    SMART_INFO("memory blade: client %s connected with %zu queue pair(s)%s, session %d%s", peer.c_str(),
               session->qps.size(), session->grants.empty() ? "" : " and a memory window each", session->slot,
               key ? ", authenticated" : "");
    std::lock_guard<std::mutex> lock(mutex);
    state->fd = -1;
    if (!stopping.load()) {
      sessions.push_back(std::move(session));
      handshakes_running.fetch_sub(1);
      state->counted_as_session = true;
      wake();
    }
  };
  try {
    run();
  } catch (const std::exception& e) {
    std::string why = std::string("the memory blade could not complete the handshake: ") + e.what();
    uint64_t suppressed = 0;
    if (state->evicted.load()) {
      FaultPoint("blade.handshake.dropped");
      // Logged by evict_idle_handshake.
      why = "the memory blade is at max_clients (" + std::to_string(backend_config.max_clients) +
            ") and dropped this handshake, the longest waiting without proving the key, for a newer connection; "
            "try again";
    } else if (failures_log.allow(&suppressed)) {
      SMART_WARN("memory blade: handshake with %s failed: %s%s", peer.c_str(), e.what(),
                 LogRateLimit::Suppressed(suppressed).c_str());
    }
    // Tell the client why, in the answer it waits for; best effort.
    try {
      refuse_client(why, nullptr);
    } catch (const std::exception&) {
    }
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    state->fd = -1;
  }
  if (session) {
    // Never became a session (failed, refused or stopping): its queue
    // pairs go now.
    end_session(std::move(session));
  }
}

}  // namespace smart
