#include "services/gitworker/delivery_service.h"

#include <deque>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/time_util.h"
#include "libs/core/proto_convert.h"
#include "libs/runtime/ask_actor.h"
#include "libs/runtime/log.h"
#include "services/gitworker/refusal.h"

namespace reverser::gitworker {
namespace {

using Message = reverser::v1::DeliveryMessage;
constexpr uint32_t kMaxCloseDelaySeconds = 3600;
using Feedback = reverser::v1::DeliveryFeedback;

class DeliverReactor;

// What a sink shares with its stream: the lock over the reactor's feedback state, and the
// reactor itself until the stream is done.
struct StreamShared {
  std::recursive_mutex mu;
  DeliverReactor* reactor = nullptr;
};

class StreamSink final : public FeedbackSink {
 public:
  explicit StreamSink(std::shared_ptr<StreamShared> shared) : shared_(std::move(shared)) {}
  void Accepted(uint64_t sequence) override;
  void Ack(const reverser::v1::DeliveryAck& ack) override;
  void Refused(const reverser::v1::Refusal& refusal) override;
  void RefusedFiles(const reverser::v1::RefusedFiles& files) override;

 private:
  std::shared_ptr<StreamShared> shared_;
};

class DeliverReactor final : public grpc::ServerBidiReactor<Message, Feedback> {
 public:
  DeliverReactor(caf::actor_system& system, BranchRegistry* registry,
                 const DeliveryOptions& options)
      : system_(system),
        registry_(registry),
        options_(options),
        shared_(std::make_shared<StreamShared>()),
        sink_(std::make_shared<StreamSink>(shared_)) {
    shared_->reactor = this;
    std::lock_guard lock(shared_->mu);
    StartRead(&in_);
  }

  // The *Locked methods run with shared_->mu held.
  void AcceptLocked(uint64_t sequence) {
    for (auto& [seq, accepted] : order_) {
      if (seq == sequence && !accepted) {
        accepted = true;
        break;
      }
    }
    while (!order_.empty() && order_.front().second) {
      Feedback feedback;
      feedback.set_accepted_sequence(order_.front().first);
      order_.pop_front();
      QueueLocked(std::move(feedback));
    }
    if (read_paused_ && !read_closed_ && !finished_ && order_.size() < options_.max_unaccepted) {
      read_paused_ = false;
      StartRead(&in_);
    }
  }

  void AckLocked(const reverser::v1::DeliveryAck& ack) {
    const std::string key = absl::StrCat(ack.target().namespace_(), "/", ack.target().name(), "|",
                                         ClaimKey(ack.claim()));
    const core::StreamPosition position = core::FromProto(ack.position());
    auto it = acked_.find(key);
    if (it != acked_.end() && it->second >= position) return;
    acked_[key] = position;
    Feedback feedback;
    *feedback.mutable_ack() = ack;
    QueueLocked(std::move(feedback));
  }

  void RefuseLocked(const reverser::v1::Refusal& refusal) {
    Feedback feedback;
    *feedback.mutable_refusal() = refusal;
    QueueLocked(std::move(feedback));
  }

  void RefusedFilesLocked(const reverser::v1::RefusedFiles& files) {
    Feedback feedback;
    *feedback.mutable_refused_files() = files;
    QueueLocked(std::move(feedback));
  }

  // A message that can never be applied: refused (with its target when it names one) and
  // accepted, so the credit moves on.
  void RefuseMessageLocked(uint64_t sequence, const reverser::v1::GitTargetRef& target,
                           reverser::v1::RefusalReason reason, absl::string_view message) {
    Coverage cover;
    cover.target = target;
    cover.sink = sink_;
    Refuse({cover}, RefusedSubject::Message(), reason,
           absl::StrCat("sequence ", sequence, ": ", message), options_.metrics);
    AcceptLocked(sequence);
  }

  void OnReadDone(bool ok) override {
    std::lock_guard lock(shared_->mu);
    if (!ok) {
      read_closed_ = true;
      MaybeFinishLocked();
      return;
    }
    order_.emplace_back(in_.sequence(), false);
    DispatchLocked(in_);
    if (finished_) return;
    if (order_.size() < options_.max_unaccepted) {
      StartRead(&in_);
    } else {
      read_paused_ = true;
    }
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(shared_->mu);
    writing_ = false;
    if (!ok) {
      outbox_.clear();
      FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "writing feedback failed"));
      return;
    }
    WriteNextLocked();
  }

  void OnCancel() override {
    std::lock_guard lock(shared_->mu);
    cancelled_ = true;
    outbox_.clear();
    if (!writing_) FinishLocked(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    {
      std::lock_guard lock(shared_->mu);
      shared_->reactor = nullptr;
    }
    for (uint64_t id : subscriptions_) options_.trusted_configs->Unsubscribe(id);
    for (const auto& [key, actor] : targets_) {
      caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
    }
    runtime::LogInfo("delivery stream ended", {{"targets", targets_.size()}});
    delete this;
  }

 private:
  void QueueLocked(Feedback feedback) {
    if (finished_ || cancelled_) return;
    outbox_.push_back(std::move(feedback));
    WriteNextLocked();
  }

  void WriteNextLocked() {
    if (writing_ || finished_) return;
    if (outbox_.empty() || cancelled_) {
      if (cancelled_) {
        FinishLocked(grpc::Status::CANCELLED);
      } else {
        MaybeFinishLocked();
      }
      return;
    }
    writing_ = true;
    current_ = std::move(outbox_.front());
    outbox_.pop_front();
    StartWrite(&current_);
  }

  void MaybeFinishLocked() {
    if (read_closed_ && !writing_ && outbox_.empty()) FinishLocked(grpc::Status::OK);
  }

  void FinishLocked(const grpc::Status& status) {
    if (finished_) return;
    finished_ = true;
    Finish(status);
  }

  void DispatchLocked(const Message& message) {
    const uint64_t sequence = message.sequence();
    auto count = [&](const char* kind) {
      options_.metrics
          ->GetCounter("reverser_gitworker_delivery_messages_total",
                       "Delivery messages received, by kind.", {{"kind", kind}})
          .Increment();
    };
    switch (message.payload_case()) {
      case Message::kTargetConfig: {
        count("target_config");
        if (options_.trusted_configs != nullptr) {
          DeclareTargetLocked(sequence, message.target_config());
          return;
        }
        auto settings = SettingsFromConfig(message.target_config(), options_.limits);
        if (!settings.ok()) {
          RefuseMessageLocked(sequence, message.target_config().target(),
                              reverser::v1::REFUSAL_REASON_INVALID_TARGET_CONFIG,
                              settings.status().message());
          return;
        }
        caf::anon_send(TargetLocked((*settings)->TargetKey()), config_atom::value,
                       SettingsPtr(*settings));
        AcceptLocked(sequence);
        return;
      }
      case Message::kResync:
      case Message::kEvent: {
        const bool resync = message.payload_case() == Message::kResync;
        count(resync ? "resync" : "event");
        const auto& target = resync ? message.resync().target() : message.event().target();
        const std::string key = TargetRefKey(target);
        auto it = targets_.find(key);
        if (it == targets_.end()) {
          RefuseMessageLocked(
              sequence, target, reverser::v1::REFUSAL_REASON_NO_TARGET_CONFIG,
              absl::StrCat("no target_config for GitTarget ", key, " on this stream"));
          return;
        }
        auto item = std::make_shared<WorkItem>();
        if (resync) {
          item->kind = WorkItem::Kind::kResync;
          item->resync = message.resync();
        } else {
          item->kind = WorkItem::Kind::kEvent;
          item->event = message.event();
        }
        item->covers.push_back(CoverageOf(*item, sink_));
        caf::anon_send(it->second, deliver_atom::value, sequence, std::move(item));
        return;
      }
      default:
        count("empty");
        RefuseMessageLocked(sequence, reverser::v1::GitTargetRef(),
                            reverser::v1::REFUSAL_REASON_MALFORMED_MESSAGE,
                            "message without payload");
        return;
    }
  }

  // The stream actor of GitTarget `key`, spawned (unconfigured) on first use.
  TargetStreamActor TargetLocked(const std::string& key) {
    auto it = targets_.find(key);
    if (it == targets_.end()) {
      TargetStreamOptions options;
      options.capacity = options_.target_buffer;
      BranchRegistry* registry = registry_;
      options.branch_for = [registry](const TargetSettings& settings) -> BranchItemActor {
        return registry->Get(settings);
      };
      options.sink = sink_;
      options.metrics = options_.metrics;
      options.limits = options_.limits;
      it = targets_.emplace(key, SpawnTargetStream(system_, options)).first;
    }
    return it->second;
  }

  // The stream carries the delivered config's GitTarget; it is written with the catalog's config
  // of it, and only while the two agree (target_stream.h). Until then its items wait unaccepted.
  void DeclareTargetLocked(uint64_t sequence, const reverser::v1::GitTargetConfig& delivered) {
    const reverser::v1::GitTargetRef& target = delivered.target();
    if (target.namespace_().empty() || target.name().empty()) {
      RefuseMessageLocked(sequence, target, reverser::v1::REFUSAL_REASON_INVALID_TARGET_CONFIG,
                          "target_config names no GitTarget (namespace and name)");
      return;
    }
    const std::string key = TargetRefKey(target);
    const bool known = targets_.count(key) > 0;
    TargetStreamActor stream = TargetLocked(key);
    caf::anon_send(stream, declare_atom::value,
                   std::make_shared<const reverser::v1::GitTargetConfig>(delivered));
    if (!known) {
      // Listeners run under the book's lock: they only post.
      subscriptions_.push_back(options_.trusted_configs->Subscribe(
          key, [stream](const reverser::v1::GitTargetConfig* config) {
            caf::anon_send(stream, catalog_atom::value,
                           config == nullptr
                               ? TargetConfigPtr()
                               : std::make_shared<const reverser::v1::GitTargetConfig>(*config));
          }));
    }
    AcceptLocked(sequence);
  }

  caf::actor_system& system_;
  BranchRegistry* registry_;
  DeliveryOptions options_;
  std::vector<uint64_t> subscriptions_;  // in options_.trusted_configs, ended with the stream
  std::shared_ptr<StreamShared> shared_;
  std::shared_ptr<StreamSink> sink_;
  Message in_;
  Feedback current_;
  std::deque<Feedback> outbox_;
  std::deque<std::pair<uint64_t, bool>> order_;  // sequences read, in order, and accepted yet
  std::map<std::string, core::StreamPosition> acked_;
  std::map<std::string, TargetStreamActor> targets_;  // GitTarget "namespace/name" → its actor
  bool writing_ = false;
  bool read_closed_ = false;
  bool read_paused_ = false;
  bool cancelled_ = false;
  bool finished_ = false;
};

void StreamSink::Accepted(uint64_t sequence) {
  std::lock_guard lock(shared_->mu);
  if (shared_->reactor) shared_->reactor->AcceptLocked(sequence);
}

void StreamSink::Ack(const reverser::v1::DeliveryAck& ack) {
  std::lock_guard lock(shared_->mu);
  if (shared_->reactor) shared_->reactor->AckLocked(ack);
}

void StreamSink::Refused(const reverser::v1::Refusal& refusal) {
  std::lock_guard lock(shared_->mu);
  if (shared_->reactor) shared_->reactor->RefuseLocked(refusal);
}

void StreamSink::RefusedFiles(const reverser::v1::RefusedFiles& files) {
  std::lock_guard lock(shared_->mu);
  if (shared_->reactor) shared_->reactor->RefusedFilesLocked(files);
}

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

GitWorkerService::GitWorkerService(caf::actor_system& system, BranchRegistry* registry,
                                   DeliveryOptions options)
    : system_(system), registry_(registry), options_(options) {}

grpc::ServerBidiReactor<reverser::v1::DeliveryMessage, reverser::v1::DeliveryFeedback>*
GitWorkerService::Deliver(grpc::CallbackServerContext* /*context*/) {
  runtime::LogInfo("delivery stream started");
  return new DeliverReactor(system_, registry_, options_);
}

grpc::ServerUnaryReactor* GitWorkerService::AttachCommit(
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

void GitWorkerAdminService::FillTargetPaths(reverser::v1::GitDestination* destination) const {
  BranchKey key{destination->provider_namespace(), destination->provider_name(),
                destination->branch()};
  std::vector<std::string> paths = registry_->PathsOn(key);
  for (std::string& path : paths) {
    if (path.empty()) path = "/";  // the repository root
  }
  destination->set_path(absl::StrJoin(paths, ", "));
}

grpc::ServerUnaryReactor* GitWorkerAdminService::ListBranches(
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
