#include "libs/audit/items_scanner.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "libs/core/json_depth.h"
#include "simdjson.h"

namespace reverser::audit::internal {
namespace {

// A non-object root is kept up to this size to tell malformed text from another JSON value.
constexpr size_t kOtherRootKeep = 1 << 20;
// Member names and the kind / apiVersion values are kept up to this size (ours are short).
constexpr size_t kCaptureCap = 256;

bool IsWhitespace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// The index of the first '"' or '\\' in p[from, n), or n.
size_t NextQuoteOrBackslash(const char* p, size_t from, size_t n) {
  return core::NextQuoteOrBackslash(absl::string_view(p, n), from);
}

// The text of a JSON string's raw content (between its quotes) with its escapes resolved.
bool Unescape(std::string& raw) {
  simdjson::padded_string quoted(absl::StrCat("\"", raw, "\""));
  simdjson::dom::parser parser;
  std::string_view text;
  if (parser.parse(quoted).get_string().get(text)) return false;
  raw.assign(text.data(), text.size());
  return true;
}

}  // namespace

void ValueScanner::Begin(char first, int64_t checked_depth, uint64_t note_commas_below) {
  mode_ = first == '{' || first == '[' ? Mode::kContainer
          : first == '"'               ? Mode::kString
                                       : Mode::kScalar;
  done_ = false;
  is_object_ = first == '{';
  in_string_ = false;
  escaped_ = false;
  depth_ = 0;
  deepest_ = 0;
  checked_depth_ = checked_depth;
  open_is_object_.clear();
  consumed_ = 0;
  note_commas_below_ = note_commas_below;
  last_member_end_ = kNone;
  token_.clear();
}

size_t ValueScanner::Scan(const char* p, size_t n, absl::Status& error) {
  size_t i = 0;
  if (mode_ == Mode::kScalar) {
    for (; i < n; ++i) {
      const char c = p[i];
      if (IsWhitespace(c) || c == ',' || c == ']' || c == '}') {
        done_ = true;
        break;
      }
      if (c == '{' || c == '[' || c == '"' || c == ':') {
        error = absl::InvalidArgumentError(
            absl::StrCat("unexpected '", std::string(1, c), "' inside a value"));
        break;
      }
      if (token_.size() < 8) token_.push_back(c);
    }
    consumed_ += i;
    return i;
  }
  while (i < n && !done_) {
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
        ++i;
        continue;
      }
      // Most of an audit event is string content: memchr (vectorised) finds its end.
      const size_t end = NextQuoteOrBackslash(p, i, n);
      if (end == n) {
        i = n;
        break;
      }
      i = end + 1;
      if (p[end] == '\\') {
        escaped_ = true;
      } else {
        in_string_ = false;
        if (mode_ == Mode::kString) done_ = true;
      }
      continue;
    }
    const char c = p[i++];
    switch (c) {
      case '"':
        in_string_ = true;
        break;
      case '{':
      case '[':
        if (++depth_ > deepest_) deepest_ = depth_;
        if (depth_ <= checked_depth_) open_is_object_.push_back(c == '{');
        break;
      case '}':
      case ']':
        if (depth_ <= checked_depth_) {
          if (open_is_object_.empty() || open_is_object_.back() != (c == '}')) {
            error = absl::InvalidArgumentError(
                absl::StrCat("'", std::string(1, c), "' does not close the open bracket"));
            consumed_ += i;
            return i;
          }
          open_is_object_.pop_back();
        }
        if (--depth_ == 0) done_ = true;
        break;
      case ',':
        if (depth_ == 1 && is_object_ && consumed_ + i - 1 < note_commas_below_) {
          last_member_end_ = consumed_ + i - 1;
        }
        break;
      default:
        break;
    }
  }
  consumed_ += i;
  return i;
}

absl::Status ItemsScanner::Fail(absl::string_view what, uint64_t at) {
  failed_ = absl::InvalidArgumentError(absl::StrCat(what, " at byte ", at));
  buffer_.clear();
  return failed_;
}

bool ItemsScanner::ScanString(const char* p, size_t n, size_t& used, std::string& out, size_t cap) {
  auto keep = [&](const char* from, size_t length) {
    if (out.size() < cap) out.append(from, std::min(length, cap - out.size()));
  };
  size_t i = 0;
  while (i < n) {
    if (string_escape_) {
      string_escape_ = false;
      keep(p + i, 1);
      ++i;
      continue;
    }
    const size_t end = NextQuoteOrBackslash(p, i, n);
    keep(p + i, end - i);
    if (end == n) break;
    if (p[end] == '\\') {
      string_escape_ = true;
      captured_escaped_ = true;
      keep(p + end, 1);
      i = end + 1;
      continue;
    }
    used = end + 1;  // the closing quote
    return true;
  }
  used = n;
  return false;
}

absl::Status ItemsScanner::EndKey() {
  member_ = Member::kOther;
  // A name longer than kept cannot be one we read.
  if (captured_.size() >= kCaptureCap) return absl::OkStatus();
  if (captured_escaped_ && !Unescape(captured_)) {
    return absl::InvalidArgumentError("invalid escape in a member name");
  }
  member_ = captured_ == "kind"         ? Member::kKind
            : captured_ == "apiVersion" ? Member::kApiVersion
            : captured_ == "items"      ? Member::kItems
                                        : Member::kOther;
  return absl::OkStatus();
}

absl::Status ItemsScanner::EndStringValue() {
  if (captured_escaped_ && captured_.size() < kCaptureCap && !Unescape(captured_)) {
    return absl::InvalidArgumentError("invalid escape in a string");
  }
  (member_ == Member::kKind ? kind_ : api_version_) = captured_;
  return absl::OkStatus();
}

void ItemsScanner::Keep(absl::string_view bytes) {
  if (buffer_.size() >= max_element_bytes_) return;
  buffer_.append(bytes.data(), std::min(bytes.size(), max_element_bytes_ - buffer_.size()));
}

absl::Status ItemsScanner::Feed(absl::string_view piece, const ElementCallback& on_element) {
  if (!failed_.ok()) return failed_;
  const char* p = piece.data();
  const size_t n = piece.size();
  size_t i = 0;
  // Where the bytes of the element in progress begin in this piece.
  size_t element_from = 0;
  auto at = [&](size_t k) { return offset_ + k; };
  // Starts a value (a member's or an element) at p[i], which is not consumed yet.
  auto value_start = [&](char c) { return !(c == ',' || c == ':' || c == ']' || c == '}'); };
  while (i < n) {
    const char c = p[i];
    switch (state_) {
      case State::kBeforeRoot:
        if (IsWhitespace(c)) {
          ++i;
        } else if (c == '{') {
          state_ = State::kRootFirstMember;
          ++i;
        } else {
          state_ = State::kOtherRoot;
        }
        break;
      case State::kOtherRoot: {
        const size_t room = kOtherRootKeep - other_root_.size();
        if (n - i > room) other_root_truncated_ = true;
        other_root_.append(p + i, std::min(n - i, room));
        i = n;
        break;
      }
      case State::kRootFirstMember:
      case State::kRootNextMember:
        if (IsWhitespace(c)) {
          ++i;
        } else if (c == '"') {
          captured_.clear();
          captured_escaped_ = false;
          string_escape_ = false;
          state_ = State::kRootKey;
          ++i;
        } else if (c == '}' && state_ == State::kRootFirstMember) {
          state_ = State::kAfterRoot;
          ++i;
        } else {
          return Fail("expected a member name", at(i));
        }
        break;
      case State::kRootKey:
      case State::kRootString: {
        size_t used = 0;
        const bool closed = ScanString(p + i, n - i, used, captured_, kCaptureCap);
        i += used;
        if (!closed) break;
        absl::Status ended = state_ == State::kRootKey ? EndKey() : EndStringValue();
        if (!ended.ok()) return Fail(ended.message(), at(i));
        state_ = state_ == State::kRootKey ? State::kRootColon : State::kRootAfterValue;
        break;
      }
      case State::kRootColon:
        if (IsWhitespace(c)) {
          ++i;
        } else if (c == ':') {
          state_ = State::kRootValue;
          ++i;
        } else {
          return Fail("expected ':' after a member name", at(i));
        }
        break;
      case State::kRootValue:
        if (IsWhitespace(c)) {
          ++i;
          break;
        }
        if (!value_start(c)) return Fail("expected a value", at(i));
        if (member_ == Member::kItems) {
          if (items_seen_) return Fail("a second \"items\" member", at(i));
          items_seen_ = true;
          if (c == '[') {
            items_is_list_ = true;
            state_ = State::kItemsFirst;
            ++i;
            break;
          }
        }
        if ((member_ == Member::kKind || member_ == Member::kApiVersion) && c == '"') {
          captured_.clear();
          captured_escaped_ = false;
          string_escape_ = false;
          state_ = State::kRootString;
          ++i;
          break;
        }
        // A kind or apiVersion of another type reads as absent.
        if (member_ == Member::kKind) kind_.clear();
        if (member_ == Member::kApiVersion) api_version_.clear();
        value_.Begin(c, max_element_depth_ + 1, 0);
        state_ = State::kRootSkip;
        break;
      case State::kRootSkip: {
        absl::Status error;
        i += value_.Scan(p + i, n - i, error);
        if (!error.ok()) return Fail(error.message(), at(i));
        if (!value_.done()) break;
        // `items: null` is an empty list; any other non-array is not a list.
        if (member_ == Member::kItems) items_is_list_ = value_.token() == "null";
        state_ = State::kRootAfterValue;
        break;
      }
      case State::kRootAfterValue:
        if (IsWhitespace(c)) {
          ++i;
        } else if (c == ',') {
          state_ = State::kRootNextMember;
          ++i;
        } else if (c == '}') {
          state_ = State::kAfterRoot;
          ++i;
        } else {
          return Fail("expected ',' or '}' after a member", at(i));
        }
        break;
      case State::kItemsFirst:
      case State::kItemsNext:
        if (IsWhitespace(c)) {
          ++i;
        } else if (c == ']' && state_ == State::kItemsFirst) {
          state_ = State::kRootAfterValue;
          ++i;
        } else if (!value_start(c)) {
          return Fail("expected an element of items", at(i));
        } else {
          value_.Begin(c, max_element_depth_ + 1, max_element_bytes_);
          element_from = i;
          state_ = State::kElement;
        }
        break;
      case State::kElement: {
        absl::Status error;
        i += value_.Scan(p + i, n - i, error);
        if (!error.ok()) return Fail(error.message(), at(i));
        if (!value_.done()) break;
        Element element;
        element.index = elements_++;
        element.bytes = value_.bytes();
        element.depth = value_.deepest();
        element.too_large = element.bytes > max_element_bytes_;
        element.too_deep = element.depth > max_element_depth_;
        element.last_member_end = value_.last_member_end();
        const absl::string_view tail(p + element_from, i - element_from);
        if (buffer_.empty()) {
          // Common case: the whole element lies in this piece.
          element.text = tail.substr(0, std::min(tail.size(), max_element_bytes_));
        } else {
          Keep(tail);
          element.text = buffer_;
          element.buffer = &buffer_;
        }
        on_element(element);
        buffer_.clear();
        state_ = State::kItemsAfterElement;
        break;
      }
      case State::kItemsAfterElement:
        if (IsWhitespace(c)) {
          ++i;
        } else if (c == ',') {
          state_ = State::kItemsNext;
          ++i;
        } else if (c == ']') {
          state_ = State::kRootAfterValue;
          ++i;
        } else {
          return Fail("expected ',' or ']' after an element of items", at(i));
        }
        break;
      case State::kAfterRoot:
        if (!IsWhitespace(c)) return Fail("data after the root object", at(i));
        ++i;
        break;
    }
  }
  // The element goes on in the next piece: keep what this piece holds of it.
  if (state_ == State::kElement) Keep(absl::string_view(p + element_from, n - element_from));
  offset_ += n;
  return absl::OkStatus();
}

absl::Status ItemsScanner::Finish() {
  if (!failed_.ok()) return failed_;
  if (state_ == State::kAfterRoot || state_ == State::kOtherRoot) return absl::OkStatus();
  if (state_ == State::kBeforeRoot) return absl::InvalidArgumentError("the body is empty");
  return absl::InvalidArgumentError(
      absl::StrCat("the body ends inside the root object at byte ", offset_));
}

}  // namespace reverser::audit::internal
