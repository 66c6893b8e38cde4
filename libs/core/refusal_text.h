#pragma once

// How a refusal (proto/reverser/v1/catalog.proto `Refusal`) reads in logs and status messages:
// the reason's CamelCase name and the subject ("ConfigMap demo/web", "file x/y.yaml"), with
// names escaped (control characters, backslashes) and abbreviated, since object names can be
// arbitrarily long and hostile.

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"
#include "proto/reverser/v1/catalog.pb.h"

namespace reverser::core {

// Names in refusal texts are cut to this many bytes (the escaped form), then "...".
inline constexpr size_t kRefusalNameBytes = 253;

// REFUSAL_REASON_ENCRYPTION_UNAVAILABLE → "EncryptionUnavailable" ("Unspecified" for 0).
std::string RefusalReasonName(reverser::v1::RefusalReason reason);

// `text` C-escaped (control characters and backslashes) and cut to at most `max_bytes`
// bytes plus "..." (never inside an escape or a UTF-8 sequence).
std::string EscapeAndAbbreviate(absl::string_view text, size_t max_bytes);

// "Kind namespace/name" (or "Kind name" when cluster-scoped; the resource when the kind is
// unknown), "file <path>", or "GitTarget delivery" for a message-level refusal.
std::string RefusedSubjectText(const reverser::v1::Refusal& refusal);

}  // namespace reverser::core
