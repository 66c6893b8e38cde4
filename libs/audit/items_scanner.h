#pragma once

// The framing of an audit webhook body, read as it arrives (internal to libs/audit; see
// audit_event.h for the rules). It follows the root object's members and hands over each element
// of `items` whole, without parsing it: decoding is done per element, so damage inside one
// element stays inside it. Only the current element is buffered, and at most its first
// `max_element_bytes`.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace reverser::audit::internal {

// The extent of one JSON value, fed in pieces: brackets are counted and paired, strings skipped
// with their escapes, scalars read up to their delimiter. Nothing else is validated.
class ValueScanner {
 public:
  static constexpr uint64_t kNone = UINT64_MAX;

  // Starts a value whose first byte is `first` (handed to Scan next). Bracket pairs are checked
  // up to `checked_depth`; deeper ones are only counted. Commas between an object's own members
  // are noted while they lie below `note_commas_below` bytes.
  void Begin(char first, int64_t checked_depth, uint64_t note_commas_below);
  // Consumes the value's bytes from `p[0, n)`; returns how many. After the value's last byte
  // done() is true; a scalar ends before its delimiter, which is left unconsumed.
  size_t Scan(const char* p, size_t n, absl::Status& error);

  bool done() const { return done_; }
  bool is_object() const { return is_object_; }
  uint64_t bytes() const { return consumed_; }
  int64_t deepest() const { return deepest_; }
  // Offset of the last comma between the members of an object value, kNone if none.
  uint64_t last_member_end() const { return last_member_end_; }
  // A scalar's first bytes (enough to tell `null`).
  const std::string& token() const { return token_; }

 private:
  enum class Mode { kContainer, kString, kScalar };
  Mode mode_ = Mode::kScalar;
  bool done_ = false;
  bool is_object_ = false;
  bool in_string_ = false;
  bool escaped_ = false;
  int64_t depth_ = 0;
  int64_t deepest_ = 0;
  int64_t checked_depth_ = 0;
  std::vector<bool> open_is_object_;  // the kind of each open bracket, up to checked_depth_
  uint64_t consumed_ = 0;
  uint64_t note_commas_below_ = 0;
  uint64_t last_member_end_ = kNone;
  std::string token_;
};

class ItemsScanner {
 public:
  struct Element {
    size_t index = 0;               // position in `items`
    absl::string_view text;         // the element; when too_large, only its first max_element_bytes
    std::string* buffer = nullptr;  // set when `text` is this scanner's buffer: may be moved from
    uint64_t bytes = 0;             // the element's whole size
    int64_t depth = 0;              // its deepest nesting (an object element is 1)
    bool too_large = false;         // bytes > max_element_bytes
    bool too_deep = false;          // depth > max_element_depth
    // For an object element: the offset in `text` of the last comma between its own members
    // (kNone: none), so `text[0, last_member_end) + "}"` is the object with its first members.
    uint64_t last_member_end = ValueScanner::kNone;
  };
  using ElementCallback = std::function<void(Element& element)>;

  ItemsScanner(size_t max_element_bytes, int64_t max_element_depth)
      : max_element_bytes_(max_element_bytes), max_element_depth_(max_element_depth) {}

  // Consumes the next piece of the body, calling `on_element` for each element it completes.
  // Broken framing is InvalidArgument (with what was wrong and where); the scanner stays failed.
  absl::Status Feed(absl::string_view piece, const ElementCallback& on_element);
  // At the end of the body: InvalidArgument if it ended inside the root object (or was empty).
  absl::Status Finish();

  // The root value is not an object: its first bytes, kept so a verdict can tell "not JSON"
  // from "not an object".
  bool root_is_other_value() const { return state_ == State::kOtherRoot; }
  const std::string& other_root_text() const { return other_root_; }
  bool other_root_truncated() const { return other_root_truncated_; }

  // The root's `kind` and `apiVersion` (the last of repeated ones; "" when not strings).
  const std::string& kind() const { return kind_; }
  const std::string& api_version() const { return api_version_; }
  // False once `items` was something other than an array or null.
  bool items_is_list() const { return items_is_list_; }
  size_t elements() const { return elements_; }
  size_t buffered_bytes() const { return buffer_.size() + other_root_.size(); }

 private:
  enum class State {
    kBeforeRoot,
    kOtherRoot,
    kRootFirstMember,  // after '{': a name or '}'
    kRootNextMember,   // after ',': a name
    kRootKey,          // inside a member name
    kRootColon,
    kRootValue,       // before a member's value
    kRootString,      // inside the string value of kind or apiVersion
    kRootSkip,        // inside any other member value
    kRootAfterValue,  // ',' or '}'
    kItemsFirst,      // after '[': an element or ']'
    kItemsNext,       // after ',': an element
    kElement,
    kItemsAfterElement,  // ',' or ']'
    kAfterRoot,
  };
  enum class Member { kOther, kKind, kApiVersion, kItems };

  absl::Status Fail(absl::string_view what, uint64_t at);
  // Scans a string's bytes into `out` (at most `cap` of them kept); true at its closing quote.
  bool ScanString(const char* p, size_t n, size_t& used, std::string& out, size_t cap);
  absl::Status EndKey();
  absl::Status EndStringValue();
  void Keep(absl::string_view bytes);  // into buffer_, up to max_element_bytes_

  const size_t max_element_bytes_;
  const int64_t max_element_depth_;
  State state_ = State::kBeforeRoot;
  absl::Status failed_;
  uint64_t offset_ = 0;  // body bytes consumed before the current piece

  // Member names and the kind / apiVersion values.
  std::string captured_;
  bool captured_escaped_ = false;
  bool string_escape_ = false;  // the previous byte of the captured string was a backslash
  Member member_ = Member::kOther;
  std::string kind_;
  std::string api_version_;
  bool items_seen_ = false;
  bool items_is_list_ = true;

  ValueScanner value_;
  size_t elements_ = 0;
  std::string buffer_;  // the current element's bytes from earlier pieces
  std::string other_root_;
  bool other_root_truncated_ = false;
};

}  // namespace reverser::audit::internal
