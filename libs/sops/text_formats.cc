#include "libs/sops/text_formats.h"

#include <cstddef>

namespace reverser::sops {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// A cursor over `text` for the fixed-shape matchers; every method consumes only on success.
class Cursor {
 public:
  explicit Cursor(absl::string_view text) : text_(text) {}

  size_t pos() const { return pos_; }
  bool AtEnd() const { return pos_ == text_.size(); }
  absl::string_view Since(size_t start) const { return text_.substr(start, pos_ - start); }

  bool Char(char c) {
    if (pos_ >= text_.size() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  bool OneOf(absl::string_view set) {
    if (pos_ >= text_.size() || set.find(text_[pos_]) == absl::string_view::npos) return false;
    ++pos_;
    return true;
  }
  // Exactly n digits.
  bool Digits(size_t n) {
    if (text_.size() - pos_ < n) return false;
    for (size_t k = 0; k < n; ++k) {
      if (!IsDigit(text_[pos_ + k])) return false;
    }
    pos_ += n;
    return true;
  }
  // min..max digits, as many as there are (greedy; the shapes here never need to give back).
  bool DigitRun(size_t min, size_t max) {
    size_t n = 0;
    while (n < max && pos_ + n < text_.size() && IsDigit(text_[pos_ + n])) ++n;
    if (n < min) return false;
    pos_ += n;
    return true;
  }
  // `(\.\d+)?`: consumed only when a digit follows the dot.
  void OptionalFraction() {
    if (pos_ + 1 < text_.size() && text_[pos_] == '.' && IsDigit(text_[pos_ + 1])) {
      ++pos_;
      DigitRun(1, text_.size());
    }
  }
  // `[+-]\d{2}:\d{2}`
  bool NumericZone() {
    const size_t start = pos_;
    if (OneOf("+-") && Digits(2) && Char(':') && Digits(2)) return true;
    pos_ = start;
    return false;
  }

 private:
  absl::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

std::optional<EncParts> MatchEncValue(absl::string_view text) {
  constexpr absl::string_view kPrefix = "ENC[AES256_GCM,data:";
  constexpr absl::string_view kIv = ",iv:";
  constexpr absl::string_view kTag = ",tag:";
  constexpr absl::string_view kType = ",type:";
  if (text.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  // `.` matches neither \n nor \r, and no literal of the pattern holds one: the match lies
  // within the first line.
  absl::string_view rest = text.substr(kPrefix.size());
  rest = rest.substr(0, rest.find_first_of("\n\r"));
  // Backtracking tries the longest `data` first, then the longest `iv` for it, and so on, so
  // each separator is the last occurrence that still leaves room (one character per part) for
  // the parts after it. Positions below are offsets into `rest`.
  const size_t close = rest.rfind(']');
  if (close == absl::string_view::npos) return std::nullopt;
  // ",type:" at c needs a type of at least one character before `close`: c + 6 + 1 <= close.
  if (close < kType.size() + 1) return std::nullopt;
  const size_t type_at = rest.rfind(kType, close - kType.size() - 1);
  if (type_at == absl::string_view::npos) return std::nullopt;
  // ",tag:" at b needs a tag of at least one character before ",type:": b + 5 + 1 <= c.
  if (type_at < kTag.size() + 1) return std::nullopt;
  const size_t tag_at = rest.rfind(kTag, type_at - kTag.size() - 1);
  if (tag_at == absl::string_view::npos) return std::nullopt;
  // ",iv:" at a needs data before it (a >= 1) and an iv after it: a + 4 + 1 <= b.
  if (tag_at < kIv.size() + 1) return std::nullopt;
  const size_t iv_at = rest.rfind(kIv, tag_at - kIv.size() - 1);
  if (iv_at == absl::string_view::npos || iv_at == 0) return std::nullopt;
  EncParts parts;
  parts.data = rest.substr(0, iv_at);
  parts.iv = rest.substr(iv_at + kIv.size(), tag_at - iv_at - kIv.size());
  parts.tag = rest.substr(tag_at + kTag.size(), type_at - tag_at - kTag.size());
  parts.type = rest.substr(type_at + kType.size(), close - type_at - kType.size());
  return parts;
}

std::optional<Rfc3339Parts> MatchRfc3339(absl::string_view text) {
  Cursor c(text);
  if (!(c.Digits(4) && c.Char('-') && c.Digits(2) && c.Char('-') && c.Digits(2) && c.OneOf("Tt") &&
        c.Digits(2) && c.Char(':') && c.Digits(2) && c.Char(':') && c.Digits(2))) {
    return std::nullopt;
  }
  Rfc3339Parts parts;
  parts.date_time = c.Since(0);
  const size_t fraction_start = c.pos();
  c.OptionalFraction();
  parts.fraction = c.Since(fraction_start);
  const size_t zone_start = c.pos();
  if (!c.OneOf("Zz") && !c.NumericZone()) return std::nullopt;
  parts.zone = c.Since(zone_start);
  if (!c.AtEnd()) return std::nullopt;
  return parts;
}

std::optional<TimestampShape> MatchTimestampShape(absl::string_view text) {
  Cursor c(text);
  TimestampShape shape;
  size_t start = c.pos();
  if (!c.Digits(4)) return std::nullopt;
  shape.year = c.Since(start);
  if (!c.Char('-')) return std::nullopt;
  start = c.pos();
  if (!c.DigitRun(1, 2)) return std::nullopt;
  shape.month = c.Since(start);
  if (!c.Char('-')) return std::nullopt;
  start = c.pos();
  if (!c.DigitRun(1, 2)) return std::nullopt;
  shape.day = c.Since(start);
  if (c.AtEnd()) return shape;
  const bool t_form = c.OneOf("Tt");
  if (!t_form && !c.Char(' ')) return std::nullopt;
  if (!(c.DigitRun(1, 2) && c.Char(':') && c.DigitRun(1, 2) && c.Char(':') && c.DigitRun(1, 2)))
    return std::nullopt;
  c.OptionalFraction();
  if (t_form && !c.Char('Z') && !c.NumericZone()) return std::nullopt;
  if (!c.AtEnd()) return std::nullopt;
  return shape;
}

}  // namespace reverser::sops
