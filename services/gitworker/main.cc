// The gitworker service binary: the only writer of Git. Splicers stream resyncs and live events
// (GitWorker.Deliver); per-branch actors commit them in windows and push with compare-and-swap.

#include <memory>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "libs/kube/config.h"
#include "libs/kube/httplib_transport.h"
#include "libs/runtime/log.h"
#include "libs/runtime/service_main.h"
#include "services/gitworker/branch_actor.h"
#include "services/gitworker/delivery_service.h"
#include "services/gitworker/secret_source.h"

ABSL_FLAG(
    std::string, work_dir, "/tmp/reverser-gitworker",
    "Where branch clones live: <work_dir>/<provider ns>/<provider>/<branch>/repos/<url digest>.");
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
ABSL_FLAG(std::string, secrets_source, "files",
          "Where credential and signing Secrets are read: \"files\" (mounted under "
          "--credentials_dir) or \"api\" (GET through the Kubernetes API with --kubeconfig or "
          "the in-cluster service account; a signing key the catalog generates is seen at once).");
ABSL_FLAG(std::string, kubeconfig, "",
          "With --secrets_source=api: a kubeconfig file. Empty: $KUBECONFIG, else the in-cluster "
          "service account, else ~/.kube/config.");
ABSL_FLAG(absl::Duration, signing_key_cache_ttl, absl::Seconds(30),
          "How long a signing key read from its Secret is reused before it is read again (a "
          "rotated key is used within this time).");

namespace reverser::gitworker {
namespace {

class App final : public runtime::ServiceApp {
 public:
  absl::Status Setup(runtime::ServiceHost& host) override {
    const absl::Duration cooldown = absl::GetFlag(FLAGS_push_cooldown);
    if (cooldown < absl::ZeroDuration()) {
      return absl::InvalidArgumentError("--push_cooldown must not be negative");
    }
    const int64_t target_buffer = absl::GetFlag(FLAGS_target_buffer);
    const int64_t max_unaccepted = absl::GetFlag(FLAGS_max_unaccepted);
    if (target_buffer < 1 || max_unaccepted < 1) {
      return absl::InvalidArgumentError("--target_buffer and --max_unaccepted must be at least 1");
    }
    const std::string work_dir = absl::GetFlag(FLAGS_work_dir);
    if (work_dir.empty()) return absl::InvalidArgumentError("--work_dir must be set");

    BranchRegistryOptions registry;
    registry.work_dir = work_dir;
    registry.push_cooldown = cooldown;
    const absl::Duration key_ttl = absl::GetFlag(FLAGS_signing_key_cache_ttl);
    if (key_ttl < absl::ZeroDuration()) {
      return absl::InvalidArgumentError("--signing_key_cache_ttl must not be negative");
    }
    const std::string source = absl::GetFlag(FLAGS_secrets_source);
    SecretReader secrets;
    if (source == "api") {
      auto config = kube::LoadDefaultConfig(absl::GetFlag(FLAGS_kubeconfig));
      if (!config.ok()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "--secrets_source=api: no Kubernetes API configuration: ", config.status().message()));
      }
      auto client = kube::NewHttplibRestClient(*config, "reverser-gitworker/0.1");
      if (!client.ok()) return client.status();
      secrets = ApiSecretReader(*client);
      host.SetDetail("secrets_source", absl::StrCat("api ", config->server));
    } else if (source == "files") {
      if (const std::string dir = absl::GetFlag(FLAGS_credentials_dir); !dir.empty()) {
        secrets = DirectorySecretReader(dir);
        host.SetDetail("secrets_source", absl::StrCat("files ", dir));
      }
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--secrets_source must be files or api, not \"", source, "\""));
    }
    if (secrets) {
      registry.credentials = SecretCredentialsResolver(secrets);
      registry.signing_keys = CachingSigningKeyResolver(secrets, key_ttl);
    }
    registry_ = std::make_unique<BranchRegistry>(host.actors(), registry);

    DeliveryOptions delivery;
    delivery.target_buffer = static_cast<size_t>(target_buffer);
    delivery.max_unaccepted = static_cast<size_t>(max_unaccepted);
    service_ = std::make_unique<GitWorkerService>(host.actors(), registry_.get(), delivery);
    admin_ = std::make_unique<GitWorkerAdminService>(&host, registry_.get());
    host.AddGrpcService(service_.get());
    host.AddGrpcService(admin_.get());
    host.SetDetail("work_dir", work_dir);
    host.SetDetail("push_cooldown", absl::FormatDuration(cooldown));
    host_ = &host;
    return absl::OkStatus();
  }

  void Stop() override {
    // Close open windows and push what is committed before the actor system goes away.
    if (registry_) registry_->StopAll(host_->options().shutdown_grace / 2);
  }

 private:
  runtime::ServiceHost* host_ = nullptr;
  std::unique_ptr<BranchRegistry> registry_;
  std::unique_ptr<GitWorkerService> service_;
  std::unique_ptr<GitWorkerAdminService> admin_;
};

std::unique_ptr<runtime::ServiceApp> MakeApp() { return std::make_unique<App>(); }

}  // namespace
}  // namespace reverser::gitworker

int main(int argc, char** argv) {
  return reverser::runtime::RunServiceMain(
      argc, argv,
      {"gitworker",
       "reverser gitworker — per-branch commit windows, manifest writer and compare-and-swap "
       "push.\n\nUsage: gitworker [--work_dir=DIR] [--push_cooldown=5s] [flags]"},
      &reverser::gitworker::MakeApp);
}
