#include "libs/gotemplate/funcs.h"

#include <array>
#include <cstdio>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace reverser::gotemplate {
namespace {

constexpr std::array<absl::string_view, 9> kBuiltins = {"and", "eq",     "index", "len", "ne",
                                                        "not", "or",     "print", "printf"};

absl::Status WrongArgs(absl::string_view name, absl::string_view want, size_t got) {
  return absl::InvalidArgumentError(
      absl::StrCat("wrong number of args for ", name, ": want ", want, " got ", got));
}

absl::Status CallError(absl::string_view name, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("error calling ", name, ": ", message));
}

// strconv.Quote for the subset: C-style escapes for control bytes, UTF-8 passed through.
std::string GoQuote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\a': out += "\\a"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\v': out += "\\v"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\x%02x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  return out + "\"";
}

std::string BadVerb(char verb, const Value& arg) {
  if (arg.is_null()) return absl::StrCat("%!", std::string(1, verb), "(<nil>)");
  return absl::StrCat("%!", std::string(1, verb), "(", arg.TypeName(), "=", arg.ToString(), ")");
}

std::string Pad(std::string text, int width, bool left, bool zero) {
  if (width <= 0 || static_cast<int>(text.size()) >= width) return text;
  const size_t fill = width - text.size();
  if (left) return text + std::string(fill, ' ');
  if (zero) {
    const size_t sign = (!text.empty() && (text[0] == '-' || text[0] == '+')) ? 1 : 0;
    return text.insert(sign, std::string(fill, '0'));
  }
  return std::string(fill, ' ') + text;
}

absl::StatusOr<bool> BasicEqual(const Value& a, const Value& b) {
  const auto comparable = [](const Value& v) { return v.is_string() || v.is_int() || v.is_bool(); };
  if (!comparable(a) || !comparable(b)) {
    return absl::InvalidArgumentError("error calling eq: invalid type for comparison");
  }
  if (a.kind() != b.kind()) {
    return absl::InvalidArgumentError("error calling eq: incompatible types for comparison");
  }
  return a == b;
}

}  // namespace

bool IsBuiltinFunction(absl::string_view name) {
  for (absl::string_view builtin : kBuiltins) {
    if (builtin == name) return true;
  }
  return false;
}

std::string Sprintf(absl::string_view format, const std::vector<Value>& args, size_t max_bytes) {
  std::string out;
  size_t next_arg = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    if (out.size() > max_bytes) return out;
    const char c = format[i];
    if (c != '%') {
      out.push_back(c);
      continue;
    }
    bool left = false, zero = false, plus = false;
    size_t j = i + 1;
    for (; j < format.size(); ++j) {
      if (format[j] == '-') left = true;
      else if (format[j] == '0') zero = true;
      else if (format[j] == '+') plus = true;
      else break;
    }
    int width = 0;
    for (; j < format.size() && format[j] >= '0' && format[j] <= '9'; ++j) {
      width = std::min(width * 10 + (format[j] - '0'), 1 << 16);
    }
    if (j >= format.size()) {
      out += "%!(NOVERB)";
      break;
    }
    const char verb = format[j];
    i = j;
    if (verb == '%') {
      out.push_back('%');
      continue;
    }
    if (next_arg >= args.size()) {
      out += absl::StrCat("%!", std::string(1, verb), "(MISSING)");
      continue;
    }
    const Value& arg = args[next_arg++];
    std::string text;
    switch (verb) {
      case 'v':
        text = arg.ToString();
        if (plus && arg.is_int() && arg.integer() >= 0) text = "+" + text;
        break;
      case 's':
        text = (arg.is_null() || arg.is_int() || arg.is_bool()) ? BadVerb(verb, arg)
                                                                : arg.ToString();
        break;
      case 'd':
        if (arg.is_int()) {
          text = std::to_string(arg.integer());
          if (plus && arg.integer() >= 0) text = "+" + text;
        } else {
          text = BadVerb(verb, arg);
        }
        break;
      case 'q':
        text = arg.is_string() ? GoQuote(arg.str()) : BadVerb(verb, arg);
        break;
      case 't':
        text = arg.is_bool() ? arg.ToString() : BadVerb(verb, arg);
        break;
      case 'x':
      case 'X': {
        const char* digits = verb == 'x' ? "0123456789abcdef" : "0123456789ABCDEF";
        if (arg.is_string()) {
          for (unsigned char c : arg.str()) {
            text.push_back(digits[c >> 4]);
            text.push_back(digits[c & 0xF]);
          }
        } else if (arg.is_int()) {
          const int64_t v = arg.integer();
          uint64_t magnitude = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
          do {
            text.insert(text.begin(), digits[magnitude & 0xF]);
            magnitude >>= 4;
          } while (magnitude != 0);
          if (v < 0) text.insert(text.begin(), '-');
        } else {
          text = BadVerb(verb, arg);
        }
        break;
      }
      default:
        text = BadVerb(verb, arg);
    }
    out += Pad(std::move(text), width, left, zero && verb == 'd' && arg.is_int() && !left);
  }
  if (next_arg < args.size()) {
    out += "%!(EXTRA ";
    for (size_t k = next_arg; k < args.size(); ++k) {
      if (k > next_arg) out += ", ";
      out += absl::StrCat(args[k].TypeName(), "=", args[k].ToString());
    }
    out += ")";
  }
  return out;
}

std::string Sprint(const std::vector<Value>& args, size_t max_bytes) {
  std::string out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (out.size() > max_bytes) return out;
    if (i > 0 && !args[i - 1].is_string() && !args[i].is_string()) out += " ";
    out += args[i].ToString();
  }
  return out;
}

absl::StatusOr<Value> CallBuiltin(absl::string_view name, const std::vector<Value>& args,
                                  size_t max_result_bytes) {
  if (name == "len") {
    if (args.size() != 1) return WrongArgs(name, "1", args.size());
    const Value& v = args[0];
    if (v.is_string()) return Value(static_cast<int64_t>(v.str().size()));
    if (v.is_list()) return Value(static_cast<int64_t>(v.list().size()));
    if (v.is_map()) return Value(static_cast<int64_t>(v.map().size()));
    return CallError(name, absl::StrCat("len of type ", v.TypeName()));
  }
  if (name == "printf") {
    if (args.empty()) return WrongArgs(name, "at least 1", 0);
    if (!args[0].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "wrong type for value; expected string; got ", args[0].TypeName()));
    }
    return Value(
        Sprintf(args[0].str(), std::vector<Value>(args.begin() + 1, args.end()), max_result_bytes));
  }
  if (name == "print") return Value(Sprint(args, max_result_bytes));
  if (name == "not") {
    if (args.size() != 1) return WrongArgs(name, "1", args.size());
    return Value(!args[0].Truthy());
  }
  if (name == "and" || name == "or") {
    if (args.empty()) return WrongArgs(name, "at least 1", 0);
    const bool want = name == "or";
    for (const Value& arg : args) {
      if (arg.Truthy() == want) return arg;
    }
    return args.back();
  }
  if (name == "eq") {
    if (args.size() < 2) return WrongArgs(name, "at least 2", args.size());
    for (size_t i = 1; i < args.size(); ++i) {
      absl::StatusOr<bool> equal = BasicEqual(args[0], args[i]);
      if (!equal.ok()) return equal.status();
      if (*equal) return Value(true);
    }
    return Value(false);
  }
  if (name == "ne") {
    if (args.size() != 2) return WrongArgs(name, "2", args.size());
    absl::StatusOr<bool> equal = BasicEqual(args[0], args[1]);
    if (!equal.ok()) return equal.status();
    return Value(!*equal);
  }
  if (name == "index") {
    if (args.empty()) return WrongArgs(name, "at least 1", 0);
    Value item = args[0];
    for (size_t i = 1; i < args.size(); ++i) {
      const Value& key = args[i];
      if (item.is_list()) {
        if (!key.is_int()) return CallError(name, "cannot index slice/array with type " +
                                                      std::string(key.TypeName()));
        if (key.integer() < 0 || key.integer() >= static_cast<int64_t>(item.list().size())) {
          return CallError(name, absl::StrCat("index out of range: ", key.integer()));
        }
        item = Value(item.list()[key.integer()]);
      } else if (item.is_map()) {
        if (!key.is_string()) {
          return CallError(name, absl::StrCat("value has type ", key.TypeName(),
                                              "; should be string"));
        }
        const auto it = item.map().find(key.str());
        // Like Go, index yields the zero value for an absent key instead of failing.
        item = it == item.map().end() ? Value() : Value(it->second);
      } else {
        return CallError(name, absl::StrCat("can't index item of type ", item.TypeName()));
      }
    }
    return item;
  }
  return absl::InvalidArgumentError(absl::StrCat("function \"", name, "\" not defined"));
}

}  // namespace reverser::gotemplate
