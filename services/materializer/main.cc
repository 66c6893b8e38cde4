// The materializer service binary: per claimed (type, scope) a Redis stream + checkpoint fed by
// the watch (or, with --intake=audit, by audit bodies and a periodic LIST), and the audit
// webhook that records who made each change.

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "libs/audit/audit_event.h"
#include "libs/core/json_depth.h"
#include "libs/kube/access_review.h"
#include "libs/kube/config.h"
#include "libs/kube/httplib_transport.h"
#include "libs/catalogclient/catalog_flags.h"
#include "libs/redisstore/redis_flags.h"
#include "libs/rules/claim_syntax.h"
#include "libs/runtime/admin_status.h"
#include "libs/runtime/ask_actor.h"
#include "libs/runtime/grpc_security.h"
#include "libs/runtime/log.h"
#include "libs/typeset/policy.h"
#include "libs/runtime/service_main.h"
#include "proto/reverser/v1/materializer.grpc.pb.h"
#include "services/materializer/audit_stream_writer.h"
#include "services/materializer/audit_webhook.h"
#include "services/materializer/claim_registry.h"
#include "libs/catalogclient/stream_follower.h"
#include "proto/reverser/v1/catalog.grpc.pb.h"
#include "services/materializer/redis_fact_sink.h"
#include "services/materializer/supervisor.h"

ABSL_FLAG(std::string, kubeconfig, "", "Path to a kubeconfig; empty: $KUBECONFIG, then in-cluster.");
ABSL_FLAG(std::string, static_claims, "",
          "Instead of the catalog: comma-separated group/version/resource[@namespace] to "
          "materialize (core as version/resource, e.g. v1/configmaps,apps/v1/deployments@team).");
ABSL_FLAG(int64_t, compact_after_entries, 10000,
          "Fold a stream into a new checkpoint once it holds more entries than this.");
ABSL_FLAG(bool, use_watch_list, true, "Use WatchList (sendInitialEvents) when the server serves it.");
ABSL_FLAG(std::string, intake, "watch",
          "Where stream entries come from: watch (one long-lived watch per claim) or audit "
          "(RequestResponse audit bodies from the webhook; the checkpoint is refilled by a "
          "periodic LIST).");
ABSL_FLAG(absl::Duration, audit_intake_relist_interval, absl::Minutes(5),
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
ABSL_FLAG(std::string, audit_tls_cert, "", "Audit webhook server certificate (PEM).");
ABSL_FLAG(std::string, audit_tls_key, "", "Audit webhook server key (PEM).");
ABSL_FLAG(std::string, audit_client_ca, "",
          "CA bundle that signs the API server's client certificate (mTLS, required).");
ABSL_FLAG(std::vector<std::string>, audit_client_names,
          {std::string(reverser::materializer::kDefaultAuditClientName)},
          "Names an audit client certificate may carry (common name, or a DNS/URI subject "
          "alternative name); others signed by --audit_client_ca get 403. \"*\" takes any.");
ABSL_FLAG(bool, audit_insecure, false,
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

class AdminService final
    : public runtime::AdminStatusService<reverser::v1::MaterializerAdmin> {
 public:
  AdminService(runtime::ServiceHost* host, caf::actor* supervisor)
      : AdminStatusService(host), supervisor_(supervisor) {}

  grpc::ServerUnaryReactor* ListMaterializations(
      grpc::CallbackServerContext* context, const reverser::v1::ListMaterializationsRequest*,
      reverser::v1::ListMaterializationsResponse* response) override {
    auto* reactor = context->DefaultReactor();
    runtime::AskActor(
        host()->actors(), *supervisor_, std::chrono::seconds(5),
        [reactor, response](const std::string& serialized) {
          response->ParseFromString(serialized);
          reactor->Finish(grpc::Status::OK);
        },
        [this, reactor](const caf::error& err) { reactor->Finish(Unavailable(err)); },
        list_atom::value);
    return reactor;
  }

  grpc::ServerUnaryReactor* Compact(grpc::CallbackServerContext* context,
                                    const reverser::v1::CompactRequest* request,
                                    reverser::v1::CompactResponse* response) override {
    auto* reactor = context->DefaultReactor();
    // Folding a large checkpoint takes a while; one call may fold every materialization. The
    // handler returns at once: the reply finishes the call.
    runtime::AskActor(
        host()->actors(), *supervisor_, std::chrono::minutes(5),
        [reactor, request, response](const std::string& serialized) {
          response->ParseFromString(serialized);
          if (request->has_claim() && response->results().empty()) {
            reactor->Finish(grpc::Status(
                grpc::StatusCode::NOT_FOUND,
                "this materializer does not own claim " + rules::FormatClaim(request->claim())));
            return;
          }
          reactor->Finish(grpc::Status::OK);
        },
        [this, reactor](const caf::error& err) { reactor->Finish(Unavailable(err)); },
        compact_atom::value, request->SerializeAsString());
    return reactor;
  }

 private:
  grpc::Status Unavailable(const caf::error& err) const {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, host()->actors().render(err));
  }

  caf::actor* supervisor_;
};

// The input limits, checked before anything connects.
absl::Status LimitsFromFlags(int64_t& max_depth, audit::DecodeLimits& limits, size_t& max_body) {
  max_depth = absl::GetFlag(FLAGS_json_max_depth);
  if (max_depth < 1 || max_depth > core::kApiObjectMaxDepth) {
    return absl::InvalidArgumentError(absl::StrCat("--json_max_depth must be within 1..",
                                                   core::kApiObjectMaxDepth,
                                                   " (the API server's own limit)"));
  }
  const int64_t event_bytes = absl::GetFlag(FLAGS_audit_max_event_bytes);
  const int64_t body_bytes = absl::GetFlag(FLAGS_audit_max_body_bytes);
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
absl::Status IntakeFromFlags(TypeMaterializerOptions& base) {
  auto intake = ParseIntake(absl::GetFlag(FLAGS_intake));
  if (!intake.ok()) return intake.status();
  base.intake = *intake;
  base.relist_interval = absl::GetFlag(FLAGS_audit_intake_relist_interval);
  base.state_check_interval = absl::GetFlag(FLAGS_redis_state_check_interval);
  if (base.state_check_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--redis_state_check_interval must be positive");
  }
  base.heal_settle = absl::GetFlag(FLAGS_audit_intake_heal_settle);
  if (base.intake != Intake::kAudit) return absl::OkStatus();
  if (!absl::GetFlag(FLAGS_audit_webhook)) {
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

class App final : public runtime::ServiceApp {
 public:
  absl::Status Setup(runtime::ServiceHost& host) override {
    TypeMaterializerOptions base;
    if (absl::Status s = IntakeFromFlags(base); !s.ok()) return s;
    int64_t max_depth = 0;
    AuditIntakeOptions intake_options;
    size_t max_body_bytes = 0;
    if (absl::Status s = LimitsFromFlags(max_depth, intake_options.limits, max_body_bytes);
        !s.ok()) {
      return s;
    }
    auto settings = redisstore::RedisSettingsFromFlags();
    if (!settings.ok()) return settings.status();
    const redisstore::RedisOptions& redis = settings->options;
    const redisstore::KeyPrefix& prefix = settings->prefix;
    std::string static_claims = absl::GetFlag(FLAGS_static_claims);
    auto catalog_address = catalogclient::CatalogAddressOrStatic("static_claims", static_claims);
    if (!catalog_address.ok()) return catalog_address.status();
    const std::string& catalog = *catalog_address;
    auto cluster = kube::LoadDefaultConfig(absl::GetFlag(FLAGS_kubeconfig));
    if (!cluster.ok()) return cluster.status();
    kube::RestClientOptions client_options;
    client_options.max_object_depth = max_depth;
    auto kube_client =
        kube::NewHttplibRestClient(*cluster, "reverser-materializer/0.1", client_options);
    if (!kube_client.ok()) return kube_client.status();
    client_ = *kube_client;
    if (host.ReviewsOperators()) {
      host.SetAdminReviewer(std::make_shared<kube::KubeAccessReviewer>(client_));
    }

    SupervisorOptions options;
    auto metrics = &host.metrics();
    auto client = client_;
    base.redis = redis;
    base.prefix = prefix;
    body_cipher_ = settings->body_cipher;
    base.body_cipher = body_cipher_.get();
    base.compact_after_entries = absl::GetFlag(FLAGS_compact_after_entries);
    base.use_watch_list = absl::GetFlag(FLAGS_use_watch_list);
    host.SetDetail("intake", absl::GetFlag(FLAGS_intake));
    base.relist_requests = &claims_registry_;
    options.make_worker = [client, base, metrics](const core::GroupVersionResource& gvr,
                                                  const core::WatchScope& scope, bool sensitive) {
      TypeMaterializerOptions o = base;
      o.gvr = gvr;
      o.scope = scope;
      o.sensitive = sensitive;
      return std::make_unique<TypeMaterializer>(client, o, metrics);
    };
    runtime::ServiceHost* h = &host;
    options.on_applied = [h](size_t workers) {
      h->SetComponent("claims", true, absl::StrCat(workers, " materialization(s)"));
    };
    options.registry = &claims_registry_;
    supervisor_ = SpawnSupervisor(host.actors(), std::move(options));
    host.SetComponent("claims", false, "waiting for the first claim set");

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
      caf::anon_send(supervisor_, claims_atom::value, set->SerializeAsString());
    } else {
      caf::actor supervisor = supervisor_;
      std::shared_ptr<reverser::v1::Catalog::Stub> stub = reverser::v1::Catalog::NewStub(
          grpc::CreateChannel(catalog, runtime::MeshChannelCredentials(host.options().grpc_security)));
      std::string subscriber = host.options().instance;
      claims_ = std::make_unique<catalogclient::StreamFollower<reverser::v1::ClaimSet>>(
          "claims",
          [stub, subscriber](grpc::ClientContext* context, uint64_t known_generation) {
            reverser::v1::WatchClaimsRequest request;
            request.set_known_generation(known_generation);
            request.set_subscriber(subscriber);
            return stub->WatchClaims(context, request);
          },
          [supervisor](const reverser::v1::ClaimSet& set) {
            caf::anon_send(supervisor, claims_atom::value, set.SerializeAsString());
          });
    }

    if (absl::GetFlag(FLAGS_audit_webhook)) {
      fact_sink_ = std::make_unique<RedisFactSink>(redis, prefix, absl::GetFlag(FLAGS_author_fact_ttl));
      if (base.intake == Intake::kAudit) {
        stream_writer_ = std::make_unique<AuditStreamWriter>(redis, prefix, &claims_registry_,
                                                             &host.metrics(), body_cipher_.get());
      }
      intake_options.fact_index_size_interval = absl::GetFlag(FLAGS_fact_index_size_interval);
      if (intake_options.fact_index_size_interval < absl::ZeroDuration()) {
        return absl::InvalidArgumentError("--fact_index_size_interval is negative");
      }
      intake_ = std::make_unique<AuditIntake>(fact_sink_.get(), &host.metrics(),
                                              stream_writer_.get(), intake_options);
      AuditWebhookOptions audit;
      audit.listen_address = host.options().listen_address;
      audit.port = absl::GetFlag(FLAGS_audit_port);
      audit.max_body_bytes = max_body_bytes;
      audit.tls = {absl::GetFlag(FLAGS_audit_tls_cert), absl::GetFlag(FLAGS_audit_tls_key),
                   absl::GetFlag(FLAGS_audit_client_ca)};
      audit.insecure = absl::GetFlag(FLAGS_audit_insecure);
      audit.allowed_client_names = absl::GetFlag(FLAGS_audit_client_names);
      webhook_ = std::make_unique<AuditWebhookServer>(audit, intake_.get());
      // Ready means the API server can deliver: the claims may apply before Run() listens.
      host.SetComponent("audit_webhook", false, "not listening yet");
    }

    admin_ = std::make_unique<AdminService>(&host, &supervisor_);
    host.AddGrpcService(admin_.get());
    return absl::OkStatus();
  }

  absl::Status Run(runtime::ServiceHost& host) override {
    if (webhook_) {
      auto port = webhook_->Start();
      if (!port.ok()) return port.status();
      host.SetDetail("audit_port", std::to_string(*port));
      host.SetComponent("audit_webhook", true, absl::StrCat("listening on port ", *port));
      runtime::LogInfo("audit webhook listening",
                       {{"audit_port", *port}, {"tls", !absl::GetFlag(FLAGS_audit_insecure)}});
    }
    if (claims_) claims_->Start();
    return absl::OkStatus();
  }

  void Stop() override {
    if (claims_) claims_->Stop();
    if (webhook_) webhook_->Stop();
    if (supervisor_) caf::anon_send_exit(supervisor_, caf::exit_reason::user_shutdown);
  }

 private:
  std::shared_ptr<kube::RestClient> client_;
  std::shared_ptr<const redisstore::BodyCipher> body_cipher_;
  ClaimRegistry claims_registry_;
  caf::actor supervisor_;
  std::unique_ptr<catalogclient::StreamFollower<reverser::v1::ClaimSet>> claims_;
  std::unique_ptr<RedisFactSink> fact_sink_;
  std::unique_ptr<AuditStreamWriter> stream_writer_;
  std::unique_ptr<AuditIntake> intake_;
  std::unique_ptr<AuditWebhookServer> webhook_;
  std::unique_ptr<AdminService> admin_;
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
