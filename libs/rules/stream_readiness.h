#pragma once

// The stream readiness roll-up a GitTarget and its rules show (docs/behaviour.md, Stream
// readiness): streams are counted per type (group/version/resource) with the strongest state of
// that type's streams (Blocked over Replaying over Streaming), so a type followed in three
// namespaces counts once. The splicer rolls up a target's streams; the catalog rolls up the
// streams each rule selects. Reasons and messages are the reference's:
//
//   AllStreamsReady  "2/2 streams running"
//   Replaying        "1/2 streams running; 1 replaying (deployments.apps)"
//   <blocked>        "1/3 streams running; 2 blocked (configmaps)" — WatchNotPermitted when any
//                    blocked type is forbidden, else the blocked stream's own reason
//   NoResolvedTypes  "0/0 streams running; no resolved resource types"
//
// Names in messages and in the pending sample are the types' display names (`resource` for the
// core group, else `resource.group`), sorted; the sample lists blocked types first, at most 5.

#include <cstdint>
#include <string>
#include <vector>

#include "proto/reverser/v1/catalog.pb.h"

namespace reverser::rules {

inline constexpr char kStreamReasonInitialReplay[] = "InitialReplay";
inline constexpr char kStreamReasonWatchError[] = "WatchError";
inline constexpr char kStreamReasonWatchNotPermitted[] = "WatchNotPermitted";
inline constexpr char kStreamReasonAllStreamsReady[] = "AllStreamsReady";
inline constexpr char kStreamReasonReplaying[] = "Replaying";
inline constexpr char kStreamReasonNoResolvedTypes[] = "NoResolvedTypes";
inline constexpr char kNoResolvedTypesMessage[] = "0/0 streams running; no resolved resource types";
inline constexpr size_t kPendingSampleLimit = 5;

// "configmaps" for the core group, "deployments.apps" otherwise.
std::string StreamDisplayName(const reverser::v1::GroupVersionResource& gvr);

struct StreamRollup {
  uint32_t total = 0;  // types
  uint32_t ready = 0;
  uint32_t replaying = 0;
  uint32_t blocked = 0;
  std::string reason;
  std::string message;
  std::vector<std::string> pending_sample;

  // Every type streams (and there is at least one).
  bool running() const { return total > 0 && ready == total; }
};

// The roll-up of `streams` (any order; several per type allowed).
StreamRollup RollUpStreams(const std::vector<reverser::v1::StreamReadiness>& streams);

// Sets the summary's counts, reason, message and pending sample from `rollup`.
void FillSummary(const StreamRollup& rollup, reverser::v1::StreamSummary* summary);

}  // namespace reverser::rules
