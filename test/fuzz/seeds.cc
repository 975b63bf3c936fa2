// Writes the seed inputs of the fuzz targets, made by the encoders
// themselves (so they follow the formats as they are), into DIR/<target>/:
//
//   fuzz_seeds DIR
//
// and checks that each decodes, so a target's seeds exercise its parsers
// past their first check.
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "smart/resource/auth.h"
#include "smart/resource/handshake.h"
#include "smart/target/blade_handshake.h"
// Both applications' layouts: their names do not collide (separate
// namespaces), their include guards are #pragma once.
#include "layout.h"
#include "page.h"
#include "catalog.h"
#include "history.h"
#include "record.h"
#include "undo_log.h"

namespace {

std::string g_dir;

void Write(const std::string& target, const std::string& name, const std::string& bytes) {
  const std::string dir = g_dir + "/" + target;
  mkdir(g_dir.c_str(), 0755);
  mkdir(dir.c_str(), 0755);
  const std::string path = dir + "/" + name;
  FILE* f = fopen(path.c_str(), "wb");
  if (f == nullptr || fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || fclose(f) != 0) {
    fprintf(stderr, "fuzz_seeds: cannot write %s\n", path.c_str());
    exit(1);
  }
}

std::string Framed(const std::string& body) {
  std::string f(4, '\0');
  for (int i = 0; i < 4; ++i) f[i] = static_cast<char>(body.size() >> (8 * i));
  return f + body;
}

// A peer's byte stream for the blade's state machine (blade_handshake_fuzz.cc):
// a settings byte, a piece size, then frames.
void BladeHandshakeSeeds(smart::AuthHello keyed, const smart::AuthHello& keyless, smart::ClientHello client) {
  const std::string key_id = smart::KeyId(std::string(32, 'k'));  // the target's key
  keyed.key_id = key_id;
  smart::ClientHello shm = client;
  shm.transport = smart::TransportKind::kShm;
  smart::ClientHello unproven = shm;
  unproven.has_proof = false;
  // Keyless: the whole exchange up to a proven peer, in one piece and in 7-byte pieces.
  Write("blade_handshake", "keyless_whole", std::string{'\0', '\0'} + Framed(keyless.Encode()) + Framed(unproven.Encode()));
  Write("blade_handshake", "keyless_pieces", std::string{'\0', '\6'} + Framed(keyless.Encode()) + Framed(unproven.Encode()));
  // Keyed: the right key ID and dialled address, then a proof that cannot hold.
  Write("blade_handshake", "keyed_bad_proof", std::string{'\1', '\0'} + Framed(keyed.Encode()) + Framed(shm.Encode()));
  // Keyed, verbs, forwarded allowed, a hello that gives up.
  smart::ClientHello gave_up;
  gave_up.error = "gave up";
  Write("blade_handshake", "keyed_gave_up", std::string{'\7', '\2'} + Framed(keyed.Encode()) + Framed(gave_up.Encode()));
  // The keyless stream gets a peer to the end of the state machine.
  smart::BladeHandshake::Settings settings;
  settings.transport = smart::TransportKind::kShm;
  smart::BladeHandshake machine(settings, "seed");
  const std::string stream = Framed(keyless.Encode()) + Framed(unproven.Encode());
  machine.receive(stream.data(), stream.size());
  FuzzCheck(machine.state() == smart::BladeHandshake::State::kProven, "the keyless seed stream proves nothing");
  // A frame longer than the first step allows.
  Write("blade_handshake", "oversized", std::string{'\1', '\0'} + std::string("\xff\xff\x00\x00", 4));
}

void Handshake() {
  smart::ClientHello client;
  client.transport = smart::TransportKind::kVerbs;
  client.has_proof = true;
  for (size_t i = 0; i < client.proof.size(); ++i) client.proof[i] = static_cast<uint8_t>(0xa0 + i);
  for (uint32_t i = 0; i < 3; ++i) {
    smart::QueuePairEndpoint e;
    e.qp_num = 17 + i;
    e.psn = 0x123456;
    e.lid = 3;
    e.gid[10] = e.gid[11] = 0xff;
    e.gid[15] = static_cast<uint8_t>(i + 1);
    client.endpoints.push_back(e);
  }
  Write("handshake", "client", client.Encode());
  smart::ClientHello::Decode(client.Encode(), "seed");  // throws if the seed is wrong
  smart::ServerHello server;
  server.regions[smart::kMainMemoryRegion] = smart::RemoteRegion{0x7f0000000000, 1 << 26, 0x1234, true};
  server.endpoints = client.endpoints;
  for (size_t i = 0; i < server.endpoints.size(); ++i) server.window_rkeys.push_back(0x5100 + static_cast<uint32_t>(i));
  server.exported = "shm:/smart-pool-1234";
  server.session.slot = 3;
  server.session.incarnation = 9;
  server.has_proof = true;
  for (size_t i = 0; i < server.proof.size(); ++i) server.proof[i] = static_cast<uint8_t>(0xb0 + i);
  Write("handshake", "server", server.Encode());
  smart::ServerHello::Decode(server.Encode(), "seed");
  smart::ServerHello refused;
  refused.error = "the memory blade already serves 64 clients (max_clients)";
  Write("handshake", "refused", refused.Encode());
  smart::ClientHello gave_up;
  gave_up.error = "the client does not trust the memory blade: its proof does not match";
  Write("handshake", "client_gave_up", gave_up.Encode());
  smart::AuthHello auth;
  auth.has_key = true;
  for (size_t i = 0; i < auth.nonce.size(); ++i) auth.nonce[i] = static_cast<uint8_t>(i);
  auth.key_id = "0123456789abcdef";
  auth.dialled.family = 4;
  auth.dialled.addr[0] = 127;
  auth.dialled.addr[3] = 1;
  auth.dialled.port = 12345;
  Write("handshake", "auth_hello", auth.Encode());
  smart::AuthHello::Decode(auth.Encode(), "seed");
  smart::AuthHello keyless_hello;
  keyless_hello.nonce = auth.nonce;
  Write("handshake", "auth_hello_keyless", keyless_hello.Encode());
  smart::AuthHello::Decode(keyless_hello.Encode(), "seed");
  smart::AuthChallenge challenge;
  challenge.has_key = true;
  challenge.nonce = auth.nonce;
  Write("handshake", "auth_challenge", challenge.Encode());
  smart::AuthChallenge::Decode(challenge.Encode(), "seed");
  smart::AuthChallenge keyless;
  keyless.nonce = auth.nonce;
  Write("handshake", "auth_challenge_keyless", keyless.Encode());
  smart::AuthChallenge at_limit;
  at_limit.error = "the memory blade is at max_clients (2): 0 sessions and 2 handshakes in progress";
  Write("handshake", "auth_refused", at_limit.Encode());
  smart::AuthChallenge busy;
  busy.error = "the memory blade has 300 handshakes in progress and drops some newcomers; try again shortly";
  busy.busy = true;
  Write("handshake", "auth_busy", busy.Encode());
  BladeHandshakeSeeds(auth, keyless_hello, client);
}

void HashTable() {
  using namespace smart::hashtable;
  const std::string key = "key000000000042", value = "a value of the seed";
  const size_t units = BlockUnits(key.size(), value.size());
  std::vector<char> block(units * kBlockUnit);
  EncodeBlock(key, value, 5, units, block.data());
  FuzzCheck(CheckBlock(block.data(), block.size(), 5) == BlockCheck::kValid, "the seed block fails its check");
  const KeyHash h = HashKey(key);
  uint64_t words[kBucketPairSize / 8 + 2];
  const int depth = 3;
  for (size_t b = 0; b < kBucketPairSize / kBucketSize; ++b) {
    words[b * 8] = EncodeBucketHeader(depth, h.dir_bits() & DepthMask(depth));
    for (int j = 1; j < 8; ++j) words[b * 8 + j] = EmptySlot(depth);
  }
  SlotFields f;
  f.fingerprint = h.fingerprint();
  f.units = static_cast<uint8_t>(units);
  f.tag = 5;
  f.dir_bits = static_cast<uint16_t>(h.dir_bits() & kSlotDirMask);
  f.block_offset = 1 << 20;
  words[1] = SlotWithParity(EncodeSlot(f), depth);
  words[kBucketPairSize / 8] = EncodeDepthWord(DirectoryShape{3, 9, 0});
  words[kBucketPairSize / 8 + 1] = uint64_t{64} << 20;  // a 64 MiB blade
  std::string bytes(reinterpret_cast<const char*>(words), sizeof(words));
  bytes.append(block.data(), block.size());
  Write("hashtable", "bucket-and-block", bytes);
}

void BTree() {
  using namespace smart::btree;
  alignas(64) char page[kPageSize];
  PageHeader h;
  h.min = 100;
  h.max = 900;
  h.unbounded = false;
  h.version = 7;
  LeafEntry entries[10];
  for (int i = 0; i < 10; ++i) entries[i] = InlineEntry(100 + 50 * static_cast<uint64_t>(i), "v" + std::to_string(i));
  BuildLeaf(page, h, entries, 10);
  FuzzCheck(PageConsistent(page), "the seed leaf fails its check");
  std::vector<char> block(2 * kBlockUnit);
  EncodeBlock(150, std::string(70, 'x'), 3, 2, block.data());
  std::string bytes(1, '\1');  // flags: the page as it is
  bytes.append(page, kPageSize);
  bytes.push_back(2);  // the block's unit count
  bytes.append(block.data(), block.size());
  Write("btree", "leaf", bytes);
  bytes[0] = 0;  // sealed again by the target
  Write("btree", "leaf-resealed", bytes);
}

void DtxHistory() {
  using namespace smart::dtx;
  constexpr uint64_t kMax = ~uint64_t{0};
  auto read = [](uint16_t table, uint64_t key, uint64_t version) { return HistoryAccess{table, key, version, false}; };
  auto write = [](uint16_t table, uint64_t key, uint64_t version, bool inserted = false, bool deleted = false) {
    return HistoryAccess{table, key, version, true, inserted, deleted};
  };
  const std::vector<std::vector<std::string>> histories = {
      // serial, with an insert, a delete and the numbers' limits
      {FormatHistoryLine(1, {read(1, 7, 1), write(1, 7, 2), write(2, 9, 1, true)}),
       FormatHistoryLine(2, {read(1, 7, 2), write(1, 7, 3), read(2, 9, 1), write(2, 9, 2, false, true)}),
       FormatHistoryLine(kMax, {read(65535, kMax, kMax), read(1, 7, 3)})},
      // a lost update (and the same version written twice)
      {FormatHistoryLine(1, {read(1, 7, 1), write(1, 7, 2)}), FormatHistoryLine(2, {read(1, 7, 1), write(1, 7, 3)}),
       FormatHistoryLine(3, {write(1, 7, 3)})},
      // a write skew
      {FormatHistoryLine(1, {read(1, 1, 1), read(1, 2, 1), write(1, 1, 2)}),
       FormatHistoryLine(2, {read(1, 1, 1), read(1, 2, 1), write(1, 2, 2)})},
  };
  const char* names[] = {"serial", "lost-update", "write-skew"};
  for (size_t i = 0; i < histories.size(); ++i) {
    std::string bytes;
    for (const std::string& line : histories[i]) {
      HistoryTx tx;
      FuzzCheck(ParseHistoryLine(line, &tx, nullptr), "a seed history line does not parse");
      bytes += line + "\n";
    }
    Write("dtx_history", names[i], bytes);
  }
}

void Dtx() {
  using namespace smart::dtx;
  // A sealed slot of each width the target's tables use.
  for (size_t width : {size_t{8}, size_t{40}}) {
    std::vector<char> slot(SlotBytes(width));
    std::vector<char> value(width, 'v');
    EncodeSlot(slot.data(), width, 0, 3, 42, 1, true, value.data());
    std::string bytes(1, '\0');  // selector: a slot
    bytes.push_back(static_cast<char>(width / 8 - 1));
    bytes.append(slot.data(), slot.size());
    Write("dtx", "slot-" + std::to_string(width), bytes);
  }
  CatalogBlock c;
  c.backup_degree = 1;
  c.blade_count = 2;
  c.log_directory = 16384;
  CatalogBlock::Entry e;
  e.spec = TableSpec{1, "", 8, 100, 16};
  e.region = 65536;
  e.rows = 300;
  c.tables.push_back(e);
  std::vector<char> block(kCatalogBytes);
  EncodeCatalog(c, block.data());
  std::string bytes(1, '\1');
  bytes.append(block.data(), block.size());
  Write("dtx", "catalog", bytes);
  UndoRecord r;
  r.tx_id = 77;
  r.items.push_back(UndoItem{Locator{1, 2, 9}, std::string(SlotBytes(8), 'a')});
  r.items.push_back(UndoItem{Locator{3, 7, 1000}, std::string(SlotBytes(40), 'b')});
  std::vector<char> log(kLogSlotBytes, 0);
  const size_t n = EncodeUndo(r, log.data());
  bytes.assign(1, '\2');
  bytes.append(log.data(), n);
  Write("dtx", "undo", bytes);
}

}  // namespace

// The shipped configuration files and typical environment texts, each
// behind the byte that picks its parser (config_fuzz.cc).
void Config() {
  const char* files[] = {"smart_config.json", "backend.json", "test_rdma.json", "datastructure.json",
                         "transaction.json"};
  for (int i = 0; i < 5; ++i) {
    const std::string path = std::string(SMART_CONFIG_DIR) + "/" + files[i];
    FILE* f = fopen(path.c_str(), "rb");
    if (f == nullptr) {
      fprintf(stderr, "fuzz_seeds: cannot read %s\n", path.c_str());
      exit(1);
    }
    std::string text(1, static_cast<char>(i));
    char buffer[4096];
    size_t n;
    while ((n = fread(buffer, 1, sizeof(buffer), f)) > 0) text.append(buffer, n);
    fclose(f);
    Write("config", files[i], text);
  }
  Write("config", "smart_opts", std::string(1, '\5') + "ThrdAwareAlloc WorkReqThrot ConflictAvoid");
  Write("config", "faults", std::string(1, '\6') + "delay=20us@cas#3+;stop@point:ht.split.frozen;fail@read#100");
}

// Answers of etcd 3.4's JSON gateway, as it writes them, each behind the
// byte that picks its parser and a byte for where to cut (etcd_fuzz.cc).
void Etcd() {
  const std::string h =
      R"("header":{"cluster_id":"14841639068965178418","member_id":"10276657743932975437","revision":"8","raft_term":"2"})";
  const std::string kv =
      R"({"key":"cy9r","create_revision":"5","mod_revision":"6","version":"2","value":"aGVsbG8=","lease":"42"})";
  auto seed = [](int which, const char* name, const std::string& text) {
    Write("etcd", name, std::string(1, static_cast<char>(which)) + std::string(1, '\x07') + text);
  };
  seed(0, "range", "{" + h + R"(,"kvs":[)" + kv + R"(],"count":"1"})");
  seed(0, "range_empty", "{" + h + "}");
  seed(1, "txn_won", "{" + h + R"(,"succeeded":true,"responses":[{"response_put":{"header":{"revision":"8"}}}]})");
  seed(1, "txn_lost", "{" + h + R"(,"responses":[{"response_range":{"header":{"revision":"8"},"kvs":[)" + kv +
                          R"(],"count":"1"}}]})");
  seed(2, "lease_grant", "{" + h + R"(,"ID":"7587899215001567000","TTL":"2"})");
  seed(3, "keepalive", R"({"result":{)" + h + R"(,"ID":"7587899215001567000","TTL":"2"}})");
  seed(3, "keepalive_lapsed", R"({"result":{)" + h + R"(,"ID":"7587899215001567000"}})");
  seed(4, "watch_created", R"({"result":{)" + h + R"(,"created":true}})");
  seed(4, "watch_events", R"({"result":{)" + h + R"(,"events":[{"kv":)" + kv +
                              R"(},{"type":"DELETE","kv":{"key":"dy9h","mod_revision":"11"}}]}})");
  seed(4, "watch_canceled", R"({"result":{"header":{"raft_term":"2"},"canceled":true,"compact_revision":"7"}})");
  seed(5, "error", R"({"error":"etcdserver: requested lease not found","message":"etcdserver: requested lease not found","code":5})");
  seed(7, "epoch",
       R"({"epoch":4,"phase":"fencing","replicas":2,"members":{"a":"voting","b":"catching-up","c":"voting"},)"
       R"("shards":[["a","b"],["c","b"],["c"]]})");
  seed(6, "stream", R"({"result":{"created":true}})" "\n" R"({"result":{"events":[{"kv":)" + kv + "}]}}\n{\"res");
}

int main(int argc, char** argv) {
  if (argc != 2 || argv[1][0] == '-') {
    fprintf(argc == 2 && strcmp(argv[1], "--help") == 0 ? stdout : stderr, "usage: %s DIR\n", argv[0]);
    return argc == 2 && strcmp(argv[1], "--help") == 0 ? 0 : 2;
  }
  g_dir = argv[1];
  Handshake();
  Config();
  HashTable();
  BTree();
  Dtx();
  DtxHistory();
  Etcd();
  printf("fuzz_seeds: seeds written to %s\n", argv[1]);
  return 0;
}
