// Commit-message templates (libs/gotemplate) come from a GitProvider's spec: whoever may edit one
// chooses the text, and the shared gitworker renders it for every commit. Every input parses or
// is refused with a positioned error, and a parsed template runs against the data the gitworker
// gives each kind of commit (libs/commitmeta) or fails with a Status.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "fuzz/fuzz_check.h"
#include "libs/commitmeta/messages.h"
#include "libs/gotemplate/template.h"

namespace reverser::fuzz {
namespace {

const std::vector<gotemplate::Value>& CommitData() {
  static const auto* values = [] {
    using commitmeta::ChangedResource;
    const ChangedResource deployment{"UPDATE", {"apps", "v1", "deployments"}, "prod", "web"};
    const ChangedResource config_map{"CREATE", {"", "v1", "configmaps"}, "prod", "web-config"};
    const ChangedResource role{
        "DELETE", {"rbac.authorization.k8s.io", "v1", "clusterroles"}, "", "system:controller:x"};
    // A window as one `kubectl apply` of a small chart makes it: forty changes by one author.
    std::vector<ChangedResource> window;
    for (int i = 0; i < 10; ++i) {
      for (ChangedResource r : {deployment, config_map, role, deployment}) {
        r.name += "-" + std::to_string(i);
        window.push_back(std::move(r));
      }
    }
    return new std::vector<gotemplate::Value>{
        commitmeta::EventMessageData{deployment, "alice@example.com", "prod-target"}.ToValue(),
        commitmeta::GroupMessageData{"alice@example.com", "prod-target", std::move(window)}
            .ToValue(),
        commitmeta::ReconcileMessageData{12, "prod-target", deployment.gvr, "48213"}.ToValue(),
    };
  }();
  return *values;
}

}  // namespace
}  // namespace reverser::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reverser;
  auto tmpl = gotemplate::Template::Parse("event", fuzz::AsText(data, size));
  if (!tmpl.ok()) {
    FUZZ_CHECK(absl::StartsWith(tmpl.status().message(), "template: event:"));
    return 0;
  }
  for (const gotemplate::Value& value : fuzz::CommitData()) {
    if (auto message = tmpl->Execute(value); message.ok()) fuzz::ReadAll(*message);
  }
  return 0;
}
