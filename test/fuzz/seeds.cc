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
#include "smart/resource/handshake.h"
// Both applications' layouts: their names do not collide (separate
// namespaces), their include guards are #pragma once.
#include "layout.h"
#include "page.h"

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

void Handshake() {
  smart::ClientHello client;
  client.transport = smart::TransportKind::kVerbs;
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
  server.exported = "shm:/smart-pool-1234";
  server.session.slot = 3;
  server.session.incarnation = 9;
  Write("handshake", "server", server.Encode());
  smart::ServerHello::Decode(server.Encode(), "seed");
  smart::ServerHello refused;
  refused.error = "the memory blade already serves 64 clients (max_clients)";
  Write("handshake", "refused", refused.Encode());
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

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 || argv[1][0] == '-') {
    fprintf(argc == 2 && strcmp(argv[1], "--help") == 0 ? stdout : stderr, "usage: %s DIR\n", argv[0]);
    return argc == 2 && strcmp(argv[1], "--help") == 0 ? 0 : 2;
  }
  g_dir = argv[1];
  Handshake();
  HashTable();
  BTree();
  printf("fuzz_seeds: seeds written to %s\n", argv[1]);
  return 0;
}
