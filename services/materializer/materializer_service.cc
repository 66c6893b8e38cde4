#include "services/materializer/materializer_service.h"

#include <unistd.h>

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "libs/catalogclient/catalog_flags.h"
#include "libs/core/clock.h"
#include "libs/core/status.h"
#include "libs/kube/access_review.h"
#include "libs/kube/config.h"
#include "libs/kube/httplib_transport.h"
#include "libs/redisstore/redis_flags.h"
#include "libs/rules/claim_syntax.h"
#include "libs/runtime/caf_thread.h"
#include "libs/runtime/grpc_security.h"
#include "libs/runtime/log.h"
#include "libs/typeset/policy.h"
#include "proto/reverser/v1/catalog.grpc.pb.h"
#include "services/materializer/supervisor.h"

namespace reverser::materializer {
namespace {

// The input limits, checked before anything connects.
absl::Status CheckLimits(const MaterializerServiceOptions& options, int64_t& max_depth,
                         audit::DecodeLimits& limits, size_t& max_body) {
  max_depth = options.json_max_depth;
  if (max_depth < 1 || max_depth > core::kApiObjectMaxDepth) {
    return absl::InvalidArgumentError(absl::StrCat("--json_max_depth must be within 1..",
                                                   core::kApiObjectMaxDepth,
                                                   " (the API server's own limit)"));
  }
  for (const auto& [flag, value] : {std::pair{"--audit_read_timeout", options.audit_read_timeout},
                                    {"--audit_write_timeout", options.audit_write_timeout},
                                    {"--audit_idle_timeout", options.audit_idle_timeout}}) {
    if (value < absl::Seconds(1)) {
      return absl::InvalidArgumentError(absl::StrCat(flag, " must be at least 1s"));
    }
  }
  const int64_t event_bytes = options.audit_max_event_bytes;
  const int64_t body_bytes = options.audit_max_body_bytes;
  if (event_bytes < 1024) {
    return absl::InvalidArgumentError("--audit_max_event_bytes must be at least 1024");
  }
  if (body_bytes < event_bytes) {
    return absl::InvalidArgumentError(
        "--audit_max_body_bytes must be at least --audit_max_event_bytes");
  }
  limits.max_object_depth = max_depth;
  limits.max_event_bytes = static_cast<size_t>(event_bytes);
  max_body = static_cast<size_t>(body_bytes);
  return absl::OkStatus();
}

// --intake and its settings, checked before anything connects.
absl::Status CheckIntake(const MaterializerServiceOptions& options, TypeMaterializerOptions& base) {
  auto intake = ParseIntake(options.intake);
  if (!intake.ok()) return intake.status();
  base.intake = *intake;
  base.relist_interval = options.audit_intake_relist_interval;
  base.state_check_interval = options.redis_state_check_interval;
  if (base.state_check_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--redis_state_check_interval must be positive");
  }
  base.heal_settle = options.audit_intake_heal_settle;
  if (base.intake != Intake::kAudit) return absl::OkStatus();
  if (!options.audit_webhook) {
    return absl::InvalidArgumentError(
        "--intake=audit needs the audit webhook (--audit_webhook=true): it is the only source "
        "of stream entries");
  }
  if (base.relist_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--audit_intake_relist_interval must be positive");
  }
  if (base.heal_settle < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--audit_intake_heal_settle must not be negative");
  }
  return absl::OkStatus();
}

// --membership with an intake that is not a watch: the audit intake appends every claimed
// stream from the webhook, whichever replica owns the unit.
absl::Status CheckMembership(const membership::ReplicaSettings& replica, Intake intake) {
  if (!replica.enabled || intake == Intake::kWatch) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "--membership shares the (type, scope) materializations out among replicas, but "
      "--intake=audit appends to every claimed stream from the audit webhook, whether this "
      "replica owns it or not: use --intake=watch with --membership (or run one replica "
      "without --membership)");
}

// The address this replica advertises in its Lease: $POD_IP (else the host name) and the gRPC
// port.
std::string ReplicaAddress(int grpc_port) {
  std::string host;
  if (const char* ip = std::getenv("POD_IP"); ip != nullptr && *ip != '\0') {
    host = ip;
  } else {
    char buffer[256] = {};
    host = gethostname(buffer, sizeof(buffer) - 1) == 0 ? buffer : "localhost";
  }
  return absl::StrCat(host, ":", grpc_port);
}

}  // namespace

bool MaterializerService::ReplicaGate::Held() const {
  std::lock_guard lock(mu);
  return replica != nullptr && replica->Held();
}

MaterializerService::MaterializerService(runtime::ServiceHost& host,
                                         MaterializerServiceOptions options)
    : host_(host), options_(std::move(options)) {}

MaterializerService::~MaterializerService() = default;

absl::Status MaterializerService::Setup() {
  TypeMaterializerOptions base;
  if (absl::Status s = CheckIntake(options_, base); !s.ok()) return s;
  if (options_.admission_attribution && !options_.admission_webhook) {
    return absl::InvalidArgumentError(
        "--admission_attribution records facts from the admission webhook: it needs "
        "--admission_webhook");
  }
  int64_t max_depth = 0;
  AuditIntakeOptions intake_options;
  size_t max_body_bytes = 0;
  if (absl::Status s = CheckLimits(options_, max_depth, intake_options.limits, max_body_bytes);
      !s.ok()) {
    return s;
  }
  auto replica = membership::ReplicaSettingsFromFlags();
  if (!replica.ok()) return replica.status();
  replica_settings_ = *replica;
  if (absl::Status s = CheckMembership(replica_settings_, base.intake); !s.ok()) return s;
  auto settings = redisstore::RedisSettingsFromFlags();
  if (!settings.ok()) return settings.status();
  const redisstore::RedisOptions& redis = settings->options;
  const redisstore::KeyPrefix& prefix = settings->prefix;
  const std::string& static_claims = options_.static_claims;
  auto catalog_address = catalogclient::CatalogAddressOrStatic("static_claims", static_claims);
  if (!catalog_address.ok()) return catalog_address.status();
  const std::string& catalog = *catalog_address;
  auto cluster = kube::LoadDefaultConfig(options_.kubeconfig);
  if (!cluster.ok()) return cluster.status();
  kube::RestClientOptions client_options;
  client_options.max_object_depth = max_depth;
  auto kube_client =
      kube::NewHttplibRestClient(*cluster, "reverser-materializer/0.1", client_options);
  if (!kube_client.ok()) return kube_client.status();
  client_ = *kube_client;
  if (host_.ReviewsOperators()) {
    host_.SetAdminReviewer(std::make_shared<kube::KubeAccessReviewer>(client_));
  }

  SupervisorOptions supervisor;
  auto metrics = &host_.metrics();
  auto client = client_;
  base.redis = redis;
  base.prefix = prefix;
  body_cipher_ = settings->body_cipher;
  base.body_cipher = body_cipher_.get();
  base.compact_after_entries = options_.compact_after_entries;
  base.use_watch_list = options_.use_watch_list;
  host_.SetDetail("intake", options_.intake);
  base.relist_requests = &claims_registry_;
  supervisor.make_worker = [client, base, metrics](const core::GroupVersionResource& gvr,
                                                   const core::WatchScope& scope, bool sensitive) {
    TypeMaterializerOptions o = base;
    o.gvr = gvr;
    o.scope = scope;
    o.sensitive = sensitive;
    return std::make_unique<TypeMaterializer>(client, o, metrics);
  };
  if (replica_settings_.enabled) {
    SupervisorMembership m;
    m.replica_id = replica_settings_.replica_id;
    std::shared_ptr<ReplicaGate> gate = replica_gate_;
    m.held = [gate] { return gate->Held(); };
    m.make_worker = [client, base, metrics](const core::GroupVersionResource& gvr,
                                            const core::WatchScope& scope, bool sensitive,
                                            const WorkerOwnership& ownership) {
      TypeMaterializerOptions o = base;
      o.gvr = gvr;
      o.scope = scope;
      o.sensitive = sensitive;
      o.fence = ownership.fence;
      o.may_write = ownership.may_write;
      o.on_fenced = ownership.on_fenced;
      return std::make_unique<TypeMaterializer>(client, o, metrics);
    };
    m.redis = redis;
    m.prefix = prefix;
    m.metrics = metrics;
    supervisor.membership = std::move(m);
    host_.SetDetail("replica_id", replica_settings_.replica_id);
  }
  runtime::ServiceHost* h = &host_;
  supervisor.on_applied = [h](size_t workers) {
    h->SetComponent("claims", true, absl::StrCat(workers, " materialization(s)"));
  };
  supervisor.registry = &claims_registry_;
  supervisor_ = SpawnSupervisor(host_.actors(), std::move(supervisor));
  host_.SetComponent("claims", false, "waiting for the first claim set");

  if (!static_claims.empty()) {
    auto set = rules::ParseStaticClaims(static_claims);
    if (!set.ok()) return set.status();
    // Without a catalog, the catalog's default rule decides sensitivity (core secrets):
    // their bodies are sealed before Redis like any the catalog marks.
    const typeset::SensitivePolicy sensitive;
    for (reverser::v1::Claim& claim : *set->mutable_claims()) {
      const auto& gvr = claim.type().gvr();
      claim.set_sensitive(sensitive.IsSensitive(gvr.group(), gvr.resource()));
    }
    caf::anon_send(supervisor_, claims_atom::value, *set);
  } else {
    // Weak, like the admin service's: the follower outlives the actor system's shutdown.
    auto target = caf::actor_cast<caf::weak_actor_ptr>(supervisor_);
    std::shared_ptr<reverser::v1::Catalog::Stub> stub =
        reverser::v1::Catalog::NewStub(grpc::CreateChannel(
            catalog, runtime::MeshChannelCredentials(host_.options().grpc_security)));
    std::string subscriber = host_.options().instance;
    claims_ = std::make_unique<catalogclient::StreamFollower<reverser::v1::ClaimSet>>(
        "claims",
        [stub, subscriber](grpc::ClientContext* context, uint64_t known_generation) {
          reverser::v1::WatchClaimsRequest request;
          request.set_known_generation(known_generation);
          request.set_subscriber(subscriber);
          return stub->WatchClaims(context, request);
        },
        [target](const reverser::v1::ClaimSet& set) {
          if (auto supervisor = caf::actor_cast<SupervisorActor>(target)) {
            caf::anon_send(supervisor, claims_atom::value, set);
          }
        });
  }

  if (options_.audit_webhook || options_.admission_webhook) {
    fact_sink_ = std::make_unique<RedisFactSink>(redis, prefix, options_.author_fact_ttl);
  }
  if (options_.admission_webhook) {
    reviewer_ = std::make_unique<AdmissionReviewer>(
        fact_sink_.get(), &core::Clock::Real(), &host_.metrics(),
        options_.admission_attribution ? fact_sink_.get() : nullptr);
    AdmissionWebhookOptions admission;
    admission.listen_address = host_.options().listen_address;
    admission.port = options_.admission_port;
    admission.tls = {options_.admission_tls_cert, options_.admission_tls_key, ""};
    admission.insecure = options_.admission_insecure;
    admission_ = std::make_unique<AdmissionWebhookServer>(admission, reviewer_.get());
    host_.SetComponent("admission_webhook", false, "not listening yet");
  }
  if (options_.audit_webhook) {
    if (base.intake == Intake::kAudit) {
      stream_writer_ = std::make_unique<AuditStreamWriter>(redis, prefix, &claims_registry_,
                                                           &host_.metrics(), body_cipher_.get());
    }
    intake_options.fact_index_size_interval = options_.fact_index_size_interval;
    if (intake_options.fact_index_size_interval < absl::ZeroDuration()) {
      return absl::InvalidArgumentError("--fact_index_size_interval is negative");
    }
    intake_ = std::make_unique<AuditIntake>(fact_sink_.get(), &host_.metrics(),
                                            stream_writer_.get(), intake_options);
    AuditWebhookOptions audit;
    audit.listen_address = host_.options().listen_address;
    audit.port = options_.audit_port;
    audit.max_body_bytes = max_body_bytes;
    audit.tls = {options_.audit_tls_cert, options_.audit_tls_key, options_.audit_client_ca};
    audit.insecure = options_.audit_insecure;
    audit.allowed_client_names = options_.audit_client_names;
    audit.read_timeout = options_.audit_read_timeout;
    audit.write_timeout = options_.audit_write_timeout;
    audit.idle_timeout = options_.audit_idle_timeout;
    webhook_ = std::make_unique<AuditWebhookServer>(audit, intake_.get());
    // Ready means the API server can deliver: the claims may apply before Start() listens.
    host_.SetComponent("audit_webhook", false, "not listening yet");
  }

  admin_ = std::make_unique<MaterializerAdminGrpcService>(&host_, supervisor_);
  host_.AddGrpcService(admin_.get());
  return absl::OkStatus();
}

absl::Status MaterializerService::Start() {
  if (webhook_) {
    auto port = webhook_->Start();
    if (!port.ok()) return port.status();
    host_.SetDetail("audit_port", std::to_string(*port));
    host_.SetComponent("audit_webhook", true, absl::StrCat("listening on port ", *port));
    runtime::LogInfo("audit webhook listening",
                     {{"audit_port", *port}, {"tls", !options_.audit_insecure}});
  }
  if (admission_) {
    auto port = admission_->Start();
    if (!port.ok()) return port.status();
    host_.SetDetail("admission_port", std::to_string(*port));
    host_.SetComponent("admission_webhook", true, absl::StrCat("listening on port ", *port));
    runtime::LogInfo("admission webhook listening",
                     {{"admission_port", *port}, {"tls", !options_.admission_insecure}});
  }
  if (replica_settings_.enabled) {
    // Joined after the host listens (the Lease carries the gRPC address). Until the view is
    // synced and shows this replica, the supervisor owns nothing and no claim runs.
    auto target = caf::actor_cast<caf::weak_actor_ptr>(supervisor_);
    auto joined = membership::Replica::Join(
        *client_, replica_settings_.Identity("materializer", ReplicaAddress(host_.grpc_port())),
        replica_settings_.timing, core::Clock::Real(),
        [target](const membership::Membership& members) {
          if (auto supervisor = caf::actor_cast<SupervisorActor>(target)) {
            caf::anon_send(supervisor, membership_atom::value, members);
          }
        });
    if (!joined.ok()) return core::Annotate(joined.status(), "--membership: joining");
    replica_ = std::move(*joined);
    {
      std::lock_guard lock(replica_gate_->mu);
      replica_gate_->replica = replica_.get();
    }
    runtime::LogInfo("joined as a replica", {{"service", "materializer"},
                                             {"replica_id", replica_settings_.replica_id},
                                             {"namespace", replica_settings_.namespace_}});
  }
  if (claims_) claims_->Start();
  return absl::OkStatus();
}

void MaterializerService::Stop() {
  if (claims_) claims_->Stop();
  if (webhook_) webhook_->Stop();
  if (admission_) admission_->Stop();
  if (replica_) {
    // Units first (every worker stopped, nothing written after this), then the Lease.
    if (supervisor_) {
      runtime::CafThreadLoggerRelease release_logger;  // after `self` (caf_thread.h)
      caf::scoped_actor self{host_.actors()};
      self->send_exit(supervisor_, caf::exit_reason::user_shutdown);
      self->wait_for(supervisor_);
    }
    {
      std::lock_guard lock(replica_gate_->mu);
      replica_gate_->replica = nullptr;
    }
    if (absl::Status left = replica_->Leave(); !left.ok()) {
      runtime::LogWarning(
          "leaving failed (the others count this replica out when its Lease "
          "expires)",
          {{"error", left.ToString()}});
    } else {
      runtime::LogInfo("left", {{"replica_id", replica_settings_.replica_id}});
    }
    replica_.reset();
  }
  if (supervisor_) caf::anon_send_exit(supervisor_, caf::exit_reason::user_shutdown);
  // The last strong handle: the supervisor's thread ends once the actor is gone.
  supervisor_ = nullptr;
}

}  // namespace reverser::materializer
