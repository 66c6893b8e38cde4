#include "tools/kube-sim/faults.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace reverser::kubesim {

ApiOr<FaultRule> FaultRule::FromJson(const Json& j) {
  if (!j.is_object()) return BadRequest("fault rule must be a JSON object");
  FaultRule r;
  std::string action = j.value("action", "");
  if (action == "429") {
    r.action = Action::kTooManyRequests;
  } else if (action == "503") {
    r.action = Action::kServiceUnavailable;
  } else if (action == "500") {
    r.action = Action::kInternalError;
  } else if (action == "delay") {
    r.action = Action::kDelay;
  } else if (action == "cut-watch") {
    r.action = Action::kCutWatch;
  } else {
    return BadRequest(absl::StrCat("unknown fault action \"", action,
                                   "\" (want 429, 503, 500, delay or cut-watch)"));
  }
  try {
    r.verb = j.value("verb", "");
    r.resource = j.value("resource", "");
    r.path_prefix = j.value("pathPrefix", "");
    r.retry_after_seconds = j.value("retryAfterSeconds", 1);
    r.delay = absl::Milliseconds(j.value("delayMs", 0));
    r.message = j.value("message", r.message);
    r.times = j.value("times", -1);
    r.after_events = j.value("afterEvents", 0);
  } catch (const std::exception& e) {
    return BadRequest(absl::StrCat("bad fault rule: ", e.what()));
  }
  if (r.after_events < 0) return BadRequest("bad fault rule: afterEvents must not be negative");
  return r;
}

void FaultInjector::Add(FaultRule rule) {
  std::lock_guard lock(mu_);
  rules_.push_back(std::move(rule));
}

void FaultInjector::Clear() {
  std::lock_guard lock(mu_);
  rules_.clear();
}

std::optional<FaultRule> FaultInjector::Match(const std::string& verb, const std::string& resource,
                                              const std::string& path, bool initial_events) {
  std::lock_guard lock(mu_);
  for (auto it = rules_.begin(); it != rules_.end(); ++it) {
    if (it->action == FaultRule::Action::kCutWatch && !initial_events) continue;
    if (!it->verb.empty() && it->verb != verb) continue;
    if (!it->resource.empty() && it->resource != resource) continue;
    if (!it->path_prefix.empty() && !absl::StartsWith(path, it->path_prefix)) continue;
    FaultRule hit = *it;
    if (it->times > 0 && --it->times == 0) rules_.erase(it);
    return hit;
  }
  return std::nullopt;
}

}  // namespace reverser::kubesim
