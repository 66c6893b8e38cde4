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

// Asks `branch` where write `write_id` stands and answers the call with it.
void AnswerOutcome(caf::actor_system& system, const BranchActor& branch, uint64_t write_id,
                   const AttachCall& call) {
  runtime::AskActor(
      system, caf::actor_cast<caf::actor>(branch), kBranchAskTimeout,
      [call](const WriteOutcome& outcome) {
        switch (outcome.state) {
          case WriteOutcome::State::kPending:
            // Attached, not pushed yet: the caller polls again.
            call.response->set_resolved(false);
            call.reactor->Finish(grpc::Status::OK);
            return;
          case WriteOutcome::State::kCommitted:
            call.Resolved(reverser::v1::FINALIZE_OUTCOME_COMMITTED, outcome.sha);
            return;
          case WriteOutcome::State::kAlreadyPresent:
            call.Resolved(reverser::v1::FINALIZE_OUTCOME_ALREADY_PRESENT, "");
            return;
        }
      },
      [call, system = &system](const caf::error& err) { call.Failed(*system, err); },
      outcome_atom::value, write_id);
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
  const std::string id = request->uid().empty()
                             ? absl::StrCat(request->namespace_(), "/", request->name())
                             : request->uid();
  auto* reactor = context->DefaultReactor();
  AttachCall call{reactor, response,
                  registry_->KeyForTarget(target_key).value_or(BranchKey{}).branch};
  std::optional<BranchActor> branch;
  std::optional<uint64_t> attached;
  {
    std::lock_guard lock(attachments_->mu);
    auto it = attachments_->entries.find(id);
    if (it != attachments_->entries.end()) {
      if (!it->second.write_id.has_value()) {
        // Another call of this CommitRequest is attaching it now: poll again.
        response->set_resolved(false);
        reactor->Finish(grpc::Status::OK);
        return reactor;
      }
      branch = it->second.branch;
      attached = it->second.write_id;
    } else {
      branch = registry_->ForTarget(target_key);
      if (!branch.has_value()) {
        // Nothing delivered for this target yet: no window to attach to (poll again).
        call.Unresolved(reverser::v1::FINALIZE_OUTCOME_NO_OPEN_WINDOW);
        return reactor;
      }
      // Claimed before the branch is asked, so one CommitRequest attaches once.
      attachments_->entries.emplace(id, Attachments::Entry{*branch, std::nullopt});
    }
  }
  if (attached.has_value()) {
    AnswerOutcome(system_, *branch, *attached, call);
    return reactor;
  }

  AttachRequest attach{request->author().username(), target_key, request->message(),
                       std::min<uint32_t>(request->close_delay_seconds(), kMaxCloseDelaySeconds)};
  caf::actor_system* system = &system_;
  std::shared_ptr<Attachments> attachments = attachments_;
  runtime::AskActor(
      system_, caf::actor_cast<caf::actor>(*branch), kBranchAskTimeout,
      [system, attachments, id, branch = *branch, call](const Attached& reply) {
        {
          std::lock_guard lock(attachments->mu);
          if (!reply.write_id.has_value()) {
            attachments->entries.erase(id);
          } else {
            attachments->entries[id].write_id = reply.write_id;
          }
        }
        if (!reply.write_id.has_value()) {
          // No open window of this author and target yet: not attached; the caller polls again
          // until its own deadline (NoWindowInGrace is the caller's verdict).
          call.Unresolved(reverser::v1::FINALIZE_OUTCOME_NO_OPEN_WINDOW);
          return;
        }
        AnswerOutcome(*system, branch, *reply.write_id, call);
      },
      [system, attachments, id, call](const caf::error& err) {
        {
          std::lock_guard lock(attachments->mu);
          attachments->entries.erase(id);
        }
        call.Failed(*system, err);
      },
      attach_atom::value, std::move(attach));
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
