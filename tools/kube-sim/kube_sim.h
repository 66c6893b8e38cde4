#pragma once

// kube-sim: a protocol-accurate Kubernetes API server for tests, run in-process or as a binary.
//
//   KubeSimOptions options;                  // port 0: any free port
//   ASSIGN_OR_RETURN(auto sim, KubeSim::Start(options));
//   sim->WriteKubeconfig(dir + "/kubeconfig");   // for kubectl / client libraries
//   sim->faults().Add({.action = FaultRule::Action::kTooManyRequests, .verb = "list", .times = 1});
//   sim->Compact();                           // older resourceVersions now get 410 Expired
//   sim->DropWatches();                       // cut every open watch connection
//
// Wire behaviour follows docs/behaviour.md, Kubernetes API wire facts.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "tools/kube-sim/admission.h"
#include "tools/kube-sim/api_error.h"
#include "tools/kube-sim/audit.h"
#include "tools/kube-sim/auth.h"
#include "tools/kube-sim/discovery.h"
#include "tools/kube-sim/faults.h"
#include "tools/kube-sim/resource_types.h"
#include "tools/kube-sim/store.h"

namespace reverser::kubesim {

struct KubeSimOptions {
  std::string bind_address = "127.0.0.1";
  int port = 0;  // 0: pick a free port (see KubeSim::port())
  Profile profile = Profile::kModern;
  // Compaction window: how many write events are kept. Watches and lists at an older
  // resourceVersion get 410 Expired.
  size_t history_limit = 10000;
  size_t max_request_body_bytes = 3 * 1024 * 1024;  // kube-apiserver's 3 MiB
  absl::Duration bookmark_interval = absl::Minutes(1);
  // When timeoutSeconds is absent (real servers: 30-60 min). Shorter here because a client
  // that vanishes while its watch is idle is only noticed at the next write, and each open
  // watch holds a worker thread until then.
  absl::Duration default_watch_timeout = absl::Minutes(5);
  absl::Duration too_large_rv_wait = absl::Seconds(3);
  int worker_threads = 256;  // each open watch (and idle keep-alive connection) holds one
  // TLS (both set: serve HTTPS).
  std::string tls_cert_file;
  std::string tls_key_file;
  // Audit: events go to the webhook when set, under `audit_policy` (default: RequestResponse
  // for everything, RequestReceived omitted).
  std::optional<AuditWebhookOptions> audit_webhook;
  std::optional<AuditPolicy> audit_policy;
  // Serve a minimal /openapi/v2 (protobuf). Default: only in the legacy profile. kubectl 1.27
  // fetches v2 (not v3) for `apply` validation and fails on 404; 1.28+ use v3.
  std::optional<bool> openapi_v2;
  // Serve /_sim/* admin endpoints (faults, compaction, dropping watches).
  bool admin_endpoints = true;
  // The server's audiences (kube-apiserver --api-audiences, which defaults to the service
  // account issuer): a TokenReview without spec.audiences is checked against these, and
  // status.audiences lists the ones the token is good for.
  std::vector<std::string> api_audiences = {"https://kubernetes.default.svc.cluster.local"};
  // Validating admission webhooks: where clientConfig.service references are reached.
  AdmissionOptions admission;
  // Namespace deletion: the namespace controller runs on its own thread (a deleted namespace is
  // Terminating until it has emptied it). false: it runs before the DELETE answers.
  bool async_namespace_controller = true;
};

class KubeSim {
 public:
  static absl::StatusOr<std::unique_ptr<KubeSim>> Start(KubeSimOptions options);
  ~KubeSim();
  KubeSim(const KubeSim&) = delete;
  KubeSim& operator=(const KubeSim&) = delete;

  // Stops listening, ends open watches cleanly, flushes audit. Idempotent.
  void Stop();

  int port() const;
  std::string url() const;  // "http://127.0.0.1:PORT"
  // A kubeconfig pointing at this server (token: a bearer token to send; empty: none).
  std::string Kubeconfig(const std::string& token = "") const;
  absl::Status WriteKubeconfig(const std::string& path, const std::string& token = "") const;

  // Test controls.
  FaultInjector& faults();
  Authenticator& authenticator();
  Authorizer& authorizer();
  Store& store();
  TypeRegistry& types();
  void Compact();
  void DropWatches();
  int64_t CurrentResourceVersion() const;
  // Open watch streams; tests wait for a client's watch to be established before writing.
  int ActiveWatches() const;
  bool WaitForActiveWatches(int n, absl::Duration timeout) const;
  // Every validating admission webhook call and its outcome.
  WebhookCallLog& webhook_calls();
  // Waits until no namespace is waiting for the namespace controller.
  bool WaitForNamespaceController(absl::Duration timeout) const;
  // Null unless audit_webhook was configured.
  AuditWebhookBackend* audit();
  // "METHOD /path?query" of every request served, in order (for asserting client behaviour).
  std::vector<std::string> RequestLog() const;

  // Serves one request in-process as system:admin (system:masters), whatever tokens/RBAC say.
  // Returns {status code, body}. Handy to seed objects without an HTTP client.
  struct Response {
    int status = 0;
    std::string body;
    std::string content_type;
  };
  Response Call(const std::string& method, const std::string& path_and_query,
                const std::string& body = "", const std::string& content_type = "application/json");

  class Impl;

 private:
  explicit KubeSim(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace reverser::kubesim
