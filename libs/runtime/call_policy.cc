#include "libs/runtime/call_policy.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace reverser::runtime {
namespace {

using enum CallerRole;

constexpr CallerRole kAllRoles[] = {kCatalog, kMaterializer, kSplicer, kGitWorker, kAdmin};

// Data-plane calls name the one peer that makes them; every *Admin service and reflection are
// for operators (reverserctl), and GitWorkerAdmin.ListBranches for the other gitworker
// replicas too; health is for any member of the mesh. The operator calls that change something
// come before their service's wildcard.
const std::vector<PolicyEntry>& Table() {
  using enum OperatorAccess;
  static const auto* table = new std::vector<PolicyEntry>{
      {"/reverser.v1.Catalog/WatchClaims", {kMaterializer, kAdmin}},
      {"/reverser.v1.Catalog/WatchTables", {kSplicer, kGitWorker, kAdmin}},
      {"/reverser.v1.Catalog/GetType", {kMaterializer, kSplicer, kGitWorker, kAdmin}},
      {"/reverser.v1.Catalog/ListTypes", {kMaterializer, kSplicer, kGitWorker, kAdmin}},
      {"/reverser.v1.Catalog/ReportStreamSummary", {kSplicer}},
      {"/reverser.v1.GitWorker/Deliver", {kSplicer}},
      {"/reverser.v1.GitWorker/AttachCommit", {kCatalog}},
      {"/reverser.v1.CatalogAdmin/Rescan", {kAdmin}, kWrite},
      {"/reverser.v1.MaterializerAdmin/Compact", {kAdmin}, kWrite},
      {"/reverser.v1.SplicerAdmin/Resplice", {kAdmin}, kWrite},
      // A gitworker replica lists its branches for another that answers for all of them.
      {"/reverser.v1.GitWorkerAdmin/ListBranches", {kGitWorker, kAdmin}},
      {"/reverser.v1.CatalogAdmin/*", {kAdmin}},
      {"/reverser.v1.MaterializerAdmin/*", {kAdmin}},
      {"/reverser.v1.SplicerAdmin/*", {kAdmin}},
      {"/reverser.v1.GitWorkerAdmin/*", {kAdmin}},
      {"/grpc.reflection.v1alpha.ServerReflection/*", {kAdmin}},
      {"/grpc.health.v1.Health/*", {std::begin(kAllRoles), std::end(kAllRoles)}, kNone},
  };
  return *table;
}

bool Matches(absl::string_view pattern, absl::string_view path) {
  if (absl::EndsWith(pattern, "/*")) {
    pattern.remove_suffix(1);  // keep the slash: "/pkg.Service/"
    return absl::StartsWith(path, pattern) && path.size() > pattern.size() &&
           path.find('/', pattern.size()) == absl::string_view::npos;
  }
  return pattern == path;
}

}  // namespace

absl::string_view RoleName(CallerRole role) {
  switch (role) {
    case kCatalog:
      return "catalog";
    case kMaterializer:
      return "materializer";
    case kSplicer:
      return "splicer";
    case kGitWorker:
      return "gitworker";
    case kAdmin:
      return "admin";
  }
  return "unknown";
}

std::string RoleCertificateName(CallerRole role) {
  return absl::StrCat("reverser-", RoleName(role));
}

std::set<CallerRole> RolesOf(const std::vector<std::string>& certificate_names) {
  std::set<CallerRole> roles;
  for (const std::string& name : certificate_names) {
    for (CallerRole role : kAllRoles) {
      if (name == RoleCertificateName(role)) roles.insert(role);
    }
  }
  return roles;
}

absl::Status AuthorizeCall(absl::string_view path, const std::set<CallerRole>& roles) {
  if (roles.empty()) {
    return absl::UnauthenticatedError(absl::StrCat(
        "calling ", path, " needs a client certificate named reverser-<role> from the mesh CA"));
  }
  for (const PolicyEntry& entry : Table()) {
    if (!Matches(entry.path, path)) continue;
    for (CallerRole role : roles) {
      if (entry.roles.count(role)) return absl::OkStatus();
    }
    std::vector<std::string> allowed;
    for (CallerRole role : entry.roles) allowed.push_back(RoleCertificateName(role));
    std::vector<std::string> have;
    for (CallerRole role : roles) have.push_back(RoleCertificateName(role));
    return absl::PermissionDeniedError(absl::StrCat(path, " may be called by ",
                                                    absl::StrJoin(allowed, ", "), ", not by ",
                                                    absl::StrJoin(have, ", ")));
  }
  return absl::PermissionDeniedError(absl::StrCat(path, " is not a call of the reverser mesh"));
}

const std::vector<PolicyEntry>& CallPolicyTable() { return Table(); }

OperatorAccess OperatorAccessOf(absl::string_view path, const std::set<CallerRole>& roles) {
  for (const PolicyEntry& entry : Table()) {
    if (!Matches(entry.path, path)) continue;
    for (CallerRole role : roles) {
      if (role != kAdmin && entry.roles.count(role)) return OperatorAccess::kNone;
    }
    return roles.count(kAdmin) && entry.roles.count(kAdmin) ? entry.operator_access
                                                            : OperatorAccess::kNone;
  }
  return OperatorAccess::kNone;
}

absl::string_view OperatorVerb(OperatorAccess access) {
  return access == OperatorAccess::kWrite ? "update" : "get";
}

}  // namespace reverser::runtime
