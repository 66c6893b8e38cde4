#include "services/gitworker/gitworker_grpc.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/time_util.h"
#include "libs/runtime/ask_actor.h"
#include "libs/runtime/log.h"

namespace reverser::gitworker {
namespace {

constexpr uint32_t kMaxCloseDelaySeconds = 3600;

// One AttachCommit call: its response and reactor, finished exactly once by whichever step
// answers (never on the gRPC thread that took the call when an actor has to be asked).
struct AttachCall {
  grpc::ServerUnaryReactor* reactor;
  reverser::v1::FinalizeResult* response;
  std::string branch;  // the branch the target writes to ("" when not known yet)

  void Unresolved(reverser::v1::FinalizeOutcome outcome) const {
    response->set_resolved(false);
    response->set_outcome(outcome);
    reactor->Finish(grpc::Status::OK);
  }
  void Resolved(reverser::v1::FinalizeOutcome outcome, const std::string& sha) const {
    response->set_resolved(true);
    response->set_outcome(outcome);
    response->set_sha(sha);
    response->set_branch(branch);
    *response->mutable_resolved_at() = google::protobuf::util::TimeUtil::GetCurrentTime();
    reactor->Finish(grpc::Status::OK);
  }
  void Failed(caf::actor_system& system, const caf::error& err) const {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, system.render(err)));
  }
};

constexpr std::chrono::seconds kBranchAskTimeout{10};
// Beyond this many CommitRequests known to the service, requests for targets without a
// branch are not remembered (they are answered unresolved and counted on their next poll).
constexpr size_t kMaxTrackedRequests = 65536;
constexpr absl::Duration kForgetRequestsAfter = absl::Minutes(30);

void Answer(const CommitRequestView& view, const AttachCall& call) {
  if (!view.resolved) {
    call.response->set_resolved(false);
    call.reactor->Finish(grpc::Status::OK);
    return;
  }
  call.Resolved(view.outcome, view.sha);
}

}  // namespace

GitWorkerGrpcService::GitWorkerGrpcService(caf::actor_system& system, BranchRegistry* registry,
                                           DeliveryOptions options)
    : system_(system), registry_(registry), options_(options) {}

grpc::ServerBidiReactor<reverser::v1::DeliveryMessage, reverser::v1::DeliveryFeedback>*
GitWorkerGrpcService::Deliver(grpc::CallbackServerContext* /*context*/) {
  runtime::LogInfo("delivery stream started");
  return NewDeliverReactor(system_, registry_, options_);
}

grpc::ServerUnaryReactor* GitWorkerGrpcService::AttachCommit(
    grpc::CallbackServerContext* context, const reverser::v1::AttachCommitRequest* request,
    reverser::v1::FinalizeResult* response) {
  const std::string target_key =
      absl::StrCat(request->target().namespace_(), "/", request->target().name());
  CommitRequestSpec spec;
  spec.id = request->uid().empty() ? absl::StrCat(request->namespace_(), "/", request->name())
                                   : request->uid();
  spec.window_key = BranchWorker::WindowKey(request->author().username(), target_key);
  spec.message = request->message();
  spec.close_delay =
      absl::Seconds(std::min<uint32_t>(request->close_delay_seconds(), kMaxCloseDelaySeconds));
  auto* reactor = context->DefaultReactor();
  if (options_.ownership != nullptr) {
    // With replicas, only the branch's owner attaches: another's windows are not here. The
    // branch is the catalog's config's (else the one the target was delivered to).
    std::string unit;
    if (options_.trusted_configs != nullptr) {
      if (auto config = options_.trusted_configs->Get(target_key)) {
        unit = UnitOf(config->destination());
      }
    }
    if (unit.empty()) {
      if (auto key = registry_->KeyForTarget(target_key)) unit = UnitOf(*key);
    }
    if (!unit.empty() && !options_.ownership->MayWrite(unit)) {
      reverser::v1::NotOwner not_owner = options_.ownership->NotOwnerFor(request->target(), unit);
      reactor->Finish(grpc::Status(
          grpc::StatusCode::FAILED_PRECONDITION,
          absl::StrCat(
              "this gitworker replica does not own ", unit, "; its owner is ",
              not_owner.owner_replica().empty() ? "not known here" : not_owner.owner_replica(),
              not_owner.owner_address().empty() ? ""
                                                : absl::StrCat(" at ", not_owner.owner_address())),
          not_owner.SerializeAsString()));
      return reactor;
    }
  }
  AttachCall call{reactor, response,
                  registry_->KeyForTarget(target_key).value_or(BranchKey{}).branch};
  std::optional<BranchActor> branch;
  {
    std::lock_guard lock(attachments_->mu);
    if (attachments_->entries.size() >= kMaxTrackedRequests) {
      // Past the controller's 420 s safety window and the branch's outcome retention, an entry
      // is not polled any more.
      std::erase_if(attachments_->entries, [](const auto& entry) {
        return absl::Now() - entry.second.received > kForgetRequestsAfter;
      });
    }
    auto it = attachments_->entries.find(spec.id);
    if (it == attachments_->entries.end() && attachments_->entries.size() < kMaxTrackedRequests) {
      it = attachments_->entries.emplace(spec.id, Attachments::Entry{std::nullopt, absl::Now()})
               .first;
    }
    if (it != attachments_->entries.end()) {
      if (!it->second.branch.has_value()) it->second.branch = registry_->ForTarget(target_key);
      branch = it->second.branch;
      if (!branch.has_value()) {
        // Nothing delivered for this target yet, so it has no window: once the close delay
        // (from the first receipt) passed, there was none in grace.
        if (absl::Now() - it->second.received >= spec.close_delay) {
          call.Resolved(reverser::v1::FINALIZE_OUTCOME_NO_OPEN_WINDOW, "");
        } else {
          call.Unresolved(reverser::v1::FINALIZE_OUTCOME_NO_OPEN_WINDOW);
        }
        return reactor;
      }
    }
  }
  if (!branch.has_value()) {
    call.Unresolved(reverser::v1::FINALIZE_OUTCOME_UNSPECIFIED);
    return reactor;
  }
  caf::actor_system* system = &system_;
  runtime::AskActor(
      system_, caf::actor_cast<caf::actor>(*branch), kBranchAskTimeout,
      [call](const CommitRequestView& view) { Answer(view, call); },
      [system, call](const caf::error& err) { call.Failed(*system, err); }, attach_atom::value,
      std::move(spec));
  return reactor;
}

void GitWorkerAdminGrpcService::FillTargetPaths(reverser::v1::GitDestination* destination) const {
  BranchKey key{destination->provider_namespace(), destination->provider_name(),
                destination->branch()};
  std::vector<std::string> paths = registry_->PathsOn(key);
  for (std::string& path : paths) {
    if (path.empty()) path = "/";  // the repository root
  }
  destination->set_path(absl::StrJoin(paths, ", "));
}

reverser::v1::GitWorkerAdmin::Stub* GitWorkerAdminGrpcService::PeerStub(
    const std::string& address) {
  std::lock_guard lock(stubs_mu_);
  auto& slot = stubs_[address];
  if (!slot) {
    grpc::ChannelArguments args;
    if (!peers_.tls_server_name.empty()) args.SetSslTargetNameOverride(peers_.tls_server_name);
    slot = reverser::v1::GitWorkerAdmin::NewStub(grpc::CreateCustomChannel(
        address, peers_.credentials ? peers_.credentials : grpc::InsecureChannelCredentials(),
        args));
  }
  return slot.get();
}

namespace {

// One ListBranches of a whole set of replicas: this one's answer, then each peer's as it comes.
struct PeerGather {
  struct Query {
    std::string replica;
    std::string address;
    grpc::ClientContext context;
    reverser::v1::ListBranchesResponse response;
  };
  grpc::ServerUnaryReactor* reactor;
  reverser::v1::ListBranchesResponse* response;
  reverser::v1::ListBranchesRequest request;  // what each peer is asked (local_only)
  std::vector<std::unique_ptr<Query>> queries;
  std::mutex mu;
  size_t pending = 0;

  // Every branch once: the owner's report wins over another's (a handover in progress).
  void Finish() {
    std::map<std::string, reverser::v1::BranchStatus> merged;
    std::vector<std::string> order;
    auto add = [&](const reverser::v1::BranchStatus& status) {
      const auto& d = status.destination();
      const std::string unit =
          UnitOf(BranchKey{d.provider_namespace(), d.provider_name(), d.branch()});
      auto [it, inserted] = merged.emplace(unit, status);
      if (inserted) {
        order.push_back(unit);
      } else if (status.reported_by() == status.owner_replica() &&
                 it->second.reported_by() != it->second.owner_replica()) {
        it->second = status;
      }
    };
    for (const auto& status : response->branches()) add(status);
    for (const auto& query : queries) {
      for (const auto& status : query->response.branches()) add(status);
    }
    std::sort(order.begin(), order.end());
    response->clear_branches();
    for (const std::string& unit : order) *response->add_branches() = merged[unit];
    reactor->Finish(grpc::Status::OK);
  }
};

}  // namespace

void GitWorkerAdminGrpcService::AskPeersAndFinish(grpc::ServerUnaryReactor* reactor,
                                                  reverser::v1::ListBranchesResponse* response) {
  auto gather = std::make_shared<PeerGather>();
  gather->reactor = reactor;
  gather->response = response;
  gather->request.set_local_only(true);
  const membership::Membership members =
      peers_.members ? peers_.members() : membership::Membership{};
  auto* self = response->add_replicas();
  self->set_replica(peers_.me);
  self->set_answered(true);
  self->set_branches(static_cast<uint32_t>(response->branches_size()));
  for (const membership::Member& member : members.members) {
    if (member.replica_id == peers_.me) {
      self->set_address(member.address);
      continue;
    }
    if (member.address.empty()) {
      auto* answer = response->add_replicas();
      answer->set_replica(member.replica_id);
      answer->set_error("its Lease names no address");
      continue;
    }
    auto query = std::make_unique<PeerGather::Query>();
    query->replica = member.replica_id;
    query->address = member.address;
    query->context.set_deadline(absl::ToChronoTime(absl::Now() + peers_.deadline));
    gather->queries.push_back(std::move(query));
  }
  if (gather->queries.empty()) {
    gather->Finish();
    return;
  }
  gather->pending = gather->queries.size();
  // From here on the callbacks own `response` (under gather->mu) until the last one finishes.
  for (const auto& owned : gather->queries) {
    PeerGather::Query* query = owned.get();
    PeerStub(query->address)
        ->async()
        ->ListBranches(
            &query->context, &gather->request, &query->response,
            [gather, query](grpc::Status status) {
              bool last = false;
              {
                std::lock_guard lock(gather->mu);
                auto* answer = gather->response->add_replicas();
                answer->set_replica(query->replica);
                answer->set_address(query->address);
                answer->set_answered(status.ok());
                if (status.ok()) {
                  answer->set_branches(static_cast<uint32_t>(query->response.branches_size()));
                } else {
                  answer->set_error(status.error_message());
                  query->response.Clear();
                  runtime::LogWarning("replica did not list its branches",
                                      {{"replica", query->replica},
                                       {"address", query->address},
                                       {"error", status.error_message()}});
                }
                last = --gather->pending == 0;
              }
              if (last) gather->Finish();
            });
  }
}

grpc::ServerUnaryReactor* GitWorkerAdminGrpcService::ListBranches(
    grpc::CallbackServerContext* context, const reverser::v1::ListBranchesRequest* request,
    reverser::v1::ListBranchesResponse* response) {
  const bool ask_peers = peers_.ownership != nullptr && !request->local_only();
  auto* reactor = context->DefaultReactor();
  // Every branch is asked at once and the handler returns: the last answer (or its 5 s
  // timeout) finishes the call, so one slow branch costs 5 s in all, not 5 s each.
  std::vector<caf::actor> branches;
  for (const BranchActor& branch : registry_->All()) {
    branches.push_back(caf::actor_cast<caf::actor>(branch));
  }
  runtime::AskAll(
      host()->actors(), std::move(branches), std::chrono::seconds(5),
      [this, reactor, response, ask_peers](std::vector<runtime::GatheredReply> replies) {
        std::shared_ptr<const OwnershipSnapshot> snapshot =
            peers_.ownership != nullptr ? peers_.ownership->Current() : nullptr;
        for (runtime::GatheredReply& reply : replies) {
          if (!reply.ok) {
            runtime::LogWarning("branch status unavailable",
                                {{"error", host()->actors().render(reply.error)}});
            continue;
          }
          auto* status = response->add_branches();
          status->ParseFromString(reply.value);
          FillTargetPaths(status->mutable_destination());
          if (snapshot) {
            const auto& d = status->destination();
            const std::string unit =
                UnitOf(BranchKey{d.provider_namespace(), d.provider_name(), d.branch()});
            status->set_reported_by(peers_.me);
            if (auto owner = snapshot->owners.find(unit); owner != snapshot->owners.end()) {
              status->set_owner_replica(owner->second);
            }
          }
        }
        if (ask_peers) {
          AskPeersAndFinish(reactor, response);
        } else {
          reactor->Finish(grpc::Status::OK);
        }
      },
      status_atom::value);
  return reactor;
}

}  // namespace reverser::gitworker
