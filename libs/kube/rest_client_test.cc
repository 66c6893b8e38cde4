#include "libs/kube/rest_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "libs/kube/api_error.h"
#include "libs/kube/httplib_transport.h"
#include "libs/kube/recording_sleeper.h"
#include "libs/kube/scripted_server.h"
#include "tests/fixtures/runfiles.h"

namespace reverser::kube {
namespace {

using nlohmann::json;
using reverser::testing::ReadTestdata;
using ::testing::ElementsAre;
using testing::ScriptedServer;

using testing::RecordingSleeper;

const core::GroupVersionResource kConfigMaps{"", "v1", "configmaps"};
const core::GroupVersionResource kDeployments{"apps", "v1", "deployments"};

class RestClientTest : public ::testing::Test {
 protected:
  std::unique_ptr<RestClient> Connect(ScriptedServer& server, int max_retries = 10) {
    ClusterConfig config;
    config.server = server.url();
    auto transport = HttplibTransport::Create(config);
    EXPECT_TRUE(transport.ok()) << transport.status();
    return std::make_unique<RestClient>(
        std::shared_ptr<HttpTransport>(std::move(*transport)),
        RestClientOptions{.max_retries = max_retries, .sleeper = &sleeper_});
  }
  RecordingSleeper sleeper_;
};

TEST(ResourcePathTest, BuildsCoreGroupedNamespacedAndClusterPaths) {
  EXPECT_EQ(ResourcePath(kConfigMaps, "default", "x"), "/api/v1/namespaces/default/configmaps/x");
  EXPECT_EQ(ResourcePath(kConfigMaps, ""), "/api/v1/configmaps");
  EXPECT_EQ(ResourcePath(kDeployments, "ns", "web", "scale"),
            "/apis/apps/v1/namespaces/ns/deployments/web/scale");
  EXPECT_EQ(UrlEncode("a=b&c d/é"), "a%3Db%26c%20d%2F%C3%A9");
}

TEST_F(RestClientTest, CrudSendsTheRightRequests) {
  ScriptedServer server;
  std::vector<std::string> content_types;
  std::vector<json> bodies;
  std::mutex mu;
  auto echo = [&](int status) {
    return [&, status](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard lock(mu);
        content_types.push_back(req.get_header_value("Content-Type"));
        bodies.push_back(req.body.empty() ? json() : json::parse(req.body));
      }
      json object = {{"kind", "ConfigMap"},
                     {"apiVersion", "v1"},
                     {"metadata", {{"name", "x"}, {"resourceVersion", "7"}}}};
      res.status = status;
      res.set_content(object.dump(), "application/json");
    };
  };
  server.server().Get("/api/v1/namespaces/default/configmaps/x", echo(200));
  server.server().Post("/api/v1/namespaces/default/configmaps", echo(201));
  server.server().Put("/api/v1/namespaces/default/configmaps/x", echo(200));
  server.server().Patch("/api/v1/namespaces/default/configmaps/x", echo(200));
  server.server().Delete("/api/v1/namespaces/default/configmaps/x", echo(200));
  server.Start();
  auto client = Connect(server);

  json cm = {{"apiVersion", "v1"},
             {"kind", "ConfigMap"},
             {"metadata", {{"name", "x"}, {"resourceVersion", "6"}}},
             {"data", {{"k", "v"}}}};
  auto got = client->Get(kConfigMaps, "default", "x");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)["metadata"]["resourceVersion"], "7");
  ASSERT_TRUE(client->Create(kConfigMaps, "default", cm, {.field_manager = "reverser"}).ok());
  ASSERT_TRUE(client->Update(kConfigMaps, "default", cm, {.dry_run = true}).ok());
  ASSERT_TRUE(
      client->Patch(kConfigMaps, "default", "x", PatchType::kMerge, {{"data", {{"k", "w"}}}}).ok());
  ASSERT_TRUE(client
                  ->Patch(kConfigMaps, "default", "x", PatchType::kJson,
                          json::array({{{"op", "remove"}, {"path", "/data/k"}}}))
                  .ok());
  ASSERT_TRUE(client
                  ->Patch(kConfigMaps, "default", "x", PatchType::kApply, cm,
                          {.field_manager = "reverser", .force = true})
                  .ok());
  ASSERT_TRUE(
      client->Delete(kConfigMaps, "default", "x", {.propagation_policy = "Background"}).ok());

  EXPECT_THAT(
      server.requests(),
      ElementsAre("GET /api/v1/namespaces/default/configmaps/x",
                  "POST /api/v1/namespaces/default/configmaps?fieldManager=reverser",
                  "PUT /api/v1/namespaces/default/configmaps/x?dryRun=All",
                  "PATCH /api/v1/namespaces/default/configmaps/x",
                  "PATCH /api/v1/namespaces/default/configmaps/x",
                  "PATCH /api/v1/namespaces/default/configmaps/x?fieldManager=reverser&force=true",
                  "DELETE /api/v1/namespaces/default/configmaps/x"));
  EXPECT_THAT(content_types,
              ElementsAre("", "application/json", "application/json",
                          "application/merge-patch+json", "application/json-patch+json",
                          "application/apply-patch+yaml", "application/json"));
  EXPECT_EQ(bodies[1]["data"]["k"], "v");
  EXPECT_EQ(bodies[6]["propagationPolicy"], "Background");

  // Client-side validation.
  EXPECT_EQ(client->Patch(kConfigMaps, "default", "x", PatchType::kApply, cm).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client->Update(kConfigMaps, "default", json::object()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(RestClientTest, ServerStatusBecomesApiError) {
  ScriptedServer server;
  server.server().Get("/api/v1/namespaces/default/configmaps/missing", [](const httplib::Request&,
                                                                          httplib::Response& res) {
    res.status = 404;
    res.set_content(ReadTestdata("k8s/handmade/status/404-notfound-core.json"), "application/json");
  });
  server.server().Post("/api/v1/namespaces/default/configmaps", [](const httplib::Request&,
                                                                   httplib::Response& res) {
    res.status = 409;
    res.set_content(ReadTestdata("k8s/handmade/status/409-alreadyexists.json"), "application/json");
  });
  server.server().Get("/api/v1/namespaces/default/configmaps/boom", [](const httplib::Request&,
                                                                       httplib::Response& res) {
    res.status = 500;
    res.set_content(ReadTestdata("k8s/handmade/status/500-internal.json"), "application/json");
  });
  server.Start();
  auto client = Connect(server);
  absl::Status missing = client->Get(kConfigMaps, "default", "missing").status();
  EXPECT_TRUE(IsApiNotFound(missing)) << missing;
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  absl::Status exists =
      client->Create(kConfigMaps, "default", {{"metadata", {{"name", "a"}}}}).status();
  EXPECT_TRUE(IsApiAlreadyExists(exists)) << exists;
  // 500 without Retry-After is not retried.
  absl::Status boom = client->Get(kConfigMaps, "default", "boom").status();
  EXPECT_EQ(boom.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(sleeper_.delays().empty());
  EXPECT_EQ(server.requests().size(), 3u);
}

TEST_F(RestClientTest, TooManyRequestsIsRetriedAfterTheServersDelay) {
  ScriptedServer server;
  std::atomic<int> calls{0};
  server.server().Get("/api/v1/namespaces/default/configmaps/x", [&](const httplib::Request&,
                                                                     httplib::Response& res) {
    int call = ++calls;
    if (call == 1) {  // APF rejection: text/plain with Retry-After
      res.status = 429;
      res.set_header("Retry-After", "3");
      res.set_content("Too many requests, please try again later.", "text/plain; charset=utf-8");
    } else if (call == 2) {  // shutting down: 503 Status with Retry-After
      res.status = 503;
      res.set_header("Retry-After", "2");
      res.set_content(R"({"kind":"Status","apiVersion":"v1","code":503,)"
                      R"("reason":"ServiceUnavailable","message":"bye"})",
                      "application/json");
    } else {
      res.set_content(R"({"kind":"ConfigMap","metadata":{"name":"x"}})", "application/json");
    }
  });
  server.server().Get("/api/v1/namespaces/default/configmaps/always",
                      [&](const httplib::Request&, httplib::Response& res) {
                        res.status = 429;
                        res.set_header("Retry-After", "1");
                        res.set_content("Too many requests, please try again later.", "text/plain");
                      });
  server.Start();
  auto client = Connect(server, /*max_retries=*/2);
  auto got = client->Get(kConfigMaps, "default", "x");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(calls.load(), 3);
  EXPECT_THAT(sleeper_.delays(), ElementsAre(absl::Seconds(3), absl::Seconds(2)));

  absl::Status exhausted = client->Get(kConfigMaps, "default", "always").status();
  EXPECT_EQ(exhausted.code(), absl::StatusCode::kResourceExhausted);
  auto error = GetApiError(exhausted);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->message, "Too many requests, please try again later.");
  EXPECT_EQ(sleeper_.delays().size(), 4u);  // 2 before, 2 retries here
}

TEST_F(RestClientTest, ListFollowsContinueTokens) {
  ScriptedServer server;
  server.server().Get("/api/v1/namespaces/default/configmaps", [](const httplib::Request& req,
                                                                  httplib::Response& res) {
    std::string page = req.has_param("continue") ? "configmaplist-page2-last.json"
                                                 : "configmaplist-page1-with-continue.json";
    res.set_content(ReadTestdata("k8s/handmade/list/" + page), "application/json");
  });
  server.Start();
  auto client = Connect(server);
  auto page1 = client->List(kConfigMaps, "default", {.limit = 2});
  ASSERT_TRUE(page1.ok()) << page1.status();
  EXPECT_FALSE(page1->continue_token.empty());
  EXPECT_EQ(page1->kind, "ConfigMapList");

  auto all = client->ListAll(kConfigMaps, "default", {.limit = 2, .resource_version = "0"});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->resource_version, page1->resource_version);
  EXPECT_EQ(all->items.size(), page1->items.size() + 1);
  std::vector<std::string> requests = server.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[1], "GET /api/v1/namespaces/default/configmaps?resourceVersion=0&limit=2");
  // The continue request drops resourceVersion (the server rejects both together).
  EXPECT_EQ(requests[2], absl::StrCat("GET /api/v1/namespaces/default/configmaps?continue=",
                                      UrlEncode(page1->continue_token), "&limit=2"));
}

// Streams `count` watch events; after the first one, waits until the test says the client has
// decoded it, proving the client hands events over before the response is complete.
TEST_F(RestClientTest, WatchDeliversEventsWhileTheBodyIsStillArriving) {
  constexpr int kEvents = 100'000;
  ScriptedServer server;
  absl::Notification first_event_seen;
  server.server().Get("/api/v1/configmaps", [&](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("application/json", [&](size_t, httplib::DataSink& sink) {
      auto event = [](int i) {
        return absl::StrCat(R"({"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1",)",
                            R"("metadata":{"name":"cm-)", i, R"(","resourceVersion":")", i + 1,
                            R"("}}})", "\n");
      };
      std::string first = event(0);
      sink.write(first.data(), first.size());
      first_event_seen.WaitForNotificationWithTimeout(absl::Seconds(30));
      std::string batch;
      for (int i = 1; i < kEvents; ++i) {
        absl::StrAppend(&batch, event(i));
        if (batch.size() > 60'000 || i == kEvents - 1) {
          if (!sink.write(batch.data(), batch.size())) return false;
          batch.clear();
        }
      }
      sink.done();
      return true;
    });
  });
  server.Start();
  auto client = Connect(server);
  int events = 0;
  std::string last_rv;
  absl::Status status = client->Watch(kConfigMaps, "", {.timeout_seconds = 60}, [&](WatchEvent e) {
    if (++events == 1) first_event_seen.Notify();
    last_rv = ResourceVersionOf(e.object);
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(events, kEvents);
  EXPECT_EQ(last_rv, absl::StrCat(kEvents));
  EXPECT_THAT(server.requests(),
              ElementsAre("GET /api/v1/configmaps?watch=true&allowWatchBookmarks=true&"
                          "timeoutSeconds=60"));
}

TEST_F(RestClientTest, WatchReportsCutStreamsAndHttpErrors) {
  ScriptedServer server;
  server.server().Get(
      "/api/v1/configmaps", [](const httplib::Request& req, httplib::Response& res) {
        if (req.has_param("sendInitialEvents")) {
          res.status = 422;
          res.set_content(ReadTestdata("k8s/handmade/status/422-invalid-sendInitialEvents.json"),
                          "application/json");
          return;
        }
        // Ends inside a frame.
        res.set_chunked_content_provider("application/json", [](size_t, httplib::DataSink& sink) {
          std::string body = R"({"type":"ADDED","object":{}})"
                             "\n"
                             R"({"type":"MODI)";
          sink.write(body.data(), body.size());
          sink.done();
          return true;
        });
      });
  server.Start();
  auto client = Connect(server);
  int events = 0;
  auto count = [&](WatchEvent) {
    ++events;
    return absl::OkStatus();
  };
  absl::Status cut = client->Watch(kConfigMaps, "", {}, count);
  EXPECT_EQ(cut.code(), absl::StatusCode::kUnavailable) << cut;
  EXPECT_EQ(events, 1);
  absl::Status invalid = client->Watch(kConfigMaps, "", {.send_initial_events = true}, count);
  EXPECT_TRUE(IsApiInvalid(invalid)) << invalid;
}

TEST_F(RestClientTest, WatchCanBeCancelledFromAnotherThread) {
  ScriptedServer server;
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  server.server().Get("/api/v1/configmaps", [&](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("application/json", [&](size_t, httplib::DataSink& sink) {
      std::string event = R"({"type":"ADDED","object":{"metadata":{"name":"a"}}})"
                          "\n";
      sink.write(event.data(), event.size());
      std::unique_lock lock(mu);
      cv.wait_for(lock, std::chrono::seconds(30), [&] { return release; });
      return false;
    });
  });
  server.Start();
  auto client = Connect(server);
  CancelToken cancel;
  absl::Notification got_event;
  absl::Status status;
  std::thread watcher([&] {
    status = client->Watch(
        kConfigMaps, "", {.timeout_seconds = 300},
        [&](WatchEvent) {
          got_event.Notify();
          return absl::OkStatus();
        },
        &cancel);
  });
  ASSERT_TRUE(got_event.WaitForNotificationWithTimeout(absl::Seconds(30)));
  cancel.Cancel();
  watcher.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled) << status;
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
}

}  // namespace
}  // namespace reverser::kube
