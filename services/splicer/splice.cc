#include "services/splicer/splice.h"

#include <google/protobuf/util/message_differencer.h>

#include "libs/core/json_depth.h"
#include "libs/core/proto_convert.h"
#include "libs/sanitize/sanitize.h"
#include "nlohmann/json.hpp"

namespace reverser::splicer {
namespace {

using nlohmann::json;

std::string Meta(const json& object, const char* key) {
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return "";
  auto it = meta->find(key);
  return it != meta->end() && it->is_string() ? it->get<std::string>() : "";
}

bool HasDeletionTimestamp(const json& object) {
  auto meta = object.find("metadata");
  return meta != object.end() && meta->is_object() && meta->contains("deletionTimestamp") &&
         !(*meta)["deletionTimestamp"].is_null();
}

// The sanitized body and identity of one stored object.
std::optional<reverser::v1::ObjectBody> MakeBody(const json& object,
                                                 const reverser::v1::GroupVersionResource& gvr,
                                                 bool sensitive, std::string* hash) {
  auto sanitized = sanitize::Sanitize(object);
  if (!sanitized.ok()) return std::nullopt;
  reverser::v1::ObjectBody body;
  *body.mutable_ref()->mutable_gvr() = gvr;
  body.mutable_ref()->set_namespace_(Meta(object, "namespace"));
  body.mutable_ref()->set_name(Meta(object, "name"));
  body.mutable_ref()->set_uid(Meta(object, "uid"));
  body.mutable_gvk()->set_group(gvr.group());
  body.mutable_gvk()->set_version(gvr.version());
  if (auto kind = object.find("kind"); kind != object.end() && kind->is_string()) {
    body.mutable_gvk()->set_kind(kind->get<std::string>());
  }
  body.set_resource_version(Meta(object, "resourceVersion"));
  body.set_sanitized_json(sanitized->dump(-1, ' ', false, json::error_handler_t::replace));
  body.set_sensitive(sensitive);
  if (hash != nullptr) *hash = sanitize::ContentHash(*sanitized);
  return body;
}

// The fold of the view (MaterializationView::Fold) without copying any object body: identity →
// the stored JSON it ends with, pointing into `view`. A whole type can be hundreds of MiB.
std::map<std::string, const std::string*> FoldByReference(
    const redisstore::MaterializationView& view) {
  std::map<std::string, const std::string*> objects;
  for (const auto& [identity, body] : view.checkpoint_items) {
    objects.emplace_hint(objects.end(), identity, &body);
  }
  for (const redisstore::StreamEntry& entry : view.tail) {
    if (entry.op == redisstore::ChangeOp::kDeleted) {
      objects.erase(entry.Identity());
    } else {
      objects[entry.Identity()] = &entry.object_json;
    }
  }
  return objects;
}

// The dedup cache key of a desired object: its uid, or its identity when it has none.
std::string DedupKey(const reverser::v1::ObjectBody& body) {
  return body.ref().uid().empty()
             ? redisstore::ObjectIdentity(body.ref().namespace_(), body.ref().name())
             : body.ref().uid();
}

}  // namespace

bool TooDeepToDeliver(absl::string_view object_json) {
  return core::JsonNestingDepth(object_json, sanitize::kMaxDepth) > sanitize::kMaxDepth;
}

reverser::v1::ObjectBody IdentityBody(const reverser::v1::GroupVersionResource& gvr,
                                      const std::string& kind, const std::string& ns,
                                      const std::string& name, const std::string& uid,
                                      bool sensitive) {
  reverser::v1::ObjectBody body;
  *body.mutable_ref()->mutable_gvr() = gvr;
  body.mutable_ref()->set_namespace_(ns);
  body.mutable_ref()->set_name(name);
  body.mutable_ref()->set_uid(uid);
  body.mutable_gvk()->set_group(gvr.group());
  body.mutable_gvk()->set_version(gvr.version());
  body.mutable_gvk()->set_kind(kind);
  body.set_sensitive(sensitive);
  return body;
}

bool Contains(const reverser::v1::OperationSet& set, reverser::v1::Operation op) {
  if (set.all() || set.operations_size() == 0) return true;
  for (int o : set.operations()) {
    if (o == op) return true;
  }
  return false;
}

std::optional<reverser::v1::OperationSet> TargetScope::OperationsFor(const std::string& ns) const {
  if (auto it = namespaces.find(""); it != namespaces.end()) return it->second;
  if (auto it = namespaces.find(ns); it != namespaces.end()) return it->second;
  return std::nullopt;
}

bool TargetScope::operator==(const TargetScope& other) const {
  if (sensitive != other.sensitive || namespaces.size() != other.namespaces.size()) return false;
  for (auto a = namespaces.begin(), b = other.namespaces.begin(); a != namespaces.end(); ++a, ++b) {
    if (a->first != b->first ||
        !google::protobuf::util::MessageDifferencer::Equals(a->second, b->second)) {
      return false;
    }
  }
  return true;
}

TargetScope TargetScope::From(const reverser::v1::WatchedType& type) {
  TargetScope scope;
  for (const auto& [ns, ops] : type.namespaces()) scope.namespaces[ns] = ops;
  scope.sensitive = type.sensitive();
  return scope;
}

absl::StatusOr<reverser::v1::ClusterSnapshot> BuildSnapshot(
    const redisstore::MaterializationView& view, const TargetScope& scope,
    const reverser::v1::GitTargetRef& target, const reverser::v1::Claim& claim,
    DedupCache* dedup) {
  if (!view.checkpoint.has_value()) {
    return absl::FailedPreconditionError("no checkpoint yet: the type is still replaying");
  }
  reverser::v1::ClusterSnapshot snapshot;
  *snapshot.mutable_target() = target;
  *snapshot.mutable_claim() = claim;
  snapshot.set_revision(view.checkpoint->rv());
  *snapshot.mutable_coverage_head() = core::ToProto(view.CoverageHead());
  if (dedup != nullptr) dedup->clear();
  for (const auto& [identity, body_json] : FoldByReference(view)) {
    // The identity is `namespace/name` (names never hold '/'): a target that follows some
    // namespaces of a cluster-wide materialization skips the others unparsed.
    const size_t slash = identity.find('/');
    if (!scope.OperationsFor(slash == std::string::npos ? std::string() : identity.substr(0, slash))
             .has_value()) {
      continue;
    }
    if (TooDeepToDeliver(*body_json)) {
      // Unparsed: its identity is all the gitworker needs to keep its file.
      *snapshot.add_refused() = IdentityBody(
          claim.type().gvr(), claim.type().gvk().kind(),
          slash == std::string::npos ? std::string() : identity.substr(0, slash),
          slash == std::string::npos ? identity : identity.substr(slash + 1), "", scope.sensitive);
      continue;
    }
    json object = json::parse(*body_json, nullptr, false);
    if (object.is_discarded() || !object.is_object()) continue;
    if (!scope.OperationsFor(Meta(object, "namespace")).has_value()) continue;
    // An object being deleted is intent to delete: it is not desired.
    if (HasDeletionTimestamp(object)) continue;
    std::string hash;
    auto body = MakeBody(object, claim.type().gvr(), scope.sensitive, dedup ? &hash : nullptr);
    if (!body) continue;
    if (dedup != nullptr) (*dedup)[DedupKey(*body)] = std::move(hash);
    *snapshot.add_desired() = std::move(*body);
  }
  return snapshot;
}

const char* SkipReasonName(SkipReason reason) {
  switch (reason) {
    case SkipReason::kNone:
      return "none";
    case SkipReason::kOutOfScope:
      return "out_of_scope";
    case SkipReason::kOperationFiltered:
      return "operation_filtered";
    case SkipReason::kUnchanged:
      return "unchanged";
    case SkipReason::kMalformed:
      return "malformed";
    case SkipReason::kTooDeep:
      return "too_deep";
  }
  return "unknown";
}

Derivation DeriveEvent(const redisstore::StreamEntry& entry, const TargetScope& scope,
                       const reverser::v1::GroupVersionResource& gvr, DedupCache& dedup,
                       const std::string& kind) {
  Derivation out;
  auto ops = scope.OperationsFor(entry.namespace_);
  if (!ops) {
    out.skipped = SkipReason::kOutOfScope;
    return out;
  }
  if (TooDeepToDeliver(entry.object_json)) {
    const std::string uid = entry.uid.empty() ? entry.Identity() : entry.uid;
    // Whatever version is deliverable next is sent, even one equal to what Git last got.
    dedup.erase(uid);
    if (entry.op != redisstore::ChangeOp::kDeleted) {
      out.skipped = SkipReason::kTooDeep;
      return out;
    }
    // A deletion needs only the identity.
    if (!Contains(*ops, reverser::v1::OPERATION_DELETE)) {
      out.skipped = SkipReason::kOperationFiltered;
      return out;
    }
    DerivedEvent event;
    event.removal = true;
    event.operation = reverser::v1::OPERATION_DELETE;
    event.object =
        IdentityBody(gvr, kind, entry.namespace_, entry.name, entry.uid, scope.sensitive);
    event.object.set_resource_version(entry.resource_version);
    out.event = std::move(event);
    return out;
  }
  json object = json::parse(entry.object_json, nullptr, false);
  if (object.is_discarded() || !object.is_object()) {
    out.skipped = SkipReason::kMalformed;
    return out;
  }
  DerivedEvent event;
  event.removal = entry.op == redisstore::ChangeOp::kDeleted || HasDeletionTimestamp(object);
  event.operation = event.removal                               ? reverser::v1::OPERATION_DELETE
                    : entry.op == redisstore::ChangeOp::kAdded ? reverser::v1::OPERATION_CREATE
                                                                : reverser::v1::OPERATION_UPDATE;
  if (!Contains(*ops, event.operation)) {
    out.skipped = SkipReason::kOperationFiltered;
    return out;
  }
  std::string hash;
  auto body = MakeBody(object, gvr, scope.sensitive, &hash);
  if (!body) {
    out.skipped = SkipReason::kMalformed;
    return out;
  }
  std::string uid = entry.uid.empty() ? entry.Identity() : entry.uid;
  if (event.operation == reverser::v1::OPERATION_DELETE) {
    // A repeated delete (finalizer updates after deletionTimestamp, the final DELETED) is routed
    // again; the writer folds it to a no-op. The cache entry goes so a re-create routes.
    dedup.erase(uid);
  } else {
    auto it = dedup.find(uid);
    if (event.operation == reverser::v1::OPERATION_UPDATE && it != dedup.end() &&
        it->second == hash) {
      out.skipped = SkipReason::kUnchanged;
      return out;
    }
    dedup[uid] = hash;
  }
  event.object = std::move(*body);
  out.event = std::move(event);
  return out;
}

void SeedDedup(const reverser::v1::ClusterSnapshot& snapshot, DedupCache& dedup) {
  dedup.clear();
  for (const auto& body : snapshot.desired()) {
    json sanitized = json::parse(body.sanitized_json(), nullptr, false);
    if (sanitized.is_discarded()) continue;
    dedup[DedupKey(body)] = sanitize::ContentHash(sanitized);
  }
}

}  // namespace reverser::splicer
