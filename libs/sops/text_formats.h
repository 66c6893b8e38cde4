#pragma once

// The fixed text shapes a SOPS file holds (ENC values, RFC 3339 times, yaml.v3 timestamps),
// recognised by linear scanners. Values from Git and the cluster can be megabytes long; a
// backtracking matcher (libstdc++ std::regex recurses once per character) would overflow the
// stack on them. Each function documents the regular expression whose matches it reproduces
// exactly (accepted strings and captured parts; libs/sops/text_formats_test.cc compares them).

#include <optional>

#include "absl/strings/string_view.h"

namespace reverser::sops {

// `^ENC\[AES256_GCM,data:(.+),iv:(.+),tag:(.+),type:(.+)\]` searched in `text` (ECMAScript: `.`
// stops at \n and \r; not end-anchored), with the greedy captures of a backtracking matcher:
// each part as long as the parts after it allow. The views point into `text`.
struct EncParts {
  absl::string_view data;
  absl::string_view iv;
  absl::string_view tag;
  absl::string_view type;
};
std::optional<EncParts> MatchEncValue(absl::string_view text);

// `^(\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$` (ASCII digits).
struct Rfc3339Parts {
  absl::string_view date_time;  // "2006-01-02T15:04:05" (the separator as written)
  absl::string_view fraction;   // ".123" or empty
  absl::string_view zone;       // "Z", "z" or "+hh:mm" / "-hh:mm"
};
std::optional<Rfc3339Parts> MatchRfc3339(absl::string_view text);

// yaml.v3's timestamp shapes (resolve.go allowedTimestampFormats) as whole-string matches:
//   `(\d{4})-(\d{1,2})-(\d{1,2})`
//   `(\d{4})-(\d{1,2})-(\d{1,2})[Tt]\d{1,2}:\d{1,2}:\d{1,2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`
//   `(\d{4})-(\d{1,2})-(\d{1,2}) \d{1,2}:\d{1,2}:\d{1,2}(\.\d+)?`
// Ranges are not checked here; month and day are returned for the caller to check.
struct TimestampShape {
  absl::string_view year;
  absl::string_view month;
  absl::string_view day;
};
std::optional<TimestampShape> MatchTimestampShape(absl::string_view text);

}  // namespace reverser::sops
