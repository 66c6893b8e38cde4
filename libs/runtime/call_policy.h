#pragma once

// Who may call what on the gRPC mesh: one table for every service (docs/security.md). A caller
// is known by the names of its client certificate; the name `reverser-<role>` (common name or
// subject alternative name) gives it that role. Pure: no gRPC, no I/O.

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace reverser::runtime {

enum class CallerRole { kCatalog, kMaterializer, kSplicer, kGitWorker, kAdmin };

// "catalog", "materializer", "splicer", "gitworker", "admin".
absl::string_view RoleName(CallerRole role);
// The certificate name that carries `role`: "reverser-<role name>".
std::string RoleCertificateName(CallerRole role);

// The roles the certificate names carry (unknown names carry none).
std::set<CallerRole> RolesOf(const std::vector<std::string>& certificate_names);

// Whether a caller with `roles` may call `path` ("/package.Service/Method"). OK, or
// PermissionDenied naming the method and the roles that may call it; an unknown method is
// denied to everyone. No roles at all (no or an unknown certificate) is Unauthenticated.
absl::Status AuthorizeCall(absl::string_view path, const std::set<CallerRole>& roles);

// What an operator's call does, for the Kubernetes review of its bearer token (admin_review.h):
// kRead calls look (verb "get" on the virtual resource), kWrite calls change something (verb
// "update": rescan, compact, resplice). kNone: no review (health, open to the whole mesh).
enum class OperatorAccess { kNone, kRead, kWrite };

// The table, for docs and `reverserctl`: (method path or "/package.Service/*", roles, and what
// the call means when an operator makes it). The first matching entry decides.
struct PolicyEntry {
  std::string path;
  std::set<CallerRole> roles;
  OperatorAccess operator_access = OperatorAccess::kRead;
};
const std::vector<PolicyEntry>& CallPolicyTable();

// Whether a call that AuthorizeCall allowed is made as an operator, and so needs the caller's
// Kubernetes identity reviewed: kNone when a service role of the caller may make it by itself
// (a splicer following tables) or the call is open to the mesh; else the entry's access.
OperatorAccess OperatorAccessOf(absl::string_view path, const std::set<CallerRole>& roles);

// "get" or "update": the SubjectAccessReview verb of an operator's call.
absl::string_view OperatorVerb(OperatorAccess access);

}  // namespace reverser::runtime
