// The per-target stream actor: coalescing of queued events and credit-based back-pressure,
// against a branch actor stand-in that takes items only when told to.

#include "services/gitworker/target_stream.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "services/gitworker/test_support.h"
#include "tests/fixtures/process.h"

namespace reverser::gitworker {
namespace {

using namespace ::reverser::gitworker::testsupport;  // NOLINT
using release_atom = caf::atom_constant<caf::atom("release")>;
using taken_atom = caf::atom_constant<caf::atom("taken")>;

// Holds every item's reply until released; reports what it got as "name:rv,rv;..." per item.
struct HoldingBranchState {
  std::vector<caf::response_promise> held;
  std::vector<std::string> received;
};

using HoldingBranchActor =
    BranchItemActor::extend<caf::reacts_to<release_atom>,
                            caf::replies_to<taken_atom>::with<std::vector<std::string>>>;

HoldingBranchActor::behavior_type HoldingBranch(
    HoldingBranchActor::stateful_pointer<HoldingBranchState> self) {
  return {
      [=](item_atom, const WorkItemPtr& item) -> caf::result<bool> {
        std::string entry = item->event.object().ref().name() + ":";
        for (const Coverage& cover : item->covers) {
          entry += std::to_string(cover.position.rv()) + ",";
        }
        self->state.received.push_back(entry);
        self->state.held.push_back(self->make_response_promise());
        return self->state.held.back();
      },
      [=](release_atom) {
        for (auto& promise : self->state.held) promise.deliver(true);
        self->state.held.clear();
      },
      [=](taken_atom) { return self->state.received; },
  };
}

class TargetStreamTest : public ::testing::Test {
 protected:
  caf::actor_system_config config_;
  caf::actor_system system_{config_};
  std::shared_ptr<RecordingSink> sink_ = std::make_shared<RecordingSink>();

  template <typename T, typename Handle>
  T Ask(const Handle& actor, auto... args) {
    caf::scoped_actor self{system_};
    T out{};
    self->request(actor, std::chrono::seconds(10), args...)
        .receive([&](const T& value) { out = value; },
                 [&](caf::error& err) { ADD_FAILURE() << system_.render(err); });
    return out;
  }
};

TEST_F(TargetStreamTest, CoalescesQueuedEventsAndWithholdsCreditWhenFull) {
  HoldingBranchActor branch = system_.spawn(HoldingBranch);
  TargetStreamOptions options;
  options.capacity = 2;
  options.max_in_flight = 1;
  options.branch_for = [branch](const TargetSettings&) { return branch; };
  options.sink = sink_;
  runtime::MetricsRegistry metrics;
  options.metrics = &metrics;
  TargetStreamActor stream = SpawnTargetStream(system_, options);

  auto config = Config("/nowhere", 0);
  auto settings = SettingsFromConfig(config);
  ASSERT_TRUE(settings.ok());
  caf::anon_send(stream, config_atom::value, SettingsPtr(*settings));
  auto send = [&](uint64_t sequence, const std::string& name, uint64_t rv) {
    auto item = std::make_shared<WorkItem>();
    item->event =
        Event(config, ConfigMaps(), reverser::v1::OPERATION_UPDATE, "default", name, "v", rv);
    item->covers.push_back(CoverageOf(*item, sink_));
    caf::anon_send(stream, deliver_atom::value, sequence, item);
  };
  send(1, "a", 10);  // handed to the branch at once (in flight)
  send(2, "b", 11);  // queued
  send(3, "b", 12);  // replaces the queued b, covering 11 and 12
  send(4, "c", 13);  // queued: the buffer (2) is full now
  send(5, "d", 14);  // waits, unaccepted
  EXPECT_EQ(Ask<TargetStreamStatus>(stream, status_atom::value),
            (TargetStreamStatus{.queued = 2, .waiting = 1, .in_flight = 1}));
  EXPECT_THAT(sink_->accepted(), ::testing::ElementsAre(1, 2, 3, 4));
  EXPECT_EQ(metrics.GetCounter("reverser_gitworker_events_coalesced_total", "").Value(), 1.0);

  // The branch takes "a": one slot frees, "d" is accepted, the coalesced "b" goes out.
  caf::anon_send(branch, release_atom::value);
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        return Ask<TargetStreamStatus>(stream, status_atom::value) ==
               TargetStreamStatus{.queued = 2, .waiting = 0, .in_flight = 1};
      },
      absl::Seconds(10)))
      << Ask<TargetStreamStatus>(stream, status_atom::value).ToString();
  EXPECT_THAT(sink_->accepted(), ::testing::ElementsAre(1, 2, 3, 4, 5));
  EXPECT_THAT(Ask<std::vector<std::string>>(branch, taken_atom::value),
              ::testing::ElementsAre("a:10,", "b:11,12,"));
  caf::anon_send_exit(stream, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(branch, caf::exit_reason::user_shutdown);
}

}  // namespace
}  // namespace reverser::gitworker
