#pragma once

// How each admin answer is shown: an aligned table for people (these functions) or protobuf JSON
// for scripts (ToJson). Pure functions of the response, so they are unit-tested without a server.

#include <string>

#include "google/protobuf/message.h"
#include "proto/reverser/v1/catalog.pb.h"
#include "proto/reverser/v1/gitworker.pb.h"
#include "proto/reverser/v1/materializer.pb.h"
#include "proto/reverser/v1/splicer.pb.h"

namespace reverser::reverserctl {

// Protobuf JSON (proto field names in lowerCamelCase, defaults included). `pretty`: indented and
// newline-terminated; otherwise one line (for --watch streams: one JSON document per line).
std::string ToJson(const google::protobuf::Message& message, bool pretty = true);

// "group/version/resource", core types as "version/resource" (the claim syntax without scope);
// "" when unset.
std::string FormatGvr(const reverser::v1::GroupVersionResource& gvr);
// "cluster", the namespace, or "" when unset.
std::string FormatScope(const reverser::v1::WatchScope& scope);
// "namespace/name".
std::string FormatTarget(const reverser::v1::GitTargetRef& target);
// RFC 3339 in UTC, or "" for an unset timestamp.
std::string FormatTime(const google::protobuf::Timestamp& time);

std::string FormatStatus(const reverser::v1::ServiceStatus& status);
// `why`: a REASON column with every failed requirement check ("verbs: missing-verbs (watch)").
std::string FormatTypes(const reverser::v1::ListTypesResponse& types, bool why);
std::string FormatRescan(const reverser::v1::RescanResponse& rescan);
std::string FormatClaims(const reverser::v1::ClaimSet& claims);
// One row per (target, followed type); removals of a partial update are listed after the table.
std::string FormatTables(const reverser::v1::TableUpdate& update);
// Per-target readiness; `detail`: one more table with every stream's state.
std::string FormatStreams(const reverser::v1::ListStreamsResponse& streams, bool detail);
std::string FormatResplice(const reverser::v1::GitTargetRef& target,
                           const reverser::v1::RespliceResponse& resplice);
std::string FormatBranches(const reverser::v1::ListBranchesResponse& branches);
std::string FormatMaterializations(const reverser::v1::ListMaterializationsResponse& list);
std::string FormatCompact(const reverser::v1::CompactResponse& compact);

}  // namespace reverser::reverserctl
