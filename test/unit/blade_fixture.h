// A memory blade inside the test process and a client connected to it: the
// setting of the application unit tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "smart/bench/bench.h"
#include "smart/initiator.h"
#include "test_util.h"

namespace smart::testing {

class BladeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = TestConfig();
    blade_ = std::make_unique<EmbeddedMemoryBlade>(config_, 64);
    initiator_ = Connect();
  }

  // Another client of the blade (8 queue pairs).
  std::unique_ptr<Initiator> Connect() {
    auto in = std::make_unique<Initiator>(config_);
    in->connect(0, blade_->host(), blade_->port(), 8);
    return in;
  }

  SmartConfig config_;
  std::unique_ptr<EmbeddedMemoryBlade> blade_;
  std::unique_ptr<Initiator> initiator_;
};

}  // namespace smart::testing
