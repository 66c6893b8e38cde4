#pragma once

// Conversions between the core vocabulary and its wire form in proto/reverser/v1/types.proto.

#include "libs/core/stream_position.h"
#include "libs/core/types.h"
#include "proto/reverser/v1/types.pb.h"

namespace reverser::core {

reverser::v1::GroupVersionKind ToProto(const GroupVersionKind& gvk);
GroupVersionKind FromProto(const reverser::v1::GroupVersionKind& gvk);

reverser::v1::GroupVersionResource ToProto(const GroupVersionResource& gvr);
GroupVersionResource FromProto(const reverser::v1::GroupVersionResource& gvr);

reverser::v1::ResourceScope ToProto(Scope scope);

reverser::v1::WatchScope ToProto(const WatchScope& scope);
WatchScope FromProto(const reverser::v1::WatchScope& scope);

reverser::v1::ResourceRef ToProto(const ResourceRef& ref);
ResourceRef FromProto(const reverser::v1::ResourceRef& ref);

reverser::v1::StreamPosition ToProto(const StreamPosition& position);
StreamPosition FromProto(const reverser::v1::StreamPosition& position);

}  // namespace reverser::core
