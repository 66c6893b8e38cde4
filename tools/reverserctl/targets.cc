#include "tools/reverserctl/targets.h"

#include <algorithm>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "libs/rules/claim_syntax.h"
#include "tools/reverserctl/format.h"

namespace reverser::reverserctl {

bool IsTargetName(const std::string& text) {
  size_t slash = text.find('/');
  return slash != std::string::npos && slash > 0 && slash + 1 < text.size() &&
         text.find('/', slash + 1) == std::string::npos;
}

absl::StatusOr<const reverser::v1::StreamSummary*> FindTarget(
    const reverser::v1::ListStreamsResponse& streams, const std::string& name) {
  std::vector<std::string> known;
  for (const auto& summary : streams.summaries()) {
    if (FormatTarget(summary.target()) == name) return &summary;
    known.push_back(FormatTarget(summary.target()));
  }
  return absl::NotFoundError(
      absl::StrCat("follows no target ", name,
                   " (targets: ", known.empty() ? "none" : absl::StrJoin(known, ", "), ")"));
}

absl::StatusOr<reverser::v1::Claim> FindStream(const reverser::v1::StreamSummary& summary,
                                               const std::string& type) {
  auto parsed = rules::ParseClaim(type);
  if (!parsed.ok()) return parsed.status();
  const bool claims_listed =
      std::all_of(summary.streams().begin(), summary.streams().end(),
                  [](const reverser::v1::StreamReadiness& s) { return s.has_claim(); });
  if (!claims_listed) return *parsed;
  const bool scoped = absl::StrContains(type, "@");
  const auto& want = parsed->type().gvr();
  std::vector<const reverser::v1::Claim*> matches;
  std::vector<std::string> known;
  for (const auto& stream : summary.streams()) {
    known.push_back(rules::FormatClaim(stream.claim()));
    const auto& gvr = stream.claim().type().gvr();
    if (gvr.group() != want.group() || gvr.version() != want.version() ||
        gvr.resource() != want.resource()) {
      continue;
    }
    if (scoped && FormatScope(stream.claim().scope()) != FormatScope(parsed->scope())) continue;
    matches.push_back(&stream.claim());
  }
  if (matches.empty()) {
    return absl::NotFoundError(
        absl::StrCat(FormatTarget(summary.target()), " has no stream ", type,
                     " (its streams: ", known.empty() ? "none" : absl::StrJoin(known, ", "), ")"));
  }
  if (matches.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(type, " names several streams of ", FormatTarget(summary.target()),
                     "; add @namespace: ", absl::StrJoin(known, ", ")));
  }
  return *matches[0];
}

}  // namespace reverser::reverserctl
