#include "libs/redisstore/author_fact_store.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "libs/core/status.h"
#include "libs/fastjson/canonical.h"
#include "nlohmann/json.hpp"

namespace reverser::redisstore {
namespace {

constexpr absl::string_view kDeleteCollection = "deletecollection";
constexpr absl::string_view kDelete = "delete";

// Reads a string field; absent or null is "", any other type is an error.
absl::Status ReadString(const nlohmann::json& j, const char* field, std::string& out) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat("author fact field ", field, " is not a string"));
  }
  out = it->get<std::string>();
  return absl::OkStatus();
}

int64_t TtlSeconds(absl::Duration ttl) {
  return std::max<int64_t>(1, absl::ToInt64Seconds(absl::Ceil(ttl, absl::Seconds(1))));
}

}  // namespace

std::string AuthorFact::ToJson() const {
  // Written directly, in the bytes nlohmann's dump() gives (keys in its sorted order): this runs
  // for every fact the audit webhook records, and building a JSON object for each was the
  // webhook's largest cost after decoding.
  std::string out;
  out.reserve(160 + group_resource.size() + namespace_.size() + name.size() + uid.size() +
              author.size() + display_name.size() + email.size() + audit_id.size() +
              stage_timestamp.size());
  auto field = [&out](absl::string_view key, absl::string_view value) {
    out.append(out.empty() ? "{\"" : ",\"").append(key.data(), key.size()).append("\":");
    fastjson::AppendQuoted(std::string_view(value.data(), value.size()), out);
  };
  field("auditID", audit_id);
  field("author", author);
  field("displayName", display_name);
  field("email", email);
  field("groupResource", group_resource);
  out.append(is_service_account ? ",\"isServiceAccount\":true" : ",\"isServiceAccount\":false");
  field("name", name);
  field("namespace", namespace_);
  field("resourceVersion", resource_version);
  field("stageTimestamp", stage_timestamp);
  field("subresource", subresource);
  field("uid", uid);
  field("verb", verb);
  out.push_back('}');
  return out;
}

absl::StatusOr<AuthorFact> AuthorFact::FromJson(absl::string_view json) {
  nlohmann::json j = nlohmann::json::parse(json.begin(), json.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("author fact is not a JSON object");
  }
  AuthorFact fact;
  RETURN_IF_ERROR(ReadString(j, "groupResource", fact.group_resource));
  RETURN_IF_ERROR(ReadString(j, "namespace", fact.namespace_));
  RETURN_IF_ERROR(ReadString(j, "name", fact.name));
  RETURN_IF_ERROR(ReadString(j, "uid", fact.uid));
  RETURN_IF_ERROR(ReadString(j, "author", fact.author));
  RETURN_IF_ERROR(ReadString(j, "displayName", fact.display_name));
  RETURN_IF_ERROR(ReadString(j, "email", fact.email));
  RETURN_IF_ERROR(ReadString(j, "verb", fact.verb));
  RETURN_IF_ERROR(ReadString(j, "subresource", fact.subresource));
  RETURN_IF_ERROR(ReadString(j, "auditID", fact.audit_id));
  RETURN_IF_ERROR(ReadString(j, "resourceVersion", fact.resource_version));
  RETURN_IF_ERROR(ReadString(j, "stageTimestamp", fact.stage_timestamp));
  if (auto it = j.find("isServiceAccount"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) {
      return absl::InvalidArgumentError("author fact field isServiceAccount is not a boolean");
    }
    fact.is_service_account = it->get<bool>();
  }
  return fact;
}

absl::string_view AuthorResolutionCodeName(AuthorResolutionCode code) {
  switch (code) {
    case AuthorResolutionCode::kAbsent:
      return "absent";
    case AuthorResolutionCode::kExactUser:
      return "exact_user";
    case AuthorResolutionCode::kExactServiceAccount:
      return "exact_serviceaccount";
    case AuthorResolutionCode::kWeak:
      return "weak";
    case AuthorResolutionCode::kExactDeleteCollectionItem:
      return "exact_deletecollection_item";
    case AuthorResolutionCode::kAdmission:
      return "admission";
    case AuthorResolutionCode::kAmbiguous:
      return "ambiguous";
    case AuthorResolutionCode::kNamespaceDeletion:
      return "namespace_deletion";
  }
  return "absent";
}

AuthorFactStore::AuthorFactStore(RedisConnection* redis, KeyPrefix prefix, absl::Duration fact_ttl)
    : redis_(redis), prefix_(std::move(prefix)), ttl_seconds_(TtlSeconds(fact_ttl)) {}

absl::Status AuthorFactStore::AppendFactWrites(const AuthorFact& fact,
                                               std::vector<RedisCommand>& writes) const {
  if (fact.author.empty()) return absl::InvalidArgumentError("author fact without an author");
  if (fact.group_resource.empty()) {
    return absl::InvalidArgumentError("author fact without a groupResource");
  }
  if (fact.uid.empty() && fact.resource_version.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("author fact for ", fact.group_resource, " ",
                                                   fact.name,
                                                   " has neither uid nor resourceVersion"));
  }
  const std::string json = fact.ToJson();
  const std::string ttl = absl::StrCat(ttl_seconds_);
  const bool item_of_collection = fact.verb == kDeleteCollection;
  if (!fact.uid.empty()) {
    if (!fact.resource_version.empty() && !item_of_collection) {
      writes.push_back(
          {"SET", AuthorFactExactKey(prefix_, fact.group_resource, fact.uid, fact.resource_version),
           json, "EX", ttl});
    }
    writes.push_back(
        {"SET", AuthorFactLastKey(prefix_, fact.group_resource, fact.uid), json, "EX", ttl});
  } else {
    writes.push_back({"SET", AuthorFactRvKey(prefix_, fact.group_resource, fact.resource_version),
                      json, "EX", ttl});
  }
  AppendNamespaceDeletion(fact, json, writes);
  return absl::OkStatus();
}

RedisCommand AuthorFactStore::SignalWrite(absl::string_view group_resource,
                                          absl::string_view uid) const {
  // Wakes readers blocked on this type's stream (see WaitAfter's wake signal) without polling.
  return {"XADD",   AuthorFactSignalKey(prefix_, group_resource),
          "MAXLEN", "~",
          "1000",   "*",
          "uid",    std::string(uid)};
}

absl::Status AuthorFactStore::Record(const AuthorFact& fact) {
  std::vector<RedisCommand> writes;
  RETURN_IF_ERROR(AppendFactWrites(fact, writes));
  writes.push_back(SignalWrite(fact.group_resource, fact.uid));
  ASSIGN_OR_RETURN(std::vector<RedisReply> replies, redis_->Transaction(writes));
  for (const RedisReply& reply : replies) {
    if (reply.IsError()) return core::Annotate(reply.ErrorStatus(), "recording an author fact");
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> AuthorFactStore::RecordAll(const std::vector<AuthorFact>& facts) {
  std::vector<RedisCommand> writes;
  writes.reserve(facts.size() * 2 + 1);
  std::vector<std::pair<std::string, std::string>> signals;  // (type, last uid), first-seen order
  size_t recorded = 0;
  for (const AuthorFact& fact : facts) {
    absl::Status appended = AppendFactWrites(fact, writes);
    if (absl::IsInvalidArgument(appended)) continue;
    RETURN_IF_ERROR(appended);
    ++recorded;
    auto it = std::find_if(signals.begin(), signals.end(),
                           [&](const auto& s) { return s.first == fact.group_resource; });
    if (it == signals.end()) {
      signals.emplace_back(fact.group_resource, fact.uid);
    } else {
      it->second = fact.uid;
    }
  }
  if (recorded == 0) return recorded;
  for (const auto& [group_resource, uid] : signals)
    writes.push_back(SignalWrite(group_resource, uid));
  ASSIGN_OR_RETURN(std::vector<RedisReply> replies, redis_->Pipeline(writes));
  for (const RedisReply& reply : replies) {
    if (reply.IsError()) return core::Annotate(reply.ErrorStatus(), "recording author facts");
  }
  return recorded;
}

absl::StatusOr<AuthorResolution> AuthorFactStore::Lookup(const AuthorQuery& query) {
  enum class Kind { kExact, kLast, kRvHatch };
  std::vector<std::pair<Kind, std::string>> candidates;
  if (query.use_audit) {
    if (!query.uid.empty() && !query.resource_version.empty()) {
      candidates.push_back({Kind::kExact, AuthorFactExactKey(prefix_, query.group_resource,
                                                             query.uid, query.resource_version)});
    }
    if (!query.exact_capable && !query.uid.empty()) {
      candidates.push_back(
          {Kind::kLast, AuthorFactLastKey(prefix_, query.group_resource, query.uid)});
    }
    if (!query.resource_version.empty()) {
      candidates.push_back(
          {Kind::kRvHatch, AuthorFactRvKey(prefix_, query.group_resource, query.resource_version)});
    }
  }
  const bool removal = !query.exact_capable;
  std::optional<std::string> admission_key;
  if (query.use_admission && !query.uid.empty()) {
    if (removal) {
      admission_key =
          AdmissionFactKey(prefix_, query.group_resource, AdmissionChange::kDelete, query.uid);
    } else if (query.created) {
      admission_key =
          AdmissionFactKey(prefix_, query.group_resource, AdmissionChange::kCreate, query.uid);
    } else if (!query.previous_resource_version.empty()) {
      admission_key = AdmissionFactKey(prefix_, query.group_resource, AdmissionChange::kUpdate,
                                       query.uid, query.previous_resource_version);
    }
  }
  const bool cascade_possible = removal && !query.namespace_.empty();
  AuthorResolution resolution;
  if (candidates.empty() && !admission_key) return resolution;

  // One round trip: the audit candidates (and the namespace's deletion) in an MGET, the
  // admission candidates in an HGETALL.
  RedisCommand mget = {"MGET"};
  for (const auto& [kind, key] : candidates) mget.push_back(key);
  if (cascade_possible) mget.push_back(NamespaceDeletionKey(prefix_, query.namespace_));
  std::vector<RedisCommand> commands;
  if (mget.size() > 1) commands.push_back(std::move(mget));
  if (admission_key) commands.push_back({"HGETALL", *admission_key});
  ASSIGN_OR_RETURN(std::vector<RedisReply> replies, redis_->Pipeline(commands));
  for (const RedisReply& reply : replies) {
    if (reply.IsError()) return core::Annotate(reply.ErrorStatus(), "looking up an author");
  }
  const size_t mget_values = candidates.size() + (cascade_possible ? 1 : 0);
  const RedisReply* values = nullptr;
  if (mget_values > 0) {
    values = &replies[0];
    if (!values->IsArray() || values->elements().size() != mget_values) {
      return absl::InternalError(absl::StrCat("MGET: unexpected reply ", values->DebugString()));
    }
  }
  auto readable = [](const RedisReply& value) -> std::optional<AuthorFact> {
    if (value.type() != RedisReply::Type::kString) return std::nullopt;
    auto fact = AuthorFact::FromJson(value.str());
    if (!fact.ok() || fact->author.empty()) return std::nullopt;  // unreadable: as if absent
    return std::move(*fact);
  };
  // The namespace controller removes what a namespace's deleter asked to remove.
  auto credit = [&](AuthorResolution found) -> AuthorResolution {
    if (!removal || found.fact->author != kNamespaceControllerUser) return found;
    std::optional<AuthorFact> deleter;
    if (cascade_possible) deleter = readable(values->elements()[candidates.size()]);
    AuthorResolution credited;
    if (deleter) {
      credited.code = AuthorResolutionCode::kNamespaceDeletion;
      credited.fact = std::move(deleter);
    } else {
      credited.awaiting_namespace_deletion = true;
    }
    return credited;
  };

  for (size_t i = 0; i < candidates.size(); ++i) {
    std::optional<AuthorFact> fact = readable(values->elements()[i]);
    if (!fact) continue;
    // A removal is credited only to a fact that records one: the last writer of an object
    // garbage-collected or cascaded away did not remove it.
    if (removal && fact->verb != kDelete && fact->verb != kDeleteCollection) continue;
    if (fact->verb == kDeleteCollection) {
      resolution.code = AuthorResolutionCode::kExactDeleteCollectionItem;
    } else if (candidates[i].first == Kind::kExact) {
      resolution.code = fact->is_service_account ? AuthorResolutionCode::kExactServiceAccount
                                                 : AuthorResolutionCode::kExactUser;
    } else {
      resolution.code = AuthorResolutionCode::kWeak;
    }
    resolution.fact = std::move(*fact);
    return credit(std::move(resolution));
  }
  if (!admission_key) return resolution;

  const RedisReply& admitted = replies.back();
  if (!admitted.IsArray()) {
    return absl::InternalError(absl::StrCat("HGETALL: unexpected reply ", admitted.DebugString()));
  }
  std::optional<AuthorFact> chosen;
  bool ambiguous = false;
  for (size_t i = 1; i < admitted.elements().size(); i += 2) {
    std::optional<AuthorFact> fact = readable(admitted.elements()[i]);
    if (!fact) continue;
    if (!chosen) {
      chosen = std::move(fact);
    } else if (chosen->author != fact->author) {
      ambiguous = true;  // two users asked for this change: no guessing
    } else if (fact->stage_timestamp > chosen->stage_timestamp) {
      chosen = std::move(fact);  // the same user twice: the newer request
    }
  }
  if (ambiguous) {
    resolution.code = AuthorResolutionCode::kAmbiguous;
    return resolution;
  }
  if (!chosen) return resolution;
  resolution.code = AuthorResolutionCode::kAdmission;
  resolution.fact = std::move(chosen);
  return credit(std::move(resolution));
}

absl::Status AuthorFactStore::RecordAdmission(const AdmissionFact& admitted) {
  const AuthorFact& fact = admitted.fact;
  if (fact.author.empty() || fact.group_resource.empty() || fact.uid.empty() ||
      admitted.request_uid.empty()) {
    return absl::InvalidArgumentError(
        "an admission fact needs an author, a groupResource, an object uid and a request uid");
  }
  if (admitted.change == AdmissionChange::kUpdate && admitted.old_resource_version.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the update of ", fact.group_resource, " ",
                                                   fact.namespace_, "/", fact.name,
                                                   " has no old resourceVersion"));
  }
  const std::string key = AdmissionFactKey(prefix_, fact.group_resource, admitted.change, fact.uid,
                                           admitted.old_resource_version);
  const std::string ttl = absl::StrCat(ttl_seconds_);
  const std::string json = fact.ToJson();
  std::vector<RedisCommand> writes = {{"HSET", key, admitted.request_uid, json},
                                      {"EXPIRE", key, ttl}};
  AppendNamespaceDeletion(fact, json, writes);
  writes.push_back(SignalWrite(fact.group_resource, fact.uid));
  ASSIGN_OR_RETURN(std::vector<RedisReply> replies, redis_->Pipeline(writes));
  for (const RedisReply& reply : replies) {
    if (reply.IsError()) return core::Annotate(reply.ErrorStatus(), "recording an admission fact");
  }
  return absl::OkStatus();
}

void AuthorFactStore::AppendNamespaceDeletion(const AuthorFact& fact, const std::string& json,
                                              std::vector<RedisCommand>& writes) const {
  if (fact.group_resource != "namespaces" || fact.verb != kDelete || fact.name.empty()) return;
  writes.push_back(
      {"SET", NamespaceDeletionKey(prefix_, fact.name), json, "EX", absl::StrCat(ttl_seconds_)});
}

absl::StatusOr<int64_t> AuthorFactStore::CountFacts() {
  int64_t count = 0;
  std::string cursor = "0";
  do {
    ASSIGN_OR_RETURN(
        RedisReply reply,
        redis_->Command({"SCAN", cursor, "MATCH", AuthorFactPattern(prefix_), "COUNT", "100"}));
    if (!reply.IsArray() || reply.elements().size() != 2) {
      return absl::InternalError(absl::StrCat("SCAN: unexpected reply ", reply.DebugString()));
    }
    ASSIGN_OR_RETURN(cursor, reply.elements()[0].AsString());
    count += static_cast<int64_t>(reply.elements()[1].elements().size());
  } while (cursor != "0");
  return count;
}

absl::StatusOr<std::string> AuthorFactStore::LatestSignal(absl::string_view group_resource) {
  ASSIGN_OR_RETURN(RedisReply reply,
                   redis_->Command({"XREVRANGE", AuthorFactSignalKey(prefix_, group_resource), "+",
                                    "-", "COUNT", "1"}));
  if (reply.elements().empty()) return std::string("0-0");
  const RedisReply& entry = reply.elements()[0];
  if (entry.elements().empty()) return absl::InternalError("malformed XREVRANGE reply");
  return entry.elements()[0].AsString();
}

absl::Status AuthorFactStore::RecordCommandAuthor(absl::string_view commit_request_uid,
                                                  const CommandAuthor& author) {
  if (commit_request_uid.empty() || author.author.empty()) {
    return absl::InvalidArgumentError("command author needs a CommitRequest uid and an author");
  }
  nlohmann::json j = {{"author", author.author}, {"requestedAt", author.requested_at}};
  if (!author.display_name.empty()) j["displayName"] = author.display_name;
  if (!author.email.empty()) j["email"] = author.email;
  return redis_
      ->Command({"SET", CommandAuthorKey(prefix_, commit_request_uid), j.dump(), "EX",
                 absl::StrCat(TtlSeconds(kCommandAuthorTtl))})
      .status();
}

absl::StatusOr<std::optional<CommandAuthor>> AuthorFactStore::LookupCommandAuthor(
    absl::string_view commit_request_uid) {
  ASSIGN_OR_RETURN(RedisReply reply,
                   redis_->Command({"GET", CommandAuthorKey(prefix_, commit_request_uid)}));
  ASSIGN_OR_RETURN(std::optional<std::string> json, reply.AsOptionalString());
  if (!json) return std::optional<CommandAuthor>();
  nlohmann::json j = nlohmann::json::parse(*json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("command author is not a JSON object");
  }
  CommandAuthor author;
  RETURN_IF_ERROR(ReadString(j, "author", author.author));
  RETURN_IF_ERROR(ReadString(j, "displayName", author.display_name));
  RETURN_IF_ERROR(ReadString(j, "email", author.email));
  RETURN_IF_ERROR(ReadString(j, "requestedAt", author.requested_at));
  if (author.author.empty()) return std::optional<CommandAuthor>();
  return std::optional<CommandAuthor>(std::move(author));
}

}  // namespace reverser::redisstore
