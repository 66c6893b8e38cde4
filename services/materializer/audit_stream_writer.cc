#include "services/materializer/audit_stream_writer.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "libs/core/status.h"
#include "services/materializer/audit_changes.h"
#include "services/materializer/stream_entries.h"

namespace reverser::materializer {
namespace {

// Entries read per XREVRANGE while looking for an object's last body.
constexpr int kLookupBatch = 256;

}  // namespace

AuditStreamWriter::AuditStreamWriter(redisstore::RedisOptions options,
                                     redisstore::KeyPrefix prefix, ClaimRegistry* claims,
                                     runtime::MetricsRegistry* metrics,
                                     const redisstore::BodyCipher* body_cipher)
    : options_(std::move(options)),
      prefix_(std::move(prefix)),
      claims_(claims),
      metrics_(metrics),
      body_cipher_(body_cipher) {}

redisstore::MaterializationStore AuditStreamWriter::StoreFor(const ClaimKey& claim,
                                                             const ClaimRegistry::Reader& claims) {
  redisstore::MaterializationStore store(redis_.get(), prefix_, claim.first, claim.second);
  store.UseBodyCipher(body_cipher_, claims.Sensitive(claim));
  return store;
}

void AuditStreamWriter::Count(const core::GroupVersionResource& gvr, absl::string_view outcome) {
  metrics_
      ->GetCounter("reverser_materializer_audit_entries_total",
                   "Audit-intake changes by outcome (appended, diverted_<reason>, unclaimed, "
                   "skipped_<reason>).",
                   {{"group", gvr.group},
                    {"version", gvr.version},
                    {"resource", gvr.resource},
                    {"outcome", std::string(outcome)}})
      .Increment();
}

absl::StatusOr<AuditStreamWriter::LastKnown> AuditStreamWriter::FindLastKnown(
    redisstore::MaterializationStore& store, const std::string& identity) {
  // Newest first: the first entry for the identity is its latest state.
  std::string end = "+";
  while (true) {
    ASSIGN_OR_RETURN(redisstore::RedisReply reply,
                     redis_->Command({"XREVRANGE", store.keys().stream, end, "-", "COUNT",
                                      absl::StrCat(kLookupBatch)}));
    RETURN_IF_ERROR(reply.ErrorStatus());
    if (!reply.IsArray() || reply.elements().empty()) break;
    std::string last_id;
    for (const redisstore::RedisReply& item : reply.elements()) {
      if (!item.IsArray() || item.elements().size() != 2) continue;
      auto id = item.elements()[0].AsString();
      auto fields = item.elements()[1].AsStringArray();
      if (!id.ok() || !fields.ok()) continue;
      last_id = *id;
      auto entry = redisstore::DecodeEntry(*id, *fields);
      if (!entry.ok() || entry->Identity() != identity) continue;
      LastKnown found;
      found.deleted = entry->op == redisstore::ChangeOp::kDeleted;
      if (!found.deleted) {
        RETURN_IF_ERROR(store.OpenStoredBody(entry->object_json, *id));
        found.body = entry->object_json;
      }
      return found;
    }
    if (reply.elements().size() < static_cast<size_t>(kLookupBatch) || last_id.empty()) break;
    end = absl::StrCat("(", last_id);  // exclusive: continue below the last one read
  }
  ASSIGN_OR_RETURN(redisstore::RedisReply item,
                   redis_->Command({"HGET", store.keys().checkpoint_items, identity}));
  ASSIGN_OR_RETURN(std::optional<std::string> body, item.AsOptionalString());
  if (body) RETURN_IF_ERROR(store.OpenStoredBody(*body, identity));
  LastKnown found;
  found.body = std::move(body);
  return found;
}

absl::Status AuditStreamWriter::Append(
    const std::vector<const audit::AuditEvent*>& accepted_events) {
  absl::MutexLock lock(&mu_);
  if (!redis_) {
    ASSIGN_OR_RETURN(redis_, redisstore::RedisConnection::Connect(options_));
  }
  // Held while writing: a withdrawn claim is not written to once Replace returns.
  ClaimRegistry::Reader claims = claims_->Read();
  // Entries go out per target in one AppendAll (one transaction for the request's changes of a
  // type, in order) rather than one Append each.
  struct Pending {
    std::vector<redisstore::StreamEntry> entries;
    std::vector<core::GroupVersionResource> gvrs;  // of each entry, for the counters
  };
  std::map<ClaimKey, Pending> pending;
  auto flush = [&]() -> absl::Status {
    mu_.AssertHeld();  // called only below, under the lock
    for (auto& [target, batch] : pending) {
      redisstore::MaterializationStore store = StoreFor(target, claims);
      ASSIGN_OR_RETURN(std::vector<redisstore::AppendResult> results,
                       store.AppendAll(batch.entries));
      for (size_t i = 0; i < results.size(); ++i) {
        if (results[i].appended) {
          Count(batch.gvrs[i], "appended");
          continue;
        }
        Count(batch.gvrs[i],
              absl::StrCat("diverted_", redisstore::DivertReasonName(*results[i].diverted)));
        // Out of order (or nowhere to attach): the stream may now miss this change. Repeats
        // (a retried request) and changes the checkpoint already holds need nothing.
        if (*results[i].diverted != redisstore::DivertReason::kDuplicateOfStreamTop &&
            *results[i].diverted != redisstore::DivertReason::kCoveredByCheckpoint) {
          claims_->RequestRelist(target);
        }
      }
    }
    pending.clear();
    return absl::OkStatus();
  };
  for (const audit::AuditEvent* event : accepted_events) {
    AuditChanges converted = ChangesFromAuditEvent(*event);
    if (converted.changes.empty()) {
      if (converted.skipped == AuditSkip::kNotAccepted) continue;  // nothing was written
      // Only claimed types are counted: everything else is not this intake's business. A change
      // of a claimed type that cannot be streamed is healed by an early LIST.
      for (const ClaimKey& claim : claims.MatchAnyVersion(converted.gvr, converted.namespace_)) {
        Count(claim.first, absl::StrCat("skipped_", AuditSkipName(converted.skipped)));
        claims_->RequestRelist(claim);
      }
      continue;
    }
    for (const AuditChange& change : converted.changes) {
      std::vector<ClaimKey> targets = claims.Match(change.gvr, change.namespace_);
      if (targets.empty()) {
        std::vector<ClaimKey> other = claims.MatchAnyVersion(change.gvr, change.namespace_);
        for (const ClaimKey& claim : other) claims_->RequestRelist(claim);
        Count(change.gvr, other.empty() ? "unclaimed" : "other_version");
        continue;
      }
      for (const ClaimKey& target : targets) {
        redisstore::StreamEntry entry = change.entry;
        if (change.body_from_materialization) {
          // The last known body must include this request's earlier changes.
          RETURN_IF_ERROR(flush());
          redisstore::MaterializationStore store = StoreFor(target, claims);
          ASSIGN_OR_RETURN(LastKnown last, FindLastKnown(store, entry.Identity()));
          if (last.deleted || !last.body) {
            Count(change.gvr, last.deleted ? "skipped_already_deleted" : "skipped_unknown_object");
            // An object this materialization does not hold (its state was lost, or is being
            // rebuilt): a LIST finds out whether it is still there.
            if (!last.deleted) claims_->RequestRelist(target);
            continue;
          }
          std::string last_uid = ObjectMetadata(
              nlohmann::json::parse(*last.body, nullptr, false), "uid");
          if (!entry.uid.empty() && !last_uid.empty() && last_uid != entry.uid) {
            Count(change.gvr, "skipped_other_incarnation");
            continue;
          }
          if (entry.uid.empty()) entry.uid = last_uid;
          entry.object_json = std::move(*last.body);
        }
        Pending& batch = pending[target];
        batch.entries.push_back(std::move(entry));
        batch.gvrs.push_back(change.gvr);
      }
    }
  }
  RETURN_IF_ERROR(flush());
  return absl::OkStatus();
}

}  // namespace reverser::materializer
