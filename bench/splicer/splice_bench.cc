// The splicer under load (issue #6): a real redis-server holding a checkpoint of N Deployments
// and M stream entries after it, written through libs/redisstore as the materializer does. Each
// measured phase runs in its own child process (this binary again, with --phase) so its peak RSS
// is its own:
//   anchor  raw hiredis HGETALL + XRANGE of the same keys, then a bare JSON parse of every object
//   splice  MaterializationStore::Load + BuildSnapshot (seeding the dedup) + wire encoding: what a
//           SpliceStream does before it sends a resync
// The anchor and the splice are timed the same way (inside their child, from connected to done)
// and run the same number of times (--runs), interleaved: anchor, splice, anchor, splice, ...;
// min/median/max of each and the ratio of the medians are reported.
//   tail    a SpliceStream draining the M entries from a cursor at the checkpoint into a
//           gitworker that accepts and acks at once, with attribution off / grace 0 / grace 3 s
//           with every exact uid:rv fact present / grace 3 s with no facts at all
//
//   bazel run -c opt //bench/splicer:splice_bench -- --objects=100000 --entries=100000

#include <hiredis/hiredis.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/common/bench_result.h"
#include "bench/splicer/accepting_gitworker.h"
#include "bench/splicer/workload.h"
#include "libs/core/proto_convert.h"
#include "libs/redisstore/author_fact_store.h"
#include "libs/redisstore/delivery_cursor_store.h"
#include "libs/redisstore/materialization_store.h"
#include "libs/runtime/metrics.h"
#include "libs/sanitize/sanitize.h"
#include "services/splicer/delivery_client.h"
#include "services/splicer/splice.h"
#include "services/splicer/splice_stream.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/redis_server.h"
#include "tests/fixtures/temp_dir.h"

ABSL_FLAG(int, objects, 100000, "Objects in the checkpoint.");
ABSL_FLAG(int, entries, 100000, "Stream entries after the checkpoint.");
ABSL_FLAG(std::string, tail_runs, "off,grace0,grace3s,nofacts",
          "Tail runs, comma-separated: off (attribution off), grace0, grace3s (facts present), "
          "nofacts (grace 3 s, every fact deleted first; runs last).");
ABSL_FLAG(int, runs, 3,
          "Runs of the anchor and of the splice (interleaved), and of each tail mode; "
          "min/median/max are reported.");
ABSL_FLAG(bool, skip_splice, false, "Skip the splice phase (anchor and tail runs only).");
// Internal: the measured phases, run as child processes.
ABSL_FLAG(std::string, phase, "", "internal: anchor | splice | tail");
ABSL_FLAG(int, redis_port, 0, "internal");
ABSL_FLAG(std::string, target_uid, "bench-target", "internal");
ABSL_FLAG(int64_t, grace_ms, 0, "internal");
ABSL_FLAG(bool, attribution, true, "internal");
ABSL_FLAG(int64_t, expect_events, 0, "internal");
ABSL_FLAG(int64_t, expect_desired, 0, "internal");
ABSL_FLAG(std::string, last_position, "", "internal");
ABSL_FLAG(std::string, incarnation, "", "internal: the checkpoint's incarnation (the cursor's)");

namespace reverser::bench {
namespace {

using Results = std::map<std::string, double>;

const core::GroupVersionResource kGvr{"apps", "v1", "deployments"};
const core::WatchScope kScope = core::WatchScope::Cluster();

reverser::v1::Claim BenchClaim() {
  reverser::v1::Claim claim;
  *claim.mutable_type()->mutable_gvr() = core::ToProto(kGvr);
  return claim;  // cluster scope
}

reverser::v1::GitTargetRef BenchTarget(const std::string& uid) {
  reverser::v1::GitTargetRef target;
  target.set_namespace_("bench");
  target.set_name(uid);
  target.set_uid(uid);
  return target;
}

splicer::TargetScope AllNamespaces() {
  splicer::TargetScope scope;
  reverser::v1::OperationSet all;
  all.set_all(true);
  scope.namespaces[""] = all;
  return scope;
}

// Peak and current resident set of this process, in MiB (/proc/self/status).
double StatusMiB(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) {
      double kib = 0;
      std::istringstream(line.substr(std::string(field).size() + 1)) >> kib;
      return kib / 1024.0;
    }
  }
  return 0;
}

void Emit(const std::string& key, double value) {
  std::cout << "RESULT " << key << "=" << absl::StrFormat("%.6f", value) << "\n";
}

redisstore::RedisOptions RedisAt(int port) {
  redisstore::RedisOptions options;
  options.port = port;
  options.command_timeout = absl::Seconds(120);  // whole-type reads are large
  return options;
}

// ---- child phases ----

int AnchorPhase(int port) {
  const double base = StatusMiB("VmRSS:");
  auto keys = redisstore::MaterializationKeys::For(redisstore::KeyPrefix::Default(), kGvr, kScope);
  redisContext* c = redisConnect("127.0.0.1", port);
  if (c == nullptr || c->err) return 3;
  const absl::Time read_start = absl::Now();
  absl::Time start = read_start;
  auto* items =
      static_cast<redisReply*>(redisCommand(c, "HGETALL %s", keys.checkpoint_items.c_str()));
  auto* stream = static_cast<redisReply*>(redisCommand(c, "XRANGE %s - +", keys.stream.c_str()));
  absl::Duration read = absl::Now() - start;
  if (items == nullptr || stream == nullptr || items->type != REDIS_REPLY_ARRAY ||
      stream->type != REDIS_REPLY_ARRAY) {
    return 4;
  }
  // The same bytes, parsed once each.
  std::vector<absl::string_view> objects;
  for (size_t i = 1; i < items->elements; i += 2) {
    objects.emplace_back(items->element[i]->str, items->element[i]->len);
  }
  for (size_t i = 0; i < stream->elements; ++i) {
    redisReply* fields = stream->element[i]->element[1];
    for (size_t f = 0; f + 1 < fields->elements; f += 2) {
      if (absl::string_view(fields->element[f]->str, fields->element[f]->len) == "obj") {
        objects.emplace_back(fields->element[f + 1]->str, fields->element[f + 1]->len);
      }
    }
  }
  start = absl::Now();
  size_t parsed = 0;
  for (absl::string_view text : objects) {
    auto j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
    if (j.is_object()) ++parsed;
  }
  absl::Duration parse = absl::Now() - start;
  const size_t stream_entries = stream->elements;
  // Freed inside the clock, as the splice's total includes freeing its view.
  objects.clear();
  freeReplyObject(items);
  freeReplyObject(stream);
  absl::Duration total = absl::Now() - read_start;
  Emit("read_s", absl::ToDoubleSeconds(read));
  Emit("parse_s", absl::ToDoubleSeconds(parse));
  Emit("total_s", absl::ToDoubleSeconds(total));
  Emit("objects", static_cast<double>(parsed));
  Emit("stream_entries", static_cast<double>(stream_entries));
  Emit("peak_mib", StatusMiB("VmHWM:"));
  Emit("base_mib", base);
  redisFree(c);
  return 0;
}

int SplicePhase(int port) {
  const double base = StatusMiB("VmRSS:");
  auto redis = redisstore::RedisConnection::Connect(RedisAt(port));
  if (!redis.ok()) {
    std::cerr << redis.status() << "\n";
    return 3;
  }
  redisstore::MaterializationStore store(redis->get(), redisstore::KeyPrefix::Default(), kGvr,
                                         kScope);
  absl::Time t0 = absl::Now();
  auto view = store.Load();
  if (!view.ok()) {
    std::cerr << view.status() << "\n";
    return 4;
  }
  absl::Time t1 = absl::Now();
  const double load_peak = StatusMiB("VmHWM:");
  const double view_mib = StatusMiB("VmRSS:");
  splicer::DedupCache dedup;  // seeded as SpliceStream seeds it before tailing
  auto snapshot =
      splicer::BuildSnapshot(*view, AllNamespaces(), BenchTarget("splice"), BenchClaim(), &dedup);
  if (!snapshot.ok()) {
    std::cerr << snapshot.status() << "\n";
    return 5;
  }
  absl::Time t2 = absl::Now();
  // Aside (untimed above): a target following one of the 100 namespaces of this cluster-wide
  // materialization.
  splicer::TargetScope one_namespace;
  one_namespace.namespaces["team-00"].set_all(true);
  absl::Time s0 = absl::Now();
  auto scoped = splicer::BuildSnapshot(*view, one_namespace, BenchTarget("scoped"), BenchClaim());
  Emit("scoped_build_s", absl::ToDoubleSeconds(absl::Now() - s0));
  Emit("scoped_desired", scoped.ok() ? scoped->desired_size() : -1);
  absl::Time t2b = absl::Now();
  view = redisstore::MaterializationView();  // SendResync drops the view before sending too
  absl::Time t3 = absl::Now();
  reverser::v1::DeliveryMessage message;
  *message.mutable_resync() = std::move(*snapshot);
  std::string wire = message.SerializeAsString();
  absl::Time t4 = absl::Now();
  Emit("load_s", absl::ToDoubleSeconds(t1 - t0));
  Emit("load_peak_mib", load_peak);
  Emit("view_mib", view_mib);
  Emit("build_s", absl::ToDoubleSeconds(t2 - t1));
  Emit("free_s", absl::ToDoubleSeconds(t3 - t2b));
  Emit("encode_s", absl::ToDoubleSeconds(t4 - t3));
  Emit("total_s", absl::ToDoubleSeconds(t4 - t0 - (t2b - t2)));
  Emit("desired", message.resync().desired_size());
  Emit("exact", message.resync().desired_size() == absl::GetFlag(FLAGS_expect_desired) &&
                    dedup.size() == static_cast<size_t>(message.resync().desired_size()));
  Emit("wire_mib", wire.size() / (1024.0 * 1024.0));
  // What seeding the dedup cost before it moved into BuildSnapshot: a second parse of every body.
  absl::Time r0 = absl::Now();
  splicer::DedupCache reparsed;
  splicer::SeedDedup(message.resync(), reparsed);
  Emit("reparse_seed_s", absl::ToDoubleSeconds(absl::Now() - r0));
  Emit("peak_mib", StatusMiB("VmHWM:"));
  Emit("base_mib", base);
  return 0;
}

int TailPhase(int port) {
  const double base = StatusMiB("VmRSS:");
  const std::string target_uid = absl::GetFlag(FLAGS_target_uid);
  const int64_t expect = absl::GetFlag(FLAGS_expect_events);
  auto last = core::StreamPosition::Parse(absl::GetFlag(FLAGS_last_position));
  if (!last.ok()) return 2;
  auto redis = redisstore::RedisConnection::Connect(RedisAt(port));
  if (!redis.ok()) return 3;
  redisstore::MaterializationStore store(redis->get(), redisstore::KeyPrefix::Default(), kGvr,
                                         kScope);
  auto checkpoint = store.CheckpointPosition();
  if (!checkpoint.ok() || !checkpoint->has_value()) return 3;
  // Delivered up to the checkpoint: the stream resumes there and drains every entry.
  redisstore::DeliveryCursorStore cursors(redis->get(), redisstore::KeyPrefix::Default());
  // Of the checkpoint's incarnation: a cursor of another one makes the stream splice again.
  if (!cursors.Offer(target_uid, kGvr, kScope, **checkpoint, absl::GetFlag(FLAGS_incarnation))
           .ok()) {
    return 3;
  }

  AcceptingGitWorker peer;
  LocalGrpcServer server = LocalGrpcServer::Start(&peer);
  splicer::DeliveryClient delivery(absl::StrCat("127.0.0.1:", server.port), 1000,
                                   grpc::InsecureChannelCredentials());
  delivery.Start();
  runtime::MetricsRegistry metrics;
  splicer::SpliceStreamOptions options;
  options.target = BenchTarget(target_uid);
  options.claim = BenchClaim();
  options.scope = AllNamespaces();
  options.redis = RedisAt(port);
  options.attribution = absl::GetFlag(FLAGS_attribution);
  options.attribution_grace = absl::Milliseconds(absl::GetFlag(FLAGS_grace_ms));
  splicer::SpliceStream stream(options, &delivery, &metrics);
  if (!delivery.WaitConnected(absl::Seconds(10))) return 4;

  absl::Time start = absl::Now();
  stream.Start();
  bool all = peer.WaitForEvents(expect, absl::Minutes(10));
  absl::Time events_done = absl::Now();
  bool persisted = testing::WaitFor(
      [&] {
        auto cursor = cursors.Read(target_uid, kGvr, kScope);
        return cursor.ok() && cursor->has_value() && **cursor >= *last;
      },
      absl::Minutes(2), absl::Milliseconds(2));
  absl::Time cursor_done = absl::Now();
  stream.Stop();
  delivery.Stop();
  server.server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Milliseconds(200)));
  Emit("events", static_cast<double>(peer.events()));
  Emit("complete", all && persisted && peer.resyncs() == 0);
  Emit("events_s", absl::ToDoubleSeconds(events_done - start));
  Emit("cursor_s", absl::ToDoubleSeconds(cursor_done - start));
  Emit("peak_mib", StatusMiB("VmHWM:"));
  Emit("base_mib", base);
  return 0;
}

// ---- parent ----

// Where per-object time goes in the splice and the tail (in this process, no I/O).
struct StageTimes {
  double parse_us = 0, sanitize_us = 0, dump_us = 0, hash_us = 0;
};

StageTimes TimeStages(const redisstore::ObjectMap& objects) {
  StageTimes t;
  absl::Duration parse, sanitize, dump, hash;
  for (const auto& [identity, text] : objects) {
    absl::Time t0 = absl::Now();
    auto object = nlohmann::json::parse(text, nullptr, false);
    absl::Time t1 = absl::Now();
    auto sanitized = sanitize::Sanitize(object);
    absl::Time t2 = absl::Now();
    if (!sanitized.ok()) continue;
    std::string body = sanitized->dump();
    absl::Time t3 = absl::Now();
    std::string content_hash = sanitize::ContentHash(*sanitized);
    absl::Time t4 = absl::Now();
    parse += t1 - t0;
    sanitize += t2 - t1;
    dump += t3 - t2;
    hash += t4 - t3;
  }
  const double n = std::max<size_t>(1, objects.size());
  t.parse_us = absl::ToDoubleMicroseconds(parse) / n;
  t.sanitize_us = absl::ToDoubleMicroseconds(sanitize) / n;
  t.dump_us = absl::ToDoubleMicroseconds(dump) / n;
  t.hash_us = absl::ToDoubleMicroseconds(hash) / n;
  return t;
}

absl::StatusOr<Results> RunPhase(const std::string& phase, int port,
                                 std::vector<std::string> extra) {
  auto dir = testing::MakeTempDir("splice-bench");
  if (!dir.ok()) return dir.status();
  testing::ProcessOptions options;
  options.argv = {"/proc/self/exe", absl::StrCat("--phase=", phase),
                  absl::StrCat("--redis_port=", port)};
  options.argv.insert(options.argv.end(), extra.begin(), extra.end());
  options.log_dir = *dir;
  options.name = phase;
  // /proc/self/exe resolves in the child to this same binary.
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) options.argv[0] = std::string(self, n);
  auto child = testing::ChildProcess::Start(options);
  if (!child.ok()) return child.status();
  auto status = child->Wait(absl::Minutes(20));
  if (!status.ok()) return status.status();
  Results results;
  for (absl::string_view line : absl::StrSplit(child->Stdout(), '\n')) {
    if (!absl::ConsumePrefix(&line, "RESULT ")) continue;
    std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
    double value = 0;
    if (absl::SimpleAtod(kv.second, &value)) results[kv.first] = value;
  }
  if (*status != 0 || results.empty()) {
    return absl::InternalError(absl::StrCat(phase, " phase failed (status ", *status,
                                            "): ", child->Stderr().substr(0, 2000)));
  }
  testing::RemoveTree(*dir);
  return results;
}

std::string Count(double n) {
  std::string digits = absl::StrCat(static_cast<int64_t>(n + 0.5));
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

int Main() {
  const int n = absl::GetFlag(FLAGS_objects);
  const int m = absl::GetFlag(FLAGS_entries);
  auto deployment = LoadTemplate();
  if (!deployment.ok()) {
    std::cerr << deployment.status() << "\n";
    return 1;
  }
  WorkloadOptions wopts;
  wopts.objects = n;
  wopts.entries = m;
  Workload w = MakeWorkload(wopts, *deployment);

  auto server = testing::RedisServer::Start();
  if (!server.ok()) {
    std::cerr << server.status() << "\n";
    return 1;
  }
  const int port = (*server)->port();
  auto redis = redisstore::RedisConnection::Connect(RedisAt(port));
  if (!redis.ok()) return 1;
  redisstore::MaterializationStore store(redis->get(), redisstore::KeyPrefix::Default(), kGvr,
                                         kScope);
  redisstore::AuthorFactStore facts(redis->get(), redisstore::KeyPrefix::Default(), absl::Hours(2));

  absl::Time t = absl::Now();
  auto swap = store.ReplaceCheckpoint(w.checkpoint, w.checkpoint_position);
  if (!swap.ok() || !swap->swapped) {
    std::cerr << "checkpoint: " << swap.status() << "\n";
    return 1;
  }
  absl::Duration checkpoint_time = absl::Now() - t;
  t = absl::Now();
  core::StreamPosition last_position;
  for (const auto& entry : w.entries) {
    auto appended = store.Append(entry);
    if (!appended.ok() || !appended->appended) {
      std::cerr << "append " << entry.Identity() << ": " << appended.status() << "\n";
      return 1;
    }
    last_position = appended->position;
  }
  absl::Duration append_time = absl::Now() - t;
  t = absl::Now();
  for (const auto& entry : w.entries) {
    redisstore::AuthorFact fact;
    fact.group_resource = redisstore::GroupResourceSegment(kGvr);
    fact.namespace_ = entry.namespace_;
    fact.name = entry.name;
    fact.uid = entry.uid;
    fact.author = "alice";
    fact.verb = entry.op == redisstore::ChangeOp::kAdded     ? "create"
                : entry.op == redisstore::ChangeOp::kDeleted ? "delete"
                                                             : "update";
    fact.resource_version = entry.resource_version;
    if (absl::Status s = facts.Record(fact); !s.ok()) {
      std::cerr << "fact: " << s << "\n";
      return 1;
    }
  }
  absl::Duration facts_time = absl::Now() - t;

  // What a stream from the checkpoint must deliver: the pure derivation, also timed alone.
  t = absl::Now();
  splicer::DedupCache dedup;
  int64_t expected_events = 0;
  const auto gvr_proto = core::ToProto(kGvr);
  const splicer::TargetScope scope = AllNamespaces();
  for (const auto& entry : w.entries) {
    if (splicer::DeriveEvent(entry, scope, gvr_proto, dedup).event) ++expected_events;
  }
  absl::Duration derive_time = absl::Now() - t;
  const StageTimes stages = TimeStages(w.checkpoint);
  const size_t live_after = w.live_after;
  const double mib = w.bytes / (1024.0 * 1024.0);
  const double avg_kib = w.bytes / 1024.0 / (n + m);
  std::cout << absl::StrFormat(
      "splicer bench: %s Deployments (%.1f KiB JSON each, from the captured deployment-live.json) "
      "in the checkpoint + %s stream entries after it (%s creates, %s spec updates, %s "
      "status-only, %s deletes) = %.0f MiB of object JSON; %s objects after the fold\n",
      Count(n), avg_kib, Count(m), Count(w.creates), Count(w.updates), Count(w.status_updates),
      Count(w.deletes), mib, Count(live_after));
  std::cout << absl::StrFormat(
      "  setup through libs/redisstore (the materializer's calls): checkpoint of %s in %.2f s; "
      "Append %s entries/s; author facts %s/s\n",
      Count(n), absl::ToDoubleSeconds(checkpoint_time),
      Count(m / absl::ToDoubleSeconds(append_time)), Count(m / absl::ToDoubleSeconds(facts_time)));
  w = Workload();  // the children measure; this process only keeps the expectations

  const int runs = std::max(1, absl::GetFlag(FLAGS_runs));
  const bool skip_splice = absl::GetFlag(FLAGS_skip_splice);
  // Anchor and splice interleaved, the same number of runs each; both timed inside their child
  // process from a connected client to the last byte handled (and freed).
  std::vector<Results> anchors, splices;
  for (int run = 0; run < runs; ++run) {
    auto anchor = RunPhase("anchor", port, {});
    if (!anchor.ok()) {
      std::cerr << anchor.status() << "\n";
      return 1;
    }
    anchors.push_back(*std::move(anchor));
    if (skip_splice) continue;
    auto splice = RunPhase("splice", port, {absl::StrCat("--expect_desired=", live_after)});
    if (!splice.ok()) {
      std::cerr << splice.status() << "\n";
      return 1;
    }
    if ((*splice)["exact"] <= 0) {
      std::cerr << "splice run " << run + 1 << ": the desired set is not exact\n";
      return 1;
    }
    splices.push_back(*std::move(splice));
  }
  auto column = [](const std::vector<Results>& rows, const std::string& key) {
    std::vector<double> values;
    for (const Results& row : rows) values.push_back(row.at(key));
    return values;
  };
  auto mmm = [](const std::vector<double>& values, const char* format) {
    const Stats st = StatsOf(values);
    return absl::StrCat(absl::StrFormat(format, st.median), " (", absl::StrFormat(format, st.min),
                        "–", absl::StrFormat(format, st.max), ")");
  };
  const std::vector<double> anchor_s = column(anchors, "total_s");
  const std::vector<double> anchor_peak = column(anchors, "peak_mib");
  const Results& a = anchors.front();
  std::cout << absl::StrFormat(
      "  anchor (%d runs; median (min–max)): raw hiredis HGETALL + XRANGE of both keys %s s, "
      "bare JSON parse of the same %s objects %s s; read+parse+free %s s; peak RSS %s MiB\n",
      runs, mmm(column(anchors, "read_s"), "%.2f"), Count(a.at("objects")),
      mmm(column(anchors, "parse_s"), "%.2f"), mmm(anchor_s, "%.2f"), mmm(anchor_peak, "%.0f"));

  const std::string how = absl::StrCat(
      "both in their own child process, timed from a connected Redis client to the last byte "
      "handled and freed; ",
      runs, " runs each, interleaved; peak RSS is each child's VmHWM");
  const std::string size = absl::StrCat(Count(n), " objects + ", Count(m), " entries");
  if (!skip_splice) {
    const std::vector<double> splice_s = column(splices, "total_s");
    const std::vector<double> splice_peak = column(splices, "peak_mib");
    const Results& s = splices.front();
    std::cout << absl::StrFormat(
        "  splice (%d runs; checkpoint + %s entries -> desired set, as a resync): %s s = load %s "
        "+ fold, scope, sanitize, dedup seed %s + free the view %s + wire encode %s; %s desired "
        "(exact in every run); %.0f MiB on the wire; peak RSS %s MiB (%.1fx the JSON; %s MiB of "
        "it reached inside MaterializationStore::Load)\n"
        "    against the anchor, ratio of medians: %.2fx its time, %.2fx its peak RSS\n"
        "    a target following 1 of the 100 namespaces: %s desired, built in %s s\n"
        "    for comparison, seeding the dedup by re-parsing every desired body: %s s\n",
        runs, Count(m), mmm(splice_s, "%.2f"), mmm(column(splices, "load_s"), "%.2f"),
        mmm(column(splices, "build_s"), "%.2f"), mmm(column(splices, "free_s"), "%.2f"),
        mmm(column(splices, "encode_s"), "%.2f"), Count(s.at("desired")), s.at("wire_mib"),
        mmm(splice_peak, "%.0f"), Median(splice_peak) / mib,
        mmm(column(splices, "load_peak_mib"), "%.0f"), Median(splice_s) / Median(anchor_s),
        Median(splice_peak) / Median(anchor_peak), Count(s.at("scoped_desired")),
        mmm(column(splices, "scoped_build_s"), "%.3f"),
        mmm(column(splices, "reparse_seed_s"), "%.2f"));
    EmitFigure(
        {.bench = "splice",
         .figure = "splice_time",
         .label = absl::StrCat("splice of ", size, " into a resync"),
         .unit = "s",
         .better = "lower",
         .samples = splice_s,
         .anchor = Series{"read_parse_s",
                          "raw HGETALL + XRANGE and a bare JSON parse of every object", anchor_s},
         .timing = how,
         .extra = {{"objects", n}, {"entries", m}}});
    // The goal names a number at a size, not an anchor: judged only at that size.
    std::optional<Goal> rss_goal;
    if (n >= 100000)
      rss_goal = Goal{"≤ 300 MiB per service at 100,000 objects", "value", "<=", 300};
    EmitFigure({.bench = "splice",
                .figure = "splice_peak_rss",
                .label = absl::StrCat("peak RSS of that splice (", Count(mib), " MiB of JSON)"),
                .unit = "MiB",
                .better = "lower",
                .samples = splice_peak,
                .anchor = Series{"read_parse_peak_mib", "the anchor's peak RSS", anchor_peak},
                .goal = rss_goal,
                .timing = how,
                .extra = {{"objects", n}, {"entries", m}}});
  }

  struct TailRun {
    const char* name;
    const char* label;
    std::vector<std::string> flags;
  };
  const std::vector<TailRun> all_runs = {
      {"off", "attribution off (no fact lookups)", {"--attribution=false"}},
      {"grace0", "grace disabled (0 s: one lookup, then the committer)", {"--grace_ms=0"}},
      {"grace3s",
       "grace enabled (3 s; lookups back off 5 -> 150 ms; each event's exact uid:rv fact there)",
       {"--grace_ms=3000"}},
      {"nofacts",
       "grace enabled (3 s) with no facts at all (audit not wired up): each waits 3 s",
       {"--grace_ms=3000", "--no_facts"}},
  };
  std::vector<TailRun> modes;
  const std::vector<std::string> wanted = absl::StrSplit(absl::GetFlag(FLAGS_tail_runs), ',');
  for (const TailRun& run : all_runs) {
    if (std::find(wanted.begin(), wanted.end(), run.name) != wanted.end()) modes.push_back(run);
  }
  std::cout << absl::StrFormat(
      "  live tail: a SpliceStream drains the %s entries from a cursor at the checkpoint into a "
      "gitworker that accepts and acks each event at once (%s events expected; the rest are "
      "status-only no-ops); %d runs per mode, the modes with facts interleaved, no facts last\n",
      Count(m), Count(expected_events), runs);
  // Modes with facts round-robin (off, grace0, grace3s, off, ...); the no-facts mode deletes
  // every fact, so its runs come last.
  std::vector<const TailRun*> order;
  for (int run = 0; run < runs; ++run) {
    for (const TailRun& mode : modes) {
      if (std::string(mode.name) != "nofacts") order.push_back(&mode);
    }
  }
  for (int run = 0; run < runs; ++run) {
    for (const TailRun& mode : modes) {
      if (std::string(mode.name) == "nofacts") order.push_back(&mode);
    }
  }
  std::map<std::string, std::vector<double>> rates, peaks, cursors;
  bool facts_dropped = false;
  int index = 0;
  for (const TailRun* run : order) {
    std::vector<std::string> flags = {absl::StrCat("--target_uid=tail-", index++),
                                      absl::StrCat("--expect_events=", expected_events),
                                      absl::StrCat("--last_position=", last_position.ToString()),
                                      absl::StrCat("--incarnation=", swap->incarnation)};
    bool no_facts = false;
    for (const auto& f : run->flags) {
      if (f == "--no_facts") {
        no_facts = true;
      } else {
        flags.push_back(f);
      }
    }
    if (no_facts && !facts_dropped) {
      facts_dropped = true;
      // Drop every author fact (SCAN + UNLINK).
      std::string cursor = "0";
      do {
        auto reply =
            (*redis)->Command({"SCAN", cursor, "MATCH", "reverser:author:*", "COUNT", "1000"});
        if (!reply.ok()) return 1;
        cursor = reply->elements()[0].str();
        redisstore::RedisCommand unlink = {"UNLINK"};
        for (const auto& key : reply->elements()[1].elements()) unlink.push_back(key.str());
        if (unlink.size() > 1 && !(*redis)->Command(unlink).ok()) return 1;
      } while (cursor != "0");
    }
    auto r = RunPhase("tail", port, flags);
    if (!r.ok()) {
      std::cerr << run->label << ": " << r.status() << "\n";
      return 1;
    }
    auto& x = *r;
    if (x["complete"] <= 0) {
      std::cerr << run->label << ": incomplete (" << x["events"] << " events)\n";
      return 1;
    }
    rates[run->name].push_back(x["events"] / x["events_s"]);
    peaks[run->name].push_back(x["peak_mib"]);
    cursors[run->name].push_back(x["cursor_s"]);
  }
  const double derive_rate = m / absl::ToDoubleSeconds(derive_time);
  for (const TailRun& mode : modes) {
    std::cout << absl::StrFormat(
        "    %-78s %s events/s; all acked and the cursor persisted after %s s; peak RSS %s MiB\n",
        mode.label, mmm(rates[mode.name], "%.0f"), mmm(cursors[mode.name], "%.2f"),
        mmm(peaks[mode.name], "%.0f"));
    EmitFigure({.bench = "splice",
                .figure = absl::StrCat("tail_", mode.name),
                .label = absl::StrCat("live tail, ", mode.label),
                .unit = "events/s",
                .better = "higher",
                .samples = rates[mode.name],
                .goal = Goal{"≥ 1,000 changes/s (issue #6)", "value", ">=", 1000},
                .timing = absl::StrCat("in its own child process, from SpliceStream::Start to "
                                       "the last event received by the peer; ",
                                       runs, " runs"),
                .extra = {{"entries", m},
                          {"events", expected_events},
                          {"peak_rss_mib", peaks[mode.name]},
                          {"context_derive_event_per_s", derive_rate}}});
  }
  std::cout << absl::StrFormat(
      "    context (not an anchor: one in-process pass, no I/O): DeriveEvent alone (parse, scope, "
      "sanitize, hash) %s entries/s; raw XRANGE+HGETALL %s objects/s\n"
      "  per object (no I/O): parse %.1f us, sanitize %.1f us, dump %.1f us, content hash %.1f "
      "us\n",
      Count(derive_rate), Count(a.at("objects") / Median(column(anchors, "read_s"))),
      stages.parse_us, stages.sanitize_us, stages.dump_us, stages.hash_us);
  return 0;
}

}  // namespace
}  // namespace reverser::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string phase = absl::GetFlag(FLAGS_phase);
  const int port = absl::GetFlag(FLAGS_redis_port);
  if (phase == "anchor") return reverser::bench::AnchorPhase(port);
  if (phase == "splice") return reverser::bench::SplicePhase(port);
  if (phase == "tail") return reverser::bench::TailPhase(port);
  return reverser::bench::Main();
}
