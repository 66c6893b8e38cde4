#pragma once

// The API server's audit log as the audit webhook receives it (`audit.k8s.io/v1` EventList):
// decoding, the reference's per-event filters with their outcome labels, the effective user, and
// the author facts an accepted event yields (gitops-reverser §2A.16, behaviours 22, 23, 26).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "libs/redisstore/author_fact_store.h"
#include "nlohmann/json.hpp"

namespace reverser::audit {

// Decodes a webhook body. Errors (malformed JSON, not an audit.k8s.io/v1 EventList, items not a
// list) are InvalidArgument with a message fit for a 400 answer.
absl::StatusOr<std::vector<nlohmann::json>> ParseEventList(absl::string_view body);

// Why an event was accepted or ignored; labels are the reference's `outcome` values.
enum class Outcome {
  kQueued,                    // accepted: yields facts
  kNonScaleSubresource,       // a subresource other than a mutating `scale`
  kNilEvent,                  // not an object
  kStage,                     // stage != ResponseComplete
  kReadOnlyOrUnknownVerb,     // verb not create/update/patch/delete/deletecollection
  kFailedRequest,             // responseStatus.code >= 300
  kDryRun,                    // requestURI has dryRun=All
  kUnchangedResourceVersion,  // request RV == response RV: nothing was persisted
};

absl::string_view OutcomeLabel(Outcome outcome);
// The coarse `category` label: "accepted" or "ignored".
absl::string_view OutcomeCategory(Outcome outcome);

// Applies the reference's filters in order.
Outcome Classify(const nlohmann::json& event);

// Who made the change: the impersonated user when present, else the authenticated user.
struct Actor {
  std::string username;
  std::string display_name;  // user.extra["configbutler.ai/claims/display-name"][0]
  std::string email;         // user.extra["configbutler.ai/claims/email"][0]
  bool is_service_account = false;
};
Actor EffectiveActor(const nlohmann::json& event);

// The facts (the reference's AuthorFact, as stored) an accepted (kQueued) event yields: one for a
// single-object write (none when the object's resource, name or the username cannot be found),
// one per listed item for a deletecollection (verb "deletecollection": stored as `:last` only;
// none for a hollow Status body).
std::vector<redisstore::AuthorFact> ExtractFacts(const nlohmann::json& event);

}  // namespace reverser::audit
