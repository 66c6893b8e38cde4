// The reflector's state machine against a scripted server: each request to the collection gets
// the next scripted answer, so the exact request sequence (WatchList, fallback, relist, resume)
// can be asserted. Integration tests against tools/kube-sim cover the same paths end to end.

#include "libs/kube/reflector.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "libs/kube/httplib_transport.h"
#include "libs/kube/recording_sleeper.h"
#include "libs/kube/scripted_server.h"
#include "tests/fixtures/runfiles.h"

namespace reverser::kube {
namespace {

using nlohmann::json;
using reverser::testing::ReadTestdata;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ScriptedServer;

using testing::RecordingSleeper;

const core::GroupVersionResource kConfigMaps{"", "v1", "configmaps"};

// Records events as "TYPE name rv" lines; waits for a condition with a deadline.
class RecordingHandler : public WatchHandler {
 public:
  void OnEvent(const ReflectorEvent& e) override {
    std::string line(ReflectorEventTypeName(e.type));
    if (e.object.is_object() && e.object.contains("metadata")) {
      absl::StrAppend(&line, " ", e.object["metadata"].value("name", ""));
    }
    if (!e.resource_version.empty()) absl::StrAppend(&line, " @", e.resource_version);
    if (e.initial) absl::StrAppend(&line, " initial");
    if (e.type == ReflectorEventType::kSyncStarted ||
        e.type == ReflectorEventType::kInitialEventsEnd) {
      absl::StrAppend(&line, e.method == SyncMethod::kList ? " list" : " watchlist");
      absl::StrAppend(&line, e.reason == SyncReason::kInitial   ? " initial-sync"
                             : e.reason == SyncReason::kExpired ? " expired"
                                                                : " retry");
    }
    std::lock_guard lock(mu_);
    lines_.push_back(line);
    cv_.notify_all();
  }
  void OnRefused(ReflectorEventType type, const RefusedObject& object, bool initial) override {
    std::string line = absl::StrCat("REFUSED ", ReflectorEventTypeName(type), " ", object.name,
                                    " @", object.resource_version, initial ? " initial" : "");
    std::lock_guard lock(mu_);
    lines_.push_back(line);
    cv_.notify_all();
  }
  std::vector<std::string> lines() {
    std::lock_guard lock(mu_);
    return lines_;
  }
  bool WaitForCount(size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(30), [&] { return lines_.size() >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
};

// Serves /api/v1/configmaps from a script. Once the script is used up, requests hang (an
// idle watch) until the server shuts down or the client goes away.
class ScriptedCollection {
 public:
  using Answer = std::function<void(const httplib::Request&, httplib::Response&)>;

  explicit ScriptedCollection(ScriptedServer& server) {
    server.server().Get("/api/v1/configmaps", [this](const httplib::Request& req,
                                                     httplib::Response& res) {
      Answer answer;
      {
        std::lock_guard lock(mu_);
        targets_.push_back(req.target);
        if (!script_.empty()) {
          answer = std::move(script_.front());
          script_.pop_front();
        }
        cv_.notify_all();
      }
      if (answer) return answer(req, res);
      res.set_chunked_content_provider("application/json", [this](size_t, httplib::DataSink& sink) {
        std::unique_lock lock(mu_);
        cv_.wait_for(lock, std::chrono::seconds(60), [&] { return closing_; });
        return false;
      });
    });
  }
  ~ScriptedCollection() { Close(); }
  void Close() {
    std::lock_guard lock(mu_);
    closing_ = true;
    cv_.notify_all();
  }

  void Add(Answer answer) {
    std::lock_guard lock(mu_);
    script_.push_back(std::move(answer));
  }
  // A complete watch body (ends when written).
  void AddStream(std::string body) {
    Add([body](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("application/json", [body](size_t, httplib::DataSink& sink) {
        sink.write(body.data(), body.size());
        sink.done();
        return true;
      });
    });
  }
  void AddStatus(int code, std::string body, std::string retry_after = "") {
    Add([=](const httplib::Request&, httplib::Response& res) {
      res.status = code;
      if (!retry_after.empty()) res.set_header("Retry-After", retry_after);
      res.set_content(body, "application/json");
    });
  }
  void AddList(std::string body) { AddStatus(200, std::move(body)); }

  std::vector<std::string> targets() {
    std::lock_guard lock(mu_);
    return targets_;
  }
  bool WaitForRequests(size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(30), [&] { return targets_.size() >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Answer> script_;
  std::vector<std::string> targets_;
  bool closing_ = false;
};

std::string Event(const std::string& type, const std::string& name, const std::string& rv) {
  return absl::StrCat(R"({"type":")", type,
                      R"(","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":")",
                      name, R"(","namespace":"default","resourceVersion":")", rv, R"("}}})", "\n");
}
std::string Bookmark(const std::string& rv, bool end_marker = false) {
  return absl::StrCat(R"({"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1",)",
                      R"("metadata":{"resourceVersion":")", rv, "\"",
                      end_marker ? R"(,"annotations":{"k8s.io/initial-events-end":"true"})" : "",
                      "}}}\n");
}
std::string List(const std::string& rv, const std::vector<std::string>& names,
                 const std::string& continue_token = "") {
  json items = json::array();
  for (const std::string& name : names) {
    items.push_back({{"metadata", {{"name", name}, {"resourceVersion", "1"}}}});
  }
  json list = {{"kind", "ConfigMapList"},
               {"apiVersion", "v1"},
               {"metadata", {{"resourceVersion", rv}}},
               {"items", items}};
  if (!continue_token.empty()) list["metadata"]["continue"] = continue_token;
  return list.dump();
}

// An object nested one level deeper than the API server allows (and than the client takes),
// as text (a parsed copy of it would recurse once per level).
std::string TooDeepObject(const std::string& name, const std::string& rv) {
  std::string spec;
  for (int64_t i = 2; i < core::kApiObjectMaxDepth + 1; ++i) spec += R"({"a":)";
  spec += "{}";
  spec.append(core::kApiObjectMaxDepth - 1, '}');
  return absl::StrCat(R"({"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":")", name,
                      R"(","namespace":"default","resourceVersion":")", rv, R"("},"spec":)", spec,
                      "}");
}
std::string TooDeepEvent(const std::string& type, const std::string& name, const std::string& rv) {
  return absl::StrCat(R"({"type":")", type, R"(","object":)", TooDeepObject(name, rv), "}\n");
}

class ReflectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    collection_ = std::make_unique<ScriptedCollection>(server_);
    server_.Start();
    ClusterConfig config;
    config.server = server_.url();
    auto transport = HttplibTransport::Create(config);
    ASSERT_TRUE(transport.ok());
    client_ = std::make_unique<RestClient>(std::shared_ptr<HttpTransport>(std::move(*transport)),
                                           RestClientOptions{.sleeper = &sleeper_});
  }
  void TearDown() override {
    if (reflector_) reflector_->Stop();
    if (thread_.joinable()) thread_.join();
    collection_->Close();
  }

  void StartReflector(ReflectorOptions options = {}) {
    options.gvr = kConfigMaps;
    options.min_watch_timeout_seconds = options.max_watch_timeout_seconds = 300;
    options.sleeper = &sleeper_;
    options.page_size = 2;
    reflector_ = std::make_unique<Reflector>(*client_, options, handler_);
    thread_ = std::thread([this] { EXPECT_TRUE(reflector_->Run().ok()); });
  }

  // Declared before server_ so the server (and its handler threads) stops first.
  std::unique_ptr<ScriptedCollection> collection_;
  ScriptedServer server_;
  RecordingSleeper sleeper_;
  std::unique_ptr<RestClient> client_;
  RecordingHandler handler_;
  std::unique_ptr<Reflector> reflector_;
  std::thread thread_;
};

constexpr char kWatchList[] =
    "/api/v1/configmaps?watch=true&allowWatchBookmarks=true&sendInitialEvents=true&"
    "resourceVersionMatch=NotOlderThan&timeoutSeconds=300";
std::string WatchFrom(const std::string& rv) {
  return absl::StrCat("/api/v1/configmaps?watch=true&resourceVersion=", rv,
                      "&allowWatchBookmarks=true&timeoutSeconds=300");
}

TEST_F(ReflectorTest, WatchListThenResumesFromTheEndMarkerAndBookmarks) {
  collection_->AddStream(Event("ADDED", "a", "11") + Event("ADDED", "b", "7") +
                         Bookmark("20", true) + Event("MODIFIED", "a", "21") + Bookmark("25"));
  // The server ends the stream (timeout); the next watch resumes at 25.
  collection_->AddStream(Event("DELETED", "b", "26"));
  StartReflector();
  ASSERT_TRUE(handler_.WaitForCount(7));
  ASSERT_TRUE(collection_->WaitForRequests(3));
  EXPECT_THAT(handler_.lines(),
              ElementsAre("SyncStarted watchlist initial-sync", "ADDED a @11 initial",
                          "ADDED b @7 initial", "InitialEventsEnd @20 watchlist initial-sync",
                          "MODIFIED a @21", "BOOKMARK @25", "DELETED b @26"));
  EXPECT_THAT(collection_->targets(), ElementsAre(kWatchList, WatchFrom("25"), WatchFrom("26")));
  EXPECT_EQ(reflector_->last_resource_version(), "26");
  EXPECT_TRUE(reflector_->watch_list_supported());
  EXPECT_EQ(reflector_->stats().watch_list_syncs, 1);
}

TEST_F(ReflectorTest, AnObjectTooDeepIsRefusedAndTheWatchMovesPastIt) {
  collection_->AddStream(Event("ADDED", "a", "11") + TooDeepEvent("ADDED", "deep", "12") +
                         Bookmark("20", true) + TooDeepEvent("MODIFIED", "deep", "21"));
  // The next watch starts after the refused change: it is not read again.
  collection_->AddStream(Event("DELETED", "a", "23"));
  StartReflector();
  ASSERT_TRUE(handler_.WaitForCount(6));
  ASSERT_TRUE(collection_->WaitForRequests(3));
  EXPECT_THAT(handler_.lines(), ElementsAre("SyncStarted watchlist initial-sync",
                                            "ADDED a @11 initial", "REFUSED ADDED deep @12 initial",
                                            "InitialEventsEnd @20 watchlist initial-sync",
                                            "REFUSED MODIFIED deep @21", "DELETED a @23"));
  EXPECT_THAT(collection_->targets(), ElementsAre(kWatchList, WatchFrom("21"), WatchFrom("23")));
  EXPECT_EQ(reflector_->stats().refused, 2);
  EXPECT_EQ(reflector_->stats().retries, 0);  // not an error: no backoff, no relist
}

TEST_F(ReflectorTest, AListItemTooDeepIsRefusedTheOthersAreListed) {
  collection_->AddStatus(422,
                         ReadTestdata("k8s/handmade/status/422-invalid-sendInitialEvents.json"));
  std::string list = List("30", {"a", "b"});
  list.replace(list.find(R"("items":[)"), 9,
               absl::StrCat(R"("items":[)", TooDeepObject("deep", "5"), ","));
  collection_->AddList(list);
  StartReflector();
  ASSERT_TRUE(handler_.WaitForCount(5));
  // The page's refusals come first, then its items.
  EXPECT_THAT(handler_.lines(),
              ElementsAre("SyncStarted list initial-sync", "REFUSED ADDED deep @5 initial",
                          "ADDED a @1 initial", "ADDED b @1 initial",
                          "InitialEventsEnd @30 list initial-sync"));
  EXPECT_EQ(reflector_->stats().refused, 1);
}

TEST_F(ReflectorTest, UnprocessableWatchListFallsBackToPagedListAndRemembersIt) {
  collection_->AddStatus(422,
                         ReadTestdata("k8s/handmade/status/422-invalid-sendInitialEvents.json"));
  collection_->AddList(List("30", {"a", "b"}, "tok"));
  collection_->AddList(List("30", {"c"}));
  // The watch gets a 410 ERROR event: relist, with LIST again (fallback remembered).
  collection_->AddStream(Event("ADDED", "d", "31") +
                         ReadTestdata("k8s/handmade/watch/watch-error-410-expired.ndjson"));
  collection_->AddList(List("40", {"a"}));
  StartReflector();
  ASSERT_TRUE(handler_.WaitForCount(9));
  ASSERT_TRUE(collection_->WaitForRequests(6));
  std::vector<std::string> lines = handler_.lines();
  std::vector<std::string> expected = {"SyncStarted list initial-sync",
                                       "ADDED a @1 initial",
                                       "ADDED b @1 initial",
                                       "ADDED c @1 initial",
                                       "InitialEventsEnd @30 list initial-sync",
                                       "ADDED d @31",
                                       "SyncStarted list expired",
                                       "ADDED a @1 initial",
                                       "InitialEventsEnd @40 list expired"};
  ASSERT_GE(lines.size(), expected.size());
  lines.resize(expected.size());
  EXPECT_EQ(lines, expected);
  std::vector<std::string> targets = collection_->targets();
  ASSERT_GE(targets.size(), 6u);
  EXPECT_EQ(targets[0], kWatchList);
  EXPECT_EQ(targets[1], "/api/v1/configmaps?limit=2");
  EXPECT_EQ(targets[2], "/api/v1/configmaps?continue=tok&limit=2");
  EXPECT_EQ(targets[3], WatchFrom("30"));
  EXPECT_EQ(targets[4], "/api/v1/configmaps?limit=2");  // relist with RV "" after 410
  EXPECT_EQ(targets[5], WatchFrom("40"));
  EXPECT_FALSE(reflector_->watch_list_supported());
  EXPECT_EQ(reflector_->stats().expired, 1);
}

TEST_F(ReflectorTest, ResumesFromACursorAndRelistsWhenItIsGone) {
  // HTTP 410 (not an ERROR event) on the resume watch.
  collection_->AddStatus(410, ReadTestdata("k8s/handmade/status/410-list-expired.json"));
  collection_->AddStream(Event("ADDED", "a", "50") + Bookmark("50", true));
  StartReflector({.resume_resource_version = "12"});
  ASSERT_TRUE(handler_.WaitForCount(3));
  ASSERT_TRUE(collection_->WaitForRequests(3));
  EXPECT_THAT(handler_.lines(), ElementsAre("SyncStarted watchlist expired", "ADDED a @50 initial",
                                            "InitialEventsEnd @50 watchlist expired"));
  std::vector<std::string> targets = collection_->targets();
  EXPECT_EQ(targets[0], WatchFrom("12"));
  EXPECT_EQ(targets[1], kWatchList);  // resourceVersion "" after Expired
  EXPECT_EQ(targets[2], WatchFrom("50"));
  EXPECT_TRUE(sleeper_.delays().empty());  // relists are immediate
}

TEST_F(ReflectorTest, TooLargeResourceVersionLeadsToARelist) {
  // A cursor ahead of the server (e.g. restored from another cluster's state): 504 as an
  // ERROR event, as the watch cache sends it.
  std::string too_large = ReadTestdata("k8s/handmade/status/504-too-large-resource-version.json");
  ASSERT_FALSE(too_large.empty());
  collection_->AddStream(absl::StrCat(R"({"type":"ERROR","object":)", too_large, "}\n"));
  collection_->AddStream(Bookmark("60", true));
  StartReflector({.resume_resource_version = "1400"});
  ASSERT_TRUE(handler_.WaitForCount(2));
  ASSERT_TRUE(collection_->WaitForRequests(3));
  EXPECT_THAT(handler_.lines(), ElementsAre("SyncStarted watchlist expired",
                                            "InitialEventsEnd @60 watchlist expired"));
  EXPECT_EQ(collection_->targets()[1], kWatchList);
  EXPECT_EQ(reflector_->stats().expired, 1);
}

TEST_F(ReflectorTest, HonoursRetryAfterAndBacksOffOnErrors) {
  collection_->AddStream(Bookmark("5", true));
  collection_->Add([](const httplib::Request&, httplib::Response& res) {
    res.status = 429;
    res.set_header("Retry-After", "4");
    res.set_content("Too many requests, please try again later.", "text/plain; charset=utf-8");
  });
  collection_->AddStatus(500, ReadTestdata("k8s/handmade/status/500-internal.json"));
  collection_->AddStatus(500, ReadTestdata("k8s/handmade/status/500-internal.json"));
  collection_->AddStatus(503, R"({"kind":"Status","code":503,"reason":"ServiceUnavailable"})", "2");
  collection_->AddStream(Event("ADDED", "x", "6"));
  StartReflector();
  ASSERT_TRUE(collection_->WaitForRequests(7));
  ASSERT_TRUE(handler_.WaitForCount(3));
  std::vector<std::string> targets = collection_->targets();
  for (size_t i = 1; i < 7; ++i) EXPECT_EQ(targets[i], WatchFrom(i < 6 ? "5" : "6")) << i;
  // 429: the server's 4 s; 500s: 800 ms then 1.6 s; 503: the server's 2 s.
  EXPECT_THAT(sleeper_.delays(), ElementsAre(absl::Seconds(4), absl::Milliseconds(800),
                                             absl::Milliseconds(1600), absl::Seconds(2)));
}

TEST_F(ReflectorTest, WatchListWithoutEndMarkerFallsBackToList) {
  // A server that ignores sendInitialEvents: plain ADDEDs, then the stream ends.
  collection_->AddStream(Event("ADDED", "a", "3"));
  collection_->AddList(List("9", {"a"}));
  StartReflector();
  ASSERT_TRUE(handler_.WaitForCount(5));
  ASSERT_TRUE(collection_->WaitForRequests(3));
  EXPECT_THAT(handler_.lines(),
              ElementsAre("SyncStarted watchlist initial-sync", "ADDED a @3 initial",
                          "SyncStarted list initial-sync", "ADDED a @1 initial",
                          "InitialEventsEnd @9 list initial-sync"));
  EXPECT_FALSE(reflector_->watch_list_supported());
  EXPECT_EQ(collection_->targets()[2], WatchFrom("9"));
}

TEST_F(ReflectorTest, StopWakesAnIdleWatch) {
  collection_->AddStream(Bookmark("5", true));
  StartReflector();
  ASSERT_TRUE(collection_->WaitForRequests(2));  // the second watch hangs
  reflector_->Stop();
  thread_.join();
  EXPECT_EQ(reflector_->last_resource_version(), "5");
}

class CollectingReplacer : public ReplacingHandler {
 public:
  void OnReplaced(std::vector<json> objects, const std::string& rv, SyncReason) override {
    std::lock_guard lock(mu_);
    for (const json& o : objects) replaced_.push_back(o["metadata"]["name"]);
    replaced_rv_ = rv;
    cv_.notify_all();
  }
  void OnLiveEvent(const ReflectorEvent& event) override {
    std::lock_guard lock(mu_);
    live_.push_back(std::string(ReflectorEventTypeName(event.type)));
    cv_.notify_all();
  }
  bool WaitForLive(size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(30), [&] { return live_.size() >= n; });
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> replaced_;
  std::string replaced_rv_;
  std::vector<std::string> live_;
};

TEST(ReplacingHandlerTest, DeliversTheInitialSetInOneCall) {
  CollectingReplacer handler;
  handler.OnEvent({.type = ReflectorEventType::kSyncStarted});
  handler.OnEvent({.type = ReflectorEventType::kAdded,
                   .object = {{"metadata", {{"name", "a"}}}},
                   .initial = true});
  // An unfinished sync is superseded by the next one.
  handler.OnEvent({.type = ReflectorEventType::kSyncStarted, .reason = SyncReason::kRetry});
  handler.OnEvent({.type = ReflectorEventType::kAdded,
                   .object = {{"metadata", {{"name", "b"}}}},
                   .initial = true});
  handler.OnEvent({.type = ReflectorEventType::kInitialEventsEnd, .resource_version = "9"});
  handler.OnEvent(
      {.type = ReflectorEventType::kModified, .object = {{"metadata", {{"name", "b"}}}}});
  EXPECT_THAT(handler.replaced_, ElementsAre("b"));
  EXPECT_EQ(handler.replaced_rv_, "9");
  EXPECT_THAT(handler.live_, ElementsAre("MODIFIED"));
}

}  // namespace
}  // namespace reverser::kube
