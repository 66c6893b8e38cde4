#pragma once

// The gitworker's gRPC services.
//
// GitWorker.Deliver (one bidirectional stream per splicer):
//   - every DeliveryMessage carries a sequence; the answer `accepted_sequence` is sent for each
//     message, in the order messages were read, once it is buffered (target_config: at once;
//     resync/event: when its GitTarget's buffer had room). At most `max_unaccepted` messages are
//     read ahead of their acceptance; beyond that the stream is not read (gRPC flow control).
//   - `target_config` declares a GitTarget for the rest of the stream. How it is written comes
//     from the catalog (target_configs.h), now and whenever the catalog changes it; until the
//     catalog has published it, the target's resyncs and events wait unaccepted. Nothing a
//     splicer sends names a remote or a Secret. (With --target_config_source=delivery the
//     delivered config is used as sent.) An unusable config, or a resync/event for a target
//     not declared, is answered `refusal` (reason code and message) and accepted, never acked.
//   - `ack{target, claim, position, commit_sha}` once everything of (target, claim) up to
//     position is pushed; acks per (target, claim) only move forward. Objects that can never be
//     written (e.g. sensitive without encryption) are answered `refusal` (naming the object)
//     and acked in order, so a stream never stalls on them; `refused_files` lists the files
//     under a target's path the gitworker refuses to read.
//   - when the client half-closes, the stream ends after the feedback queued so far is written;
//     a new stream starts with fresh target buffers (the splicer re-sends from its acked cursor).
// GitWorker.AttachCommit: attach-then-poll finalize of a CommitRequest's open window.
// GitWorkerAdmin: Status and ListBranches. A BranchStatus's `destination.path` holds the
// spec.path of every GitTarget writing to that branch, sorted and joined by ", " ("/" for the
// repository root): several targets may share one branch.

#include <grpcpp/grpcpp.h>

#include <caf/all.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "libs/runtime/admin_status.h"
#include "proto/reverser/v1/gitworker.grpc.pb.h"
#include "services/gitworker/branch_actor.h"
#include "services/gitworker/target_configs.h"
#include "services/gitworker/target_stream.h"

namespace reverser::gitworker {

struct DeliveryOptions {
  size_t target_buffer = 1000;  // items per GitTarget buffer
  size_t max_unaccepted = 64;   // messages read ahead of their acceptance
  WriterLimits limits;          // templates of a target_config are tried within these
  // The catalog's configs (target_configs.h): a delivered target_config then only declares its
  // GitTarget. Null (--target_config_source=delivery): the delivered config is used as sent.
  TargetConfigBook* trusted_configs = nullptr;
  runtime::MetricsRegistry* metrics = &runtime::MetricsRegistry::Global();
};

class GitWorkerService final : public reverser::v1::GitWorker::CallbackService {
 public:
  GitWorkerService(caf::actor_system& system, BranchRegistry* registry, DeliveryOptions options);

  grpc::ServerBidiReactor<reverser::v1::DeliveryMessage, reverser::v1::DeliveryFeedback>* Deliver(
      grpc::CallbackServerContext* context) override;

  grpc::ServerUnaryReactor* AttachCommit(grpc::CallbackServerContext* context,
                                         const reverser::v1::AttachCommitRequest* request,
                                         reverser::v1::FinalizeResult* response) override;

 private:
  // Every CommitRequest's attached write. Reply handlers (on CAF threads) hold it too.
  struct Attachments {
    struct Entry {
      BranchActor branch;
      std::optional<uint64_t> write_id;  // none while the branch is being asked to attach
    };
    std::mutex mu;
    std::map<std::string, Entry> entries;  // CommitRequest uid → its write
  };

  caf::actor_system& system_;
  BranchRegistry* registry_;
  DeliveryOptions options_;
  std::shared_ptr<Attachments> attachments_ = std::make_shared<Attachments>();
};

class GitWorkerAdminService final
    : public runtime::AdminStatusService<reverser::v1::GitWorkerAdmin> {
 public:
  GitWorkerAdminService(runtime::ServiceHost* host, BranchRegistry* registry)
      : AdminStatusService(host), registry_(registry) {}

  grpc::ServerUnaryReactor* ListBranches(grpc::CallbackServerContext* context,
                                         const reverser::v1::ListBranchesRequest* request,
                                         reverser::v1::ListBranchesResponse* response) override;

 private:
  void FillTargetPaths(reverser::v1::GitDestination* destination) const;

  BranchRegistry* registry_;
};

}  // namespace reverser::gitworker
