#pragma once

// The validating admission webhook (`/validate-operator-types`, docs/behaviour.md "Admission
// webhook"). It never denies: every AdmissionReview is answered allowed. What it does is record:
// for a CommitRequest CREATE, the requesting user under the request's uid (the uid is assigned
// before validating admission, so the record exists before the object can be seen), which the
// catalog's CommitRequest controller reads as the command author. With change facts on
// (--admission_attribution), also every CREATE, UPDATE (a patch arrives as one) and DELETE of
// the followed types the attribution configuration sends (the object itself or its scale
// subresource): who asked, keyed by the object's uid and, for an update, the resourceVersion it
// was admitted against (redisstore::AdmissionFact), which the splicer joins with stream entries
// when the audit log names no one. Dry-run requests and requests without an object uid record
// nothing.
//
// Bad input (not JSON, not an AdmissionReview, too deep, too long) is answered 400 with the
// reason and counted; with `failurePolicy: Ignore` the API server then admits the request
// anyway, so a broken webhook never blocks a write.

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "libs/core/clock.h"
#include "libs/redisstore/author_fact_store.h"
#include "libs/runtime/http_server.h"
#include "libs/runtime/metrics.h"
#include "nlohmann/json.hpp"

namespace reverser::materializer {

inline constexpr char kAdmissionPath[] = "/validate-operator-types";

// Where command authors go (Redis in production).
class CommandAuthorSink {
 public:
  virtual ~CommandAuthorSink() = default;
  virtual absl::Status RecordCommandAuthor(absl::string_view commit_request_uid,
                                           const redisstore::CommandAuthor& author) = 0;
};

// Where change facts go (Redis in production).
class ChangeAuthorSink {
 public:
  virtual ~ChangeAuthorSink() = default;
  virtual absl::Status RecordAdmission(const redisstore::AdmissionFact& admitted) = 0;
};

struct AdmissionAnswer {
  int status = 200;
  std::string body;
};

// One AdmissionReview in, the answer out; independent of HTTP. Thread-safe when the sink is.
class AdmissionReviewer {
 public:
  // `changes` null: change facts are not recorded (only command authors).
  AdmissionReviewer(CommandAuthorSink* sink, const core::Clock* clock,
                    runtime::MetricsRegistry* metrics, ChangeAuthorSink* changes = nullptr);
  AdmissionAnswer Review(absl::string_view body);
  // Counts an answer given without review (a body over the limit: too_large).
  void Count(absl::string_view outcome);

 private:
  AdmissionAnswer Refuse(absl::string_view reason, absl::string_view message);
  // Records who asked for a change of a followed type; the outcome counted.
  absl::string_view RecordChange(const nlohmann::json& request);

  CommandAuthorSink* sink_;
  ChangeAuthorSink* changes_;
  const core::Clock* clock_;
  runtime::MetricsRegistry* metrics_;
};

struct AdmissionWebhookOptions {
  std::string listen_address = "0.0.0.0";
  int port = 9445;
  runtime::TlsOptions tls;  // certificate and key; the API server presents no client certificate
  bool insecure = false;    // plain HTTP, development only
  // A longer body is answered 413 unread: two objects of the API server's 3 MiB request limit
  // and the review around them fit well below it.
  size_t max_body_bytes = size_t{16} << 20;
  absl::Duration read_timeout = absl::Seconds(10);
  absl::Duration write_timeout = absl::Seconds(10);
  absl::Duration idle_timeout = absl::Seconds(5);
};

class AdmissionWebhookServer {
 public:
  AdmissionWebhookServer(AdmissionWebhookOptions options, AdmissionReviewer* reviewer);
  // Validates the TLS material and starts listening; returns the bound port.
  absl::StatusOr<int> Start();
  void Stop();

 private:
  AdmissionWebhookOptions options_;
  AdmissionReviewer* reviewer_;
  std::unique_ptr<runtime::HttpServer> server_;
};

}  // namespace reverser::materializer
