#include "smart/check/checker.h"

#include <cstdio>

#include "smart/bench/bench.h"
#include "smart/task.h"

namespace smart::check {

void Checker::load_config() {
  config_ = SmartConfig::Load();
  ExportProviderEnvironment(config_);
  servers_.clear();
  for (const std::string& server : options_.servers) servers_.push_back(ParseServerAddress(server));
  config_loaded_ = true;
}

void Checker::connect() {
  if (!config_loaded_) load_config();
  initiator_ = std::make_unique<Initiator>(config_);
  for (size_t i = 0; i < servers_.size(); ++i) {
    initiator_->connect(static_cast<node_t>(i), servers_[i].hostname, servers_[i].port, options_.threads + 1,
                        servers_[i].pool_id);
  }
}

void Checker::run(const std::function<void(int worker, uint64_t first, uint64_t step)>& fn) {
  const int coros = options_.coros;
  const uint64_t workers = static_cast<uint64_t>(options_.threads) * static_cast<uint64_t>(coros);
  RunThreads(options_.threads, false, [&](int t) {
    TaskPool pool(TaskPoolOptions{128 * 1024, coros});
    for (int k = 0; k < coros; ++k) {
      const int worker = t * coros + k;
      pool.spawn([&, worker] { fn(worker, options_.from + static_cast<uint64_t>(worker), workers); });
    }
    pool.run();
  });
}

void Checker::each_id(const std::function<void(uint64_t id, std::string& value)>& fn) {
  run([&](int, uint64_t first, uint64_t step) {
    std::string value;
    for (uint64_t id = first; id < options_.to && !failed(); id += step) fn(id, value);
  });
}

void Checker::fail(const std::string& message) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (error_.empty()) error_ = message;
}

bool Checker::failed() {
  std::lock_guard<std::mutex> lock(mutex_);
  return !error_.empty();
}

int Checker::finish(const std::string& what) {
  std::string error;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    error = error_;
  }
  if (!error.empty()) {
    fprintf(stderr, "%s %s: FAILED: %s\n", program_.c_str(), what.c_str(), error.c_str());
    return 1;
  }
  printf("%s %s: ok (%s)\n", program_.c_str(), what.c_str(), counters().c_str());
  return 0;
}

std::string Counters(std::initializer_list<std::pair<const char*, uint64_t>> counters) {
  std::string line;
  for (const auto& [name, value] : counters) {
    if (!line.empty()) line += ", ";
    line += std::string(name) + " " + std::to_string(value);
  }
  return line;
}

}  // namespace smart::check
