// Integration tests against the project's test API server (tools/kube-sim), in-process over
// real HTTP: discovery, CRUD, WatchList, 410 → relist, 422 → LIST+WATCH (legacy profile),
// 429 → retry after the server's delay, dropped watch → resume without loss or duplicates.

#include "tools/kube-sim/kube_sim.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "libs/kube/recording_sleeper.h"

#include <atomic>
#include <condition_variable>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "libs/kube/api_error.h"
#include "libs/kube/config.h"
#include "libs/kube/discovery.h"
#include "libs/kube/httplib_transport.h"
#include "libs/kube/reflector.h"
#include "libs/kube/rest_client.h"

namespace reverser::kube {
namespace {

using nlohmann::json;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using testing::RecordingSleeper;

const core::GroupVersionResource kConfigMaps{"", "v1", "configmaps"};

// "TYPE name [initial]" / "SyncStarted list|watchlist reason" / "InitialEventsEnd ...".
class RecordingHandler : public WatchHandler {
 public:
  void OnEvent(const ReflectorEvent& e) override {
    std::string line(ReflectorEventTypeName(e.type));
    if (e.type == ReflectorEventType::kBookmark) return;  // timing-dependent; not asserted
    if (e.object.is_object()) absl::StrAppend(&line, " ", e.object["metadata"].value("name", ""));
    if (!e.object_json.empty()) {
      // Raw-object mode: the text is the object, and the event's RV is the object's.
      json object = json::parse(e.object_json);
      EXPECT_TRUE(e.object.is_null());
      EXPECT_EQ(e.resource_version, ResourceVersionOf(object));
      absl::StrAppend(&line, " ", object["metadata"].value("name", ""));
    }
    if (e.initial) absl::StrAppend(&line, " initial");
    if (e.type == ReflectorEventType::kSyncStarted ||
        e.type == ReflectorEventType::kInitialEventsEnd) {
      absl::StrAppend(&line, e.method == SyncMethod::kList ? " list" : " watchlist",
                      e.reason == SyncReason::kExpired ? " expired" : "");
    }
    std::lock_guard lock(mu_);
    lines_.push_back(line);
    cv_.notify_all();
  }
  std::vector<std::string> lines() {
    std::lock_guard lock(mu_);
    return lines_;
  }
  void Clear() {
    std::lock_guard lock(mu_);
    lines_.clear();
  }
  // Waits until a line equal to `line` has been recorded `times` times.
  bool WaitFor(const std::string& line, int times = 1) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(30),
                        [&] { return std::count(lines_.begin(), lines_.end(), line) >= times; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
};

// The resourceVersion query value of a logged request ("" if none).
std::string ExtractRv(const std::string& request) {
  size_t at = request.find("resourceVersion=");
  if (at == std::string::npos) return "";
  at += strlen("resourceVersion=");
  return request.substr(at, request.find('&', at) - at);
}

json ConfigMap(const std::string& name, const std::string& value = "v") {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}, {"namespace", "default"}}},
          {"data", {{"k", value}}}};
}

class KubeSimTest : public ::testing::Test {
 protected:
  void StartSim(kubesim::Profile profile = kubesim::Profile::kModern) {
    kubesim::KubeSimOptions options;
    options.profile = profile;
    auto sim = kubesim::KubeSim::Start(options);
    ASSERT_TRUE(sim.ok()) << sim.status();
    sim_ = std::move(*sim);
    // Through a real kubeconfig, as the services do.
    auto config = ParseKubeconfig(sim_->Kubeconfig(), "");
    ASSERT_TRUE(config.ok()) << config.status();
    auto client = NewHttplibRestClient(*config, "", RestClientOptions{.sleeper = &sleeper_});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *client;
  }
  void TearDown() override {
    StopReflector();
    reflector_.reset();
    client_.reset();  // closes pooled keep-alive connections, so the server stops at once
    if (sim_) sim_->Stop();
  }
  void StartReflector(ReflectorOptions options = {}) {
    options.gvr = kConfigMaps;
    options.namespace_ = "default";
    options.sleeper = &sleeper_;
    options.page_size = 2;
    options.min_watch_timeout_seconds = options.max_watch_timeout_seconds = 300;
    reflector_ = std::make_unique<Reflector>(*client_, options, handler_);
    thread_ = std::thread([this] { EXPECT_TRUE(reflector_->Run().ok()); });
  }
  void StopReflector() {
    if (reflector_) reflector_->Stop();
    if (thread_.joinable()) thread_.join();
  }
  std::string Create(const std::string& name) {
    auto created = client_->Create(kConfigMaps, "default", ConfigMap(name));
    EXPECT_TRUE(created.ok()) << created.status();
    return created.ok() ? ResourceVersionOf(*created) : "";
  }
  std::vector<std::string> WatchRequests() {
    std::vector<std::string> out;
    for (const std::string& line : sim_->RequestLog()) {
      if (absl::StrContains(line, "/configmaps") && absl::StrContains(line, "watch=")) {
        out.push_back(line);
      }
    }
    return out;
  }

  std::unique_ptr<kubesim::KubeSim> sim_;
  RecordingSleeper sleeper_;
  std::shared_ptr<RestClient> client_;
  RecordingHandler handler_;
  std::unique_ptr<Reflector> reflector_;
  std::thread thread_;
};

TEST_F(KubeSimTest, DiscoveryAggregatedAndLegacy) {
  StartSim();
  auto modern = Discover(*client_);
  ASSERT_TRUE(modern.ok()) << modern.status();
  EXPECT_TRUE(modern->aggregated);
  EXPECT_TRUE(modern->failures.empty());
  const ApiResource* cms = modern->FindPreferred("", "configmaps");
  ASSERT_NE(cms, nullptr);
  EXPECT_TRUE(cms->IsWatchable());
  EXPECT_EQ(cms->gvk, (core::GroupVersionKind{"", "v1", "ConfigMap"}));
  const ApiResource* deployments = modern->FindPreferred("apps", "deployments");
  ASSERT_NE(deployments, nullptr);
  EXPECT_EQ(deployments->scope, core::Scope::kNamespaced);
  const ApiResource* namespaces = modern->FindPreferred("", "namespaces");
  ASSERT_NE(namespaces, nullptr);
  EXPECT_EQ(namespaces->scope, core::Scope::kCluster);

  // The legacy documents give the same resources.
  DiscoveryResult legacy;
  auto api_v1 = client_->GetRaw("/api/v1", {{"Accept", "application/json"}});
  ASSERT_TRUE(api_v1.ok()) << api_v1.status();
  ASSERT_TRUE(ParseApiResourceList(json::parse(api_v1->body), "v1", true, legacy).ok());
  const ApiResource* legacy_cms = legacy.Find(kConfigMaps);
  ASSERT_NE(legacy_cms, nullptr);
  EXPECT_EQ(legacy_cms->verbs, cms->verbs);
}

TEST_F(KubeSimTest, CrudListPagingAndErrors) {
  StartSim();
  auto created = client_->Create(kConfigMaps, "default", ConfigMap("a"), {.field_manager = "t"});
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_FALSE(ResourceVersionOf(*created).empty());
  EXPECT_TRUE(IsApiAlreadyExists(client_->Create(kConfigMaps, "default", ConfigMap("a")).status()));

  auto got = client_->Get(kConfigMaps, "default", "a");
  ASSERT_TRUE(got.ok()) << got.status();
  json update = *got;
  update["data"]["k"] = "updated";
  auto updated = client_->Update(kConfigMaps, "default", update);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ((*updated)["data"]["k"], "updated");
  // The stale resourceVersion now conflicts.
  absl::Status stale = client_->Update(kConfigMaps, "default", update).status();
  EXPECT_TRUE(IsApiConflict(stale)) << stale;

  auto merged =
      client_->Patch(kConfigMaps, "default", "a", PatchType::kMerge, {{"data", {{"m", "1"}}}});
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ((*merged)["data"]["m"], "1");
  auto json_patched = client_->Patch(kConfigMaps, "default", "a", PatchType::kJson,
                                     json::array({{{"op", "remove"}, {"path", "/data/m"}}}));
  ASSERT_TRUE(json_patched.ok()) << json_patched.status();
  EXPECT_FALSE((*json_patched)["data"].contains("m"));
  auto applied = client_->Patch(kConfigMaps, "default", "applied", PatchType::kApply,
                                ConfigMap("applied", "ssa"), {.field_manager = "reverser"});
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ((*applied)["data"]["k"], "ssa");

  for (const char* name : {"b", "c", "d"}) Create(name);
  auto page = client_->List(kConfigMaps, "default", {.limit = 2});
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->items.size(), 2u);
  EXPECT_FALSE(page->continue_token.empty());
  auto all = client_->ListAll(kConfigMaps, "default", {.limit = 2});
  ASSERT_TRUE(all.ok()) << all.status();
  std::vector<std::string> names;
  for (const json& item : all->items) names.push_back(item["metadata"]["name"]);
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("a", "applied", "b", "c", "d"));

  auto deleted = client_->Delete(kConfigMaps, "default", "a", {.propagation_policy = "Background"});
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  absl::Status gone = client_->Get(kConfigMaps, "default", "a").status();
  EXPECT_TRUE(IsApiNotFound(gone)) << gone;
  EXPECT_THAT(std::string(gone.message()), HasSubstr("configmaps \"a\" not found"));
}

TEST_F(KubeSimTest, WatchListDeliversTheInitialSetThenLiveEvents) {
  StartSim();
  Create("a");
  Create("b");
  StartReflector();
  ASSERT_TRUE(handler_.WaitFor("InitialEventsEnd watchlist"));
  Create("c");
  ASSERT_TRUE(handler_.WaitFor("ADDED c"));
  std::vector<std::string> lines = handler_.lines();
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0], "SyncStarted watchlist");
  EXPECT_THAT(std::vector<std::string>(lines.begin() + 1, lines.begin() + 3),
              ::testing::UnorderedElementsAre("ADDED a initial", "ADDED b initial"));
  EXPECT_EQ(lines[3], "InitialEventsEnd watchlist");
  EXPECT_TRUE(reflector_->watch_list_supported());
  std::vector<std::string> watches = WatchRequests();
  ASSERT_FALSE(watches.empty());
  EXPECT_THAT(watches[0], HasSubstr("sendInitialEvents=true"));
  EXPECT_THAT(watches[0], HasSubstr("resourceVersionMatch=NotOlderThan"));
  EXPECT_THAT(watches[0], HasSubstr("allowWatchBookmarks=true"));
}

TEST_F(KubeSimTest, ExpiredCursorLeadsToARelist) {
  StartSim();
  std::string old_rv = Create("a");
  Create("b");
  sim_->Compact();  // old_rv is now too old
  StartReflector({.resume_resource_version = old_rv});
  ASSERT_TRUE(handler_.WaitFor("InitialEventsEnd watchlist expired"));
  std::vector<std::string> lines = handler_.lines();
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], "SyncStarted watchlist expired");
  EXPECT_EQ(reflector_->stats().expired, 1);
  std::vector<std::string> watches = WatchRequests();
  ASSERT_GE(watches.size(), 2u);
  EXPECT_THAT(watches[0], HasSubstr("resourceVersion=" + old_rv));
  // The relist asks for the latest state: no resourceVersion parameter at all.
  EXPECT_THAT(watches[1], HasSubstr("sendInitialEvents=true"));
  EXPECT_THAT(watches[1], ::testing::Not(HasSubstr("resourceVersion=")));
}

TEST_F(KubeSimTest, LegacyServerRejectsWatchListAndGetsListPlusWatch) {
  StartSim(kubesim::Profile::kLegacy);
  for (const char* name : {"a", "b", "c"}) Create(name);
  StartReflector();
  ASSERT_TRUE(handler_.WaitFor("InitialEventsEnd list"));
  Create("d");
  ASSERT_TRUE(handler_.WaitFor("ADDED d"));
  EXPECT_FALSE(reflector_->watch_list_supported());
  std::vector<std::string> lines = handler_.lines();
  EXPECT_EQ(lines.front(), "SyncStarted list");
  EXPECT_EQ(std::count(lines.begin(), lines.end(), "ADDED a initial"), 1);
  EXPECT_EQ(reflector_->stats().list_syncs, 1);
  // Paged with limit=2: two LIST requests.
  int lists = 0;
  for (const std::string& line : sim_->RequestLog()) {
    if (absl::StrContains(line, "GET /api/v1/namespaces/default/configmaps?") &&
        absl::StrContains(line, "limit=2")) {
      ++lists;
    }
  }
  EXPECT_EQ(lists, 2);
}

TEST_F(KubeSimTest, RawObjectsArriveAsTextThroughBothSyncMethods) {
  for (kubesim::Profile profile : {kubesim::Profile::kModern, kubesim::Profile::kLegacy}) {
    handler_.Clear();
    StartSim(profile);
    Create("a");
    StartReflector({.raw_objects = true});
    const std::string method = profile == kubesim::Profile::kModern ? "watchlist" : "list";
    ASSERT_TRUE(handler_.WaitFor("InitialEventsEnd " + method));
    Create("b");
    ASSERT_TRUE(handler_.WaitFor("ADDED b"));
    ASSERT_TRUE(client_->Delete(kConfigMaps, "default", "a").ok());
    ASSERT_TRUE(handler_.WaitFor("DELETED a"));
    EXPECT_THAT(handler_.lines(),
                ::testing::ElementsAre("SyncStarted " + method, "ADDED a initial",
                                       "InitialEventsEnd " + method, "ADDED b", "DELETED a"));
    TearDown();
  }
}

TEST_F(KubeSimTest, TooManyRequestsIsRetriedAfterTheGivenDelay) {
  StartSim();
  sim_->faults().Add({.action = kubesim::FaultRule::Action::kTooManyRequests,
                      .verb = "get",
                      .resource = "configmaps",
                      .retry_after_seconds = 3,
                      .times = 1});
  Create("a");
  auto got = client_->Get(kConfigMaps, "default", "a");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(sleeper_.delays(), ElementsAre(absl::Seconds(3)));

  // The reflector's watch gets the same treatment.
  sim_->faults().Add({.action = kubesim::FaultRule::Action::kTooManyRequests,
                      .verb = "watch",
                      .resource = "configmaps",
                      .retry_after_seconds = 2,
                      .times = 1});
  StartReflector();
  ASSERT_TRUE(handler_.WaitFor("InitialEventsEnd watchlist"));
  EXPECT_THAT(sleeper_.delays(), ElementsAre(absl::Seconds(3), absl::Seconds(2)));
}

TEST_F(KubeSimTest, DroppedWatchResumesWithoutLosingOrRepeatingEvents) {
  StartSim();
  Create("initial");
  StartReflector();
  ASSERT_TRUE(handler_.WaitFor("InitialEventsEnd watchlist"));
  Create("a");
  ASSERT_TRUE(handler_.WaitFor("ADDED a"));
  for (int round = 0; round < 3; ++round) {
    sim_->DropWatches();
    // Changes made while the watch is down or reconnecting.
    Create(absl::StrCat("during-", round));
    ASSERT_TRUE(
        client_
            ->Delete(kConfigMaps, "default", round == 0 ? "a" : absl::StrCat("during-", round - 1))
            .ok());
  }
  Create("after");
  ASSERT_TRUE(handler_.WaitFor("ADDED after"));
  std::vector<std::string> lines = handler_.lines();
  std::vector<std::string> live(lines.begin() + 3, lines.end());
  EXPECT_THAT(live,
              ElementsAre("ADDED a", "ADDED during-0", "DELETED a", "ADDED during-1",
                          "DELETED during-0", "ADDED during-2", "DELETED during-1", "ADDED after"));
  // Resumed with plain watches from the last seen RV, never a relist.
  EXPECT_EQ(reflector_->stats().watch_list_syncs, 1);
  EXPECT_EQ(reflector_->stats().list_syncs, 0);
  std::vector<std::string> watches = WatchRequests();
  ASSERT_GE(watches.size(), 2u);
  for (size_t i = 1; i < watches.size(); ++i) {
    EXPECT_THAT(watches[i], HasSubstr("resourceVersion=")) << watches[i];
    EXPECT_THAT(watches[i], ::testing::Not(HasSubstr("sendInitialEvents"))) << watches[i];
  }
}

TEST_F(KubeSimTest, StreamsEndingAtTimeoutSecondsAreResumed) {
  StartSim();
  Create("a");
  ReflectorOptions options;
  options.gvr = kConfigMaps;
  options.namespace_ = "default";
  options.sleeper = &sleeper_;
  options.min_watch_timeout_seconds = options.max_watch_timeout_seconds = 1;
  reflector_ = std::make_unique<Reflector>(*client_, options, handler_);
  thread_ = std::thread([this] { EXPECT_TRUE(reflector_->Run().ok()); });
  ASSERT_TRUE(handler_.WaitFor("InitialEventsEnd watchlist"));
  // Wait (with a deadline) until the server has ended two streams and the reflector re-watched.
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (WatchRequests().size() < 3 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  std::vector<std::string> watches = WatchRequests();
  ASSERT_GE(watches.size(), 3u);
  for (const std::string& watch : watches) EXPECT_THAT(watch, HasSubstr("timeoutSeconds=1"));
  // The re-watches resume from the same RV: nothing changed in between.
  EXPECT_THAT(watches[2], HasSubstr(absl::StrCat("resourceVersion=", ExtractRv(watches[1]))));
  Create("b");
  ASSERT_TRUE(handler_.WaitFor("ADDED b"));
  std::vector<std::string> lines = handler_.lines();
  EXPECT_EQ(std::count(lines.begin(), lines.end(), "ADDED b"), 1);
}

// Compacts the server while the first page of a paged LIST is being delivered, so the
// continue token of the next page has expired (410).
class CompactingHandler : public RecordingHandler {
 public:
  explicit CompactingHandler(kubesim::KubeSim& sim) : sim_(sim) {}
  void OnEvent(const ReflectorEvent& e) override {
    if (e.initial && !compacted_) {
      compacted_ = true;
      auto reply = sim_.Call("POST", "/api/v1/namespaces/default/configmaps",
                             ConfigMap("written-during-list").dump());
      EXPECT_EQ(reply.status, 201) << reply.body;
      sim_.Compact();
    }
    RecordingHandler::OnEvent(e);
  }

 private:
  kubesim::KubeSim& sim_;
  bool compacted_ = false;
};

TEST_F(KubeSimTest, ExpiredContinueTokenRestartsTheList) {
  StartSim(kubesim::Profile::kLegacy);
  for (const char* name : {"a", "b", "c", "d", "e"}) Create(name);
  CompactingHandler handler(*sim_);
  ReflectorOptions options{.gvr = kConfigMaps, .namespace_ = "default", .page_size = 2};
  options.sleeper = &sleeper_;
  Reflector reflector(*client_, options, handler);
  std::thread thread([&] { EXPECT_TRUE(reflector.Run().ok()); });
  ASSERT_TRUE(handler.WaitFor("InitialEventsEnd list expired"));
  reflector.Stop();
  thread.join();
  std::vector<std::string> lines = handler.lines();
  // First attempt: one page, then 410 on the continue token; second attempt: all six.
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0], "SyncStarted list");
  auto restart = std::find(lines.begin(), lines.end(), "SyncStarted list expired");
  ASSERT_NE(restart, lines.end());
  EXPECT_EQ(restart - lines.begin(), 3);  // SyncStarted + the 2 items of page one
  EXPECT_EQ(lines.end() - restart, 8);    // SyncStarted + 6 items + InitialEventsEnd
  EXPECT_EQ(reflector.stats().expired, 1);
}

TEST_F(KubeSimTest, OneClientServesManyThreads) {
  StartSim();
  constexpr int kThreads = 8;
  constexpr int kEach = 25;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        std::string name = absl::StrCat("t", t, "-", i);
        if (!client_->Create(kConfigMaps, "default", ConfigMap(name)).ok()) ++failures;
        if (!client_->Get(kConfigMaps, "default", name).ok()) ++failures;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  auto all = client_->ListAll(kConfigMaps, "default", {.limit = 50});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->items.size(), static_cast<size_t>(kThreads * kEach));
}

TEST_F(KubeSimTest, LargeInitialSetsStreamThroughBothSyncMethods) {
  constexpr int kObjects = 5000;
  StartSim();
  for (int i = 0; i < kObjects; ++i) {
    // Seeded in-process: faster than HTTP and not what is under test.
    auto reply = sim_->Call("POST", "/api/v1/namespaces/default/configmaps",
                            ConfigMap(absl::StrCat("cm-", i)).dump());
    ASSERT_EQ(reply.status, 201) << reply.body;
  }
  StartReflector({.use_watch_list = true});
  ASSERT_TRUE(handler_.WaitFor("InitialEventsEnd watchlist"));
  StopReflector();
  std::vector<std::string> lines = handler_.lines();
  EXPECT_EQ(lines.size(), kObjects + 2u);

  // The same set through paged LIST (page size 2 → 2,500 requests would be slow; use 500).
  RecordingHandler listed;
  ReflectorOptions options{.gvr = kConfigMaps, .namespace_ = "default", .use_watch_list = false};
  options.sleeper = &sleeper_;
  Reflector reflector(*client_, options, listed);
  std::thread thread([&] { EXPECT_TRUE(reflector.Run().ok()); });
  ASSERT_TRUE(listed.WaitFor("InitialEventsEnd list"));
  reflector.Stop();
  thread.join();
  EXPECT_EQ(listed.lines().size(), kObjects + 2u);
}

}  // namespace
}  // namespace reverser::kube
