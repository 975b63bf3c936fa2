// Session authentication: the cluster's shared key and the proofs both sides
// of a handshake exchange. Each side sends a fresh random nonce; each proves
// it holds the key with a MAC (libsodium's crypto_auth, HMAC-SHA-512-256)
// over a label naming its role and a hash of the handshake so far (its
// transcript, both nonces included). So a proof can be neither reflected
// back (the label differs) nor replayed (the other side's nonce is new every
// time), nor carried over to messages it was not made for: a relay that
// changes the client's queue pair endpoints or the blade's regions makes the
// proof that follows them fail.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace smart {

constexpr size_t kNonceBytes = 32;
constexpr size_t kProofBytes = 32;
constexpr size_t kKeyBytes = 32;   // a key: 32 random bytes
constexpr size_t kKeyIdBytes = 8;  // its ID (KeyId)
// A key file, as smart_keygen writes it: three lines of text,
//   SMART-KEY v1
//   id 3f9a0c1e5b7d2a4c
//   key <64 hex digits>
// The ID is derived from the key (KeyId): it names the key in messages and
// in the handshake, never reveals it, and a file whose ID does not match its
// key is refused as damaged.
constexpr char kKeyFileHeader[] = "SMART-KEY v1";
constexpr size_t kMaxKeyFileBytes = 4096;

using Nonce = std::array<uint8_t, kNonceBytes>;
using Proof = std::array<uint8_t, kProofBytes>;

// Who proves what: the client its hello (first), then the blade its hello
// (the pool's address, rkey and memory handle).
enum class AuthRole { kClient, kBladeHello };

// The handshake as one side saw it: each message in order, with its length.
// A proof covers its hash (crypto_generichash), so it vouches for every byte
// both sides exchanged before it.
class Transcript {
 public:
  void add(const std::string& message);
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

// The MAC key derived from a key file, and where it came from (for messages).
// Its bytes are wiped (sodium_memzero) when it goes: every copy's when that
// copy is destroyed, a moved-from key's at once.
class SessionKey {
 public:
  ~SessionKey();
  SessionKey(const SessionKey& other);
  SessionKey& operator=(const SessionKey& other);
  SessionKey(SessionKey&& other) noexcept;
  SessionKey& operator=(SessionKey&& other) noexcept;

  // Reads `path` (`what` names the config key in errors, e.g.
  // "auth.key_file in backend.json"). Throws smart::Error, saying how to
  // make a good one, when the file cannot be read, is not a regular file,
  // belongs to another user, may be read or written by group or others, or
  // is not a key file in the format above.
  static SessionKey Load(const std::string& path, const std::string& what);
  // A key file's text (the format above); `name` names it in errors.
  static SessionKey Parse(const std::string& text, const std::string& name);
  // A key from its 32 bytes (tests).
  static SessionKey FromBytes(const std::string& bytes, const std::string& name);

  const std::string& path() const { return path_; }
  // The key's ID, 16 hex digits (KeyId).
  const std::string& id() const { return id_; }
  Proof prove(AuthRole role, const Transcript& transcript) const;
  // Constant-time comparison with the proof `role` would give.
  bool verify(AuthRole role, const Transcript& transcript, const Proof& proof) const;

 private:
  SessionKey() = default;
  void wipe();

  std::array<uint8_t, 32> key_{};
  std::string path_;
  std::string id_;
};

// The ID of a key: the first 8 bytes of a keyed hash of it, in hex.
std::string KeyId(const std::string& key);
// The text of a key file holding `key` (32 bytes).
std::string KeyFileText(const std::string& key);

// A fresh random nonce (libsodium's randombytes).
Nonce RandomNonce();

// A memory blade pool's ID: 8 random bytes (never 0) stamped into the pool
// when it is formatted, so a file pool keeps it across restarts. A client
// that pins it (memory_servers' "pool_id") refuses any other pool. Written
// as 16 hex digits.
uint64_t NewPoolId();
std::string PoolIdText(uint64_t id);
// Parses 16 hex digits; false for anything else.
bool ParsePoolId(const std::string& text, uint64_t* id);

// Writes a key file with a new random key to `path`, created with mode 0600
// (never replacing an existing file); returns the key's ID. Throws
// smart::Error naming the path and the cause.
std::string WriteNewKeyFile(const std::string& path);

// True for an address that only this host can reach: 127.0.0.0/8, ::1,
// "localhost". Anything else (0.0.0.0, ::, a host name) is beyond loopback.
bool IsLoopbackAddress(const std::string& address);

}  // namespace smart
