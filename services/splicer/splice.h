#pragma once

// The splice and the live-event derivation for one (GitTarget, type, scope), as pure functions
// over what the materializer stored (docs/design.md, Splice, watermark and delivery;
// docs/behaviour.md, Watching and replay and Sanitization):
//   * BuildSnapshot: checkpoint R + stream entries after R, folded last-writer-wins with deletes
//     dropping, scoped to the target's namespaces, sanitized → ClusterSnapshot{Desired,
//     Revision, CoverageHead}. No checkpoint → no snapshot (fail closed).
//   * DeriveEvent: one stream entry → the live event the target must see, or nothing:
//     namespace scope, deletion-as-intent (deletionTimestamp ⇒ DELETE), the operation filter,
//     sanitization, and the no-op dedup by content hash per (target, type, uid).
// Objects nested deeper than the sanitizer takes (sanitize::kMaxDepth; the materializer stores
// up to the API server's 10,000 levels) are measured on their stored text and never parsed or
// walked: a snapshot lists them in `refused` (identity only), a live change of one is skipped
// (kTooDeep), and its deletion goes out with an identity-only body.

#include <map>
#include <optional>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "libs/redisstore/materialization_store.h"
#include "proto/reverser/v1/catalog.pb.h"
#include "proto/reverser/v1/splicer.pb.h"

namespace reverser::splicer {

// What one target selects from one claim: namespaces ("" = all) → operations.
struct TargetScope {
  std::map<std::string, reverser::v1::OperationSet> namespaces;
  bool sensitive = false;  // the type is sensitive (core Secrets, configured types)

  // The operations selected for an object in `ns`, or nullopt when the namespace is not watched.
  std::optional<reverser::v1::OperationSet> OperationsFor(const std::string& ns) const;
  static TargetScope From(const reverser::v1::WatchedType& type);

  bool operator==(const TargetScope& other) const;
};

bool Contains(const reverser::v1::OperationSet& set, reverser::v1::Operation op);

// Per (target, type): uid → content hash of the last routed object.
using DedupCache = std::map<std::string, std::string>;

// Whether a stored object nests deeper than can be delivered (sanitize::kMaxDepth), measured on
// its JSON text without parsing it.
bool TooDeepToDeliver(absl::string_view object_json);

// The body of an object whose JSON is not delivered: identity and kind only.
reverser::v1::ObjectBody IdentityBody(const reverser::v1::GroupVersionResource& gvr,
                                      const std::string& kind, const std::string& ns,
                                      const std::string& name, const std::string& uid,
                                      bool sensitive);

// Builds the snapshot from a loaded view. FailedPrecondition when there is no checkpoint.
// With `dedup`, also seeds it with what the snapshot holds (as SeedDedup would, without parsing
// every desired body a second time).
absl::StatusOr<reverser::v1::ClusterSnapshot> BuildSnapshot(
    const redisstore::MaterializationView& view, const TargetScope& scope,
    const reverser::v1::GitTargetRef& target, const reverser::v1::Claim& claim,
    DedupCache* dedup = nullptr);

struct DerivedEvent {
  reverser::v1::Operation operation = reverser::v1::OPERATION_UNSPECIFIED;
  reverser::v1::ObjectBody object;
  bool removal = false;  // DELETED, or deletionTimestamp set (author lookup may use `:last`)
};

// Why an entry produced no event (for metrics).
enum class SkipReason {
  kNone,
  kOutOfScope,
  kOperationFiltered,
  kUnchanged,
  kMalformed,
  kTooDeep,  // TooDeepToDeliver: refused (the caller reports it)
};
const char* SkipReasonName(SkipReason reason);

struct Derivation {
  std::optional<DerivedEvent> event;
  SkipReason skipped = SkipReason::kNone;
};

// `kind` (the claim's) names the object in an identity-only body.
Derivation DeriveEvent(const redisstore::StreamEntry& entry, const TargetScope& scope,
                       const reverser::v1::GroupVersionResource& gvr, DedupCache& dedup,
                       const std::string& kind = "");

// Seeds the dedup cache from a snapshot (what the target now holds). Parses every body: prefer
// BuildSnapshot's `dedup` when the snapshot is built here.
void SeedDedup(const reverser::v1::ClusterSnapshot& snapshot, DedupCache& dedup);

}  // namespace reverser::splicer
