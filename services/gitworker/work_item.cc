#include "services/gitworker/work_item.h"

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/time_util.h"
#include "libs/core/proto_convert.h"

namespace reverser::gitworker {

size_t WorkItem::Bytes() const {
  if (kind == Kind::kEvent) return event.object().sanitized_json().size() + 256;
  size_t total = 256;
  for (const auto& object : resync.desired()) total += object.sanitized_json().size() + 64;
  return total;
}

std::string WorkItem::ObjectKey() const {
  if (kind != Kind::kEvent) return "";
  const auto& ref = event.object().ref();
  return absl::StrCat(ClaimKey(event.claim()), "|", ref.gvr().group(), "/", ref.gvr().resource(),
                      "|", ref.namespace_(), "/", ref.name());
}

std::optional<absl::Time> ObservedAt(const reverser::v1::LiveEvent& event) {
  if (!event.has_observed_at()) return std::nullopt;
  return absl::FromUnixNanos(
      google::protobuf::util::TimeUtil::TimestampToNanoseconds(event.observed_at()));
}

Coverage CoverageOf(const WorkItem& item, std::shared_ptr<FeedbackSink> sink) {
  Coverage cover;
  cover.sink = std::move(sink);
  if (item.kind == WorkItem::Kind::kEvent) {
    cover.target = item.event.target();
    cover.claim = item.event.claim();
    cover.position = core::FromProto(item.event.position());
    cover.observed_at = ObservedAt(item.event);
    cover.object = item.event.object().ref();
    cover.kind = item.event.object().gvk().kind();
  } else {
    cover.target = item.resync.target();
    cover.claim = item.resync.claim();
    cover.position = core::FromProto(item.resync.coverage_head());
  }
  return cover;
}

std::string ClaimKey(const reverser::v1::Claim& claim) {
  const auto& gvr = claim.type().gvr();
  std::string scope = claim.scope().scope_case() == reverser::v1::WatchScope::kNamespace
                          ? absl::StrCat("ns:", claim.scope().namespace_())
                          : "cluster";
  return absl::StrCat(gvr.group(), "/", gvr.version(), "/", gvr.resource(), "|", scope);
}

}  // namespace reverser::gitworker
