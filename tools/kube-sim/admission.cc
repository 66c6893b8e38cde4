#include "tools/kube-sim/admission.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "httplib.h"
#include "tools/kube-sim/object_rules.h"
#include "tools/kube-sim/selectors.h"
#include "tools/kube-sim/yaml_json.h"

namespace reverser::kubesim {
namespace {

bool Contains(const Json& list, const std::string& value) {
  if (!list.is_array()) return false;
  return std::any_of(list.begin(), list.end(),
                     [&](const Json& v) { return v.is_string() && v.get<std::string>() == value; });
}

std::vector<std::string> Strings(const Json& list) {
  std::vector<std::string> out;
  if (!list.is_array()) return out;
  for (const auto& v : list) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

// A metav1.LabelSelector in the text syntax Selector parses (`a=b,c in (x,y),!d`).
ApiOr<Selector> ParseLabelSelector(const Json& selector) {
  if (selector.is_null()) return Selector::ParseLabels("");
  if (!selector.is_object()) return BadRequest("label selector must be an object");
  std::vector<std::string> parts;
  const Json& labels = selector.value("matchLabels", Json::object());
  if (labels.is_object()) {
    for (const auto& [k, v] : labels.items()) {
      if (!v.is_string()) return BadRequest("matchLabels values must be strings");
      parts.push_back(absl::StrCat(k, "=", v.get<std::string>()));
    }
  }
  const Json& expressions = selector.value("matchExpressions", Json::array());
  if (expressions.is_array()) {
    for (const auto& e : expressions) {
      if (!e.is_object()) return BadRequest("matchExpressions entries must be objects");
      std::string key = e.value("key", "");
      std::string op = e.value("operator", "");
      std::string values = absl::StrJoin(Strings(e.value("values", Json::array())), ",");
      if (op == "In") {
        parts.push_back(absl::StrCat(key, " in (", values, ")"));
      } else if (op == "NotIn") {
        parts.push_back(absl::StrCat(key, " notin (", values, ")"));
      } else if (op == "Exists") {
        parts.push_back(key);
      } else if (op == "DoesNotExist") {
        parts.push_back(absl::StrCat("!", key));
      } else {
        return BadRequest(absl::StrCat("\"", op, "\" is not a valid label selector operator"));
      }
    }
  }
  return Selector::ParseLabels(absl::StrJoin(parts, ","));
}

std::vector<StatusCause> ValidateLabelSelector(const Json& selector, const std::string& field) {
  std::vector<StatusCause> causes;
  if (selector.is_null()) return causes;
  const Json& expressions = selector.value("matchExpressions", Json::array());
  if (expressions.is_array()) {
    for (size_t i = 0; i < expressions.size(); ++i) {
      const Json& e = expressions[i];
      if (!e.is_object()) continue;
      const std::string f = absl::StrCat(field, ".matchExpressions[", i, "]");
      std::string op = e.value("operator", "");
      size_t values = e.value("values", Json::array()).size();
      if (op == "In" || op == "NotIn") {
        if (values == 0) {
          causes.push_back(
              FieldRequired(f + ".values", "must be specified when `operator` is 'In' or 'NotIn'"));
        }
      } else if (op == "Exists" || op == "DoesNotExist") {
        if (values > 0) {
          causes.push_back(FieldForbidden(
              f + ".values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"));
        }
      } else {
        causes.push_back(FieldInvalid(f + ".operator", op, "not a valid selector operator"));
      }
    }
  }
  if (causes.empty() && !ParseLabelSelector(selector).ok()) {
    causes.push_back(FieldInvalid(field, selector, "invalid label selector"));
  }
  return causes;
}

std::string GoDuration(int seconds) { return absl::StrCat(seconds, "s"); }

struct X509StoreFree {
  void operator()(X509_STORE* s) const { X509_STORE_free(s); }
};

// Every certificate of a PEM bundle in a fresh store; null when none parses.
X509_STORE* CaStore(const std::string& pem) {
  std::unique_ptr<X509_STORE, X509StoreFree> store(X509_STORE_new());
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  int added = 0;
  while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    if (X509_STORE_add_cert(store.get(), cert) == 1) ++added;
    X509_free(cert);
  }
  BIO_free(bio);
  ERR_clear_error();
  return added > 0 ? store.release() : nullptr;
}

// Where one webhook is reached.
struct Endpoint {
  std::string host;          // what the certificate is verified for
  std::string connect_host;  // where the connection goes (differs for overridden services)
  int port = 443;
  std::string path_and_query;
  std::string url;    // as Go prints it in errors
  std::string error;  // set when the endpoint cannot be reached at all (no service endpoints)
};

Endpoint ResolveEndpoint(const Json& client_config, int timeout_seconds,
                         const AdmissionOptions& options) {
  Endpoint e;
  std::string path;
  if (client_config.contains("url") && client_config["url"].is_string()) {
    std::string url = client_config["url"];
    std::string rest = url.substr(std::min(url.size(), std::string("https://").size()));
    size_t slash = rest.find('/');
    std::string hostport = rest.substr(0, slash);
    path = slash == std::string::npos ? "/" : rest.substr(slash);
    size_t colon = hostport.rfind(':');
    if (colon != std::string::npos && hostport.find(']') == std::string::npos) {
      e.host = hostport.substr(0, colon);
      if (!absl::SimpleAtoi(hostport.substr(colon + 1), &e.port)) e.port = 443;
    } else {
      e.host = hostport;
    }
    e.connect_host = e.host;
  } else {
    const Json& service = client_config.value("service", Json::object());
    std::string name = service.value("name", "");
    std::string ns = service.value("namespace", "");
    e.port = service.value("port", 443);
    path = service.value("path", "/");
    if (path.empty()) path = "/";
    e.host = absl::StrCat(name, ".", ns, ".svc");
    auto it = options.service_overrides.find(absl::StrCat(ns, "/", name));
    if (it == options.service_overrides.end()) {
      e.error = absl::StrCat("service \"", name, "\" not found");
    } else {
      std::string target = it->second;
      size_t colon = target.rfind(':');
      e.connect_host = target.substr(0, colon);
      if (colon == std::string::npos || !absl::SimpleAtoi(target.substr(colon + 1), &e.port)) {
        e.error = absl::StrCat("no endpoints available for service \"", name, "\"");
      }
    }
  }
  // The REST client adds the timeout as a query parameter, so webhook servers see it.
  e.path_and_query = absl::StrCat(path, absl::StrContains(path, '?') ? "&" : "?",
                                  "timeout=", GoDuration(timeout_seconds));
  e.url = absl::StrCat(
      "https://", e.host,
      e.port == 443 && !client_config.contains("service") ? "" : absl::StrCat(":", e.port),
      e.path_and_query);
  if (client_config.contains("url") && client_config["url"].is_string()) {
    std::string url = client_config["url"];
    e.url = absl::StrCat(url, absl::StrContains(url, '?') ? "&" : "?",
                         "timeout=", GoDuration(timeout_seconds));
  }
  return e;
}

struct HttpOutcome {
  bool sent = false;  // an HTTP response arrived
  int status = 0;
  std::string body;
  std::string error;  // Go's transport error text (after `Post "URL": `)
};

// POSTs with a hard deadline: the request runs on its own thread, and when the deadline passes
// the connection is shut down under it, so a server that trickles bytes cannot hold the caller.
HttpOutcome PostWithDeadline(const Endpoint& endpoint, const std::string& ca_pem,
                             const std::string& body, absl::Duration timeout) {
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    HttpOutcome outcome;
    std::unique_ptr<httplib::SSLClient> client;
  };
  auto state = std::make_shared<State>();
  state->client = std::make_unique<httplib::SSLClient>(endpoint.host, endpoint.port);
  httplib::SSLClient& client = *state->client;
  if (endpoint.connect_host != endpoint.host) {
    client.set_hostname_addr_map({{endpoint.host, endpoint.connect_host}});
  }
  if (!ca_pem.empty()) {
    if (X509_STORE* store = CaStore(ca_pem)) client.set_ca_cert_store(store);
  }
  client.enable_server_certificate_verification(true);
  const auto usec = absl::ToInt64Microseconds(timeout);
  client.set_connection_timeout(usec / 1000000, usec % 1000000);
  client.set_read_timeout(usec / 1000000, usec % 1000000);
  client.set_write_timeout(usec / 1000000, usec % 1000000);
  client.set_keep_alive(false);
  const std::string connect_target = absl::StrCat(endpoint.connect_host, ":", endpoint.port);
  std::thread([state, path = endpoint.path_and_query, body, connect_target] {
    httplib::Headers headers = {{"Accept", "application/json, */*"},
                                {"User-Agent", "kube-apiserver-admission"}};
    httplib::Result res = state->client->Post(path.c_str(), headers, body, "application/json");
    HttpOutcome out;
    if (res) {
      out.sent = true;
      out.status = res->status;
      out.body = res->body;
    } else {
      switch (res.error()) {
        case httplib::Error::Connection:
          out.error = absl::StrCat("dial tcp ", connect_target, ": connect: connection refused");
          break;
        case httplib::Error::ConnectionTimeout:
          out.error = "context deadline exceeded";
          break;
        case httplib::Error::SSLServerVerification:
          out.error =
              "tls: failed to verify certificate: x509: certificate signed by unknown authority";
          break;
        case httplib::Error::SSLConnection:
          out.error = "remote error: tls: handshake failure";
          break;
        default:
          out.error = "EOF";
      }
    }
    std::lock_guard lock(state->mu);
    state->outcome = std::move(out);
    state->done = true;
    state->cv.notify_all();
  }).detach();
  std::unique_lock lock(state->mu);
  if (!state->cv.wait_for(lock, absl::ToChronoMilliseconds(timeout), [&] { return state->done; })) {
    state->client->stop();  // the request thread ends on its own; its state is shared
    HttpOutcome out;
    out.error = "context deadline exceeded";
    return out;
  }
  return state->outcome;
}

// Which operations, groups, versions, resources and scope a rule covers.
bool RuleMatches(const Json& rule, const std::string& operation, const std::string& group,
                 const std::string& version, const ResourceType& type,
                 const std::string& subresource, bool namespace_scoped_request) {
  if (!rule.is_object()) return false;
  const Json& ops = rule.value("operations", Json::array());
  if (!Contains(ops, operation) && !Contains(ops, "*")) return false;
  const Json& groups = rule.value("apiGroups", Json::array());
  if (!Contains(groups, group) && !Contains(groups, "*")) return false;
  const Json& versions = rule.value("apiVersions", Json::array());
  if (!Contains(versions, version) && !Contains(versions, "*")) return false;
  bool resource_ok = false;
  for (const std::string& r : Strings(rule.value("resources", Json::array()))) {
    std::vector<std::string> parts = absl::StrSplit(r, absl::MaxSplits('/', 1));
    const std::string& res = parts[0];
    if (parts.size() == 1) {
      resource_ok = subresource.empty() && (res == "*" || res == type.plural);
    } else {
      resource_ok =
          (res == "*" || res == type.plural) && (parts[1] == "*" ? true : parts[1] == subresource);
      if (parts[1] != "*" && subresource.empty()) resource_ok = false;
    }
    if (resource_ok) break;
  }
  if (!resource_ok) return false;
  std::string scope = rule.value("scope", "*");
  const bool is_namespace = type.group.empty() && type.plural == "namespaces";
  if (scope == "Namespaced") return !is_namespace && namespace_scoped_request;
  if (scope == "Cluster") return is_namespace || !namespace_scoped_request;
  return true;
}

Json GroupVersionResource(const std::string& group, const std::string& version,
                          const std::string& resource) {
  return {{"group", group}, {"version", version}, {"resource", resource}};
}
Json GroupVersionKind(const std::string& group, const std::string& version,
                      const std::string& kind) {
  return {{"group", group}, {"version", version}, {"kind", kind}};
}

// One webhook's verdict before it is logged.
struct Verdict {
  WebhookCall::Outcome outcome = WebhookCall::Outcome::kAllowed;
  std::optional<ApiError> error;
  std::vector<std::string> warnings;
  std::map<std::string, std::string> audit_annotations;
};

// kube-apiserver's rejection Status (webhookerrors.ToStatusErr).
ApiError Denial(const std::string& webhook, const Json& status) {
  ApiError e;
  const std::string denied_by =
      absl::StrCat("admission webhook \"", webhook, "\" denied the request");
  int code = status.is_object() ? status.value("code", 0) : 0;
  e.code = code < 400 ? 400 : code;
  std::string message = status.is_object() ? status.value("message", "") : "";
  std::string reason = status.is_object() ? status.value("reason", "") : "";
  e.reason = reason;
  if (!message.empty()) {
    e.message = absl::StrCat(denied_by, ": ", message);
  } else if (!reason.empty()) {
    e.message = absl::StrCat(denied_by, ": ", reason);
  } else {
    e.message = absl::StrCat(denied_by, " without explanation");
  }
  if (status.is_object() && status.contains("details") && status["details"].is_object()) {
    e.details = status["details"];
  }
  return e;
}

// The text Go's REST client gives for a non-2xx answer.
std::string HttpStatusError(int status, const std::string& body) {
  Json parsed = Json::parse(body, nullptr, false);
  if (parsed.is_object() && parsed.value("kind", "") == "Status" &&
      !parsed.value("message", "").empty()) {
    return parsed.value("message", "");
  }
  if (body.empty()) {
    return absl::StrCat("the server responded with the status code ", status,
                        " but did not return more information");
  }
  return absl::StrCat("an error on the server (\"", body.substr(0, 1024),
                      "\") has prevented the request from succeeding");
}

}  // namespace

Json DefaultWebhookConfiguration(Json configuration) {
  if (!configuration.is_object()) return configuration;
  Json& hooks = configuration["webhooks"];
  if (hooks.is_null()) {
    configuration.erase("webhooks");
    return configuration;
  }
  if (!hooks.is_array()) return configuration;
  for (Json& hook : hooks) {
    if (!hook.is_object()) continue;
    if (!hook.contains("failurePolicy")) hook["failurePolicy"] = "Fail";
    if (!hook.contains("matchPolicy")) hook["matchPolicy"] = "Equivalent";
    if (!hook.contains("namespaceSelector")) hook["namespaceSelector"] = Json::object();
    if (!hook.contains("objectSelector")) hook["objectSelector"] = Json::object();
    if (!hook.contains("timeoutSeconds")) hook["timeoutSeconds"] = 10;
    if (hook.contains("rules") && hook["rules"].is_array()) {
      for (Json& rule : hook["rules"]) {
        if (rule.is_object() && !rule.contains("scope")) rule["scope"] = "*";
      }
    }
    if (hook.contains("clientConfig") && hook["clientConfig"].is_object()) {
      Json& cc = hook["clientConfig"];
      if (cc.contains("service") && cc["service"].is_object() && !cc["service"].contains("port")) {
        cc["service"]["port"] = 443;
      }
    }
  }
  return configuration;
}

std::vector<StatusCause> ValidateWebhookConfiguration(const Json& configuration) {
  std::vector<StatusCause> causes;
  const Json& hooks = configuration.value("webhooks", Json::array());
  if (!hooks.is_array()) {
    causes.push_back(FieldInvalid("webhooks", hooks, "must be a list"));
    return causes;
  }
  std::vector<std::string> names;
  for (size_t i = 0; i < hooks.size(); ++i) {
    const std::string f = absl::StrCat("webhooks[", i, "]");
    const Json& hook = hooks[i];
    if (!hook.is_object()) {
      causes.push_back(FieldInvalid(f, hook, "must be an object"));
      continue;
    }
    std::string name = hook.value("name", "");
    if (name.empty()) {
      causes.push_back(FieldRequired(f + ".name", ""));
    } else {
      std::vector<std::string> parts = absl::StrSplit(name, '.');
      if (parts.size() < 3) {
        causes.push_back(FieldInvalid(f + ".name", name,
                                      "should be a domain with at least three segments separated "
                                      "by dots"));
      } else if (std::find(names.begin(), names.end(), name) != names.end()) {
        causes.push_back(FieldDuplicate(f + ".name", absl::StrCat("\"", name, "\"")));
      }
      names.push_back(name);
    }
    const Json& versions = hook.value("admissionReviewVersions", Json::array());
    if (!versions.is_array() || versions.empty()) {
      causes.push_back(
          FieldRequired(f + ".admissionReviewVersions", "must specify one of v1, v1beta1"));
    } else if (!Contains(versions, "v1") && !Contains(versions, "v1beta1")) {
      causes.push_back(FieldInvalid(f + ".admissionReviewVersions", versions,
                                    "must include at least one of v1, v1beta1"));
    }
    if (!hook.contains("sideEffects")) {
      causes.push_back(FieldRequired(f + ".sideEffects", "must specify one of None, NoneOnDryRun"));
    } else if (hook["sideEffects"] != "None" && hook["sideEffects"] != "NoneOnDryRun") {
      causes.push_back(
          FieldNotSupported(f + ".sideEffects", hook["sideEffects"], {"None", "NoneOnDryRun"}));
    }
    if (hook.contains("failurePolicy") && hook["failurePolicy"] != "Fail" &&
        hook["failurePolicy"] != "Ignore") {
      causes.push_back(
          FieldNotSupported(f + ".failurePolicy", hook["failurePolicy"], {"Fail", "Ignore"}));
    }
    if (hook.contains("matchPolicy") && hook["matchPolicy"] != "Exact" &&
        hook["matchPolicy"] != "Equivalent") {
      causes.push_back(
          FieldNotSupported(f + ".matchPolicy", hook["matchPolicy"], {"Equivalent", "Exact"}));
    }
    if (hook.contains("timeoutSeconds")) {
      const Json& t = hook["timeoutSeconds"];
      if (!t.is_number_integer() || t.get<int64_t>() < 1 || t.get<int64_t>() > 30) {
        causes.push_back(FieldInvalid(f + ".timeoutSeconds", t,
                                      "the timeout value must be between 1 and 30 seconds"));
      }
    }
    for (const char* sel : {"namespaceSelector", "objectSelector"}) {
      std::vector<StatusCause> c = ValidateLabelSelector(hook.value(sel, Json()), f + "." + sel);
      causes.insert(causes.end(), c.begin(), c.end());
    }
    const Json& rules = hook.value("rules", Json::array());
    for (size_t r = 0; rules.is_array() && r < rules.size(); ++r) {
      const std::string rf = absl::StrCat(f, ".rules[", r, "]");
      const Json& rule = rules[r];
      if (!rule.is_object()) continue;
      for (const std::string& op : Strings(rule.value("operations", Json::array()))) {
        if (op != "*" && op != "CREATE" && op != "UPDATE" && op != "DELETE" && op != "CONNECT") {
          causes.push_back(FieldNotSupported(rf + ".operations", op,
                                             {"*", "CONNECT", "CREATE", "DELETE", "UPDATE"}));
        }
      }
      if (rule.value("apiGroups", Json::array()).empty()) {
        causes.push_back(FieldRequired(rf + ".apiGroups", ""));
      }
      if (rule.value("apiVersions", Json::array()).empty()) {
        causes.push_back(FieldRequired(rf + ".apiVersions", ""));
      }
      if (rule.value("resources", Json::array()).empty()) {
        causes.push_back(FieldRequired(rf + ".resources", ""));
      }
      if (rule.contains("scope") && rule["scope"] != "*" && rule["scope"] != "Cluster" &&
          rule["scope"] != "Namespaced") {
        causes.push_back(
            FieldNotSupported(rf + ".scope", rule["scope"], {"*", "Cluster", "Namespaced"}));
      }
    }
    const Json& cc = hook.value("clientConfig", Json::object());
    const bool has_url = cc.is_object() && cc.contains("url");
    const bool has_service = cc.is_object() && cc.contains("service");
    if (has_url == has_service) {
      causes.push_back(
          FieldRequired(f + ".clientConfig", "exactly one of url or service is required"));
    } else if (has_url) {
      std::string url = cc["url"].is_string() ? cc["url"].get<std::string>() : "";
      if (!absl::StartsWith(url, "https://")) {
        causes.push_back(FieldInvalid(f + ".clientConfig.url", cc["url"],
                                      "'https' is the only allowed URL scheme"));
      } else if (url.size() == std::string("https://").size() ||
                 url[std::string("https://").size()] == '/') {
        causes.push_back(
            FieldInvalid(f + ".clientConfig.url", cc["url"], "host must be specified"));
      }
    } else {
      const Json& service = cc["service"];
      if (!service.is_object() || service.value("name", "").empty()) {
        causes.push_back(
            FieldRequired(f + ".clientConfig.service.name", "service name is required"));
      }
      if (!service.is_object() || service.value("namespace", "").empty()) {
        causes.push_back(
            FieldRequired(f + ".clientConfig.service.namespace", "service namespace is required"));
      }
      if (service.is_object() && service.contains("port") &&
          (!service["port"].is_number_integer() || service["port"].get<int64_t>() < 1 ||
           service["port"].get<int64_t>() > 65535)) {
        causes.push_back(FieldInvalid(f + ".clientConfig.service.port", service["port"],
                                      "port is not valid: must be between 1 and 65535, inclusive"));
      }
    }
    if (cc.is_object() && cc.contains("caBundle")) {
      std::string pem;
      if (!cc["caBundle"].is_string() ||
          !absl::Base64Unescape(cc["caBundle"].get<std::string>(), &pem)) {
        causes.push_back(FieldInvalid(f + ".clientConfig.caBundle", cc["caBundle"],
                                      "must be base64-encoded PEM"));
      }
    }
  }
  return causes;
}

bool IsAdmissionConfigurationResource(const ResourceType& type) {
  return type.group == "admissionregistration.k8s.io";
}

std::string OutcomeName(WebhookCall::Outcome outcome) {
  switch (outcome) {
    case WebhookCall::Outcome::kAllowed:
      return "allowed";
    case WebhookCall::Outcome::kDenied:
      return "denied";
    case WebhookCall::Outcome::kFailedOpen:
      return "failed-open";
    case WebhookCall::Outcome::kFailedClosed:
      return "failed-closed";
    case WebhookCall::Outcome::kDryRunUnsupported:
      return "dry-run-unsupported";
  }
  return "unknown";
}

void WebhookCallLog::Record(WebhookCall call) {
  std::lock_guard lock(mu_);
  calls_.push_back(std::move(call));
  cv_.notify_all();
}

std::vector<WebhookCall> WebhookCallLog::Calls() const {
  std::lock_guard lock(mu_);
  return calls_;
}

size_t WebhookCallLog::Count() const {
  std::lock_guard lock(mu_);
  return calls_.size();
}

bool WebhookCallLog::WaitForCalls(size_t n, absl::Duration timeout) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, absl::ToChronoMilliseconds(timeout),
                      [&] { return calls_.size() >= n; });
}

void WebhookCallLog::Clear() {
  std::lock_guard lock(mu_);
  calls_.clear();
}

std::optional<ApiError> ValidatingWebhooks::Admit(const AdmissionAttributes& attrs,
                                                  const std::vector<Json>& configurations,
                                                  const NamespaceLookup& namespaces,
                                                  const VersionsLookup& versions_of,
                                                  AdmissionSideInfo* side_info) const {
  const ResourceType& type = *attrs.type;
  if (IsAdmissionConfigurationResource(type)) return std::nullopt;
  const bool is_namespace = type.group.empty() && type.plural == "namespaces";
  const bool namespace_scoped_request = !attrs.namespace_.empty();

  // The namespace's labels, for namespaceSelector (fetched once, only when a selector needs it).
  std::optional<std::optional<Json>> namespace_labels;
  auto labels_of_namespace = [&]() -> std::optional<Json> {
    if (!namespace_labels) {
      if (is_namespace && attrs.operation == "CREATE") {
        namespace_labels = attrs.object;
      } else {
        namespace_labels = namespaces(attrs.namespace_);
      }
    }
    return *namespace_labels;
  };

  struct Pending {
    std::string configuration;
    Json hook;
    std::string version;  // the rule's version the request matched (matchPolicy Equivalent)
    std::thread thread;
    Verdict verdict;
    absl::Duration took;
  };
  std::vector<std::unique_ptr<Pending>> pending;
  for (const Json& configuration : configurations) {
    const std::string configuration_name =
        configuration.value("metadata", Json::object()).value("name", "");
    for (const Json& hook : configuration.value("webhooks", Json::array())) {
      if (!hook.is_object()) continue;
      // namespaceSelector: cluster-scoped objects other than namespaces are never exempted.
      ApiOr<Selector> ns_selector = ParseLabelSelector(hook.value("namespaceSelector", Json()));
      if (!ns_selector.ok()) continue;
      if ((namespace_scoped_request || is_namespace) && !ns_selector->empty()) {
        std::optional<Json> ns = labels_of_namespace();
        if (!ns) {
          return NotFound(ErrorSubject{"", "namespaces", "Namespace"}, attrs.namespace_);
        }
        if (!ns_selector->Matches(*ns)) continue;
      }
      ApiOr<Selector> object_selector = ParseLabelSelector(hook.value("objectSelector", Json()));
      if (!object_selector.ok()) continue;
      if (!object_selector->empty()) {
        bool matched = (attrs.object.is_object() && object_selector->Matches(attrs.object)) ||
                       (attrs.old_object.is_object() && object_selector->Matches(attrs.old_object));
        if (!matched) continue;
      }
      std::optional<std::string> matched_version;
      const Json& rules = hook.value("rules", Json::array());
      auto any_rule = [&](const std::string& version) {
        return std::any_of(rules.begin(), rules.end(), [&](const Json& rule) {
          return RuleMatches(rule, attrs.operation, type.group, version, type, attrs.subresource,
                             namespace_scoped_request);
        });
      };
      if (rules.is_array() && any_rule(type.version)) {
        matched_version = type.version;
      } else if (rules.is_array() && hook.value("matchPolicy", "Equivalent") == "Equivalent") {
        for (const std::string& v : versions_of(type.group, type.plural)) {
          if (v != type.version && any_rule(v)) {
            matched_version = v;
            break;
          }
        }
      }
      if (!matched_version) continue;
      auto p = std::make_unique<Pending>();
      p->configuration = configuration_name;
      p->hook = hook;
      p->version = *matched_version;
      pending.push_back(std::move(p));
    }
  }
  if (pending.empty()) return std::nullopt;

  for (auto& p : pending) {
    p->thread = std::thread([&attrs, &type, p = p.get(), this] {
      const absl::Time start = absl::Now();
      // An answer of the wrong JSON shape must fail the call, not the thread (and the server).
      try {
        const Json& hook = p->hook;
        const std::string name = hook.value("name", "");
        const bool fail_open = hook.value("failurePolicy", "Fail") == "Ignore";
        auto call_failed = [&](const std::string& reason) {
          const std::string text = absl::StrCat("failed calling webhook \"", name, "\": ", reason);
          if (fail_open) {
            p->verdict.outcome = WebhookCall::Outcome::kFailedOpen;
            p->verdict.error = InternalError(text);  // logged, not returned
          } else {
            p->verdict.outcome = WebhookCall::Outcome::kFailedClosed;
            p->verdict.error = InternalError(text);
          }
        };
        const std::string side_effects = hook.value("sideEffects", "");
        const Json& review_versions = hook.value("admissionReviewVersions", Json::array());
        std::string review_version = Contains(review_versions, "v1")
                                         ? "v1"
                                         : (Contains(review_versions, "v1beta1") ? "v1beta1" : "");
        if (attrs.dry_run && side_effects != "None" && side_effects != "NoneOnDryRun") {
          p->verdict.outcome = WebhookCall::Outcome::kDryRunUnsupported;
          p->verdict.error =
              BadRequest(absl::StrCat("admission webhook \"", name, "\" does not support dry run"));
        } else if (review_version.empty()) {
          call_failed("webhook does not accept v1 or v1beta1 AdmissionReview");
        } else {
          const std::string review_api_version = "admission.k8s.io/" + review_version;
          const std::string uid = NewUid();
          const std::string kind_group = attrs.kind.empty() ? type.group : attrs.kind_group;
          const std::string kind_version = attrs.kind.empty() ? p->version : attrs.kind_version;
          const std::string kind = attrs.kind.empty() ? type.kind : attrs.kind;
          // matchPolicy Equivalent through another version: the object is converted (a CRD's
          // None conversion: only apiVersion changes).
          auto converted = [&](Json o) {
            if (o.is_object() && attrs.kind.empty() && p->version != type.version) {
              o["apiVersion"] =
                  type.group.empty() ? p->version : absl::StrCat(type.group, "/", p->version);
            }
            return o;
          };
          Json request = {
              {"uid", uid},
              {"kind", GroupVersionKind(kind_group, kind_version, kind)},
              {"resource", GroupVersionResource(type.group, p->version, type.plural)},
              {"requestKind",
               GroupVersionKind(attrs.kind.empty() ? type.group : attrs.kind_group,
                                attrs.kind.empty() ? type.version : attrs.kind_version, kind)},
              {"requestResource", GroupVersionResource(type.group, type.version, type.plural)},
          };
          if (!attrs.subresource.empty()) {
            request["subResource"] = attrs.subresource;
            request["requestSubResource"] = attrs.subresource;
          }
          if (!attrs.name.empty()) request["name"] = attrs.name;
          if (!attrs.namespace_.empty()) request["namespace"] = attrs.namespace_;
          request["operation"] = attrs.operation;
          request["userInfo"] = attrs.user.ToJson();
          request["object"] = converted(attrs.object);
          request["oldObject"] = converted(attrs.old_object);
          request["dryRun"] = attrs.dry_run;
          request["options"] = attrs.options;
          Json review = {{"kind", "AdmissionReview"},
                         {"apiVersion", review_api_version},
                         {"request", request}};
          const int timeout_seconds = std::clamp(hook.value("timeoutSeconds", 10), 1, 30);
          const Json& cc = hook.value("clientConfig", Json::object());
          Endpoint endpoint = ResolveEndpoint(cc, timeout_seconds, options_);
          std::string ca_pem;
          if (cc.contains("caBundle") && cc["caBundle"].is_string()) {
            absl::Base64Unescape(cc["caBundle"].get<std::string>(), &ca_pem);
          }
          const std::string post =
              absl::StrCat("failed to call webhook: Post \"", endpoint.url, "\": ");
          if (!endpoint.error.empty()) {
            call_failed(post + endpoint.error);
          } else {
            HttpOutcome http =
                PostWithDeadline(endpoint, ca_pem, review.dump(), absl::Seconds(timeout_seconds));
            if (!http.sent) {
              call_failed(post + http.error);
            } else if (http.status < 200 || http.status > 299) {
              call_failed("failed to call webhook: " + HttpStatusError(http.status, http.body));
            } else {
              Json answer = Json::parse(http.body, nullptr, false);
              if (answer.is_discarded()) {
                call_failed(absl::StrCat(
                    "failed to call webhook: couldn't get version/kind; json parse error: ",
                    JsonParseError(http.body)));
              } else if (!answer.is_object() || answer.value("kind", "") != "AdmissionReview" ||
                         answer.value("apiVersion", "") != review_api_version) {
                std::string got_version =
                    answer.is_object() ? answer.value("apiVersion", "") : std::string();
                std::string got_kind =
                    answer.is_object() ? answer.value("kind", "") : std::string();
                std::string group_version = absl::StrContains(got_version, '/')
                                                ? got_version
                                                : absl::StrCat("/", got_version);
                call_failed(
                    absl::StrCat("received invalid webhook response: expected webhook "
                                 "response of ",
                                 review_api_version, ", Kind=AdmissionReview, got ", group_version,
                                 ", Kind=", got_kind));
              } else if (!answer.contains("response") || !answer["response"].is_object()) {
                call_failed("received invalid webhook response: webhook response was absent");
              } else {
                const Json& response = answer["response"];
                std::string got_uid =
                    response.contains("uid") && response["uid"].is_string() ? response["uid"] : "";
                if (review_version == "v1" && got_uid != uid) {
                  call_failed(
                      absl::StrCat("received invalid webhook response: expected "
                                   "response.uid=\"",
                                   uid, "\", got \"", got_uid, "\""));
                } else {
                  for (const std::string& w : Strings(response.value("warnings", Json::array()))) {
                    p->verdict.warnings.push_back(w);
                  }
                  const Json& annotations = response.value("auditAnnotations", Json::object());
                  if (annotations.is_object()) {
                    for (const auto& [k, v] : annotations.items()) {
                      if (v.is_string()) p->verdict.audit_annotations[name + "/" + k] = v;
                    }
                  }
                  const bool allowed = response.contains("allowed") &&
                                       response["allowed"].is_boolean() &&
                                       response["allowed"].get<bool>();
                  if (allowed) {
                    p->verdict.outcome = WebhookCall::Outcome::kAllowed;
                  } else {
                    p->verdict.outcome = WebhookCall::Outcome::kDenied;
                    p->verdict.error = Denial(name, response.value("status", Json::object()));
                  }
                }
              }
            }
          }
        }
      } catch (const std::exception& e) {
        const std::string name =
            p->hook.contains("name") && p->hook["name"].is_string() ? p->hook["name"] : "";
        p->verdict = Verdict{};
        p->verdict.outcome = p->hook.value("failurePolicy", Json("Fail")) == "Ignore"
                                 ? WebhookCall::Outcome::kFailedOpen
                                 : WebhookCall::Outcome::kFailedClosed;
        p->verdict.error =
            InternalError(absl::StrCat("failed calling webhook \"", name,
                                       "\": received invalid webhook response: ", e.what()));
      }
      p->took = absl::Now() - start;
    });
  }
  std::optional<ApiError> first_rejection;
  for (auto& p : pending) {
    p->thread.join();
    const std::string name = p->hook.value("name", "");
    WebhookCall call;
    call.configuration = p->configuration;
    call.webhook = name;
    call.operation = attrs.operation;
    call.resource =
        attrs.subresource.empty() ? type.plural : absl::StrCat(type.plural, "/", attrs.subresource);
    call.namespace_ = attrs.namespace_;
    call.name = attrs.name;
    call.dry_run = attrs.dry_run;
    call.outcome = p->verdict.outcome;
    call.message = p->verdict.error ? p->verdict.error->message : "";
    call.took = p->took;
    if (options_.log_calls) {
      std::cerr << absl::StrCat("kube-sim: admission webhook \"", name, "\" ", attrs.operation, " ",
                                call.resource, " ", attrs.namespace_,
                                attrs.namespace_.empty() ? "" : "/", attrs.name, ": ",
                                OutcomeName(call.outcome),
                                call.message.empty() ? "" : " (" + call.message + ")", " in ",
                                absl::FormatDuration(call.took), "\n")
                << std::flush;
    }
    if (log_) log_->Record(call);
    if (side_info) {
      side_info->warnings.insert(side_info->warnings.end(), p->verdict.warnings.begin(),
                                 p->verdict.warnings.end());
      side_info->audit_annotations.insert(p->verdict.audit_annotations.begin(),
                                          p->verdict.audit_annotations.end());
    }
    if (p->verdict.outcome == WebhookCall::Outcome::kFailedOpen) continue;
    if (p->verdict.error && !first_rejection) first_rejection = p->verdict.error;
  }
  return first_rejection;
}

}  // namespace reverser::kubesim
