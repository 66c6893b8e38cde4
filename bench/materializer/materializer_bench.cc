// The materializer's two write paths against the raw speed of Redis on the same machine, in one
// run (issue #5's bench):
//   anchor  redis-benchmark's pipelined XADD (-P 16, 50 clients) against a fresh redis-server,
//           and the same over one connection (-c 1), which matches one materializer connection;
//   (a)     audit events/s end to end: HTTPS + mTLS POSTs of EventLists to the real audit webhook
//           (AuditWebhookServer → AuditIntake → RedisFactSink) until the facts are in Redis;
//   (b)     watch changes/s appended: a TypeMaterializer resuming from its checkpoint reads a
//           backlog of changes from kube-sim's watch and appends each to the Redis stream.
// The goal (issue #5) is each of (a) and (b) at least 25 % of the anchor the issue names:
// `redis-benchmark -c 50 -P 16 XADD k '*' f v`. The other anchors (one client; XADD of the
// payload (b) writes; SET of (a)'s facts) are printed beside it as context, never as the verdict.
// Anchor and figures are sampled the same number of times (--rounds), interleaved (even rounds:
// anchors first; odd rounds: figures first), each step on an emptied Redis (FLUSHALL); each is
// timed from its first request to its last answer (redis-benchmark's own figure for the
// anchors). Ratios are between the medians of this run.
//
//   bazel run -c opt //bench/materializer:materializer_bench -- --rounds=3
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
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/common/bench_result.h"
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
ABSL_FLAG(int, rounds, 3,
          "Rounds of every anchor and figure, interleaved; min/median/max are reported.");
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

// Every sample of one round.
struct Round {
  double xadd = 0, xadd_one = 0, xadd_entry = 0, set_fact_events = 0;
  AuditFigure audit;
  WatchFigure watch;
};

absl::Status Flush(const testing::RedisServer& redis) {
  auto out = redis.Cli({"FLUSHALL", "SYNC"});
  return out.ok() ? absl::OkStatus() : out.status();
}

// One round: the anchors and the figures, each on an emptied Redis, anchors first or last.
absl::StatusOr<Round> RunRound(const testing::RedisServer& redis, bool anchors_first,
                               const Round* previous) {
  Round round;
  auto anchors = [&]() -> absl::Status {
    if (absl::Status s = Flush(redis); !s.ok()) return s;
    auto xadd = RedisBenchmarkXadd(redis, 50, absl::GetFlag(FLAGS_xadd_requests));
    if (!xadd.ok()) return xadd.status();
    round.xadd = *xadd;
    // One materializer worker writes over one connection: the same pipelining on one client.
    auto one = RedisBenchmarkXadd(redis, 1, absl::GetFlag(FLAGS_xadd_single_requests));
    if (!one.ok()) return one.status();
    round.xadd_one = *one;
    return absl::OkStatus();
  };
  // The anchors with the payloads this system writes need one of (b)'s entries and one of
  // (a)'s facts: this round's, or the previous round's when the anchors go first.
  auto payload_anchors = [&](const Round& source) -> absl::Status {
    if (absl::Status s = Flush(redis); !s.ok()) return s;
    auto entry = RedisBenchmarkXadd(redis, 50, absl::GetFlag(FLAGS_xadd_entry_requests),
                                    source.watch.entry_fields);
    if (!entry.ok()) return entry.status();
    round.xadd_entry = *entry;
    if (absl::Status s = Flush(redis); !s.ok()) return s;
    auto set =
        RedisBenchmark(redis, 50, absl::GetFlag(FLAGS_fact_set_requests),
                       {"SET", "bench:fact:__rand_int__", source.audit.fact_json, "EX", "3600"});
    if (!set.ok()) return set.status();
    round.set_fact_events = *set / 2;  // an accepted update writes two facts
    return absl::OkStatus();
  };
  auto figures = [&]() -> absl::Status {
    if (absl::Status s = Flush(redis); !s.ok()) return s;
    auto audit = AuditEndToEnd(redis);
    if (!audit.ok())
      return absl::Status(audit.status().code(), "audit: " + audit.status().ToString());
    round.audit = *std::move(audit);
    if (absl::Status s = Flush(redis); !s.ok()) return s;
    auto watch = WatchAppends(redis);
    if (!watch.ok())
      return absl::Status(watch.status().code(), "watch: " + watch.status().ToString());
    round.watch = *std::move(watch);
    return absl::OkStatus();
  };
  if (anchors_first) {
    if (absl::Status s = anchors(); !s.ok()) return s;
    if (previous != nullptr) {
      if (absl::Status s = payload_anchors(*previous); !s.ok()) return s;
    }
    if (absl::Status s = figures(); !s.ok()) return s;
    if (previous == nullptr) {
      if (absl::Status s = payload_anchors(round); !s.ok()) return s;
    }
  } else {
    if (absl::Status s = figures(); !s.ok()) return s;
    if (absl::Status s = payload_anchors(round); !s.ok()) return s;
    if (absl::Status s = anchors(); !s.ok()) return s;
  }
  return round;
}

std::string Mmm(const std::vector<double>& values, const char* format) {
  const Stats s = StatsOf(values);
  return absl::StrCat(absl::StrFormat(format, s.median), " (", absl::StrFormat(format, s.min), "–",
                      absl::StrFormat(format, s.max), ")");
}

int Run() {
  const double goal = absl::GetFlag(FLAGS_goal);
  const int rounds = std::max(1, absl::GetFlag(FLAGS_rounds));
  auto redis = testing::RedisServer::Start();
  if (!redis.ok()) {
    std::cerr << redis.status() << "\n";
    return 1;
  }
  std::vector<Round> all;
  for (int r = 0; r < rounds; ++r) {
    auto round = RunRound(**redis, r % 2 == 0, all.empty() ? nullptr : &all.back());
    if (!round.ok()) {
      std::cerr << "round " << r + 1 << ": " << round.status() << "\n";
      return 1;
    }
    std::printf("round %d (%s first): XADD %.0f/s, (a) %.0f events/s, (b) %.0f changes/s\n", r + 1,
                r % 2 == 0 ? "anchors" : "figures", round->xadd, round->audit.events_per_second,
                round->watch.changes_per_second);
    all.push_back(*std::move(round));
  }
  auto column = [&](auto pick) {
    std::vector<double> values;
    for (const Round& r : all) values.push_back(pick(r));
    return values;
  };
  const auto xadd = column([](const Round& r) { return r.xadd; });
  const auto xadd_one = column([](const Round& r) { return r.xadd_one; });
  const auto xadd_entry = column([](const Round& r) { return r.xadd_entry; });
  const auto set_fact = column([](const Round& r) { return r.set_fact_events; });
  const auto audit = column([](const Round& r) { return r.audit.events_per_second; });
  const auto decode = column([](const Round& r) { return r.audit.decode_per_second; });
  const auto watch = column([](const Round& r) { return r.watch.changes_per_second; });
  const auto bare = column([](const Round& r) { return r.watch.raw_watch_per_second; });
  const auto batch = column([](const Round& r) { return r.watch.mean_batch; });
  const auto append_one = column([](const Round& r) { return r.watch.append_one_per_second; });
  const auto append_all = column([](const Round& r) { return r.watch.append_all_per_second; });
  const Round& first = all.front();
  size_t entry_bytes = 0;
  for (const std::string& field : first.watch.entry_fields) entry_bytes += field.size();
  const double anchor = Median(xadd);
  auto pct = [](const std::vector<double>& figure, const std::vector<double>& of) {
    return 100 * Median(figure) / Median(of);
  };
  auto verdict = [&](const std::vector<double>& figure) {
    return Median(figure) >= goal * anchor ? "goal met" : "goal not met";
  };

  std::printf("%d rounds, interleaved; median (min–max)\n", rounds);
  std::printf("anchor  redis-benchmark -c 50 -P 16 XADD k '*' f v (the issue's anchor): %s/s\n",
              Mmm(xadd, "%.0f").c_str());
  std::printf(
      "(a)     audit events end to end (HTTPS+mTLS, %d clients, %d events/list of %zu KiB -> facts "
      "in Redis): %s events/s = %.1f %% of the anchor (goal ≥ %.0f %%: %s)\n",
      absl::GetFlag(FLAGS_audit_clients), absl::GetFlag(FLAGS_audit_batch),
      first.audit.bytes_per_list / 1024, Mmm(audit, "%.0f").c_str(), pct(audit, xadd), 100 * goal,
      verdict(audit));
  std::printf(
      "(b)     watch changes appended (TypeMaterializer, backlog of %d from kube-sim): %s "
      "changes/s = %.1f %% of the anchor (goal ≥ %.0f %%: %s); %s changes per AppendAll\n",
      absl::GetFlag(FLAGS_watch_changes), Mmm(watch, "%.0f").c_str(), pct(watch, xadd), 100 * goal,
      verdict(watch), Mmm(batch, "%.1f").c_str());
  std::printf("context (no verdict; ratios are of this run's medians):\n");
  std::printf("  anchor1 redis-benchmark -c 1 -P 16 XADD: %s/s; (a) %.1f %%, (b) %.1f %% of it\n",
              Mmm(xadd_one, "%.0f").c_str(), pct(audit, xadd_one), pct(watch, xadd_one));
  std::printf(
      "  anchor2 redis-benchmark -c 50 -P 16 XADD of (b)'s own entry (%zu fields, %zu bytes): "
      "%s/s; (a) %.1f %%, (b) %.1f %% of it\n",
      first.watch.entry_fields.size() / 2, entry_bytes, Mmm(xadd_entry, "%.0f").c_str(),
      pct(audit, xadd_entry), pct(watch, xadd_entry));
  std::printf(
      "  anchor3 redis-benchmark -c 50 -P 16 SET of (a)'s own fact (%zu bytes, EX), two per "
      "event: %s events/s; (a) %.1f %% of it\n",
      first.audit.fact_json.size(), Mmm(set_fact, "%.0f").c_str(), pct(audit, set_fact));
  std::printf("  decoding alone (ParseEventList, one thread): %s events/s\n",
              Mmm(decode, "%.0f").c_str());
  std::printf("  kube-sim serving (b)'s backlog to a bare watch: %s/s\n",
              Mmm(bare, "%.0f").c_str());
  std::printf(
      "  the store alone, (b)'s entries: Append (two round trips each) %s/s; AppendAll (batches "
      "of 100) %s/s = %.1f %% of the anchor\n",
      Mmm(append_one, "%.0f").c_str(), Mmm(append_all, "%.0f").c_str(), pct(append_all, xadd));

  const std::string how = absl::StrCat(
      rounds,
      " rounds, interleaved (anchors first in odd rounds, last in even ones), each step on an "
      "emptied Redis; each timed from its first request to its last answer (the anchor: "
      "redis-benchmark's own figure)");
  const Series issue_anchor{"xadd_c50_p16", "redis-benchmark -c 50 -P 16 XADD k '*' f v", xadd};
  const Goal issue_goal{"≥ 25 % of redis-benchmark -c 50 -P 16 XADD k '*' f v (issue #5)", "ratio",
                        ">=", goal};
  EmitFigure({.bench = "materializer",
              .figure = "audit_events",
              .label = "(a) audit events end to end, HTTPS + mTLS → facts in Redis",
              .unit = "events/s",
              .samples = audit,
              .anchor = issue_anchor,
              .goal = issue_goal,
              .timing = how});
  EmitFigure({.bench = "materializer",
              .figure = "watch_changes",
              .label = "(b) watch changes appended by a TypeMaterializer",
              .unit = "changes/s",
              .samples = watch,
              .anchor = issue_anchor,
              .goal = issue_goal,
              .timing = how,
              .extra = {{"mean_batch", batch}}});
  const Series one{"xadd_c1_p16", "redis-benchmark -c 1 -P 16 XADD (one connection)", xadd_one};
  const Series entry{
      "xadd_entry_c50_p16",
      absl::StrCat("redis-benchmark -c 50 -P 16 XADD of (b)'s own entry (", entry_bytes, " bytes)"),
      xadd_entry};
  const Series sets{"set_fact_c50_p16",
                    "redis-benchmark -c 50 -P 16 SET of (a)'s fact, two per event", set_fact};
  const std::vector<std::pair<std::string, const Series*>> contexts = {{"c1", &one},
                                                                       {"entry", &entry}};
  for (const auto& [key, series] : contexts) {
    EmitFigure({.bench = "materializer",
                .figure = "audit_events_vs_" + key,
                .label = "(a) against " + series->label,
                .unit = "events/s",
                .samples = audit,
                .anchor = *series,
                .timing = how,
                .context = true});
    EmitFigure({.bench = "materializer",
                .figure = "watch_changes_vs_" + key,
                .label = "(b) against " + series->label,
                .unit = "changes/s",
                .samples = watch,
                .anchor = *series,
                .timing = how,
                .context = true});
  }
  EmitFigure({.bench = "materializer",
              .figure = "audit_events_vs_sets",
              .label = "(a) against " + sets.label,
              .unit = "events/s",
              .samples = audit,
              .anchor = sets,
              .timing = how,
              .context = true});
  EmitFigure({.bench = "materializer",
              .figure = "store_append_all",
              .label = "the store alone: AppendAll, batches of 100",
              .unit = "entries/s",
              .samples = append_all,
              .anchor = issue_anchor,
              .timing = how,
              .context = true});
  EmitFigure({.bench = "materializer",
              .figure = "parse_event_list",
              .label = "ParseEventList alone, one thread",
              .unit = "events/s",
              .samples = decode,
              .timing = "in process, 20 passes over one body",
              .context = true});
  EmitFigure({.bench = "materializer",
              .figure = "kube_sim_bare_watch",
              .label = "kube-sim serving (b)'s backlog to a bare watch",
              .unit = "events/s",
              .samples = bare,
              .timing = how,
              .context = true});

  if (absl::GetFlag(FLAGS_redis_tls_too)) {
    // The same paths over TLS to a fresh TLS-only server (tls-auth-clients yes, as the local
    // stack runs it), once, against the plaintext medians; the anchors stay plaintext.
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
        "TLS     Redis over TLS (one run, against the plaintext medians): (a) %.0f events/s = "
        "%.1f %%; (b) %.0f changes/s = %.1f %%; store alone Append %.0f/s = %.1f %%, AppendAll "
        "%.0f/s = %.1f %%\n",
        tls_audit->events_per_second, 100 * tls_audit->events_per_second / Median(audit),
        tls_watch->changes_per_second, 100 * tls_watch->changes_per_second / Median(watch),
        tls_watch->append_one_per_second,
        100 * tls_watch->append_one_per_second / Median(append_one),
        tls_watch->append_all_per_second,
        100 * tls_watch->append_all_per_second / Median(append_all));
  }
  return 0;
}

}  // namespace
}  // namespace reverser::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return reverser::bench::Run();
}
