// Splicer replicas with real parts: tools/kube-sim as the API server for the Leases, a real
// redis-server, gitworker peers over real gRPC. Each splicer is what the service assembles: a
// TargetManager owned by its actor, the Replica (or MemberView) callbacks posting to it.
//   (a) two splicers share 10 GitTargets (each its share, union all, no overlap); one leaves,
//       the other takes them all and goes on from their cursors (no resync);
//   (b) a stale owner's cursor write is refused once another replica took the target over
//       (reverser_splicer_fenced_writes_total), and the cursor is untouched;
//   (c) with two gitworker Leases, each target goes to the owner of its branch, and a NotOwner
//       reply re-routes it (from its cursor) to the replica it names.
// Every wait is for a condition, with a deadline.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <caf/all.hpp>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "libs/core/clock.h"
#include "libs/membership/lease_member.h"
#include "libs/membership/member_view.h"
#include "libs/membership/ownership.h"
#include "libs/membership/replica.h"
#include "libs/membership/test_cluster.h"
#include "libs/membership/units.h"
#include "libs/redisstore/materialization_store.h"
#include "libs/redisstore/ownership_store.h"
#include "libs/redisstore/test_redis.h"
#include "services/splicer/target_manager.h"
#include "services/splicer/target_manager_actor.h"
#include "services/splicer/test_support.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/redis_server.h"
#include "tests/fixtures/service_process.h"
#include "tests/fixtures/temp_dir.h"
#include "tools/kube-sim/kube_sim.h"

namespace reverser::splicer {
namespace {

using nlohmann::json;

constexpr char kNamespace[] = "reverser";
const absl::Duration kWait = absl::Seconds(60);

// A gitworker peer: records what reached it per target uid, acks what it is given (unless
// `ack` is off), and answers NotOwner for the targets in `refuse` (naming `owner`).
class Peer final : public reverser::v1::GitWorker::Service {
 public:
  explicit Peer(bool ack = true) : ack_(ack) {}
  grpc::Status Deliver(grpc::ServerContext* /*context*/,
                       grpc::ServerReaderWriter<reverser::v1::DeliveryFeedback,
                                                reverser::v1::DeliveryMessage>* stream) override {
    reverser::v1::DeliveryMessage message;
    while (stream->Read(&message)) {
      reverser::v1::DeliveryFeedback accepted;
      accepted.set_accepted_sequence(message.sequence());
      stream->Write(accepted);
      reverser::v1::GitTargetRef target = message.has_resync()  ? message.resync().target()
                                          : message.has_event() ? message.event().target()
                                                                : message.target_config().target();
      std::optional<reverser::v1::DeliveryFeedback> not_owner;
      {
        absl::MutexLock lock(&mu_);
        if (auto it = refuse_.find(target.uid()); it != refuse_.end()) {
          reverser::v1::DeliveryFeedback f;
          *f.mutable_not_owner()->mutable_target() = target;
          f.mutable_not_owner()->set_owner_replica(it->second.first);
          f.mutable_not_owner()->set_owner_address(it->second.second);
          not_owner = f;
        } else if (message.has_resync()) {
          resyncs_[target.uid()]++;
        } else if (message.has_event()) {
          events_[target.uid()]++;
        }
      }
      if (not_owner) {
        stream->Write(*not_owner);
        continue;
      }
      if (!ack_) continue;
      if (auto pushed = testutil::PushedAck(message)) stream->Write(*pushed);
    }
    return grpc::Status::OK;
  }
  void Refuse(const std::string& uid, const std::string& owner, const std::string& address) {
    absl::MutexLock lock(&mu_);
    refuse_[uid] = {owner, address};
  }
  void Accept(const std::string& uid) {
    absl::MutexLock lock(&mu_);
    refuse_.erase(uid);
  }
  std::map<std::string, int> Resyncs() const {
    absl::MutexLock lock(&mu_);
    return resyncs_;
  }
  std::map<std::string, int> Events() const {
    absl::MutexLock lock(&mu_);
    return events_;
  }

 private:
  const bool ack_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::pair<std::string, std::string>> refuse_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> resyncs_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> events_ ABSL_GUARDED_BY(mu_);
};

struct PeerServer {
  explicit PeerServer(bool ack = true) : peer(ack) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&peer);
    server = builder.BuildAndStart();
  }
  ~PeerServer() {
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port); }
  Peer peer;
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

// One splicer replica as the service assembles it.
struct Splicer {
  runtime::MetricsRegistry metrics;
  std::unique_ptr<DeliveryClient> delivery;
  std::unique_ptr<TargetManager> manager;
  ManagerActor actor;
  std::unique_ptr<membership::Replica> replica;
  std::unique_ptr<membership::MemberView> gitworkers;
  std::atomic<membership::Replica*> joined{nullptr};
};

std::vector<std::string> Uids(int n) {
  std::vector<std::string> uids;
  for (int i = 0; i < n; ++i) uids.push_back(absl::StrCat("t", i));
  return uids;
}

class SplicerReplicasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cluster = membership::testing::StartTestCluster(kNamespace);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    sim_ = std::move(cluster->sim);
    auto redis = testing::RedisServer::Start();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = std::move(*redis);
    auto conn = redisstore::ConnectTo(*redis_);
    ASSERT_TRUE(conn.ok());
    conn_ = std::move(*conn);
    ASSERT_TRUE(testutil::SeedTeamConfigMapCheckpoint(conn_.get()).ok());
  }
  void TearDown() override {
    for (auto& s : splicers_) StopSplicer(*s, /*leave=*/false);
    splicers_.clear();
    gitworker_leases_.clear();
    if (sim_) sim_->Stop();
  }

  std::shared_ptr<kube::RestClient> NewClient() {
    auto client = membership::testing::ClientFor(*sim_);
    EXPECT_TRUE(client.ok()) << client.status();
    clients_.push_back(*client);
    return *client;
  }

  TargetManagerOptions ManagerOptions() {
    TargetManagerOptions options;
    options.stream_defaults.redis = redisstore::RedisOptionsFor(*redis_);
    options.stream_defaults.attribution = false;
    options.stream_defaults.cursor_refresh = absl::Milliseconds(200);
    options.stream_defaults.materialization_state_poll = absl::Milliseconds(50);
    return options;
  }

  // A splicer delivering to `gitworker` (or, when empty, routed by the gitworker Leases), with
  // replica id `id` (empty: no --membership).
  // `join`: write a Lease and follow the splicers' view (off: the test posts the membership).
  Splicer& StartSplicer(const std::string& id, const std::string& gitworker, bool join = true) {
    auto s = std::make_unique<Splicer>();
    Splicer* raw = s.get();
    TargetManagerOptions options = ManagerOptions();
    if (!id.empty()) options.replica_id = id;
    if (!id.empty() && join) {
      options.held = [raw] {
        membership::Replica* r = raw->joined.load();
        return r != nullptr && r->Held();
      };
    }
    if (gitworker.empty()) {
      options.new_client = [](const std::string& address) {
        return std::make_unique<DeliveryClient>(address, 100, grpc::InsecureChannelCredentials());
      };
    } else {
      s->delivery =
          std::make_unique<DeliveryClient>(gitworker, 100, grpc::InsecureChannelCredentials());
    }
    s->manager = std::make_unique<TargetManager>(options, s->delivery.get(), &s->metrics);
    s->actor = SpawnTargetManagerActor(system_, s->manager.get(), absl::Milliseconds(200));
    if (s->delivery) {
      TargetManagerActor actor = s->actor;
      s->delivery->SetOnConnected([this, actor] {
        caf::scoped_actor self(system_);
        self->request(actor, std::chrono::seconds(30), configs_atom::value)
            .receive([](bool) {}, [](caf::error&) {});
      });
      s->delivery->Start();
    }
    ManagerActor actor = s->actor;
    if (!id.empty() && join) {
      membership::MembershipTiming timing;
      auto replica = membership::Replica::Join(
          *NewClient(), {"splicer", id, kNamespace, id + ":9000"}, timing, core::Clock::Real(),
          [actor](const membership::Membership& m) {
            caf::anon_send(actor, membership_atom::value, m);
          },
          membership::testing::TestReflectorOptions());
      EXPECT_TRUE(replica.ok()) << replica.status();
      if (replica.ok()) {
        s->replica = std::move(*replica);
        s->joined = s->replica.get();
      }
    }
    if (gitworker.empty()) {
      membership::MemberViewOptions view;
      view.service = "gitworker";
      view.namespace_ = kNamespace;
      view.reflector = membership::testing::TestReflectorOptions();
      auto gitworkers = membership::MemberView::Create(
          *NewClient(), view, core::Clock::Real(), [actor](const membership::Membership& m) {
            caf::anon_send(actor, gitworkers_atom::value, m);
          });
      EXPECT_TRUE(gitworkers.ok()) << gitworkers.status();
      if (gitworkers.ok()) {
        s->gitworkers = std::move(*gitworkers);
        s->gitworkers->Start();
      }
    }
    splicers_.push_back(std::move(s));
    return *raw;
  }

  // As the service stops: views, actor, targets, then the Lease (graceful) or not (crash).
  void StopSplicer(Splicer& s, bool leave) {
    if (!s.manager) return;
    if (s.gitworkers) s.gitworkers->Stop();
    {
      caf::scoped_actor self(system_);
      self->send_exit(s.actor, caf::exit_reason::user_shutdown);
      self->wait_for(s.actor);
    }
    s.actor = ManagerActor();
    s.manager->StopAll();
    if (s.delivery) s.delivery->Stop();
    s.manager.reset();
    s.joined = nullptr;
    if (s.replica && leave) {
      EXPECT_TRUE(s.replica->Leave().ok());
    }
    s.replica.reset();
  }

  void Apply(Splicer& s, const reverser::v1::TableUpdate& update) {
    caf::scoped_actor self(system_);
    self->request(s.actor, std::chrono::seconds(60), apply_atom::value, update)
        .receive([](AppliedReply&) {}, [](caf::error& e) { ADD_FAILURE() << caf::to_string(e); });
  }
  OwnedReply Owned(Splicer& s) {
    OwnedReply out;
    caf::scoped_actor self(system_);
    self->request(s.actor, std::chrono::seconds(30), owned_atom::value)
        .receive([&](OwnedReply& reply) { out = std::move(reply); }, [](caf::error&) {});
    return out;
  }

  std::string Cursor(const std::string& uid) {
    auto v = redis_->Cli({"GET", "reverser:splice:v1:" + uid + ":configmaps:ns:team:acked"});
    return v.ok() ? std::string(absl::StripTrailingAsciiWhitespace(*v)) : "<error>";
  }
  // The resync (coverage head 5-max) of `uid` was acked.
  bool Delivered(const std::string& uid) {
    return Cursor(uid).rfind("5-18446744073709551615@", 0) == 0;
  }
  core::StreamPosition AppendChange(uint64_t rv) {
    redisstore::MaterializationStore store(conn_.get(), redisstore::KeyPrefix::Default(),
                                           {"", "v1", "configmaps"},
                                           core::WatchScope::Namespace("team"));
    auto appended = store.Append(testutil::ConfigMapEntry("team", "a", absl::StrCat("v", rv), rv));
    EXPECT_TRUE(appended.ok() && appended->appended) << appended.status();
    return appended.ok() ? appended->position : core::StreamPosition();
  }

  // A gitworker replica's Lease (what the gitworker writes), renewed on its own thread.
  membership::LeaseMember& GitworkerLease(const std::string& id, const std::string& address) {
    membership::LeaseMemberOptions options;
    options.identity = {"gitworker", id, kNamespace, address};
    auto member = membership::LeaseMember::Create(*NewClient(), options, core::Clock::Real());
    EXPECT_TRUE(member.ok()) << member.status();
    EXPECT_TRUE((*member)->Renew().ok());
    (*member)->Start();
    gitworker_leases_.push_back(std::move(*member));
    return *gitworker_leases_.back();
  }

  caf::actor_system_config config_;
  caf::actor_system system_{config_};
  std::unique_ptr<kubesim::KubeSim> sim_;
  std::vector<std::shared_ptr<kube::RestClient>> clients_;
  std::unique_ptr<testing::RedisServer> redis_;
  std::unique_ptr<redisstore::RedisConnection> conn_;
  std::vector<std::unique_ptr<membership::LeaseMember>> gitworker_leases_;
  std::vector<std::unique_ptr<Splicer>> splicers_;
};

std::set<std::string> Intersection(const std::set<std::string>& a, const std::set<std::string>& b) {
  std::set<std::string> out;
  for (const auto& x : a) {
    if (b.count(x)) out.insert(x);
  }
  return out;
}

TEST_F(SplicerReplicasTest, TwoReplicasShareTheTargetsAndOneTakesAllWhenTheOtherLeaves) {
  PeerServer peer_a, peer_b;
  const std::vector<std::string> uids = Uids(10);
  const std::set<std::string> all(uids.begin(), uids.end());
  Splicer& a = StartSplicer("splicer-a", peer_a.address());
  Splicer& b = StartSplicer("splicer-b", peer_b.address());
  Apply(a, testutil::FullConfigMapTables(1, uids, "team"));
  Apply(b, testutil::FullConfigMapTables(1, uids, "team"));

  OwnedReply owned_a, owned_b;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        owned_a = Owned(a);
        owned_b = Owned(b);
        std::set<std::string> both = owned_a.targets;
        both.insert(owned_b.targets.begin(), owned_b.targets.end());
        return !owned_a.targets.empty() && !owned_b.targets.empty() && both == all &&
               Intersection(owned_a.targets, owned_b.targets).empty();
      },
      kWait))
      << owned_a.targets.size() << " + " << owned_b.targets.size();
  EXPECT_LE(owned_a.targets.size(), 7u);  // BoundedOwners: ceil(1.25 · 10 / 2)
  EXPECT_LE(owned_b.targets.size(), 7u);
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        for (const auto& uid : uids) {
          if (!Delivered(uid)) return false;
        }
        return true;
      },
      kWait));
  // b's targets were spliced by b (to its gitworker peer).
  for (const auto& uid : owned_b.targets) EXPECT_GE(peer_b.peer.Resyncs()[uid], 1) << uid;
  EXPECT_EQ(a.metrics.GetGauge("reverser_splicer_owned_targets", "").Value(),
            static_cast<double>(owned_a.targets.size()));

  // b leaves gracefully: a takes every target over and goes on from its cursor.
  const std::map<std::string, int> resyncs_before = peer_a.peer.Resyncs();
  StopSplicer(b, /*leave=*/true);
  ASSERT_TRUE(testing::WaitFor([&] { return Owned(a).targets == all; }, kWait));
  const core::StreamPosition next = AppendChange(6);
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto events = peer_a.peer.Events();
        for (const auto& uid : uids) {
          if (events[uid] < 1) return false;
        }
        return true;
      },
      kWait));
  const std::map<std::string, int> resyncs_after = peer_a.peer.Resyncs();
  for (const auto& uid : owned_b.targets) {
    // Resumed from the cursor b left: the live event, no new resync.
    auto before = resyncs_before.find(uid);
    EXPECT_EQ(resyncs_after.count(uid) ? resyncs_after.at(uid) : 0,
              before == resyncs_before.end() ? 0 : before->second)
        << uid;
  }
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        for (const auto& uid : uids) {
          if (Cursor(uid).rfind(next.ToString() + "@", 0) != 0) return false;
        }
        return true;
      },
      kWait))
      << Cursor("t0");
}

TEST_F(SplicerReplicasTest, AStaleOwnersCursorWriteIsRefusedAfterAnotherTookOver) {
  PeerServer peer_a;
  PeerServer peer_b(/*ack=*/false);  // b delivers but never has anything pushed
  Splicer& a = StartSplicer("splicer-a", peer_a.address());
  Apply(a, testutil::FullConfigMapTables(1, {"t0"}, "team"));
  ASSERT_TRUE(testing::WaitFor([&] { return Delivered("t0"); }, kWait)) << Cursor("t0");
  const std::string delivered = Cursor("t0");

  // b is cut off from a (a partition): its own view holds only itself, so it owns t0 and takes
  // it over; a's view never sees b and a goes on as t0's owner, now a stale one.
  Splicer& b = StartSplicer("splicer-b", peer_b.address(), /*join=*/false);
  Apply(b, testutil::FullConfigMapTables(1, {"t0"}, "team"));
  membership::Membership only_b;
  only_b.synced = true;
  only_b.generation = 1;
  only_b.members.push_back({"splicer-b", "splicer-b:9000", "splicer-splicer-b"});
  caf::anon_send(b.actor, membership_atom::value, only_b);
  ASSERT_TRUE(testing::WaitFor([&] { return Owned(b).targets.count("t0") == 1; }, kWait));
  redisstore::OwnershipStore ownership(conn_.get(), redisstore::KeyPrefix::Default());
  auto fence = ownership.Read(membership::TargetUnit("team", "mirror-t0"));
  ASSERT_TRUE(fence.ok());
  EXPECT_EQ(fence->owner, "splicer-b");
  EXPECT_EQ(fence->epoch, 2);
  EXPECT_EQ(Owned(a).targets.count("t0"), 1u);

  // A new change: a delivers it, its peer pushes it, and a's cursor write is refused.
  AppendChange(6);
  ASSERT_TRUE(testing::WaitFor(
      [&] { return a.metrics.GetCounter("reverser_splicer_fenced_writes_total", "").Value() >= 1; },
      kWait));
  EXPECT_TRUE(testing::WaitFor([&] { return Owned(a).targets.empty(); }, kWait));
  EXPECT_EQ(Cursor("t0"), delivered);  // untouched: b has nothing pushed yet
  EXPECT_EQ(Owned(b).targets.count("t0"), 1u);
}

TEST_F(SplicerReplicasTest, TargetsGoToTheirBranchOwnerAndNotOwnerReroutes) {
  PeerServer gw_a, gw_b;
  GitworkerLease("gw-a", gw_a.address());
  GitworkerLease("gw-b", gw_b.address());
  const std::vector<std::string> uids = Uids(8);
  reverser::v1::TableUpdate tables = testutil::FullConfigMapTables(1, uids, "team");
  std::vector<std::string> branches;
  for (auto& table : *tables.mutable_upserted()) {
    auto* config = table.mutable_config();
    *config->mutable_target() = table.target();
    config->mutable_destination()->set_provider_namespace("team");
    config->mutable_destination()->set_provider_name("git");
    config->mutable_destination()->set_branch("branch-" + table.target().uid());
    branches.push_back(membership::BranchUnit("team", "git", config->destination().branch()));
  }
  // Who owns each branch, computed as every router and gitworker does.
  membership::OwnershipTable expected("");
  expected.SetUnits(branches);
  membership::Membership gitworkers;
  gitworkers.synced = true;
  gitworkers.members.push_back({"gw-a", gw_a.address(), "gitworker-gw-a"});
  gitworkers.members.push_back({"gw-b", gw_b.address(), "gitworker-gw-b"});
  expected.SetMembership(gitworkers);
  std::map<std::string, std::string> want;  // uid → address
  for (size_t i = 0; i < uids.size(); ++i) {
    want[uids[i]] = *expected.AddressOf(*expected.OwnerOf(branches[i]));
  }

  Splicer& s = StartSplicer("", "");
  Apply(s, tables);
  ASSERT_TRUE(testing::WaitFor([&] { return Owned(s).routes == want; }, kWait));
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        for (const auto& uid : uids) {
          Peer& owner = want[uid] == gw_a.address() ? gw_a.peer : gw_b.peer;
          if (owner.Resyncs()[uid] < 1 || !Delivered(uid)) return false;
        }
        return true;
      },
      kWait));
  for (const auto& uid : uids) {
    Peer& other = want[uid] == gw_a.address() ? gw_b.peer : gw_a.peer;
    EXPECT_EQ(other.Resyncs()[uid], 0) << uid;
  }

  // The owner of t0's branch says it is not (its view differs): t0 goes to the one it names and
  // restarts there from its cursor.
  const std::string t0_from = want["t0"];
  PeerServer& refusing = t0_from == gw_a.address() ? gw_a : gw_b;
  PeerServer& named = t0_from == gw_a.address() ? gw_b : gw_a;
  const std::string named_id = t0_from == gw_a.address() ? "gw-b" : "gw-a";
  refusing.peer.Refuse("t0", named_id, named.address());
  AppendChange(6);
  ASSERT_TRUE(testing::WaitFor([&] { return Owned(s).routes["t0"] == named.address(); }, kWait));
  ASSERT_TRUE(testing::WaitFor([&] { return named.peer.Events()["t0"] >= 1; }, kWait));
  EXPECT_GE(s.metrics.GetCounter("reverser_splicer_reroutes_total", "", {{"reason", "not_owner"}})
                .Value(),
            1);
  // The others stay where they were.
  auto routes = Owned(s).routes;
  for (const auto& uid : uids) {
    if (uid != "t0") {
      EXPECT_EQ(routes[uid], want[uid]) << uid;
    }
  }

  // A gitworker replica leaves: its targets move to the other, from their cursors.
  refusing.peer.Accept("t0");
  const std::string leaving = gw_b.address();
  EXPECT_TRUE(gitworker_leases_[1]->Stop(/*release=*/true).ok());
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto r = Owned(s).routes;
        if (r.size() != uids.size()) return false;
        for (const auto& [uid, address] : r) {
          if (address != gw_a.address()) return false;
        }
        return true;
      },
      kWait));
  bool moved = false;
  for (const auto& [uid, address] : want) moved |= address == leaving;
  if (moved) {
    EXPECT_GE(
        s.metrics.GetCounter("reverser_splicer_reroutes_total", "", {{"reason", "membership"}})
            .Value(),
        1);
  }
}

// The binary's wiring: --membership joins (its Lease, written through --kubeconfig), splices the
// target it owns, and SIGTERM leaves (the Lease deleted) after the targets stopped.
TEST_F(SplicerReplicasTest, TheBinaryJoinsSplicesWhatItOwnsAndLeavesOnSigterm) {
  PeerServer peer;
  testing::ScopedTempDir dir{"splicer-replicas"};
  ASSERT_TRUE(sim_->WriteKubeconfig(dir.path() + "/kubeconfig").ok());
  ASSERT_TRUE(testing::WriteFile(dir.path() + "/targets.json",
                                 R"({"upserted": [{
  "target": {"namespace": "team", "name": "mirror-t0", "uid": "t0"},
  "types": [{
    "type": {"gvr": {"version": "v1", "resource": "configmaps"},
             "scope": "RESOURCE_SCOPE_NAMESPACED"},
    "namespaces": {"team": {"all": true}}}]}]})")
                  .ok());
  auto splicer = testing::ServiceProcess::Start(
      "splicer", testing::RunfilePath("services/splicer/splicer"),
      {"--redis_address=" + redis_->address(), "--gitworker_address=" + peer.address(),
       "--targets_file=" + dir.path() + "/targets.json", "--attribution=false", "--membership",
       absl::StrCat("--membership_namespace=", kNamespace), "--replica_id=s1",
       "--kubeconfig=" + dir.path() + "/kubeconfig"});
  ASSERT_TRUE(splicer.ok()) << splicer.status();
  auto admin = NewClient();
  ASSERT_TRUE(testing::WaitFor([&] { return Delivered("t0"); }, kWait)) << (*splicer)->Logs();
  EXPECT_EQ(peer.peer.Resyncs()["t0"], 1);
  auto lease = admin->Get({"coordination.k8s.io", "v1", "leases"}, kNamespace, "splicer-s1");
  ASSERT_TRUE(lease.ok()) << lease.status();
  redisstore::OwnershipStore ownership(conn_.get(), redisstore::KeyPrefix::Default());
  auto fence = ownership.Read(membership::TargetUnit("team", "mirror-t0"));
  ASSERT_TRUE(fence.ok());
  EXPECT_EQ(fence->owner, "s1");
  auto metrics = (*splicer)->HttpGet("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_NE(metrics->second.find("reverser_splicer_owned_targets 1"), std::string::npos)
      << metrics->second;

  ASSERT_TRUE((*splicer)->process().Terminate().ok());
  auto gone = admin->Get({"coordination.k8s.io", "v1", "leases"}, kNamespace, "splicer-s1");
  EXPECT_FALSE(gone.ok()) << "the Lease is still there after a graceful stop";
}

}  // namespace
}  // namespace reverser::splicer
