// Placement templates (libs/manifest paths) come from a GitTarget's spec and object names from
// the cluster; together they choose where the gitworker writes. Whatever a template renders for
// an object must pass the write jail: relative, clean, no `..`, no backslash, no NUL.
//
// Input: the template on the first line, then optional lines overriding the identity of a
// namespaced apps/v1 Deployment prod/web: name, namespace, group, version, resource, kind, and
// flags (`c` cluster-scoped, `s` sensitive). Seeds are readable text files.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "fuzz/fuzz_check.h"
#include "libs/manifest/paths.h"

namespace reverser::fuzz {
namespace {

manifest::ObjectIdentity IdentityFrom(const std::vector<absl::string_view>& lines) {
  manifest::ObjectIdentity id{
      {"apps", "v1", "deployments"}, "Deployment", core::Scope::kNamespaced, "prod", "web", false};
  auto line = [&](size_t i, std::string& field) {
    if (i < lines.size()) field = std::string(lines[i]);
  };
  line(1, id.name);
  line(2, id.namespace_);
  line(3, id.gvr.group);
  line(4, id.gvr.version);
  line(5, id.gvr.resource);
  line(6, id.kind);
  if (lines.size() > 7) {
    if (absl::StrContains(lines[7], 'c')) id.scope = core::Scope::kCluster;
    if (absl::StrContains(lines[7], 's')) id.sensitive = true;
  }
  if (id.scope == core::Scope::kCluster) id.namespace_.clear();
  return id;
}

void CheckJailed(const std::string& path) {
  FUZZ_CHECK(manifest::ValidateRelativePath(path).ok());
  FUZZ_CHECK(!path.empty() && path.front() != '/');
  FUZZ_CHECK(!absl::StrContains("/" + path + "/", "/../"));
  FUZZ_CHECK(!absl::StrContains("/" + path + "/", "/./"));
  FUZZ_CHECK(!absl::StrContains(path, '\\'));
  FUZZ_CHECK(!absl::StrContains(path, '\0'));
}

}  // namespace
}  // namespace reverser::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reverser;
  const std::vector<absl::string_view> lines = absl::StrSplit(fuzz::AsText(data, size), '\n');
  const absl::string_view tmpl = lines.front();
  const manifest::ObjectIdentity id = fuzz::IdentityFrom(lines);

  manifest::ValidatePlacementTemplate(tmpl).IgnoreError();
  manifest::IsIdentityComplete(tmpl, /*narrowed_to_one_type=*/true);
  manifest::IsIdentityComplete(tmpl, /*narrowed_to_one_type=*/false);
  manifest::PlacementTypeKey(id.gvr);
  if (auto path = manifest::RenderPlacementTemplate(tmpl, id); path.ok()) {
    fuzz::CheckJailed(*path);
    if (auto joined = manifest::JoinTargetPath("clusters/prod", *path); joined.ok()) {
      FUZZ_CHECK(absl::StartsWith(*joined, "clusters/prod/"));
    }
  }
  if (manifest::ValidateIdentity(id).ok()) {
    if (auto path = manifest::CanonicalPath("", id); path.ok()) fuzz::CheckJailed(*path);
  }
  return 0;
}
