#include "services/splicer/splicer_service.h"

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "google/protobuf/util/json_util.h"
#include "libs/core/clock.h"
#include "libs/kube/config.h"
#include "libs/kube/httplib_transport.h"
#include "libs/runtime/caf_thread.h"
#include "libs/runtime/grpc_security.h"
#include "libs/runtime/log.h"

namespace reverser::splicer {
namespace {

// How long an adapter thread waits for the actor (a table update stops and starts streams; a
// config re-send may wait for gitworker credit).
constexpr auto kAdapterWait = std::chrono::seconds(60);

std::string StreamsText(uint64_t streams) { return absl::StrCat(streams, " stream(s)"); }

}  // namespace

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

SplicerService::SplicerService(runtime::ServiceHost& host, SplicerServiceOptions options)
    : host_(host), options_(std::move(options)) {}

SplicerService::~SplicerService() { Stop(); }

void SplicerService::Register() {
  auto credentials = runtime::MeshChannelCredentials(host_.options().grpc_security);
  TargetManagerOptions manager_options = options_.manager;
  if (options_.replica.enabled) {
    manager_options.replica_id = options_.replica.replica_id;
    // Set once JoinMembership made the replica; until then the manager owns nothing anyway.
    manager_options.held = [this] {
      membership::Replica* replica = joined_.load();
      return replica != nullptr && replica->Held();
    };
  }
  if (options_.gitworker_membership) {
    const size_t max_in_flight = options_.max_in_flight;
    const std::string tls_name = options_.gitworker_tls_server_name;
    manager_options.new_client = [max_in_flight, credentials,
                                  tls_name](const std::string& address) {
      return std::make_unique<DeliveryClient>(address, max_in_flight, credentials, tls_name);
    };
  } else {
    delivery_ = std::make_unique<DeliveryClient>(options_.gitworker_address, options_.max_in_flight,
                                                 credentials, options_.gitworker_tls_server_name);
  }
  manager_ = std::make_unique<TargetManager>(std::move(manager_options), delivery_.get(),
                                             &host_.metrics());
  actor_ = SpawnTargetManagerActor(
      host_.actors(), manager_.get(),
      options_.replica.enabled ? options_.replica.timing.renew_period : absl::ZeroDuration());
  if (!delivery_) {
    host_.SetComponent("gitworker", true, "routed to the gitworker replicas (their Leases)",
                       /*gating=*/false);
  } else {
    ConnectSingleGitworker();
  }
  host_.SetComponent("tables", false, "waiting for watched-type tables");

  if (!options_.static_tables) {
    catalog_stub_ = reverser::v1::Catalog::NewStub(grpc::CreateChannel(
        options_.catalog_address, runtime::MeshChannelCredentials(host_.options().grpc_security)));
    auto stub = catalog_stub_;
    std::string subscriber = host_.options().instance;
    tables_ = std::make_unique<catalogclient::StreamFollower<reverser::v1::TableUpdate>>(
        "tables",
        [stub, subscriber](grpc::ClientContext* context, uint64_t known_generation) {
          reverser::v1::WatchTablesRequest request;
          request.set_known_generation(known_generation);
          request.set_subscriber(subscriber);
          return stub->WatchTables(context, request);
        },
        [this](const reverser::v1::TableUpdate& update) {
          // The follower's thread waits for the update to be applied: updates stay in order and
          // a burst is not queued without bound.
          if (auto applied = ApplyAndWait(update)) {
            host_.SetComponent("tables", true, StreamsText(applied->streams));
          }
        });
  }
  admin_ = std::make_unique<SplicerAdminGrpcService>(&host_, &host_.actors(), actor_);
  host_.AddGrpcService(admin_.get());
}

void SplicerService::ConnectSingleGitworker() {
  TargetManagerActor actor = actor_;
  delivery_->SetOnRefusal([actor](const reverser::v1::DeliveryFeedback& feedback) {
    caf::anon_send(actor, refusal_atom::value, feedback);
  });
  caf::actor_system* system = &host_.actors();
  runtime::ServiceHost* host = &host_;
  delivery_->SetOnConnected([actor, system, host] {
    host->SetComponent("gitworker", true, "delivery stream open", /*gating=*/false);
    // Configs before anything else on the new stream: this thread (the delivery client's
    // connection thread, an adapter) waits for them to be sent.
    runtime::CafThreadLoggerRelease release_logger;  // after `self` (caf_thread.h)
    caf::scoped_actor self(*system);
    self->request(actor, kAdapterWait, configs_atom::value)
        .receive(
            [](bool) {},
            [](caf::error& error) {
              runtime::LogWarning("target configs not re-sent", {{"error", caf::to_string(error)}});
            });
  });
  // The gitworker connection is reported, not gated on: the splicer reconnects by itself.
  host_.SetComponent("gitworker", false, "connecting", /*gating=*/false);
}

std::optional<AppliedReply> SplicerService::ApplyAndWait(const reverser::v1::TableUpdate& update) {
  std::optional<AppliedReply> out;
  runtime::CafThreadLoggerRelease release_logger;  // after `self` (caf_thread.h)
  caf::scoped_actor self(host_.actors());
  self->request(actor_, kAdapterWait, apply_atom::value, update)
      .receive([&](AppliedReply& reply) { out = reply; },
               [](caf::error& error) {
                 runtime::LogWarning("table update not applied in time",
                                     {{"error", caf::to_string(error)}});
               });
  return out;
}

absl::Status SplicerService::JoinMembership(const std::string& advertise_address) {
  if (!options_.replica.enabled && !options_.gitworker_membership) return absl::OkStatus();
  kube_ = options_.kube_client;
  if (!kube_) {
    auto config = kube::LoadDefaultConfig(options_.kubeconfig);
    if (!config.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("--membership / --gitworker_membership need the Kubernetes API: ",
                       config.status().message()));
    }
    auto client = kube::NewHttplibRestClient(*config, "reverser-splicer/0.1");
    if (!client.ok()) return client.status();
    kube_ = *client;
  }
  // The callbacks only post: the actor owns both ownership tables. Weak, so a late callback
  // never keeps the actor alive.
  caf::weak_actor_ptr weak = caf::actor_cast<caf::weak_actor_ptr>(actor_);
  auto post = [weak](auto atom) {
    return [weak, atom](const membership::Membership& members) {
      if (auto strong = caf::actor_cast<caf::strong_actor_ptr>(weak)) {
        caf::anon_send(caf::actor_cast<ManagerActor>(strong), atom, members);
      }
    };
  };
  if (options_.gitworker_membership) {
    membership::MemberViewOptions view;
    view.service = "gitworker";
    view.namespace_ = options_.replica.namespace_;
    view.timing = options_.replica.timing;
    view.reflector = options_.reflector;
    auto gitworkers = membership::MemberView::Create(*kube_, view, core::Clock::Real(),
                                                     post(gitworkers_atom::value));
    if (!gitworkers.ok()) return gitworkers.status();
    gitworkers_ = std::move(*gitworkers);
    gitworkers_->Start();
  }
  if (options_.replica.enabled) {
    auto replica = membership::Replica::Join(
        *kube_, options_.replica.Identity("splicer", advertise_address), options_.replica.timing,
        core::Clock::Real(), post(membership_atom::value), options_.reflector);
    if (!replica.ok()) return replica.status();
    replica_ = std::move(*replica);
    joined_ = replica_.get();
    runtime::LogInfo("joined the splicer replicas",
                     {{"replica_id", replica_->id()}, {"namespace", options_.replica.namespace_}});
  }
  return absl::OkStatus();
}

void SplicerService::Start() {
  if (delivery_) delivery_->Start();
  if (options_.static_tables) {
    if (auto applied = ApplyAndWait(*options_.static_tables)) {
      host_.SetComponent("tables", true, StreamsText(applied->streams));
    }
  }
  if (tables_) tables_->Start();
  if (catalog_stub_) reporter_ = std::thread([this] { ReportSummaries(); });
}

void SplicerService::Stop() {
  if (stopped_ || !manager_) return;  // never registered, or stopped
  stopped_ = true;
  stopping_ = true;
  if (reporter_.joinable()) reporter_.join();
  if (tables_) tables_->Stop();
  if (gitworkers_) gitworkers_->Stop();
  {
    // The actor ends before the manager is stopped here: from then on nothing else touches it.
    runtime::CafThreadLoggerRelease release_logger;  // after `self` (caf_thread.h)
    caf::scoped_actor self(host_.actors());
    self->send_exit(actor_, caf::exit_reason::user_shutdown);
    self->wait_for(actor_);
  }
  // The actor's thread ends once no handle is left (the delivery client's callbacks hold two).
  actor_ = ManagerActor();
  manager_->StopAll();
  if (delivery_) delivery_->Stop();
  manager_.reset();
  delivery_.reset();
  // Every target stopped: now the others may take them over at once.
  if (replica_) {
    joined_ = nullptr;
    if (absl::Status s = replica_->Leave(); !s.ok()) {
      runtime::LogWarning("Lease not released; the others take over when it expires",
                          {{"error", s.ToString()}});
    }
    replica_.reset();
  }
  gitworkers_.reset();
}

void SplicerService::ReportSummaries() {
  std::map<std::string, std::string> last;
  while (!stopping_) {
    std::vector<reverser::v1::StreamSummary> summaries;
    {
      runtime::CafThreadLoggerRelease release_logger;  // after `self` (caf_thread.h)
      caf::scoped_actor self(host_.actors());
      self->request(actor_, kAdapterWait, summaries_atom::value)
          .receive([&](SummariesReply& reply) { summaries = std::move(reply.summaries); },
                   [](caf::error&) {});
    }
    for (const auto& summary : summaries) {
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
    absl::SleepFor(options_.summary_interval);
  }
}

}  // namespace reverser::splicer
