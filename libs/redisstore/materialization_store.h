#pragma once

// The Redis materialization of one (GVR, scope): an RV-ordered change stream plus a checkpoint
// (docs/design.md, Redis materialization). Invariants kept here, atomically, so no caller can
// break them:
//   * every stream entry lies strictly above the stream top AND above the checkpoint position;
//     an entry that would not is diverted (not written) and counted, never reordered;
//   * the checkpoint (items + position) is replaced in one step: a new generation is written to
//     a staging hash, then swapped in (RENAME) together with the new position, and only then is
//     the stream trimmed below it;
//   * checkpoint + the stream entries after its position == the current object set.
//
// Positions: the stream ID `<rv>-<seq>` (seq orders entries sharing an RV). The checkpoint
// position (`ckpt:rv`) is a full position too: a LIST at resourceVersion R covers everything up
// to `EndOf(R)` = `<R>-<max>`; a compaction covers exactly the last entry it folded.
//
// Lost state (lineage.h): every checkpoint records its incarnation and item count in
// `ckpt:meta`; a LIST-built checkpoint starts a new incarnation, a compaction keeps it. Reads
// return what they saw of it (a LineageMark), a checkpoint whose items do not match the count is
// never returned as usable, and a writer that guards its appends with a LineageTracker writes
// nothing onto a materialization that vanished or went backwards.
//
// Not thread-safe (it borrows one RedisConnection): one store per actor.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "libs/core/stream_position.h"
#include "libs/core/types.h"
#include "libs/redisstore/body_cipher.h"
#include "libs/redisstore/keys.h"
#include "libs/redisstore/lineage.h"
#include "libs/redisstore/ownership_store.h"
#include "libs/redisstore/redis_connection.h"
#include "libs/redisstore/stream_entry.h"

namespace reverser::redisstore {

enum class DivertReason {
  kOlderThanStreamTop,   // RV below the stream top
  kCoveredByCheckpoint,  // position at or below the checkpoint (already folded in)
  kNonNumericRv,         // resourceVersion is not an unsigned decimal
  kRvlessEmptyStream,    // no RV and no stream top to attach to
  // Byte-identical to the stream's top entry (same RV): a retried append whose reply was lost,
  // or a re-delivered watch event. `position` names the existing entry.
  kDuplicateOfStreamTop,
};
absl::string_view DivertReasonName(DivertReason reason);  // "older_than_stream_top", ...

struct AppendResult {
  bool appended = false;
  core::StreamPosition position;         // the entry's stream ID (or the duplicated entry's)
  std::optional<DivertReason> diverted;  // set when not appended
};

// Entries read from the stream.
struct StreamBatch {
  std::vector<StreamEntry> entries;
  // The last stream ID looked at (including malformed entries, which are skipped and counted):
  // resume the next read after it. Equals the `after` argument when nothing was read.
  core::StreamPosition last_scanned;
  size_t malformed = 0;
  // The reader's position is below the checkpoint: entries it has not seen may have been
  // trimmed. The reader must splice again (checkpoint + tail) instead of tailing.
  bool behind_checkpoint = false;
  // The checkpoint, incarnation and stream top, read together with the entries.
  LineageMark mark;
};

// Checkpoint + tail, read atomically.
struct MaterializationView {
  // nullopt: no usable checkpoint (none, or a damaged one: see mark): fail closed.
  std::optional<core::StreamPosition> checkpoint;
  ObjectMap checkpoint_items;
  std::vector<StreamEntry> tail;  // entries after the checkpoint position, in stream order
  size_t malformed = 0;
  LineageMark mark;  // read in the same transaction

  // The fold of checkpoint_items and tail (entries up to `through`, all by default).
  ObjectMap Fold(core::StreamPosition through = core::StreamPosition::EndOf(UINT64_MAX)) const;
  // The last tail entry's position, or the checkpoint position when the tail is empty.
  core::StreamPosition CoverageHead() const;
};

struct CheckpointSwap {
  bool swapped = false;  // false: a newer (or, for compaction, another) checkpoint is in place
  core::StreamPosition position;  // the checkpoint position now in place
  int64_t trimmed = 0;            // stream entries removed (all at or below the position)
  std::string incarnation;        // of the checkpoint installed (swapped only)
};

struct CompactionResult {
  bool compacted = false;  // false: nothing to fold, or a newer checkpoint won the race
  core::StreamPosition position;
  size_t folded = 0;
  int64_t trimmed = 0;
};

// The durable, human-readable state of a materialization (`…:state`).
struct MaterializationState {
  std::string phase;  // e.g. "syncing", "synced", "failing", "removed" (owner's vocabulary)
  core::GroupVersionResource gvr;
  core::WatchScope scope;
  int64_t object_count = 0;
  std::string checkpoint;  // position string, "" if none
  absl::Time updated_at = absl::UnixEpoch();
  std::string message;
  // Why it is in that phase (the materializer's reason: InitialReplay, WatchNotPermitted, ...);
  // read by splice streams, which show a blocked materialization as their own state.
  std::string reason;

  std::string ToJson() const;
  static absl::StatusOr<MaterializationState> FromJson(absl::string_view json);
};

struct MaterializationCounts {
  int64_t appended = 0;
  std::map<std::string, int64_t> diverted;  // reason name -> count
};

// The ownership a writer of a materialization carries (ownership_store.h), with a gate asked
// before each write.
struct WriteFence {
  Fence fence;
  // Asked before every fenced write; a non-OK status is returned as it is and nothing is sent
  // (the materializer answers Unavailable while its replica's Lease is not held). May be empty.
  std::function<absl::Status()> gate;
};

class MaterializationStore {
 public:
  MaterializationStore(RedisConnection* redis, KeyPrefix prefix, core::GroupVersionResource gvr,
                       core::WatchScope scope);

  const MaterializationKeys& keys() const { return keys_; }
  const core::GroupVersionResource& gvr() const { return gvr_; }
  const core::WatchScope& scope() const { return scope_; }

  // Judges every append against `tracker` (not owned; nullptr: no guard): an append chunk whose
  // watched read shows the materialization lost (lineage.h) writes nothing and fails with
  // StateLostError, so a writer never builds on a checkpoint that vanished or went backwards.
  // Appends, swaps and compactions through this store keep the tracker up to date.
  void GuardAppends(LineageTracker* tracker) { guard_ = tracker; }

  // Fences every write of this store (nullopt: none, as before): each append chunk, checkpoint
  // swap (ReplaceCheckpoint, Compact), WriteState and Release checks the fence's epoch and owner
  // inside the same script as the write (docs/redis-keys.md, Ownership epochs); a stale fence
  // writes nothing and fails with FailedPrecondition (IsFenced). Reads are not fenced.
  void FenceWrites(std::optional<WriteFence> fence) { fence_ = std::move(fence); }
  const std::optional<WriteFence>& fence() const { return fence_; }

  // Sensitive bodies (body_cipher.h). With `seal`, every body this store writes (stream entries,
  // checkpoints, compactions) is sealed with `cipher`; a sealed write without a cipher fails
  // with FailedPrecondition, so a sensitive type is never stored in plaintext. Reads open every
  // sealed body they meet, whatever `seal` says (a type may have been sensitive before); one
  // that cannot be opened fails the read (never skipped: it would look deleted). Not owned.
  void UseBodyCipher(const BodyCipher* cipher, bool seal) {
    cipher_ = cipher;
    seal_ = seal;
  }
  // A body read from this materialization's keys by hand (XREVRANGE, HGET), opened as the
  // store's own reads open it; `where` names it in errors.
  absl::Status OpenStoredBody(std::string& body, absl::string_view where) const;

  // Appends at `<rv>-<next seq>` (an RV-less entry at the stream top's RV), or diverts.
  // Retrying after a lost reply is safe: the repeat is diverted as kDuplicateOfStreamTop.
  // InvalidArgument for an entry without a name, or an upsert without a body.
  absl::StatusOr<AppendResult> Append(const StreamEntry& entry);
  // Append for many entries, in order, in chunks of up to 256 entries / 4 MiB of bodies, each
  // entry checked as if appended alone, seeing the stream as the previous ones left it; each
  // chunk is atomic. Per chunk, two round trips (an optimistic transaction): WATCH the stream,
  // checkpoint and counts and read the stream top and checkpoint; decide every entry here; then
  // MULTI, the XADDs at explicit IDs and the counters, EXEC. If a watched key changed in between
  // (a checkpoint swap, another writer) EXEC writes nothing and the chunk is read and decided
  // again (at most 8 attempts in all, then Aborted; that chunk wrote nothing). Results align with
  // `entries`. Nothing is sent if any entry is invalid. After an error the batch's outcome is
  // unknown; resending it whole is safe when every entry has an RV (watch changes: what landed
  // is diverted, never applied twice); an RV-less entry is only protected as the batch's last.
  absl::StatusOr<std::vector<AppendResult>> AppendAll(const std::vector<StreamEntry>& entries);

  // Up to `max_entries` entries strictly after `after` (XRANGE with exclusive start).
  absl::StatusOr<StreamBatch> ReadAfter(core::StreamPosition after, size_t max_entries);
  // A second stream whose new entries also end a wait (e.g. AuthorFactSignalKey). `fired` is
  // set when it did; the caller then moves `last_id` on (it is not advanced here).
  struct WakeSignal {
    std::string key;
    std::string last_id = "0-0";
    bool fired = false;
  };
  // Like ReadAfter, but when nothing is there yet waits up to `block` for new entries (XREAD
  // BLOCK); returns an empty batch if none came. With `wake`, an entry after `wake->last_id`
  // also ends the wait (Redis applies BLOCK timeouts only every 1/hz s, 100 ms by default, so
  // short waits are better ended by an event than by a timeout).
  absl::StatusOr<StreamBatch> WaitAfter(core::StreamPosition after, size_t max_entries,
                                        absl::Duration block, WakeSignal* wake = nullptr);
  // The highest ID ever generated in the stream (survives trimming); nullopt if none.
  absl::StatusOr<std::optional<core::StreamPosition>> StreamTop();

  absl::StatusOr<std::optional<core::StreamPosition>> CheckpointPosition();
  // The checkpoint, its incarnation and item check, and the stream top, in one atomic read.
  absl::StatusOr<LineageMark> ReadMark();
  // The checkpoint and the stream after it, in one atomic read.
  absl::StatusOr<MaterializationView> Load();
  // Installs `items` as the checkpoint covering the stream through `covered_through`, then
  // trims stream entries at or below it. A checkpoint is never replaced by an older one: if
  // the current position is higher, nothing changes (swapped=false). Registers the index.
  // Starts a new incarnation: `items` must be a complete LIST (or equivalent) at that position.
  absl::StatusOr<CheckpointSwap> ReplaceCheckpoint(const ObjectMap& items,
                                                   core::StreamPosition covered_through);
  // Folds the checkpoint and the stream entries up to `through` into a new checkpoint at the
  // last folded entry (no API call). The swap happens only if the checkpoint it folded from is
  // still the live one, of the same incarnation (else compacted=false), and keeps the
  // incarnation. FailedPrecondition when there is no usable checkpoint.
  absl::StatusOr<CompactionResult> Compact(
      core::StreamPosition through = core::StreamPosition::EndOf(UINT64_MAX));
  // Compact() on a view the caller already loaded (e.g. while splicing).
  absl::StatusOr<CompactionResult> CompactView(
      MaterializationView view,
      core::StreamPosition through = core::StreamPosition::EndOf(UINT64_MAX));

  absl::Status WriteState(const MaterializationState& state);  // also registers the index
  absl::StatusOr<std::optional<MaterializationState>> ReadState();
  absl::StatusOr<MaterializationCounts> ReadCounts();

  // Test seam: runs after an append chunk's reads and decisions, right before its MULTI/EXEC,
  // so a test can make another writer (or a checkpoint swap) land in between. Empty: none.
  void SetBeforeAppendCommitForTesting(std::function<void()> hook) {
    before_append_commit_for_testing_ = std::move(hook);
  }

  // Deletes every key of this materialization and its index membership (a released claim).
  // Delivery cursors belong to the splicer (DeliveryCursorStore).
  absl::Status Release();

 private:
  absl::Status NoCipherError() const;
  // OK when unfenced or the gate lets the write through.
  absl::Status PassGate() const;
  // WriteState/Release: the commands in one MULTI, or in one fenced script.
  absl::Status WriteAll(std::vector<std::string> keys, const std::vector<RedisCommand>& commands);
  // Append/AppendAll: chunks of entries, one optimistic transaction each.
  absl::StatusOr<std::vector<AppendResult>> AppendEntries(absl::Span<const StreamEntry> entries);
  absl::Status AppendChunk(absl::Span<const StreamEntry> entries, absl::Span<AppendResult> results);
  // Stages `items` and swaps them in at `covered_through` as `incarnation`; with `base`, only if
  // the live checkpoint is still exactly `base` of that incarnation.
  absl::StatusOr<CheckpointSwap> Swap(const ObjectMap& items, core::StreamPosition covered_through,
                                      std::optional<core::StreamPosition> base,
                                      const std::string& incarnation);

  RedisConnection* redis_;
  KeyPrefix prefix_;
  core::GroupVersionResource gvr_;
  core::WatchScope scope_;
  MaterializationKeys keys_;
  std::string index_key_;
  std::function<void()> before_append_commit_for_testing_;
  LineageTracker* guard_ = nullptr;
  const BodyCipher* cipher_ = nullptr;
  bool seal_ = false;
  std::optional<WriteFence> fence_;
};

// Waits until at least one of `streams` (stream key, reader position) has an entry after its
// position, or `block` passes; returns the keys that have (empty on timeout). One XREAD for many
// streams, so one connection can wake many tail readers; read the entries with ReadAfter.
absl::StatusOr<std::vector<std::string>> WaitForAnyStream(
    RedisConnection& redis,
    const std::vector<std::pair<std::string, core::StreamPosition>>& streams, absl::Duration block);

// A materialization listed in the index, with its state when readable.
struct IndexedMaterialization {
  IndexMember member;
  std::optional<MaterializationState> state;  // nullopt: missing or malformed state
};
// Every materialization in `P:mat:v1:index` (boot restore). Malformed members are skipped.
absl::StatusOr<std::vector<IndexedMaterialization>> ListMaterializations(RedisConnection& redis,
                                                                         const KeyPrefix& prefix);

}  // namespace reverser::redisstore
