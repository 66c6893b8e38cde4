#pragma once

// Validating admission webhooks as kube-apiserver calls them: ValidatingWebhookConfiguration
// (admissionregistration.k8s.io/v1) defaults and validation, matching (rules, namespaceSelector,
// objectSelector, matchPolicy), the AdmissionReview POSTed over HTTPS, and the error texts of
// denials and failed calls (apiserver/pkg/admission/plugin/webhook).

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "tools/kube-sim/api_error.h"
#include "tools/kube-sim/auth.h"
#include "tools/kube-sim/resource_types.h"

namespace reverser::kubesim {

// ValidatingWebhookConfiguration v1 defaults (failurePolicy Fail, matchPolicy Equivalent,
// timeoutSeconds 10, empty selectors, rule scope "*", service port 443), applied on writes.
Json DefaultWebhookConfiguration(Json configuration);
// The v1 validation errors (field paths and texts as kube-apiserver's).
std::vector<StatusCause> ValidateWebhookConfiguration(const Json& configuration);

// Requests for these never go to webhooks (kube-apiserver exempts its admission configuration).
bool IsAdmissionConfigurationResource(const ResourceType& type);

// One admission decision asked of the webhooks (kube-apiserver's admission.Attributes).
struct AdmissionAttributes {
  std::string operation;  // CREATE | UPDATE | DELETE
  std::shared_ptr<const ResourceType> type;
  std::string subresource;
  // The kind of the object sent when it is not the type's (the scale subresource's Scale).
  std::string kind_group, kind_version, kind;
  std::string name;        // empty for deletecollection items, as kube-apiserver sends them
  std::string namespace_;  // for a Namespace itself: its name
  UserInfo user;
  Json object = nullptr;      // null for DELETE
  Json old_object = nullptr;  // null for CREATE
  bool dry_run = false;
  Json options;  // CreateOptions | UpdateOptions | DeleteOptions (meta.k8s.io/v1)
};

// What one webhook call came to, for tests to observe.
struct WebhookCall {
  enum class Outcome {
    kAllowed,
    kDenied,
    kFailedOpen,    // could not be called (or answered garbage); failurePolicy Ignore
    kFailedClosed,  // could not be called (or answered garbage); failurePolicy Fail
    kDryRunUnsupported,
  };
  std::string configuration;  // the ValidatingWebhookConfiguration's name
  std::string webhook;        // webhooks[].name
  std::string operation;
  std::string resource;  // "configmaps", "pods/status"
  std::string namespace_;
  std::string name;
  bool dry_run = false;
  Outcome outcome = Outcome::kAllowed;
  std::string message;  // the denial or error text ("" when allowed)
  absl::Duration took;
};
std::string OutcomeName(WebhookCall::Outcome outcome);

// Every webhook call, in the order they finished.
class WebhookCallLog {
 public:
  void Record(WebhookCall call);
  std::vector<WebhookCall> Calls() const;
  size_t Count() const;
  // Waits until at least n calls were recorded; returns whether they were.
  bool WaitForCalls(size_t n, absl::Duration timeout) const;
  void Clear();

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<WebhookCall> calls_;
};

struct AdmissionOptions {
  // "NAMESPACE/NAME" -> "HOST:PORT": where a clientConfig.service is reached. The certificate is
  // still verified for NAME.NAMESPACE.svc, as kube-apiserver does. Services without an entry
  // fail as in a cluster where they have no endpoints.
  std::map<std::string, std::string> service_overrides;
  // Log one line per call to stderr.
  bool log_calls = true;
};

// What the webhooks said beyond allow/deny: response.warnings and response.auditAnnotations
// (keys already prefixed with the webhook's name, as the audit event carries them).
struct AdmissionSideInfo {
  std::vector<std::string> warnings;
  std::map<std::string, std::string> audit_annotations;
};

class ValidatingWebhooks {
 public:
  using NamespaceLookup = std::function<std::optional<Json>(const std::string& name)>;
  // `versions_of`: the served versions of a group/resource (for matchPolicy Equivalent).
  using VersionsLookup =
      std::function<std::vector<std::string>(const std::string& group, const std::string& plural)>;

  ValidatingWebhooks(AdmissionOptions options, WebhookCallLog* log)
      : options_(std::move(options)), log_(log) {}

  // Calls every webhook of `configurations` that matches `attrs`, in parallel, each within its
  // timeoutSeconds. Returns the first rejection (in configuration order), or nullopt to proceed.
  std::optional<ApiError> Admit(const AdmissionAttributes& attrs,
                                const std::vector<Json>& configurations,
                                const NamespaceLookup& namespaces,
                                const VersionsLookup& versions_of,
                                AdmissionSideInfo* side_info) const;

 private:
  AdmissionOptions options_;
  WebhookCallLog* log_;
};

}  // namespace reverser::kubesim
