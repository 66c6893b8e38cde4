// The catalog service binary: API discovery, the type registry, rules, watched-type tables,
// claims and CRD status. See catalog_service.h for the parts and docs/architecture.md for the
// protocol.

#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "libs/core/json_depth.h"
#include "libs/kube/access_review.h"
#include "libs/kube/config.h"
#include "libs/kube/httplib_transport.h"
#include "libs/membership/replica.h"
#include "libs/redisstore/redis_flags.h"
#include "libs/runtime/grpc_security.h"
#include "libs/runtime/log.h"
#include "libs/runtime/service_main.h"
#include "services/catalog/catalog_service.h"
#include "services/catalog/commit_request_clients.h"

ABSL_FLAG(std::string, kubeconfig, "",
          "Path to a kubeconfig file. Empty: $KUBECONFIG, else the in-cluster service account, "
          "else ~/.kube/config.");
ABSL_FLAG(std::string, kube_context, "", "kubeconfig context to use (empty: current-context).");
ABSL_FLAG(std::vector<std::string>, additional_sensitive_resources, {},
          "Comma-separated extra sensitive types (\"resource\" for the core group, "
          "\"group/resource\" otherwise); core secrets are always sensitive.");
ABSL_FLAG(absl::Duration, discovery_refresh_period, absl::Seconds(30),
          "How often API discovery is re-read (CRD changes trigger a pass at once).");
ABSL_FLAG(int64_t, max_object_depth, 1000,
          "Deepest object (JSON nesting; {} is 1) the catalog reads from the API server "
          "(GitProviders, GitTargets, rules, CRDs): deeper ones are refused, counted in "
          "reverser_catalog_objects_refused_total and logged. At most 10000 (the API server's "
          "limit); the catalog copies objects recursively, so it stays well below that.");

ABSL_FLAG(std::string, gitworker_address, "",
          "gRPC address (host:port) of the gitworker that CommitRequests attach to. Empty: "
          "CommitRequests are not handled (they keep no status).");
ABSL_FLAG(bool, gitworker_membership, false,
          "Attach each CommitRequest at the gitworker replica that owns its GitTarget's branch, "
          "found from the gitworkers' Leases (service \"gitworker\" in --membership_namespace) "
          "as the splicer finds it, instead of at --gitworker_address. The catalog has no "
          "membership of its own (--membership stays off).");
ABSL_FLAG(std::string, gitworker_tls_server_name, "",
          "The name each gitworker's mesh certificate is checked against instead of the host "
          "dialed: with --gitworker_membership a replica is dialed at the pod IP on its Lease, "
          "while its certificate names the gitworker Service. Empty: the host dialed.");
ABSL_FLAG(bool, command_authors, true,
          "Read each CommitRequest's command author, recorded by the admission webhook, from "
          "Redis (--redis_* flags). Off, or when none was recorded, the commit is the "
          "committer's.");

ABSL_FLAG(std::string, attribution_webhook_configuration, "",
          "Name of a ValidatingWebhookConfiguration whose webhooks' rules the catalog keeps equal "
          "to the followed types (CREATE, UPDATE, DELETE of each, its /scale, and namespace "
          "DELETEs), for attribution from admission. Only the rules are written. Empty: off.");

namespace reverser::catalog {
namespace {

class App final : public runtime::ServiceApp {
 public:
  absl::Status Setup(runtime::ServiceHost& host) override {
    kube::KubeconfigOptions kube_options;
    kube_options.context = absl::GetFlag(FLAGS_kube_context);
    auto config = kube::LoadDefaultConfig(absl::GetFlag(FLAGS_kubeconfig), kube_options);
    if (!config.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("no Kubernetes API configuration: ", config.status().message()));
    }
    const int64_t max_depth = absl::GetFlag(FLAGS_max_object_depth);
    if (max_depth < 1 || max_depth > core::kApiObjectMaxDepth) {
      return absl::InvalidArgumentError(
          absl::StrCat("--max_object_depth must be within 1..", core::kApiObjectMaxDepth));
    }
    kube::RestClientOptions client_options;
    client_options.max_object_depth = max_depth;
    auto client = kube::NewHttplibRestClient(*config, "reverser-catalog/0.1", client_options);
    if (!client.ok()) return client.status();
    if (host.ReviewsOperators()) {
      host.SetAdminReviewer(std::make_shared<kube::KubeAccessReviewer>(*client));
    }

    std::vector<std::string> sensitive;
    for (const std::string& entry : absl::GetFlag(FLAGS_additional_sensitive_resources)) {
      if (!entry.empty()) sensitive.push_back(entry);
    }
    auto sensitive_policy = typeset::SensitivePolicy::Create(sensitive);
    if (!sensitive_policy.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--additional_sensitive_resources: ", sensitive_policy.status().message()));
    }
    absl::Duration period = absl::GetFlag(FLAGS_discovery_refresh_period);
    if (period < absl::Seconds(1)) {
      return absl::InvalidArgumentError("--discovery_refresh_period must be at least 1s");
    }

    CatalogServiceOptions options;
    options.client = *client;
    options.state.registry.sensitive_policy = *sensitive_policy;
    // Generations start at the start time in microseconds: they keep increasing across restarts.
    options.state.generation_epoch = static_cast<uint64_t>(absl::ToUnixMicros(absl::Now()));
    options.discovery_period = period;
    auto replica = membership::ReplicaSettingsFromFlags();
    if (!replica.ok()) return replica.status();
    if (replica->enabled) {
      return absl::InvalidArgumentError(
          "the catalog has no replicas to share work with: --membership is for the "
          "materializer, splicer and gitworker (--gitworker_membership routes CommitRequests)");
    }
    const std::string tls_server_name = absl::GetFlag(FLAGS_gitworker_tls_server_name);
    const std::string gitworker = absl::GetFlag(FLAGS_gitworker_address);
    if (absl::GetFlag(FLAGS_gitworker_membership)) {
      if (replica->namespace_.empty()) {
        return absl::InvalidArgumentError(
            "--gitworker_membership needs --membership_namespace (or $POD_NAMESPACE)");
      }
      auto& routing = options.gitworker_routing;
      routing.enabled = true;
      routing.namespace_ = replica->namespace_;
      routing.timing = replica->timing;
      routing.attacher.credentials = runtime::MeshChannelCredentials(host.options().grpc_security);
      routing.attacher.tls_server_name = tls_server_name;
    } else if (!gitworker.empty()) {
      options.commit_attacher = std::make_shared<GrpcCommitAttacher>(
          gitworker, runtime::MeshChannelCredentials(host.options().grpc_security),
          absl::Seconds(10), tls_server_name);
    }
    if (options.gitworker_routing.enabled || options.commit_attacher) {
      if (absl::GetFlag(FLAGS_command_authors)) {
        auto redis = redisstore::RedisSettingsFromFlags();
        if (!redis.ok()) return redis.status();
        options.command_authors =
            std::make_shared<RedisCommandAuthors>(redis->options, redis->prefix);
      }
    }
    options.attribution_webhook.configuration =
        absl::GetFlag(FLAGS_attribution_webhook_configuration);
    runtime::LogInfo("kubernetes api", {{"server", config->server}, {"context", config->context}});
    service_ = std::make_unique<CatalogService>(host, std::move(options));
    service_->Register();
    return absl::OkStatus();
  }

  absl::Status Run(runtime::ServiceHost& /*host*/) override {
    service_->Start();
    return absl::OkStatus();
  }

  void Stop() override {
    if (service_) service_->Stop();
  }

 private:
  std::unique_ptr<CatalogService> service_;
};

std::unique_ptr<runtime::ServiceApp> MakeApp() { return std::make_unique<App>(); }

}  // namespace
}  // namespace reverser::catalog

int main(int argc, char** argv) {
  return reverser::runtime::RunServiceMain(
      argc, argv,
      {"catalog",
       "reverser catalog — API discovery, the type registry, rules, watched-type tables, claims "
       "and CRD status.\n\nUsage: catalog [flags]"},
      &reverser::catalog::MakeApp);
}
