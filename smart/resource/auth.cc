#include "smart/resource/auth.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "smart/logging.h"
#include "smart/util/peer_text.h"
#include "smart/status.h"

namespace smart {

namespace {

static_assert(crypto_auth_BYTES == kProofBytes, "a proof is one crypto_auth tag");
static_assert(crypto_auth_KEYBYTES == 32, "crypto_auth takes a 32-byte key");

// Role labels: a blade's proof never verifies as a client's and back.
constexpr char kClientLabel[] = "SMART session v5: client proof";
constexpr char kBladeHelloLabel[] = "SMART session v5: memory blade hello";

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

SessionKey::SessionKey(const SessionKey& other) : key_(other.key_), path_(other.path_), id_(other.id_) {}

SessionKey& SessionKey::operator=(const SessionKey& other) {
  if (this != &other) {
    wipe();
    key_ = other.key_;
    path_ = other.path_;
    id_ = other.id_;
  }
  return *this;
}

SessionKey::SessionKey(SessionKey&& other) noexcept
    : key_(other.key_), path_(std::move(other.path_)), id_(std::move(other.id_)) {
  other.wipe();
}

SessionKey& SessionKey::operator=(SessionKey&& other) noexcept {
  if (this != &other) {
    key_ = other.key_;
    path_ = std::move(other.path_);
    id_ = std::move(other.id_);
    other.wipe();
  }
  return *this;
}

void SessionKey::wipe() { sodium_memzero(key_.data(), key_.size()); }

namespace {

// Lower-case hex of `n` bytes (libsodium's).
std::string Hex(const unsigned char* bytes, size_t n) {
  std::string out(2 * n + 1, '\0');
  sodium_bin2hex(out.data(), out.size(), bytes, n);
  out.pop_back();
  return out;
}

// The hash's key (its bytes and the closing zero, the least it takes).
constexpr char kKeyIdLabel[] = "SMART key id v1";
static_assert(sizeof(kKeyIdLabel) >= crypto_generichash_KEYBYTES_MIN);
constexpr char kHowToMakeOne[] = "make one with: smart_keygen PATH";

}  // namespace

std::string KeyId(const std::string& key) {
  InitSodium();
  unsigned char hash[crypto_generichash_BYTES_MIN];
  crypto_generichash(hash, sizeof(hash), reinterpret_cast<const unsigned char*>(key.data()), key.size(),
                     reinterpret_cast<const unsigned char*>(kKeyIdLabel), sizeof(kKeyIdLabel));
  return Hex(hash, kKeyIdBytes);
}

std::string KeyFileText(const std::string& key) {
  return std::string(kKeyFileHeader) + "\nid " + KeyId(key) + "\nkey " +
         Hex(reinterpret_cast<const unsigned char*>(key.data()), key.size()) + "\n";
}

SessionKey SessionKey::FromBytes(const std::string& bytes, const std::string& name) {
  InitSodium();
  if (bytes.size() != kKeyBytes) {
    throw Error("key " + name + " has " + std::to_string(bytes.size()) + " bytes; a key has " +
                std::to_string(kKeyBytes));
  }
  SessionKey key;
  key.path_ = name;
  memcpy(key.key_.data(), bytes.data(), kKeyBytes);
  key.id_ = KeyId(bytes);
  return key;
}

SessionKey SessionKey::Parse(const std::string& text, const std::string& name) {
  auto bad = [&](const std::string& why) {
    return Error("the key file " + name + " " + why + "; a key file is what smart_keygen writes (\"" +
                 kKeyFileHeader + "\", an id line and a key line of 64 hex digits): " + kHowToMakeOne);
  };
  // Exactly three lines, the last newline optional.
  std::string lines[3];
  size_t at = 0;
  for (int i = 0; i < 3; ++i) {
    const size_t nl = text.find('\n', at);
    if (nl == std::string::npos && i < 2) throw bad("is not a key file (fewer than three lines)");
    lines[i] = text.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
    at = nl == std::string::npos ? text.size() : nl + 1;
  }
  if (at != text.size()) throw bad("is not a key file (more than three lines)");
  if (lines[0] != kKeyFileHeader) {
    throw bad(lines[0].rfind("SMART-KEY ", 0) == 0 ? "has a format this release does not read (\"" +
                                                         PeerText(lines[0], 32) + "\")"
                                                   : "is not a key file (no \"" + std::string(kKeyFileHeader) +
                                                         "\" first line)");
  }
  if (lines[1].size() != 3 + 2 * kKeyIdBytes || lines[1].compare(0, 3, "id ") != 0) {
    throw bad("has no valid id line (\"id \" and 16 hex digits)");
  }
  if (lines[2].size() != 4 + 2 * kKeyBytes || lines[2].compare(0, 4, "key ") != 0) {
    throw bad("has no valid key line (\"key \" and 64 hex digits)");
  }
  std::string raw(kKeyBytes, '\0');
  const WipeOnExit wipe_raw(raw.data(), raw.size());
  size_t decoded = 0;
  if (lines[2].find_first_not_of("0123456789abcdef", 4) != std::string::npos ||
      sodium_hex2bin(reinterpret_cast<unsigned char*>(raw.data()), raw.size(), lines[2].data() + 4, 2 * kKeyBytes,
                     nullptr, &decoded, nullptr) != 0 ||
      decoded != kKeyBytes) {
    throw bad("has no valid key line (\"key \" and 64 lowercase hex digits)");
  }
  sodium_memzero(lines[2].data(), lines[2].size());
  SessionKey key = FromBytes(raw, name);
  if (lines[1].compare(3, std::string::npos, key.id_) != 0) {
    throw bad("is damaged: its id line says " + PeerText(lines[1].substr(3), 16) + " but its key's ID is " +
              key.id_);
  }
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
  // As ssh treats a private key: another user's file, or one that others
  // may read or change, is not this process's secret.
  if (st.st_uid != geteuid()) {
    close(fd);
    throw Error("the key file \"" + path + "\" (" + what + ") belongs to uid " + std::to_string(st.st_uid) +
                ", not to this process's user (uid " + std::to_string(geteuid()) +
                "): give each user its own copy (install -m 600 -o USER)");
  }
  if ((st.st_mode & 0077) != 0) {
    close(fd);
    char mode[8];
    snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    throw Error("the key file \"" + path + "\" (" + what + ") may be read or written by group or others (mode " +
                mode + "): chmod 600 " + path);
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
  std::string text(bytes.data(), std::min(got, kMaxKeyFileBytes));
  const WipeOnExit wipe_text(text.data(), text.size());
  SessionKey key = Parse(text, "\"" + path + "\" (" + what + ")");
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

std::string WriteNewKeyFile(const std::string& path) {
  InitSodium();
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw Error("cannot create the key file \"" + path + "\": " + strerror(errno) +
                (errno == EEXIST ? " (an existing key is never replaced; remove it first)" : ""));
  }
  std::string key(kKeyBytes, '\0');
  const WipeOnExit wipe_key(key.data(), key.size());
  randombytes_buf(key.data(), key.size());
  std::string text = KeyFileText(key);
  const WipeOnExit wipe_text(text.data(), text.size());
  const ssize_t n = write(fd, text.data(), text.size());
  const int write_errno = errno;
  if (n != static_cast<ssize_t>(text.size()) || fsync(fd) != 0 || close(fd) != 0) {
    unlink(path.c_str());
    throw Error("cannot write the key file \"" + path + "\": " + strerror(n < 0 ? write_errno : errno));
  }
  return KeyId(key);
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

uint64_t NewPoolId() {
  InitSodium();
  uint64_t id = 0;
  while (id == 0) randombytes_buf(&id, sizeof(id));
  return id;
}

std::string PoolIdText(uint64_t id) {
  char text[17];
  snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(id));
  return text;
}

bool ParsePoolId(const std::string& text, uint64_t* id) {
  if (text.size() != 16 || text.find_first_not_of("0123456789abcdef") != std::string::npos) return false;
  *id = std::stoull(text, nullptr, 16);
  return *id != 0;
}

}  // namespace smart
