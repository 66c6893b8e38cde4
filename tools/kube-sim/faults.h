#pragma once

// Fault injection: rules matched against each API request before it is served.

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "tools/kube-sim/api_error.h"

namespace reverser::kubesim {

struct FaultRule {
  enum class Action {
    kTooManyRequests,     // 429 text/plain "Too many requests, please try again later." (APF)
    kServiceUnavailable,  // 503 Status with Retry-After
    kInternalError,       // 500 InternalError Status
    kDelay,               // sleep `delay`, then serve normally
    // A watch that sends initial events (WatchList or an unset/"0" resourceVersion) sends the
    // first `after_events` of them and then loses its connection (no terminating chunk, no
    // initial-events-end bookmark): a replay cut short. Matches nothing else.
    kCutWatch,
  };
  Action action = Action::kTooManyRequests;
  // Matchers; empty matches anything.
  std::string verb;         // "list", "watch", "create", ...
  std::string resource;     // plural, e.g. "configmaps"
  std::string path_prefix;  // e.g. "/apis/apps"
  int retry_after_seconds = 1;
  absl::Duration delay = absl::ZeroDuration();
  std::string message = "something went wrong";
  int times = -1;  // number of requests to affect; -1 = until cleared
  int after_events = 0;  // kCutWatch: initial events sent before the cut

  // JSON form used by the admin endpoint:
  // {"action":"429|503|500|delay","verb":"list","resource":"configmaps","pathPrefix":"/api",
  //  "retryAfterSeconds":1,"delayMs":200,"message":"...","times":2}
  // and {"action":"cut-watch","resource":"configmaps","afterEvents":1,"times":1}.
  static ApiOr<FaultRule> FromJson(const Json& j);
};

class FaultInjector {
 public:
  void Add(FaultRule rule);
  void Clear();
  // The first rule that matches (consuming one of its `times`), if any. `initial_events`: the
  // request is a watch that starts with initial events (only those match kCutWatch rules).
  std::optional<FaultRule> Match(const std::string& verb, const std::string& resource,
                                 const std::string& path, bool initial_events = false);

 private:
  std::mutex mu_;
  std::vector<FaultRule> rules_;
};

}  // namespace reverser::kubesim
