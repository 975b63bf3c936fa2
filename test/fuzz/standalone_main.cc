// Runs a fuzz target (LLVMFuzzerTestOneInput) without libFuzzer, so that
// every build runs it: first on each seed file named on the command line,
// then on inputs derived from the seeds by random flips, insertions,
// deletions, truncations and splices, for --runs inputs (fixed --seed, so
// a failure repeats). A target reports a bug by aborting (FuzzCheck); an
// input the target rejects is not a failure.
//
//   fuzz_handshake [--runs N] [--seed S] SEED_FILE...
//
// Built with clang and -DSMART_LIBFUZZER=ON, the same targets link
// libFuzzer instead (fuzz_handshake CORPUS_DIR).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <algorithm>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::vector<uint8_t> ReadFile(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    fprintf(stderr, "fuzz: cannot read seed file %s\n", path);
    exit(2);
  }
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<uint8_t> Mutate(const std::vector<std::vector<uint8_t>>& seeds, std::mt19937_64& random) {
  std::vector<uint8_t> d = seeds[random() % seeds.size()];
  const int edits = 1 + static_cast<int>(random() % 8);
  for (int i = 0; i < edits; ++i) {
    const size_t at = d.empty() ? 0 : random() % d.size();
    switch (random() % 7) {
      case 0:  // flip a bit
        if (!d.empty()) d[at] ^= static_cast<uint8_t>(1u << (random() % 8));
        break;
      case 1:  // a random byte
        if (!d.empty()) d[at] = static_cast<uint8_t>(random());
        break;
      case 2:  // an interesting byte: limits of the integer fields
        if (!d.empty()) {
          static const uint8_t kInteresting[] = {0, 1, 0x7f, 0x80, 0xff, 0xfe, 0x40};
          d[at] = kInteresting[random() % sizeof(kInteresting)];
        }
        break;
      case 3:  // insert bytes
        d.insert(d.begin() + static_cast<std::ptrdiff_t>(at), 1 + random() % 16, static_cast<uint8_t>(random()));
        break;
      case 4:  // delete bytes
        if (!d.empty()) d.erase(d.begin() + static_cast<std::ptrdiff_t>(at),
                                d.begin() + static_cast<std::ptrdiff_t>(std::min(d.size(), at + 1 + random() % 16)));
        break;
      case 5:  // truncate
        d.resize(d.empty() ? 0 : random() % d.size());
        break;
      default: {  // splice with another seed
        const std::vector<uint8_t>& other = seeds[random() % seeds.size()];
        if (!other.empty()) {
          const size_t from = random() % other.size();
          d.resize(at);
          d.insert(d.end(), other.begin() + static_cast<std::ptrdiff_t>(from), other.end());
        }
      }
    }
  }
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t runs = 100000, seed = 1;
  std::vector<std::vector<uint8_t>> seeds;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--runs" || arg == "--seed") && i + 1 < argc) {
      char* end = nullptr;
      const uint64_t v = strtoull(argv[++i], &end, 10);
      if (*end != '\0') {
        fprintf(stderr, "fuzz: %s wants a number, got '%s'\n", arg.c_str(), argv[i]);
        return 2;
      }
      (arg == "--runs" ? runs : seed) = v;
    } else if (arg == "--help" || arg == "-h") {
      printf("usage: %s [--runs N] [--seed S] SEED_FILE...\n", argv[0]);
      return 0;
    } else {
      seeds.push_back(ReadFile(argv[i]));
    }
  }
  if (seeds.empty()) {
    fprintf(stderr, "fuzz: no seed files given (usage: %s [--runs N] [--seed S] SEED_FILE...)\n", argv[0]);
    return 2;
  }
  for (const std::vector<uint8_t>& s : seeds) LLVMFuzzerTestOneInput(s.data(), s.size());
  std::mt19937_64 random(seed);
  for (uint64_t r = 0; r < runs; ++r) {
    // Each input in a buffer of its own size, so a sanitizer sees any read past it.
    const std::vector<uint8_t> input = Mutate(seeds, random);
    std::unique_ptr<uint8_t[]> copy(new uint8_t[input.size() + 1]);
    memcpy(copy.get(), input.data(), input.size());
    LLVMFuzzerTestOneInput(copy.get(), input.size());
  }
  printf("fuzz: %zu seeds and %llu derived inputs, no failure\n", seeds.size(), static_cast<unsigned long long>(runs));
  return 0;
}
