#include "smart/resource/auth.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <mutex>

#include "smart/logging.h"
#include "smart/status.h"

namespace smart {

namespace {

static_assert(crypto_auth_BYTES == kProofBytes, "a proof is one crypto_auth tag");
static_assert(crypto_auth_KEYBYTES == 32, "crypto_auth takes a 32-byte key");

// Role labels: a blade's proof never verifies as a client's and back.
constexpr char kClientLabel[] = "SMART session v4: client proof";
constexpr char kBladeLabel[] = "SMART session v4: memory blade proof";
constexpr char kBladeHelloLabel[] = "SMART session v4: memory blade hello";

void InitSodium() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (sodium_init() < 0) throw Error("libsodium failed to initialise (sodium_init)");
  });
}

const char* Label(AuthRole role) {
  switch (role) {
    case AuthRole::kClient:
      return kClientLabel;
    case AuthRole::kBlade:
      return kBladeLabel;
    case AuthRole::kBladeHello:
      return kBladeHelloLabel;
  }
  throw Error("unknown authentication role");
}

// The label, a zero byte and the transcript's hash.
std::string ProofInput(AuthRole role, const Transcript& transcript) {
  std::string input = Label(role);
  input.push_back('\0');
  unsigned char hash[crypto_generichash_BYTES];
  crypto_generichash(hash, sizeof(hash), reinterpret_cast<const unsigned char*>(transcript.bytes().data()),
                     transcript.bytes().size(), nullptr, 0);
  input.append(reinterpret_cast<const char*>(hash), sizeof(hash));
  return input;
}

}  // namespace

void Transcript::add(const std::string& message) {
  const uint32_t n = static_cast<uint32_t>(message.size());
  for (int i = 0; i < 4; ++i) bytes_.push_back(static_cast<char>(n >> (8 * i)));
  bytes_ += message;
}

namespace {

// Wipes a buffer of key material when it goes out of scope, however.
class WipeOnExit {
 public:
  WipeOnExit(void* data, size_t size) : data_(data), size_(size) {}
  ~WipeOnExit() { sodium_memzero(data_, size_); }
  WipeOnExit(const WipeOnExit&) = delete;
  WipeOnExit& operator=(const WipeOnExit&) = delete;

 private:
  void* data_;
  size_t size_;
};

}  // namespace

SessionKey::~SessionKey() { wipe(); }

SessionKey::SessionKey(const SessionKey& other) : key_(other.key_), path_(other.path_) {}

SessionKey& SessionKey::operator=(const SessionKey& other) {
  if (this != &other) {
    wipe();
    key_ = other.key_;
    path_ = other.path_;
  }
  return *this;
}

SessionKey::SessionKey(SessionKey&& other) noexcept : key_(other.key_), path_(std::move(other.path_)) {
  other.wipe();
}

SessionKey& SessionKey::operator=(SessionKey&& other) noexcept {
  if (this != &other) {
    key_ = other.key_;
    path_ = std::move(other.path_);
    other.wipe();
  }
  return *this;
}

void SessionKey::wipe() { sodium_memzero(key_.data(), key_.size()); }

SessionKey SessionKey::FromBytes(const std::string& bytes, const std::string& name) {
  return FromBuffer(bytes.data(), bytes.size(), name);
}

SessionKey SessionKey::FromBuffer(const char* bytes, size_t size, const std::string& name) {
  InitSodium();
  if (size < kMinKeyFileBytes || size > kMaxKeyFileBytes) {
    throw Error("key file " + name + " holds " + std::to_string(size) + " bytes; expected " +
                std::to_string(kMinKeyFileBytes) + ".." + std::to_string(kMaxKeyFileBytes) +
                " (make one with smart_keygen, or: head -c 32 /dev/urandom > smart.key)");
  }
  SessionKey key;
  key.path_ = name;
  // Any length of key material becomes one MAC key of the right size.
  crypto_generichash(key.key_.data(), key.key_.size(), reinterpret_cast<const unsigned char*>(bytes), size, nullptr,
                     0);
  return key;
}

SessionKey SessionKey::Load(const std::string& path, const std::string& what) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot read the key file \"" + path + "\" (" + what + "): " + strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    throw Error("the key file \"" + path + "\" (" + what + ") is not a regular file");
  }
  std::string bytes(kMaxKeyFileBytes + 1, '\0');
  const WipeOnExit wipe_bytes(bytes.data(), bytes.size());  // on every path, errors too
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string reason = strerror(errno);
      close(fd);
      throw Error("cannot read the key file \"" + path + "\" (" + what + "): " + reason);
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  if ((st.st_mode & 0077) != 0) {
    SMART_WARN("the key file %s can be read by other users (mode %04o): chmod 600 %s", path.c_str(),
               static_cast<unsigned>(st.st_mode & 07777), path.c_str());
  }
  SessionKey key = FromBuffer(bytes.data(), got, "\"" + path + "\" (" + what + ")");
  key.path_ = path;
  return key;
}

Proof SessionKey::prove(AuthRole role, const Transcript& transcript) const {
  const std::string input = ProofInput(role, transcript);
  Proof proof;
  crypto_auth(proof.data(), reinterpret_cast<const unsigned char*>(input.data()), input.size(), key_.data());
  return proof;
}

bool SessionKey::verify(AuthRole role, const Transcript& transcript, const Proof& proof) const {
  const std::string input = ProofInput(role, transcript);
  return crypto_auth_verify(proof.data(), reinterpret_cast<const unsigned char*>(input.data()), input.size(),
                            key_.data()) == 0;
}

Nonce RandomNonce() {
  InitSodium();
  Nonce nonce;
  randombytes_buf(nonce.data(), nonce.size());
  return nonce;
}

void WriteNewKeyFile(const std::string& path) {
  InitSodium();
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw Error("cannot create the key file \"" + path + "\": " + strerror(errno) +
                (errno == EEXIST ? " (an existing key is never replaced; remove it first)" : ""));
  }
  unsigned char bytes[kMinKeyFileBytes];
  randombytes_buf(bytes, sizeof(bytes));
  const ssize_t n = write(fd, bytes, sizeof(bytes));
  const int write_errno = errno;
  sodium_memzero(bytes, sizeof(bytes));
  if (n != static_cast<ssize_t>(sizeof(bytes)) || fsync(fd) != 0 || close(fd) != 0) {
    unlink(path.c_str());
    throw Error("cannot write the key file \"" + path + "\": " + strerror(n < 0 ? write_errno : errno));
  }
}

bool IsLoopbackAddress(const std::string& address) {
  if (address == "localhost") return true;
  in_addr v4;
  if (inet_pton(AF_INET, address.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6;
  if (inet_pton(AF_INET6, address.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&v6)) return v6.s6_addr[12] == 127;
  }
  return false;
}

}  // namespace smart
