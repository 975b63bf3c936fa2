// The shm provider's memfd hand-over: a memory blade exports its pool's
// descriptor over a Unix socket of its own to clients that present a token
// from their TCP handshake (and run as an allowed user); the client maps it.
// A pool goes to other users only sealed, so that no client can shrink it
// (the blade and every other client would die of SIGBUS) or grow it.
#include "smart/transport/shm/shm_transport.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>

#include "smart/common.h"
#include "smart/logging.h"
#include "smart/resource/net.h"
#include "smart/status.h"
#include "smart/transport/shm/shm_internal.h"

namespace smart::shm {

namespace {

constexpr size_t kTokenBytes = 16;
constexpr uint64_t kExportLifetimeNs = 60ull * 1000 * 1000 * 1000;

std::string RandomToken() {
  std::string token(kTokenBytes, '\0');
  if (getrandom(token.data(), token.size(), 0) != static_cast<ssize_t>(token.size())) {
    throw Error("shm transport: getrandom failed: " + std::string(strerror(errno)));
  }
  return token;
}

// A Unix socket address for a path (the caller checked its length).
sockaddr_un PathAddress(const std::string& path, socklen_t* len) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, path.data(), path.size());
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
  return addr;
}

// True for a directory this process's user owns and may write to, and no
// one else may write to (no group or other write bit).
bool PrivateDirectory(const char* path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 022) == 0 &&
         access(path, W_OK) == 0;
}

// A socket directory left by a blade that died without cleaning up (killed,
// crashed) is this old at least before another blade removes it: a live
// blade binds and listens within moments of creating its directory.
constexpr int kStaleSocketDirectorySeconds = 60;

// Removes the socket directories in `base` that this user's dead blades
// left: smart-shm.* directories of this user, older than a minute, whose
// memfd.sock nobody listens on (or that hold no socket at all).
void RemoveStaleSocketDirectories(const std::string& base) {
  DIR* d = opendir(base.c_str());
  if (d == nullptr) return;
  const time_t now = time(nullptr);
  while (dirent* e = readdir(d)) {
    if (strncmp(e->d_name, "smart-shm.", 10) != 0) continue;
    const std::string dir = base + "/" + e->d_name;
    struct stat st;
    if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
        now - st.st_mtime < kStaleSocketDirectorySeconds) {
      continue;
    }
    const std::string path = dir + "/memfd.sock";
    if (path.size() >= sizeof(sockaddr_un::sun_path)) continue;
    struct stat sock_st;
    if (lstat(path.c_str(), &sock_st) == 0) {
      if (!S_ISSOCK(sock_st.st_mode)) continue;
      const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
      if (fd < 0) continue;
      socklen_t len;
      sockaddr_un addr = PathAddress(path, &len);
      const bool refused = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 && errno == ECONNREFUSED;
      close(fd);
      if (!refused) continue;  // a live blade's, or one we cannot judge
      unlink(path.c_str());
    }
    rmdir(dir.c_str());  // fails, harmlessly, if anything else is inside
  }
  closedir(d);
}

// A new private directory for the memfd socket: $XDG_RUNTIME_DIR when it is
// set, is the user's own and no one else's (a variable pointing elsewhere,
// at a directory another user owns or may write to, is not trusted), and no
// other user needs to reach the socket; else a mkdtemp directory in /tmp.
std::string MakeSocketDirectory(bool shared) {
  const char* runtime = getenv("XDG_RUNTIME_DIR");
  const bool use_runtime = runtime != nullptr && runtime[0] == '/' && !shared && PrivateDirectory(runtime);
  const std::string base = use_runtime ? runtime : "/tmp";
  RemoveStaleSocketDirectories(base);
  std::string dir = base + "/smart-shm.XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) throw Error(Errno(("shm transport: creating a directory in " + base).c_str()));
  return dir;
}

// The answer to a client whose user may not map the pool: this word, then
// the blade's uid, instead of a region count.
constexpr uint64_t kRefusedUser = ~uint64_t{0};

// Why an Unix-socket connect to the blade failed, in words a user can act on.
std::string DescribeConnectFailure(const std::string& path, int err) {
  std::string message = "shm transport: cannot reach the memory blade's shared memory at " + path + ": " + strerror(err);
  if (err == EACCES) {
    struct stat st;
    const std::string dir = path.substr(0, path.rfind('/'));
    const std::string owner = stat(dir.c_str(), &st) == 0 ? "uid " + std::to_string(st.st_uid) : "another user";
    message += " (the memory blade runs as " + owner + " and this process as uid " + std::to_string(geteuid()) +
               "; the blade shares its pool with other users only when its auth.allow_uids lists them)";
  } else {
    message += ". The shm transport only reaches memory blades on this host; use \"transport\": \"verbs\" for a "
               "remote one";
  }
  return message;
}


// The answer to a client whose user may map only a sealed pool, when the
// pool is a file or device: this word, then the blade's uid.
constexpr uint64_t kRefusedUnsealed = ~uint64_t{0} - 1;

constexpr unsigned kPoolSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

// Answers a peer refused with `code` (kRefusedUser, kRefusedUnsealed): the
// code, then the blade's uid, instead of a region count.
void SendRefusal(int fd, uint64_t code) {
  const uint64_t answer[2] = {code, geteuid()};
  ssize_t ignored = send(fd, answer, sizeof(answer), MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)ignored;
}

}  // namespace

bool SealPool(int fd) { return fcntl(fd, F_ADD_SEALS, kPoolSeals) == 0; }

bool PoolSealed(int fd) {
  const int seals = fcntl(fd, F_GET_SEALS);
  return seals >= 0 && (static_cast<unsigned>(seals) & kPoolSeals) == kPoolSeals;
}

std::string ShmDevice::export_regions(const std::vector<const MemoryRegion*>& regions) {
  PendingExport pending;
  for (const MemoryRegion* region : regions) {
    const auto* shm_region = dynamic_cast<const ShmRegion*>(region);
    if (shm_region == nullptr || shm_region->memfd() < 0) {
      throw Error("shm transport: only regions from allocate_shared_region can be exported");
    }
    pending.fds.push_back(shm_region->memfd());
    pending.lengths.push_back(shm_region->length());
    pending.sealed = pending.sealed && shm_region->sealed();
  }
  std::lock_guard<std::mutex> lock(export_mutex_);
  if (listen_fd_ < 0) {
    // A socket in a directory of its own, not in the abstract namespace
    // that every local user can reach: the directory is the blade user's
    // alone (0700), or only searchable by others (0711) when
    // auth.allow_uids names other users; serve_fds checks every peer's
    // credentials either way.
    const bool shared = !allowed_uids_.empty();
    const std::string dir = MakeSocketDirectory(shared);
    const std::string path = dir + "/memfd.sock";
    if (path.size() >= sizeof(sockaddr_un::sun_path)) {
      rmdir(dir.c_str());
      throw Error("shm transport: the socket path " + path + " is too long for a Unix socket; set XDG_RUNTIME_DIR "
                  "to a shorter directory");
    }
    const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      rmdir(dir.c_str());
      throw Error(Errno("shm transport: socket"));
    }
    socklen_t len;
    sockaddr_un addr = PathAddress(path, &len);
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(fd, 64) != 0 ||
        (shared && (chmod(dir.c_str(), 0711) != 0 || chmod(path.c_str(), 0666) != 0)) ||
        pipe2(stop_pipe_, O_CLOEXEC) != 0) {
      const std::string message = Errno(("shm transport: setting up the memfd socket " + path).c_str());
      close(fd);
      unlink(path.c_str());
      rmdir(dir.c_str());
      throw Error(message);
    }
    socket_path_ = path;
    listen_fd_ = fd;
    fd_server_ = std::thread([this] { serve_fds(); });
  }
  const uint64_t now = NowNs();
  for (auto it = pending_exports_.begin(); it != pending_exports_.end();) {
    it = it->second.expires_ns < now ? pending_exports_.erase(it) : std::next(it);
  }
  pending.expires_ns = now + kExportLifetimeNs;
  const std::string token = RandomToken();
  pending_exports_[token] = std::move(pending);
  return socket_path_ + '\0' + token;
}

bool ShmDevice::user_allowed(uint32_t uid) const {
  if (uid == geteuid()) return true;
  return std::find(allowed_uids_.begin(), allowed_uids_.end(), uid) != allowed_uids_.end();
}

namespace {

// Peers of the memfd socket that have yet to send their token, at most this
// many at once (a newcomer beyond it drops the longest waiting).
constexpr size_t kMaxWaitingPeers = 64;
// How long a peer may take to send its token; a refused user's, briefly.
constexpr uint64_t kTokenWaitNs = 5ull * 1000 * 1000 * 1000;
constexpr uint64_t kRefusedWaitNs = 200ull * 1000 * 1000;

}  // namespace

// One thread serves every peer without blocking on any: a peer that connects
// and stalls, or a flood of them, holds up no other client. A peer's
// credentials are checked at accept; its answer goes out once its token has
// arrived (read first: closing a socket with its data unread could discard
// the answer before the peer reads it), or its time is up.
void ShmDevice::serve_fds() {
  struct Waiting {
    int fd;
    ucred cred;
    bool allowed;
    uint64_t deadline_ns;
  };
  std::vector<Waiting> waiting;
  uint64_t accept_paused_until_ns = 0;
  auto close_all = [&] {
    for (const Waiting& w : waiting) close(w.fd);
  };
  for (;;) {
    const uint64_t now = NowNs();
    const bool accepting = now >= accept_paused_until_ns;
    std::vector<pollfd> fds = {{accepting ? listen_fd_ : -1, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
    uint64_t next_ns = accepting ? ~uint64_t{0} : accept_paused_until_ns;
    for (const Waiting& w : waiting) {
      fds.push_back({w.fd, POLLIN, 0});
      next_ns = std::min(next_ns, w.deadline_ns);
    }
    const int timeout_ms =
        next_ns == ~uint64_t{0} ? -1 : static_cast<int>(next_ns > now ? (next_ns - now) / 1000000 + 1 : 0);
    if (poll(fds.data(), fds.size(), timeout_ms) < 0) {
      if (errno == EINTR) continue;
      close_all();
      return;
    }
    if (fds[1].revents) {
      close_all();
      return;
    }
    // Peers whose token arrived (or who hung up), or whose time is up.
    const uint64_t after = NowNs();
    std::vector<Waiting> still;
    for (size_t i = 0; i < waiting.size(); ++i) {
      const Waiting& w = waiting[i];
      const bool ready = fds[2 + i].revents != 0;
      if (!ready && after < w.deadline_ns) {
        still.push_back(w);
        continue;
      }
      char token[kTokenBytes];
      const ssize_t n = ready ? recv(w.fd, token, sizeof(token), MSG_DONTWAIT) : -1;
      if (!w.allowed) {
        SendRefusal(w.fd, kRefusedUser);
      } else {
        hand_over(w.fd, w.cred, n == static_cast<ssize_t>(kTokenBytes) ? token : nullptr);
      }
      close(w.fd);
    }
    waiting.swap(still);
    if (!accepting || !(fds[0].revents & POLLIN)) continue;
    const int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (client < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // The connection waits in the backlog: do not spin on it.
        accept_paused_until_ns = NowNs() + 100ull * 1000 * 1000;
      }
      continue;
    }
    Waiting w{client, {}, false, 0};
    socklen_t cred_len = sizeof(w.cred);
    w.allowed = getsockopt(client, SOL_SOCKET, SO_PEERCRED, &w.cred, &cred_len) == 0 && user_allowed(w.cred.uid);
    if (!w.allowed) {
      uint64_t suppressed;
      if (refused_user_log_.allow(&suppressed)) {
        SMART_WARN("shm transport: refused the pool to uid %u (pid %d): only uid %u%s may map it (auth.allow_uids)%s",
                   static_cast<unsigned>(w.cred.uid), static_cast<int>(w.cred.pid), static_cast<unsigned>(geteuid()),
                   allowed_uids_.empty() ? "" : " and the users in auth.allow_uids",
                   LogRateLimit::Suppressed(suppressed).c_str());
      }
    }
    w.deadline_ns = NowNs() + (w.allowed ? kTokenWaitNs : kRefusedWaitNs);
    if (waiting.size() >= kMaxWaitingPeers) {
      // Full of peers that sent nothing: the longest waiting goes.
      uint64_t suppressed;
      if (dropped_peer_log_.allow(&suppressed)) {
        SMART_WARN("shm transport: %zu peers of the memfd socket sent no token yet; dropped the longest waiting "
                   "(pid %d)%s",
                   waiting.size(), static_cast<int>(waiting.front().cred.pid),
                   LogRateLimit::Suppressed(suppressed).c_str());
      }
      close(waiting.front().fd);
      waiting.erase(waiting.begin());
    }
    waiting.push_back(w);
  }
}

void ShmDevice::hand_over(int client, const ucred& cred, const char* token) {
  PendingExport found;
  bool ok = false;
  if (token != nullptr) {
    std::lock_guard<std::mutex> lock(export_mutex_);
    auto it = pending_exports_.find(std::string(token, kTokenBytes));
    if (it != pending_exports_.end() && it->second.expires_ns >= NowNs()) {
      found = it->second;
      pending_exports_.erase(it);  // a token is good for one client
      ok = true;
    }
  }
  if (!ok) {
    const uint32_t refused = 0;
    ssize_t ignored = send(client, &refused, sizeof(refused), MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)ignored;
    return;
  }
  // A file or device descriptor lets its holder truncate the pool (the
  // blade and every client die of SIGBUS, the data is gone) or grow it:
  // only the blade's own user, who can do that through the path anyway,
  // gets one.
  if (!found.sealed && cred.uid != geteuid()) {
    uint64_t suppressed;
    if (refused_unsealed_log_.allow(&suppressed)) {
      SMART_WARN("shm transport: refused the pool to uid %u (pid %d): it is a file or device, whose descriptor "
                 "could truncate it, and goes over shm only to uid %u; serve other users over verbs, or use "
                 "backing memfd or hugetlb%s",
                 static_cast<unsigned>(cred.uid), static_cast<int>(cred.pid), static_cast<unsigned>(geteuid()),
                 LogRateLimit::Suppressed(suppressed).c_str());
    }
    SendRefusal(client, kRefusedUnsealed);
    return;
  }
  // Payload: region count, then each region's length; the fds ride along.
  std::vector<uint64_t> payload;
  payload.push_back(found.fds.size());
  payload.insert(payload.end(), found.lengths.begin(), found.lengths.end());
  iovec iov{payload.data(), payload.size() * sizeof(uint64_t)};
  std::vector<char> control(CMSG_SPACE(sizeof(int) * found.fds.size()));
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int) * found.fds.size());
  memcpy(CMSG_DATA(cmsg), found.fds.data(), sizeof(int) * found.fds.size());
  ssize_t ignored = sendmsg(client, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)ignored;
}

ReceivedRegions ReceiveRegions(const std::string& exported) {
  const size_t nul = exported.find('\0');
  if (nul == std::string::npos || exported.size() - nul - 1 != kTokenBytes || nul == 0 ||
      nul >= sizeof(sockaddr_un::sun_path) || exported[0] != '/') {
    throw Error("shm transport: the memory blade sent malformed shared-memory details (" +
                std::to_string(exported.size()) + " bytes); is it a shm memory blade of the same version?");
  }
  const std::string name = exported.substr(0, nul);
  const std::string token = exported.substr(nul + 1);
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Error(Errno("shm transport: socket"));
  SetSocketTimeouts(fd, 5000);
  socklen_t len;
  sockaddr_un addr = PathAddress(name, &len);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    const std::string message = DescribeConnectFailure(name, errno);
    close(fd);
    throw Error(message);
  }
  // A blade that refuses this user answers and closes at once, maybe before
  // the token goes out: its answer is still there to read.
  std::string send_error;
  if (send(fd, token.data(), token.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(token.size())) {
    send_error = Errno("shm transport: sending the handshake token");
  }
  std::vector<uint64_t> payload(1 + kMemoryRegions + 8);
  iovec iov{payload.data(), payload.size() * sizeof(uint64_t)};
  std::vector<char> control(CMSG_SPACE(sizeof(int) * 16));
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  const ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  close(fd);
  std::vector<int> fds;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      fds.resize(count);
      memcpy(fds.data(), CMSG_DATA(c), count * sizeof(int));
    }
  }
  auto close_all = [&fds] {
    for (int f : fds) close(f);
  };
  if (n == 2 * static_cast<ssize_t>(sizeof(uint64_t)) && payload[0] == kRefusedUser) {
    close_all();
    throw Error("shm transport: the memory blade (uid " + std::to_string(payload[1]) +
                ") refuses to share its pool with this process's user (uid " + std::to_string(geteuid()) +
                "): run as the same user, or list uid " + std::to_string(geteuid()) +
                " in auth.allow_uids of the blade's backend.json");
  }
  if (n == 2 * static_cast<ssize_t>(sizeof(uint64_t)) && payload[0] == kRefusedUnsealed) {
    close_all();
    throw Error("shm transport: the memory blade (uid " + std::to_string(payload[1]) +
                ") keeps its pool in a file or device, which it hands over shm only to its own user, not to this "
                "process's (uid " + std::to_string(geteuid()) + "): its descriptor could truncate the pool. Run as "
                "uid " + std::to_string(payload[1]) + ", reach the blade over verbs, or give it \"backing\": "
                "\"memfd\" or \"hugetlb\"");
  }
  if (!send_error.empty()) {
    close_all();
    throw Error(send_error);
  }
  if (n < static_cast<ssize_t>(sizeof(uint64_t)) || payload[0] == 0) {
    close_all();
    throw Error(n < 0 ? Errno("shm transport: receiving the memory blade's memory")
                      : "shm transport: the memory blade refused the handshake token (expired or reused)");
  }
  const uint64_t count = payload[0];
  if (fds.size() != count || static_cast<size_t>(n) != (1 + count) * sizeof(uint64_t)) {
    close_all();
    throw Error("shm transport: the memory blade sent " + std::to_string(fds.size()) + " memory handles and " +
                std::to_string(n) + " bytes for " + std::to_string(count) + " regions");
  }
  ReceivedRegions got;
  got.fds = std::move(fds);
  got.lengths.assign(payload.begin() + 1, payload.begin() + 1 + static_cast<std::ptrdiff_t>(count));
  return got;
}

std::shared_ptr<PeerMemory> ShmDevice::import_regions(const std::vector<RemoteRegion>& regions,
                                                       const std::string& exported) {
  ReceivedRegions got = ReceiveRegions(exported);
  auto close_all = [&got] {
    for (int f : got.fds) close(f);
  };
  size_t valid = 0;
  for (const RemoteRegion& r : regions) valid += r.valid ? 1 : 0;
  if (got.fds.size() != valid) {
    close_all();
    throw Error("shm transport: the memory blade sent " + std::to_string(got.fds.size()) + " memory handles for " +
                std::to_string(valid) + " advertised regions");
  }
  auto peer = std::make_shared<ShmPeerMemory>();
  size_t next = 0;
  for (const RemoteRegion& r : regions) {
    if (!r.valid) continue;
    const uint64_t length = got.lengths[next];
    const int region_fd = got.fds[next++];
    if (length != r.length) {
      close_all();
      throw Error("shm transport: region length mismatch between handshake (" + std::to_string(r.length) +
                  ") and memory handle (" + std::to_string(length) + ")");
    }
    // A mapping past the end of a file takes SIGBUS at the first touch: a
    // pool shorter than advertised is an error here instead.
    struct stat st {};
    if (fstat(region_fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) < length) {
      close_all();
      throw Error("shm transport: the memory blade's pool holds " + std::to_string(st.st_size) +
                  " bytes, less than the " + std::to_string(length) + " it advertised");
    }
    void* local = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, region_fd, 0);
    if (local == MAP_FAILED) {
      const std::string message = Errno("shm transport: mapping the memory blade's pool");
      close_all();
      throw Error(message);
    }
    madvise(local, length, MADV_HUGEPAGE);
    HintHugePages(length);
    peer->regions_.push_back(MappedRegion{r.addr, r.length, r.rkey, static_cast<char*>(local)});
  }
  close_all();
  return peer;
}

}  // namespace smart::shm
