#pragma once

// Label and field selectors as list/watch accept them.

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/kube-sim/api_error.h"

namespace reverser::kubesim {

class Selector {
 public:
  // Label selector syntax: `a=b,c!=d,e,!f,g in (x,y),h notin (z)`.
  static ApiOr<Selector> ParseLabels(const std::string& text);
  // Field selector syntax: `metadata.name=x,metadata.namespace!=y` (and any dotted path).
  static ApiOr<Selector> ParseFields(const std::string& text);

  bool Matches(const Json& object) const;
  bool empty() const { return requirements_.empty(); }

 private:
  struct Requirement {
    std::string key;
    enum class Op { kEq, kNotEq, kExists, kNotExists, kIn, kNotIn } op;
    std::vector<std::string> values;
  };
  bool fields_ = false;
  std::vector<Requirement> requirements_;
};

}  // namespace reverser::kubesim
