#pragma once

// Rules, tables and claims in their wire form (proto/reverser/v1/catalog.proto).

#include "libs/rules/claims.h"
#include "libs/rules/table.h"
#include "proto/reverser/v1/catalog.pb.h"

namespace reverser::rules {

reverser::v1::OperationSet ToProto(const OperationSet& ops);
reverser::v1::GitTargetRef ToProto(const GitTargetInfo& target);
reverser::v1::GitDestination ToProto(const GitDestination& destination);
reverser::v1::WatchedType ToProto(const WatchedType& type);
reverser::v1::WatchedTypeTable ToProto(const WatchedTypeTable& table);
reverser::v1::Claim ToProto(const Claim& claim);
reverser::v1::ClaimSet ToProto(const std::vector<Claim>& claims, uint64_t generation);

// The receiving side (materializers and splicers). Unknown operations and scopes are dropped /
// read as namespaced; `unresolved` and `retained` are not on the wire.
OperationSet FromProto(const reverser::v1::OperationSet& ops);
WatchedType FromProto(const reverser::v1::WatchedType& type);
WatchedTypeTable FromProto(const reverser::v1::WatchedTypeTable& table);
Claim FromProto(const reverser::v1::Claim& claim);
std::vector<Claim> FromProto(const reverser::v1::ClaimSet& claims);

}  // namespace reverser::rules
