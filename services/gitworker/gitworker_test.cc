// The gitworker binary as a real process: a splicer-like client on GitWorker.Deliver, a real bare
// remote, the git CLI as judge.

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "proto/reverser/v1/gitworker.grpc.pb.h"
#include "services/gitworker/test_support.h"
#include "tests/fixtures/git_repos.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/service_process.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::gitworker {
namespace {

using ::reverser::testing::Git;
using namespace ::reverser::gitworker::testsupport;  // NOLINT
using ::testing::Contains;

// A git:// remote that accepts connections and never answers: a fetch from it blocks until
// Release() closes every connection (and the port), so the branch writing to it stays busy.
class HangingRemote {
 public:
  HangingRemote() {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (listener_ < 0 || bind(listener_, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
        listen(listener_, 16) != 0 ||
        getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      ADD_FAILURE() << "no listening socket";
      return;
    }
    port_ = ntohs(address.sin_port);
    acceptor_ = std::thread([this] {
      for (;;) {
        int connection = accept(listener_, nullptr, nullptr);
        if (connection < 0) return;  // Release() shut the listener down
        std::lock_guard lock(mu_);
        connections_.push_back(connection);
      }
    });
  }
  ~HangingRemote() { Release(); }

  std::string url() const { return absl::StrCat("git://127.0.0.1:", port_, "/remote.git"); }
  size_t connections() {
    std::lock_guard lock(mu_);
    return connections_.size();
  }
  void Release() {
    if (listener_ < 0) return;
    shutdown(listener_, SHUT_RDWR);
    if (acceptor_.joinable()) acceptor_.join();
    close(listener_);
    listener_ = -1;
    std::lock_guard lock(mu_);
    for (int connection : connections_) close(connection);
    connections_.clear();
  }

 private:
  int listener_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<int> connections_;
};

class GitWorkerServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto remote = testing::CreateBareRemote(dir_.path());
    ASSERT_TRUE(remote.ok()) << remote.status();
    remote_ = *remote;
  }

  void StartService(const std::string& cooldown = "0s") {
    auto service = testing::ServiceProcess::Start(
        "gitworker", testing::RunfilePath("services/gitworker/gitworker"),
        {"--work_dir=" + dir_.path() + "/work", "--push_cooldown=" + cooldown});
    ASSERT_TRUE(service.ok()) << service.status();
    service_ = std::move(*service);
    ASSERT_EQ(service_->WaitReady(), absl::OkStatus());
  }

  std::vector<std::string> Subjects() {
    auto log = Git(remote_, {"log", "--format=%s", "main"});
    EXPECT_TRUE(log.ok()) << log.status();
    return absl::StrSplit(log.value_or(""), '\n', absl::SkipEmpty());
  }

  testing::ScopedTempDir dir_{"gitworker"};
  std::string remote_;
  std::unique_ptr<testing::ServiceProcess> service_;
};

TEST_F(GitWorkerServiceTest, ResyncAndEventsArePushedThenAckedAndRedeliveryIsIdempotent) {
  StartService();
  auto config = Config(remote_, 0);
  {
    DeliveryClient client(service_->grpc_target());
    client.SendConfig(config);
    client.SendResync(Snapshot(
        config, ConfigMaps(),
        {Object(ConfigMaps(), "default", "a", "1"), Object(ConfigMaps(), "default", "b", "2")},
        100));
    client.SendEvent(Event(config, ConfigMaps(), reverser::v1::OPERATION_UPDATE, "default", "a",
                           "changed", 101, "alice"));
    client.SendEvent(Event(config, ConfigMaps(), reverser::v1::OPERATION_DELETE, "default", "b", "",
                           102, "alice"));
    ASSERT_TRUE(
        testing::WaitFor([&] { return client.AckedRv(ConfigMaps()) == 102; }, absl::Seconds(30)))
        << service_->Logs();
    EXPECT_THAT(client.Accepted(), ::testing::ElementsAre(1, 2, 3, 4));
    // Every ack names a commit the remote has: acks come only after the push.
    for (const auto& f : client.Feedback()) {
      if (!f.has_ack()) continue;
      ASSERT_FALSE(f.ack().commit_sha().empty());
      EXPECT_TRUE(Git(remote_, {"merge-base", "--is-ancestor", f.ack().commit_sha(), "main"}).ok());
    }
    // Acks move forward only.
    uint64_t last = 0;
    for (const auto& f : client.Feedback()) {
      if (!f.has_ack()) continue;
      EXPECT_GT(f.ack().position().rv(), last);
      last = f.ack().position().rv();
    }
  }
  auto subjects = Subjects();
  ASSERT_EQ(subjects.size(), 4u);
  EXPECT_EQ(subjects[0], "[DELETE] v1/configmaps/b");
  EXPECT_EQ(subjects[1], "[UPDATE] v1/configmaps/a");
  EXPECT_EQ(subjects[2], "reconciled 2 configmaps (last resourceVersion: 100)");
  auto files = testing::ListFiles(remote_, "main");
  ASSERT_TRUE(files.ok());
  EXPECT_THAT(*files, Contains("clusters/a/default/configmaps/a.yaml"));
  EXPECT_THAT(*files, ::testing::Not(Contains("clusters/a/default/configmaps/b.yaml")));
  auto a = testing::ShowFile(remote_, "main", "clusters/a/default/configmaps/a.yaml");
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(absl::StrContains(*a, "key: changed")) << *a;

  // A new stream re-sends the same tail (a splicer restart): acked again, nothing committed.
  {
    DeliveryClient client(service_->grpc_target());
    client.SendConfig(config);
    client.SendEvent(Event(config, ConfigMaps(), reverser::v1::OPERATION_UPDATE, "default", "a",
                           "changed", 101, "alice"));
    client.SendEvent(Event(config, ConfigMaps(), reverser::v1::OPERATION_DELETE, "default", "b", "",
                           102, "alice"));
    ASSERT_TRUE(
        testing::WaitFor([&] { return client.AckedRv(ConfigMaps()) == 102; }, absl::Seconds(30)));
  }
  EXPECT_EQ(Subjects().size(), 4u);
  EXPECT_TRUE(Git(remote_, {"fsck", "--strict"}).ok());

  auto metrics = service_->HttpGet("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_TRUE(absl::StrContains(metrics->second, "gitopsreverser_commits_total{"));
  EXPECT_TRUE(absl::StrContains(metrics->second, "reverser_gitworker_event_to_push_seconds"));
  EXPECT_TRUE(absl::StrContains(metrics->second, "gitopsreverser_branch_worker_queue_depth"));

  auto channel = grpc::CreateChannel(service_->grpc_target(), grpc::InsecureChannelCredentials());
  auto admin = reverser::v1::GitWorkerAdmin::NewStub(channel);
  grpc::ClientContext context;
  reverser::v1::ListBranchesResponse branches;
  ASSERT_TRUE(admin->ListBranches(&context, {}, &branches).ok());
  ASSERT_EQ(branches.branches_size(), 1);
  EXPECT_EQ(branches.branches(0).destination().branch(), "main");
  auto head = Git(remote_, {"rev-parse", "main"});
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(branches.branches(0).head_sha() + "\n", *head);
  EXPECT_EQ(branches.branches(0).pending_writes(), 0u);
}

// A splicer that starts its session over on the same stream re-sends the resync at the same
// head; it waits for that resync's ack, so the ack comes again although the position is acked.
TEST_F(GitWorkerServiceTest, AResyncResentOnTheSameStreamIsAckedAgain) {
  StartService();
  auto config = Config(remote_, 0);
  DeliveryClient client(service_->grpc_target());
  client.SendConfig(config);
  auto snapshot = Snapshot(config, ConfigMaps(), {Object(ConfigMaps(), "default", "a", "1")}, 100);
  auto acks_at_100 = [&] {
    int n = 0;
    for (const auto& f : client.Feedback()) n += f.has_ack() && f.ack().position().rv() == 100;
    return n;
  };
  client.SendResync(snapshot);
  ASSERT_TRUE(testing::WaitFor([&] { return acks_at_100() == 1; }, absl::Seconds(30)))
      << service_->Logs();
  const size_t commits = Subjects().size();
  client.SendResync(snapshot);
  ASSERT_TRUE(testing::WaitFor([&] { return acks_at_100() == 2; }, absl::Seconds(30)))
      << service_->Logs();
  EXPECT_EQ(Subjects().size(), commits) << "the second resync changes nothing";
}

// Several GitTargets may share a branch: ListBranches names all their paths ("/" for the root).
TEST_F(GitWorkerServiceTest, ListBranchesNamesThePathsOfTheTargetsOnEachBranch) {
  StartService();
  DeliveryClient client(service_->grpc_target());
  auto a = Config(remote_, 0, "clusters/b", "tgt-b");
  auto b = Config(remote_, 0, "clusters/a", "tgt-a");
  auto root = Config(remote_, 0, "", "tgt-root");
  auto acked_targets = [&] {
    std::set<std::string> names;
    for (const auto& f : client.Feedback()) {
      if (f.has_ack()) names.insert(f.ack().target().name());
    }
    return names.size();
  };
  // The root written first: it overlaps the others (which the catalog never delivers), whose
  // bootstrap .gittargetignore files its acceptance gate would refuse as foreign files.
  for (const auto* config : {&root, &a, &b}) {
    client.SendConfig(*config);
    client.SendResync(Snapshot(*config, ConfigMaps(),
                               {Object(ConfigMaps(), "default", config->target().name(), "1")},
                               100));
    if (config == &root) {
      ASSERT_TRUE(testing::WaitFor([&] { return acked_targets() == 1; }, absl::Seconds(30)))
          << service_->Logs();
    }
  }
  ASSERT_TRUE(testing::WaitFor([&] { return acked_targets() == 3; }, absl::Seconds(30)))
      << service_->Logs();

  auto channel = grpc::CreateChannel(service_->grpc_target(), grpc::InsecureChannelCredentials());
  auto admin = reverser::v1::GitWorkerAdmin::NewStub(channel);
  grpc::ClientContext context;
  reverser::v1::ListBranchesResponse branches;
  ASSERT_TRUE(admin->ListBranches(&context, {}, &branches).ok());
  ASSERT_EQ(branches.branches_size(), 1);
  EXPECT_EQ(branches.branches(0).destination().branch(), "main");
  EXPECT_EQ(branches.branches(0).destination().provider_name(), "repo");
  EXPECT_EQ(branches.branches(0).destination().path(), "/, clusters/a, clusters/b");
}

TEST_F(GitWorkerServiceTest, ClonesStayInThePrivateWorkDirWhateverTheProviderIsCalled) {
  StartService();
  struct stat work;
  ASSERT_EQ(stat((dir_.path() + "/work").c_str(), &work), 0);
  EXPECT_EQ(work.st_mode & 0777, 0700u);
  auto config = Config(remote_, 0);
  config.mutable_destination()->set_provider_namespace("../../escaped");
  config.mutable_destination()->set_provider_name("../escaped");
  DeliveryClient client(service_->grpc_target());
  client.SendConfig(config);
  client.SendResync(
      Snapshot(config, ConfigMaps(), {Object(ConfigMaps(), "default", "a", "1")}, 100));
  ASSERT_TRUE(
      testing::WaitFor([&] { return client.AckedRv(ConfigMaps()) == 100; }, absl::Seconds(30)))
      << service_->Logs();
  // One folder, a digest, under work/repos, beside the work dir's lock; nothing beside the
  // work dir.
  std::vector<std::string> beside, clones;
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
    beside.push_back(entry.path().filename());
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path() + "/work")) {
    beside.push_back("work/" + entry.path().filename().string());
  }
  for (const auto& entry :
       std::filesystem::directory_iterator(std::filesystem::path(dir_.path()) / "work" / "repos")) {
    clones.push_back(entry.path().filename());
  }
  EXPECT_THAT(beside,
              ::testing::UnorderedElementsAre(std::filesystem::path(remote_).filename().string(),
                                              "work", "work/repos", "work/.lock"));
  ASSERT_EQ(clones.size(), 1u);
  EXPECT_EQ(clones[0].size(), 32u);
}

TEST(GitWorkerWorkDirTest, AWorkDirOthersMayWriteIsRefusedAtStart) {
  testing::ScopedTempDir dir("open-work");
  const std::string open = dir.path() + "/open";
  ASSERT_EQ(mkdir(open.c_str(), 0700), 0);
  ASSERT_EQ(chmod(open.c_str(), 0777), 0);
  auto run = testing::RunCommand({testing::RunfilePath("services/gitworker/gitworker"),
                                  "--work_dir=" + open, "--target_config_source=delivery",
                                  "--grpc_port=0", "--http_port=0"});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_NE(run->exit_code, 0);
  EXPECT_TRUE(absl::StrContains(run->err, "is writable by other users (mode 0777)")) << run->err;
}

TEST_F(GitWorkerServiceTest, SnapshotLargerThanTheDefaultMessageLimitIsApplied) {
  StartService();
  auto config = Config(remote_, 0);
  std::vector<reverser::v1::ObjectBody> objects;
  const std::string filler(1500, 'x');
  for (int i = 0; i < 4000; ++i) {
    objects.push_back(Object(ConfigMaps(), "default", absl::StrCat("cm", i), filler));
  }
  auto snapshot = Snapshot(config, ConfigMaps(), objects, 77);
  ASSERT_GT(snapshot.ByteSizeLong(), 4u << 20);  // above gRPC's 4 MiB default
  DeliveryClient client(service_->grpc_target());
  client.SendConfig(config);
  client.SendResync(snapshot);
  ASSERT_TRUE(
      testing::WaitFor([&] { return client.AckedRv(ConfigMaps()) == 77; }, absl::Seconds(120)))
      << service_->Logs();
  auto files = testing::ListFiles(remote_, "main");
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(files->size(), 4000u + 3);  // + seed README.md and the two bootstrap files
  EXPECT_EQ(Subjects().front(), "reconciled 4000 configmaps (last resourceVersion: 77)");
}

TEST_F(GitWorkerServiceTest, UnusableMessagesAreRejectedAndAccepted) {
  StartService();
  DeliveryClient client(service_->grpc_target());
  auto config = Config(remote_, 0);
  client.SendEvent(Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE, "default", "a", "1",
                         5));  // no target_config yet
  auto bad = config;
  bad.set_event_template("{{.NoSuchField}");
  client.SendConfig(bad);
  client.Send({});  // no payload
  ASSERT_TRUE(testing::WaitFor([&] { return client.Accepted().size() == 3; }, absl::Seconds(10)));
  auto refusals = client.Refusals();
  ASSERT_EQ(refusals.size(), 3u);
  EXPECT_EQ(refusals[0].reason(), reverser::v1::REFUSAL_REASON_NO_TARGET_CONFIG);
  EXPECT_EQ(refusals[0].target().name(), config.target().name());
  EXPECT_TRUE(absl::StrContains(refusals[0].message(), "no target_config"))
      << refusals[0].message();
  EXPECT_EQ(refusals[1].reason(), reverser::v1::REFUSAL_REASON_INVALID_TARGET_CONFIG);
  EXPECT_EQ(refusals[1].target().name(), config.target().name());
  EXPECT_TRUE(absl::StrContains(refusals[1].message(), "template")) << refusals[1].message();
  EXPECT_EQ(refusals[2].reason(), reverser::v1::REFUSAL_REASON_MALFORMED_MESSAGE);
  EXPECT_TRUE(absl::StrContains(refusals[2].message(), "without payload")) << refusals[2].message();
  EXPECT_EQ(Subjects().size(), 1u);
}

TEST_F(GitWorkerServiceTest, SilenceTimerClosesTheWindowAndCooldownTimerPushes) {
  StartService("1s");
  DeliveryClient client(service_->grpc_target());
  auto config = Config(remote_, 300);  // 300 ms of silence closes a window
  client.SendConfig(config);
  client.SendEvent(Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE, "default", "a", "1",
                         10, "alice"));
  client.SendEvent(Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE, "default", "b", "1",
                         11, "alice"));
  ASSERT_TRUE(
      testing::WaitFor([&] { return client.AckedRv(ConfigMaps()) == 11; }, absl::Seconds(30)))
      << service_->Logs();
  EXPECT_EQ(Subjects().front(), "alice on tgt: 2 resource(s)");
  // The next window lands within the push cooldown after the first push: its push waits for
  // the cooldown timer, then it is acked.
  client.SendEvent(
      Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE, "default", "c", "1", 12, "bob"));
  ASSERT_TRUE(
      testing::WaitFor([&] { return client.AckedRv(ConfigMaps()) == 12; }, absl::Seconds(30)))
      << service_->Logs();
  auto subjects = Subjects();
  ASSERT_EQ(subjects.size(), 3u);
  EXPECT_EQ(subjects[0], "[CREATE] v1/configmaps/c");
}

TEST_F(GitWorkerServiceTest, AttachCommitFinalizesTheAuthorsWindowWithItsMessage) {
  StartService();
  auto channel = grpc::CreateChannel(service_->grpc_target(), grpc::InsecureChannelCredentials());
  auto stub = reverser::v1::GitWorker::NewStub(channel);
  auto config = Config(remote_, 3'600'000);
  reverser::v1::AttachCommitRequest request;
  request.set_namespace_("team");
  request.set_name("release-1");
  request.set_uid("cr-uid-1");
  request.mutable_author()->set_username("alice");
  *request.mutable_target() = config.target();
  request.set_message("Release 1: bump settings");
  request.set_close_delay_seconds(1);
  auto attach = [&] {
    grpc::ClientContext context;
    reverser::v1::FinalizeResult result;
    EXPECT_TRUE(stub->AttachCommit(&context, request, &result).ok());
    return result;
  };
  // Before any window of alice exists: not attached yet.
  auto early = attach();
  EXPECT_FALSE(early.resolved());
  EXPECT_EQ(early.outcome(), reverser::v1::FINALIZE_OUTCOME_NO_OPEN_WINDOW);

  DeliveryClient client(service_->grpc_target());
  client.SendConfig(config);
  client.SendEvent(Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE, "default", "a", "1",
                         10, "alice"));
  ASSERT_TRUE(testing::WaitFor([&] { return client.Accepted().size() == 2; }, absl::Seconds(10)));
  reverser::v1::FinalizeResult result;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        result = attach();
        return result.resolved();
      },
      absl::Seconds(30)))
      << service_->Logs();
  EXPECT_EQ(result.outcome(), reverser::v1::FINALIZE_OUTCOME_COMMITTED);
  EXPECT_EQ(result.branch(), "main");
  auto head = Git(remote_, {"rev-parse", "main"});
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(result.sha() + "\n", *head);
  EXPECT_EQ(Subjects().front(), "Release 1: bump settings");
  EXPECT_TRUE(attach().resolved()) << "idempotent once resolved";
}

// A branch actor stuck in Git I/O holds no gRPC thread: while an AttachCommit waits for it,
// other calls (another target's AttachCommit, the same CommitRequest polled again, admin
// Status) are answered.
TEST_F(GitWorkerServiceTest, CallsAreAnsweredWhileABranchActorIsBusy) {
  HangingRemote hanging;
  StartService();
  auto busy = Config(hanging.url(), 0, "clusters/a", "busy");
  DeliveryClient client(service_->grpc_target());
  client.SendConfig(busy);
  client.SendEvent(
      Event(busy, ConfigMaps(), reverser::v1::OPERATION_CREATE, "default", "a", "1", 10, "alice"));
  // Window 0 commits at once, and the first commit fetches: the branch actor is in that fetch.
  ASSERT_TRUE(testing::WaitFor([&] { return hanging.connections() > 0; }, absl::Seconds(30)))
      << service_->Logs();

  auto channel = grpc::CreateChannel(service_->grpc_target(), grpc::InsecureChannelCredentials());
  auto stub = reverser::v1::GitWorker::NewStub(channel);
  auto admin = reverser::v1::GitWorkerAdmin::NewStub(channel);
  auto request_for = [](const reverser::v1::GitTargetConfig& config, const std::string& uid) {
    reverser::v1::AttachCommitRequest request;
    request.set_namespace_("team");
    request.set_name(uid);
    request.set_uid(uid);
    request.mutable_author()->set_username("alice");
    *request.mutable_target() = config.target();
    request.set_message("Release");
    return request;
  };

  // Sent first: waits for the busy branch actor.
  const auto waiting_request = request_for(busy, "cr-busy");
  grpc::ClientContext waiting_context;
  reverser::v1::FinalizeResult waiting_result;
  std::promise<grpc::Status> waiting_done;
  std::atomic<bool> waiting_answered{false};
  stub->async()->AttachCommit(&waiting_context, &waiting_request, &waiting_result,
                              [&](grpc::Status status) {
                                waiting_answered = true;
                                waiting_done.set_value(std::move(status));
                              });

  {
    grpc::ClientContext context;
    reverser::v1::FinalizeResult result;
    auto other = Config(remote_, 0, "clusters/b", "other");
    ASSERT_TRUE(stub->AttachCommit(&context, request_for(other, "cr-other"), &result).ok());
    EXPECT_EQ(result.outcome(), reverser::v1::FINALIZE_OUTCOME_NO_OPEN_WINDOW);
  }
  {
    grpc::ClientContext context;
    reverser::v1::ServiceStatus status;
    ASSERT_TRUE(admin->Status(&context, {}, &status).ok());
  }
  EXPECT_FALSE(waiting_answered) << "answered before the branch actor was free";

  // Freed, the branch actor answers the waiting call: its window 0 closed already, and with no
  // close delay there is no window in grace.
  hanging.Release();
  auto answered = waiting_done.get_future();
  ASSERT_EQ(answered.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  grpc::Status status = answered.get();
  if (status.ok()) {
    EXPECT_TRUE(waiting_result.resolved());
    EXPECT_EQ(waiting_result.outcome(), reverser::v1::FINALIZE_OUTCOME_NO_OPEN_WINDOW);
  } else {
    // The branch was busy longer than the gitworker asks it (slow machine): still answered.
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  }
}

TEST_F(GitWorkerServiceTest, OpenWindowIsCommittedAndPushedOnShutdown) {
  StartService();
  DeliveryClient client(service_->grpc_target());
  auto config = Config(remote_, 3'600'000);  // an hour: only shutdown closes this window
  client.SendConfig(config);
  client.SendEvent(Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE, "default", "a", "1",
                         10, "alice"));
  client.SendEvent(Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE, "default", "b", "1",
                         11, "alice"));
  ASSERT_TRUE(testing::WaitFor([&] { return client.Accepted().size() == 3; }, absl::Seconds(10)));
  // The admin view shows the open window; nothing is pushed or acked yet.
  auto channel = grpc::CreateChannel(service_->grpc_target(), grpc::InsecureChannelCredentials());
  auto admin = reverser::v1::GitWorkerAdmin::NewStub(channel);
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        grpc::ClientContext context;
        reverser::v1::ListBranchesResponse branches;
        return admin->ListBranches(&context, {}, &branches).ok() && branches.branches_size() == 1 &&
               branches.branches(0).window_open();
      },
      absl::Seconds(10)));
  EXPECT_EQ(client.AckedRv(ConfigMaps()), 0u);
  auto status = service_->process().Terminate(absl::Seconds(10));
  ASSERT_TRUE(status.ok());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << service_->Logs();
  auto subjects = Subjects();
  ASSERT_EQ(subjects.size(), 2u) << service_->Logs();
  EXPECT_EQ(subjects[0], "alice on tgt: 2 resource(s)");
}

}  // namespace
}  // namespace reverser::gitworker
