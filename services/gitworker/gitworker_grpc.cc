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

grpc::ServerUnaryReactor* GitWorkerAdminGrpcService::ListBranches(
    grpc::CallbackServerContext* context, const reverser::v1::ListBranchesRequest* /*request*/,
    reverser::v1::ListBranchesResponse* response) {
  auto* reactor = context->DefaultReactor();
  // Every branch is asked at once and the handler returns: the last answer (or its 5 s
  // timeout) finishes the call, so one slow branch costs 5 s in all, not 5 s each.
  std::vector<caf::actor> branches;
  for (const BranchActor& branch : registry_->All()) {
    branches.push_back(caf::actor_cast<caf::actor>(branch));
  }
  runtime::AskAll(
      host()->actors(), std::move(branches), std::chrono::seconds(5),
      [this, reactor, response](std::vector<runtime::GatheredReply> replies) {
        for (runtime::GatheredReply& reply : replies) {
          if (!reply.ok) {
            runtime::LogWarning("branch status unavailable",
                                {{"error", host()->actors().render(reply.error)}});
            continue;
          }
          auto* status = response->add_branches();
          status->ParseFromString(reply.value);
          FillTargetPaths(status->mutable_destination());
        }
        reactor->Finish(grpc::Status::OK);
      },
      status_atom::value);
  return reactor;
}

}  // namespace reverser::gitworker
