#include "services/splicer/refusal_book.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "libs/core/proto_convert.h"
#include "libs/core/refusal_text.h"
#include "services/splicer/delivery_client.h"

namespace reverser::splicer {
namespace {

constexpr char kTargetLevel[] = "target";

std::string ObjectKey(const reverser::v1::ResourceRef& ref) {
  return absl::StrCat(ref.gvr().group(), "/", ref.gvr().resource(), "|", ref.namespace_(), "/",
                      ref.name());
}

bool HasClaim(const reverser::v1::Claim& claim) { return !claim.type().gvr().resource().empty(); }

std::string StreamLevel(const std::string& stream) { return absl::StrCat("stream:", stream); }

// A copy small enough for the summary: names and paths cut (object names can be megabytes).
reverser::v1::Refusal Sample(const reverser::v1::Refusal& refusal) {
  reverser::v1::Refusal out = refusal;
  if (out.object().name().size() > core::kRefusalNameBytes) {
    out.mutable_object()->set_name(
        core::EscapeAndAbbreviate(out.object().name(), core::kRefusalNameBytes));
  }
  if (out.file().size() > 4 * core::kRefusalNameBytes) {
    out.set_file(core::EscapeAndAbbreviate(out.file(), 4 * core::kRefusalNameBytes));
  }
  return out;
}

}  // namespace

void RefusalBook::OnRefusal(const reverser::v1::Refusal& refusal) {
  if (refusal.target().uid().empty()) return;  // nothing to report it on
  absl::MutexLock lock(&mu_);
  Target& target = targets_[refusal.target().uid()];
  if (!refusal.file().empty()) {
    auto same = [&](const reverser::v1::Refusal& r) { return r.file() == refusal.file(); };
    target.files.erase(std::remove_if(target.files.begin(), target.files.end(), same),
                       target.files.end());
    target.files.push_back(refusal);
    return;
  }
  const std::string stream =
      HasClaim(refusal.claim()) ? StreamKey(refusal.target(), refusal.claim()) : "";
  const std::string key = !refusal.object().name().empty() ? ObjectKey(refusal.object())
                          : stream.empty()                 ? std::string(kTargetLevel)
                                                           : StreamLevel(stream);
  target.entries[key] = Entry{refusal, ++clock_, stream};
  while (target.entries.size() > options_.max_objects) {
    auto oldest = std::min_element(
        target.entries.begin(), target.entries.end(),
        [](const auto& a, const auto& b) { return a.second.seen < b.second.seen; });
    target.entries.erase(oldest);
  }
}

void RefusalBook::OnRefusedFiles(const reverser::v1::RefusedFiles& files) {
  if (files.target().uid().empty()) return;
  absl::MutexLock lock(&mu_);
  Target& target = targets_[files.target().uid()];
  target.files.assign(files.refusals().begin(), files.refusals().end());
}

void RefusalBook::OnPathRefusal(const reverser::v1::PathRefusal& refusal) {
  if (refusal.target().uid().empty()) return;
  absl::MutexLock lock(&mu_);
  Target& target = targets_[refusal.target().uid()];
  if (refusal.issue_count() == 0) {
    target.path.reset();
    return;
  }
  target.path = refusal;
  target.path_seen = ++clock_;
}

void RefusalBook::OnResyncSent(const reverser::v1::GitTargetRef& target,
                               const reverser::v1::Claim& claim, core::StreamPosition head) {
  absl::MutexLock lock(&mu_);
  if (!targets_.count(target.uid())) return;  // nothing refused: nothing to settle
  checks_[StreamKey(target, claim)].push_back({head, "", ++clock_});
}

void RefusalBook::OnEventSent(const reverser::v1::GitTargetRef& target,
                              const reverser::v1::Claim& claim, core::StreamPosition position,
                              const reverser::v1::ObjectBody& object) {
  absl::MutexLock lock(&mu_);
  auto it = targets_.find(target.uid());
  if (it == targets_.end()) return;
  const std::string stream = StreamKey(target, claim);
  const auto& entries = it->second.entries;
  // Only a delivery that can settle something is remembered.
  if (!entries.count(ObjectKey(object.ref())) && !entries.count(StreamLevel(stream)) &&
      !entries.count(kTargetLevel) && !it->second.path.has_value()) {
    return;
  }
  checks_[stream].push_back({position, ObjectKey(object.ref()), ++clock_});
}

void RefusalBook::Settle(Target& target, const std::string& stream, const Check& check) {
  auto settled = [&](const std::string& key) {
    auto it = target.entries.find(key);
    if (it != target.entries.end() && it->second.seen < check.sent) target.entries.erase(it);
  };
  settled(kTargetLevel);
  settled(StreamLevel(stream));
  if (target.path.has_value() && target.path_seen < check.sent) target.path.reset();
  if (!check.object.empty()) {
    settled(check.object);
    return;
  }
  // A resync delivers the stream's whole desired set: whatever it did not refuse again is
  // written or gone.
  for (auto it = target.entries.begin(); it != target.entries.end();) {
    if (it->second.stream == stream && it->second.seen < check.sent) {
      it = target.entries.erase(it);
    } else {
      ++it;
    }
  }
}

void RefusalBook::OnAck(const reverser::v1::DeliveryAck& ack) {
  const core::StreamPosition position = core::FromProto(ack.position());
  const std::string stream = StreamKey(ack.target(), ack.claim());
  absl::MutexLock lock(&mu_);
  auto checks = checks_.find(stream);
  if (checks == checks_.end()) return;
  auto target = targets_.find(ack.target().uid());
  for (auto it = checks->second.begin(); it != checks->second.end();) {
    if (it->position > position) {
      ++it;
      continue;
    }
    if (target != targets_.end()) Settle(target->second, stream, *it);
    it = checks->second.erase(it);
  }
  if (checks->second.empty()) checks_.erase(checks);
}

void RefusalBook::ResetStream(const reverser::v1::GitTargetRef& target,
                              const reverser::v1::Claim& claim) {
  absl::MutexLock lock(&mu_);
  checks_.erase(StreamKey(target, claim));
}

void RefusalBook::ForgetTarget(const std::string& target_uid) {
  absl::MutexLock lock(&mu_);
  targets_.erase(target_uid);
  const std::string prefix = absl::StrCat(target_uid, "|");
  for (auto it = checks_.begin(); it != checks_.end();) {
    it = it->first.rfind(prefix, 0) == 0 ? checks_.erase(it) : std::next(it);
  }
}

void RefusalBook::Fill(reverser::v1::StreamSummary* summary) const {
  absl::MutexLock lock(&mu_);
  summary->clear_refusals();
  summary->set_refused_objects(0);
  summary->set_refused_files(0);
  summary->clear_path_refusal();
  auto it = targets_.find(summary->target().uid());
  if (it == targets_.end()) return;
  const Target& target = it->second;
  std::vector<const Entry*> newest;
  for (const auto& [key, entry] : target.entries) newest.push_back(&entry);
  std::sort(newest.begin(), newest.end(),
            [](const Entry* a, const Entry* b) { return a->seen > b->seen; });
  summary->set_refused_objects(static_cast<uint32_t>(newest.size()));
  for (size_t i = 0; i < newest.size() && i < options_.sample; ++i) {
    *summary->add_refusals() = Sample(newest[i]->refusal);
  }
  if (target.path.has_value()) *summary->mutable_path_refusal() = *target.path;
  summary->set_refused_files(static_cast<uint32_t>(target.files.size()));
  for (size_t i = 0; i < target.files.size() && i < options_.sample; ++i) {
    *summary->add_refusals() = Sample(target.files[i]);
  }
}

}  // namespace reverser::splicer
