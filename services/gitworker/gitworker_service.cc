#include "services/gitworker/gitworker_service.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "libs/kube/access_review.h"
#include "libs/kube/config.h"
#include "libs/kube/httplib_transport.h"
#include "libs/runtime/caf_thread.h"
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
  auto lock = WorkDirLock::Acquire(options_.work_dir);
  if (!lock.ok()) return lock.status();
  work_dir_lock_ = std::move(*lock);

  BranchRegistryOptions registry;
  registry.work_dir = options_.work_dir;
  registry.stale_lock_cutoff = work_dir_lock_->since();
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
  if (options_.replica.enabled) {
    if (options_.catalog_address.empty()) {
      return absl::InvalidArgumentError(
          "--membership needs the catalog's target configs (--target_config_source=catalog): "
          "the branches shared out are those of every GitTarget it publishes");
    }
    kube_client_ = options_.kube_client;
    if (!kube_client_) {
      auto config = kube::LoadDefaultConfig(options_.kubeconfig);
      if (!config.ok()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "--membership: no Kubernetes API configuration: ", config.status().message()));
      }
      auto client = kube::NewHttplibRestClient(*config, "reverser-gitworker/0.1");
      if (!client.ok()) return client.status();
      kube_client_ = *client;
    }
    std::atomic<membership::Replica*>* joined = &joined_;
    ownership_ = std::make_unique<BranchOwnership>([joined] {
      membership::Replica* replica = joined->load();
      return replica != nullptr && replica->Held();
    });
    BranchOwnership* ownership = ownership_.get();
    registry.may_write = [ownership](const BranchKey& key) {
      return ownership->MayWrite(UnitOf(key));
    };
    registry.begin_write = [ownership](const BranchKey& key) {
      return ownership->BeginWrite(UnitOf(key));
    };
  }
  registry_ = std::make_unique<BranchRegistry>(host_.actors(), registry);
  if (ownership_) {
    OwnershipActorOptions ownership;
    ownership.me = options_.replica.replica_id;
    ownership.ownership = ownership_.get();
    ownership.held = [joined = &joined_] {
      membership::Replica* replica = joined->load();
      return replica != nullptr && replica->Held();
    };
    ownership.tick = std::max(options_.replica.timing.renew_period / 2, absl::Milliseconds(100));
    BranchRegistry* branches = registry_.get();
    ownership.on_lost = [branches](const std::vector<std::string>& lost) {
      branches->Abandon(lost);
    };
    runtime::ServiceHost* host = &host_;
    ownership.on_published = [host](const OwnershipSnapshot& snapshot) {
      host->SetDetail("owned_branches",
                      absl::StrCat(snapshot.owned.size(), snapshot.owned.empty() ? "" : ": ",
                                   absl::StrJoin(snapshot.owned, ", ")));
    };
    ownership_actor_ = SpawnOwnershipActor(host_.actors(), std::move(ownership));
    host_.SetDetail("replica", options_.replica.replica_id);
  }

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
  delivery.ownership = ownership_.get();
  grpc_ = std::make_unique<GitWorkerGrpcService>(host_.actors(), registry_.get(), delivery);
  PeerListing peers;
  if (ownership_) {
    peers.ownership = ownership_.get();
    peers.me = options_.replica.replica_id;
    peers.members = [joined = &joined_] {
      membership::Replica* replica = joined->load();
      return replica != nullptr ? replica->Current() : membership::Membership{};
    };
    peers.credentials = runtime::MeshChannelCredentials(host_.options().grpc_security);
    peers.tls_server_name = options_.peer_tls_server_name;
  }
  admin_ = std::make_unique<GitWorkerAdminGrpcService>(&host_, registry_.get(), std::move(peers));
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
  std::optional<OwnershipActor> ownership = ownership_actor_;
  const std::string subscriber = host_.options().instance;
  tables_ = std::make_unique<catalogclient::StreamFollower<reverser::v1::TableUpdate>>(
      "tables",
      [stub, subscriber](grpc::ClientContext* context, uint64_t known_generation) {
        reverser::v1::WatchTablesRequest request;
        request.set_known_generation(known_generation);
        request.set_subscriber(subscriber);
        return stub->WatchTables(context, request);
      },
      [book, host, ownership](const reverser::v1::TableUpdate& update) {
        book->Apply(update);
        if (ownership) {
          // The unit set: every GitTarget's branch, owned or not (the splicer routes by it).
          std::vector<std::string> units;
          for (const auto& destination : book->Destinations()) {
            units.push_back(UnitOf(destination));
          }
          caf::anon_send(*ownership, units_atom::value, std::move(units));
        }
        host->SetComponent("catalog", true, absl::StrCat(book->size(), " target config(s)"),
                           /*gating=*/false);
      });
}

absl::Status GitWorkerService::Start() {
  if (ownership_actor_) {
    std::string address = options_.advertise_address;
    if (address.empty()) {
      std::string listen = host_.options().listen_address;
      if (listen == "0.0.0.0" || listen == "::" || listen.empty())
        listen = host_.options().instance;
      address = absl::StrCat(listen, ":", host_.grpc_port());
    }
    OwnershipActor actor = *ownership_actor_;
    auto replica = membership::Replica::Join(
        *kube_client_, options_.replica.Identity("gitworker", address), options_.replica.timing,
        *options_.clock,
        [actor](const membership::Membership& membership) {
          caf::anon_send(actor, members_atom::value, membership);
        },
        options_.membership_reflector);
    if (!replica.ok()) return replica.status();
    replica_ = std::move(*replica);
    joined_.store(replica_.get());
    host_.SetDetail("advertise_address", address);
    runtime::LogInfo("joined the gitworker replicas",
                     {{"replica", replica_->id()}, {"address", address}});
  }
  if (tables_) tables_->Start();
  return absl::OkStatus();
}

void GitWorkerService::Stop() {
  if (tables_) tables_->Stop();
  if (ownership_actor_) {
    // Stop accepting: deliveries are answered not_owner (naming the owners without this
    // replica) while what is owned is finished below.
    runtime::CafThreadLoggerRelease release_logger;  // after `self` (caf_thread.h)
    caf::scoped_actor self{host_.actors()};
    self->request(*ownership_actor_, std::chrono::seconds(2), leave_atom::value)
        .receive([](bool) {},
                 [&](caf::error& err) {
                   runtime::LogWarning("ownership actor did not answer the leave",
                                       {{"error", host_.actors().render(err)}});
                 });
  }
  // Close open windows and push what is committed before the actor system goes away.
  if (registry_) registry_->StopAll(host_.options().shutdown_grace / 2);
  if (replica_ && !left_) {
    left_ = true;
    if (absl::Status s = replica_->Leave(); !s.ok()) {
      runtime::LogWarning("leaving the gitworker replicas failed (the Lease expires instead)",
                          {{"error", s.ToString()}});
    } else {
      runtime::LogInfo("left the gitworker replicas", {{"replica", replica_->id()}});
    }
  }
  if (ownership_actor_) {
    caf::anon_send_exit(*ownership_actor_, caf::exit_reason::user_shutdown);
    ownership_actor_.reset();
  }
}

}  // namespace reverser::gitworker
