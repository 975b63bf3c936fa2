#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "smart/bench/bench.h"
#include "smart/initiator.h"
#include "smart/remote_lock.h"
#include "smart/target.h"
#include "smart/task.h"
#include "test_util.h"

namespace smart {
namespace {

constexpr uint64_t kLockOffset = 65536;
constexpr uint64_t kCounterOffset = 65536 + 64;

class RemoteLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = testing::TestConfig();
    blade_ = std::make_unique<EmbeddedMemoryBlade>(config_, 4);
  }

  std::unique_ptr<Initiator> Client(int threads = 1) {
    auto in = std::make_unique<Initiator>(config_);
    in->connect(0, blade_->host(), blade_->port(), threads);
    return in;
  }
  uint64_t* Scratch(Initiator& in) { return static_cast<uint64_t*>(in.alloc_cache(64)); }
  uint64_t* remote_word(uint64_t offset) {
    return static_cast<uint64_t*>(blade_->target().local_ptr(GlobalAddress(0, offset)));
  }
  uint64_t session_word(int slot) { return *remote_word(SessionWordAddress(slot)); }
  // Waits (bounded only by the test timeout) until `cond` holds.
  template <typename F>
  void WaitUntil(F cond) {
    while (!cond()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  SmartConfig config_;
  std::unique_ptr<EmbeddedMemoryBlade> blade_;
};

LeaseOptions ShortLease(uint64_t ms) {
  LeaseOptions o;
  o.lease_ns = ms * 1000000;
  o.session_check_ns = 1000000;
  return o;
}

TEST(LockWord, EncodeDecodeRoundTrips) {
  LockOwner o;
  o.session = SessionId{1023, 0x3fff};
  o.thread = 200;
  o.task = 63;
  o.lease = 0x7fffff;
  const uint64_t w = EncodeLockWord(o);
  EXPECT_EQ(w >> 63, 0u);
  const LockOwner d = DecodeLockWord(w);
  EXPECT_EQ(d.session.slot, 1023);
  EXPECT_EQ(d.session.incarnation, 0x3fff);
  EXPECT_EQ(d.thread, 200);
  EXPECT_EQ(d.task, 63);
  EXPECT_EQ(d.lease, 0x7fffffu);
  EXPECT_TRUE(IsHeldLockWord(w));
  // The lease wraps inside its field and leaves the owner alone.
  const LockOwner n = DecodeLockWord(NextLease(w));
  EXPECT_EQ(n.lease, 0u);
  EXPECT_EQ(n.session.slot, 1023);
  EXPECT_EQ(n.task, 63);
}

TEST(LockWord, NonLockWordsAreRecognised) {
  EXPECT_FALSE(IsHeldLockWord(kLockFree));
  EXPECT_FALSE(IsHeldLockWord(uint64_t{1} << 63 | 5));
  EXPECT_FALSE(IsHeldLockWord(uint64_t{1} << 40));  // slot 0
  EXPECT_NE(DescribeLockWord(0xdeadbeefdeadbeefull).find("not a lock word"), std::string::npos);
}

TEST_F(RemoteLockTest, EverySessionGetsItsOwnSlotAndTheBladeSeesItGo) {
  auto a = Client();
  auto b = Client();
  const SessionId sa = a->session(0), sb = b->session(0);
  EXPECT_NE(sa.slot, 0);
  EXPECT_NE(sb.slot, 0);
  EXPECT_NE(sa.slot, sb.slot);
  EXPECT_EQ(session_word(sa.slot), kSessionAliveBit | sa.incarnation);
  a.reset();
  WaitUntil([&] { return (session_word(sa.slot) & kSessionAliveBit) == 0; });
  EXPECT_EQ(session_word(sa.slot) & kSessionIncarnationMask, sa.incarnation);
  EXPECT_NE(session_word(sb.slot) & kSessionAliveBit, 0u);
}

TEST_F(RemoteLockTest, AFenceRequestEndsThatSessionAndNoOther) {
  auto a = Client(), b = Client(), c = Client();
  const SessionId sa = a->session(0), sb = b->session(0), sc = c->session(0);
  uint64_t* scratch = Scratch(*b);
  const uint64_t alive = kSessionAliveBit | sa.incarnation;
  // What a lock taker does (LeaseWatch, over verbs): one CAS on the
  // holder's session word.
  ASSERT_TRUE(b->compare_and_swap(scratch, GlobalAddress(0, SessionWordAddress(sa.slot)), alive,
                                  alive | kSessionFenceBit, Option::kSync)
                  .ok());
  ASSERT_EQ(scratch[0], alive);
  WaitUntil([&] { return (session_word(sa.slot) & kSessionAliveBit) == 0; });
  // The slot is free for its next client, fence bit cleared, incarnation kept.
  EXPECT_EQ(session_word(sa.slot), static_cast<uint64_t>(sa.incarnation));
  EXPECT_EQ(session_word(sb.slot), kSessionAliveBit | sb.incarnation);
  EXPECT_EQ(session_word(sc.slot), kSessionAliveBit | sc.incarnation);
  // The fenced client learns it from its closed connection: its requests
  // fail from then on; the others' still work.
  uint64_t* a_scratch = Scratch(*a);
  WaitUntil([&] { return !a->read(a_scratch, GlobalAddress(0, kCounterOffset), 8, Option::kSync).ok(); });
  EXPECT_TRUE(b->read(scratch, GlobalAddress(0, kCounterOffset), 8, Option::kSync).ok());
  EXPECT_TRUE(c->read(Scratch(*c), GlobalAddress(0, kCounterOffset), 8, Option::kSync).ok());
}

TEST_F(RemoteLockTest, SecondClientWaitsUntilRelease) {
  auto a = Client(), b = Client();
  RemoteLock la(*a, GlobalAddress(0, kLockOffset), Scratch(*a));
  RemoteLock lb(*b, GlobalAddress(0, kLockOffset), Scratch(*b));
  { const Status st = la.acquire(); ASSERT_TRUE(st.ok()) << st.ToString(); }
  EXPECT_EQ(DecodeLockWord(*remote_word(kLockOffset)).session.slot, a->session(0).slot);
  bool acquired = true;
  ASSERT_TRUE(lb.try_acquire(&acquired).ok());
  EXPECT_FALSE(acquired);
  const uint32_t lease = DecodeLockWord(*remote_word(kLockOffset)).lease;
  ASSERT_TRUE(la.renew().ok());
  EXPECT_EQ(DecodeLockWord(*remote_word(kLockOffset)).lease, (lease + 1) & kLockLeaseMask);
  ASSERT_TRUE(la.release().ok());
  EXPECT_EQ(*remote_word(kLockOffset), kLockFree);
  LockAcquireInfo info;
  ASSERT_TRUE(lb.acquire(&info).ok());
  EXPECT_FALSE(info.took_over);
  ASSERT_TRUE(lb.release().ok());
}

TEST_F(RemoteLockTest, DeadHoldersLockIsTakenOverThroughTheSessionTable) {
  auto a = Client(), b = Client();
  // A lease far longer than the test: only the session table can free it.
  LeaseOptions long_lease;
  long_lease.lease_ns = 3600ull * 1000000000;
  RemoteLock la(*a, GlobalAddress(0, kLockOffset), Scratch(*a), long_lease);
  { const Status st = la.acquire(); ASSERT_TRUE(st.ok()) << st.ToString(); }
  const uint64_t held = la.word();
  a.reset();  // the holder's process is gone: its session closes
  RemoteLock lb(*b, GlobalAddress(0, kLockOffset), Scratch(*b), long_lease);
  LockAcquireInfo info;
  ASSERT_TRUE(lb.acquire(&info).ok());
  EXPECT_TRUE(info.took_over);
  EXPECT_TRUE(info.by_session);
  EXPECT_EQ(info.previous, held);
  EXPECT_EQ(*remote_word(kLockOffset), lb.word());
}

LeaseOptions UnfencedLease(uint64_t ms) {
  LeaseOptions o = ShortLease(ms);
  o.fence = FenceMode::kNever;
  return o;
}

TEST_F(RemoteLockTest, PausedHolderLosesItsLockAfterTheLeaseAndCannotRelease) {
  auto a = Client(), b = Client();
  // Without the fence, what the lock word alone does: the holder's CASes
  // find out.
  RemoteLock la(*a, GlobalAddress(0, kLockOffset), Scratch(*a), UnfencedLease(50));
  { const Status st = la.acquire(); ASSERT_TRUE(st.ok()) << st.ToString(); }
  // `a` stays connected but stops renewing, as if paused.
  RemoteLock lb(*b, GlobalAddress(0, kLockOffset), Scratch(*b), UnfencedLease(50));
  LockAcquireInfo info;
  ASSERT_TRUE(lb.acquire(&info).ok());
  EXPECT_TRUE(info.took_over);
  EXPECT_FALSE(info.by_session);
  EXPECT_FALSE(info.fenced);
  EXPECT_NE(session_word(a->session(0).slot) & kSessionAliveBit, 0u);
  const uint64_t owner_b = *remote_word(kLockOffset);
  EXPECT_EQ(owner_b, lb.word());
  // The slow holder finds out at its next CAS and writes nothing.
  Status s = la.renew();
  EXPECT_EQ(s.code(), Status::Code::kLockLost) << s.ToString();
  EXPECT_EQ(*remote_word(kLockOffset), owner_b);
  s = la.release();
  EXPECT_EQ(s.code(), Status::Code::kLockLost) << s.ToString();
  EXPECT_EQ(*remote_word(kLockOffset), owner_b);
  ASSERT_TRUE(lb.release().ok());
}

// The default: a take-over by lease fences, on shm as on verbs.
LeaseOptions FencingLease(uint64_t ms) { return ShortLease(ms); }

TEST_F(RemoteLockTest, ATakeOverByLeaseEndsTheHoldersSessionBeforeItReturns) {
  auto a = Client(), b = Client();
  const SessionId sa = a->session(0);
  RemoteLock la(*a, GlobalAddress(0, kLockOffset), Scratch(*a), FencingLease(50));
  { const Status st = la.acquire(); ASSERT_TRUE(st.ok()) << st.ToString(); }
  // `a` stays connected but stops renewing, as if paused.
  RemoteLock lb(*b, GlobalAddress(0, kLockOffset), Scratch(*b), FencingLease(50));
  LockAcquireInfo info;
  ASSERT_TRUE(lb.acquire(&info).ok());
  EXPECT_TRUE(info.took_over);
  EXPECT_FALSE(info.by_session);
  ASSERT_TRUE(info.fenced);
  // Done before acquire() returned: the old holder's session is over.
  ASSERT_EQ(session_word(sa.slot) & kSessionAliveBit, 0u);
  EXPECT_EQ(*remote_word(kLockOffset), lb.word());
  // The fenced client's requests fail from then on.
  uint64_t* scratch = Scratch(*a);
  WaitUntil([&] { return !a->read(scratch, GlobalAddress(0, kCounterOffset), 8, Option::kSync).ok(); });
  ASSERT_TRUE(lb.release().ok());
}

// The window fencing exists for: the holder renewed, then stopped with its
// write posted but not yet carried out (shm carries requests out when it
// polls). Taken over and fenced meanwhile, it must not land that write over
// the new holder's, and it learns why.
TEST_F(RemoteLockTest, AWriteThePausedHolderPostedBeforeTheTakeOverNeverLands) {
  auto a = Client(), b = Client();
  RemoteLock la(*a, GlobalAddress(0, kLockOffset), Scratch(*a), FencingLease(50));
  { const Status st = la.acquire(); ASSERT_TRUE(st.ok()) << st.ToString(); }
  ASSERT_TRUE(la.renew().ok());
  uint64_t* mine = Scratch(*a);
  mine[0] = 0xaaaa;
  ASSERT_TRUE(a->write(mine, GlobalAddress(0, kCounterOffset), 8, Option::kPost).ok());
  // `a` pauses here: posted, not polled. `b` takes over and writes.
  RemoteLock lb(*b, GlobalAddress(0, kLockOffset), Scratch(*b), FencingLease(50));
  LockAcquireInfo info;
  ASSERT_TRUE(lb.acquire(&info).ok());
  ASSERT_TRUE(info.took_over);
  ASSERT_TRUE(info.fenced);
  uint64_t* theirs = Scratch(*b);
  theirs[0] = 0xbbbb;
  ASSERT_TRUE(b->write(theirs, GlobalAddress(0, kCounterOffset), 8, Option::kSync).ok());
  // `a` resumes: its write completes with an error and changed nothing.
  const Status s = a->sync();
  EXPECT_EQ(s.code(), Status::Code::kPeerFailed) << s.ToString();
  EXPECT_NE(s.message().find("ended this client's session"), std::string::npos) << s.message();
  EXPECT_EQ(*remote_word(kCounterOffset), 0xbbbbu);
  ASSERT_TRUE(lb.release().ok());
}

TEST_F(RemoteLockTest, AHolderOfTheTakersOwnSessionIsNotFenced) {
  auto a = Client(2);
  const SessionId sa = a->session(0);
  uint64_t* scratch = Scratch(*a);
  RemoteLock first(*a, GlobalAddress(0, kLockOffset), scratch, FencingLease(50));
  { const Status st = first.acquire(); ASSERT_TRUE(st.ok()) << st.ToString(); }
  // Another thread of the same client takes the lock over by lease.
  LockAcquireInfo info;
  Status taken;
  std::thread other([&] {
    RemoteLock second(*a, GlobalAddress(0, kLockOffset), scratch + 2, FencingLease(50));
    taken = second.acquire(&info);
    if (taken.ok()) taken = second.release();
  });
  other.join();
  ASSERT_TRUE(taken.ok()) << taken.ToString();
  EXPECT_TRUE(info.took_over);
  EXPECT_FALSE(info.fenced);
  EXPECT_EQ(session_word(sa.slot), kSessionAliveBit | sa.incarnation);
}

TEST_F(RemoteLockTest, LiveRenewingHolderIsNotTakenOver) {
  auto a = Client(2), b = Client();
  LeaseOptions lease = ShortLease(300);
  std::atomic<bool> stop{false}, lost{false};
  std::atomic<bool> held{false};
  std::thread holder([&] {
    RemoteLock la(*a, GlobalAddress(0, kLockOffset), Scratch(*a), lease);
    if (!la.acquire().ok()) return;
    held = true;
    while (!stop) {
      if (!la.renew().ok()) lost = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!la.release().ok()) lost = true;
    a->release_thread();
  });
  WaitUntil([&] { return held.load(); });
  LeaseOptions bounded = lease;
  bounded.max_wait_ns = 5 * lease.lease_ns;
  RemoteLock lb(*b, GlobalAddress(0, kLockOffset), Scratch(*b), bounded);
  const Status s = lb.acquire();
  stop = true;
  holder.join();
  EXPECT_EQ(s.code(), Status::Code::kTimedOut) << s.ToString();
  EXPECT_NE(s.message().find("session"), std::string::npos) << s.message();
  EXPECT_FALSE(lost);
}

// A holder's words never come back soon: each acquisition and renewal
// takes the lock's next lease value, so a waiter that saw a word never
// mistakes a later acquisition of the same client for a holder that stood
// still since.
TEST_F(RemoteLockTest, EveryWordALockWritesIsNew) {
  auto a = Client();
  RemoteLock la(*a, GlobalAddress(0, kLockOffset), Scratch(*a), ShortLease(1000));
  std::vector<uint64_t> words;
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(la.acquire().ok());
    words.push_back(*remote_word(kLockOffset));
    ASSERT_TRUE(la.renew().ok());
    words.push_back(*remote_word(kLockOffset));
    ASSERT_TRUE(la.release().ok());
  }
  for (size_t i = 0; i < words.size(); ++i) {
    ASSERT_TRUE(IsHeldLockWord(words[i])) << i;
    EXPECT_EQ(words[i] & ~(kLockLeaseMask << kLockLeaseShift), words[0] & ~(kLockLeaseMask << kLockLeaseShift))
        << "the owner is the same client, thread and task";
    for (size_t j = 0; j < i; ++j) EXPECT_NE(words[i], words[j]) << "words " << j << " and " << i;
  }
}

// A waiter that looked away for longer than half a lease cannot tell a word
// that stood still from one that moved and came back: its clock starts over.
TEST_F(RemoteLockTest, AWatcherThatLookedAwayStartsItsLeaseOver) {
  auto b = Client();
  const uint64_t word = 0x42ull << 40;  // session slot 0: not a held word, no session read
  LeaseWatch watch(*b, 0, Scratch(*b), ShortLease(100));
  bool dead = true;
  ASSERT_TRUE(watch.observe(word, &dead).ok());
  EXPECT_FALSE(dead);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  ASSERT_TRUE(watch.observe(word, &dead).ok());
  EXPECT_FALSE(dead) << "two looks 150 ms apart are not a 100 ms lease of standing still";
  // Looked at every 10 ms, the same word stands still for a whole lease.
  const auto start = std::chrono::steady_clock::now();
  dead = false;
  while (!dead) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_TRUE(watch.observe(word, &dead).ok());
    ASSERT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60)) << "never expired";
  }
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(100));
}

TEST_F(RemoteLockTest, GarbageInTheWordIsTakenOverAfterALease) {
  auto b = Client();
  *remote_word(kLockOffset) = 0x0123456789abcdefull & ~(uint64_t{1} << 63);
  *remote_word(kLockOffset) |= 0x3ff;  // slot 1023: not a live session
  RemoteLock lb(*b, GlobalAddress(0, kLockOffset), Scratch(*b), ShortLease(20));
  LockAcquireInfo info;
  ASSERT_TRUE(lb.acquire(&info).ok());
  EXPECT_TRUE(info.took_over);
  EXPECT_EQ(info.previous & 0x3ff, 0x3ffu);
}

TEST_F(RemoteLockTest, StateWithBitSixtyThreeIsReportedNotTakenOver) {
  auto b = Client();
  *remote_word(kLockOffset) = (uint64_t{1} << 63) | 42;
  RemoteLock lb(*b, GlobalAddress(0, kLockOffset), Scratch(*b), ShortLease(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(lb.acquire().ok());
  EXPECT_FALSE(lb.held());
  EXPECT_EQ(lb.last_seen(), (uint64_t{1} << 63) | 42);
  EXPECT_EQ(*remote_word(kLockOffset), (uint64_t{1} << 63) | 42);
}

// Mutual exclusion: increments made with a plain READ and WRITE under the
// lock from several clients, threads and tasks lose nothing.
TEST_F(RemoteLockTest, CriticalSectionsDoNotOverlap) {
  constexpr int kClients = 2, kThreads = 2, kTasks = 4, kRounds = 150;
  std::vector<std::unique_ptr<Initiator>> clients;
  for (int c = 0; c < kClients; ++c) clients.push_back(Client(kThreads));
  *remote_word(kCounterOffset) = 0;
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, c] {
        Initiator& in = *clients[c];
        TaskPool pool;
        for (int k = 0; k < kTasks; ++k) {
          pool.spawn([&] {
            uint64_t* scratch = Scratch(in);
            uint64_t* value = scratch + 4;
            const LockOwner owner = RemoteLock::Owner(in, 0);
            for (int r = 0; r < kRounds; ++r) {
              RemoteLock lock(in, GlobalAddress(0, kLockOffset), scratch, owner);
              if (!lock.acquire().ok()) {
                ++errors;
                return;
              }
              if (!in.read(value, GlobalAddress(0, kCounterOffset), 8).ok()) ++errors;
              this_task::yield();  // widen the window a lost update would need
              ++*value;
              if (!in.write(value, GlobalAddress(0, kCounterOffset), 8).ok()) ++errors;
              if (!lock.release().ok()) ++errors;
            }
          });
        }
        pool.run();
        in.release_thread();
      });
    }
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(*remote_word(kCounterOffset), uint64_t{kClients} * kThreads * kTasks * kRounds);
}

}  // namespace
}  // namespace smart
