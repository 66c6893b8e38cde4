#include "libs/core/refusal_text.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace reverser::core {

std::string RefusalReasonName(reverser::v1::RefusalReason reason) {
  std::string name = reverser::v1::RefusalReason_Name(reason);
  constexpr char kPrefix[] = "REFUSAL_REASON_";
  if (absl::StartsWith(name, kPrefix)) name = name.substr(sizeof(kPrefix) - 1);
  if (name.empty()) return "Unknown";
  std::string out;
  for (absl::string_view word : absl::StrSplit(name, '_', absl::SkipEmpty())) {
    out.push_back(absl::ascii_toupper(word[0]));
    out += absl::AsciiStrToLower(word.substr(1));
  }
  return out;
}

std::string EscapeAndAbbreviate(absl::string_view text, size_t max_bytes) {
  // Piece by piece (an escape, a UTF-8 sequence, a byte) so the cut never splits one.
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    size_t length = 1;
    if (c >= 0xF0) {
      length = 4;
    } else if (c >= 0xE0) {
      length = 3;
    } else if (c >= 0xC0) {
      length = 2;
    }
    length = std::min(length, text.size() - i);
    std::string piece = (c < 0x20 || c == 0x7F || c == '\\') ? absl::CHexEscape(text.substr(i, 1))
                                                             : std::string(text.substr(i, length));
    if (out.size() + piece.size() > max_bytes) return out + "...";
    out += piece;
    i += length;
  }
  return out;
}

std::string RefusedSubjectText(const reverser::v1::Refusal& refusal) {
  if (!refusal.file().empty()) {
    return absl::StrCat("file ", EscapeAndAbbreviate(refusal.file(), 4 * kRefusalNameBytes));
  }
  const auto& ref = refusal.object();
  if (ref.name().empty()) return "GitTarget delivery";
  std::string what = refusal.kind().empty() ? ref.gvr().resource() : refusal.kind();
  std::string name = EscapeAndAbbreviate(ref.name(), kRefusalNameBytes);
  if (ref.namespace_().empty()) return absl::StrCat(what, " ", name);
  return absl::StrCat(what, " ", ref.namespace_(), "/", name);
}

}  // namespace reverser::core
