#include "libs/gotemplate/value.h"

namespace reverser::gotemplate {

bool Value::Truthy() const {
  switch (kind()) {
    case Kind::kNull: return false;
    case Kind::kString: return !str().empty();
    case Kind::kInt: return integer() != 0;
    case Kind::kBool: return boolean();
    case Kind::kList: return !list().empty();
    case Kind::kMap: return !map().empty();
  }
  return false;
}

std::string Value::ToString() const {
  switch (kind()) {
    case Kind::kNull: return "<nil>";
    case Kind::kString: return str();
    case Kind::kInt: return std::to_string(integer());
    case Kind::kBool: return boolean() ? "true" : "false";
    case Kind::kList: {
      std::string out = "[";
      for (size_t i = 0; i < list().size(); ++i) {
        if (i > 0) out += " ";
        out += list()[i].ToString();
      }
      return out + "]";
    }
    case Kind::kMap: {
      std::string out = "map[";
      bool first = true;
      for (const auto& [key, value] : map()) {
        if (!first) out += " ";
        first = false;
        out += key + ":" + value.ToString();
      }
      return out + "]";
    }
  }
  return "";
}

bool Value::operator==(const Value& other) const {
  if (kind() != other.kind()) return false;
  switch (kind()) {
    case Kind::kNull:
      return true;
    case Kind::kString:
      return str() == other.str();
    case Kind::kInt:
      return integer() == other.integer();
    case Kind::kBool:
      return boolean() == other.boolean();
    case Kind::kList:
      return list() == other.list();
    case Kind::kMap:
      return map() == other.map();
  }
  return false;
}

const char* Value::TypeName() const {
  switch (kind()) {
    case Kind::kNull: return "<nil>";
    case Kind::kString: return "string";
    case Kind::kInt: return "int";
    case Kind::kBool: return "bool";
    case Kind::kList: return "[]interface {}";
    case Kind::kMap: return "map[string]interface {}";
  }
  return "?";
}

}  // namespace reverser::gotemplate
