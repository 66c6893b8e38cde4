#pragma once

// The audit webhook intake: `POST /audit-webhook` with an audit.k8s.io/v1 EventList, on HTTPS
// with client certificates (plain HTTP only behind --audit_insecure). Each event is classified
// by the reference's filters and counted once; accepted events become author facts written to a
// FactSink. A sink failure answers 500 so the API server retries the whole list: nothing
// accepted is lost (facts are keyed, stream repeats are diverted). With a StreamSink
// (`--intake=audit`) the accepted events also become stream entries, written after their facts
// (so a reader that sees an entry finds its author).
//
// The body is decoded as it is read, one event at a time (audit::EventListReader), so memory
// stays bounded by the largest event whatever the list's size: facts and entries are written in
// rounds (AuditIntakeOptions) once the body has shown it is an EventList. One event that cannot
// be decoded (too large, nested too deeply, malformed) is skipped, counted and logged; the
// others are recorded and the answer is 200. A body is refused as a whole only when its framing
// is broken or it is no EventList (400), or when it is longer than max_body_bytes (413; what was
// read before the limit is still recorded).

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "libs/audit/audit_event.h"
#include "libs/runtime/http_server.h"
#include "libs/runtime/metrics.h"
#include "services/materializer/audit_metrics.h"

namespace reverser::materializer {

// Where accepted facts go (Redis in production).
class FactSink {
 public:
  virtual ~FactSink() = default;
  // All or nothing from the caller's view: an error makes the webhook answer 500.
  virtual absl::Status Write(const std::vector<redisstore::AuthorFact>& facts) = 0;
  // How many fact keys the store holds (gitopsreverser_attribution_fact_index_size).
  virtual absl::StatusOr<int64_t> CountFacts() {
    return absl::UnimplementedError("this sink does not count its facts");
  }
};

// Where accepted events go as materialization stream entries (`--intake=audit` only).
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  // The accepted (kQueued) events of one request, in order. An error makes the webhook answer
  // 500; a retried request is safe (repeats are diverted, not applied twice).
  virtual absl::Status Append(const std::vector<const audit::AuditEvent*>& accepted_events) = 0;
};

// Above any list a default kube-apiserver sends: 400 events (--audit-webhook-batch-max-size) of
// a 3 MiB request body and a 1.5 MiB stored object each. Memory does not grow with it.
inline constexpr size_t kDefaultMaxBodyBytes = size_t{2} << 30;
// The name the audit client certificate carries by default (docs/behaviour.md, Audit webhook
// clients): the API server's own identity, as its audit webhook kubeconfig presents it.
inline constexpr absl::string_view kDefaultAuditClientName = "kube-apiserver";

struct AuditWebhookOptions {
  std::string listen_address = "0.0.0.0";
  int port = 9444;
  // A longer body is refused with 413 once this many bytes have been read.
  size_t max_body_bytes = kDefaultMaxBodyBytes;
  runtime::TlsOptions tls;  // cert/key required unless insecure; client CA → mTLS
  bool insecure = false;    // plain HTTP, development only
  // With mTLS, the client certificate must also carry one of these names (its common name or
  // a DNS/URI subject alternative name); "*" takes any certificate the CA signed.
  std::vector<std::string> allowed_client_names = {std::string(kDefaultAuditClientName)};
  // A connection is closed when a read of its request (read) or a write of the answer (write)
  // waits longer than this, or when it sits idle between requests (idle): a client that stops
  // sending holds a worker thread only this long. Read and write are gitops-reverser's; idle is
  // shorter than its 60s because stopping the server waits for each kept-alive connection's
  // idle wait (cpp-httplib 0.11), and the API server keeps one open between batches.
  absl::Duration read_timeout = absl::Seconds(15);
  absl::Duration write_timeout = absl::Seconds(30);
  absl::Duration idle_timeout = absl::Seconds(5);
};

struct AuditIntakeOptions {
  audit::DecodeLimits limits;  // per event: size and depth (beyond them it is skipped)
  // A long list is written in rounds of this many facts, or once the accepted events held for
  // the stream sink reach this many bytes.
  size_t write_round_facts = 1024;
  size_t write_round_bytes = 16 << 20;
  // After a request that recorded facts, the store's fact keys are counted (a SCAN) at most this
  // often; zero: after every such request, as the reference does.
  absl::Duration fact_index_size_interval = absl::Seconds(10);
};

// Result of handling one webhook request, independent of HTTP (unit-testable).
struct AuditResponse {
  int status = 200;
  std::string body;
};

class AuditIntake {
 public:
  class Request;

  // `streams` may be null (watch intake: facts only).
  AuditIntake(FactSink* sink, runtime::MetricsRegistry* metrics, StreamSink* streams = nullptr,
              AuditIntakeOptions options = {});
  ~AuditIntake();

  // Handles one request whose body is at hand (tests, tools).
  AuditResponse Handle(const std::string& method, const std::string& path, absl::string_view body);

  // The answer when method and path alone decide it (not the webhook's path, not POST).
  std::optional<AuditResponse> Precheck(const std::string& method, const std::string& path);
  // Starts a POST whose body is then fed in pieces.
  std::unique_ptr<Request> Begin();
  // The answer to a client whose certificate names none of the allowed clients: 403, counted
  // and logged with the names it carries. Nothing of its body is read.
  AuditResponse RefuseClient(const std::vector<std::string>& names);

 private:
  friend class Request;
  // Counts the store's fact keys when the last count is older than fact_index_size_interval
  // (and no other request is counting).
  void CountFactIndex();

  FactSink* sink_;
  runtime::MetricsRegistry* metrics_;
  AuditMetrics audit_metrics_;
  StreamSink* streams_;
  AuditIntakeOptions options_;
  std::mutex count_mu_;
  absl::Time next_count_ = absl::InfinitePast();  // guarded by count_mu_
};

// One POST being read. Not thread-safe (one HTTP thread reads one request).
class AuditIntake::Request {
 public:
  explicit Request(AuditIntake& intake);
  ~Request();

  // Consumes the next piece of the body. False: stop reading, the answer is decided (broken
  // framing, or a write failed).
  bool Feed(absl::string_view piece);
  // The answer once the whole body has been fed.
  AuditResponse Finish();
  // The answer when the body passed `limit` bytes: 413, after recording what was read.
  AuditResponse RefuseTooLarge(size_t limit, size_t read);

 private:
  struct Series {
    audit::Outcome outcome;
    std::string group, version, resource, verb;
    int64_t events = 0;        // counted under their outcome
    int64_t write_errors = 0;  // accepted, but their write failed
  };
  void OnItem(audit::EventList item);
  void Refuse(const audit::RefusedEvent& refused);
  // Writes the facts and held events so far; false (and write_status_) when a sink failed.
  bool WriteRound();
  void CountSeries();
  void Answered(absl::string_view outcome);

  AuditIntake& intake_;
  audit::EventListReader reader_;
  absl::Time start_;
  absl::Status framing_;
  absl::Status write_status_;
  bool stopped_ = false;
  size_t items_ = 0;
  size_t refused_ = 0;
  std::vector<Series> series_;
  std::vector<size_t> unwritten_;  // the series of each accepted event not written yet
  std::vector<redisstore::AuthorFact> facts_;
  std::vector<audit::EventList> held_;  // accepted events kept for the stream sink
  std::vector<const audit::AuditEvent*> accepted_;
  size_t held_bytes_ = 0;
  size_t facts_written_ = 0;
  size_t expanded_written_ = 0;
  // Events whose facts were written (per op), and those of the round being collected.
  size_t written_events_ = 0;
  size_t expanded_events_ = 0;
  size_t round_written_events_ = 0;
  size_t round_expanded_events_ = 0;
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
