// The memory blade's sessions: a proven peer's handshake (its own thread
// makes its queue pairs and sends the pool's details), the end of a
// session, and fencing a session another client asked to fence.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <fcntl.h>
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

std::chrono::steady_clock::time_point Now() { return std::chrono::steady_clock::now(); }

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

void Target::Impl::start_handshake_thread(int fd, std::unique_ptr<BladeHandshake> machine, Deadline deadline) {
  handshakes_running.fetch_add(1);
  auto state = std::make_shared<HandshakeState>();
  state->fd = fd;
  handshakes.push_back(Handshake{std::thread(), state});
  try {
    FaultPoint("blade.handshake.thread");
    BladeHandshake* m = machine.get();
    handshakes.back().thread = std::thread([this, fd, m, deadline, s = state.get()] {
      finish_handshake(fd, std::unique_ptr<BladeHandshake>(m), deadline, s);
      if (!s->counted_as_session) handshakes_running.fetch_sub(1);
      s->done.store(true);
      wake();
    });
    (void)machine.release();  // the thread owns it now
  } catch (const std::system_error& e) {
    // No thread (EAGAIN: the process or the system is at its thread limit):
    // this client is refused, the blade serves on.
    handshakes.pop_back();
    handshakes_running.fetch_sub(1);
    machine->refuse(std::string("the memory blade cannot start a handshake now (") + e.what() + "); try again later",
                    BladeHandshake::Refusal::kOther, true);
    const std::string answer = machine->take_output();
    ssize_t ignored = send(fd, answer.data(), answer.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)ignored;
    linger(fd);
  }
}

void Target::Impl::finish_handshake(int fd, std::unique_ptr<BladeHandshake> machine, Deadline deadline,
                                    HandshakeState* state) {
  auto session = std::make_unique<Session>();
  session->fd = fd;
  session->peer = machine->peer();
  const std::string& peer = session->peer;
  bool answered = false;
  try {
    // From here on this thread waits on the socket, within the deadline.
    const int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
      throw Error(std::string("fcntl on the client's socket: ") + strerror(errno));
    }
    SetSocketTimeouts(fd, smart_config.connect_timeout_ms);
    const ClientHello& hello = machine->hello();
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
    const SessionKey* key = machine->key();
    reply.has_proof = key != nullptr;
    Transcript& transcript = machine->transcript();
    transcript.add(reply.EncodeUnproven());
    if (key != nullptr) reply.proof = key->prove(AuthRole::kBladeHello, transcript);
    answered = true;
    SendFrame(fd, reply.Encode(), peer);
    const char ready = RecvByte(fd, peer, deadline);
    if (ready != kClientReady) throw Error("client " + peer + " sent a bad readiness byte");
    SendByte(fd, kServerReady, peer);
    // From here on only EOF matters; no timeout on an idle connection.
    SetSocketTimeouts(fd, 0);
    SMART_INFO("memory blade: client %s connected with %zu queue pair(s)%s, session %d%s", peer.c_str(),
               session->qps.size(), session->grants.empty() ? "" : " and a memory window each", session->slot,
               key != nullptr ? ", authenticated" : "");
    std::lock_guard<std::mutex> lock(mutex);
    state->fd = -1;
    if (!stopping.load()) {
      sessions.push_back(std::move(session));
      handshakes_running.fetch_sub(1);
      state->counted_as_session = true;
      wake();
    }
  } catch (const std::exception& e) {
    uint64_t suppressed = 0;
    if (failures_log.allow(&suppressed)) {
      SMART_WARN("memory blade: handshake with %s failed: %s%s", peer.c_str(), e.what(),
                 LogRateLimit::Suppressed(suppressed).c_str());
    }
    if (!answered) {
      // Tell the client why, in the answer it waits for; best effort.
      machine->refuse(std::string("the memory blade could not complete the handshake: ") + e.what(),
                      BladeHandshake::Refusal::kOther);
      const std::string answer = machine->take_output();
      ssize_t ignored = send(fd, answer.data(), answer.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      (void)ignored;
    }
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    state->fd = -1;
  }
  if (session) {
    // Never became a session (failed or stopping): its queue pairs go now,
    // and its socket with it.
    end_session(std::move(session));
  }
}

}  // namespace smart
