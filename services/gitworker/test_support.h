#pragma once

// Builders for delivery messages, a recording feedback sink and a Deliver client, shared by the
// gitworker tests.

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/time_util.h"
#include "libs/core/proto_convert.h"
#include "nlohmann/json.hpp"
#include "proto/reverser/v1/gitworker.grpc.pb.h"
#include "proto/reverser/v1/gitworker.pb.h"
#include "services/gitworker/work_item.h"

namespace reverser::gitworker::testsupport {

inline reverser::v1::GitTargetConfig Config(const std::string& remote, int64_t window_ms,
                                            const std::string& path = "clusters/a",
                                            const std::string& name = "tgt") {
  reverser::v1::GitTargetConfig config;
  config.mutable_target()->set_namespace_("team");
  config.mutable_target()->set_name(name);
  config.mutable_target()->set_uid(name + "-uid");
  config.mutable_destination()->set_provider_namespace("team");
  config.mutable_destination()->set_provider_name("repo");
  config.mutable_destination()->set_branch("main");
  config.mutable_destination()->set_path(path);
  config.set_remote_url(remote);
  config.set_commit_window_ms(window_ms);
  return config;
}

inline reverser::v1::Claim Claim(const std::string& group, const std::string& version,
                                 const std::string& resource, const std::string& kind,
                                 const std::string& ns = "") {
  reverser::v1::Claim claim;
  auto* type = claim.mutable_type();
  type->mutable_gvr()->set_group(group);
  type->mutable_gvr()->set_version(version);
  type->mutable_gvr()->set_resource(resource);
  type->mutable_gvk()->set_group(group);
  type->mutable_gvk()->set_version(version);
  type->mutable_gvk()->set_kind(kind);
  if (ns.empty()) {
    claim.mutable_scope()->set_cluster(true);
  } else {
    claim.mutable_scope()->set_namespace_(ns);
  }
  return claim;
}

inline reverser::v1::Claim ConfigMaps(const std::string& ns = "") {
  return Claim("", "v1", "configmaps", "ConfigMap", ns);
}
inline reverser::v1::Claim Deployments() {
  return Claim("apps", "v1", "deployments", "Deployment");
}

// An object of the claim's type with data {key: value} (ConfigMap) or spec.replicas (others).
inline reverser::v1::ObjectBody Object(const reverser::v1::Claim& claim, const std::string& ns,
                                       const std::string& name, const std::string& value) {
  reverser::v1::ObjectBody object;
  const auto& gvr = claim.type().gvr();
  *object.mutable_ref()->mutable_gvr() = gvr;
  object.mutable_ref()->set_namespace_(ns);
  object.mutable_ref()->set_name(name);
  *object.mutable_gvk() = claim.type().gvk();
  const std::string api_version =
      gvr.group().empty() ? gvr.version() : absl::StrCat(gvr.group(), "/", gvr.version());
  // Names may hold anything the API server accepts (backslashes, control characters).
  auto quoted = [](const std::string& text) { return nlohmann::json(text).dump(); };
  std::string metadata =
      absl::StrCat("{\"name\":", quoted(name),
                   ns.empty() ? "" : absl::StrCat(",\"namespace\":", quoted(ns)), "}");
  std::string body =
      claim.type().gvk().kind() == "ConfigMap" || claim.type().gvk().kind() == "Secret"
          ? absl::StrCat("\"data\":{\"key\":", quoted(value), "}")
          : absl::StrCat("\"spec\":{\"image\":", quoted(value), "}");
  object.set_sanitized_json(absl::StrCat("{\"apiVersion\":\"", api_version, "\",\"kind\":\"",
                                         claim.type().gvk().kind(), "\",\"metadata\":", metadata,
                                         ",", body, "}"));
  return object;
}

inline reverser::v1::LiveEvent Event(const reverser::v1::GitTargetConfig& config,
                                     const reverser::v1::Claim& claim, reverser::v1::Operation op,
                                     const std::string& ns, const std::string& name,
                                     const std::string& value, uint64_t rv,
                                     const std::string& user = "") {
  reverser::v1::LiveEvent event;
  *event.mutable_target() = config.target();
  *event.mutable_claim() = claim;
  event.set_operation(op);
  *event.mutable_object() = Object(claim, ns, name, value);
  if (!user.empty()) {
    event.mutable_author()->set_username(user);
    event.mutable_author()->set_resolution("exact_user");
  }
  event.mutable_position()->set_rv(rv);
  *event.mutable_observed_at() = google::protobuf::util::TimeUtil::GetCurrentTime();
  return event;
}

inline reverser::v1::ClusterSnapshot Snapshot(const reverser::v1::GitTargetConfig& config,
                                              const reverser::v1::Claim& claim,
                                              std::vector<reverser::v1::ObjectBody> desired,
                                              uint64_t revision) {
  reverser::v1::ClusterSnapshot snapshot;
  *snapshot.mutable_target() = config.target();
  *snapshot.mutable_claim() = claim;
  for (auto& object : desired) *snapshot.add_desired() = std::move(object);
  snapshot.set_revision(revision);
  snapshot.mutable_coverage_head()->set_rv(revision);
  snapshot.mutable_coverage_head()->set_seq(UINT64_MAX);
  return snapshot;
}

// Records feedback; thread-safe.
class RecordingSink : public FeedbackSink {
 public:
  void Accepted(uint64_t sequence) override {
    std::lock_guard lock(mu_);
    accepted_.push_back(sequence);
  }
  void Ack(const reverser::v1::DeliveryAck& ack) override {
    std::lock_guard lock(mu_);
    acks_.push_back(ack);
  }
  void Refused(const reverser::v1::Refusal& refusal) override {
    std::lock_guard lock(mu_);
    refusals_.push_back(refusal);
  }
  void RefusedFiles(const reverser::v1::RefusedFiles& files) override {
    std::lock_guard lock(mu_);
    refused_files_.push_back(files);
  }
  void ResyncRequested(const reverser::v1::ResyncRequest& request) override {
    std::lock_guard lock(mu_);
    resync_requests_.push_back(request);
  }
  std::vector<reverser::v1::ResyncRequest> resync_requests() const {
    std::lock_guard lock(mu_);
    return resync_requests_;
  }
  std::vector<reverser::v1::DeliveryAck> acks() const {
    std::lock_guard lock(mu_);
    return acks_;
  }
  void PathRefused(const reverser::v1::PathRefusal& refusal) override {
    std::lock_guard lock(mu_);
    path_refusals_.push_back(refusal);
  }
  std::vector<reverser::v1::Refusal> refusals() const {
    std::lock_guard lock(mu_);
    return refusals_;
  }
  std::vector<reverser::v1::PathRefusal> path_refusals() const {
    std::lock_guard lock(mu_);
    return path_refusals_;
  }
  // The refusals' messages, in order.
  std::vector<std::string> rejected() const {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    for (const auto& refusal : refusals_) out.push_back(refusal.message());
    return out;
  }
  std::vector<reverser::v1::RefusedFiles> refused_files() const {
    std::lock_guard lock(mu_);
    return refused_files_;
  }
  std::vector<uint64_t> accepted() const {
    std::lock_guard lock(mu_);
    return accepted_;
  }
  // The highest rv acked for a claim (0 when none).
  uint64_t AckedRv(const reverser::v1::Claim& claim) const {
    std::lock_guard lock(mu_);
    uint64_t rv = 0;
    for (const auto& ack : acks_) {
      if (ClaimKey(ack.claim()) == ClaimKey(claim))
        rv = std::max<uint64_t>(rv, ack.position().rv());
    }
    return rv;
  }

 private:
  mutable std::mutex mu_;
  std::vector<uint64_t> accepted_;
  std::vector<reverser::v1::DeliveryAck> acks_;
  std::vector<reverser::v1::Refusal> refusals_;
  std::vector<reverser::v1::RefusedFiles> refused_files_;
  std::vector<reverser::v1::ResyncRequest> resync_requests_;
  std::vector<reverser::v1::PathRefusal> path_refusals_;
};

// A splicer's side of one Deliver stream: sends messages with increasing sequences and collects
// every feedback message on a reader thread.
class DeliveryClient {
 public:
  explicit DeliveryClient(const std::string& target) {
    channel_ = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
    stub_ = reverser::v1::GitWorker::NewStub(channel_);
    stream_ = stub_->Deliver(&context_);
    reader_ = std::thread([this] {
      reverser::v1::DeliveryFeedback feedback;
      while (stream_->Read(&feedback)) {
        std::lock_guard lock(mu_);
        feedback_.push_back(feedback);
      }
    });
  }
  ~DeliveryClient() {
    context_.TryCancel();
    reader_.join();
  }

  uint64_t SendConfig(const reverser::v1::GitTargetConfig& config) {
    reverser::v1::DeliveryMessage message;
    *message.mutable_target_config() = config;
    return Send(message);
  }
  uint64_t SendResync(const reverser::v1::ClusterSnapshot& snapshot) {
    reverser::v1::DeliveryMessage message;
    *message.mutable_resync() = snapshot;
    return Send(message);
  }
  uint64_t SendEvent(const reverser::v1::LiveEvent& event) {
    reverser::v1::DeliveryMessage message;
    *message.mutable_event() = event;
    return Send(message);
  }
  uint64_t Send(reverser::v1::DeliveryMessage message) {
    message.set_sequence(++sequence_);
    if (!stream_->Write(message)) ++failed_writes_;
    return sequence_;
  }
  void Close() { stream_->WritesDone(); }
  // Messages the stream did not take (it was broken).
  int failed_writes() const { return failed_writes_; }

  std::vector<reverser::v1::DeliveryFeedback> Feedback() {
    std::lock_guard lock(mu_);
    return feedback_;
  }
  // The highest rv acked for a claim (of GitTarget `target` when given; 0 when none).
  uint64_t AckedRv(const reverser::v1::Claim& claim, const std::string& target = "") {
    uint64_t rv = 0;
    for (const auto& f : Feedback()) {
      if (!target.empty() && f.has_ack() && f.ack().target().name() != target) continue;
      if (f.has_ack() && ClaimKey(f.ack().claim()) == ClaimKey(claim)) {
        rv = std::max<uint64_t>(rv, f.ack().position().rv());
      }
    }
    return rv;
  }
  std::vector<uint64_t> Accepted() {
    std::vector<uint64_t> out;
    for (const auto& f : Feedback()) {
      if (f.payload_case() == reverser::v1::DeliveryFeedback::kAcceptedSequence) {
        out.push_back(f.accepted_sequence());
      }
    }
    return out;
  }
  std::vector<reverser::v1::Refusal> Refusals() {
    std::vector<reverser::v1::Refusal> out;
    for (const auto& f : Feedback()) {
      if (f.payload_case() == reverser::v1::DeliveryFeedback::kRefusal) out.push_back(f.refusal());
    }
    return out;
  }
  // The latest complete report of refused files per GitTarget name.
  std::map<std::string, reverser::v1::RefusedFiles> RefusedFiles() {
    std::map<std::string, reverser::v1::RefusedFiles> out;
    for (const auto& f : Feedback()) {
      if (f.payload_case() == reverser::v1::DeliveryFeedback::kRefusedFiles) {
        out[f.refused_files().target().name()] = f.refused_files();
      }
    }
    return out;
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<reverser::v1::GitWorker::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<
      grpc::ClientReaderWriter<reverser::v1::DeliveryMessage, reverser::v1::DeliveryFeedback>>
      stream_;
  std::thread reader_;
  std::mutex mu_;
  std::vector<reverser::v1::DeliveryFeedback> feedback_;
  uint64_t sequence_ = 0;
  int failed_writes_ = 0;
};

}  // namespace reverser::gitworker::testsupport
