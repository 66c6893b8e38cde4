#pragma once

// Typeset records in their wire form (proto/reverser/v1/catalog.proto).

#include "libs/typeset/model.h"
#include "proto/reverser/v1/catalog.pb.h"

namespace reverser::typeset {

reverser::v1::FollowVerdict ToProto(Verdict verdict);
// TypeIdentity of a record (scope UNSPECIFIED when discovery did not say).
reverser::v1::TypeIdentity IdentityToProto(const TypeRecord& record);
reverser::v1::TypeRecord ToProto(const TypeRecord& record);

// The receiving side (materializers, splicers, gitworkers reading ListTypes / GetType). Unknown
// enum values read as kUnknown; `activated` and `absent_since` are not on the wire.
Verdict FromProto(reverser::v1::FollowVerdict verdict);
Origin OriginFromName(absl::string_view name);
TypeRecord FromProto(const reverser::v1::TypeRecord& record);

}  // namespace reverser::typeset
