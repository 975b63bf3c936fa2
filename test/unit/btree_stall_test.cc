// SMART-BT with a page-lock holder held inside the windows a take-over by
// lease can fall into (after its lease check and before its write is
// posted; with its write posted and not carried out; in a split), while a
// client of another session takes the lock over: the taker fences the
// holder before it writes and reads the page again after the fence, and
// every operation reports the truth (OK only if it took effect, a plain
// error only if it did not, kOutcomeUnknown otherwise). Also: two threads
// of one client, which cannot fence each other, never take a lock from each
// other. On shm a request is carried out when its thread polls, and a
// fenced client's provider refuses its writes: a held thread's posted write
// is still unexecuted when the take-over happens.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "blade_fixture.h"
#include "btree.h"
#include "smart/fault_injection.h"
#include "smart/initiator.h"
#include "smart/task.h"

namespace smart::btree {
namespace {

// Holds one chosen thread at a named fault point (blocking it, so that
// neither its tasks nor its polling run, as in a stopped process) on the
// point's nth hit in that thread, until released.
class PointGate {
 public:
  explicit PointGate(std::string point, int nth = 1) : point_(std::move(point)), nth_(nth) {
    SetFaultPointHook(point_, [this] { Hit(); });
  }
  ~PointGate() {
    Release();
    SetFaultPointHook(point_, {});
  }
  // The calling thread is the one to hold.
  void Target() {
    std::lock_guard<std::mutex> lock(mutex_);
    target_ = std::this_thread::get_id();
  }
  // The target thread ended its work (call last in it).
  void Done() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    changed_.notify_all();
  }
  // True once the target is held at the point; false when it ended its
  // work without reaching it.
  bool WaitReached() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return reached_ || done_; });
    return reached_;
  }
  void Release() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      released_ = true;
    }
    changed_.notify_all();
  }

 private:
  void Hit() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (std::this_thread::get_id() != target_ || ++hits_ != nth_) return;
    reached_ = true;
    changed_.notify_all();
    changed_.wait(lock, [&] { return released_; });
  }

  const std::string point_;
  const int nth_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::thread::id target_;
  int hits_ = 0;
  bool reached_ = false;
  bool released_ = false;
  bool done_ = false;
};

class BTreeStallTest : public smart::testing::BladeTest {
 protected:
  void SetUp() override {
    BladeTest::SetUp();
    // A short lease, so that a held holder is taken over quickly; a long
    // retry bound, so that nobody gives up meanwhile.
    options_.lease.lease_ns = 50000000;
    options_.lease.session_check_ns = 1000000;
    options_.retry_timeout_ns = 20000000000ull;
    other_initiator_ = Connect();
  }
  void TearDown() override {
    a_.reset();
    b_.reset();
  }

  // Client A on the fixture's initiator, client B (another session) on its own.
  void Open() {
    a_ = std::make_unique<BTree>(*initiator_, config_, 1, options_);
    b_ = std::make_unique<BTree>(*other_initiator_, config_, 1, options_);
  }

  std::string Get(BTree& tree, uint64_t key) {
    std::string value;
    Status s = tree.search(key, &value);
    if (s.code() == Status::Code::kNotFound) return "<absent>";
    EXPECT_TRUE(s.ok()) << s.ToString();
    return value;
  }

  // Keys 1, 2 and 3 in the first three entries of a fresh leaf: one line.
  void FillOneLine(const std::string& first_value = "a1") {
    ASSERT_TRUE(a_->insert(1, first_value).ok());
    ASSERT_TRUE(a_->insert(2, "a2").ok());
    ASSERT_TRUE(a_->insert(3, "a3").ok());
  }

  // Two leaves under an internal root, both full: 10, 20, .. 230 with 15,
  // 25, .. 225, and 240, 250, .. 460 with 245, 255, .. 455.
  void TwoFullLeaves() {
    for (uint64_t k = 1; k <= 46; ++k) ASSERT_TRUE(a_->insert(k * 10, "v").ok());
    for (uint64_t k = 1; k <= 22; ++k) {
      ASSERT_TRUE(a_->insert(k * 10 + 5, "v").ok());
      ASSERT_TRUE(a_->insert(k * 10 + 235, "v").ok());
    }
    int height = 0;
    ASSERT_TRUE(a_->height(&height).ok());
    ASSERT_EQ(height, 2);
  }

  TreeOptions options_;
  std::unique_ptr<Initiator> other_initiator_;
  std::unique_ptr<BTree> a_, b_;
};

// Client A is held at `point` while it updates key 1 with `value`; B
// updates key 2 of the same line, taking A's lock over by lease. Returns
// A's status once it was let go after B's update returned.
Status HeldWhileTakenOver(BTree& a, BTree& b, const char* point, const std::string& value, Status* b_status) {
  PointGate gate(point);
  Status a_status;
  std::thread holder([&] {
    gate.Target();
    a_status = a.update(1, value);
    gate.Done();
  });
  if (!gate.WaitReached()) {
    holder.join();
    ADD_FAILURE() << "the holder never reached " << point << ": " << a_status.ToString();
    return a_status;
  }
  *b_status = b.update(2, "B");
  gate.Release();
  holder.join();
  return a_status;
}

TEST_F(BTreeStallTest, AHolderStoppedAfterItsLeaseCheckIsFencedAndItsWriteNeverLands) {
  Open();
  FillOneLine();
  Status b_status;
  const Status a_status = HeldWhileTakenOver(*a_, *b_, "bt.leaf.write_checked", "A", &b_status);
  ASSERT_TRUE(b_status.ok()) << b_status.ToString();
  // A posted its write after the fence: refused, and A cannot know that.
  EXPECT_EQ(a_status.code(), Status::Code::kOutcomeUnknown) << a_status.ToString();
  EXPECT_EQ(b_->stats().lock_takeovers, 1u);
  EXPECT_EQ(b_->stats().holders_fenced, 1u);
  EXPECT_EQ(a_->stats().writes_unknown, 1u);
  // B's acknowledged update is there; A's stale line did not land over it.
  EXPECT_EQ(Get(*b_, 2), "B");
  EXPECT_EQ(Get(*b_, 1), "a1");
  EXPECT_EQ(Get(*b_, 3), "a3");
}

TEST_F(BTreeStallTest, AHolderStoppedWithItsWritePostedIsFencedAndItsWriteNeverLands) {
  Open();
  FillOneLine();
  Status b_status;
  const Status a_status = HeldWhileTakenOver(*a_, *b_, "bt.leaf.write_posted", "A", &b_status);
  ASSERT_TRUE(b_status.ok()) << b_status.ToString();
  EXPECT_EQ(a_status.code(), Status::Code::kOutcomeUnknown) << a_status.ToString();
  EXPECT_EQ(b_->stats().holders_fenced, 1u);
  EXPECT_EQ(Get(*b_, 2), "B");
  EXPECT_EQ(Get(*b_, 1), "a1");
}

// Held before its lease check, A renews when let go, finds out (its session
// is over) and writes nothing: a plain error, not an unknown outcome.
TEST_F(BTreeStallTest, AHolderStoppedBeforeItsLeaseCheckWritesNothingAndSaysSo) {
  Open();
  FillOneLine();
  Status b_status;
  const Status a_status = HeldWhileTakenOver(*a_, *b_, "bt.leaf.locked", "A", &b_status);
  ASSERT_TRUE(b_status.ok()) << b_status.ToString();
  EXPECT_FALSE(a_status.ok());
  EXPECT_NE(a_status.code(), Status::Code::kOutcomeUnknown) << a_status.ToString();
  EXPECT_EQ(a_->stats().writes_unknown, 0u);
  EXPECT_EQ(Get(*b_, 2), "B");
  EXPECT_EQ(Get(*b_, 1), "a1");
}

// A's write lands after B's take-over CAS (and the READ that rode with it)
// but before B's fence: A held the lock when it wrote, so A's update took
// effect (OK), and B, reading the page again after the fence, keeps it.
TEST_F(BTreeStallTest, AWriteThatLandsBeforeTheFenceIsKeptAndReportedOk) {
  Open();
  FillOneLine();
  PointGate gate("bt.leaf.write_checked");
  Status a_status;
  std::atomic<bool> a_done{false};
  const std::thread::id taker = std::this_thread::get_id();
  SetFaultPointHook("bt.lock.taken_over", [&] {
    if (std::this_thread::get_id() != taker) return;
    gate.Release();
    while (!a_done.load()) std::this_thread::yield();
  });
  std::thread holder([&] {
    gate.Target();
    a_status = a_->update(1, "A");
    a_done = true;
    gate.Done();
  });
  if (!gate.WaitReached()) {
    holder.join();
    FAIL() << "the holder never reached its point: " << a_status.ToString();
  }
  const Status b_status = b_->update(2, "B");
  holder.join();
  SetFaultPointHook("bt.lock.taken_over", {});
  ASSERT_TRUE(b_status.ok()) << b_status.ToString();
  EXPECT_TRUE(a_status.ok()) << a_status.ToString();
  EXPECT_EQ(b_->stats().lock_takeovers, 1u);
  EXPECT_EQ(Get(*b_, 1), "A");
  EXPECT_EQ(Get(*b_, 2), "B");
}

// Value blocks: the new block of a write whose outcome is unknown, and the
// old one the leaf may still name, are never reused.
TEST_F(BTreeStallTest, BlocksAPageMayNameAfterAnUnknownOutcomeAreNeverReused) {
  Open();
  const std::string old_value(100, 'o');
  FillOneLine(old_value);
  Status b_status;
  const Status a_status =
      HeldWhileTakenOver(*a_, *b_, "bt.leaf.write_checked", std::string(200, 'n'), &b_status);
  ASSERT_TRUE(b_status.ok()) << b_status.ToString();
  ASSERT_EQ(a_status.code(), Status::Code::kOutcomeUnknown) << a_status.ToString();
  EXPECT_EQ(a_->stats().blocks_leaked, 2u);
  EXPECT_EQ(a_->stats().blocks_released, 0u);
  EXPECT_EQ(Get(*b_, 1), old_value);
  // A write that certainly did not land gives its block back at once.
  ASSERT_TRUE(b_->insert(4, std::string(150, 'x')).ok());
  EXPECT_EQ(b_->update(5, std::string(150, 'y')).code(), Status::Code::kNotFound);
  EXPECT_EQ(b_->stats().blocks_released, 1u);
  EXPECT_EQ(b_->stats().blocks_leaked, 0u);
}

// A hand-over inside client A: task x writes and hands the remote word to
// task y without a release; y is held before its write. B takes the word
// over from y (the lease counts from x's acquisition) and fences A.
TEST_F(BTreeStallTest, AWordHandedOverLocallyIsFencedOnTakeOverLikeAnyOther) {
  Open();
  FillOneLine();
  PointGate gate("bt.leaf.write_checked", 2);
  Status x_status, y_status;
  std::thread holder([&] {
    gate.Target();
    TaskPool pool;
    pool.spawn([&] { x_status = a_->update(1, "X"); });
    pool.spawn([&] { y_status = a_->update(2, "Y"); });
    pool.run();
    gate.Done();
  });
  if (!gate.WaitReached()) {
    holder.join();
    FAIL() << "the second task never reached its write";
  }
  const Status b_status = b_->update(3, "B");
  gate.Release();
  holder.join();
  ASSERT_TRUE(b_status.ok()) << b_status.ToString();
  EXPECT_TRUE(x_status.ok()) << x_status.ToString();
  EXPECT_EQ(y_status.code(), Status::Code::kOutcomeUnknown) << y_status.ToString();
  EXPECT_GE(a_->stats().handovers, 1u);
  EXPECT_EQ(b_->stats().holders_fenced, 1u);
  EXPECT_EQ(Get(*b_, 1), "X");
  EXPECT_EQ(Get(*b_, 2), "a2");
  EXPECT_EQ(Get(*b_, 3), "B");
}

// A splitter held before the write of the split page P (N written, not
// linked). B splits the same leaf after taking its lock over; the held
// splitter's whole-page write must not land over B's split.
TEST_F(BTreeStallTest, ASplitterStoppedBeforeLinkingItsSplitIsFencedAndTheTreeKeepsTheOthersSplit) {
  Open();
  for (uint64_t k = 1; k <= 45; ++k) ASSERT_TRUE(a_->insert(k * 10, "v").ok());  // a full leaf
  PointGate gate("bt.split.leaf.write_checked");
  Status a_status;
  std::thread holder([&] {
    gate.Target();
    a_status = a_->insert(5, "A");
    gate.Done();
  });
  if (!gate.WaitReached()) {
    holder.join();
    FAIL() << "the splitter never reached its point: " << a_status.ToString();
  }
  const Status b_status = b_->insert(455, "B");
  gate.Release();
  holder.join();
  ASSERT_TRUE(b_status.ok()) << b_status.ToString();
  EXPECT_EQ(a_status.code(), Status::Code::kOutcomeUnknown) << a_status.ToString();
  EXPECT_EQ(b_->stats().holders_fenced, 1u);
  EXPECT_EQ(b_->stats().leaf_splits, 1u);
  EXPECT_EQ(Get(*b_, 455), "B");
  EXPECT_EQ(Get(*b_, 5), "<absent>");
  for (uint64_t k = 1; k <= 45; ++k) ASSERT_EQ(Get(*b_, k * 10), "v") << k;
  uint64_t keys = 0;
  const Status s = b_->check_leaves(&keys);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(keys, 46u);
}

// Once the split page is written the new key is visible: the insert took
// effect, whatever the parent insert meets afterwards (here a parent lock
// held by a live client for longer than the retry bound).
TEST_F(BTreeStallTest, ASplitIsOkOnceItsPageIsWrittenWhateverTheParentInsertMeets) {
  options_.lease.lease_ns = 60000000000ull;  // nobody is taken over here
  options_.retry_timeout_ns = 300000000;     // 0.3 s
  Open();
  ASSERT_NO_FATAL_FAILURE(TwoFullLeaves());
  // B splits the left leaf and is held holding the root's lock.
  PointGate gate("bt.internal.write_checked");
  Status b_status;
  std::thread holder([&] {
    gate.Target();
    b_status = b_->insert(16, "B");
    gate.Done();
  });
  if (!gate.WaitReached()) {
    holder.join();
    FAIL() << "the splitter never reached the parent's write: " << b_status.ToString();
  }
  const Status a_status = a_->insert(306, "A");
  EXPECT_TRUE(a_status.ok()) << a_status.ToString();
  EXPECT_EQ(a_->stats().leaf_splits, 2u);  // the first 46 keys, and this one
  EXPECT_EQ(Get(*a_, 306), "A");
  gate.Release();
  holder.join();
  EXPECT_TRUE(b_status.ok()) << b_status.ToString();
  uint64_t keys = 0;
  const Status s = a_->check_leaves(&keys);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(keys, 46u + 44u + 2u);
}

// A splitter stopped after linking its split (P written with its sibling
// link to N, the separator not yet in the parent) leaves a tree whose way
// to N's keys moves right from P. The next writer of such a key whose
// descent moved right there adds the separator itself: a fresh reader then
// reaches N without a hop, before the splitter ever resumes.
TEST_F(BTreeStallTest, AWriterWhoseDescentMovedRightAddsTheSeparatorAStoppedSplitterLacks) {
  options_.lease.lease_ns = 60000000000ull;  // nobody is taken over here
  Open();
  ASSERT_NO_FATAL_FAILURE(TwoFullLeaves());
  PointGate gate("bt.split.leaf.linked");
  Status a_status;
  std::thread splitter([&] {
    gate.Target();
    a_status = a_->insert(16, "A");
    gate.Done();
  });
  if (!gate.WaitReached()) {
    splitter.join();
    FAIL() << "the splitter never linked its split: " << a_status.ToString();
  }
  // 226 lies in the split's right half: B's descent meets the root without
  // its separator and moves right from the left leaf.
  const Status b_status = b_->insert(226, "B");
  EXPECT_TRUE(b_status.ok()) << b_status.ToString();
  EXPECT_GE(b_->stats().links_checked, 1u);
  BTree reader(*other_initiator_, config_, 1, options_);
  EXPECT_EQ(Get(reader, 226), "B");
  EXPECT_EQ(Get(reader, 230), "v");
  EXPECT_EQ(reader.stats().moved_right, 0u) << "the separator of the stopped splitter's split is still missing";
  gate.Release();
  splitter.join();
  EXPECT_TRUE(a_status.ok()) << a_status.ToString();
  EXPECT_EQ(Get(reader, 16), "A");
  uint64_t keys = 0;
  const Status s = reader.check_leaves(&keys);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(keys, 46u + 44u + 2u);
}

// A page's local turn never waits for a thread the OS does not run: holder
// H ends its turn while the first waiter queued behind it belongs to thread
// B, which is held (as a descheduled thread would be), and a waiter of
// thread C is queued behind B's. C must get the turn and finish while B is
// still held; B gets it once it runs again.
TEST_F(BTreeStallTest, ATurnEndedWhileTheNextWaitersThreadIsOffItsCoreGoesToAThreadThatRuns) {
  options_.lease.lease_ns = 60000000000ull;  // nobody is taken over here
  Open();
  FillOneLine();
  std::mutex mutex;
  std::condition_variable changed;
  std::thread::id b_id, c_id;
  bool b_queued = false, c_queued = false, b_released = false, c_done = false;
  SetFaultPointHook("bt.lock.queued", [&] {
    std::unique_lock<std::mutex> lock(mutex);
    if (std::this_thread::get_id() == b_id && !b_queued) {
      b_queued = true;
      changed.notify_all();
      changed.wait(lock, [&] { return b_released; });  // B is off its core
    } else if (std::this_thread::get_id() == c_id) {
      c_queued = true;
      changed.notify_all();
    }
  });
  PointGate holder_gate("bt.leaf.write_checked");
  Status h_status, b_status, c_status;
  std::thread h([&] {
    holder_gate.Target();
    h_status = a_->update(1, "H");
    holder_gate.Done();
  });
  ASSERT_TRUE(holder_gate.WaitReached()) << h_status.ToString();
  std::thread b([&] {
    {
      std::lock_guard<std::mutex> lock(mutex);
      b_id = std::this_thread::get_id();
    }
    b_status = a_->update(2, "B");
  });
  {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return b_queued; });
  }
  std::thread c([&] {
    {
      std::lock_guard<std::mutex> lock(mutex);
      c_id = std::this_thread::get_id();
    }
    c_status = a_->update(3, "C");
    std::lock_guard<std::mutex> lock(mutex);
    c_done = true;
    changed.notify_all();
  });
  {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return c_queued; });
  }
  holder_gate.Release();
  h.join();
  bool c_finished_while_b_held;
  {
    // A bound only so that a failing build ends: C needs microseconds.
    std::unique_lock<std::mutex> lock(mutex);
    c_finished_while_b_held = changed.wait_for(lock, std::chrono::seconds(20), [&] { return c_done; });
    b_released = true;
    changed.notify_all();
  }
  b.join();
  c.join();
  SetFaultPointHook("bt.lock.queued", {});
  EXPECT_TRUE(c_finished_while_b_held) << "the turn waited for the thread that was off its core";
  EXPECT_TRUE(h_status.ok()) << h_status.ToString();
  EXPECT_TRUE(b_status.ok()) << b_status.ToString();
  EXPECT_TRUE(c_status.ok()) << c_status.ToString();
  EXPECT_EQ(Get(*a_, 1), "H");
  EXPECT_EQ(Get(*a_, 2), "B");
  EXPECT_EQ(Get(*a_, 3), "C");
}

// Two threads of one client, one held with the lock for many leases: the
// other cannot fence it (that would end its own session) and must not take
// the word by lease; it waits, then both updates stand.
void TwoThreadsOfOneClient(BTree& first, BTree& second, uint64_t lease_ns) {
  PointGate gate("bt.leaf.write_checked");
  Status first_status, second_status;
  std::thread holder([&] {
    gate.Target();
    first_status = first.update(1, "T1");
    gate.Done();
  });
  if (!gate.WaitReached()) {
    holder.join();
    FAIL() << "the first thread never reached its write: " << first_status.ToString();
  }
  std::atomic<bool> second_done{false};
  std::thread waiter([&] {
    second_status = second.update(2, "T2");
    second_done = true;
  });
  // Several leases: a waiter that judged the holder by lease would have
  // taken the word over by now.
  std::this_thread::sleep_for(std::chrono::nanoseconds(6 * lease_ns));
  EXPECT_FALSE(second_done.load()) << "the second thread took a lock its own client holds";
  gate.Release();
  holder.join();
  waiter.join();
  EXPECT_TRUE(first_status.ok()) << first_status.ToString();
  EXPECT_TRUE(second_status.ok()) << second_status.ToString();
  std::string value;
  ASSERT_TRUE(first.search(1, &value).ok());
  EXPECT_EQ(value, "T1");
  ASSERT_TRUE(first.search(2, &value).ok());
  EXPECT_EQ(value, "T2");
  EXPECT_EQ(first.stats().lock_takeovers + second.stats().lock_takeovers, 0u);
}

TEST_F(BTreeStallTest, WithoutHoclTwoThreadsOfOneClientNeverTakeALockFromEachOther) {
  options_.hocl = false;
  Open();
  FillOneLine();
  TwoThreadsOfOneClient(*a_, *a_, options_.lease.lease_ns);
}

TEST_F(BTreeStallTest, TwoTreeObjectsOfOneClientShareTheirLocksAndNeverTakeOneFromEachOther) {
  Open();
  FillOneLine();
  BTree again(*initiator_, config_, 1, options_);
  TwoThreadsOfOneClient(*a_, again, options_.lease.lease_ns);
}

}  // namespace
}  // namespace smart::btree
