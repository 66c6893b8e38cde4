// The target stream and the branch actor under CAF's deterministic test coordinator: the test
// runs every message itself (sched.run()) and fires timers itself (sched.trigger_timeouts()),
// so buffers, agreement of configs, silence windows and push cooldowns are checked step by step,
// without waiting. (target_stream_test.cc and gitworker_test.cc run the same parts for real.)

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "libs/core/clock.h"
#include "services/gitworker/branch_actor.h"
#include "services/gitworker/target_stream.h"
#include "services/gitworker/test_support.h"
#include "tests/fixtures/git_repos.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::gitworker {
namespace {

using namespace ::reverser::gitworker::testsupport;  // NOLINT
using release_atom = caf::atom_constant<caf::atom("release")>;

struct TestingConfig : caf::actor_system_config {
  TestingConfig() { set("scheduler.policy", caf::atom("testing")); }
};

class DeterministicTest : public ::testing::Test {
 protected:
  // Actors end only when the test runs their exit; the system waits for them when it goes.
  ~DeterministicTest() override {
    for (const caf::actor& actor : actors_)
      self_->send_exit(actor, caf::exit_reason::user_shutdown);
    sched_.run();
  }

  template <typename Handle>
  Handle Track(Handle handle) {
    actors_.push_back(caf::actor_cast<caf::actor>(handle));
    return handle;
  }

  template <typename T, typename Handle, typename... Args>
  T Ask(const Handle& actor, Args... args) {
    T out{};
    auto pending = self_->request(actor, caf::infinite, args...);
    sched_.run();
    pending.receive([&](const T& value) { out = value; },
                    [&](caf::error& err) { ADD_FAILURE() << system_.render(err); });
    return out;
  }

  TestingConfig config_;
  caf::actor_system system_{config_};
  caf::scheduler::test_coordinator& sched_ =
      dynamic_cast<caf::scheduler::test_coordinator&>(system_.scheduler());
  caf::scoped_actor self_{system_};
  std::shared_ptr<RecordingSink> sink_ = std::make_shared<RecordingSink>();
  runtime::MetricsRegistry metrics_;
  std::vector<caf::actor> actors_;
};

// A branch stand-in that holds every item until released.
struct HoldingBranchState {
  std::vector<caf::response_promise> held;
};
using HoldingBranchActor = BranchItemActor::extend<caf::reacts_to<release_atom>>;

HoldingBranchActor::behavior_type HoldingBranch(
    HoldingBranchActor::stateful_pointer<HoldingBranchState> self) {
  return {
      [=](item_atom, const WorkItemPtr&) -> caf::result<bool> {
        self->state.held.push_back(self->make_response_promise());
        return self->state.held.back();
      },
      [=](release_atom) {
        for (auto& promise : self->state.held) promise.deliver(true);
        self->state.held.clear();
      },
  };
}

class TargetStreamDeterministicTest : public DeterministicTest {
 protected:
  TargetStreamActor Spawn(size_t capacity, size_t max_in_flight) {
    branch_ = Track(system_.spawn(HoldingBranch));
    TargetStreamOptions options;
    options.capacity = capacity;
    options.max_in_flight = max_in_flight;
    options.branch_for = [branch = branch_](const TargetSettings&) { return branch; };
    options.sink = sink_;
    options.metrics = &metrics_;
    return Track(SpawnTargetStream(system_, options));
  }

  void Deliver(const TargetStreamActor& stream, uint64_t sequence, const std::string& name,
               uint64_t rv) {
    auto item = std::make_shared<WorkItem>();
    item->event =
        Event(config_a_, ConfigMaps(), reverser::v1::OPERATION_UPDATE, "default", name, "v", rv);
    item->covers.push_back(CoverageOf(*item, sink_));
    self_->send(stream, deliver_atom::value, sequence, item);
  }

  TargetStreamStatus Status(const TargetStreamActor& stream) {
    return Ask<TargetStreamStatus>(stream, status_atom::value);
  }

  reverser::v1::GitTargetConfig config_a_ = Config("/nowhere", 0);
  HoldingBranchActor branch_;
};

TEST_F(TargetStreamDeterministicTest, CreditIsWithheldWhileFullAndGivenBackAsTheBranchTakes) {
  TargetStreamActor stream = Spawn(/*capacity=*/2, /*max_in_flight=*/1);
  auto settings = SettingsFromConfig(config_a_);
  ASSERT_TRUE(settings.ok());
  self_->send(stream, config_atom::value, SettingsPtr(*settings));
  Deliver(stream, 1, "a", 10);  // in flight
  Deliver(stream, 2, "b", 11);  // queued
  Deliver(stream, 3, "b", 12);  // folded into the queued b
  Deliver(stream, 4, "c", 13);  // queued: the buffer is full
  Deliver(stream, 5, "d", 14);  // waits
  sched_.run();
  EXPECT_EQ(Status(stream), (TargetStreamStatus{.queued = 2, .waiting = 1, .in_flight = 1}));
  EXPECT_THAT(sink_->accepted(), ::testing::ElementsAre(1, 2, 3, 4));

  // One item taken: b goes out, d comes in.
  self_->send(branch_, release_atom::value);
  sched_.run();
  EXPECT_EQ(Status(stream), (TargetStreamStatus{.queued = 2, .waiting = 0, .in_flight = 1}));
  EXPECT_THAT(sink_->accepted(), ::testing::ElementsAre(1, 2, 3, 4, 5));
}

TEST_F(TargetStreamDeterministicTest, ItemsWaitUntilTheDeliveredAndTheCatalogsConfigAgree) {
  TargetStreamActor stream = Spawn(/*capacity=*/10, /*max_in_flight=*/10);
  auto config_b = config_a_;
  config_b.set_remote_url("/elsewhere");
  auto ptr = [](const reverser::v1::GitTargetConfig& config) {
    return std::make_shared<const reverser::v1::GitTargetConfig>(config);
  };

  self_->send(stream, declare_atom::value, ptr(config_a_));
  Deliver(stream, 1, "a", 10);
  sched_.run();
  EXPECT_TRUE(sink_->accepted().empty()) << "no catalog config yet";
  EXPECT_EQ(Status(stream).waiting, 1u);

  self_->send(stream, catalog_atom::value, ptr(config_a_));
  sched_.run();
  EXPECT_THAT(sink_->accepted(), ::testing::ElementsAre(1));

  // The catalog moves on: nothing more is written with the old config, nor with one the
  // splicer has not declared yet.
  self_->send(stream, catalog_atom::value, ptr(config_b));
  Deliver(stream, 2, "b", 11);
  sched_.run();
  EXPECT_THAT(sink_->accepted(), ::testing::ElementsAre(1));
  EXPECT_EQ(Status(stream).waiting, 1u);

  self_->send(stream, declare_atom::value, ptr(config_b));
  sched_.run();
  EXPECT_THAT(sink_->accepted(), ::testing::ElementsAre(1, 2));

  // The catalog withdraws the target: items wait again.
  self_->send(stream, catalog_atom::value, TargetConfigPtr());
  Deliver(stream, 3, "c", 12);
  sched_.run();
  EXPECT_THAT(sink_->accepted(), ::testing::ElementsAre(1, 2));
}

// A branch actor scheduled (not detached) on a real bare remote, with a fake clock that the
// test moves in step with the coordinator's timers.
class BranchActorDeterministicTest : public DeterministicTest {
 protected:
  void SetUp() override {
    auto remote = testing::CreateBareRemote(dir_.path());
    ASSERT_TRUE(remote.ok()) << remote.status();
    remote_ = *remote;
    config_ = Config(remote_, /*window_ms=*/1000);
    auto settings = SettingsFromConfig(config_);
    ASSERT_TRUE(settings.ok()) << settings.status();
    settings_ = *settings;
    BranchWorkerOptions options;
    options.key = BranchKey::Of(*settings_);
    options.remote_url = remote_;
    options.work_dir = dir_.path() + "/work";
    options.push_cooldown = absl::Seconds(5);
    options.clock = &clock_;
    options.metrics = &metrics_;
    branch_ = Track(SpawnBranchActor(system_, options, BranchActorThread::kScheduled));
  }

  void Send(const std::string& name, uint64_t rv) {
    auto item = std::make_shared<WorkItem>();
    item->kind = WorkItem::Kind::kEvent;
    item->event = Event(config_, ConfigMaps(), reverser::v1::OPERATION_CREATE, "default", name, "1",
                        rv, "alice");
    item->settings = settings_;
    item->covers.push_back(CoverageOf(*item, sink_));
    EXPECT_TRUE(Ask<bool>(branch_, item_atom::value, item));
  }

  reverser::v1::BranchStatus Status() {
    reverser::v1::BranchStatus status;
    EXPECT_TRUE(status.ParseFromString(Ask<std::string>(branch_, status_atom::value)));
    return status;
  }

  int RemoteCommits() {
    auto count = testing::Git(remote_, {"rev-list", "--count", "main"});
    int n = -1;
    EXPECT_TRUE(count.ok() && absl::SimpleAtoi(absl::StripTrailingAsciiWhitespace(*count), &n));
    return n;
  }

  // Moves the fake clock and fires the timers due by then, running what they cause.
  void Elapse(absl::Duration d) {
    clock_.Advance(d);
    sched_.advance_time(std::chrono::microseconds(absl::ToInt64Microseconds(d)));
    sched_.run();
  }

  testing::ScopedTempDir dir_{"deterministic-branch"};
  std::string remote_;
  core::FakeClock clock_;
  reverser::v1::GitTargetConfig config_;
  SettingsPtr settings_;
  BranchActor branch_;
};

TEST_F(BranchActorDeterministicTest, SilenceClosesTheWindowAndTheCooldownSpacesPushes) {
  const int seeded = RemoteCommits();
  Send("a", 10);
  EXPECT_TRUE(Status().window_open());
  Elapse(absl::Milliseconds(999));
  EXPECT_TRUE(Status().window_open()) << "the silence timer has not run out";

  // The window falls silent: committed, and the first push follows at once.
  Elapse(absl::Milliseconds(1));
  EXPECT_FALSE(Status().window_open());
  EXPECT_EQ(RemoteCommits(), seeded + 1);
  EXPECT_EQ(sink_->AckedRv(ConfigMaps()), 10u);

  // The next window closes a second later, but its push waits for the cooldown (5 s).
  Send("b", 11);
  Elapse(absl::Seconds(1));
  EXPECT_FALSE(Status().window_open());
  EXPECT_EQ(Status().pending_writes(), 1u);
  EXPECT_EQ(RemoteCommits(), seeded + 1);
  Elapse(absl::Seconds(3));
  EXPECT_EQ(RemoteCommits(), seeded + 1) << "4 s after the last push";
  Elapse(absl::Seconds(1));
  EXPECT_EQ(RemoteCommits(), seeded + 2);
  EXPECT_EQ(sink_->AckedRv(ConfigMaps()), 11u);
  EXPECT_EQ(Status().pending_writes(), 0u);
}

// A CommitRequest of (author, this target) with a close delay.
CommitRequestSpec Request(const std::string& id, const std::string& username,
                          const std::string& target_key, const std::string& message,
                          absl::Duration close_delay) {
  return CommitRequestSpec{id, BranchWorker::WindowKey(username, target_key), message,
                           close_delay};
}

TEST_F(BranchActorDeterministicTest, AnAttachedWriteIsFinalizedAfterItsDelayAndReportsItsCommit) {
  Send("a", 10);
  const auto release = Request("cr-1", "alice", settings_->TargetKey(), "Release 1",
                               absl::Milliseconds(500));
  CommitRequestView view = Ask<CommitRequestView>(branch_, attach_atom::value, release);
  EXPECT_TRUE(view.known);
  EXPECT_FALSE(view.resolved);
  const CommitRequestView bob = Ask<CommitRequestView>(
      branch_, attach_atom::value,
      Request("cr-2", "bob", settings_->TargetKey(), "x", absl::ZeroDuration()));
  EXPECT_TRUE(bob.resolved);
  EXPECT_EQ(bob.outcome, reverser::v1::FINALIZE_OUTCOME_NO_OPEN_WINDOW) << "bob has no window";
  EXPECT_TRUE(Status().window_open()) << "another author's request leaves alice's window open";

  // The close delay (500 ms, shorter than the 1 s silence) closes the window with the request's
  // message; it is pushed at once.
  Elapse(absl::Milliseconds(500));
  view = Ask<CommitRequestView>(branch_, attach_atom::value, release);
  ASSERT_TRUE(view.resolved);
  EXPECT_EQ(view.outcome, reverser::v1::FINALIZE_OUTCOME_COMMITTED);
  auto head = testing::Git(remote_, {"rev-parse", "main"});
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(view.sha + "\n", *head);
  auto subject = testing::Git(remote_, {"log", "-1", "--format=%s", "main"});
  ASSERT_TRUE(subject.ok());
  EXPECT_EQ(*subject, "Release 1\n");

  // Outcomes are kept for polling, then forgotten.
  Elapse(CommitRequestBook::kOutcomeRetention);
  EXPECT_FALSE(Ask<CommitRequestView>(branch_, attach_atom::value, release).resolved)
      << "forgotten, so registered anew";
}

TEST_F(BranchActorDeterministicTest, ARequestWaitsForItsWindowAndCarriesItsMessageIntoIt) {
  // The request arrives before the objects' events (kubectl apply of a bundle with the
  // request): it binds to the window when that opens.
  const auto bundle =
      Request("cr-bundle", "alice", settings_->TargetKey(), "Bundle v2", absl::Seconds(3));
  EXPECT_FALSE(Ask<CommitRequestView>(branch_, attach_atom::value, bundle).resolved);
  Send("a", 10);
  Send("b", 11);
  // The window closes on its own silence first (1 s); the request's message goes with it.
  Elapse(absl::Seconds(1));
  const CommitRequestView view = Ask<CommitRequestView>(branch_, attach_atom::value, bundle);
  ASSERT_TRUE(view.resolved);
  EXPECT_EQ(view.outcome, reverser::v1::FINALIZE_OUTCOME_COMMITTED);
  auto log = testing::Git(remote_, {"log", "-1", "--format=%s", "--name-only", "main"});
  ASSERT_TRUE(log.ok());
  EXPECT_NE(log->find("Bundle v2"), std::string::npos) << *log;
  EXPECT_NE(log->find("/a.yaml"), std::string::npos) << *log;
  EXPECT_NE(log->find("/b.yaml"), std::string::npos) << *log;
}

TEST_F(BranchActorDeterministicTest, ARequestWithoutAWindowByItsDeadlineFindsNoneInGrace) {
  const auto lonely =
      Request("cr-lonely", "alice", settings_->TargetKey(), "nothing", absl::Seconds(2));
  EXPECT_FALSE(Ask<CommitRequestView>(branch_, attach_atom::value, lonely).resolved);
  Elapse(absl::Seconds(2));
  const CommitRequestView view = Ask<CommitRequestView>(branch_, attach_atom::value, lonely);
  ASSERT_TRUE(view.resolved);
  EXPECT_EQ(view.outcome, reverser::v1::FINALIZE_OUTCOME_NO_OPEN_WINDOW);
}

TEST_F(BranchActorDeterministicTest, ARequestRegisteredAgainWithOtherContentIsAWindowMismatch) {
  Send("a", 10);
  EXPECT_FALSE(Ask<CommitRequestView>(
                   branch_, attach_atom::value,
                   Request("cr-1", "alice", settings_->TargetKey(), "one", absl::Seconds(2)))
                   .resolved);
  const CommitRequestView view = Ask<CommitRequestView>(
      branch_, attach_atom::value,
      Request("cr-1", "alice", settings_->TargetKey(), "another", absl::Seconds(2)));
  ASSERT_TRUE(view.resolved);
  EXPECT_EQ(view.outcome, reverser::v1::FINALIZE_OUTCOME_WINDOW_MISMATCH);
}

}  // namespace
}  // namespace reverser::gitworker
