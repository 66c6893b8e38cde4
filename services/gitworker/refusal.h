#pragma once

// The gitworker's one way to refuse something it can never write (or read): every refusal —
// an unsafe or unencryptable object, a poison event, a bad message, a file in Git the reader
// refuses — goes through Refuse(), which logs it once naming the object (kind, namespace,
// name) or file, counts it in `reverser_gitworker_refusals_total{reason}`, and sends a
// structured `Refusal` to the delivery stream of every position it covers. Refused items are
// still acked in order (the caller's job), so a stream never stalls on them.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "libs/runtime/metrics.h"
#include "proto/reverser/v1/gitworker.pb.h"

namespace reverser::gitworker {

struct Coverage;  // work_item.h

// What a refusal is about: an object (its ref and kind), a file in Git (path from the
// repository root), or neither (a message-level refusal: a bad target_config, an empty message).
struct RefusedSubject {
  reverser::v1::ResourceRef object;
  std::string kind;
  std::string file;

  static RefusedSubject Object(const reverser::v1::ObjectBody& body);
  static RefusedSubject File(std::string path);
  static RefusedSubject Message() { return {}; }
  // The object a cover is for (a live event's), else a message-level subject (a resync's).
  static RefusedSubject OfCover(const Coverage& cover);

  bool is_object() const { return !object.name().empty(); }
  bool is_file() const { return !file.empty(); }
  // "ConfigMap demo/web", "ClusterRole admin", "file clusters/a/x.yaml", "message".
  std::string ToString() const;
};

// Refuses `subject` for `reason`: one log line, one count, and one Refusal per cover (target,
// claim and position of that cover) to its sink. Covers without a sink are only logged.
void Refuse(const std::vector<Coverage>& covers, const RefusedSubject& subject,
            reverser::v1::RefusalReason reason, absl::string_view message,
            runtime::MetricsRegistry* metrics = &runtime::MetricsRegistry::Global());

// The refusal reason a status carries (attached by WithRefusalReason), else one implied by its
// code: ResourceExhausted → LIMIT_EXCEEDED, anything else → `fallback`.
reverser::v1::RefusalReason RefusalReasonOf(
    const absl::Status& status,
    reverser::v1::RefusalReason fallback = reverser::v1::REFUSAL_REASON_RENDER_FAILED);
// `status` tagged with the refusal reason it stands for (kept by core::Annotate).
absl::Status WithRefusalReason(absl::Status status, reverser::v1::RefusalReason reason);

}  // namespace reverser::gitworker
