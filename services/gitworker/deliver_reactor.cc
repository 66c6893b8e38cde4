#include "services/gitworker/deliver_reactor.h"

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "libs/core/proto_convert.h"
#include "libs/runtime/caf_thread.h"
#include "libs/runtime/log.h"
#include "services/gitworker/refusal.h"
#include "services/gitworker/target_stream.h"

namespace reverser::gitworker {
namespace {

using Message = reverser::v1::DeliveryMessage;
using Feedback = reverser::v1::DeliveryFeedback;

class DeliverReactor;

// One splice stream's lane in the ack bookkeeping.
std::string AckKey(const reverser::v1::GitTargetRef& target, const reverser::v1::Claim& claim) {
  return absl::StrCat(target.namespace_(), "/", target.name(), "|", ClaimKey(claim));
}

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
  void ResyncRequested(const reverser::v1::ResyncRequest& request) override;
  void PathRefused(const reverser::v1::PathRefusal& refusal) override;
  void NotOwner(const reverser::v1::NotOwner& not_owner) override;

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
    const std::string key = AckKey(ack.target(), ack.claim());
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

  void ResyncRequestedLocked(const reverser::v1::ResyncRequest& request) {
    Feedback feedback;
    *feedback.mutable_resync_request() = request;
    QueueLocked(std::move(feedback));
  }

  void PathRefusedLocked(const reverser::v1::PathRefusal& refusal) {
    Feedback feedback;
    *feedback.mutable_path_refusal() = refusal;
    QueueLocked(std::move(feedback));
  }

  void NotOwnerLocked(const reverser::v1::NotOwner& not_owner) {
    Feedback feedback;
    *feedback.mutable_not_owner() = not_owner;
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
    for (uint64_t id : ownership_subscriptions_) options_.ownership->Unsubscribe(id);
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
          // A resync starts the splicer's session over: its ack must reach the splicer even
          // when an earlier session already saw that position acked.
          acked_.erase(AckKey(target, message.resync().claim()));
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
      options.ownership = options_.ownership;
      it = targets_.emplace(key, SpawnTargetStream(system_, options)).first;
      runtime::ReleaseCafThreadLogger();  // a gRPC callback thread (caf_thread.h)
      if (options_.ownership != nullptr) {
        ownership_subscriptions_.push_back(
            options_.ownership->Subscribe(caf::actor_cast<caf::actor>(it->second)));
      }
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
  std::vector<uint64_t> ownership_subscriptions_;  // in options_.ownership, ended with it
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

void StreamSink::ResyncRequested(const reverser::v1::ResyncRequest& request) {
  std::lock_guard lock(shared_->mu);
  if (shared_->reactor) shared_->reactor->ResyncRequestedLocked(request);
}

void StreamSink::PathRefused(const reverser::v1::PathRefusal& refusal) {
  std::lock_guard lock(shared_->mu);
  if (shared_->reactor) shared_->reactor->PathRefusedLocked(refusal);
}

void StreamSink::NotOwner(const reverser::v1::NotOwner& not_owner) {
  std::lock_guard lock(shared_->mu);
  if (shared_->reactor) shared_->reactor->NotOwnerLocked(not_owner);
}

}  // namespace

grpc::ServerBidiReactor<reverser::v1::DeliveryMessage, reverser::v1::DeliveryFeedback>*
NewDeliverReactor(caf::actor_system& system, BranchRegistry* registry,
                  const DeliveryOptions& options) {
  return new DeliverReactor(system, registry, options);
}

}  // namespace reverser::gitworker
