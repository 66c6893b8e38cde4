#pragma once

// Audit intake (`--intake=audit`): turns one accepted `RequestResponse` audit event into the
// stream entries the watch would have produced for the same write — same op, uid, namespace,
// name, resourceVersion and object bytes (see stream_entries.h); only `src` says `audit`.
// Pure: no Redis, no claim routing.
//
//   create                      → ADDED    (the response object)
//   update / patch              → MODIFIED (ADDED when the answer is 201: created by the write)
//   delete, object answered     → DELETED, or MODIFIED when the object is only marked for
//                                 deletion (202, or finalizers / grace period pending)
//   delete, Status answered     → DELETED without body or resourceVersion: the writer attaches
//                                 it to the stream top and takes the body from the
//                                 materialization (`body_from_materialization`)
//   deletecollection            → one DELETED (or MODIFIED, if held by finalizers) per listed item
//
// Not convertible (skipped; the periodic LIST heals): events below RequestResponse (no response
// body), the `scale` subresource (its body is a Scale, not the object), bodies without a name.

#include <vector>

#include "absl/strings/string_view.h"
#include "libs/audit/audit_event.h"
#include "libs/core/types.h"
#include "libs/redisstore/stream_entry.h"

namespace reverser::materializer {

struct AuditChange {
  core::GroupVersionResource gvr;  // objectRef apiGroup / apiVersion / resource
  std::string namespace_;          // the request's namespace ("" cluster-scoped or all)
  redisstore::StreamEntry entry;   // source kAudit
  bool body_from_materialization = false;
};

enum class AuditSkip {
  kNone,
  kNotAccepted,     // the reference's filters ignored it (read-only verb, failed, dry run, ...)
  kSubresource,     // a mutating `scale` call: the body is not the object
  kNoResponseBody,  // logged below RequestResponse, or a hollow answer
  kNoIdentity,      // no resource or no object name
};
absl::string_view AuditSkipName(AuditSkip skip);  // "not_accepted", "subresource", ...

struct AuditChanges {
  core::GroupVersionResource gvr;  // of the request (also when skipped), for routing and metrics
  std::string namespace_;          // objectRef namespace
  std::vector<AuditChange> changes;
  AuditSkip skipped = AuditSkip::kNone;  // set when `changes` is empty for a reason
};

// Parses the response body's raw text (nlohmann) only for an event it converts.
AuditChanges ChangesFromAuditEvent(const audit::AuditEvent& event);

}  // namespace reverser::materializer
