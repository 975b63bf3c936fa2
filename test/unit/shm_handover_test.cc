// The shm provider's memfd hand-over seen from a client that does not play
// by the rules: whatever it does to the descriptor it received (shrink,
// grow, change the seals, close), the memory blade's pool stays as it was;
// and a pool kept in a file goes only to the blade's own user.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "smart/status.h"
#include "smart/transport.h"
#include "smart/transport/shm/shm_transport.h"
#include "test_util.h"

namespace smart {
namespace {

constexpr size_t kPoolBytes = 1 << 20;

off_t FileSize(int fd) {
  struct stat st {};
  return fstat(fd, &st) == 0 ? st.st_size : -1;
}

TEST(ShmHandoverTest, AReceivedPoolCanNeitherShrinkNorGrowNorChangeItsSeals) {
  auto device = OpenShmDevice(testing::TestConfig());
  auto pool = device->allocate_shared_region(kPoolBytes);
  char* bytes = static_cast<char*>(pool->addr());
  bytes[kPoolBytes - 1] = 'z';

  shm::ReceivedRegions got = shm::ReceiveRegions(device->export_regions({pool.get()}));
  ASSERT_EQ(got.fds.size(), 1u);
  ASSERT_EQ(got.lengths[0], kPoolBytes);
  const int fd = got.fds[0];
  EXPECT_TRUE(shm::PoolSealed(fd));

  errno = 0;
  EXPECT_NE(ftruncate(fd, 0), 0);
  EXPECT_EQ(errno, EPERM) << strerror(errno);
  EXPECT_NE(ftruncate(fd, kPoolBytes / 2), 0);
  EXPECT_NE(ftruncate(fd, 2 * kPoolBytes), 0);
  EXPECT_NE(fallocate(fd, 0, 0, 4 * kPoolBytes), 0);
  // Nor can the client seal writes away from everyone else.
  EXPECT_NE(fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE), 0);
  EXPECT_NE(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), 0);
  EXPECT_EQ(FileSize(fd), static_cast<off_t>(kPoolBytes));

  // The client's own mapping works, and what it writes the blade sees.
  void* mapped = mmap(nullptr, kPoolBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(mapped, MAP_FAILED);
  EXPECT_EQ(static_cast<char*>(mapped)[kPoolBytes - 1], 'z');
  static_cast<char*>(mapped)[0] = 'a';
  munmap(mapped, kPoolBytes);
  close(fd);

  // The blade's mapping is whole: its last byte still reads (a shrunk pool
  // would be SIGBUS here), and writes still land.
  EXPECT_EQ(bytes[0], 'a');
  EXPECT_EQ(bytes[kPoolBytes - 1], 'z');
  bytes[kPoolBytes - 1] = 'y';
  EXPECT_EQ(bytes[kPoolBytes - 1], 'y');

  // Another client after it gets the same whole pool.
  auto peer = device->import_regions({pool->remote()}, device->export_regions({pool.get()}));
  EXPECT_NE(peer, nullptr);
}

// A pool in a file (as "backing": "file:PATH" makes it).
struct FilePool {
  std::string path;
  std::unique_ptr<MemoryRegion> region;
};

FilePool MakeFilePool(Device& device) {
  FilePool p;
  char path[] = "/tmp/smart-handover-test.XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  p.path = path;
  EXPECT_EQ(ftruncate(fd, kPoolBytes), 0);
  void* addr = mmap(nullptr, kPoolBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  EXPECT_NE(addr, MAP_FAILED);
  p.region = device.adopt_shared_region(addr, kPoolBytes, fd);
  return p;
}

TEST(ShmHandoverTest, AFilePoolIsNotSealedAndGoesToTheBladesOwnUser) {
  auto device = OpenShmDevice(testing::TestConfig());
  FilePool pool = MakeFilePool(*device);
  shm::ReceivedRegions got = shm::ReceiveRegions(device->export_regions({pool.region.get()}));
  ASSERT_EQ(got.fds.size(), 1u);
  EXPECT_FALSE(shm::PoolSealed(got.fds[0]));
  close(got.fds[0]);
  pool.region.reset();
  unlink(pool.path.c_str());
}

// Runs `body` in a child process as user nobody; the child's exit code.
template <typename Body>
int AsNobody(Body body) {
  const passwd* pw = getpwnam("nobody");
  if (pw == nullptr) return -1;
  const uid_t uid = pw->pw_uid;
  const gid_t gid = pw->pw_gid;
  const pid_t pid = fork();
  if (pid == 0) {
    if (setgroups(0, nullptr) != 0 || setresgid(gid, gid, gid) != 0 || setresuid(uid, uid, uid) != 0) _exit(90);
    _exit(body());
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -2;
  return WEXITSTATUS(status);
}

TEST(ShmHandoverTest, AnotherUserAllowedByTheBladeGetsASealedPoolButNoFile) {
  if (geteuid() != 0 || getpwnam("nobody") == nullptr) GTEST_SKIP() << "needs root and a user 'nobody'";
  SmartConfig config = testing::TestConfig();
  config.auth.allow_uids = {getpwnam("nobody")->pw_uid};
  auto device = OpenShmDevice(config);
  auto memfd_pool = device->allocate_shared_region(kPoolBytes);
  FilePool file_pool = MakeFilePool(*device);
  const std::string sealed = device->export_regions({memfd_pool.get()});
  const std::string file = device->export_regions({file_pool.region.get()});

  // 0: received and sealed; 1: refused with the file message; else wrong.
  auto receive = [](const std::string& exported) {
    return [exported]() -> int {
      try {
        shm::ReceivedRegions got = shm::ReceiveRegions(exported);
        const bool ok = got.fds.size() == 1 && shm::PoolSealed(got.fds[0]) && ftruncate(got.fds[0], 0) != 0;
        return ok ? 0 : 2;
      } catch (const Error& e) {
        return std::string(e.what()).find("keeps its pool in a file or device") != std::string::npos ? 1 : 3;
      }
    };
  };
  EXPECT_EQ(AsNobody(receive(sealed)), 0);
  EXPECT_EQ(AsNobody(receive(file)), 1);

  struct stat st {};
  ASSERT_EQ(stat(file_pool.path.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, static_cast<off_t>(kPoolBytes));
  file_pool.region.reset();
  unlink(file_pool.path.c_str());
}

// A peer of the memfd socket: connected, saying nothing.
int ConnectSilently(const std::string& exported) {
  const std::string path = exported.substr(0, exported.find('\0'));
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << strerror(errno);
  return fd;
}

TEST(ShmHandoverTest, PeersThatStallHoldUpNoClient) {
  auto device = OpenShmDevice(testing::TestConfig());
  auto pool = device->allocate_shared_region(kPoolBytes);
  // Each would hold a server that serves one peer at a time for its whole
  // token wait (5 s), longer than a client waits for its answer (5 s).
  std::vector<int> stalled;
  for (int i = 0; i < 3; ++i) stalled.push_back(ConnectSilently(device->export_regions({pool.get()})));
  for (int i = 0; i < 3; ++i) {
    auto peer = device->import_regions({pool->remote()}, device->export_regions({pool.get()}));
    EXPECT_NE(peer, nullptr);
  }
  // And more of them than the server keeps waiting: the oldest go.
  for (int i = 0; i < 100; ++i) stalled.push_back(ConnectSilently(device->export_regions({pool.get()})));
  EXPECT_NE(device->import_regions({pool->remote()}, device->export_regions({pool.get()})), nullptr);
  for (int fd : stalled) close(fd);
}

TEST(ShmHandoverTest, AFloodOfRefusedPeersWritesALineASecond) {
  if (geteuid() != 0 || getpwnam("nobody") == nullptr) GTEST_SKIP() << "needs root and a user 'nobody'";
  SmartConfig config = testing::TestConfig();
  config.auth.allow_uids = {4242};  // someone else: the socket is reachable, nobody is refused
  auto device = OpenShmDevice(config);
  auto pool = device->allocate_shared_region(kPoolBytes);
  const std::string exported = device->export_regions({pool.get()});
  ::testing::internal::CaptureStderr();
  const int refused = AsNobody([exported]() -> int {
    int refused = 0;
    for (int i = 0; i < 300; ++i) {
      try {
        shm::ReceiveRegions(exported);
      } catch (const Error& e) {
        refused += std::string(e.what()).find("refuses to share its pool") != std::string::npos;
      }
    }
    return refused == 300 ? 0 : 1;
  });
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(refused, 0);
  size_t lines = 0;
  for (size_t at = log.find("refused the pool to uid"); at != std::string::npos;
       at = log.find("refused the pool to uid", at + 1)) {
    ++lines;
  }
  // 300 refusals in well under a minute: a line a second, however fast.
  EXPECT_GE(lines, 1u);
  EXPECT_LT(lines, 30u) << log;
}

// Makes `dir` look created `seconds` ago.
void Age(const std::string& dir, int seconds) {
  const timeval then{time(nullptr) - seconds, 0};
  const timeval times[2] = {then, then};
  ASSERT_EQ(utimes(dir.c_str(), times), 0);
}

TEST(ShmHandoverTest, ADeadBladesSocketDirectoryIsRemovedByTheNextBlade) {
  // Where the next blade's directory goes (XDG_RUNTIME_DIR is not used for
  // it here: it may be unset or not private).
  const char* saved = getenv("XDG_RUNTIME_DIR");
  const std::string saved_value = saved != nullptr ? saved : "";
  unsetenv("XDG_RUNTIME_DIR");
  // A dead blade's: its socket is there, nobody listens.
  char dead_name[] = "/tmp/smart-shm.XXXXXX";
  const std::string dead = mkdtemp(dead_name);
  const std::string dead_sock = dead + "/memfd.sock";
  {
    const int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path, dead_sock.c_str(), dead_sock.size() + 1);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    close(fd);
  }
  Age(dead, 120);
  // A dead blade's that died before it bound its socket, and a fresh one's
  // (a blade between mkdtemp and bind).
  char empty_name[] = "/tmp/smart-shm.XXXXXX";
  const std::string empty = mkdtemp(empty_name);
  Age(empty, 120);
  char young_name[] = "/tmp/smart-shm.XXXXXX";
  const std::string young = mkdtemp(young_name);
  // A live blade's, however old.
  auto live_device = OpenShmDevice(testing::TestConfig());
  auto live_pool = live_device->allocate_shared_region(kPoolBytes);
  const std::string live_exported = live_device->export_regions({live_pool.get()});
  const std::string live = live_exported.substr(0, live_exported.rfind('/'));
  Age(live, 120);

  auto device = OpenShmDevice(testing::TestConfig());
  auto pool = device->allocate_shared_region(kPoolBytes);
  device->export_regions({pool.get()});
  struct stat st;
  EXPECT_NE(stat(dead.c_str(), &st), 0) << dead << " is still there";
  EXPECT_NE(stat(empty.c_str(), &st), 0) << empty << " is still there";
  EXPECT_EQ(stat(young.c_str(), &st), 0) << young << " was removed";
  EXPECT_EQ(stat(live.c_str(), &st), 0) << live << " was removed";
  EXPECT_NE(live_device->import_regions({live_pool->remote()}, live_device->export_regions({live_pool.get()})),
            nullptr);
  rmdir(young.c_str());
  if (saved != nullptr) setenv("XDG_RUNTIME_DIR", saved_value.c_str(), 1);
}

}  // namespace
}  // namespace smart
