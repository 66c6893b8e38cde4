#pragma once

// The audit side: an audit.k8s.io/v1 Policy evaluator and a batching webhook backend that POSTs
// EventLists the way kube-apiserver's buffered webhook backend does.

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "tools/kube-sim/api_error.h"

namespace httplib {
class Client;
}  // namespace httplib

namespace reverser::kubesim {

enum class AuditLevel { kNone, kMetadata, kRequest, kRequestResponse };
const char* AuditLevelName(AuditLevel level);

// What the policy decides for one request.
struct AuditDecision {
  AuditLevel level = AuditLevel::kNone;
  std::vector<std::string> omit_stages;
  bool omit_managed_fields = false;
};

struct AuditRequestAttributes {
  std::string user;
  std::vector<std::string> groups;
  std::string verb;
  bool is_resource = true;
  std::string api_group;
  std::string resource;  // plural
  std::string subresource;
  std::string namespace_;
  std::string name;
  std::string path;  // for nonResourceURLs
};

class AuditPolicy {
 public:
  // Parses an audit.k8s.io/v1 Policy (JSON form of the YAML file).
  static ApiOr<AuditPolicy> FromJson(const Json& policy);
  // One rule: everything at `level`.
  static AuditPolicy AllAt(AuditLevel level);

  AuditDecision Evaluate(const AuditRequestAttributes& attrs) const;

 private:
  struct Rule {
    AuditLevel level;
    std::vector<std::string> users, user_groups, verbs, namespaces, non_resource_urls;
    struct Resources {
      std::string group;
      std::vector<std::string> resources, resource_names;
    };
    std::vector<Resources> resources;
    bool has_resources = false;
    std::optional<std::vector<std::string>> omit_stages;
    std::optional<bool> omit_managed_fields;
  };
  std::vector<Rule> rules_;
  std::vector<std::string> omit_stages_;
  bool omit_managed_fields_ = false;
};

struct AuditWebhookOptions {
  std::string url;      // full URL POSTed to, e.g. https://127.0.0.1:9443/audit-webhook/default
  std::string ca_file;  // verify the receiver with this CA
  bool insecure_skip_verify = false;
  std::string client_cert_file;  // mTLS
  std::string client_key_file;
  std::string bearer_token;
  size_t max_batch_size = 400;
  absl::Duration max_wait = absl::Seconds(30);
  absl::Duration initial_backoff = absl::Seconds(10);
  double backoff_factor = 1.5;
  int backoff_steps = 5;  // attempts per batch before it is dropped
  absl::Duration request_timeout = absl::Seconds(30);
};

// Buffered webhook backend. Events are queued by Process(); a sender thread flushes a batch
// when it reaches max_batch_size or max_wait passed since its first event, retrying non-2xx
// and transport errors with exponential backoff.
class AuditWebhookBackend {
 public:
  explicit AuditWebhookBackend(AuditWebhookOptions options);
  ~AuditWebhookBackend();  // sends what is queued (one attempt each), then stops

  void Process(Json event);
  // Blocks until the queue is empty and no batch is in flight, or the deadline passes.
  bool WaitIdle(absl::Duration timeout);
  // While held, events are queued but nothing is sent (an audit pipeline running late); on
  // release the queue is sent as usual. A batch already in flight is not recalled.
  void SetHeld(bool held);

  struct Stats {
    int64_t events_sent = 0;
    int64_t batches_sent = 0;
    int64_t failed_attempts = 0;
    int64_t events_dropped = 0;
    int64_t events_queued = 0;  // waiting to be sent (now)
    bool held = false;
  };
  Stats stats() const;

 private:
  void Run();
  bool Post(const std::string& body);

  AuditWebhookOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Json> queue_;
  absl::Time first_queued_ = absl::InfiniteFuture();
  bool stopping_ = false;
  bool in_flight_ = false;
  bool held_ = false;
  Stats stats_;
  // Used by the sender thread only.
  std::unique_ptr<httplib::Client> client_;
  std::string path_;
  std::thread thread_;
};

}  // namespace reverser::kubesim
