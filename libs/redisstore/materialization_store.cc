#include "libs/redisstore/materialization_store.h"

#include <algorithm>
#include <deque>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "libs/core/status.h"
#include "libs/redisstore/lua_positions.h"
#include "nlohmann/json.hpp"

namespace reverser::redisstore {
namespace {

using core::StreamPosition;

// Check-and-append for a batch of entries, in order, in one step: for each entry compute where
// XADD `<rv>-*` would land and divert it unless it is above both the stream top (last generated
// ID, which survives trimming) and the checkpoint. Each entry sees the stream as the previous
// ones left it, exactly as if each had been appended by its own call.
// KEYS: stream, ckpt:rv, counts.
// ARGV: count of entries diverted client-side as non_numeric_rv (only counted here), then per
//       entry: rv ("" = attach to the top's RV), n, then n stream fields (field, value, ...).
// Reply: per entry two strings, {id, ""} when appended, {"", reason} when diverted, and
//        {top, "duplicate_of_stream_top"} for a repeat of the top entry.
const LuaScript& AppendScript() {
  static const LuaScript* script = new LuaScript(absl::StrCat(internal::kLuaPositionHelpers, R"lua(
local stream, ckpt_key, counts = KEYS[1], KEYS[2], KEYS[3]
-- Check the layout before anything is written (a malformed call changes nothing).
local starts = {}
local at = 2
while at <= #ARGV do
  local n = tonumber(ARGV[at + 1])
  if not n or n < 0 or n % 1 ~= 0 or at + 1 + n > #ARGV then
    return redis.error_reply('ERR append script: malformed entry at ARGV ' .. at)
  end
  starts[#starts + 1] = at
  at = at + 2 + n
end
local non_numeric = tonumber(ARGV[1])
if not non_numeric then return redis.error_reply('ERR append script: malformed ARGV 1') end

local top = '0-0'
if redis.call('EXISTS', stream) == 1 then
  -- The last generated ID, cached beside the counts by this script (XINFO STREAM would copy
  -- the first and last entries, bodies included). Streams written before the cache existed
  -- fall back to XINFO once.
  top = redis.call('HGET', counts, 'top')
  if not top then
    top = '0-0'
    local info = redis.call('XINFO', 'STREAM', stream)
    for i = 1, #info, 2 do
      if info[i] == 'last-generated-id' then top = info[i + 1] end
    end
  end
end
local top_rv, top_seq = split(top)
local ckpt = redis.call('GET', ckpt_key)  -- nothing here moves it
local ck_rv, ck_seq
if ckpt then ck_rv, ck_seq = split(ckpt) end

-- The top entry's fields, for the duplicate check: ARGV[top_first .. +top_n-1] once this call
-- appended it; before that, the stream's last entry, read at most once (only if it is the top).
local top_first, top_n
local last_read, last_fields = false, nil
local function same_as_top(first, n)
  if top_first then
    if top_n ~= n then return false end
    for k = 0, n - 1 do
      if ARGV[top_first + k] ~= ARGV[first + k] then return false end
    end
    return true
  end
  if not last_read then
    last_read = true
    local last = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)
    if #last == 1 and last[1][1] == top then last_fields = last[1][2] end
  end
  if not last_fields or #last_fields ~= n then return false end
  for k = 1, n do
    if last_fields[k] ~= ARGV[first + k - 1] then return false end
  end
  return true
end

local reasons = {'older_than_stream_top', 'covered_by_checkpoint', 'non_numeric_rv',
                 'rvless_empty_stream', 'duplicate_of_stream_top'}
local diverted = {non_numeric_rv = non_numeric}
for _, reason in ipairs(reasons) do diverted[reason] = diverted[reason] or 0 end
local appended = 0
local out = {}
local function divert(reason, id)
  diverted[reason] = diverted[reason] + 1
  out[#out + 1] = id or ''
  out[#out + 1] = reason
end

local function append(rv, first, n)
  if rv == '' then
    if top == '0-0' then return divert('rvless_empty_stream') end
    rv = top_rv
  end
  local c = cmpnum(rv, top_rv)
  if c < 0 then return divert('older_than_stream_top') end
  if ckpt then
    local cc = cmpnum(rv, ck_rv)
    -- same RV as the checkpoint: the new seq is 0 (new RV) or top_seq+1; covered if <= ck_seq
    if cc < 0 or (cc == 0 and (c > 0 or cmpnum(top_seq, ck_seq) < 0)) then
      return divert('covered_by_checkpoint')
    end
  end
  -- A byte-identical repeat of the top entry (a retried append whose reply was lost, a watch
  -- re-delivery) is absorbed: folding it again would change nothing.
  if c == 0 and same_as_top(first, n) then return divert('duplicate_of_stream_top', top) end
  local id = redis.pcall('XADD', stream, rv .. '-*', unpack(ARGV, first, first + n - 1))
  if type(id) == 'table' and id.err then return divert('older_than_stream_top') end
  appended = appended + 1
  top = id
  top_rv, top_seq = split(id)
  top_first, top_n = first, n
  out[#out + 1] = id
  out[#out + 1] = ''
end

for _, s in ipairs(starts) do
  append(ARGV[s], s + 2, tonumber(ARGV[s + 1]))
end
if appended > 0 then
  redis.call('HINCRBY', counts, 'appended', appended)
  redis.call('HSET', counts, 'top', top)
end
for _, reason in ipairs(reasons) do
  if diverted[reason] > 0 then
    redis.call('HINCRBY', counts, 'diverted:' .. reason, diverted[reason])
  end
end
return out
)lua"));
  return *script;
}

// AppendAll sends at most this many entries (and object bytes, unless a single entry has more)
// per script call: a call blocks Redis while it runs, and its arguments are held in memory twice.
constexpr size_t kAppendEntriesPerCall = 256;
constexpr size_t kAppendBytesPerCall = 4 << 20;

// The swap: refuse an older generation, install the staged items and the position together,
// register the index, then trim what the new checkpoint covers.
// KEYS: ckpt:items, staging, ckpt:rv, stream, index.
// ARGV: position, trim MINID ("" = none), expected item count, index member,
//       base ("" = any; else the checkpoint the new one was folded from must still be live).
const LuaScript& SwapScript() {
  static const LuaScript* script = new LuaScript(absl::StrCat(internal::kLuaPositionHelpers, R"lua(
local cur = redis.call('GET', KEYS[3])
if (cur and cmpid(ARGV[1], cur) < 0) or (ARGV[5] ~= '' and (not cur or cmpid(cur, ARGV[5]) ~= 0)) then
  redis.call('DEL', KEYS[2])
  return {'stale', cur, 0}
end
local expected = tonumber(ARGV[3])
if redis.call('HLEN', KEYS[2]) ~= expected then
  redis.call('DEL', KEYS[2])
  return {'incomplete', '', 0}
end
if expected > 0 then
  redis.call('RENAME', KEYS[2], KEYS[1])
  redis.call('PERSIST', KEYS[1])
else
  redis.call('DEL', KEYS[1])
end
redis.call('SET', KEYS[3], ARGV[1])
redis.call('SADD', KEYS[5], ARGV[4])
local trimmed = 0
if ARGV[2] ~= '' then trimmed = redis.call('XTRIM', KEYS[4], 'MINID', ARGV[2]) end
return {'swapped', ARGV[1], trimmed}
)lua"));
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

// Parses XRANGE/XREAD entries ([[id, [f, v, ...]], ...]) into `batch`, skipping malformed ones.
absl::Status ParseEntries(const RedisReply& reply, StreamBatch& batch) {
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

absl::StatusOr<DivertReason> ParseDivertReason(absl::string_view name) {
  for (DivertReason reason : {DivertReason::kOlderThanStreamTop, DivertReason::kCoveredByCheckpoint,
                              DivertReason::kNonNumericRv, DivertReason::kRvlessEmptyStream,
                              DivertReason::kDuplicateOfStreamTop}) {
    if (DivertReasonName(reason) == name) return reason;
  }
  return absl::InternalError(absl::StrCat("append script: unknown divert reason \"", name, "\""));
}

// One entry's pair of the append script's reply: {id, ""} or {id or "", reason}.
absl::StatusOr<AppendResult> ParseAppendOutcome(const RedisReply& id, const RedisReply& reason) {
  ASSIGN_OR_RETURN(std::string id_text, id.AsString());
  ASSIGN_OR_RETURN(std::string reason_text, reason.AsString());
  AppendResult result;
  if (reason_text.empty()) {
    result.appended = true;
  } else {
    ASSIGN_OR_RETURN(result.diverted, ParseDivertReason(reason_text));
  }
  if (!id_text.empty() || result.appended) {
    ASSIGN_OR_RETURN(result.position, StreamPosition::Parse(id_text));
  }
  return result;
}

// The script's RV argument: canonical decimal (no leading zeros), "" for an RV-less entry,
// nullopt when the RV is not a number.
std::optional<std::string> CanonicalRv(const StreamEntry& entry) {
  if (entry.resource_version.empty()) return std::string();
  auto parsed = core::ParseResourceVersion(entry.resource_version);
  if (!parsed.ok()) return std::nullopt;
  return absl::StrCat(*parsed);
}

}  // namespace

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
  std::vector<AppendResult> results(entries.size());
  if (entries.empty()) return results;
  const LuaScript& script = AppendScript();

  // One script call per chunk of entries. The commands refer to the entries' bytes; the small
  // strings they need live in `numbers` (a deque: growing it never moves what it holds).
  struct Chunk {
    size_t begin = 0, end = 0;  // entries [begin, end); non-numeric ones are not sent
  };
  std::vector<Chunk> chunks;
  std::vector<RedisCommandView> commands;
  std::deque<std::string> numbers;
  for (size_t i = 0; i < entries.size();) {
    Chunk chunk{i, i};
    RedisCommandView command = {"EVALSHA",           script.sha1(), "3", keys_.stream,
                                keys_.checkpoint_rv, keys_.counts,  ""};
    const size_t non_numeric_arg = command.size() - 1;
    size_t non_numeric = 0, bytes = 0;
    for (; i < entries.size() && i - chunk.begin < kAppendEntriesPerCall &&
           (i == chunk.begin || bytes + entries[i].object_json.size() <= kAppendBytesPerCall);
         ++i) {
      const StreamEntry& entry = entries[i];
      std::optional<std::string> rv = CanonicalRv(entry);
      if (!rv) {
        // Not a position at all: diverted here, only counted by the script.
        results[i].diverted = DivertReason::kNonNumericRv;
        ++non_numeric;
        continue;
      }
      command.push_back(numbers.emplace_back(std::move(*rv)));
      const size_t count_arg = command.size();
      command.push_back("");
      AppendEntryFieldViews(entry, command);
      command[count_arg] = numbers.emplace_back(absl::StrCat(command.size() - count_arg - 1));
      bytes += entry.object_json.size();
    }
    chunk.end = i;
    command[non_numeric_arg] = numbers.emplace_back(absl::StrCat(non_numeric));
    chunks.push_back(chunk);
    commands.push_back(std::move(command));
  }

  // Fills the results of chunk `k` from its script reply.
  auto take = [&](size_t k, const RedisReply& reply) -> absl::Status {
    if (!reply.IsArray()) {
      return absl::InternalError(
          absl::StrCat("append script: unexpected reply ", reply.DebugString().substr(0, 200)));
    }
    const std::vector<RedisReply>& out = reply.elements();
    size_t next = 0;
    for (size_t i = chunks[k].begin; i < chunks[k].end; ++i) {
      if (results[i].diverted) continue;  // non-numeric: not sent
      if (next + 1 >= out.size()) {
        return absl::InternalError("append script: fewer outcomes than entries");
      }
      ASSIGN_OR_RETURN(results[i], ParseAppendOutcome(out[next], out[next + 1]));
      next += 2;
    }
    if (next != out.size()) return absl::InternalError("append script: more outcomes than entries");
    return absl::OkStatus();
  };

  std::vector<size_t> pending(commands.size());  // chunk indexes still to send
  for (size_t k = 0; k < pending.size(); ++k) pending[k] = k;
  bool loaded = false;
  while (!pending.empty()) {
    std::vector<RedisCommandView> resend;
    const std::vector<RedisCommandView>* send = &commands;
    if (pending.size() != commands.size()) {
      for (size_t k : pending) resend.push_back(commands[k]);
      send = &resend;
    }
    ASSIGN_OR_RETURN(std::vector<RedisReply> replies, redis_->PipelineViews(*send));
    std::vector<size_t> unknown_script;
    for (size_t j = 0; j < replies.size(); ++j) {
      const RedisReply& reply = replies[j];
      // The server does not know the script (fresh or restarted Redis, SCRIPT FLUSH): that call
      // did not run, nor (normally) any later one of this pipeline. Load it and resend those.
      if (reply.IsError() && absl::StartsWith(reply.str(), "NOSCRIPT")) {
        unknown_script.push_back(pending[j]);
        continue;
      }
      if (reply.IsError()) return core::Annotate(reply.ErrorStatus(), "append script");
      RETURN_IF_ERROR(take(pending[j], reply));
    }
    if (unknown_script.empty()) break;
    if (loaded) return absl::InternalError("append script unknown to Redis right after loading");
    RETURN_IF_ERROR(redis_->Command({"SCRIPT", "LOAD", script.source()}).status());
    loaded = true;
    pending = std::move(unknown_script);
  }
  return results;
}

absl::StatusOr<StreamBatch> MaterializationStore::ReadAfter(StreamPosition after,
                                                            size_t max_entries) {
  if (max_entries == 0) return absl::InvalidArgumentError("ReadAfter: max_entries must be > 0");
  StreamBatch batch;
  batch.last_scanned = after;
  std::optional<StreamPosition> start = Next(after);
  // The checkpoint and the entries are read together, so "behind the checkpoint" is judged
  // against the same state the entries come from.
  std::vector<RedisCommand> commands = {{"GET", keys_.checkpoint_rv}};
  if (start) {
    commands.push_back(
        {"XRANGE", keys_.stream, start->ToString(), "+", "COUNT", absl::StrCat(max_entries)});
  }
  ASSIGN_OR_RETURN(std::vector<RedisReply> replies, redis_->Transaction(commands));
  ASSIGN_OR_RETURN(std::optional<std::string> ckpt, replies[0].AsOptionalString());
  if (ckpt) {
    auto position = StreamPosition::Parse(*ckpt);
    if (!position.ok()) return core::Annotate(position.status(), keys_.checkpoint_rv);
    batch.behind_checkpoint = after < *position;
  }
  if (start) {
    RETURN_IF_ERROR(replies[1].ErrorStatus());
    RETURN_IF_ERROR(ParseEntries(replies[1], batch));
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

absl::StatusOr<MaterializationView> MaterializationStore::Load() {
  // One MULTI/EXEC (a consistent snapshot). The whole stream is read: the swap trims everything
  // at or below the checkpoint, so what remains is the tail (filtered below regardless). Plain
  // commands, not a script: Lua would copy every item through a Lua table (several times slower).
  ASSIGN_OR_RETURN(std::vector<RedisReply> replies,
                   redis_->Transaction({{"GET", keys_.checkpoint_rv},
                                        {"HGETALL", keys_.checkpoint_items},
                                        {"XRANGE", keys_.stream, "-", "+"}}));
  MaterializationView view;
  ASSIGN_OR_RETURN(std::optional<std::string> ckpt, replies[0].AsOptionalString());
  if (!ckpt) return view;
  auto position = StreamPosition::Parse(*ckpt);
  if (!position.ok()) return core::Annotate(position.status(), keys_.checkpoint_rv);
  view.checkpoint = *position;
  RETURN_IF_ERROR(replies[1].ErrorStatus());
  auto& flat = replies[1].mutable_elements();
  if (!replies[1].IsArray() || flat.size() % 2 != 0) {
    return absl::InternalError(absl::StrCat(keys_.checkpoint_items, ": unexpected HGETALL reply"));
  }
  // Moved, not copied: a checkpoint of 100,000 objects is hundreds of MiB.
  for (size_t i = 0; i + 1 < flat.size(); i += 2) {
    view.checkpoint_items.emplace_hint(view.checkpoint_items.end(),
                                       std::move(flat[i].mutable_str()),
                                       std::move(flat[i + 1].mutable_str()));
  }
  std::vector<RedisReply>().swap(flat);
  RETURN_IF_ERROR(replies[2].ErrorStatus());
  StreamBatch tail;
  RETURN_IF_ERROR(ParseEntries(replies[2], tail));
  view.malformed = tail.malformed;
  for (StreamEntry& entry : tail.entries) {
    if (entry.position > *view.checkpoint) view.tail.push_back(std::move(entry));
  }
  return view;
}

absl::StatusOr<CheckpointSwap> MaterializationStore::ReplaceCheckpoint(
    const ObjectMap& items, StreamPosition covered_through) {
  return Swap(items, covered_through, std::nullopt);
}

absl::StatusOr<CheckpointSwap> MaterializationStore::Swap(const ObjectMap& items,
                                                          StreamPosition covered_through,
                                                          std::optional<StreamPosition> base) {
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
    hset.push_back(json);
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
  ASSIGN_OR_RETURN(
      RedisReply reply,
      redis_->Eval(SwapScript(),
                   {keys_.checkpoint_items, staging, keys_.checkpoint_rv, keys_.stream, index_key_},
                   {covered_through.ToString(), min_id ? min_id->ToString() : "",
                    absl::StrCat(items.size()), keys_.index_member, base ? base->ToString() : ""}));
  if (!reply.IsArray() || reply.elements().size() != 3) {
    return absl::InternalError(absl::StrCat("swap script: unexpected reply ", reply.DebugString()));
  }
  ASSIGN_OR_RETURN(std::string outcome, reply.elements()[0].AsString());
  if (outcome == "incomplete") {
    return absl::AbortedError(
        absl::StrCat("checkpoint staging hash ", staging, " lost items before the swap"));
  }
  CheckpointSwap swap;
  swap.swapped = outcome == "swapped";
  ASSIGN_OR_RETURN(std::string position, reply.elements()[1].AsString());
  ASSIGN_OR_RETURN(swap.position, StreamPosition::Parse(position));
  ASSIGN_OR_RETURN(swap.trimmed, reply.elements()[2].AsInteger());
  return swap;
}

absl::StatusOr<CompactionResult> MaterializationStore::Compact(StreamPosition through) {
  ASSIGN_OR_RETURN(MaterializationView view, Load());
  return CompactView(std::move(view), through);
}

absl::StatusOr<CompactionResult> MaterializationStore::CompactView(MaterializationView view,
                                                                   StreamPosition through) {
  if (!view.checkpoint) {
    return absl::FailedPreconditionError(
        absl::StrCat(keys_.base, ": no checkpoint to compact onto"));
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
  ASSIGN_OR_RETURN(CheckpointSwap swap, Swap(objects, result.position, view.checkpoint));
  result.compacted = swap.swapped;
  result.position = swap.position;
  result.trimmed = swap.trimmed;
  return result;
}

absl::Status MaterializationStore::WriteState(const MaterializationState& state) {
  return redis_
      ->Transaction(
          {{"SET", keys_.state, state.ToJson()}, {"SADD", index_key_, keys_.index_member}})
      .status();
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
  return redis_
      ->Transaction({{"DEL", keys_.stream, keys_.checkpoint_items, keys_.checkpoint_rv, keys_.state,
                      keys_.counts},
                     {"SREM", index_key_, keys_.index_member}})
      .status();
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
