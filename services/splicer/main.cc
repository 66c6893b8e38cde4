// The splicer service binary: flags only. What it runs: splicer_service.h (assembly),
// splicer_grpc.h (admin calls), target_manager_actor.h (the one owner of the streams).

#include <cstdlib>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "libs/catalogclient/catalog_flags.h"
#include "libs/kube/access_review.h"
#include "libs/membership/replica.h"
#include "libs/redisstore/author_fact_store.h"
#include "libs/redisstore/delivery_cursor_store.h"
#include "libs/redisstore/redis_flags.h"
#include "libs/runtime/service_main.h"
#include "services/splicer/splicer_service.h"

ABSL_FLAG(std::string, targets_file, "",
          "Instead of the catalog: a JSON reverser.v1.TableUpdate with the targets to serve.");
ABSL_FLAG(std::string, kubeconfig, "",
          "A kubeconfig for reviewing operators' tokens (--admin_auth=kubernetes) and for the "
          "Leases (--membership: the splicer replicas share the GitTargets, each splicing the ones "
          "it owns; --gitworker_membership). Empty: $KUBECONFIG, else the in-cluster service "
          "account.");
ABSL_FLAG(std::string, gitworker_address, "127.0.0.1:9090",
          "gRPC address of the gitworker (unused with --gitworker_membership).");
ABSL_FLAG(std::string, gitworker_tls_server_name, "",
          "The name each gitworker's mesh certificate is checked against instead of the host "
          "dialed: with --gitworker_membership a replica is dialed at the pod IP on its Lease, "
          "while its certificate names the gitworker Service (the chart passes "
          "<fullname>-gitworker.<namespace>.svc). Empty: the host dialed.");
ABSL_FLAG(bool, gitworker_membership, false,
          "Deliver each GitTarget to the gitworker replica that owns its branch, found from the "
          "gitworkers' Leases (service \"gitworker\" in --membership_namespace), instead of the "
          "one --gitworker_address. A target re-routes, from its persisted cursor, when its "
          "branch's owner changes or a replica answers that it does not own the branch.");
ABSL_FLAG(bool, attribution, true, "Resolve authors from the audit facts in Redis.");
ABSL_FLAG(std::string, attribution_sources, "audit",
          "Where authors come from, comma-separated: audit (the audit webhook's facts, exact) "
          "and admission (facts the materializer's admission webhook records with "
          "--admission_attribution, for clusters without audit access). With both, an audit "
          "fact wins; an admission fact is used when none came within the grace.");
ABSL_FLAG(absl::Duration, attribution_grace, reverser::redisstore::kDefaultAttributionGrace,
          "How long an event waits for its author fact before the committer is used.");
ABSL_FLAG(int64_t, max_in_flight, 1000, "Deliveries the gitworker may hold unaccepted.");
ABSL_FLAG(absl::Duration, summary_interval, absl::Seconds(2),
          "How often stream readiness is reported to the catalog.");
ABSL_FLAG(absl::Duration, delivery_cursor_ttl, reverser::redisstore::kDefaultDeliveryCursorTtl,
          "TTL of a delivery cursor, set again on every write. A running stream refreshes it, so "
          "it expires only when no splicer ran the stream that long (the stream then splices "
          "again; nothing is lost).");
ABSL_FLAG(absl::Duration, delivery_cursor_refresh, absl::Minutes(5),
          "How often a stream whose cursor did not move writes it again (refreshing its TTL and "
          "the reference watch cursors' 1 h TTL). At most half --delivery_cursor_ttl, and below "
          "1 h while --reference_watch_cursors.");
ABSL_FLAG(bool, reference_watch_cursors, true,
          "Write gitops-reverser's per-watch resume cursors (P:watch:v1:target:<uid>:<GR>:"
          "namespace:<ns>|cluster:last-rv, the acked RV, 1 h TTL) with each delivery cursor, so "
          "the reference resumes from them if it takes the GitTarget over "
          "(P: --reference_key_prefix).");
ABSL_FLAG(int64_t, refusals_per_target, 1000,
          "Standing refusals of the gitworker (objects it can never write) kept per GitTarget "
          "for its status; beyond it the oldest are dropped (the newest 5 are shown).");

namespace reverser::splicer {
namespace {

absl::Status ParseAttributionSources(absl::string_view list, SpliceStreamOptions& o) {
  o.audit_facts = false;
  o.admission_facts = false;
  for (absl::string_view source : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    source = absl::StripAsciiWhitespace(source);
    if (source == "audit") {
      o.audit_facts = true;
    } else if (source == "admission") {
      o.admission_facts = true;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("--attribution_sources: unknown source \"",
                                                     source, "\" (audit, admission)"));
    }
  }
  if (!o.audit_facts && !o.admission_facts) {
    return absl::InvalidArgumentError(
        "--attribution_sources names no source (audit, admission); use --noattribution to "
        "commit everything as the committer");
  }
  return absl::OkStatus();
}

absl::Status ValidateCursorFlags(const SpliceStreamOptions& o) {
  if (o.cursor_ttl < absl::Seconds(1)) {
    return absl::InvalidArgumentError("--delivery_cursor_ttl must be at least 1s");
  }
  if (o.cursor_refresh <= absl::ZeroDuration() || o.cursor_refresh > o.cursor_ttl / 2) {
    return absl::InvalidArgumentError(
        "--delivery_cursor_refresh must be positive and at most half --delivery_cursor_ttl");
  }
  if (o.reference_watch_cursors && o.cursor_refresh >= redisstore::kWatchCursorTtl) {
    return absl::InvalidArgumentError(
        "--delivery_cursor_refresh must be below the reference watch cursors' 1h TTL while "
        "--reference_watch_cursors");
  }
  return absl::OkStatus();
}

class App final : public runtime::ServiceApp {
 public:
  absl::Status Setup(runtime::ServiceHost& host) override {
    auto settings = redisstore::RedisSettingsFromFlags();
    if (!settings.ok()) return settings.status();
    std::string targets_file = absl::GetFlag(FLAGS_targets_file);
    auto catalog_address = catalogclient::CatalogAddressOrStatic("targets_file", targets_file);
    if (!catalog_address.ok()) return catalog_address.status();
    if (host.ReviewsOperators()) {
      auto reviewer =
          kube::NewAccessReviewer(absl::GetFlag(FLAGS_kubeconfig), "reverser-splicer/0.1");
      if (!reviewer.ok()) return reviewer.status();
      host.SetAdminReviewer(*reviewer);
    }
    SplicerServiceOptions options;
    options.catalog_address = *catalog_address;
    if (!targets_file.empty()) {
      auto update = ReadTargetsFile(targets_file);
      if (!update.ok()) return update.status();
      options.static_tables = std::move(*update);
    }
    options.gitworker_address = absl::GetFlag(FLAGS_gitworker_address);
    options.gitworker_tls_server_name = absl::GetFlag(FLAGS_gitworker_tls_server_name);
    auto replica = membership::ReplicaSettingsFromFlags();
    if (!replica.ok()) return replica.status();
    options.replica = *replica;
    options.gitworker_membership = absl::GetFlag(FLAGS_gitworker_membership);
    if (options.gitworker_membership && options.replica.namespace_.empty()) {
      return absl::InvalidArgumentError(
          "--gitworker_membership needs --membership_namespace (or $POD_NAMESPACE)");
    }
    options.kubeconfig = absl::GetFlag(FLAGS_kubeconfig);

    options.max_in_flight = static_cast<size_t>(absl::GetFlag(FLAGS_max_in_flight));
    options.summary_interval = absl::GetFlag(FLAGS_summary_interval);
    SpliceStreamOptions& defaults = options.manager.stream_defaults;
    defaults.redis = settings->options;
    defaults.prefix = settings->prefix;
    options.body_cipher = settings->body_cipher;
    defaults.body_cipher = options.body_cipher.get();
    defaults.attribution = absl::GetFlag(FLAGS_attribution);
    defaults.attribution_grace = absl::GetFlag(FLAGS_attribution_grace);
    if (absl::Status s =
            ParseAttributionSources(absl::GetFlag(FLAGS_attribution_sources), defaults);
        !s.ok()) {
      return s;
    }
    defaults.cursor_ttl = absl::GetFlag(FLAGS_delivery_cursor_ttl);
    defaults.cursor_refresh = absl::GetFlag(FLAGS_delivery_cursor_refresh);
    defaults.reference_watch_cursors = absl::GetFlag(FLAGS_reference_watch_cursors);
    if (absl::Status s = ValidateCursorFlags(defaults); !s.ok()) return s;
    if (absl::GetFlag(FLAGS_refusals_per_target) < 1) {
      return absl::InvalidArgumentError("--refusals_per_target must be at least 1");
    }
    options.manager.refusals.max_objects =
        static_cast<size_t>(absl::GetFlag(FLAGS_refusals_per_target));
    service_ = std::make_unique<SplicerService>(host, std::move(options));
    service_->Register();
    return absl::OkStatus();
  }

  absl::Status Run(runtime::ServiceHost& host) override {
    // The address on this replica's Lease: $POD_IP (else the instance name) and the gRPC port.
    const char* pod_ip = std::getenv("POD_IP");
    const std::string where =
        pod_ip != nullptr && *pod_ip != '\0' ? std::string(pod_ip) : host.options().instance;
    if (absl::Status s = service_->JoinMembership(absl::StrCat(where, ":", host.grpc_port()));
        !s.ok()) {
      return s;
    }
    service_->Start();
    return absl::OkStatus();
  }

  void Stop() override {
    if (service_) service_->Stop();
  }

 private:
  std::unique_ptr<SplicerService> service_;
};

std::unique_ptr<runtime::ServiceApp> MakeApp() { return std::make_unique<App>(); }

}  // namespace
}  // namespace reverser::splicer

int main(int argc, char** argv) {
  return reverser::runtime::RunServiceMain(
      argc, argv,
      {"splicer",
       "reverser splicer — splices the Redis materialization into desired sets and live events "
       "per GitTarget, delivered to the gitworker.\n\nUsage: splicer --redis_address=host:port "
       "--gitworker_address=host:port (--catalog_address=host:port | --targets_file=F) [flags]"},
      &reverser::splicer::MakeApp);
}
