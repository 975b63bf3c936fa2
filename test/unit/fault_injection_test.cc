// Fault injection: the SMART_FAULTS grammar, named points, and work
// requests that fail with a remote access error.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "smart/bench/bench.h"
#include "smart/fault_injection.h"
#include "smart/initiator.h"
#include "smart/target.h"
#include "smart/transport/fault/fault_internal.h"
#include "test_util.h"

namespace smart {
namespace {

TEST(FaultRules, ParsesEveryActionAndTarget) {
  const auto rules = ParseFaultRules("kill@point:a.b; stop@point:c#3;exit=7@cas#2;delay=500us@write;delay=2ms@any;fail@read#100");
  ASSERT_EQ(rules.size(), 6u);
  EXPECT_EQ(rules[0].action, FaultAction::kKill);
  EXPECT_EQ(rules[0].target, FaultTarget::kPoint);
  EXPECT_EQ(rules[0].point, "a.b");
  EXPECT_EQ(rules[0].nth, 1u);
  EXPECT_EQ(rules[1].action, FaultAction::kStop);
  EXPECT_EQ(rules[1].nth, 3u);
  EXPECT_EQ(rules[2].action, FaultAction::kExit);
  EXPECT_EQ(rules[2].exit_code, 7);
  EXPECT_EQ(rules[2].target, FaultTarget::kCas);
  EXPECT_EQ(rules[3].delay_ns, 500000u);
  EXPECT_EQ(rules[3].target, FaultTarget::kWrite);
  EXPECT_EQ(rules[4].delay_ns, 2000000u);
  EXPECT_EQ(rules[4].target, FaultTarget::kAnyRequest);
  EXPECT_EQ(rules[5].action, FaultAction::kFail);
  EXPECT_EQ(rules[5].target, FaultTarget::kRead);
  EXPECT_EQ(rules[5].nth, 100u);
  EXPECT_TRUE(ParseFaultRules("").empty());
}

TEST(FaultRules, ParsesARepeatingHitCount) {
  const auto rules = ParseFaultRules("delay=50us@cas#3+;fail@read#7;stop@point:p#1+");
  ASSERT_EQ(rules.size(), 3u);
  EXPECT_TRUE(rules[0].repeat);
  EXPECT_EQ(rules[0].nth, 3u);
  EXPECT_EQ(rules[0].target, FaultTarget::kCas);
  EXPECT_FALSE(rules[1].repeat);
  EXPECT_EQ(rules[1].nth, 7u);
  EXPECT_TRUE(rules[2].repeat);
  EXPECT_EQ(rules[2].nth, 1u);
}

TEST(FaultRules, BadRulesAreRefusedNamingTheRule) {
  for (const char* bad : {"kill", "boom@read", "kill@nowhere", "fail@point:x", "delay=5@read", "delay=xms@read",
                          "exit=300@read", "kill@read#0", "kill@read#x", "kill@point:", "kill@read#+",
                          "kill@read#0+", "kill@read#3++", "kill@read#+3"}) {
    try {
      ParseFaultRules(std::string("stop@read;") + bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST(FaultRules, AnUnconfiguredPointDoesNothing) {
  InstallFaultRules({});
  FaultPoint("test.nothing");  // would end the test if it fired
  SUCCEED();
}

// Runs fn in a forked child and returns its wait status.
int InChild(const std::function<void()>& fn) {
  const pid_t pid = fork();
  if (pid == 0) {
    fn();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, WUNTRACED);
  if (WIFSTOPPED(status)) {
    kill(pid, SIGKILL);
    int ignored;
    waitpid(pid, &ignored, 0);
  }
  return status;
}

TEST(FaultRules, APointFiresOnItsNthHitOnly) {
  const int status = InChild([] {
    InstallFaultRules(ParseFaultRules("exit=42@point:test.third#3"));
    FaultPoint("test.third");
    FaultPoint("test.other");
    FaultPoint("test.third");
    if (getenv("NEVER_SET_IN_TESTS") == nullptr) {
      FaultPoint("test.third");  // the third hit
    }
    _exit(1);
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 42);
}

TEST(FaultRules, AHookRunsAtEveryHitOfItsPointUntilRemovedAndRulesDoNotClearIt) {
  InstallFaultRules({});
  int hits = 0;
  SetFaultPointHook("test.hooked", [&] { ++hits; });
  FaultPoint("test.hooked");
  FaultPoint("test.other");
  InstallFaultRules(ParseFaultRules("delay=1us@point:test.other"));
  FaultPoint("test.hooked");
  InstallFaultRules({});
  FaultPoint("test.hooked");
  EXPECT_EQ(hits, 3);
  SetFaultPointHook("test.hooked", nullptr);
  FaultPoint("test.hooked");
  EXPECT_EQ(hits, 3);
}

// Which of `count` work requests of `opcode` the installed rules fire on.
std::vector<int> FiringHits(int opcode, int count) {
  std::vector<int> fired;
  for (int i = 1; i <= count; ++i) {
    FaultRule rule;
    if (fault_internal::HitRequest(opcode, &rule)) fired.push_back(i);
  }
  return fired;
}

TEST(FaultRules, ARepeatingRuleFiresOnEveryNthHitAndAOneShotRuleOnce) {
  InstallFaultRules(ParseFaultRules("fail@cas#3+;fail@read#2;fail@faa#1+"));
  EXPECT_EQ(FiringHits(IBV_WR_ATOMIC_CMP_AND_SWP, 10), (std::vector<int>{3, 6, 9}));
  EXPECT_EQ(FiringHits(IBV_WR_RDMA_READ, 10), (std::vector<int>{2}));
  EXPECT_EQ(FiringHits(IBV_WR_ATOMIC_FETCH_AND_ADD, 4), (std::vector<int>{1, 2, 3, 4}));
  // Requests of other opcodes neither fire nor count.
  EXPECT_TRUE(FiringHits(IBV_WR_RDMA_WRITE, 10).empty());
  EXPECT_EQ(FiringHits(IBV_WR_ATOMIC_CMP_AND_SWP, 3), (std::vector<int>{2}));  // hits 11-13: the 12th
  InstallFaultRules({});
  EXPECT_FALSE(HasWorkRequestFaults());
}

TEST(FaultRules, KillAndStopActOnTheProcess) {
  int status = InChild([] {
    InstallFaultRules(ParseFaultRules("kill@point:test.kill"));
    FaultPoint("test.kill");
    _exit(1);
  });
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  status = InChild([] {
    InstallFaultRules(ParseFaultRules("stop@point:test.stop"));
    FaultPoint("test.stop");
    _exit(1);
  });
  ASSERT_TRUE(WIFSTOPPED(status));
  EXPECT_EQ(WSTOPSIG(status), SIGSTOP);
}

TEST(FaultRules, ParsesRulesThatActAfterThePost) {
  const auto rules = ParseFaultRules("stop@posted:write#3;kill@posted:any;delay=1ms@posted:cas#2+;stop@write");
  ASSERT_EQ(rules.size(), 4u);
  EXPECT_TRUE(rules[0].after_post);
  EXPECT_EQ(rules[0].target, FaultTarget::kWrite);
  EXPECT_EQ(rules[0].nth, 3u);
  EXPECT_TRUE(rules[1].after_post);
  EXPECT_EQ(rules[1].target, FaultTarget::kAnyRequest);
  EXPECT_TRUE(rules[2].after_post);
  EXPECT_TRUE(rules[2].repeat);
  EXPECT_FALSE(rules[3].after_post);
  for (const char* bad : {"fail@posted:write", "stop@posted:point:x", "stop@posted:", "stop@posted:nothing"}) {
    EXPECT_THROW(ParseFaultRules(bad), Error) << bad;
  }
}

// A transport that only tells, through a pipe, that a list was posted.
class PostMarkingQueuePair : public QueuePair {
 public:
  explicit PostMarkingQueuePair(int fd) : fd_(fd) {}
  QueuePairEndpoint endpoint() const override { return {}; }
  void connect(const QueuePairEndpoint&, std::shared_ptr<PeerMemory>) override {}
  int post_send(ibv_send_wr*, ibv_send_wr**) override {
    const char posted = 'p';
    return ::write(fd_, &posted, 1) == 1 ? 0 : EIO;
  }
  int max_inline_data() const override { return 0; }

 private:
  int fd_;
};

class PostMarkingDevice : public Device {
 public:
  explicit PostMarkingDevice(int fd) : fd_(fd) {}
  TransportKind kind() const override { return TransportKind::kShm; }
  std::string description() const override { return "post-marking test device"; }
  std::unique_ptr<MemoryRegion> allocate_shared_region(size_t) override { return nullptr; }
  std::unique_ptr<MemoryRegion> adopt_shared_region(void*, size_t, int) override { return nullptr; }
  std::unique_ptr<MemoryRegion> register_memory(void*, size_t) override { return nullptr; }
  std::unique_ptr<CompletionQueue> create_cq(int, ThreadDomain*, bool) override { return nullptr; }
  std::unique_ptr<ThreadDomain> create_thread_domain() override { return nullptr; }
  std::unique_ptr<QueuePair> create_qp(const QueuePairOptions&) override {
    return std::make_unique<PostMarkingQueuePair>(fd_);
  }
  std::string export_regions(const std::vector<const MemoryRegion*>&) override { return ""; }
  std::shared_ptr<PeerMemory> import_regions(const std::vector<RemoteRegion>&, const std::string&) override {
    return nullptr;
  }

 private:
  int fd_;
};

// Whether the list holding the first WRITE reached the transport before
// `rule` ended the process.
bool PostedBeforeTheAction(const char* rule) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const int status = InChild([&] {
    close(fds[0]);
    auto device = fault_internal::WrapDevice(std::make_unique<PostMarkingDevice>(fds[1]));
    auto qp = device->create_qp(QueuePairOptions{});
    InstallFaultRules(ParseFaultRules(rule));
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_RDMA_WRITE;
    ibv_send_wr* bad = nullptr;
    (void)qp->post_send(&wr, &bad);
    _exit(1);  // the rule did not end the process
  });
  close(fds[1]);
  char marker = 0;
  const bool posted = ::read(fds[0], &marker, 1) == 1;
  close(fds[0]);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 9) << rule << ": status " << status;
  return posted;
}

TEST(FaultRules, APostedRuleActsOnceTheListIsPostedAPlainOneBefore) {
  EXPECT_TRUE(PostedBeforeTheAction("exit=9@posted:write#1"));
  EXPECT_FALSE(PostedBeforeTheAction("exit=9@write#1"));
}

TEST(FaultRules, AFailedRequestCompletesWithAnErrorAndChangesNothing) {
  SmartConfig config = testing::TestConfig();
  EmbeddedMemoryBlade blade(config, 4);
  config.faults = ParseFaultRules("fail@write#2");
  Initiator initiator(config);
  initiator.connect(0, blade.host(), blade.port(), 2);
  auto* buffer = static_cast<uint64_t*>(initiator.alloc_cache(64));
  auto* remote = static_cast<uint64_t*>(blade.target().local_ptr(GlobalAddress(0, 65536)));
  buffer[0] = 1;
  ASSERT_TRUE(initiator.write(buffer, GlobalAddress(0, 65536), 8, Option::kSync).ok());
  EXPECT_EQ(*remote, 1u);
  buffer[0] = 2;
  const Status s = initiator.write(buffer, GlobalAddress(0, 65536), 8, Option::kSync);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(*remote, 1u) << "the failed write changed remote memory";
  buffer[0] = 3;
  // The rule fired once; the queue pair may be in the error state after a
  // failed request, as on a NIC, so only check that nothing else changed.
  InstallFaultRules({});
  (void)initiator.write(buffer, GlobalAddress(0, 65536), 8, Option::kSync);
  EXPECT_NE(*remote, 2u);
}

// A failed atomic, like a failed write, completes with an error and leaves
// remote memory as it was (the fault changes the atomic's own rkey).
TEST(FaultRules, AFailedCompareAndSwapCompletesWithAnErrorAndChangesNothing) {
  SmartConfig config = testing::TestConfig();
  EmbeddedMemoryBlade blade(config, 4);
  config.faults = ParseFaultRules("fail@cas#2");
  Initiator initiator(config);
  initiator.connect(0, blade.host(), blade.port(), 2);
  auto* buffer = static_cast<uint64_t*>(initiator.alloc_cache(64));
  auto* remote = static_cast<uint64_t*>(blade.target().local_ptr(GlobalAddress(0, 65536)));
  *remote = 7;
  ASSERT_TRUE(initiator.compare_and_swap(buffer, GlobalAddress(0, 65536), 7, 8, Option::kSync).ok());
  EXPECT_EQ(*remote, 8u);
  const Status s = initiator.compare_and_swap(buffer, GlobalAddress(0, 65536), 8, 9, Option::kSync);
  EXPECT_FALSE(s.ok()) << "a CAS that the rule failed completed";
  EXPECT_EQ(*remote, 8u) << "the failed CAS changed remote memory";
  InstallFaultRules({});
}

}  // namespace
}  // namespace smart
