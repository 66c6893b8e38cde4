#pragma once

// Fast re-serialisation of JSON text into the project's canonical form: compact, object keys in
// byte order — the exact bytes nlohmann's `dump()` gives for the same document, which is how
// every stored object has always been written. simdjson parses (an order of magnitude faster
// than building an nlohmann DOM); this file writes.
//
// Documents whose nlohmann dump this writer cannot reproduce byte for byte — non-integer or
// out-of-range numbers, duplicate keys — are reported as kUnimplemented so the caller can take
// the nlohmann path for that one document. Invalid JSON is kInvalidArgument.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "simdjson.h"

namespace reverser::fastjson {

// A member left out of the output: `member` of the root object's member `parent` (for example
// metadata.managedFields). Empty `member` = nothing left out.
struct Omit {
  absl::string_view parent;
  absl::string_view member;
};

// Parses and writes; keeps simdjson's buffers between calls. One per thread (not thread-safe).
class CanonicalWriter {
 public:
  CanonicalWriter() = default;
  CanonicalWriter(const CanonicalWriter&) = delete;
  CanonicalWriter& operator=(const CanonicalWriter&) = delete;

  // Parses `text`; the root stays valid until the next Parse.
  absl::StatusOr<simdjson::dom::element> Parse(absl::string_view text);

  // Appends `value` in canonical form to `out`; on error `out` may hold a partial write.
  absl::Status Append(simdjson::dom::element value, std::string& out, Omit omit = {});

  // Parse + Append into a fresh string.
  absl::StatusOr<std::string> Canonicalize(absl::string_view text, Omit omit = {});

 private:
  using Member = std::pair<std::string_view, simdjson::dom::element>;

  absl::Status AppendValue(simdjson::dom::element value, std::string& out, size_t depth,
                           const Omit* omit);

  simdjson::dom::parser parser_;
  // Sorted members, one vector per nesting depth, reused between calls.
  std::vector<std::vector<Member>> members_by_depth_;
};

// Appends `text` as a JSON string literal, escaped as nlohmann escapes (ensure_ascii off).
void AppendQuoted(std::string_view text, std::string& out);

}  // namespace reverser::fastjson
