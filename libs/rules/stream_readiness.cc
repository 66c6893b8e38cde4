#include "libs/rules/stream_readiness.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace reverser::rules {
namespace {

int Rank(reverser::v1::StreamState state) {
  switch (state) {
    case reverser::v1::STREAM_STATE_STREAMING:
      return 1;
    case reverser::v1::STREAM_STATE_BLOCKED:
      return 3;
    default:
      return 2;  // replaying, or not known yet
  }
}

using TypeKey = std::tuple<std::string, std::string, std::string>;  // group, version, resource

TypeKey KeyOf(const reverser::v1::GroupVersionResource& gvr) {
  return {gvr.group(), gvr.version(), gvr.resource()};
}

// "N/M streams running; K <label> (a, b)", names cut at the sample limit.
std::string Message(const StreamRollup& r, const char* label, std::vector<std::string> names) {
  std::string out =
      absl::StrCat(r.ready, "/", r.total, " streams running; ", r.total - r.ready, " ", label);
  if (names.empty()) return out;
  if (names.size() > kPendingSampleLimit) names.resize(kPendingSampleLimit);
  return absl::StrCat(out, " (", absl::StrJoin(names, ", "), ")");
}

}  // namespace

std::string StreamDisplayName(const reverser::v1::GroupVersionResource& gvr) {
  if (gvr.group().empty()) return gvr.resource();
  return absl::StrCat(gvr.resource(), ".", gvr.group());
}

StreamRollup RollUpStreams(const std::vector<reverser::v1::StreamReadiness>& streams) {
  // Stable whatever the input order: streams by type, then scope (cluster first).
  std::vector<const reverser::v1::StreamReadiness*> sorted;
  sorted.reserve(streams.size());
  for (const auto& s : streams) sorted.push_back(&s);
  auto order = [](const reverser::v1::StreamReadiness* s) {
    return std::make_tuple(KeyOf(s->claim().type().gvr()), s->claim().scope().has_namespace_(),
                           s->claim().scope().namespace_());
  };
  std::stable_sort(sorted.begin(), sorted.end(),
                   [&](const auto* a, const auto* b) { return order(a) < order(b); });
  // Per type, the first of its strongest streams.
  std::map<TypeKey, const reverser::v1::StreamReadiness*> by_type;
  for (const auto* s : sorted) {
    auto [it, inserted] = by_type.try_emplace(KeyOf(s->claim().type().gvr()), s);
    if (!inserted && Rank(s->state()) > Rank(it->second->state())) it->second = s;
  }

  StreamRollup out;
  out.total = static_cast<uint32_t>(by_type.size());
  // Blocked types with their reasons, and replaying types, by display name.
  std::vector<std::pair<std::string, std::string>> blocked;
  std::vector<std::string> replaying;
  for (const auto& [key, s] : by_type) {
    std::string name = StreamDisplayName(s->claim().type().gvr());
    switch (Rank(s->state())) {
      case 1:
        ++out.ready;
        break;
      case 3:
        ++out.blocked;
        blocked.emplace_back(std::move(name), s->reason());
        break;
      default:
        ++out.replaying;
        replaying.push_back(std::move(name));
        break;
    }
  }
  std::sort(blocked.begin(), blocked.end());
  std::sort(replaying.begin(), replaying.end());
  std::vector<std::string> blocked_names;
  for (const auto& [name, reason] : blocked) blocked_names.push_back(name);
  for (const std::string& name : blocked_names) {
    if (out.pending_sample.size() < kPendingSampleLimit) out.pending_sample.push_back(name);
  }
  for (const std::string& name : replaying) {
    if (out.pending_sample.size() < kPendingSampleLimit) out.pending_sample.push_back(name);
  }

  if (out.blocked > 0) {
    out.reason.clear();
    for (const auto& [name, reason] : blocked) {
      if (reason == kStreamReasonWatchNotPermitted) {
        out.reason = reason;
        break;
      }
      if (out.reason.empty()) out.reason = reason;
    }
    if (out.reason.empty()) out.reason = kStreamReasonWatchError;
    out.message = Message(out, "blocked", std::move(blocked_names));
  } else if (out.replaying > 0) {
    out.reason = kStreamReasonReplaying;
    out.message = Message(out, "replaying", std::move(replaying));
  } else if (out.total == 0) {
    out.reason = kStreamReasonNoResolvedTypes;
    out.message = kNoResolvedTypesMessage;
  } else {
    out.reason = kStreamReasonAllStreamsReady;
    out.message = absl::StrCat(out.ready, "/", out.total, " streams running");
  }
  return out;
}

void FillSummary(const StreamRollup& rollup, reverser::v1::StreamSummary* summary) {
  summary->set_total(rollup.total);
  summary->set_ready(rollup.ready);
  summary->set_replaying(rollup.replaying);
  summary->set_blocked(rollup.blocked);
  summary->set_reason(rollup.reason);
  summary->set_message(rollup.message);
  summary->clear_pending_sample();
  for (const std::string& name : rollup.pending_sample) summary->add_pending_sample(name);
}

}  // namespace reverser::rules
