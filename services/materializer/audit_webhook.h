#pragma once

// The audit webhook intake: `POST /audit-webhook` with an audit.k8s.io/v1 EventList, on HTTPS
// with client certificates (plain HTTP only behind --audit_insecure). Each event is classified
// by the reference's filters and counted once; accepted events become author facts written to a
// FactSink. A sink failure answers 500 for the whole list so the API server retries: nothing
// accepted is lost. With a StreamSink (`--intake=audit`) the accepted events also become
// stream entries, written after their facts (so a reader that sees an entry finds its author)
// and under the same all-or-nothing rule.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "libs/audit/audit_event.h"
#include "libs/runtime/http_server.h"
#include "libs/runtime/metrics.h"

namespace reverser::materializer {

// Where accepted facts go (Redis in production).
class FactSink {
 public:
  virtual ~FactSink() = default;
  // All or nothing from the caller's view: an error makes the webhook answer 500.
  virtual absl::Status Write(const std::vector<redisstore::AuthorFact>& facts) = 0;
};

// Where accepted events go as materialization stream entries (`--intake=audit` only).
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  // The accepted (kQueued) events of one request, in order. An error makes the webhook answer
  // 500; a retried request is safe (repeats are diverted, not applied twice).
  virtual absl::Status Append(const std::vector<const audit::AuditEvent*>& accepted_events) = 0;
};

struct AuditWebhookOptions {
  std::string listen_address = "0.0.0.0";
  int port = 9444;
  size_t max_body_bytes = 10 * 1024 * 1024;
  runtime::TlsOptions tls;  // cert/key required unless insecure; client CA → mTLS
  bool insecure = false;    // plain HTTP, development only
};

// Result of handling one webhook request, independent of HTTP (unit-testable).
struct AuditResponse {
  int status = 200;
  std::string body;
};

class AuditIntake {
 public:
  // `streams` may be null (watch intake: facts only).
  AuditIntake(FactSink* sink, runtime::MetricsRegistry* metrics, StreamSink* streams = nullptr);
  // Handles one request already read from the wire. The body is taken over: the decoded events
  // view into it (give it audit::kBodyPadding spare capacity and it is never copied).
  AuditResponse Handle(const std::string& method, const std::string& path, std::string body);

 private:
  FactSink* sink_;
  runtime::MetricsRegistry* metrics_;
  StreamSink* streams_;
};

class AuditWebhookServer {
 public:
  AuditWebhookServer(AuditWebhookOptions options, AuditIntake* intake);
  // Validates the TLS material and starts listening; returns the bound port.
  absl::StatusOr<int> Start();
  void Stop();

 private:
  AuditWebhookOptions options_;
  AuditIntake* intake_;
  std::unique_ptr<runtime::HttpServer> server_;
};

}  // namespace reverser::materializer
