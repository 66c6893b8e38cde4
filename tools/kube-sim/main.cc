// kube-sim: a protocol-accurate Kubernetes API server for tests and the local demo.
// See tools/kube-sim/README.md.

#include <signal.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "tools/kube-sim/kube_sim.h"
#include "tools/kube-sim/yaml_json.h"

ABSL_FLAG(std::string, bind_address, "127.0.0.1", "Address to listen on.");
ABSL_FLAG(int, port, 0, "Port to listen on; 0 picks a free port (printed in a log line).");
ABSL_FLAG(std::string, port_file, "", "If set, the chosen port is written to this file.");
ABSL_FLAG(std::string, profile, "modern",
          "Protocol profile: modern (>=1.34, WatchList on) or legacy (1.27-1.33, WatchList "
          "rejected with 422).");
ABSL_FLAG(std::string, openapi_v2, "auto",
          "Serve a minimal protobuf /openapi/v2: auto (legacy profile only), on, off. "
          "kubectl 1.27 needs it for apply validation.");
ABSL_FLAG(std::string, tokens_file, "",
          "Static token file (kube-apiserver --token-auth-file format: token,user,uid,\"g1,g2\"). "
          "Without it every request is system:admin.");
ABSL_FLAG(std::string, rbac_file, "",
          "JSON list of allow rules {users,groups,verbs,apiGroups,resources,namespaces,"
          "nonResourceURLs}; enables RBAC (system:masters is always allowed).");
ABSL_FLAG(std::string, api_audiences, "https://kubernetes.default.svc.cluster.local",
          "Comma-separated audiences of the server (kube-apiserver --api-audiences): what a "
          "TokenReview without spec.audiences checks and reports.");
ABSL_FLAG(int64_t, history_limit, 10000,
          "Compaction window: write events kept for watch resumption; older RVs get 410.");
ABSL_FLAG(int, bookmark_interval_seconds, 60, "Seconds between watch bookmarks.");
ABSL_FLAG(int64_t, max_request_body_bytes, 3 * 1024 * 1024, "Larger bodies get 413.");
ABSL_FLAG(std::string, tls_cert_file, "", "Serve HTTPS with this certificate (PEM).");
ABSL_FLAG(std::string, tls_key_file, "", "Private key for --tls-cert-file.");
ABSL_FLAG(std::string, audit_policy_file, "",
          "audit.k8s.io/v1 Policy (YAML). Default: RequestResponse for everything.");
ABSL_FLAG(std::string, audit_webhook_url, "", "URL the audit EventLists are POSTed to.");
ABSL_FLAG(std::string, audit_webhook_config_file, "",
          "kubeconfig naming the webhook, as kube-apiserver's --audit-webhook-config-file: "
          "clusters[0].cluster.server (full URL), certificate-authority, "
          "insecure-skip-tls-verify, users[0].user.client-certificate/client-key/token.");
ABSL_FLAG(std::string, audit_webhook_ca_file, "", "CA bundle to verify the webhook.");
ABSL_FLAG(bool, audit_webhook_insecure_skip_verify, false, "Do not verify the webhook's cert.");
ABSL_FLAG(std::string, audit_webhook_client_cert, "", "Client certificate for mTLS.");
ABSL_FLAG(std::string, audit_webhook_client_key, "", "Client key for mTLS.");
ABSL_FLAG(int, audit_webhook_batch_max_size, 400, "Events per batch.");
ABSL_FLAG(double, audit_webhook_batch_max_wait_seconds, 30, "Max seconds an event waits.");
ABSL_FLAG(double, audit_webhook_initial_backoff_seconds, 10, "First retry delay.");
ABSL_FLAG(std::vector<std::string>, webhook_service_override, {},
          "Where admission webhooks' clientConfig.service references are reached: "
          "NAMESPACE/NAME=HOST:PORT, comma-separated (the certificate is still "
          "verified for NAME.NAMESPACE.svc).");

namespace {

using reverser::kubesim::Json;

int Fail(const std::string& message) {
  std::cerr << "kube-sim: " << message << "\n";
  return 2;
}

std::string ReadFile(const std::string& path, bool* ok) {
  std::ifstream in(path);
  *ok = static_cast<bool>(in);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<std::string> Strings(const Json& j, const char* key) {
  std::vector<std::string> out;
  if (j.contains(key) && j[key].is_array()) {
    for (const auto& s : j[key]) {
      if (s.is_string()) out.push_back(s.get<std::string>());
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  // --help lists this file's flags (absl would otherwise look for a file named like the binary).
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::StrContains(path, "kube-sim/main.cc");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  absl::SetFlagsUsageConfig(usage);
  absl::SetProgramUsageMessage(
      "kube-sim [flags]: a protocol-accurate Kubernetes API server for tests.\n"
      "Admin endpoints: POST /_sim/faults, DELETE /_sim/faults, POST /_sim/compact,\n"
      "POST /_sim/drop-watches, POST /_sim/audit, GET /_sim/requests, GET /_sim/state,\n"
      "GET /_sim/admission\n"
      "(see README.md).");
  // Accept kube-style dashed flags (--port-file) as well as absl's underscores (--port_file).
  std::vector<std::string> args(argv, argv + argc);
  for (auto& a : args) {
    if (a.rfind("--", 0) != 0) continue;
    for (size_t i = 2; i < a.size() && a[i] != '='; ++i) {
      if (a[i] == '-') a[i] = '_';
    }
  }
  std::vector<char*> arg_ptrs;
  for (auto& a : args) arg_ptrs.push_back(a.data());
  absl::ParseCommandLine(static_cast<int>(arg_ptrs.size()), arg_ptrs.data());
  using namespace reverser::kubesim;

  KubeSimOptions options;
  options.bind_address = absl::GetFlag(FLAGS_bind_address);
  options.port = absl::GetFlag(FLAGS_port);
  std::string profile = absl::GetFlag(FLAGS_profile);
  if (profile == "modern") {
    options.profile = Profile::kModern;
  } else if (profile == "legacy") {
    options.profile = Profile::kLegacy;
  } else {
    return Fail("--profile must be modern or legacy");
  }
  if (std::string v2 = absl::GetFlag(FLAGS_openapi_v2); v2 == "on") {
    options.openapi_v2 = true;
  } else if (v2 == "off") {
    options.openapi_v2 = false;
  } else if (v2 != "auto") {
    return Fail("--openapi-v2 must be auto, on or off");
  }
  options.history_limit = absl::GetFlag(FLAGS_history_limit);
  options.api_audiences =
      absl::StrSplit(absl::GetFlag(FLAGS_api_audiences), ',', absl::SkipWhitespace());
  options.bookmark_interval = absl::Seconds(absl::GetFlag(FLAGS_bookmark_interval_seconds));
  options.max_request_body_bytes = absl::GetFlag(FLAGS_max_request_body_bytes);
  options.tls_cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  options.tls_key_file = absl::GetFlag(FLAGS_tls_key_file);
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return Fail("--tls-cert-file and --tls-key-file go together");
  }
  if (std::string path = absl::GetFlag(FLAGS_audit_policy_file); !path.empty()) {
    bool ok;
    std::string text = ReadFile(path, &ok);
    if (!ok) return Fail("cannot read " + path);
    ApiOr<Json> doc = ParseYamlOrJson(text);
    if (!doc.ok()) return Fail(path + ": " + doc.error().message);
    ApiOr<AuditPolicy> policy = AuditPolicy::FromJson(*doc);
    if (!policy.ok()) return Fail(path + ": " + policy.error().message);
    options.audit_policy = *policy;
  }
  std::string webhook_config = absl::GetFlag(FLAGS_audit_webhook_config_file);
  if (std::string url = absl::GetFlag(FLAGS_audit_webhook_url);
      !url.empty() || !webhook_config.empty()) {
    AuditWebhookOptions w;
    w.url = url;
    w.ca_file = absl::GetFlag(FLAGS_audit_webhook_ca_file);
    w.insecure_skip_verify = absl::GetFlag(FLAGS_audit_webhook_insecure_skip_verify);
    w.client_cert_file = absl::GetFlag(FLAGS_audit_webhook_client_cert);
    w.client_key_file = absl::GetFlag(FLAGS_audit_webhook_client_key);
    if (!webhook_config.empty()) {
      bool ok;
      std::string text = ReadFile(webhook_config, &ok);
      if (!ok) return Fail("cannot read " + webhook_config);
      ApiOr<Json> kc = ParseYamlOrJson(text);
      if (!kc.ok() || !kc->is_object()) return Fail(webhook_config + ": not a kubeconfig");
      try {
        const Json& cluster = kc->at("clusters").at(0).at("cluster");
        w.url = cluster.at("server").get<std::string>();
        w.ca_file = cluster.value("certificate-authority", w.ca_file);
        w.insecure_skip_verify = cluster.value("insecure-skip-tls-verify", w.insecure_skip_verify);
        if (kc->contains("users") && (*kc)["users"].is_array() && !(*kc)["users"].empty()) {
          const Json& user = (*kc)["users"][0].value("user", Json::object());
          w.client_cert_file = user.value("client-certificate", w.client_cert_file);
          w.client_key_file = user.value("client-key", w.client_key_file);
          w.bearer_token = user.value("token", "");
          if (user.contains("client-certificate-data") ||
              cluster.contains("certificate-authority-data")) {
            return Fail(webhook_config + ": *-data fields are not supported; use file paths");
          }
        }
      } catch (const std::exception& e) {
        return Fail(webhook_config + ": " + e.what());
      }
    }
    w.max_batch_size = absl::GetFlag(FLAGS_audit_webhook_batch_max_size);
    w.max_wait = absl::Seconds(absl::GetFlag(FLAGS_audit_webhook_batch_max_wait_seconds));
    w.initial_backoff = absl::Seconds(absl::GetFlag(FLAGS_audit_webhook_initial_backoff_seconds));
    options.audit_webhook = w;
  }

  for (const std::string& entry : absl::GetFlag(FLAGS_webhook_service_override)) {
    size_t eq = entry.find('=');
    std::string service = entry.substr(0, eq);
    std::string target = eq == std::string::npos ? "" : entry.substr(eq + 1);
    if (service.find('/') == std::string::npos || target.rfind(':') == std::string::npos) {
      return Fail("--webhook-service-override: want NAMESPACE/NAME=HOST:PORT, got " + entry);
    }
    options.admission.service_overrides[service] = target;
  }

  // Block SIGTERM/SIGINT before any thread starts, so only sigwait() below sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto sim = KubeSim::Start(options);
  if (!sim.ok()) return Fail(std::string(sim.status().message()));
  if (std::string path = absl::GetFlag(FLAGS_tokens_file); !path.empty()) {
    ApiOr<bool> loaded = (*sim)->authenticator().LoadTokenFile(path);
    if (!loaded.ok()) return Fail(loaded.error().message);
  }
  if (std::string path = absl::GetFlag(FLAGS_rbac_file); !path.empty()) {
    bool ok;
    std::string text = ReadFile(path, &ok);
    Json rules = Json::parse(text, nullptr, false);
    if (!ok || !rules.is_array()) return Fail(path + ": want a JSON list of rules");
    (*sim)->authorizer().Enable(true);
    for (const auto& r : rules) {
      if (!r.is_object()) return Fail(path + ": each rule must be an object");
      (*sim)->authorizer().AddRule({Strings(r, "users"), Strings(r, "groups"), Strings(r, "verbs"),
                                    Strings(r, "apiGroups"), Strings(r, "resources"),
                                    Strings(r, "namespaces"), Strings(r, "nonResourceURLs")});
    }
  }
  int port = (*sim)->port();
  if (std::string path = absl::GetFlag(FLAGS_port_file); !path.empty()) {
    // Write then rename, so a reader never sees a partial file.
    std::string tmp = path + ".tmp";
    std::ofstream(tmp) << port << "\n";
    std::rename(tmp.c_str(), path.c_str());
  }
  std::cerr << "kube-sim: serving " << (*sim)->url() << " (port " << port << ", profile " << profile
            << ")" << std::endl;

  int sig = 0;
  sigwait(&signals, &sig);
  std::cerr << "kube-sim: signal " << sig << ", shutting down" << std::endl;
  (*sim)->Stop();
  return 0;
}
