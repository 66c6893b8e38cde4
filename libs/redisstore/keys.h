#pragma once

// Every Redis key name this project reads or writes, in one place (documented in
// docs/redis-keys.md). `P` is the validated prefix; `GR` is `resource` for the core group and
// `group/resource` otherwise (never `resource.group`); scope is `cluster` or `ns:<namespace>`.
// The author-fact, command-author and watch-cursor families are byte-compatible with
// gitops-reverser v0.36.0 (docs/behaviour.md, Redis key schema of the reference) and are built
// under `KeyPrefix::reference()`: uid, rv and namespace segments are escaped one-way (`%` ->
// `%25`, `:` -> `%3A`) so a segment can never forge a key boundary.

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "libs/core/types.h"

namespace reverser::redisstore {

// The key prefixes: `value()` (`--redis_key_prefix`) names reverser's own families, and
// `reference()` (`--reference_key_prefix`, by default the same) the families shared with
// gitops-reverser v0.36.0 — author facts, CommitRequest authors, watch cursors — so setting it to
// the reference's prefix (`gitops-reverser`, its default) makes those keys byte-identical to the
// reference's while reverser's own keys stay where they are. Trailing `:` are trimmed; glob
// characters (`*?[]\`) and `%` are rejected, so a prefix can be used in SCAN MATCH patterns
// verbatim; a reference prefix must also be one the reference accepts (`[A-Za-z0-9._:-]`, at
// most 128 characters), or no reference install could share its keys.
class KeyPrefix {
 public:
  static constexpr absl::string_view kDefault = "reverser";
  // The reference's default prefix (the documented `--reference_key_prefix` value).
  static constexpr absl::string_view kReferenceDefault = "gitops-reverser";
  static constexpr size_t kMaxReferenceLength = 128;

  // Both families under `raw`.
  static absl::StatusOr<KeyPrefix> Parse(absl::string_view raw);
  // Own families under `raw`, reference-compatible ones under `reference` ("" = `raw`).
  static absl::StatusOr<KeyPrefix> Parse(absl::string_view raw, absl::string_view reference);
  static KeyPrefix Default() { return KeyPrefix(std::string(kDefault), std::string(kDefault)); }
  const std::string& value() const { return value_; }
  const std::string& reference() const { return reference_; }
  bool operator==(const KeyPrefix&) const = default;

 private:
  KeyPrefix(std::string value, std::string reference)
      : value_(std::move(value)), reference_(std::move(reference)) {}
  std::string value_;
  std::string reference_;
};

// `%` -> `%25`, `:` -> `%3A` (reference escaping for uid, rv and namespace segments).
std::string EscapeKeySegment(absl::string_view segment);
// Escapes glob metacharacters for a SCAN MATCH pattern.
std::string EscapeGlob(absl::string_view literal);

// `resource` (core) or `group/resource`.
std::string GroupResourceSegment(absl::string_view group, absl::string_view resource);
inline std::string GroupResourceSegment(const core::GroupVersionResource& gvr) {
  return GroupResourceSegment(gvr.group, gvr.resource);
}
// `cluster` or `ns:<escaped namespace>`.
std::string ScopeSegment(const core::WatchScope& scope);

// ---- Materialization (this project's own family) ----

// The keys of one (GR, scope) materialization.
struct MaterializationKeys {
  static MaterializationKeys For(const KeyPrefix& prefix, const core::GroupVersionResource& gvr,
                                 const core::WatchScope& scope);
  // The same keys from an index member (`<GR>:<scope>`), for boot-time enumeration.
  static MaterializationKeys ForIndexMember(const KeyPrefix& prefix, absl::string_view member);

  std::string base;              // P:mat:v1:{<GR>:<scope>} (a hash tag: one Cluster slot)
  std::string stream;            // …:stream       STREAM, IDs <rv>-<seq>
  std::string checkpoint_items;  // …:ckpt:items   HASH identity -> object JSON
  std::string checkpoint_rv;     // …:ckpt:rv      STRING checkpoint position <rv>-<seq>
  // …:ckpt:meta HASH `incarnation` (the checkpoint lineage's id) and `items` (how many items
  // the swap installed): written with every checkpoint, so a lost or damaged one is noticed.
  std::string checkpoint_meta;
  std::string state;         // …:state        STRING JSON
  std::string counts;        // …:counts       HASH appended / diverted:<reason> counters
  std::string index_member;  // <GR>:<scope>, the member of P:mat:v1:index

  // …:ckpt:items:next:<generation>: where a new checkpoint generation is written before the
  // swap (expires if the writer dies before swapping).
  std::string CheckpointStaging(absl::string_view generation) const;
};

// P:mat:v1:index — SET of index members (`<GR>:<scope>`) of every materialization.
std::string MaterializationIndexKey(const KeyPrefix& prefix);

// An index member split back into its parts.
struct IndexMember {
  std::string group_resource;  // `resource` or `group/resource`
  core::WatchScope scope;
};
absl::StatusOr<IndexMember> ParseIndexMember(absl::string_view member);

// ---- Delivery cursors (splicer) ----

// P:splice:v1:<targetUID>:<GR>:<scope>:acked — STRING stream position.
std::string SpliceAckedKey(const KeyPrefix& prefix, absl::string_view target_uid,
                           const core::GroupVersionResource& gvr, const core::WatchScope& scope);
// SCAN MATCH pattern for every acked key of one target (GitTarget deletion).
std::string SpliceAckedPattern(const KeyPrefix& prefix, absl::string_view target_uid);

// ---- Author facts from admission (this project's own family; docs/behaviour.md) ----

// What an admission fact is keyed by: a create and a delete by the object's uid, an update by
// the uid and the resourceVersion the update was admitted against.
enum class AdmissionChange { kCreate, kUpdate, kDelete };
// P:author:v1:admission:<GR>:create:<uid>, …:delete:<uid>, …:update:<uid>:<oldRV> — HASH,
// AdmissionReview request uid -> fact JSON: every request admitted for that change, so two
// candidates are seen as two.
std::string AdmissionFactKey(const KeyPrefix& prefix, absl::string_view group_resource,
                             AdmissionChange change, absl::string_view uid,
                             absl::string_view old_resource_version = "");
// P:author:v1:namespace-deletion:<namespace> — STRING, the fact of the namespace's DELETE: whom
// its cascade (the namespace controller's deletions) is credited to.
std::string NamespaceDeletionKey(const KeyPrefix& prefix, absl::string_view namespace_);

// ---- Ownership epochs (this project's own family; ownership_store.h) ----

// The keys of one unit's ownership. The unit key is used as given (it is not escaped): the
// family's fixed prefix and suffixes keep every unit's keys apart.
struct OwnershipKeys {
  static OwnershipKeys For(const KeyPrefix& prefix, absl::string_view unit);
  std::string epoch;  // P:own:v1:<unit>:epoch   STRING integer, INCR on every takeover
  std::string owner;  // P:own:v1:<unit>:owner   STRING the replica id that took that epoch
};

// ---- Reference-compatible families (gitops-reverser v0.36.0), under prefix.reference() ----

// P:author:v1:audit:<GR>:object:<uid>:<rv>
std::string AuthorFactExactKey(const KeyPrefix& prefix, absl::string_view group_resource,
                               absl::string_view uid, absl::string_view rv);
// P:author:v1:audit:<GR>:object:<uid>:last
std::string AuthorFactLastKey(const KeyPrefix& prefix, absl::string_view group_resource,
                              absl::string_view uid);
// P:author:v1:audit:<GR>:rv:<rv>
std::string AuthorFactRvKey(const KeyPrefix& prefix, absl::string_view group_resource,
                            absl::string_view rv);
// P:author:v1:audit:* (the reference's telemetry SCAN pattern).
std::string AuthorFactPattern(const KeyPrefix& prefix);
// P:author:v1:recorded:<GR> (reverser's own, under prefix.value()) — STREAM, one short entry per
// recorded fact (per type and batch for RecordAll): a wake-up signal for readers waiting on a fact
// of that type (outside `audit:*`, so the fact count ignores it).
std::string AuthorFactSignalKey(const KeyPrefix& prefix, absl::string_view group_resource);
// P:author:v1:command:<commitRequestUID>
std::string CommandAuthorKey(const KeyPrefix& prefix, absl::string_view commit_request_uid);
// P:watch:v1:target:<uid>:<GR>:namespace:<ns>:last-rv or …:<GR>:cluster:last-rv
std::string WatchCursorKey(const KeyPrefix& prefix, absl::string_view target_uid,
                           const core::GroupVersionResource& gvr, const core::WatchScope& scope);
// SCAN MATCH pattern for every watch cursor of one target (GitTarget deletion).
std::string WatchCursorPattern(const KeyPrefix& prefix, absl::string_view target_uid);

}  // namespace reverser::redisstore
