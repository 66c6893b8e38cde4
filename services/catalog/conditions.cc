#include "services/catalog/conditions.h"

namespace reverser::catalog {

std::vector<Condition> Trio(Outcome outcome, const std::string& reason,
                            const std::string& message) {
  switch (outcome) {
    case Outcome::kReady:
      return {{"Ready", kTrue, reason, message},
              {"Reconciling", kFalse, reason, message},
              {"Stalled", kFalse, reason, message}};
    case Outcome::kPending:
      return {{"Ready", kFalse, reason, message},
              {"Reconciling", kTrue, reason, message},
              {"Stalled", kFalse, reason, message}};
    case Outcome::kStalled:
      return {{"Ready", kFalse, reason, message},
              {"Reconciling", kFalse, reason, message},
              {"Stalled", kTrue, reason, message}};
  }
  return {};
}

std::string FormatKubeTime(absl::Time time) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", time, absl::UTCTimeZone());
}

std::optional<absl::Time> ParseKubeTime(const std::string& text) {
  absl::Time time;
  std::string error;
  if (text.empty() || !absl::ParseTime(absl::RFC3339_full, text, &time, &error)) {
    return std::nullopt;
  }
  return time;
}

const nlohmann::json* FindCondition(const nlohmann::json& conditions, const std::string& type) {
  if (!conditions.is_array()) return nullptr;
  for (const auto& c : conditions) {
    if (c.is_object() && c.value("type", "") == type) return &c;
  }
  return nullptr;
}

nlohmann::json RenderConditions(const std::vector<Condition>& desired,
                                const nlohmann::json& existing, int64_t observed_generation,
                                absl::Time now) {
  nlohmann::json out = nlohmann::json::array();
  const std::string now_text = FormatKubeTime(now);
  for (const Condition& c : desired) {
    std::string transition = now_text;
    if (const nlohmann::json* old = FindCondition(existing, c.type)) {
      auto t = old->find("lastTransitionTime");
      if (old->value("status", "") == c.status && t != old->end() && t->is_string()) {
        transition = t->get<std::string>();
      }
    }
    // An empty message is omitted, as Go's omitempty would; the reason is required.
    nlohmann::json cond = {{"type", c.type},
                           {"status", c.status},
                           {"reason", c.reason.empty() ? std::string("Unknown") : c.reason},
                           {"message", c.message},
                           {"lastTransitionTime", transition},
                           {"observedGeneration", observed_generation}};
    out.push_back(std::move(cond));
  }
  return out;
}

}  // namespace reverser::catalog
