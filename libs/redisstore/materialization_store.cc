#include "libs/redisstore/materialization_store.h"

#include <algorithm>
#include <deque>
#include <iterator>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "libs/core/status.h"
#include "libs/redisstore/append_plan.h"
#include "libs/redisstore/lua_positions.h"
#include "nlohmann/json.hpp"

namespace reverser::redisstore {
namespace {

using core::StreamPosition;

// AppendAll writes at most this many entries (and object bytes, unless a single entry has more)
// per transaction: EXEC blocks Redis while it runs, and the client holds a chunk's commands.
constexpr size_t kAppendEntriesPerChunk = 256;
constexpr size_t kAppendBytesPerChunk = 4 << 20;
// A chunk whose watched keys keep changing under it (checkpoint swaps, another writer) is read
// and decided again at most this many times in all.
constexpr int kAppendAttempts = 8;

// The swap: refuse an older generation, install the staged items and the position together
// with the lineage record (incarnation and item count), register the index, then trim what the
// new checkpoint covers.
// KEYS: ckpt:items, staging, ckpt:rv, stream, index, ckpt:meta.
// ARGV: position, trim MINID ("" = none), expected item count, index member,
//       base ("" = any; else the checkpoint the new one was folded from must still be live, of
//       incarnation ARGV[6]), incarnation to record.
// Fenced (WriteFence): KEYS 7, 8 are the unit's epoch and owner, ARGV 7, 8 the fence's; a stale
// fence deletes the staging hash and writes nothing ({'fenced', epoch, owner, ''}).
const LuaScript& SwapScript() {
  static const LuaScript* script = new LuaScript(absl::StrCat(internal::kLuaPositionHelpers, R"lua(
if #KEYS >= 8 then
  local epoch = redis.call('GET', KEYS[7])
  local owner = redis.call('GET', KEYS[8]) or ''
  if not epoch or epoch ~= ARGV[7] or owner ~= ARGV[8] then
    redis.call('DEL', KEYS[2])
    return {'fenced', epoch or '0', owner, ''}
  end
end
local cur = redis.call('GET', KEYS[3])
local stale = cur and cmpid(ARGV[1], cur) < 0
if ARGV[5] ~= '' then
  local inc = redis.call('HGET', KEYS[6], 'incarnation') or ''
  stale = stale or not cur or cmpid(cur, ARGV[5]) ~= 0 or inc ~= ARGV[6]
end
if stale then
  redis.call('DEL', KEYS[2])
  return {'stale', cur or '', 0, ''}
end
local expected = tonumber(ARGV[3])
if redis.call('HLEN', KEYS[2]) ~= expected then
  redis.call('DEL', KEYS[2])
  return {'incomplete', '', 0, ''}
end
if expected > 0 then
  redis.call('RENAME', KEYS[2], KEYS[1])
  redis.call('PERSIST', KEYS[1])
else
  redis.call('DEL', KEYS[1])
end
redis.call('SET', KEYS[3], ARGV[1])
redis.call('HSET', KEYS[6], 'incarnation', ARGV[6], 'items', ARGV[3])
redis.call('SADD', KEYS[5], ARGV[4])
local trimmed = 0
if ARGV[2] ~= '' then trimmed = redis.call('XTRIM', KEYS[4], 'MINID', ARGV[2]) end
return {'swapped', ARGV[1], trimmed, ARGV[6]}
)lua"));
  return *script;
}

// An append chunk's round trip 2 under a fence, sent inside the chunk's MULTI/EXEC (so the WATCH
// still applies): the fence check and the writes in one script, nothing between them.
// KEYS: epoch, owner, then the keys the commands touch. ARGV: epoch, owner, number of commands,
// then per command its argument count and arguments. Returns {1, {replies}} (a failed command's
// reply is its error, as in MULTI/EXEC), or {0, current epoch, current owner}, nothing written.
const LuaScript& FencedAppendScript() {
  static const LuaScript* script = new LuaScript(R"lua(
local epoch = redis.call('GET', KEYS[1])
local owner = redis.call('GET', KEYS[2]) or ''
if not epoch or epoch ~= ARGV[1] or owner ~= ARGV[2] then return {0, epoch or '0', owner} end
local n = tonumber(ARGV[3])
local i = 4
local replies = {}
for c = 1, n do
  local argc = tonumber(ARGV[i])
  local args = {}
  for a = 1, argc do args[a] = ARGV[i + a] end
  i = i + argc + 1
  replies[c] = redis.pcall(unpack(args))
end
return {1, replies}
)lua");
  return *script;
}

// An abandoned staging hash (writer died before the swap) disappears on its own.
constexpr int kStagingTtlSeconds = 3600;
// HSET batch limits while staging a checkpoint.
constexpr size_t kStagingFieldsPerCommand = 512;
constexpr size_t kStagingBytesPerCommand = 4 << 20;

// The smallest position strictly after `p`; nullopt when `p` is the very last one.
std::optional<StreamPosition> Next(StreamPosition p) {
  if (p.seq() != UINT64_MAX) return StreamPosition(p.rv(), p.seq() + 1);
  if (p.rv() != UINT64_MAX) return StreamPosition(p.rv() + 1, 0);
  return std::nullopt;
}

std::string GenerationId() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return absl::StrCat(absl::Hex(rng(), absl::kZeroPad16));
}

// A stored body as readers see it: opened when sealed. A sealed body without a cipher, or one
// that does not open, is an error.
absl::Status OpenBody(const BodyCipher* cipher, std::string& body, absl::string_view where) {
  if (!BodyCipher::IsSealed(body)) return absl::OkStatus();
  if (cipher == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        where, ": the body is sealed (a sensitive type) and no --redis_body_key_file is set"));
  }
  absl::StatusOr<std::string> opened = cipher->Open(body);
  if (!opened.ok()) return core::Annotate(opened.status(), where);
  body = std::move(*opened);
  return absl::OkStatus();
}

// Parses XRANGE/XREAD entries ([[id, [f, v, ...]], ...]) into `batch`, skipping malformed ones;
// sealed bodies are opened with `cipher`.
absl::Status ParseEntries(const RedisReply& reply, StreamBatch& batch, const BodyCipher* cipher) {
  if (reply.IsNil()) return absl::OkStatus();
  if (!reply.IsArray()) {
    return absl::InternalError(
        absl::StrCat("stream read: unexpected reply ", reply.DebugString().substr(0, 200)));
  }
  for (const RedisReply& item : reply.elements()) {
    if (!item.IsArray() || item.elements().size() != 2) {
      ++batch.malformed;
      continue;
    }
    auto id = item.elements()[0].AsString();
    if (!id.ok()) {
      ++batch.malformed;
      continue;
    }
    if (auto position = StreamPosition::Parse(*id); position.ok()) batch.last_scanned = *position;
    auto fields = item.elements()[1].AsStringArray();
    if (!fields.ok()) {
      ++batch.malformed;
      continue;
    }
    auto entry = DecodeEntry(*id, *fields);
    if (!entry.ok()) {
      ++batch.malformed;
      continue;
    }
    RETURN_IF_ERROR(OpenBody(cipher, entry->object_json, absl::StrCat("stream entry ", *id)));
    batch.entries.push_back(std::move(*entry));
  }
  return absl::OkStatus();
}

absl::Status ValidateForAppend(const StreamEntry& entry) {
  if (entry.name.empty()) return absl::InvalidArgumentError("stream entry: no object name");
  if (entry.op != ChangeOp::kDeleted && entry.object_json.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("stream entry ", entry.Identity(), ": an upsert needs an object body"));
  }
  return absl::OkStatus();
}

// The commands that read a lineage mark (besides `GET ckpt:rv`), in this order; ParseMark reads
// their replies.
std::vector<RedisCommand> MarkReads(const MaterializationKeys& keys) {
  return {{"HMGET", keys.checkpoint_meta, "incarnation", "items"},
          {"HLEN", keys.checkpoint_items},
          {"HGET", keys.counts, "top"}};
}

// `checkpoint` is GET ckpt:rv's reply, `reads` the replies of MarkReads. `top_known` is cleared
// when `counts top` is absent (a stream written before it existed, or none at all).
absl::StatusOr<LineageMark> ParseMark(const MaterializationKeys& keys, const RedisReply& checkpoint,
                                      absl::Span<const RedisReply> reads, bool* top_known) {
  for (const RedisReply& reply : reads) RETURN_IF_ERROR(reply.ErrorStatus());
  LineageMark mark;
  ASSIGN_OR_RETURN(std::optional<std::string> ckpt, checkpoint.AsOptionalString());
  if (ckpt) {
    auto position = StreamPosition::Parse(*ckpt);
    if (!position.ok()) return core::Annotate(position.status(), keys.checkpoint_rv);
    mark.checkpoint = *position;
  }
  const auto& meta = reads[0].elements();
  if (meta.size() == 2) {
    if (meta[0].type() == RedisReply::Type::kString) mark.incarnation = meta[0].str();
    int64_t recorded = 0;
    if (mark.checkpoint && meta[1].type() == RedisReply::Type::kString &&
        absl::SimpleAtoi(meta[1].str(), &recorded)) {
      ASSIGN_OR_RETURN(int64_t held, reads[1].AsInteger());
      mark.damaged = held != recorded;
    }
  }
  ASSIGN_OR_RETURN(std::optional<std::string> top, reads[2].AsOptionalString());
  if (top_known != nullptr) *top_known = top.has_value();
  if (top) {
    auto position = StreamPosition::Parse(*top);
    if (!position.ok()) return core::Annotate(position.status(), keys.counts + " top");
    mark.top = *position;
  }
  return mark;
}

}  // namespace

absl::string_view DivertReasonName(DivertReason reason) {
  switch (reason) {
    case DivertReason::kOlderThanStreamTop:
      return "older_than_stream_top";
    case DivertReason::kCoveredByCheckpoint:
      return "covered_by_checkpoint";
    case DivertReason::kNonNumericRv:
      return "non_numeric_rv";
    case DivertReason::kRvlessEmptyStream:
      return "rvless_empty_stream";
    case DivertReason::kDuplicateOfStreamTop:
      return "duplicate_of_stream_top";
  }
  return "unknown";
}

ObjectMap MaterializationView::Fold(StreamPosition through) const {
  ObjectMap objects = checkpoint_items;
  for (const StreamEntry& entry : tail) {
    if (entry.position > through) break;
    ApplyEntry(entry, objects);
  }
  return objects;
}

StreamPosition MaterializationView::CoverageHead() const {
  if (!tail.empty()) return tail.back().position;
  return checkpoint.value_or(StreamPosition::Zero());
}

std::string MaterializationState::ToJson() const {
  nlohmann::json j = {
      {"phase", phase},
      {"group", gvr.group},
      {"version", gvr.version},
      {"resource", gvr.resource},
      {"scope", scope.KeySegment()},
      {"objectCount", object_count},
      {"checkpoint", checkpoint},
      {"updatedAt", absl::FormatTime(absl::RFC3339_full, updated_at, absl::UTCTimeZone())},
      {"message", message},
      {"reason", reason},
  };
  return j.dump();
}

absl::StatusOr<MaterializationState> MaterializationState::FromJson(absl::string_view json) {
  nlohmann::json j = nlohmann::json::parse(json.begin(), json.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("materialization state is not a JSON object");
  }
  MaterializationState state;
  auto text = [&](const char* field) -> std::string {
    auto it = j.find(field);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  state.phase = text("phase");
  state.gvr = {text("group"), text("version"), text("resource")};
  if (state.gvr.resource.empty()) {
    return absl::InvalidArgumentError("materialization state has no resource");
  }
  auto scope = core::WatchScope::ParseKeySegment(text("scope"));
  if (!scope.ok()) return core::Annotate(scope.status(), "materialization state");
  state.scope = *scope;
  if (auto it = j.find("objectCount"); it != j.end() && it->is_number_integer()) {
    state.object_count = it->get<int64_t>();
  }
  state.checkpoint = text("checkpoint");
  std::string updated = text("updatedAt");
  std::string error;
  if (!updated.empty() &&
      !absl::ParseTime(absl::RFC3339_full, updated, &state.updated_at, &error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("materialization state updatedAt \"", updated, "\": ", error));
  }
  state.message = text("message");
  state.reason = text("reason");
  return state;
}

MaterializationStore::MaterializationStore(RedisConnection* redis, KeyPrefix prefix,
                                           core::GroupVersionResource gvr, core::WatchScope scope)
    : redis_(redis),
      prefix_(std::move(prefix)),
      gvr_(std::move(gvr)),
      scope_(std::move(scope)),
      keys_(MaterializationKeys::For(prefix_, gvr_, scope_)),
      index_key_(MaterializationIndexKey(prefix_)) {}

namespace {

using internal::AppendPlan;
using internal::AppendSnapshot;
using internal::LastEntry;
using internal::PreparedChunk;

// Round trip 1 of an append: WATCH what the rules depend on and read it, with the lineage mark
// the guard judges.
struct AppendRead {
  AppendSnapshot snapshot;
  LineageMark mark;
};
absl::StatusOr<AppendRead> WatchForAppend(RedisConnection& redis, const MaterializationKeys& keys) {
  std::vector<RedisCommand> commands = {
      {"WATCH", keys.stream, keys.checkpoint_rv, keys.checkpoint_meta, keys.counts},
      {"EXISTS", keys.stream},
      {"GET", keys.checkpoint_rv}};
  for (RedisCommand& read : MarkReads(keys)) commands.push_back(std::move(read));
  ASSIGN_OR_RETURN(std::vector<RedisReply> replies, redis.Pipeline(commands));
  for (const RedisReply& reply : replies) RETURN_IF_ERROR(reply.ErrorStatus());
  AppendRead read;
  ASSIGN_OR_RETURN(read.mark,
                   ParseMark(keys, replies[2], absl::MakeConstSpan(replies).subspan(3), nullptr));
  AppendSnapshot& snapshot = read.snapshot;
  snapshot.checkpoint = read.mark.checkpoint;
  ASSIGN_OR_RETURN(int64_t exists, replies[1].AsInteger());
  if (exists == 1) {
    // The last generated ID, cached beside the counts by every append; streams written before
    // the cache existed fall back to XINFO STREAM once (it copies the first and last entries).
    ASSIGN_OR_RETURN(std::optional<std::string> cached, replies[5].AsOptionalString());
    if (cached) {
      snapshot.top = read.mark.top;
    } else {
      ASSIGN_OR_RETURN(RedisReply info, redis.Command({"XINFO", "STREAM", keys.stream}));
      const auto& elements = info.elements();
      for (size_t i = 0; i + 1 < elements.size(); i += 2) {
        if (elements[i].str() != "last-generated-id") continue;
        auto top = StreamPosition::Parse(elements[i + 1].str());
        if (!top.ok()) return core::Annotate(top.status(), keys.stream + " last-generated-id");
        snapshot.top = *top;
      }
      read.mark.top = snapshot.top;
    }
  }
  return read;
}

// The stream's last entry (nullopt when empty or unreadable: then it is no duplicate's model).
absl::StatusOr<std::optional<LastEntry>> ReadLastEntry(RedisConnection& redis,
                                                       const MaterializationKeys& keys) {
  ASSIGN_OR_RETURN(RedisReply reply,
                   redis.Command({"XREVRANGE", keys.stream, "+", "-", "COUNT", "1"}));
  if (!reply.IsArray() || reply.elements().empty()) return std::optional<LastEntry>();
  const RedisReply& item = reply.elements()[0];
  if (!item.IsArray() || item.elements().size() != 2) return std::optional<LastEntry>();
  auto id = item.elements()[0].AsString();
  auto fields = item.elements()[1].AsStringArray();
  if (!id.ok() || !fields.ok()) return std::optional<LastEntry>();
  auto position = StreamPosition::Parse(*id);
  if (!position.ok()) return std::optional<LastEntry>();
  return std::optional<LastEntry>(LastEntry{*position, std::move(*fields)});
}

// A watch left behind would abort this connection's next, unrelated transaction.
void Unwatch(RedisConnection& redis) {
  if (redis.connected()) (void)redis.Command({"UNWATCH"});
}

constexpr DivertReason kDivertReasons[] = {
    DivertReason::kOlderThanStreamTop, DivertReason::kCoveredByCheckpoint,
    DivertReason::kNonNumericRv, DivertReason::kRvlessEmptyStream,
    DivertReason::kDuplicateOfStreamTop};

}  // namespace

absl::Status MaterializationStore::OpenStoredBody(std::string& body,
                                                  absl::string_view where) const {
  return OpenBody(cipher_, body, where);
}

absl::Status MaterializationStore::NoCipherError() const {
  return absl::FailedPreconditionError(absl::StrCat(
      keys_.base,
      ": a sensitive type's bodies are sealed before Redis and no --redis_body_key_file "
      "is set; nothing was written"));
}

absl::StatusOr<AppendResult> MaterializationStore::Append(const StreamEntry& entry) {
  ASSIGN_OR_RETURN(std::vector<AppendResult> results,
                   AppendEntries(absl::MakeConstSpan(&entry, 1)));
  return results.front();
}

absl::StatusOr<std::vector<AppendResult>> MaterializationStore::AppendAll(
    const std::vector<StreamEntry>& entries) {
  return AppendEntries(entries);
}

absl::StatusOr<std::vector<AppendResult>> MaterializationStore::AppendEntries(
    absl::Span<const StreamEntry> entries) {
  for (const StreamEntry& entry : entries) RETURN_IF_ERROR(ValidateForAppend(entry));
  std::vector<StreamEntry> sealed;
  if (seal_) {
    if (cipher_ == nullptr) return NoCipherError();
    sealed.assign(entries.begin(), entries.end());
    for (StreamEntry& entry : sealed) {
      if (!entry.object_json.empty()) entry.object_json = cipher_->Seal(entry.object_json);
    }
    entries = absl::MakeConstSpan(sealed);
  }
  std::vector<AppendResult> results(entries.size());
  for (size_t begin = 0; begin < entries.size();) {
    size_t end = begin, bytes = 0;
    for (; end < entries.size() && end - begin < kAppendEntriesPerChunk &&
           (end == begin || bytes + entries[end].object_json.size() <= kAppendBytesPerChunk);
         ++end) {
      bytes += entries[end].object_json.size();
    }
    RETURN_IF_ERROR(AppendChunk(entries.subspan(begin, end - begin),
                                absl::MakeSpan(results).subspan(begin, end - begin)));
    begin = end;
  }
  return results;
}

absl::Status MaterializationStore::AppendChunk(absl::Span<const StreamEntry> entries,
                                               absl::Span<AppendResult> results) {
  RETURN_IF_ERROR(PassGate());
  const PreparedChunk chunk(entries);
  for (int attempt = 1; attempt <= kAppendAttempts; ++attempt) {
    // Round trip 1 (skipped when there is nothing to place): watch and read what the rules need,
    // then decide every entry here.
    AppendSnapshot snapshot;
    if (chunk.NeedsSnapshot()) {
      auto read = WatchForAppend(*redis_, keys_);
      if (!read.ok()) {
        Unwatch(*redis_);
        return read.status();
      }
      snapshot = read->snapshot;
      if (guard_ != nullptr) {
        LineageTracker::Judgement judged = guard_->Observe(read->mark);
        if (judged.verdict == LineageTracker::Verdict::kLost) {
          Unwatch(*redis_);
          return StateLostError(*judged.loss, absl::StrCat("appending to ", keys_.stream));
        }
      }
    }
    auto plan =
        internal::PlanAppends(chunk, snapshot, [&] { return ReadLastEntry(*redis_, keys_); });
    if (!plan.ok()) {
      Unwatch(*redis_);
      return plan.status();
    }
    if (before_append_commit_for_testing_) before_append_commit_for_testing_();

    // Round trip 2: the appends at their explicit IDs and the counters, all or nothing; EXEC
    // writes nothing if a watched key changed since round trip 1.
    std::deque<std::string> strings;  // small arguments (a deque never moves what it holds)
    std::vector<RedisCommandView> commands;
    commands.reserve(plan->appended.size() + 2 + std::size(kDivertReasons));
    for (size_t i : plan->appended) {
      RedisCommandView xadd = {"XADD", keys_.stream,
                               strings.emplace_back(plan->results[i].position.ToString())};
      absl::Span<const absl::string_view> fields = chunk.Fields(i);
      xadd.insert(xadd.end(), fields.begin(), fields.end());
      commands.push_back(std::move(xadd));
    }
    if (!plan->appended.empty()) {
      commands.push_back({"HINCRBY", keys_.counts, "appended",
                          strings.emplace_back(absl::StrCat(plan->appended.size()))});
      commands.push_back({"HSET", keys_.counts, "top", strings.emplace_back(plan->top.ToString())});
    }
    for (DivertReason reason : kDivertReasons) {
      const int64_t n = plan->diverted[static_cast<size_t>(reason)];
      if (n == 0) continue;
      commands.push_back({"HINCRBY", keys_.counts,
                          strings.emplace_back(absl::StrCat("diverted:", DivertReasonName(reason))),
                          strings.emplace_back(absl::StrCat(n))});
    }
    absl::StatusOr<std::vector<RedisReply>> replies;
    if (!fence_) {
      replies = redis_->TransactionViews(commands);
    } else {
      // The same writes, run by the fence's script inside the MULTI/EXEC.
      const Fence& fence = fence_->fence;
      const OwnershipKeys own = OwnershipKeys::For(prefix_, fence.unit);
      RedisCommandView eval = {"EVAL",       FencedAppendScript().source(),
                               "4",          own.epoch,
                               own.owner,    keys_.stream,
                               keys_.counts, strings.emplace_back(absl::StrCat(fence.epoch)),
                               fence.owner,  strings.emplace_back(absl::StrCat(commands.size()))};
      for (const RedisCommandView& command : commands) {
        eval.push_back(strings.emplace_back(absl::StrCat(command.size())));
        eval.insert(eval.end(), command.begin(), command.end());
      }
      auto exec = redis_->TransactionViews({eval});
      if (!exec.ok()) {
        replies = exec.status();
      } else if (exec->size() != 1 || (*exec)[0].IsError()) {
        replies = exec->size() == 1 ? (*exec)[0].ErrorStatus()
                                    : absl::InternalError("fenced append: unexpected EXEC reply");
      } else {
        RedisReply& out = (*exec)[0];
        auto& e = out.mutable_elements();
        if (!out.IsArray() || e.empty() || e[0].type() != RedisReply::Type::kInteger) {
          return absl::InternalError(
              absl::StrCat("fenced append: unexpected reply ", out.DebugString()));
        }
        if (e[0].integer() == 0 && e.size() == 3) {
          return FencedError(fence, e[1].str(), e[2].str());
        }
        if (e.size() != 2 || !e[1].IsArray()) {
          return absl::InternalError(
              absl::StrCat("fenced append: unexpected reply ", out.DebugString()));
        }
        replies = std::move(e[1].mutable_elements());
      }
    }
    if (absl::IsAborted(replies.status())) continue;  // a watched key changed: decide again
    if (!replies.ok()) return core::Annotate(replies.status(), "appending to " + keys_.stream);
    for (size_t k = 0; k < plan->appended.size(); ++k) {
      const RedisReply& reply = (*replies)[k];
      if (reply.IsError() || reply.str() != commands[k][2]) {
        // Only when `counts top` is behind the stream's real last ID (a writer outside this
        // store): the counters were added regardless. Dropping the cached top makes the next
        // append read the real one (XINFO).
        (void)redis_->Command({"HDEL", keys_.counts, "top"});
        return absl::InternalError(absl::StrCat("appending to ", keys_.stream, ": XADD ",
                                                commands[k][2], " got ", reply.DebugString(),
                                                " (the cached top was out of step; dropped)"));
      }
    }
    for (size_t k = plan->appended.size(); k < replies->size(); ++k) {
      RETURN_IF_ERROR(core::Annotate((*replies)[k].ErrorStatus(), "updating " + keys_.counts));
    }
    if (guard_ != nullptr && !plan->appended.empty()) guard_->Advance(plan->top);
    std::move(plan->results.begin(), plan->results.end(), results.begin());
    return absl::OkStatus();
  }
  return absl::AbortedError(absl::StrCat("appending to ", keys_.stream, ": gave up after ",
                                         kAppendAttempts,
                                         " attempts, the stream or checkpoint kept changing "
                                         "between read and write; this chunk wrote nothing"));
}

absl::StatusOr<StreamBatch> MaterializationStore::ReadAfter(StreamPosition after,
                                                            size_t max_entries) {
  if (max_entries == 0) return absl::InvalidArgumentError("ReadAfter: max_entries must be > 0");
  StreamBatch batch;
  batch.last_scanned = after;
  std::optional<StreamPosition> start = Next(after);
  // The checkpoint, its lineage and the entries are read together, so "behind the checkpoint"
  // and a lost state are judged against the same state the entries come from.
  std::vector<RedisCommand> commands = {{"GET", keys_.checkpoint_rv}};
  for (RedisCommand& read : MarkReads(keys_)) commands.push_back(std::move(read));
  const size_t xrange = commands.size();
  if (start) {
    commands.push_back(
        {"XRANGE", keys_.stream, start->ToString(), "+", "COUNT", absl::StrCat(max_entries)});
  }
  ASSIGN_OR_RETURN(std::vector<RedisReply> replies, redis_->Transaction(commands));
  bool top_known = false;
  ASSIGN_OR_RETURN(batch.mark,
                   ParseMark(keys_, replies[0], absl::MakeConstSpan(replies).subspan(1, xrange - 1),
                             &top_known));
  if (batch.mark.checkpoint) batch.behind_checkpoint = after < *batch.mark.checkpoint;
  if (start) {
    RETURN_IF_ERROR(replies[xrange].ErrorStatus());
    RETURN_IF_ERROR(ParseEntries(replies[xrange], batch, cipher_));
  }
  if (!top_known) {
    // A stream written before appends recorded their top: its real last ID, so a reader's head
    // is not judged against the checkpoint alone.
    ASSIGN_OR_RETURN(std::optional<StreamPosition> top, StreamTop());
    if (top) batch.mark.top = *top;
  }
  return batch;
}

absl::StatusOr<StreamBatch> MaterializationStore::WaitAfter(StreamPosition after,
                                                            size_t max_entries,
                                                            absl::Duration block,
                                                            WakeSignal* wake) {
  ASSIGN_OR_RETURN(StreamBatch batch, ReadAfter(after, max_entries));
  if (!batch.entries.empty() || batch.behind_checkpoint || batch.malformed > 0 ||
      block <= absl::ZeroDuration()) {
    return batch;
  }
  int64_t block_ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(block));
  RedisCommand xread = {"XREAD",   "COUNT",     "1", "BLOCK", absl::StrCat(block_ms),
                        "STREAMS", keys_.stream};
  if (wake != nullptr) xread.push_back(wake->key);
  xread.push_back(after.ToString());
  if (wake != nullptr) xread.push_back(wake->last_id);
  ASSIGN_OR_RETURN(RedisReply woke, redis_->BlockingCommand(xread, block));
  if (woke.IsNil()) return batch;
  bool data_arrived = wake == nullptr;
  for (const RedisReply& stream : woke.elements()) {
    if (stream.elements().empty()) continue;
    if (wake != nullptr && stream.elements()[0].str() == wake->key) {
      wake->fired = true;
    } else {
      data_arrived = true;
    }
  }
  if (!data_arrived) return batch;
  // Re-read through the atomic path, which also re-checks the checkpoint.
  return ReadAfter(after, max_entries);
}

absl::StatusOr<std::optional<StreamPosition>> MaterializationStore::StreamTop() {
  ASSIGN_OR_RETURN(RedisReply exists, redis_->Command({"EXISTS", keys_.stream}));
  if (exists.integer() == 0) return std::optional<StreamPosition>();
  ASSIGN_OR_RETURN(RedisReply info, redis_->Command({"XINFO", "STREAM", keys_.stream}));
  const auto& elements = info.elements();
  for (size_t i = 0; i + 1 < elements.size(); i += 2) {
    if (elements[i].str() == "last-generated-id") {
      ASSIGN_OR_RETURN(std::string id, elements[i + 1].AsString());
      ASSIGN_OR_RETURN(StreamPosition top, StreamPosition::Parse(id));
      if (top.IsZero()) return std::optional<StreamPosition>();
      return std::optional<StreamPosition>(top);
    }
  }
  return absl::InternalError("XINFO STREAM reply has no last-generated-id");
}

absl::StatusOr<std::optional<StreamPosition>> MaterializationStore::CheckpointPosition() {
  ASSIGN_OR_RETURN(RedisReply reply, redis_->Command({"GET", keys_.checkpoint_rv}));
  ASSIGN_OR_RETURN(std::optional<std::string> text, reply.AsOptionalString());
  if (!text) return std::optional<StreamPosition>();
  auto position = StreamPosition::Parse(*text);
  if (!position.ok()) return core::Annotate(position.status(), keys_.checkpoint_rv);
  return std::optional<StreamPosition>(*position);
}

absl::StatusOr<LineageMark> MaterializationStore::ReadMark() {
  std::vector<RedisCommand> commands = {{"GET", keys_.checkpoint_rv}};
  for (RedisCommand& read : MarkReads(keys_)) commands.push_back(std::move(read));
  ASSIGN_OR_RETURN(std::vector<RedisReply> replies, redis_->Transaction(commands));
  bool top_known = false;
  ASSIGN_OR_RETURN(
      LineageMark mark,
      ParseMark(keys_, replies[0], absl::MakeConstSpan(replies).subspan(1), &top_known));
  if (!top_known) {
    ASSIGN_OR_RETURN(std::optional<StreamPosition> top, StreamTop());
    if (top) mark.top = *top;
  }
  return mark;
}

absl::StatusOr<MaterializationView> MaterializationStore::Load() {
  // One MULTI/EXEC (a consistent snapshot). The whole stream is read: the swap trims everything
  // at or below the checkpoint, so what remains is the tail (filtered below regardless). Plain
  // commands, not a script: Lua would copy every item through a Lua table (several times slower).
  std::vector<RedisCommand> commands = {{"GET", keys_.checkpoint_rv},
                                        {"HGETALL", keys_.checkpoint_items},
                                        {"XRANGE", keys_.stream, "-", "+"}};
  for (RedisCommand& read : MarkReads(keys_)) commands.push_back(std::move(read));
  ASSIGN_OR_RETURN(std::vector<RedisReply> replies, redis_->Transaction(commands));
  MaterializationView view;
  ASSIGN_OR_RETURN(view.mark,
                   ParseMark(keys_, replies[0], absl::MakeConstSpan(replies).subspan(3), nullptr));
  if (!view.mark.checkpoint) return view;
  if (view.mark.damaged) {
    // Items went missing after the swap (eviction, a hand-made DEL): splicing this would sweep
    // the files of objects that still exist. Fail closed, as with no checkpoint.
    return view;
  }
  view.checkpoint = view.mark.checkpoint;
  RETURN_IF_ERROR(replies[1].ErrorStatus());
  auto& flat = replies[1].mutable_elements();
  if (!replies[1].IsArray() || flat.size() % 2 != 0) {
    return absl::InternalError(absl::StrCat(keys_.checkpoint_items, ": unexpected HGETALL reply"));
  }
  // Moved, not copied: a checkpoint of 100,000 objects is hundreds of MiB.
  for (size_t i = 0; i + 1 < flat.size(); i += 2) {
    RETURN_IF_ERROR(OpenBody(cipher_, flat[i + 1].mutable_str(),
                             absl::StrCat(keys_.checkpoint_items, " ", flat[i].str())));
    view.checkpoint_items.emplace_hint(view.checkpoint_items.end(),
                                       std::move(flat[i].mutable_str()),
                                       std::move(flat[i + 1].mutable_str()));
  }
  std::vector<RedisReply>().swap(flat);
  RETURN_IF_ERROR(replies[2].ErrorStatus());
  StreamBatch tail;
  RETURN_IF_ERROR(ParseEntries(replies[2], tail, cipher_));
  view.malformed = tail.malformed;
  for (StreamEntry& entry : tail.entries) {
    if (entry.position > *view.checkpoint) view.tail.push_back(std::move(entry));
  }
  // A stream written before appends recorded their top: its last entry stands in.
  if (!tail.entries.empty()) view.mark.top = std::max(view.mark.top, tail.last_scanned);
  return view;
}

absl::StatusOr<CheckpointSwap> MaterializationStore::ReplaceCheckpoint(
    const ObjectMap& items, StreamPosition covered_through) {
  ASSIGN_OR_RETURN(CheckpointSwap swap, Swap(items, covered_through, std::nullopt, GenerationId()));
  if (swap.swapped && guard_ != nullptr) guard_->Rebase(swap.incarnation, swap.position);
  return swap;
}

absl::StatusOr<CheckpointSwap> MaterializationStore::Swap(const ObjectMap& items,
                                                          StreamPosition covered_through,
                                                          std::optional<StreamPosition> base,
                                                          const std::string& incarnation) {
  if (seal_ && cipher_ == nullptr) return NoCipherError();
  RETURN_IF_ERROR(PassGate());
  const std::string staging = keys_.CheckpointStaging(GenerationId());
  // 1. Write the new generation beside the live one (readers keep seeing the old one).
  std::vector<RedisCommand> writes;
  RedisCommand hset = {"HSET", staging};
  size_t batch_bytes = 0;
  auto flush = [&] {
    if (hset.size() <= 2) return;
    writes.push_back(std::move(hset));
    if (writes.size() == 1) {
      writes.push_back({"EXPIRE", staging, absl::StrCat(kStagingTtlSeconds)});
    }
    hset = {"HSET", staging};
    batch_bytes = 0;
  };
  for (const auto& [identity, json] : items) {
    hset.push_back(identity);
    hset.push_back(seal_ ? cipher_->Seal(json) : json);
    batch_bytes += identity.size() + json.size();
    if ((hset.size() - 2) / 2 >= kStagingFieldsPerCommand ||
        batch_bytes >= kStagingBytesPerCommand) {
      flush();
    }
  }
  flush();
  ASSIGN_OR_RETURN(std::vector<RedisReply> written, redis_->Pipeline(writes));
  for (const RedisReply& reply : written) {
    if (reply.IsError()) {
      (void)redis_->Command({"DEL", staging});
      return core::Annotate(reply.ErrorStatus(), "staging a checkpoint");
    }
  }
  // 2. Swap it in with its position, then trim what it covers.
  std::optional<StreamPosition> min_id = Next(covered_through);
  std::vector<std::string> swap_keys = {keys_.checkpoint_items, staging,    keys_.checkpoint_rv,
                                        keys_.stream,           index_key_, keys_.checkpoint_meta};
  std::vector<std::string> swap_args = {
      covered_through.ToString(), min_id ? min_id->ToString() : "", absl::StrCat(items.size()),
      keys_.index_member,         base ? base->ToString() : "",     incarnation};
  if (fence_) {
    const OwnershipKeys own = OwnershipKeys::For(prefix_, fence_->fence.unit);
    swap_keys.push_back(own.epoch);
    swap_keys.push_back(own.owner);
    swap_args.push_back(absl::StrCat(fence_->fence.epoch));
    swap_args.push_back(fence_->fence.owner);
  }
  ASSIGN_OR_RETURN(RedisReply reply, redis_->Eval(SwapScript(), swap_keys, swap_args));
  if (!reply.IsArray() || reply.elements().size() != 4) {
    return absl::InternalError(absl::StrCat("swap script: unexpected reply ", reply.DebugString()));
  }
  ASSIGN_OR_RETURN(std::string outcome, reply.elements()[0].AsString());
  if (outcome == "fenced" && fence_) {
    return FencedError(fence_->fence, reply.elements()[1].str(), reply.elements()[2].str());
  }
  if (outcome == "incomplete") {
    return absl::AbortedError(
        absl::StrCat("checkpoint staging hash ", staging, " lost items before the swap"));
  }
  CheckpointSwap swap;
  swap.swapped = outcome == "swapped";
  ASSIGN_OR_RETURN(std::string position, reply.elements()[1].AsString());
  if (!position.empty()) {  // empty: a compaction whose base is gone (no checkpoint at all)
    ASSIGN_OR_RETURN(swap.position, StreamPosition::Parse(position));
  }
  ASSIGN_OR_RETURN(swap.trimmed, reply.elements()[2].AsInteger());
  if (swap.swapped) {
    ASSIGN_OR_RETURN(swap.incarnation, reply.elements()[3].AsString());
  }
  return swap;
}

absl::StatusOr<CompactionResult> MaterializationStore::Compact(StreamPosition through) {
  ASSIGN_OR_RETURN(MaterializationView view, Load());
  return CompactView(std::move(view), through);
}

absl::StatusOr<CompactionResult> MaterializationStore::CompactView(MaterializationView view,
                                                                   StreamPosition through) {
  if (!view.checkpoint) {
    return absl::FailedPreconditionError(absl::StrCat(
        keys_.base, view.mark.damaged ? ": the checkpoint lost items; nothing to compact onto"
                                      : ": no checkpoint to compact onto"));
  }
  CompactionResult result;
  result.position = *view.checkpoint;
  ObjectMap objects = std::move(view.checkpoint_items);
  for (const StreamEntry& entry : view.tail) {
    if (entry.position > through) break;
    ApplyEntry(entry, objects);
    result.position = entry.position;
    ++result.folded;
  }
  if (result.folded == 0) return result;
  // Only onto the checkpoint we folded from: a LIST that replaced it meanwhile may have healed
  // a gap the stream never saw, and must not be overwritten by this fold.
  ASSIGN_OR_RETURN(CheckpointSwap swap,
                   Swap(objects, result.position, view.checkpoint, view.mark.incarnation));
  if (swap.swapped && guard_ != nullptr) guard_->Advance(swap.position);
  result.compacted = swap.swapped;
  result.position = swap.position;
  result.trimmed = swap.trimmed;
  return result;
}

absl::Status MaterializationStore::PassGate() const {
  if (!fence_ || !fence_->gate) return absl::OkStatus();
  return fence_->gate();
}

absl::Status MaterializationStore::WriteAll(std::vector<std::string> keys,
                                            const std::vector<RedisCommand>& commands) {
  if (!fence_) return redis_->Transaction(commands).status();
  RETURN_IF_ERROR(PassGate());
  OwnershipStore own(redis_, prefix_);
  return own.FencedWrite(fence_->fence, {std::move(keys), commands}).status();
}

absl::Status MaterializationStore::WriteState(const MaterializationState& state) {
  return WriteAll({keys_.state, index_key_},
                  {{"SET", keys_.state, state.ToJson()}, {"SADD", index_key_, keys_.index_member}});
}

absl::StatusOr<std::optional<MaterializationState>> MaterializationStore::ReadState() {
  ASSIGN_OR_RETURN(RedisReply reply, redis_->Command({"GET", keys_.state}));
  ASSIGN_OR_RETURN(std::optional<std::string> json, reply.AsOptionalString());
  if (!json) return std::optional<MaterializationState>();
  ASSIGN_OR_RETURN(MaterializationState state, MaterializationState::FromJson(*json));
  return std::optional<MaterializationState>(std::move(state));
}

absl::StatusOr<MaterializationCounts> MaterializationStore::ReadCounts() {
  ASSIGN_OR_RETURN(RedisReply reply, redis_->Command({"HGETALL", keys_.counts}));
  ASSIGN_OR_RETURN(auto fields, reply.AsStringMap());
  MaterializationCounts counts;
  for (const auto& [field, value] : fields) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(value, &n)) continue;
    absl::string_view name = field;
    if (name == "appended") {
      counts.appended = n;
    } else if (absl::ConsumePrefix(&name, "diverted:")) {
      counts.diverted[std::string(name)] = n;
    }
  }
  return counts;
}

absl::Status MaterializationStore::Release() {
  return WriteAll({keys_.stream, keys_.checkpoint_items, keys_.checkpoint_rv, keys_.checkpoint_meta,
                   keys_.state, keys_.counts, index_key_},
                  {{"DEL", keys_.stream, keys_.checkpoint_items, keys_.checkpoint_rv,
                    keys_.checkpoint_meta, keys_.state, keys_.counts},
                   {"SREM", index_key_, keys_.index_member}});
}

absl::StatusOr<std::vector<std::string>> WaitForAnyStream(
    RedisConnection& redis, const std::vector<std::pair<std::string, StreamPosition>>& streams,
    absl::Duration block) {
  if (streams.empty()) return absl::InvalidArgumentError("WaitForAnyStream: no streams");
  int64_t block_ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(block));
  RedisCommand xread = {"XREAD", "COUNT", "1", "BLOCK", absl::StrCat(block_ms), "STREAMS"};
  for (const auto& [key, position] : streams) xread.push_back(key);
  for (const auto& [key, position] : streams) xread.push_back(position.ToString());
  ASSIGN_OR_RETURN(RedisReply reply, redis.BlockingCommand(xread, block));
  std::vector<std::string> ready;
  if (reply.IsNil()) return ready;
  if (!reply.IsArray()) {
    return absl::InternalError(absl::StrCat("XREAD: unexpected reply ", reply.DebugString()));
  }
  for (const RedisReply& stream : reply.elements()) {
    if (!stream.IsArray() || stream.elements().empty()) continue;
    ASSIGN_OR_RETURN(std::string key, stream.elements()[0].AsString());
    ready.push_back(std::move(key));
  }
  return ready;
}

absl::StatusOr<std::vector<IndexedMaterialization>> ListMaterializations(RedisConnection& redis,
                                                                         const KeyPrefix& prefix) {
  ASSIGN_OR_RETURN(RedisReply reply, redis.Command({"SMEMBERS", MaterializationIndexKey(prefix)}));
  ASSIGN_OR_RETURN(std::vector<std::string> members, reply.AsStringArray());
  std::sort(members.begin(), members.end());
  std::vector<IndexedMaterialization> out;
  std::vector<RedisCommand> reads;
  for (const std::string& member : members) {
    auto parsed = ParseIndexMember(member);
    if (!parsed.ok()) continue;
    out.push_back({*parsed, std::nullopt});
    reads.push_back({"GET", MaterializationKeys::ForIndexMember(prefix, member).state});
  }
  ASSIGN_OR_RETURN(std::vector<RedisReply> states, redis.Pipeline(reads));
  for (size_t i = 0; i < out.size(); ++i) {
    if (states[i].type() != RedisReply::Type::kString) continue;
    auto state = MaterializationState::FromJson(states[i].str());
    if (state.ok()) out[i].state = std::move(*state);
  }
  return out;
}

}  // namespace reverser::redisstore
