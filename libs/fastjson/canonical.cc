#include "libs/fastjson/canonical.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace reverser::fastjson {
namespace {

// simdjson's own depth limit is 1024; nlohmann recurses too. Anything deeper is hostile.
constexpr size_t kMaxDepth = 512;

absl::Status ParseError(simdjson::error_code code) {
  return absl::InvalidArgumentError(
      absl::StrCat("invalid JSON: ", simdjson::error_message(code)));
}

// Whether any of the 8 bytes at `p` is a control character, '"' or '\\' (SWAR: a byte of
// `x - 0x01..` borrows into its top bit only where that byte of x was zero or, for the `< 0x20`
// test, below 0x20; `& ~x` drops bytes >= 0x80). False positives are harmless: the caller then
// looks at those bytes one by one.
inline bool WordNeedsEscape(const char* p) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL;
  constexpr uint64_t kHigh = 0x8080808080808080ULL;
  uint64_t w;
  std::memcpy(&w, p, sizeof(w));
  const uint64_t quote = w ^ (kOnes * '"');
  const uint64_t backslash = w ^ (kOnes * '\\');
  const uint64_t control = (w - kOnes * 0x20) & ~w;
  const uint64_t zero_quote = (quote - kOnes) & ~quote;
  const uint64_t zero_backslash = (backslash - kOnes) & ~backslash;
  return ((control | zero_quote | zero_backslash) & kHigh) != 0;
}

template <typename Int>
void AppendInteger(Int value, std::string& out) {
  char buffer[24];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out.append(buffer, end);
}

}  // namespace

void AppendQuoted(std::string_view text, std::string& out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  const char* data = text.data();
  const size_t size = text.size();
  size_t run = 0;  // start of the pending run of bytes copied as they are
  size_t i = 0;
  while (i < size) {
    // Most strings need no escape at all: skip them eight bytes at a time.
    while (i + 8 <= size && !WordNeedsEscape(data + i)) i += 8;
    const size_t stop = std::min(size, i + 8);
    for (; i < stop; ++i) {
      const unsigned char c = static_cast<unsigned char>(data[i]);
      if (c >= 0x20 && c != '"' && c != '\\') continue;
      out.append(data + run, i - run);
      run = i + 1;
      switch (c) {
        case '"':
          out.append("\\\"");
          break;
        case '\\':
          out.append("\\\\");
          break;
        case '\b':
          out.append("\\b");
          break;
        case '\f':
          out.append("\\f");
          break;
        case '\n':
          out.append("\\n");
          break;
        case '\r':
          out.append("\\r");
          break;
        case '\t':
          out.append("\\t");
          break;
        default: {
          const char escaped[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xF]};
          out.append(escaped, sizeof(escaped));
        }
      }
    }
  }
  out.append(data + run, size - run);
  out.push_back('"');
}

absl::StatusOr<simdjson::dom::element> CanonicalWriter::Parse(absl::string_view text) {
  simdjson::dom::element root;
  // realloc_if_needed: simdjson copies the text into its own padded buffer (reused).
  if (auto error = parser_.parse(text.data(), text.size(), true).get(root)) {
    // Integers beyond 64 bits (nlohmann reads them as doubles) and malformed numbers alike:
    // the caller's nlohmann path decides which it is.
    if (error == simdjson::NUMBER_ERROR || error == simdjson::NUMBER_OUT_OF_RANGE) {
      return absl::UnimplementedError("a number outside the 64-bit integer range");
    }
    return ParseError(error);
  }
  return root;
}

absl::Status CanonicalWriter::Append(simdjson::dom::element value, std::string& out, Omit omit) {
  return AppendValue(value, out, 0, omit.member.empty() ? nullptr : &omit);
}

absl::StatusOr<std::string> CanonicalWriter::Canonicalize(absl::string_view text, Omit omit) {
  simdjson::dom::element root;
  {
    absl::StatusOr<simdjson::dom::element> parsed = Parse(text);
    if (!parsed.ok()) return parsed.status();
    root = *parsed;
  }
  std::string out;
  out.reserve(text.size());
  if (absl::Status status = Append(root, out, omit); !status.ok()) return status;
  return out;
}

absl::Status CanonicalWriter::AppendValue(simdjson::dom::element value, std::string& out,
                                          size_t depth, const Omit* omit) {
  using simdjson::dom::element_type;
  switch (value.type()) {
    case element_type::OBJECT: {
      if (depth >= kMaxDepth) return absl::InvalidArgumentError("JSON nested too deeply");
      if (members_by_depth_.size() <= depth) members_by_depth_.resize(depth + 1);
      // Filled, sorted and written before any deeper level reuses its own vector.
      std::vector<Member>& members = members_by_depth_[depth];
      members.clear();
      // Held by value: value_unsafe() returns a reference into the temporary result.
      const simdjson::dom::object object = value.get_object().value_unsafe();
      for (simdjson::dom::key_value_pair field : object) {
        members.emplace_back(field.key, field.value);
      }
      std::sort(members.begin(), members.end(),
                [](const Member& a, const Member& b) { return a.first < b.first; });
      for (size_t i = 1; i < members.size(); ++i) {
        // nlohmann keeps the last of duplicate keys; rare enough to leave to it.
        if (members[i].first == members[i - 1].first) {
          return absl::UnimplementedError("duplicate object key");
        }
      }
      out.push_back('{');
      bool first = true;
      // Copied: a deeper level may grow members_by_depth_ and move this vector's storage.
      const size_t count = members.size();
      for (size_t i = 0; i < count; ++i) {
        const Member member = members_by_depth_[depth][i];
        const absl::string_view key(member.first.data(), member.first.size());
        const Omit* child_omit = nullptr;
        if (omit != nullptr && depth == 0 && key == omit->parent) child_omit = omit;
        if (omit != nullptr && depth == 1 && key == omit->member) continue;
        if (!first) out.push_back(',');
        first = false;
        AppendQuoted(member.first, out);
        out.push_back(':');
        // Only the root's `parent` member (an object) passes the omission down one level.
        const bool pass = child_omit != nullptr && member.second.is_object();
        if (absl::Status status =
                AppendValue(member.second, out, depth + 1, pass ? child_omit : nullptr);
            !status.ok()) {
          return status;
        }
      }
      out.push_back('}');
      return absl::OkStatus();
    }
    case element_type::ARRAY: {
      if (depth >= kMaxDepth) return absl::InvalidArgumentError("JSON nested too deeply");
      out.push_back('[');
      bool first = true;
      const simdjson::dom::array array = value.get_array().value_unsafe();
      for (simdjson::dom::element item : array) {
        if (!first) out.push_back(',');
        first = false;
        if (absl::Status status = AppendValue(item, out, depth + 1, nullptr); !status.ok()) {
          return status;
        }
      }
      out.push_back(']');
      return absl::OkStatus();
    }
    case element_type::STRING:
      AppendQuoted(value.get_string().value_unsafe(), out);
      return absl::OkStatus();
    case element_type::INT64:
      AppendInteger(value.get_int64().value_unsafe(), out);
      return absl::OkStatus();
    case element_type::UINT64:
      AppendInteger(value.get_uint64().value_unsafe(), out);
      return absl::OkStatus();
    case element_type::DOUBLE:
      // nlohmann prints doubles with its own grisu2 formatting; not reproduced here.
      return absl::UnimplementedError("a non-integer number");
    case element_type::BOOL:
      out.append(value.get_bool().value_unsafe() ? "true" : "false");
      return absl::OkStatus();
    case element_type::NULL_VALUE:
      out.append("null");
      return absl::OkStatus();
  }
  return absl::InternalError("unknown JSON element type");
}

}  // namespace reverser::fastjson
