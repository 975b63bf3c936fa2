#include "smart/target/pool_backing.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "smart/status.h"

namespace smart {

namespace {

constexpr uint64_t kHugePage = uint64_t{2} << 20;
constexpr uint64_t kHugetlbfsMagic = HUGETLBFS_MAGIC;
constexpr const char* kFreeHugePages = "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages";

uint64_t RoundUp(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

std::string Mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

[[noreturn]] void Fail(const std::string& what, int error) {
  throw Error("memory blade pool: " + what + ": " + strerror(error));
}

char* MapShared(int fd, uint64_t length, const std::string& what) {
  void* addr = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (addr == MAP_FAILED) {
    const int error = errno;
    close(fd);
    Fail("mapping " + Mib(length) + " of " + what, error);
  }
  return static_cast<char*>(addr);
}

PoolMapping MapHugetlb(uint64_t bytes) {
  PoolMapping m;
  m.length = RoundUp(bytes, kHugePage);
  const uint64_t pages = m.length / kHugePage;
  const std::string advice = "the pool needs " + std::to_string(pages) + " free 2 MiB huge pages and the host has " +
                             ReadSmallFile(kFreeHugePages) + "; reserve them (as root: echo " +
                             std::to_string(pages) + " > /proc/sys/vm/nr_hugepages) or use \"backing\": \"memfd\"";
  m.fd = memfd_create("smart-pool", MFD_CLOEXEC | MFD_HUGETLB | MFD_ALLOW_SEALING);
  if (m.fd < 0) Fail("memfd_create with MFD_HUGETLB (" + advice + ")", errno);
  if (ftruncate(m.fd, static_cast<off_t>(m.length)) != 0) {
    const int error = errno;
    close(m.fd);
    Fail("sizing the huge-page pool (" + advice + ")", error);
  }
  // A shared hugetlb mapping reserves its pages here, so a shortage shows
  // now and not as a SIGBUS at the first touch.
  void* addr = mmap(nullptr, m.length, PROT_READ | PROT_WRITE, MAP_SHARED, m.fd, 0);
  if (addr == MAP_FAILED) {
    const int error = errno;
    close(m.fd);
    Fail("mapping the huge-page pool (" + advice + ")", error);
  }
  m.addr = static_cast<char*>(addr);
  m.description = "2 MiB huge pages (hugetlb, " + std::to_string(pages) + " pages)";
  // Sealed as the shm transport seals its memfds (shm::PoolSealed), so that
  // no client handed the descriptor can shrink or grow the pool. A kernel
  // that cannot seal hugetlb memfds (before 4.16) leaves it unsealed: then
  // shm hands the pool only to the blade's own user.
  if (fcntl(m.fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    m.description += ", unsealed: " + std::string(strerror(errno));
  }
  return m;
}

PoolMapping MapFile(const std::string& path, uint64_t bytes) {
  PoolMapping m;
  struct stat before {};
  const bool existed = stat(path.c_str(), &before) == 0;
  if (existed && !S_ISREG(before.st_mode)) {
    throw Error("memory blade pool: \"file:" + path + "\" is not a regular file (for a device use devdax:PATH)");
  }
  m.fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (m.fd < 0) Fail("opening the pool file " + path, errno);
  // A file maps in pages of the system page size, except on hugetlbfs, where
  // the page is the file system's block size. (Elsewhere f_bsize is only the
  // preferred I/O size: a network or 9p mount can report megabytes.)
  struct statfs fs {};
  const bool on_hugetlbfs = fstatfs(m.fd, &fs) == 0 && static_cast<uint64_t>(fs.f_type) == kHugetlbfsMagic;
  const uint64_t page = on_hugetlbfs && fs.f_bsize > 0 ? static_cast<uint64_t>(fs.f_bsize)
                                                       : static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  m.length = RoundUp(bytes, page);
  struct stat st {};
  if (fstat(m.fd, &st) != 0) {
    const int error = errno;
    close(m.fd);
    Fail("fstat of the pool file " + path, error);
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size == 0) {
    // Reserve the space now, so that a full filesystem is an error here and
    // not a SIGBUS when a client first writes to a page.
    int rc = posix_fallocate(m.fd, 0, static_cast<off_t>(m.length));
    if (rc == EOPNOTSUPP || rc == EINVAL) rc = ftruncate(m.fd, static_cast<off_t>(m.length)) == 0 ? 0 : errno;
    if (rc != 0) {
      close(m.fd);
      if (!existed) unlink(path.c_str());
      Fail("making the pool file " + path + " " + Mib(m.length) + " long", rc);
    }
  } else if (size != m.length) {
    close(m.fd);
    throw Error("memory blade pool: the file " + path + " holds " + std::to_string(size) + " bytes (" + Mib(size) +
                ") but \"capacity\" asks for " + std::to_string(m.length) + " bytes (" + Mib(m.length) + "); a pool reopens only with the capacity it was made "
                "with: set \"capacity\" to " + std::to_string(size >> 20) + ", or name a new file");
  }
  m.existing = size != 0;
  m.addr = MapShared(m.fd, m.length, "the pool file " + path);
  m.description = "file " + path + (m.existing ? " (reopened)" : " (new)");
  return m;
}

PoolMapping MapDevdax(const std::string& path, uint64_t bytes) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) Fail("the devdax device " + path, errno);
  const std::string sys = "/sys/dev/char/" + std::to_string(major(st.st_rdev)) + ":" + std::to_string(minor(st.st_rdev));
  char link[PATH_MAX] = {};
  const ssize_t n = S_ISCHR(st.st_mode) ? readlink((sys + "/subsystem").c_str(), link, sizeof(link) - 1) : -1;
  const std::string subsystem = n > 0 ? std::string(link, static_cast<size_t>(n)) : "";
  if (!S_ISCHR(st.st_mode) || subsystem.size() < 4 || subsystem.compare(subsystem.size() - 4, 4, "/dax") != 0) {
    throw Error("memory blade pool: \"devdax:" + path + "\" is not a device-DAX device (" +
                (S_ISCHR(st.st_mode) ? "its subsystem is " + (subsystem.empty() ? std::string("unknown") : subsystem)
                                     : std::string("not a character device")) +
                "); name one like /dev/dax0.0 (ndctl create-namespace --mode=devdax), or use file:PATH");
  }
  const uint64_t device_bytes = std::strtoull(ReadSmallFile(sys + "/size").c_str(), nullptr, 10);
  uint64_t align = std::strtoull(ReadSmallFile(sys + "/align").c_str(), nullptr, 10);
  if (align == 0) align = kHugePage;
  PoolMapping m;
  m.length = RoundUp(bytes, align);
  if (device_bytes != 0 && m.length > device_bytes) {
    throw Error("memory blade pool: " + path + " holds " + Mib(device_bytes) + ", less than \"capacity\" (" +
                Mib(m.length) + ")");
  }
  m.fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (m.fd < 0) Fail("opening the devdax device " + path, errno);
  m.addr = MapShared(m.fd, m.length, "the devdax device " + path);
  m.existing = true;  // a device always holds something; the pool stamp tells what
  m.description = "devdax " + path;
  return m;
}

}  // namespace

PoolBacking ParsePoolBacking(const std::string& value, const std::string& source) {
  PoolBacking b;
  auto with_path = [&](const char* prefix, PoolBacking::Kind kind) {
    const size_t len = strlen(prefix);
    if (value.compare(0, len, prefix) != 0) return false;
    b.kind = kind;
    b.path = value.substr(len);
    if (b.path.empty()) {
      throw Error(source + ": key \"backing\": \"" + value + "\" names no path (expected " + prefix + "PATH)");
    }
    return true;
  };
  if (value.empty() || value == "memfd") return b;
  if (value == "hugetlb") {
    b.kind = PoolBacking::Kind::kHugetlb;
    return b;
  }
  if (with_path("file:", PoolBacking::Kind::kFile) || with_path("devdax:", PoolBacking::Kind::kDevdax)) return b;
  throw Error(source + ": key \"backing\": expected memfd, hugetlb, file:PATH or devdax:PATH, found \"" + value + "\"");
}

PoolMapping MapPool(const PoolBacking& backing, uint64_t bytes) {
  switch (backing.kind) {
    case PoolBacking::Kind::kHugetlb:
      return MapHugetlb(bytes);
    case PoolBacking::Kind::kFile:
      return MapFile(backing.path, bytes);
    case PoolBacking::Kind::kDevdax:
      return MapDevdax(backing.path, bytes);
    case PoolBacking::Kind::kMemfd:
      break;
  }
  throw Error("memory blade pool: memfd pools are made by the transport");
}

}  // namespace smart
