#include "libs/core/stream_position.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace reverser::core {
namespace {

absl::StatusOr<uint64_t> ParseDecimal(absl::string_view what, absl::string_view text) {
  uint64_t value = 0;
  // SimpleAtoi accepts a leading '+' and whitespace; a stream ID has neither.
  bool digits_only = !text.empty() && text.find_first_not_of("0123456789") == absl::string_view::npos;
  if (!digits_only || !absl::SimpleAtoi(text, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " \"", text, "\" is not an unsigned 64-bit decimal number"));
  }
  return value;
}

}  // namespace

absl::StatusOr<StreamPosition> StreamPosition::Parse(absl::string_view text) {
  size_t dash = text.find('-');
  if (dash == absl::string_view::npos) {
    auto rv = ParseDecimal("stream position", text);
    if (!rv.ok()) return rv.status();
    return StreamPosition(*rv, 0);
  }
  auto rv = ParseDecimal("stream position rv", text.substr(0, dash));
  if (!rv.ok()) return rv.status();
  auto seq = ParseDecimal("stream position seq", text.substr(dash + 1));
  if (!seq.ok()) return seq.status();
  return StreamPosition(*rv, *seq);
}

std::string StreamPosition::ToString() const { return absl::StrCat(rv_, "-", seq_); }

absl::StatusOr<uint64_t> ParseResourceVersion(absl::string_view rv) {
  return ParseDecimal("resourceVersion", rv);
}

}  // namespace reverser::core
