#include "services/gitworker/gitworker_service.h"

#include "absl/strings/str_cat.h"
#include "libs/kube/access_review.h"
#include "libs/kube/config.h"
#include "libs/kube/httplib_transport.h"
#include "libs/runtime/grpc_security.h"
#include "libs/runtime/log.h"
#include "proto/reverser/v1/catalog.grpc.pb.h"
#include "services/gitworker/secret_source.h"
#include "services/gitworker/work_dir.h"

namespace reverser::gitworker {

GitWorkerService::GitWorkerService(runtime::ServiceHost& host, GitWorkerServiceOptions options)
    : host_(host), options_(std::move(options)) {}

GitWorkerService::~GitWorkerService() = default;

absl::Status GitWorkerService::Register() {
  if (absl::Status s = PreparePrivateWorkDir(options_.work_dir); !s.ok()) return s;

  BranchRegistryOptions registry;
  registry.work_dir = options_.work_dir;
  registry.push_cooldown = options_.push_cooldown;
  registry.limits = options_.limits;
  SecretReader secrets;
  if (options_.secrets_source == GitWorkerServiceOptions::SecretsSource::kApi) {
    auto config = kube::LoadDefaultConfig(options_.kubeconfig);
    if (!config.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--secrets_source=api: no Kubernetes API configuration: ", config.status().message()));
    }
    auto client = kube::NewHttplibRestClient(*config, "reverser-gitworker/0.1");
    if (!client.ok()) return client.status();
    secrets = ApiSecretReader(*client);
    if (host_.ReviewsOperators()) {
      host_.SetAdminReviewer(std::make_shared<kube::KubeAccessReviewer>(*client));
    }
    host_.SetDetail("secrets_source", absl::StrCat("api ", config->server));
  } else {
    if (!options_.credentials_dir.empty()) {
      secrets = DirectorySecretReader(options_.credentials_dir);
      host_.SetDetail("secrets_source", absl::StrCat("files ", options_.credentials_dir));
    }
    if (host_.ReviewsOperators()) {
      auto reviewer = kube::NewAccessReviewer(options_.kubeconfig, "reverser-gitworker/0.1");
      if (!reviewer.ok()) return reviewer.status();
      host_.SetAdminReviewer(*reviewer);
    }
  }
  if (secrets) {
    registry.credentials = SecretCredentialsResolver(secrets);
    registry.signing_keys = CachingSigningKeyResolver(secrets, options_.signing_key_cache_ttl);
  }
  registry_ = std::make_unique<BranchRegistry>(host_.actors(), registry);

  DeliveryOptions delivery;
  if (!options_.catalog_address.empty()) {
    configs_ = std::make_unique<TargetConfigBook>();
    FollowCatalog();
    delivery.trusted_configs = configs_.get();
    host_.SetDetail("target_config_source", "catalog");
  } else {
    runtime::LogWarning(
        "target configs are taken from deliveries (--target_config_source=delivery): any "
        "splicer may name a remote and a Secret; local development only");
    host_.SetDetail("target_config_source", "delivery");
  }
  delivery.target_buffer = options_.target_buffer;
  delivery.max_unaccepted = options_.max_unaccepted;
  delivery.limits = options_.limits;
  grpc_ = std::make_unique<GitWorkerGrpcService>(host_.actors(), registry_.get(), delivery);
  admin_ = std::make_unique<GitWorkerAdminGrpcService>(&host_, registry_.get());
  // A resync carries a target's whole desired set in one message.
  host_.SetMaxReceiveMessageBytes(512 << 20);
  host_.AddGrpcService(grpc_.get());
  host_.AddGrpcService(admin_.get());
  host_.SetDetail("work_dir", options_.work_dir);
  host_.SetDetail("push_cooldown", absl::FormatDuration(options_.push_cooldown));
  host_.SetDetail("max_git_file_bytes", std::to_string(options_.limits.max_file_bytes));
  return absl::OkStatus();
}

void GitWorkerService::FollowCatalog() {
  auto stub = std::shared_ptr<reverser::v1::Catalog::Stub>(reverser::v1::Catalog::NewStub(
      grpc::CreateChannel(options_.catalog_address,
                          runtime::MeshChannelCredentials(host_.options().grpc_security))));
  host_.SetComponent("catalog", false, "waiting for the catalog's target configs",
                     /*gating=*/false);
  TargetConfigBook* book = configs_.get();
  runtime::ServiceHost* host = &host_;
  const std::string subscriber = host_.options().instance;
  tables_ = std::make_unique<catalogclient::StreamFollower<reverser::v1::TableUpdate>>(
      "tables",
      [stub, subscriber](grpc::ClientContext* context, uint64_t known_generation) {
        reverser::v1::WatchTablesRequest request;
        request.set_known_generation(known_generation);
        request.set_subscriber(subscriber);
        return stub->WatchTables(context, request);
      },
      [book, host](const reverser::v1::TableUpdate& update) {
        book->Apply(update);
        host->SetComponent("catalog", true, absl::StrCat(book->size(), " target config(s)"),
                           /*gating=*/false);
      });
}

void GitWorkerService::Start() {
  if (tables_) tables_->Start();
}

void GitWorkerService::Stop() {
  if (tables_) tables_->Stop();
  // Close open windows and push what is committed before the actor system goes away.
  if (registry_) registry_->StopAll(host_.options().shutdown_grace / 2);
}

}  // namespace reverser::gitworker
