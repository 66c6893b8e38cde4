#include "services/gitworker/refusal.h"

#include <set>
#include <tuple>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "libs/core/proto_convert.h"
#include "libs/core/refusal_text.h"
#include "libs/runtime/log.h"
#include "nlohmann/json.hpp"
#include "services/gitworker/work_item.h"

namespace reverser::gitworker {
namespace {

constexpr char kReasonPayload[] = "type.reverser.dev/refusal-reason";
// Refusal messages travel to the splicer and into status: long causes are cut.
constexpr size_t kMaxMessageBytes = 1024;

reverser::v1::Refusal Describe(const RefusedSubject& subject, reverser::v1::RefusalReason reason,
                               absl::string_view message) {
  reverser::v1::Refusal refusal;
  if (subject.is_object()) {
    *refusal.mutable_object() = subject.object;
    refusal.set_kind(subject.kind);
  }
  refusal.set_file(subject.file);
  refusal.set_reason(reason);
  refusal.set_message(core::EscapeAndAbbreviate(message, kMaxMessageBytes));
  return refusal;
}

}  // namespace

RefusedSubject RefusedSubject::Object(const reverser::v1::ObjectBody& body) {
  RefusedSubject subject;
  subject.object = body.ref();
  subject.kind = body.gvk().kind();
  if (subject.kind.empty()) {
    nlohmann::json parsed = nlohmann::json::parse(body.sanitized_json(), nullptr, false);
    if (parsed.is_object() && parsed.contains("kind") && parsed["kind"].is_string()) {
      subject.kind = parsed["kind"].get<std::string>();
    }
  }
  return subject;
}

RefusedSubject RefusedSubject::File(std::string path) {
  RefusedSubject subject;
  subject.file = std::move(path);
  return subject;
}

RefusedSubject RefusedSubject::OfCover(const Coverage& cover) {
  RefusedSubject subject;
  subject.object = cover.object;
  subject.kind = cover.kind;
  return subject;
}

std::string RefusedSubject::ToString() const {
  return core::RefusedSubjectText(Describe(*this, reverser::v1::REFUSAL_REASON_UNSPECIFIED, ""));
}

void Refuse(const std::vector<Coverage>& covers, const RefusedSubject& subject,
            reverser::v1::RefusalReason reason, absl::string_view message,
            runtime::MetricsRegistry* metrics) {
  const reverser::v1::Refusal refusal = Describe(subject, reason, message);
  const std::string reason_name = core::RefusalReasonName(reason);
  const std::string target =
      covers.empty() ? std::string()
                     : absl::StrCat(covers[0].target.namespace_(), "/", covers[0].target.name());
  if (subject.is_file()) {
    runtime::LogWarning("refused", {{"target", target},
                                    {"file", subject.file},
                                    {"reason", reason_name},
                                    {"message", refusal.message()}});
  } else if (!subject.is_object()) {
    runtime::LogWarning("refused", {{"target", target},
                                    {"subject", "message"},
                                    {"reason", reason_name},
                                    {"message", refusal.message()}});
  } else {
    runtime::LogWarning("refused", {{"target", target},
                                    {"kind", subject.kind},
                                    {"namespace", subject.object.namespace_()},
                                    {"name", subject.object.name()},
                                    {"resource", subject.object.gvr().resource()},
                                    {"reason", reason_name},
                                    {"message", refusal.message()}});
  }
  metrics
      ->GetCounter("reverser_gitworker_refusals_total",
                   "Objects, files and messages the gitworker refused, by reason.",
                   {{"reason", reason_name}})
      .Increment();
  // Coalesced covers of one object may share a position: one Refusal per delivery.
  std::set<std::tuple<const FeedbackSink*, std::string, core::StreamPosition>> sent;
  for (const Coverage& cover : covers) {
    if (!cover.sink) continue;
    const std::string lane = absl::StrCat(cover.target.uid(), "|", cover.target.namespace_(), "/",
                                          cover.target.name(), "|", ClaimKey(cover.claim));
    if (!sent.emplace(cover.sink.get(), lane, cover.position).second) continue;
    reverser::v1::Refusal out = refusal;
    *out.mutable_target() = cover.target;
    *out.mutable_claim() = cover.claim;
    if (!cover.position.IsZero()) *out.mutable_position() = core::ToProto(cover.position);
    cover.sink->Refused(out);
  }
}

reverser::v1::RefusalReason RefusalReasonOf(const absl::Status& status,
                                            reverser::v1::RefusalReason fallback) {
  if (auto payload = status.GetPayload(kReasonPayload); payload.has_value()) {
    int value = 0;
    if (absl::SimpleAtoi(std::string(*payload), &value) &&
        reverser::v1::RefusalReason_IsValid(value)) {
      return static_cast<reverser::v1::RefusalReason>(value);
    }
  }
  if (absl::IsResourceExhausted(status)) return reverser::v1::REFUSAL_REASON_LIMIT_EXCEEDED;
  return fallback;
}

absl::Status WithRefusalReason(absl::Status status, reverser::v1::RefusalReason reason) {
  if (!status.ok())
    status.SetPayload(kReasonPayload, absl::Cord(absl::StrCat(static_cast<int>(reason))));
  return status;
}

}  // namespace reverser::gitworker
