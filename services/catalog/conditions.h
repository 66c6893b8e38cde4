#pragma once

// Status conditions as the reference writes them (metav1.Condition) and the kstatus trio
// (Ready, Reconciling, Stalled). Rendering keeps a condition's lastTransitionTime while its
// status is unchanged, so re-rendering a steady object yields byte-identical status and the
// catalog writes nothing.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/time/time.h"

namespace reverser::catalog {

inline constexpr char kTrue[] = "True";
inline constexpr char kFalse[] = "False";
inline constexpr char kUnknown[] = "Unknown";

struct Condition {
  std::string type;
  std::string status;  // True, False, Unknown
  std::string reason;
  std::string message;
};

// The kstatus trio for one outcome:
//   ready:   Ready=True,  Reconciling=False, Stalled=False
//   pending: Ready=False, Reconciling=True,  Stalled=False (replay, checks in progress)
//   stalled: Ready=False, Reconciling=False, Stalled=True  (needs a user fix)
enum class Outcome { kReady, kPending, kStalled };
std::vector<Condition> Trio(Outcome outcome, const std::string& reason, const std::string& message);

// metav1.Condition JSON for `desired`, carrying lastTransitionTime from `existing` (the
// object's current status.conditions) when a condition's status did not change.
nlohmann::json RenderConditions(const std::vector<Condition>& desired,
                                const nlohmann::json& existing, int64_t observed_generation,
                                absl::Time now);

// RFC 3339 in UTC with second precision, as Kubernetes serializes metav1.Time.
std::string FormatKubeTime(absl::Time time);
// A metav1.Time as served (RFC 3339); nullopt when empty or malformed.
std::optional<absl::Time> ParseKubeTime(const std::string& text);

// The condition of that type in a status.conditions array, or null.
const nlohmann::json* FindCondition(const nlohmann::json& conditions, const std::string& type);

}  // namespace reverser::catalog
