// The gitworker service binary: the only writer of Git. Splicers stream resyncs and live events
// (GitWorker.Deliver); per-branch actors commit them in windows and push with compare-and-swap.
// This file holds the flags; gitworker_service.h assembles the parts.

#include <memory>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "libs/catalogclient/catalog_flags.h"
#include "libs/membership/replica.h"
#include "libs/runtime/service_main.h"
#include "services/gitworker/gitworker_service.h"

ABSL_FLAG(
    std::string, work_dir, "/var/lib/reverser/gitworker",
    "Where branch clones live (<work_dir>/repos/<digest>); created with mode 0700, and refused "
    "when other users may write it.");
ABSL_FLAG(absl::Duration, push_cooldown, absl::Seconds(5),
          "Least time between two successful pushes of a branch (0 allowed).");
ABSL_FLAG(int64_t, target_buffer, 1000,
          "Items buffered per GitTarget of a delivery stream before credit is withheld.");
ABSL_FLAG(int64_t, max_unaccepted, 64,
          "Delivery messages read ahead of their acceptance per stream.");
ABSL_FLAG(std::string, credentials_dir, "",
          "Directory of mounted credential Secrets: <dir>/<namespace>/<name>/<key> "
          "(ssh-privatekey|identity|sshPrivateKey, known_hosts, username/password, bearerToken). "
          "Empty: remotes are reached anonymously.");
ABSL_FLAG(int64_t, max_git_file_bytes, 8 << 20,
          "Largest file under a target path that is read (size from the object header; larger "
          "files are left alone and reported), and largest file written for an object.");
ABSL_FLAG(int64_t, max_yaml_nodes, 1'000'000,
          "YAML nodes one file may hold, all its documents together, aliases expanded.");
ABSL_FLAG(int64_t, max_yaml_alias_nodes, 100'000,
          "YAML nodes aliases may copy in one file, all its documents together.");
ABSL_FLAG(int, max_yaml_depth, 512,
          "Nesting depth of a YAML file read from Git (aliases expanded) and of a delivered "
          "object (at most 2048).");
ABSL_FLAG(int64_t, encryption_cache_bytes, 256 << 20,
          "Encrypted Secret files kept in memory so an unchanged Secret re-delivered commits "
          "nothing; beyond this the oldest are dropped (and re-encrypted on their next "
          "delivery).");
ABSL_FLAG(int64_t, max_template_iterations, 100'000,
          "Range iterations one commit template execution may run, all ranges together.");
ABSL_FLAG(int64_t, max_template_steps, 1'000'000,
          "Evaluation steps one commit template execution may take.");
ABSL_FLAG(int64_t, max_template_output_bytes, 1 << 20,
          "Bytes one commit template execution may write or build with print/printf.");
ABSL_FLAG(int, max_template_nesting, 100,
          "Nesting of control structures and parentheses in a commit template (at most 1000).");
ABSL_FLAG(std::string, secrets_source, "files",
          "Where credential and signing Secrets are read: \"files\" (mounted under "
          "--credentials_dir) or \"api\" (GET through the Kubernetes API with --kubeconfig or "
          "the in-cluster service account; a signing key the catalog generates is seen at once).");
ABSL_FLAG(std::string, kubeconfig, "",
          "A kubeconfig file, for --secrets_source=api, for reviewing operators' tokens "
          "(--admin_auth=kubernetes) and for the replicas' Leases (--membership). Empty: "
          "$KUBECONFIG, else the in-cluster "
          "service account, else ~/.kube/config.");
ABSL_FLAG(std::string, target_config_source, "catalog",
          "Where a GitTarget's remote, branch, path and Secrets come from: \"catalog\" (followed "
          "over the mesh from --catalog_address; a splicer's delivery only names the GitTarget) "
          "or \"delivery\" (the config a splicer delivers is used as sent: local development "
          "and tests only, as it lets any splicer name a remote and a Secret).");
ABSL_FLAG(absl::Duration, signing_key_cache_ttl, absl::Seconds(30),
          "How long a signing key read from its Secret is reused before it is read again (a "
          "rotated key is used within this time).");

ABSL_FLAG(std::string, advertise_address, "",
          "With --membership: the gRPC address the other services reach this replica at (its "
          "Lease's annotation; what a not_owner answer names). Empty: <--listen_address>:<gRPC "
          "port>, the host name for 0.0.0.0 (the chart passes $(POD_IP):<port>).");
ABSL_FLAG(std::string, gitworker_tls_server_name, "",
          "With --membership: the name the other replicas' mesh certificates are checked against "
          "when `reverserctl branches` is answered for all of them (each is dialed at the pod IP "
          "on its Lease; the certificates name the gitworker Service). Empty: the host dialed.");

namespace reverser::gitworker {
namespace {

absl::StatusOr<WriterLimits> LimitsFromFlags() {
  WriterLimits limits;
  const int64_t file_bytes = absl::GetFlag(FLAGS_max_git_file_bytes);
  const int64_t nodes = absl::GetFlag(FLAGS_max_yaml_nodes);
  const int64_t alias_nodes = absl::GetFlag(FLAGS_max_yaml_alias_nodes);
  const int depth = absl::GetFlag(FLAGS_max_yaml_depth);
  const int64_t iterations = absl::GetFlag(FLAGS_max_template_iterations);
  const int64_t steps = absl::GetFlag(FLAGS_max_template_steps);
  const int64_t output = absl::GetFlag(FLAGS_max_template_output_bytes);
  const int nesting = absl::GetFlag(FLAGS_max_template_nesting);
  if (file_bytes < 1 || nodes < 1 || alias_nodes < 0 || depth < 1 || iterations < 0 || steps < 1 ||
      output < 1 || nesting < 1) {
    return absl::InvalidArgumentError(
        "--max_git_file_bytes, --max_yaml_*, --max_template_* must be positive "
        "(alias nodes and iterations may be 0)");
  }
  // Readers, writers and the template engine recurse once per level.
  if (depth > 2048 || nesting > 1000) {
    return absl::InvalidArgumentError(
        "--max_yaml_depth must be at most 2048 and --max_template_nesting at most 1000");
  }
  const int64_t cache_bytes = absl::GetFlag(FLAGS_encryption_cache_bytes);
  if (cache_bytes < 0) return absl::InvalidArgumentError("--encryption_cache_bytes is negative");
  limits.max_encryption_cache_bytes = static_cast<uint64_t>(cache_bytes);
  limits.max_file_bytes = static_cast<uint64_t>(file_bytes);
  limits.yaml.max_nodes = static_cast<size_t>(nodes);
  limits.yaml.max_alias_nodes = static_cast<size_t>(alias_nodes);
  limits.yaml.max_depth = depth;
  limits.templates.max_iterations = iterations;
  limits.templates.max_steps = steps;
  limits.templates.max_output_bytes = output;
  limits.templates.max_nesting = nesting;
  return limits;
}

// The service's options from the flags; a flag out of range is an error.
absl::StatusOr<GitWorkerServiceOptions> OptionsFromFlags() {
  GitWorkerServiceOptions options;
  options.work_dir = absl::GetFlag(FLAGS_work_dir);
  options.push_cooldown = absl::GetFlag(FLAGS_push_cooldown);
  if (options.push_cooldown < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--push_cooldown must not be negative");
  }
  const int64_t target_buffer = absl::GetFlag(FLAGS_target_buffer);
  const int64_t max_unaccepted = absl::GetFlag(FLAGS_max_unaccepted);
  if (target_buffer < 1 || max_unaccepted < 1) {
    return absl::InvalidArgumentError("--target_buffer and --max_unaccepted must be at least 1");
  }
  options.target_buffer = static_cast<size_t>(target_buffer);
  options.max_unaccepted = static_cast<size_t>(max_unaccepted);
  auto limits = LimitsFromFlags();
  if (!limits.ok()) return limits.status();
  options.limits = *limits;
  options.signing_key_cache_ttl = absl::GetFlag(FLAGS_signing_key_cache_ttl);
  if (options.signing_key_cache_ttl < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--signing_key_cache_ttl must not be negative");
  }
  const std::string source = absl::GetFlag(FLAGS_secrets_source);
  if (source == "api") {
    options.secrets_source = GitWorkerServiceOptions::SecretsSource::kApi;
  } else if (source == "files") {
    options.secrets_source = GitWorkerServiceOptions::SecretsSource::kFiles;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--secrets_source must be files or api, not \"", source, "\""));
  }
  options.credentials_dir = absl::GetFlag(FLAGS_credentials_dir);
  options.kubeconfig = absl::GetFlag(FLAGS_kubeconfig);
  const std::string config_source = absl::GetFlag(FLAGS_target_config_source);
  if (config_source != "catalog" && config_source != "delivery") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--target_config_source must be catalog or delivery, not \"", config_source, "\""));
  }
  auto catalog = catalogclient::CatalogAddressOrStatic(
      "target_config_source=delivery", config_source == "delivery" ? config_source : "");
  if (!catalog.ok()) return catalog.status();
  options.catalog_address = *catalog;
  auto replica = membership::ReplicaSettingsFromFlags();
  if (!replica.ok()) return replica.status();
  options.replica = *replica;
  options.advertise_address = absl::GetFlag(FLAGS_advertise_address);
  options.peer_tls_server_name = absl::GetFlag(FLAGS_gitworker_tls_server_name);
  if (options.replica.enabled && options.catalog_address.empty()) {
    return absl::InvalidArgumentError(
        "--membership needs --target_config_source=catalog (the branches shared out are every "
        "GitTarget's the catalog publishes)");
  }
  return options;
}

class App final : public runtime::ServiceApp {
 public:
  absl::Status Setup(runtime::ServiceHost& host) override {
    auto options = OptionsFromFlags();
    if (!options.ok()) return options.status();
    service_ = std::make_unique<GitWorkerService>(host, *std::move(options));
    return service_->Register();
  }

  absl::Status Run(runtime::ServiceHost& /*host*/) override { return service_->Start(); }

  void Stop() override {
    if (service_) service_->Stop();
  }

 private:
  std::unique_ptr<GitWorkerService> service_;
};

std::unique_ptr<runtime::ServiceApp> MakeApp() { return std::make_unique<App>(); }

}  // namespace
}  // namespace reverser::gitworker

int main(int argc, char** argv) {
  return reverser::runtime::RunServiceMain(
      argc, argv,
      {"gitworker",
       "reverser gitworker — per-branch commit windows, manifest writer and compare-and-swap "
       "push.\n\nUsage: gitworker [--work_dir=DIR] [--push_cooldown=5s] [flags]\n\nSeveral "
       "replicas: --membership (--membership_namespace, --replica_id, --advertise_address) "
       "shares the branches by rendezvous over their Leases; a delivery for a branch another "
       "replica owns is answered not_owner."},
      &reverser::gitworker::MakeApp);
}
