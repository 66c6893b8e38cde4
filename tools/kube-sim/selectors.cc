#include "tools/kube-sim/selectors.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace reverser::kubesim {
namespace {

// Splits on commas outside parentheses.
std::vector<std::string> SplitTerms(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char c : text) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

std::string Trim(absl::string_view s) { return std::string(absl::StripAsciiWhitespace(s)); }

}  // namespace

ApiOr<Selector> Selector::ParseLabels(const std::string& text) {
  Selector sel;
  for (const std::string& raw : SplitTerms(text)) {
    std::string term = Trim(raw);
    if (term.empty()) continue;
    Requirement r;
    size_t pos;
    if ((pos = term.find(" notin ")) != std::string::npos ||
        (pos = term.find(" in ")) != std::string::npos) {
      bool notin = term.compare(pos, 7, " notin ") == 0;
      r.key = Trim(term.substr(0, pos));
      std::string list = Trim(term.substr(pos + (notin ? 7 : 4)));
      if (list.size() < 2 || list.front() != '(' || list.back() != ')') {
        return BadRequest(
            absl::StrCat("unable to parse requirement: found '", list, "', expected: '('"));
      }
      for (absl::string_view v : absl::StrSplit(list.substr(1, list.size() - 2), ',')) {
        r.values.push_back(Trim(v));
      }
      r.op = notin ? Requirement::Op::kNotIn : Requirement::Op::kIn;
    } else if ((pos = term.find("!=")) != std::string::npos) {
      r.key = Trim(term.substr(0, pos));
      r.values = {Trim(term.substr(pos + 2))};
      r.op = Requirement::Op::kNotEq;
    } else if ((pos = term.find("==")) != std::string::npos) {
      r.key = Trim(term.substr(0, pos));
      r.values = {Trim(term.substr(pos + 2))};
      r.op = Requirement::Op::kEq;
    } else if ((pos = term.find('=')) != std::string::npos) {
      r.key = Trim(term.substr(0, pos));
      r.values = {Trim(term.substr(pos + 1))};
      r.op = Requirement::Op::kEq;
    } else if (term[0] == '!') {
      r.key = Trim(term.substr(1));
      r.op = Requirement::Op::kNotExists;
    } else {
      r.key = term;
      r.op = Requirement::Op::kExists;
    }
    if (r.key.empty()) return BadRequest(absl::StrCat("unable to parse requirement: ", term));
    sel.requirements_.push_back(std::move(r));
  }
  return sel;
}

ApiOr<Selector> Selector::ParseFields(const std::string& text) {
  Selector sel;
  sel.fields_ = true;
  for (const std::string& raw : SplitTerms(text)) {
    std::string term = Trim(raw);
    if (term.empty()) continue;
    Requirement r;
    size_t pos;
    if ((pos = term.find("!=")) != std::string::npos) {
      r.op = Requirement::Op::kNotEq;
      r.key = term.substr(0, pos);
      r.values = {term.substr(pos + 2)};
    } else if ((pos = term.find("==")) != std::string::npos) {
      r.op = Requirement::Op::kEq;
      r.key = term.substr(0, pos);
      r.values = {term.substr(pos + 2)};
    } else if ((pos = term.find('=')) != std::string::npos) {
      r.op = Requirement::Op::kEq;
      r.key = term.substr(0, pos);
      r.values = {term.substr(pos + 1)};
    } else {
      return BadRequest(
          absl::StrCat("invalid selector: '", text, "'; can't understand '", term, "'"));
    }
    sel.requirements_.push_back(std::move(r));
  }
  return sel;
}

bool Selector::Matches(const Json& object) const {
  for (const auto& r : requirements_) {
    std::optional<std::string> value;
    if (fields_) {
      const Json* cur = &object;
      for (absl::string_view part : absl::StrSplit(r.key, '.')) {
        std::string p(part);
        if (!cur->is_object() || !cur->contains(p)) {
          cur = nullptr;
          break;
        }
        cur = &(*cur)[p];
      }
      if (cur && cur->is_string())
        value = cur->get<std::string>();
      else if (cur && !cur->is_null())
        value = cur->dump();
      if (!value) value = "";  // absent fields compare as empty
    } else {
      const Json& labels = object.value("metadata", Json::object()).value("labels", Json::object());
      if (labels.is_object() && labels.contains(r.key) && labels[r.key].is_string()) {
        value = labels[r.key].get<std::string>();
      }
    }
    auto in = [&] {
      return value && std::find(r.values.begin(), r.values.end(), *value) != r.values.end();
    };
    switch (r.op) {
      case Requirement::Op::kEq:
      case Requirement::Op::kIn:
        if (!in()) return false;
        break;
      case Requirement::Op::kNotEq:
      case Requirement::Op::kNotIn:
        if (in()) return false;
        break;
      case Requirement::Op::kExists:
        if (!value) return false;
        break;
      case Requirement::Op::kNotExists:
        if (value) return false;
        break;
    }
  }
  return true;
}

}  // namespace reverser::kubesim
