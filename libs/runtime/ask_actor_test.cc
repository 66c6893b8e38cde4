#include "libs/runtime/ask_actor.h"

#include <future>
#include <thread>

#include "gtest/gtest.h"

namespace reverser::runtime {
namespace {

using ask_atom = caf::atom_constant<caf::atom("ask")>;
using release_atom = caf::atom_constant<caf::atom("release")>;

struct HoldingState {
  std::vector<caf::response_promise> held;
};

// Answers `ask` only when told to `release`: a slow actor the test controls. `on_held` runs
// once a question is held.
caf::behavior Holding(caf::stateful_actor<HoldingState>* self, std::function<void()> on_held) {
  return {
      [self, on_held](ask_atom, const std::string& /*question*/) {
        // Taking the promise takes the request's reply: nothing is sent until it delivers.
        self->state.held.push_back(self->make_response_promise());
        if (on_held) on_held();
      },
      [self](release_atom, const std::string& answer) {
        for (auto& promise : self->state.held) promise.deliver(answer);
        self->state.held.clear();
      },
  };
}

// Answers at once.
caf::behavior Echo(caf::event_based_actor*) {
  return {[](ask_atom, const std::string& question) { return "echo:" + question; }};
}

class AskActorTest : public ::testing::Test {
 protected:
  caf::actor_system_config config_;
  caf::actor_system system_{config_};
};

TEST_F(AskActorTest, ReturnsBeforeTheReplyAndRunsTheReplyHandlerOnce) {
  std::promise<void> held;
  caf::actor slow = system_.spawn(Holding, [&] { held.set_value(); });
  std::promise<std::string> replied;
  std::atomic<int> calls = 0;
  AskActor(
      system_, slow, std::chrono::seconds(30),
      [&](const std::string& answer) {
        ++calls;
        replied.set_value(answer);
      },
      [&](const caf::error&) {
        ++calls;
        replied.set_value("error");
      },
      ask_atom::value, std::string("q"));
  // The caller is free while the actor holds its answer.
  auto future = replied.get_future();
  held.get_future().wait();
  EXPECT_EQ(future.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  caf::anon_send(slow, release_atom::value, std::string("a"));
  EXPECT_EQ(future.get(), "a");
  EXPECT_EQ(calls.load(), 1);
  caf::anon_send_exit(slow, caf::exit_reason::user_shutdown);
}

TEST_F(AskActorTest, ATimeoutRunsTheErrorHandler) {
  caf::actor slow = system_.spawn(Holding, std::function<void()>());
  std::promise<bool> failed;
  AskActor(
      system_, slow, std::chrono::milliseconds(10),
      [&](const std::string&) { failed.set_value(false); },
      [&](const caf::error& err) { failed.set_value(err == caf::sec::request_timeout); },
      ask_atom::value, std::string("q"));
  EXPECT_TRUE(failed.get_future().get());
  caf::anon_send_exit(slow, caf::exit_reason::user_shutdown);
}

TEST_F(AskActorTest, AskAllGathersInOrderWithAnErrorForEachActorThatFailed) {
  caf::actor first = system_.spawn(Echo);
  caf::actor gone = system_.spawn(Echo);
  caf::actor last = system_.spawn(Echo);
  {
    caf::scoped_actor self{system_};
    self->send_exit(gone, caf::exit_reason::user_shutdown);
    self->wait_for(gone);
  }
  std::promise<std::vector<GatheredReply>> gathered;
  AskAll(
      system_, {first, gone, last}, std::chrono::seconds(30),
      [&](std::vector<GatheredReply> replies) { gathered.set_value(std::move(replies)); },
      ask_atom::value, std::string("q"));
  std::vector<GatheredReply> replies = gathered.get_future().get();
  ASSERT_EQ(replies.size(), 3u);
  EXPECT_TRUE(replies[0].ok);
  EXPECT_EQ(replies[0].value, "echo:q");
  EXPECT_FALSE(replies[1].ok);
  EXPECT_TRUE(replies[2].ok);
  EXPECT_EQ(replies[2].value, "echo:q");

  std::promise<size_t> none;
  AskAll(
      system_, {}, std::chrono::seconds(1),
      [&](std::vector<GatheredReply> replies) { none.set_value(replies.size()); }, ask_atom::value,
      std::string("q"));
  EXPECT_EQ(none.get_future().get(), 0u);
  caf::anon_send_exit(first, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(last, caf::exit_reason::user_shutdown);
}

// An ask from a thread CAF does not own (a gRPC thread) that lives on afterwards: the actor
// system still stops. CAF 0.17 keeps the asking thread's reference to the system's logger,
// which ~actor_system waits for, unless the ask drops it (caf_thread.h).
TEST(AskActorShutdownTest, AThreadThatAskedAndLivesOnDoesNotHoldUpTheShutdown) {
  auto config = std::make_unique<caf::actor_system_config>();
  auto system = std::make_unique<caf::actor_system>(*config);
  caf::actor echo = system->spawn(Echo);
  ReleaseCafThreadLogger();  // this thread's own spawn: the system is destroyed on another
  std::promise<std::string> replied;
  std::promise<void> asked, finish;
  std::shared_future<void> finished = finish.get_future().share();
  std::thread caller([&] {
    AskActor(
        *system, echo, std::chrono::seconds(30),
        [&](const std::string& answer) { replied.set_value(answer); },
        [&](const caf::error&) { replied.set_value("error"); }, ask_atom::value, std::string("q"));
    asked.set_value();
    finished.wait();  // idle, as a gRPC thread between calls
  });
  asked.get_future().wait();
  EXPECT_EQ(replied.get_future().get(), "echo:q");
  caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
  echo = nullptr;

  std::promise<void> stopped;
  std::future<void> stop = stopped.get_future();
  std::thread destroyer([&] {
    system.reset();
    stopped.set_value();
  });
  // A bound for a failing run, not a speed assertion: without the release the system waits for
  // as long as `caller` lives.
  const bool joined = stop.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
  finish.set_value();
  caller.join();
  destroyer.join();
  EXPECT_TRUE(joined) << "~actor_system waited on the asking thread";
}

}  // namespace
}  // namespace reverser::runtime
