#pragma once

// Author facts from the audit webhook, byte-compatible with gitops-reverser v0.36.0
// (docs/behaviour.md, Author attribution). `P` here is the prefix's reference() (the
// --reference_key_prefix); the wake-up stream `…:author:v1:recorded:<GR>` is reverser's own and
// lives under its value():
//   P:author:v1:audit:<GR>:object:<uid>:<rv>  exact fact        (uid and rv known)
//   P:author:v1:audit:<GR>:object:<uid>:last  last-writer copy  (every uid-bearing fact)
//   P:author:v1:audit:<GR>:rv:<rv>            rv-only hatch     (rv known, no uid)
//   P:author:v1:command:<commitRequestUID>    CommitRequest author (1 h)
// All audit facts carry the fact TTL. There are no tombstones: an aged-out fact is absent.
// Facts from the admission webhook (attribution without audit access) and the namespace
// deletions a cascade is credited to are reverser's own families (keys.h, AdmissionFactKey and
// NamespaceDeletionKey), also with the fact TTL.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "libs/redisstore/keys.h"
#include "libs/redisstore/redis_connection.h"

namespace reverser::redisstore {

// Reference defaults: code default fact TTL 15 m (the chart passes 10 m), resolver grace 3 s
// polled every 150 ms (our resolver wakes on the fact signal and backs off to at most that),
// command-author TTL 1 h.
inline constexpr absl::Duration kDefaultAuthorFactTtl = absl::Minutes(15);
inline constexpr absl::Duration kDefaultAttributionGrace = absl::Seconds(3);
inline constexpr absl::Duration kAttributionPollInterval = absl::Milliseconds(150);
inline constexpr absl::Duration kCommandAuthorTtl = absl::Hours(1);

// The reference's `AuthorFact` JSON (field names are the JSON keys).
struct AuthorFact {
  std::string group_resource;       // groupResource: `resource` or `group/resource`
  std::string namespace_;           // namespace
  std::string name;                 // name
  std::string uid;                  // uid
  std::string author;               // author: effective username (impersonated user if present)
  std::string display_name;         // displayName
  std::string email;                // email
  std::string verb;                 // verb: create, update, patch, delete, deletecollection
  std::string subresource;          // subresource ("" or "scale")
  std::string audit_id;             // auditID
  std::string resource_version;     // resourceVersion: the post-write RV
  std::string stage_timestamp;      // stageTimestamp: RFC3339Nano UTC
  bool is_service_account = false;  // isServiceAccount: `system:serviceaccount:` prefix

  std::string ToJson() const;
  // Tolerates missing fields; InvalidArgument for non-JSON or wrongly typed fields.
  static absl::StatusOr<AuthorFact> FromJson(absl::string_view json);
  bool operator==(const AuthorFact&) const = default;
};

// The reference's resolution codes.
enum class AuthorResolutionCode {
  kAbsent,
  kExactUser,
  kExactServiceAccount,
  kWeak,
  kExactDeleteCollectionItem,
  // reverser's own: a fact recorded at admission (one candidate, or several of one user).
  kAdmission,
  // reverser's own: admission facts of two or more users for the change; never a guess, so
  // the committer.
  kAmbiguous,
  // reverser's own: a removal by the namespace controller, credited to whoever deleted the
  // namespace.
  kNamespaceDeletion,
};
absl::string_view AuthorResolutionCodeName(AuthorResolutionCode code);  // "exact_user", ...

struct AuthorResolution {
  AuthorResolutionCode code = AuthorResolutionCode::kAbsent;
  std::optional<AuthorFact> fact;  // set unless absent or ambiguous
  // A removal by the namespace controller whose namespace's deletion is not (yet) known: not
  // credited to the controller; worth asking again within the grace, then the committer's.
  bool awaiting_namespace_deletion = false;
};

// The user the namespace controller deletes a terminating namespace's contents as.
inline constexpr absl::string_view kNamespaceControllerUser =
    "system:serviceaccount:kube-system:namespace-controller";

// What the resolver knows about the event being attributed.
struct AuthorQuery {
  std::string group_resource;  // GroupResourceSegment(gvr)
  std::string uid;
  std::string resource_version;
  // ADDED/MODIFIED without deletionTimestamp. Exact-capable events never read `:last` (it may
  // name an older author); removals (DELETED or deletionTimestamp set) may.
  bool exact_capable = true;
  // For admission facts and the namespace cascade.
  std::string namespace_;  // the object's namespace, "" when cluster-scoped
  bool created = false;    // an ADDED entry (its create fact is keyed by uid)
  // The object's resourceVersion before this change, "" when unknown: an update's admission
  // fact is keyed by the version it was admitted against.
  std::string previous_resource_version;
  bool use_audit = true;       // the reference's audit facts
  bool use_admission = false;  // admission facts (AdmissionFact)
};

// What the admission webhook saw of one change: who asked, and what it was admitted against.
struct AdmissionFact {
  AdmissionChange change = AdmissionChange::kUpdate;
  std::string request_uid;           // the AdmissionReview request's uid
  std::string old_resource_version;  // kUpdate: the old object's resourceVersion
  // author, displayName (none at admission), groupResource, namespace, name, uid, verb
  // (create, update, delete), subresource, stageTimestamp, isServiceAccount; no auditID.
  AuthorFact fact;
};

// CommitRequest author captured at admission (`P:author:v1:command:<uid>`).
struct CommandAuthor {
  std::string author;
  std::string display_name;  // optional
  std::string email;         // optional
  std::string requested_at;  // RFC3339
};

class AuthorFactStore {
 public:
  AuthorFactStore(RedisConnection* redis, KeyPrefix prefix,
                  absl::Duration fact_ttl = kDefaultAuthorFactTtl);

  // Writes a fact under every key it qualifies for, in one MULTI/EXEC, each with the fact TTL:
  // uid+rv -> exact and `:last`; uid only -> `:last`; rv only -> `rv:`. A deletecollection item
  // (verb "deletecollection") goes to `:last` only. InvalidArgument without author,
  // groupResource, or both uid and rv.
  absl::Status Record(const AuthorFact& fact);

  // Records a webhook request's facts in one pipelined round trip however many, the wake-up
  // signals after the facts. Not a MULTI: facts are independent and idempotent, and a failure
  // (partial or not) is answered 500 so the API server resends the batch; queueing every
  // command in a transaction cost Redis time for no reader-visible gain. Facts Record would
  // refuse (InvalidArgument) are skipped, not failed: nothing can key them. One wake-up signal
  // per type in the batch. Returns how many facts were recorded.
  absl::StatusOr<size_t> RecordAll(const std::vector<AuthorFact>& facts);

  // One lookup in the reference's order (exact uid:rv; `:last` only for removals; `rv:`),
  // reading all candidate keys in one round trip. Unreadable or author-less facts are skipped,
  // and so, for a removal, are facts that record no removal (verb other than delete or
  // deletecollection): the removal then goes to the committer, never to the last writer.
  //
  // With use_admission, admission facts of the change are read in the same round trip and
  // used when the audit facts name no one: one user among the candidates is kAdmission, two or
  // more kAmbiguous (no fact). A removal whose fact names the namespace controller is credited
  // to the namespace's deleter (kNamespaceDeletion) when that is known, else to no one
  // (awaiting_namespace_deletion).
  absl::StatusOr<AuthorResolution> Lookup(const AuthorQuery& query);

  // Records one admitted change under its AdmissionFactKey (request uid -> fact, so a resent
  // review is one candidate), a namespace DELETE also under NamespaceDeletionKey, then the
  // type's wake-up signal; pipelined. InvalidArgument without author, groupResource, uid,
  // request uid, or (update) old resourceVersion.
  absl::Status RecordAdmission(const AdmissionFact& admitted);

  // The newest fact signal of a type (`AuthorFactSignalKey`), "0-0" when none: where a reader
  // starts watching for facts recorded after now.
  absl::StatusOr<std::string> LatestSignal(absl::string_view group_resource);

  // Number of audit fact keys (the reference's telemetry gauge; SCAN, batch 100).
  absl::StatusOr<int64_t> CountFacts();

  absl::Status RecordCommandAuthor(absl::string_view commit_request_uid,
                                   const CommandAuthor& author);
  absl::StatusOr<std::optional<CommandAuthor>> LookupCommandAuthor(
      absl::string_view commit_request_uid);

 private:
  RedisConnection* redis_;
  KeyPrefix prefix_;
  // Checks a fact and appends its SETs (not the signal) to `writes`.
  absl::Status AppendFactWrites(const AuthorFact& fact, std::vector<RedisCommand>& writes) const;
  RedisCommand SignalWrite(absl::string_view group_resource, absl::string_view uid) const;
  // A namespace's DELETE is also kept by the namespace's name, for crediting its cascade.
  void AppendNamespaceDeletion(const AuthorFact& fact, const std::string& json,
                               std::vector<RedisCommand>& writes) const;

  int64_t ttl_seconds_;
};

}  // namespace reverser::redisstore
