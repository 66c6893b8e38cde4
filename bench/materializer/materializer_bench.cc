// The materializer's two write paths against the raw speed of Redis on the same machine, in one
// run (issue #5's bench):
//   anchor  redis-benchmark's pipelined XADD (-P 16, 50 clients) against a fresh redis-server,
//           and the same over one connection (-c 1), which matches one materializer connection;
//   (a)     audit events/s end to end: HTTPS + mTLS POSTs of EventLists to the real audit webhook
//           (AuditWebhookServer → AuditIntake → RedisFactSink) until the facts are in Redis;
//   (b)     watch changes/s appended: a TypeMaterializer resuming from its checkpoint reads a
//           backlog of changes from kube-sim's watch and appends each to the Redis stream.
// Each figure is printed with its ratio to both anchors; the goal is at least 25 % (of the
// 50-client figure, the issue's anchor).
//
//   bazel run -c opt //bench/materializer:materializer_bench -- --audit_events=200000
// --redis_tls_too runs (a) and (b) once more over TLS to Redis, to compare the two in one run.

#include <atomic>
#include <cstdio>
#include <iostream>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "httplib.h"
#include "libs/audit/audit_event.h"
#include "libs/kube/config.h"
#include "libs/kube/httplib_transport.h"
#include "libs/redisstore/keys.h"
#include "libs/redisstore/materialization_store.h"
#include "libs/redisstore/redis_connection.h"
#include "libs/redisstore/stream_entry.h"
#include "libs/redisstore/test_redis.h"
#include "services/materializer/audit_webhook.h"
#include "services/materializer/redis_fact_sink.h"
#include "services/materializer/type_materializer.h"
#include "tests/fixtures/certs.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/redis_server.h"
#include "tests/fixtures/temp_dir.h"
#include "tools/kube-sim/kube_sim.h"
#include "tools/kube-sim/test_support.h"

ABSL_FLAG(int, xadd_requests, 1000000,
          "XADDs redis-benchmark sends (pipelined -P 16, 50 clients).");
ABSL_FLAG(int, xadd_single_requests, 300000,
          "XADDs of the single-connection anchor (pipelined -P 16, 1 client).");
ABSL_FLAG(int, xadd_entry_requests, 200000,
          "XADDs of the same-payload anchor (one of (b)'s entries; 50 clients, -P 16).");
ABSL_FLAG(int, fact_set_requests, 400000,
          "SETs of the same-writes anchor for (a) (one of (a)'s facts; 50 clients, -P 16).");
ABSL_FLAG(int, audit_events, 100000, "Audit events POSTed to the webhook.");
ABSL_FLAG(int, audit_batch, 100, "Events per EventList (kube-apiserver's batch maximum is 400).");
ABSL_FLAG(int, audit_clients, 4, "Concurrent HTTPS connections posting EventLists.");
ABSL_FLAG(int, watch_changes, 20000, "Changes in the watch backlog the materializer appends.");
ABSL_FLAG(double, goal, 0.25, "Goal: each figure at least this fraction of the XADD rate.");
ABSL_FLAG(bool, redis_tls_too, false,
          "Then run (a), (b) and the store figures again against a TLS-only redis-server (its "
          "certificate verified, a client certificate presented) and print them beside the "
          "plaintext ones.");

namespace reverser::bench {
namespace {

using nlohmann::json;

const core::GroupVersionResource kConfigMaps{"", "v1", "configmaps"};

absl::StatusOr<int64_t> IntegerReply(redisstore::RedisConnection& redis,
                                     const redisstore::RedisCommand& command) {
  auto reply = redis.Command(command);
  if (!reply.ok()) return reply.status();
  return reply->AsInteger();
}

// redis-benchmark's own figure (requests/s) for `command`, pipelined (-P 16) over `clients`
// connections; `__rand_int__` in the command is replaced by a random number below 10^9.
absl::StatusOr<double> RedisBenchmark(const testing::RedisServer& redis, int clients, int requests,
                                      const std::vector<std::string>& command) {
  const std::vector<std::string> flags = {"-n",   std::to_string(requests),
                                          "-c",   std::to_string(clients),
                                          "-P",   "16",
                                          "-r",   "1000000000",
                                          "--csv"};
  std::vector<std::string> argv = {"redis-benchmark", "-h", redis.host(), "-p",
                                   std::to_string(redis.port())};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), command.begin(), command.end());
  auto run = testing::RunCommand(argv);
  if (!run.ok()) return run.status();
  // CSV: a header line, then "<command>","<rps>" and six latency cells. The command may hold
  // quotes and commas (a JSON object), so the figure is counted from the end.
  for (absl::string_view line : absl::StrSplit(run->out, '\n')) {
    if (!absl::StartsWith(line, absl::StrCat("\"", command[0]))) continue;
    std::vector<std::string> cells = absl::StrSplit(line, "\",\"");
    double rps = 0;
    if (cells.size() >= 8 && absl::SimpleAtod(cells[cells.size() - 7], &rps)) return rps;
  }
  return absl::InternalError(absl::StrCat("redis-benchmark gave no figure: ", run->out, run->err));
}

// The anchor: XADD of `fields` (field, value, ...) to a fresh stream key, deleted after.
absl::StatusOr<double> RedisBenchmarkXadd(const testing::RedisServer& redis, int clients,
                                          int requests,
                                          const std::vector<std::string>& fields = {"f", "v"}) {
  const std::string key = absl::StrCat("bench:xadd:", clients, ":", fields.size());
  std::vector<std::string> command = {"XADD", key, "*"};
  command.insert(command.end(), fields.begin(), fields.end());
  auto rps = RedisBenchmark(redis, clients, requests, command);
  (void)testing::RunCommand(
      {"redis-cli", "-h", redis.host(), "-p", std::to_string(redis.port()), "DEL", key});
  return rps;
}

// The fields (field, value, ...) of the first entry of `stream`, as the materializer wrote them.
absl::StatusOr<std::vector<std::string>> FirstEntryFields(redisstore::RedisConnection& redis,
                                                          const std::string& stream) {
  auto reply = redis.Command({"XRANGE", stream, "-", "+", "COUNT", "1"});
  if (!reply.ok()) return reply.status();
  if (!reply->IsArray() || reply->elements().empty() ||
      reply->elements()[0].elements().size() != 2) {
    return absl::InternalError("the stream has no entry");
  }
  std::vector<std::string> fields;
  for (const auto& item : reply->elements()[0].elements()[1].elements()) {
    fields.push_back(item.str());
  }
  return fields;
}

// The uid of the object audit event `i` updates.
std::string AuditObjectUid(int i) {
  return absl::StrCat("00000000-0000-4000-8000-", 100000000000LL + i);
}

// One realistic accepted event (an update with request and response bodies, as the reference's
// recommended policy logs it at RequestResponse) for object `i`.
json UpdateEvent(int i) {
  const std::string name = absl::StrCat("cm-", i);
  const std::string uid = AuditObjectUid(i);
  const std::string request_rv = std::to_string(2 * i + 1000);
  const std::string response_rv = std::to_string(2 * i + 1001);
  json object = {{"apiVersion", "v1"},
                 {"kind", "ConfigMap"},
                 {"metadata",
                  {{"name", name},
                   {"namespace", "bench"},
                   {"uid", uid},
                   {"creationTimestamp", "2026-11-29T10:00:00Z"},
                   {"labels", {{"app", "bench"}}}}},
                 {"data", {{"key", "value"}, {"config.yaml", std::string(400, 'x')}}}};
  json request = object;
  request["metadata"]["resourceVersion"] = request_rv;
  json response = object;
  response["metadata"]["resourceVersion"] = response_rv;
  return {{"kind", "Event"},
          {"apiVersion", "audit.k8s.io/v1"},
          {"level", "RequestResponse"},
          {"auditID", absl::StrCat("a0000000-0000-4000-8000-", 100000000000LL + i)},
          {"stage", "ResponseComplete"},
          {"requestURI", "/api/v1/namespaces/bench/configmaps/" + name},
          {"verb", "update"},
          {"user",
           {{"username", "alice@example.com"},
            {"groups", {"system:authenticated"}},
            {"extra", {{"configbutler.ai/claims/email", {"alice@example.com"}}}}}},
          {"sourceIPs", {"10.0.0.1"}},
          {"userAgent", "kubectl/v1.33.0 (linux/amd64) kubernetes/abcdef"},
          {"objectRef",
           {{"resource", "configmaps"},
            {"namespace", "bench"},
            {"name", name},
            {"uid", uid},
            {"apiVersion", "v1"},
            {"resourceVersion", request_rv}}},
          {"responseStatus", {{"metadata", json::object()}, {"code", 200}}},
          {"requestObject", request},
          {"responseObject", response},
          {"requestReceivedTimestamp", "2026-11-29T10:00:01.000000Z"},
          {"stageTimestamp", "2026-11-29T10:00:01.002000Z"},
          {"annotations", {{"authorization.k8s.io/decision", "allow"}}}};
}

struct AuditFigure {
  double events_per_second = 0;
  int64_t keys = 0;
  size_t bytes_per_list = 0;
  double decode_per_second = 0;  // one thread, ParseEventList alone
  std::string fact_json;         // one fact as stored, for the same-writes anchor
};

// Single-thread decoding rate of one EventList body (events/s).
double DecodeRate(const std::string& body, size_t events) {
  constexpr int kRounds = 20;
  absl::Time start = absl::Now();
  for (int i = 0; i < kRounds; ++i) {
    auto items = audit::ParseEventList(body);
    if (!items.ok() || items->size() != events) return 0;
  }
  return kRounds * events / absl::ToDoubleSeconds(absl::Now() - start);
}

// (a) EventLists over HTTPS with client certificates until every fact is in Redis.
absl::StatusOr<AuditFigure> AuditEndToEnd(const testing::RedisServer& redis) {
  const int events = absl::GetFlag(FLAGS_audit_events);
  const int batch = absl::GetFlag(FLAGS_audit_batch);
  const int clients = absl::GetFlag(FLAGS_audit_clients);
  testing::ScopedTempDir dir("pki");
  auto pki = testing::MakeTestPki(dir.path());
  if (!pki.ok()) return pki.status();

  materializer::RedisFactSink sink(redisstore::RedisOptionsFor(redis),
                                   redisstore::KeyPrefix::Default(), absl::Minutes(15));
  runtime::MetricsRegistry metrics;
  materializer::AuditIntake intake(&sink, &metrics);
  materializer::AuditWebhookOptions options;
  options.listen_address = "127.0.0.1";
  options.port = 0;
  options.tls = {pki->server_cert, pki->server_key, pki->ca_cert};
  materializer::AuditWebhookServer server(options, &intake);
  auto port = server.Start();
  if (!port.ok()) return port.status();

  // Bodies are built before the clock starts: the API server has them ready too.
  std::vector<std::string> bodies;
  for (int first = 0; first < events; first += batch) {
    json list = {{"kind", "EventList"},
                 {"apiVersion", "audit.k8s.io/v1"},
                 {"metadata", json::object()},
                 {"items", json::array()}};
    for (int i = first; i < std::min(events, first + batch); ++i) {
      list["items"].push_back(UpdateEvent(i));
    }
    bodies.push_back(list.dump());
  }

  std::atomic<size_t> next{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> senders;
  absl::Time start = absl::Now();
  for (int c = 0; c < clients; ++c) {
    senders.emplace_back([&] {
      httplib::SSLClient client("127.0.0.1", *port, pki->client_cert, pki->client_key);
      client.set_ca_cert_path(pki->ca_cert.c_str());
      client.enable_server_certificate_verification(true);
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);
      for (size_t b = next++; b < bodies.size(); b = next++) {
        auto res = client.Post("/audit-webhook", bodies[b], "application/json");
        if (!res || res->status != 200) ++failures;
      }
    });
  }
  for (auto& t : senders) t.join();
  absl::Duration elapsed = absl::Now() - start;
  server.Stop();
  if (failures > 0) return absl::InternalError(absl::StrCat(failures.load(), " POSTs failed"));

  auto connection = redisstore::ConnectTo(redis);
  if (!connection.ok()) return connection.status();
  auto keys = IntegerReply(**connection, {"DBSIZE"});
  if (!keys.ok()) return keys.status();
  // Each update yields its exact fact and the `:last` copy (plus the anchor's stream key).
  if (*keys < 2LL * events) {
    return absl::InternalError(absl::StrCat("only ", *keys, " keys for ", events, " events"));
  }
  auto fact =
      (*connection)
          ->Command({"GET", redisstore::AuthorFactLastKey(redisstore::KeyPrefix::Default(),
                                                          "configmaps", AuditObjectUid(0))});
  if (!fact.ok() || fact->str().empty()) return absl::InternalError("no fact for event 0");
  const size_t per_list = static_cast<size_t>(std::min(events, batch));
  return AuditFigure{events / absl::ToDoubleSeconds(elapsed), *keys, bodies[0].size(),
                     DecodeRate(bodies[0], per_list), fact->str()};
}

struct WatchFigure {
  double changes_per_second = 0;
  double raw_watch_per_second = 0;        // a bare watch client reading the same backlog
  double mean_batch = 0;                  // changes per AppendAll the TypeMaterializer sent
  double append_one_per_second = 0;       // the same entries through Append, one round trip each
  double append_all_per_second = 0;       // ... through AppendAll, batches of 100
  std::vector<std::string> entry_fields;  // one entry as written, for the same-payload anchor
};

// The store's own ceiling for the entries the materializer just wrote: re-appended to fresh
// streams one at a time (as the TypeMaterializer does) and pipelined in batches (AppendAll).
absl::Status StoreCeiling(redisstore::RedisConnection& redis, const std::string& stream,
                          WatchFigure& figure) {
  auto range = redis.Command({"XRANGE", stream, "-", "+"});
  if (!range.ok()) return range.status();
  std::vector<redisstore::StreamEntry> entries;
  for (const auto& item : range->elements()) {
    auto fields = item.elements()[1].AsStringArray();
    if (!fields.ok()) return fields.status();
    auto entry = redisstore::DecodeEntry(item.elements()[0].str(), *fields);
    if (!entry.ok()) return entry.status();
    entries.push_back(std::move(*entry));
  }
  redisstore::MaterializationStore one(&redis, redisstore::KeyPrefix::Default(), kConfigMaps,
                                       core::WatchScope::Namespace("ceiling-one"));
  absl::Time start = absl::Now();
  for (const auto& entry : entries) {
    auto appended = one.Append(entry);
    if (!appended.ok() || !appended->appended) return absl::InternalError("append failed");
  }
  figure.append_one_per_second = entries.size() / absl::ToDoubleSeconds(absl::Now() - start);
  redisstore::MaterializationStore all(&redis, redisstore::KeyPrefix::Default(), kConfigMaps,
                                       core::WatchScope::Namespace("ceiling-all"));
  start = absl::Now();
  for (size_t first = 0; first < entries.size(); first += 100) {
    std::vector<redisstore::StreamEntry> batch(
        entries.begin() + static_cast<ptrdiff_t>(first),
        entries.begin() + static_cast<ptrdiff_t>(std::min(entries.size(), first + 100)));
    auto appended = all.AppendAll(batch);
    if (!appended.ok()) return appended.status();
  }
  figure.append_all_per_second = entries.size() / absl::ToDoubleSeconds(absl::Now() - start);
  return absl::OkStatus();
}

// The stream's last generated ID's RV.
uint64_t StreamTopRv(redisstore::RedisConnection& redis, const std::string& key) {
  auto reply = redis.Command({"XINFO", "STREAM", key});
  if (!reply.ok() || !reply->IsArray()) return 0;
  const auto& fields = reply->elements();
  for (size_t i = 0; i + 1 < fields.size(); i += 2) {
    if (fields[i].str() != "last-generated-id") continue;
    uint64_t rv = 0;
    std::vector<absl::string_view> parts = absl::StrSplit(fields[i + 1].str(), '-');
    return absl::SimpleAtoi(parts[0], &rv) ? rv : 0;
  }
  return 0;
}

// (b) A TypeMaterializer resuming from its checkpoint appends a backlog of watch changes.
absl::StatusOr<WatchFigure> WatchAppends(const testing::RedisServer& redis) {
  const int changes = absl::GetFlag(FLAGS_watch_changes);
  kubesim::KubeSimOptions sim_options;
  sim_options.history_limit = static_cast<size_t>(changes) + 1000;
  auto sim = kubesim::KubeSim::Start(sim_options);
  if (!sim.ok()) return sim.status();
  if ((*sim)->Call("POST", "/api/v1/namespaces", R"({"metadata":{"name":"bench"}})").status !=
      201) {
    return absl::InternalError("namespace create failed");
  }
  auto config = kube::ParseKubeconfig((*sim)->Kubeconfig(), "");
  if (!config.ok()) return config.status();
  auto transport = kube::HttplibTransport::Create(*config);
  if (!transport.ok()) return transport.status();
  auto client = std::make_shared<kube::RestClient>(
      std::shared_ptr<kube::HttpTransport>(std::move(*transport)));
  runtime::MetricsRegistry metrics;
  materializer::TypeMaterializerOptions options;
  options.gvr = kConfigMaps;
  options.scope = core::WatchScope::Namespace("bench");
  options.redis = redisstore::RedisOptionsFor(redis);
  options.compact_after_entries = static_cast<size_t>(changes) * 10;  // no compaction mid-bench

  // A checkpoint first, then the backlog written while no materializer runs.
  {
    materializer::TypeMaterializer first(client, options, &metrics);
    first.Start();
    if (!testing::WaitFor([&] { return first.Status().phase == "Streaming"; }, absl::Seconds(30))) {
      return absl::DeadlineExceededError("the materializer never synced");
    }
    first.Stop();
  }
  const int64_t start_rv = (*sim)->CurrentResourceVersion();
  const int objects = std::max(1, changes / 4);
  for (int i = 0; i < changes; ++i) {
    json cm = {
        {"apiVersion", "v1"},
        {"kind", "ConfigMap"},
        {"metadata", {{"name", absl::StrCat("cm-", i % objects)}, {"labels", {{"app", "bench"}}}}},
        {"data", {{"key", std::to_string(i)}, {"config.yaml", std::string(400, 'x')}}}};
    auto r = i < objects
                 ? (*sim)->Call("POST", "/api/v1/namespaces/bench/configmaps", cm.dump())
                 : (*sim)->Call(
                       "PUT", absl::StrCat("/api/v1/namespaces/bench/configmaps/cm-", i % objects),
                       cm.dump());
    if (r.status != 200 && r.status != 201) return absl::InternalError("write failed: " + r.body);
  }
  const uint64_t final_rv = static_cast<uint64_t>((*sim)->CurrentResourceVersion());

  // What kube-sim itself can serve: a bare watch reading the backlog.
  absl::Time raw_start = absl::Now();
  {
    kubesim::testing::StreamReader reader(
        (*sim)->port(),
        absl::StrCat("/api/v1/namespaces/bench/configmaps?watch=1&resourceVersion=", start_rv));
    for (int i = 0; i < changes; ++i) {
      if (reader.Next().empty()) return absl::InternalError("raw watch ended early");
    }
  }
  absl::Duration raw = absl::Now() - raw_start;

  auto connection = redisstore::ConnectTo(redis);
  if (!connection.ok()) return connection.status();
  const std::string stream = "reverser:mat:v1:{configmaps:ns:bench}:stream";
  materializer::TypeMaterializer resumed(client, options, &metrics);
  absl::Time start = absl::Now();
  resumed.Start();
  bool caught_up = testing::WaitFor([&] { return StreamTopRv(**connection, stream) >= final_rv; },
                                    absl::Minutes(5), absl::Milliseconds(1));
  absl::Duration elapsed = absl::Now() - start;
  resumed.Stop();
  if (!caught_up) return absl::DeadlineExceededError("the materializer never caught up");
  auto length = IntegerReply(**connection, {"XLEN", stream});
  if (!length.ok()) return length.status();
  if (*length != changes) {
    return absl::InternalError(absl::StrCat("stream holds ", *length, " of ", changes));
  }
  WatchFigure figure{changes / absl::ToDoubleSeconds(elapsed),
                     changes / absl::ToDoubleSeconds(raw)};
  const runtime::Labels labels = {
      {"group", ""}, {"version", "v1"}, {"resource", "configmaps"}, {"scope", "ns:bench"}};
  const double batches =
      metrics.GetCounter("reverser_materializer_append_batches_total", "", labels).Value();
  if (batches > 0) figure.mean_batch = changes / batches;
  absl::Status ceiling = StoreCeiling(**connection, stream, figure);
  if (!ceiling.ok()) return ceiling;
  auto fields = FirstEntryFields(**connection, stream);
  if (!fields.ok()) return fields.status();
  figure.entry_fields = *std::move(fields);
  return figure;
}

int Run() {
  const double goal = absl::GetFlag(FLAGS_goal);
  auto redis = testing::RedisServer::Start();
  if (!redis.ok()) {
    std::cerr << redis.status() << "\n";
    return 1;
  }
  auto xadd = RedisBenchmarkXadd(**redis, 50, absl::GetFlag(FLAGS_xadd_requests));
  if (!xadd.ok()) {
    std::cerr << "redis-benchmark: " << xadd.status() << "\n";
    return 1;
  }
  std::printf("anchor  redis-benchmark XADD, 50 clients, -P 16: %.0f/s\n", *xadd);
  // One materializer worker writes over one connection: the same pipelining on one client.
  auto xadd_one = RedisBenchmarkXadd(**redis, 1, absl::GetFlag(FLAGS_xadd_single_requests));
  if (!xadd_one.ok()) {
    std::cerr << "redis-benchmark -c 1: " << xadd_one.status() << "\n";
    return 1;
  }
  std::printf("anchor1 redis-benchmark XADD, 1 client, -P 16: %.0f/s\n", *xadd_one);

  auto audit = AuditEndToEnd(**redis);
  if (!audit.ok()) {
    std::cerr << "audit: " << audit.status() << "\n";
    return 1;
  }
  std::printf(
      "(a)     audit events end to end (HTTPS+mTLS, %d clients, %d events/list of %zu KiB -> facts "
      "in Redis): %.0f events/s = %.1f %% of XADD, %.1f %% of 1-client XADD (%s)\n",
      absl::GetFlag(FLAGS_audit_clients), absl::GetFlag(FLAGS_audit_batch),
      audit->bytes_per_list / 1024, audit->events_per_second,
      100 * audit->events_per_second / *xadd, 100 * audit->events_per_second / *xadd_one,
      audit->events_per_second >= goal * *xadd ? "goal met" : "below goal");

  std::printf("        decoding alone (ParseEventList, one thread): %.0f events/s\n",
              audit->decode_per_second);

  auto watch = WatchAppends(**redis);
  if (!watch.ok()) {
    std::cerr << "watch: " << watch.status() << "\n";
    return 1;
  }
  std::printf(
      "(b)     watch changes appended (TypeMaterializer, backlog of %d from kube-sim): %.0f "
      "changes/s = %.1f %% of XADD, %.1f %% of 1-client XADD (%s); kube-sim serves that backlog "
      "to a bare watch at %.0f/s; %.1f changes per AppendAll on average\n",
      absl::GetFlag(FLAGS_watch_changes), watch->changes_per_second,
      100 * watch->changes_per_second / *xadd, 100 * watch->changes_per_second / *xadd_one,
      watch->changes_per_second >= goal * *xadd ? "goal met" : "below goal",
      watch->raw_watch_per_second, watch->mean_batch);
  std::printf(
      "        the store alone, same entries: Append (one round trip each) %.0f/s = %.1f %%; "
      "AppendAll (batches of 100) %.0f/s = %.1f %% of XADD\n",
      watch->append_one_per_second, 100 * watch->append_one_per_second / *xadd,
      watch->append_all_per_second, 100 * watch->append_all_per_second / *xadd);

  // The same pipelined XADD with the payload this system appends: one of the entries (b) wrote
  // (7 fields, the object), instead of redis-benchmark's 2-byte "f v". Both readings of the
  // issue's "raw Redis figure" are printed.
  size_t entry_bytes = 0;
  for (const std::string& field : watch->entry_fields) entry_bytes += field.size();
  auto xadd_entry = RedisBenchmarkXadd(**redis, 50, absl::GetFlag(FLAGS_xadd_entry_requests),
                                       watch->entry_fields);
  if (!xadd_entry.ok()) {
    std::cerr << "redis-benchmark (entry payload): " << xadd_entry.status() << "\n";
    return 1;
  }
  auto verdict = [goal](double figure, double anchor) {
    return figure >= goal * anchor ? "goal met" : "below goal";
  };
  std::printf(
      "anchor2 redis-benchmark XADD of (b)'s own entry (%zu fields, %zu bytes), 50 clients, "
      "-P 16: %.0f/s; (a) is %.1f %% of it (%s), (b) is %.1f %% of it (%s)\n",
      watch->entry_fields.size() / 2, entry_bytes, *xadd_entry,
      100 * audit->events_per_second / *xadd_entry, verdict(audit->events_per_second, *xadd_entry),
      100 * watch->changes_per_second / *xadd_entry,
      verdict(watch->changes_per_second, *xadd_entry));

  // Likewise for (a): an accepted update writes its fact twice (exact and `:last` keys, SET with
  // the fact TTL) — the same writes, raw, with random keys so the keyspace grows as in (a).
  auto set_fact =
      RedisBenchmark(**redis, 50, absl::GetFlag(FLAGS_fact_set_requests),
                     {"SET", "bench:fact:__rand_int__", audit->fact_json, "EX", "3600"});
  if (!set_fact.ok()) {
    std::cerr << "redis-benchmark (fact SET): " << set_fact.status() << "\n";
    return 1;
  }
  std::printf(
      "anchor3 redis-benchmark SET of (a)'s own fact (%zu bytes, EX), 50 clients, -P 16: %.0f/s "
      "= %.0f events/s at two SETs per event; (a) is %.1f %% of it\n",
      audit->fact_json.size(), *set_fact, *set_fact / 2,
      100 * audit->events_per_second / (*set_fact / 2));

  if (absl::GetFlag(FLAGS_redis_tls_too)) {
    // The same paths over TLS to a fresh TLS-only server (tls-auth-clients yes, as the local
    // stack runs it); the anchors stay plaintext.
    testing::RedisServerOptions tls_options;
    tls_options.tls = true;
    tls_options.tls_auth_clients = true;
    auto tls_redis = testing::RedisServer::Start(tls_options);
    if (!tls_redis.ok()) {
      std::cerr << "TLS redis-server: " << tls_redis.status() << "\n";
      return 1;
    }
    auto tls_audit = AuditEndToEnd(**tls_redis);
    if (!tls_audit.ok()) {
      std::cerr << "audit over TLS: " << tls_audit.status() << "\n";
      return 1;
    }
    auto tls_watch = WatchAppends(**tls_redis);
    if (!tls_watch.ok()) {
      std::cerr << "watch over TLS: " << tls_watch.status() << "\n";
      return 1;
    }
    std::printf(
        "TLS     Redis over TLS: (a) %.0f events/s = %.1f %% of plaintext (a); (b) %.0f changes/s "
        "= %.1f %% of plaintext (b); store alone Append %.0f/s = %.1f %%, AppendAll %.0f/s = "
        "%.1f %% of plaintext\n",
        tls_audit->events_per_second, 100 * tls_audit->events_per_second / audit->events_per_second,
        tls_watch->changes_per_second,
        100 * tls_watch->changes_per_second / watch->changes_per_second,
        tls_watch->append_one_per_second,
        100 * tls_watch->append_one_per_second / watch->append_one_per_second,
        tls_watch->append_all_per_second,
        100 * tls_watch->append_all_per_second / watch->append_all_per_second);
  }
  return 0;
}

}  // namespace
}  // namespace reverser::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return reverser::bench::Run();
}
