// The splicer service binary: per (GitTarget, type, scope) the splice of the Redis
// materialization into a desired set, then live events, delivered to the gitworker and
// acknowledged only once pushed.

#include <fstream>
#include <sstream>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/util/json_util.h"
#include "libs/catalogclient/catalog_flags.h"
#include "libs/kube/access_review.h"
#include "libs/catalogclient/stream_follower.h"
#include "libs/redisstore/author_fact_store.h"
#include "libs/redisstore/redis_flags.h"
#include "libs/runtime/admin_status.h"
#include "libs/runtime/grpc_security.h"
#include "libs/runtime/log.h"
#include "libs/runtime/service_main.h"
#include "proto/reverser/v1/catalog.grpc.pb.h"
#include "proto/reverser/v1/splicer.grpc.pb.h"
#include "services/splicer/delivery_client.h"
#include "services/splicer/target_manager.h"

ABSL_FLAG(std::string, targets_file, "",
          "Instead of the catalog: a JSON reverser.v1.TableUpdate with the targets to serve.");
ABSL_FLAG(std::string, kubeconfig, "",
          "A kubeconfig for reviewing operators' tokens (--admin_auth=kubernetes). Empty: "
          "$KUBECONFIG, else the in-cluster service account.");
ABSL_FLAG(std::string, gitworker_address, "127.0.0.1:9090", "gRPC address of the gitworker.");
ABSL_FLAG(bool, attribution, true, "Resolve authors from the audit facts in Redis.");
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

class AdminService final : public runtime::AdminStatusService<reverser::v1::SplicerAdmin> {
 public:
  AdminService(runtime::ServiceHost* host, TargetManager* manager)
      : AdminStatusService(host), manager_(manager) {}

  grpc::ServerUnaryReactor* ListStreams(grpc::CallbackServerContext* context,
                                        const reverser::v1::ListStreamsRequest* request,
                                        reverser::v1::ListStreamsResponse* response) override {
    for (auto& summary : manager_->Summaries()) {
      if (!request->target().uid().empty() && summary.target().uid() != request->target().uid()) {
        continue;
      }
      *response->add_summaries() = std::move(summary);
    }
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  // Asks the matching streams to splice again; they send their resyncs on their own threads.
  grpc::ServerUnaryReactor* Resplice(grpc::CallbackServerContext* context,
                                     const reverser::v1::RespliceRequest* request,
                                     reverser::v1::RespliceResponse* response) override {
    auto* reactor = context->DefaultReactor();
    const auto& target = request->target();
    if (target.uid().empty() && (target.namespace_().empty() || target.name().empty())) {
      reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                   "target needs a uid or a namespace and name"));
      return reactor;
    }
    const bool has_claim =
        request->has_claim() && !request->claim().type().gvr().resource().empty();
    auto claims = manager_->Resplice(target, has_claim ? &request->claim() : nullptr);
    if (!claims.ok()) {
      reactor->Finish(grpc::Status(static_cast<grpc::StatusCode>(claims.status().code()),
                                   std::string(claims.status().message())));
      return reactor;
    }
    response->set_streams(static_cast<uint32_t>(claims->size()));
    for (auto& claim : *claims) *response->add_claims() = std::move(claim);
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  TargetManager* manager_;
};

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

absl::StatusOr<reverser::v1::TableUpdate> ReadTargetsFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read --targets_file ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  reverser::v1::TableUpdate update;
  auto status = google::protobuf::util::JsonStringToMessage(ss.str(), &update);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--targets_file ", path, " is not a reverser.v1.TableUpdate: ", status.ToString()));
  }
  update.set_full(true);
  return update;
}

class App final : public runtime::ServiceApp {
 public:
  absl::Status Setup(runtime::ServiceHost& host) override {
    auto settings = redisstore::RedisSettingsFromFlags();
    if (!settings.ok()) return settings.status();
    const redisstore::RedisOptions& redis = settings->options;
    const redisstore::KeyPrefix& prefix = settings->prefix;
    std::string targets_file = absl::GetFlag(FLAGS_targets_file);
    auto catalog_address = catalogclient::CatalogAddressOrStatic("targets_file", targets_file);
    if (!catalog_address.ok()) return catalog_address.status();
    const std::string& catalog = *catalog_address;
    if (host.ReviewsOperators()) {
      auto reviewer =
          kube::NewAccessReviewer(absl::GetFlag(FLAGS_kubeconfig), "reverser-splicer/0.1");
      if (!reviewer.ok()) return reviewer.status();
      host.SetAdminReviewer(*reviewer);
    }
    delivery_ =
        std::make_unique<DeliveryClient>(absl::GetFlag(FLAGS_gitworker_address),
                                         static_cast<size_t>(absl::GetFlag(FLAGS_max_in_flight)),
                                         runtime::MeshChannelCredentials(host.options().grpc_security));
    TargetManagerOptions options;
    options.stream_defaults.redis = redis;
    options.stream_defaults.prefix = prefix;
    body_cipher_ = settings->body_cipher;
    options.stream_defaults.body_cipher = body_cipher_.get();
    options.stream_defaults.attribution = absl::GetFlag(FLAGS_attribution);
    options.stream_defaults.attribution_grace = absl::GetFlag(FLAGS_attribution_grace);
    options.stream_defaults.cursor_ttl = absl::GetFlag(FLAGS_delivery_cursor_ttl);
    options.stream_defaults.cursor_refresh = absl::GetFlag(FLAGS_delivery_cursor_refresh);
    options.stream_defaults.reference_watch_cursors = absl::GetFlag(FLAGS_reference_watch_cursors);
    if (absl::Status s = ValidateCursorFlags(options.stream_defaults); !s.ok()) return s;
    if (absl::GetFlag(FLAGS_refusals_per_target) < 1) {
      return absl::InvalidArgumentError("--refusals_per_target must be at least 1");
    }
    options.refusals.max_objects = static_cast<size_t>(absl::GetFlag(FLAGS_refusals_per_target));
    manager_ = std::make_unique<TargetManager>(options, delivery_.get(), &host.metrics());
    TargetManager* manager = manager_.get();
    runtime::ServiceHost* h = &host;
    DeliveryClient* delivery = delivery_.get();
    delivery_->SetOnRefusal([manager](const reverser::v1::DeliveryFeedback& feedback) {
      manager->OnRefusal(feedback);
    });
    delivery_->SetOnConnected([manager, h] {
      h->SetComponent("gitworker", true, "delivery stream open", /*gating=*/false);
      manager->SendConfigs();
    });
    // The gitworker connection is reported, not gated on: the splicer reconnects by itself.
    host.SetComponent("gitworker", false, "connecting", /*gating=*/false);
    host.SetComponent("tables", false, "waiting for watched-type tables");

    if (!targets_file.empty()) {
      auto update = ReadTargetsFile(targets_file);
      if (!update.ok()) return update.status();
      static_tables_ = std::move(*update);
    } else {
      catalog_stub_ = reverser::v1::Catalog::NewStub(
          grpc::CreateChannel(catalog, runtime::MeshChannelCredentials(host.options().grpc_security)));
      auto stub = catalog_stub_;
      std::string subscriber = host.options().instance;
      tables_ = std::make_unique<catalogclient::StreamFollower<reverser::v1::TableUpdate>>(
          "tables",
          [stub, subscriber](grpc::ClientContext* context, uint64_t known_generation) {
            reverser::v1::WatchTablesRequest request;
            request.set_known_generation(known_generation);
            request.set_subscriber(subscriber);
            return stub->WatchTables(context, request);
          },
          [manager, h](const reverser::v1::TableUpdate& update) {
            manager->Apply(update);
            h->SetComponent("tables", true, absl::StrCat(manager->stream_count(), " stream(s)"));
          });
    }
    (void)delivery;
    admin_ = std::make_unique<AdminService>(&host, manager_.get());
    host.AddGrpcService(admin_.get());
    return absl::OkStatus();
  }

  absl::Status Run(runtime::ServiceHost& host) override {
    delivery_->Start();
    if (static_tables_) {
      manager_->Apply(*static_tables_);
      host.SetComponent("tables", true, absl::StrCat(manager_->stream_count(), " stream(s)"));
    }
    if (tables_) tables_->Start();
    if (catalog_stub_) {
      reporter_ = std::thread([this] { ReportSummaries(); });
    }
    return absl::OkStatus();
  }

  void Stop() override {
    stopping_ = true;
    if (reporter_.joinable()) reporter_.join();
    if (tables_) tables_->Stop();
    manager_->StopAll();
    delivery_->Stop();
  }

 private:
  // Sends each target's readiness roll-up to the catalog when it changed.
  void ReportSummaries() {
    std::map<std::string, std::string> last;
    while (!stopping_) {
      for (const auto& summary : manager_->Summaries()) {
        reverser::v1::StreamSummary comparable = summary;
        comparable.clear_observed_time();
        std::string fingerprint = comparable.SerializeAsString();
        if (last[summary.target().uid()] == fingerprint) continue;
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
        reverser::v1::ReportStreamSummaryResponse response;
        reverser::v1::StreamSummary out = summary;
        out.mutable_observed_time()->set_seconds(absl::ToUnixSeconds(absl::Now()));
        if (catalog_stub_->ReportStreamSummary(&context, out, &response).ok()) {
          last[summary.target().uid()] = fingerprint;
        }
      }
      absl::SleepFor(absl::GetFlag(FLAGS_summary_interval));
    }
  }

  std::shared_ptr<const redisstore::BodyCipher> body_cipher_;
  std::unique_ptr<DeliveryClient> delivery_;
  std::unique_ptr<TargetManager> manager_;
  std::shared_ptr<reverser::v1::Catalog::Stub> catalog_stub_;
  std::unique_ptr<catalogclient::StreamFollower<reverser::v1::TableUpdate>> tables_;
  std::optional<reverser::v1::TableUpdate> static_tables_;
  std::unique_ptr<AdminService> admin_;
  std::thread reporter_;
  std::atomic<bool> stopping_{false};
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
