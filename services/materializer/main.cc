// The materializer service binary: per claimed (type, scope) a Redis stream + checkpoint fed by
// the watch (or, with --intake=audit, by audit bodies and a periodic LIST), and the audit
// webhook that records who made each change. The flags are here; materializer_service.h
// assembles the parts.

#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "libs/audit/audit_event.h"
#include "libs/core/json_depth.h"
#include "libs/runtime/service_main.h"
#include "services/materializer/audit_webhook.h"
#include "services/materializer/materializer_service.h"

ABSL_FLAG(std::string, kubeconfig, "",
          "Path to a kubeconfig; empty: $KUBECONFIG, then in-cluster.");
ABSL_FLAG(std::string, static_claims, "",
          "Instead of the catalog: comma-separated group/version/resource[@namespace] to "
          "materialize (core as version/resource, e.g. v1/configmaps,apps/v1/deployments@team).");
ABSL_FLAG(int64_t, compact_after_entries, 10000,
          "Fold a stream into a new checkpoint once it holds more entries than this.");
ABSL_FLAG(bool, use_watch_list, true,
          "Use WatchList (sendInitialEvents) when the server serves it.");
ABSL_FLAG(std::string, intake, "watch",
          "Where stream entries come from: watch (one long-lived watch per claim) or audit "
          "(RequestResponse audit bodies from the webhook; the checkpoint is refilled by a "
          "periodic LIST).");
ABSL_FLAG(
    absl::Duration, audit_intake_relist_interval, absl::Minutes(5),
    "With --intake=audit: how often each claim is LISTed to refill (and heal) its checkpoint.");
ABSL_FLAG(absl::Duration, audit_intake_heal_settle, absl::Seconds(45),
          "With --intake=audit: a difference a LIST finds replaces the checkpoint only once the "
          "stream has had nothing for that object for this long (its audit event may still be "
          "on the way; kube-apiserver batches up to 30s).");
ABSL_FLAG(absl::Duration, redis_state_check_interval, absl::Seconds(5),
          "How often each materialization checks, while no append does, that Redis still holds "
          "its checkpoint and stream as last seen; state that vanished or went backwards (a Redis "
          "restart without persistence, an older snapshot) is rebuilt from a fresh LIST.");
ABSL_FLAG(bool, audit_webhook, true, "Serve the audit webhook (author attribution).");
ABSL_FLAG(int, audit_port, 9444, "Audit webhook port; 0 picks a free one.");
ABSL_FLAG(bool, admission_webhook, false,
          "Serve the validating admission webhook (/validate-operator-types): records the "
          "command author of each CommitRequest CREATE in Redis; never denies.");
ABSL_FLAG(bool, admission_attribution, false,
          "With --admission_webhook: also record who asked for every CREATE, UPDATE and DELETE "
          "the attribution ValidatingWebhookConfiguration sends (attribution for clusters "
          "without audit access; the splicer reads them with --attribution_sources=admission). "
          "Never denies.");
ABSL_FLAG(int, admission_port, 9445, "Admission webhook port; 0 picks a free one.");
ABSL_FLAG(std::string, admission_tls_cert, "", "Admission webhook server certificate (PEM).");
ABSL_FLAG(std::string, admission_tls_key, "", "Admission webhook server key (PEM).");
ABSL_FLAG(bool, admission_insecure, false,
          "Serve the admission webhook over plain HTTP (development only: the API server only "
          "calls HTTPS webhooks).");
ABSL_FLAG(std::string, audit_tls_cert, "", "Audit webhook server certificate (PEM).");
ABSL_FLAG(std::string, audit_tls_key, "", "Audit webhook server key (PEM).");
ABSL_FLAG(std::string, audit_client_ca, "",
          "CA bundle that signs the API server's client certificate (mTLS, required).");
ABSL_FLAG(std::vector<std::string>, audit_client_names,
          {std::string(reverser::materializer::kDefaultAuditClientName)},
          "Names an audit client certificate may carry (common name, or a DNS/URI subject "
          "alternative name); others signed by --audit_client_ca get 403. \"*\" takes any.");
ABSL_FLAG(
    bool, audit_insecure, false,
    "Serve the audit webhook over plain HTTP without client certificates (development only).");
ABSL_FLAG(int64_t, audit_max_body_bytes,
          static_cast<int64_t>(reverser::materializer::kDefaultMaxBodyBytes),
          "Longest audit request body read; a longer one is answered 413 (what was read before "
          "the limit is recorded). Bodies are decoded one event at a time, so memory does not "
          "grow with this; the default is above any list a default kube-apiserver sends (400 "
          "events of a 3 MiB request and a 1.5 MiB object).");
ABSL_FLAG(int64_t, audit_max_event_bytes,
          static_cast<int64_t>(reverser::audit::kDefaultMaxEventBytes),
          "Largest single audit event decoded; a larger one is skipped (counted in "
          "reverser_materializer_audit_events_refused_total{reason=\"too_large\"}, logged with "
          "its auditID) and the rest of its list is recorded. The most memory one request holds.");
ABSL_FLAG(absl::Duration, audit_read_timeout, absl::Seconds(15),
          "Audit webhook: a connection whose request stops arriving for this long is closed "
          "(whole seconds, at least 1s).");
ABSL_FLAG(absl::Duration, audit_write_timeout, absl::Seconds(30),
          "Audit webhook: a connection whose answer cannot be written for this long is closed.");
ABSL_FLAG(absl::Duration, audit_idle_timeout, absl::Seconds(5),
          "Audit webhook: a kept-alive connection idle this long between requests is closed. "
          "Shutting down waits this long for an idle connection, so keep it below the pod's "
          "termination grace.");
ABSL_FLAG(int64_t, json_max_depth, reverser::core::kApiObjectMaxDepth,
          "Deepest object nesting accepted from the cluster, in watch objects, LIST items and "
          "audit events (objects and arrays count one level each). A deeper object is skipped, "
          "counted and reported; the watch and the rest of the list go on. The default is the "
          "API server's own limit, so nothing a cluster holds is refused; higher values are "
          "rejected (deeper objects would reach recursive code).");
ABSL_FLAG(absl::Duration, author_fact_ttl, absl::Minutes(15), "TTL of author facts in Redis.");
ABSL_FLAG(absl::Duration, fact_index_size_interval, absl::Seconds(10),
          "How often, at most, the author fact keys in Redis are counted (a SCAN) for "
          "gitopsreverser_attribution_fact_index_size, after a request that recorded facts; 0s: "
          "after every such request, as gitops-reverser does.");

namespace reverser::materializer {
namespace {

MaterializerServiceOptions OptionsFromFlags() {
  MaterializerServiceOptions o;
  o.kubeconfig = absl::GetFlag(FLAGS_kubeconfig);
  o.static_claims = absl::GetFlag(FLAGS_static_claims);
  o.intake = absl::GetFlag(FLAGS_intake);
  o.compact_after_entries = absl::GetFlag(FLAGS_compact_after_entries);
  o.use_watch_list = absl::GetFlag(FLAGS_use_watch_list);
  o.audit_intake_relist_interval = absl::GetFlag(FLAGS_audit_intake_relist_interval);
  o.audit_intake_heal_settle = absl::GetFlag(FLAGS_audit_intake_heal_settle);
  o.redis_state_check_interval = absl::GetFlag(FLAGS_redis_state_check_interval);
  o.audit_webhook = absl::GetFlag(FLAGS_audit_webhook);
  o.audit_port = absl::GetFlag(FLAGS_audit_port);
  o.admission_webhook = absl::GetFlag(FLAGS_admission_webhook);
  o.admission_port = absl::GetFlag(FLAGS_admission_port);
  o.admission_tls_cert = absl::GetFlag(FLAGS_admission_tls_cert);
  o.admission_tls_key = absl::GetFlag(FLAGS_admission_tls_key);
  o.admission_insecure = absl::GetFlag(FLAGS_admission_insecure);
  o.admission_attribution = absl::GetFlag(FLAGS_admission_attribution);
  o.audit_tls_cert = absl::GetFlag(FLAGS_audit_tls_cert);
  o.audit_tls_key = absl::GetFlag(FLAGS_audit_tls_key);
  o.audit_client_ca = absl::GetFlag(FLAGS_audit_client_ca);
  o.audit_client_names = absl::GetFlag(FLAGS_audit_client_names);
  o.audit_insecure = absl::GetFlag(FLAGS_audit_insecure);
  o.audit_max_body_bytes = absl::GetFlag(FLAGS_audit_max_body_bytes);
  o.audit_max_event_bytes = absl::GetFlag(FLAGS_audit_max_event_bytes);
  o.audit_read_timeout = absl::GetFlag(FLAGS_audit_read_timeout);
  o.audit_write_timeout = absl::GetFlag(FLAGS_audit_write_timeout);
  o.audit_idle_timeout = absl::GetFlag(FLAGS_audit_idle_timeout);
  o.json_max_depth = absl::GetFlag(FLAGS_json_max_depth);
  o.author_fact_ttl = absl::GetFlag(FLAGS_author_fact_ttl);
  o.fact_index_size_interval = absl::GetFlag(FLAGS_fact_index_size_interval);
  return o;
}

class App final : public runtime::ServiceApp {
 public:
  absl::Status Setup(runtime::ServiceHost& host) override {
    service_ = std::make_unique<MaterializerService>(host, OptionsFromFlags());
    return service_->Setup();
  }

  absl::Status Run(runtime::ServiceHost& /*host*/) override { return service_->Start(); }

  void Stop() override {
    if (service_) service_->Stop();
  }

 private:
  std::unique_ptr<MaterializerService> service_;
};

std::unique_ptr<runtime::ServiceApp> MakeApp() { return std::make_unique<App>(); }

}  // namespace
}  // namespace reverser::materializer

int main(int argc, char** argv) {
  return reverser::runtime::RunServiceMain(
      argc, argv,
      {"materializer",
       "reverser materializer — per-type Redis materialization (stream + checkpoint) and the "
       "audit webhook intake.\n\nUsage: materializer --kubeconfig=... --redis_address=host:port "
       "(--catalog_address=host:port | --static_claims=...) [flags]"},
      &reverser::materializer::MakeApp);
}
