#pragma once

// The data model templates run against: a small variant of what Go templates see in practice
// (string, int, bool, list, map; plus "no value" for nil). Values are immutable and share their
// strings, lists and maps, so a copy (a variable, a field, a range element) costs O(1): an
// execution's work is then bounded by its steps, not by the size of the data it touches.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace reverser::gotemplate {

class Value {
 public:
  enum class Kind { kNull, kString, kInt, kBool, kList, kMap };
  using List = std::vector<Value>;
  // std::map: ranging over a map visits keys in sorted order, as Go does.
  using Map = std::map<std::string, Value>;

  Value() = default;  // no value (Go nil)
  Value(std::string s) : data_(std::make_shared<const std::string>(std::move(s))) {}
  Value(const char* s) : data_(std::make_shared<const std::string>(s)) {}
  Value(int64_t i) : data_(i) {}
  Value(int i) : data_(static_cast<int64_t>(i)) {}
  Value(bool b) : data_(b) {}
  Value(List list) : data_(std::make_shared<const List>(std::move(list))) {}
  Value(Map map) : data_(std::make_shared<const Map>(std::move(map))) {}

  Kind kind() const { return static_cast<Kind>(data_.index()); }
  bool is_null() const { return kind() == Kind::kNull; }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_list() const { return kind() == Kind::kList; }
  bool is_map() const { return kind() == Kind::kMap; }

  // Accessors; calling one for the wrong kind is a programming error (std::bad_variant_access).
  const std::string& str() const { return *std::get<Shared<std::string>>(data_); }
  int64_t integer() const { return std::get<int64_t>(data_); }
  bool boolean() const { return std::get<bool>(data_); }
  const List& list() const { return *std::get<Shared<List>>(data_); }
  const Map& map() const { return *std::get<Shared<Map>>(data_); }

  // Go's truth: false, 0, "" and empty lists/maps (and nil) are false.
  bool Truthy() const;
  // What fmt.Sprint prints: `[a b]` for lists, `map[k:v]` for maps, `<nil>` for no value.
  std::string ToString() const;
  // The Go type name used in error messages ("string", "int", "[]interface {}", ...).
  const char* TypeName() const;

  // Deep equality.
  bool operator==(const Value& other) const;

 private:
  template <typename T>
  using Shared = std::shared_ptr<const T>;
  // The alternatives' order is Kind's.
  std::variant<std::monostate, Shared<std::string>, int64_t, bool, Shared<List>, Shared<Map>> data_;
};

}  // namespace reverser::gotemplate
