#pragma once

// Commit message data and templates for the three commit kinds (docs/behaviour.md, Commit
// messages):
//   event     — one event (also a grouped unit holding exactly one event);
//   group     — a window of several events by one author for one GitTarget;
//   reconcile — a resync / atomic write, authored by the operator.
// Template variables keep the reference's names, so user templates written for gitops-reverser
// render the same here. Templates run with missingkey=error (libs/gotemplate).

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "libs/core/types.h"
#include "libs/gotemplate/template.h"
#include "libs/gotemplate/value.h"

namespace reverser::commitmeta {

inline constexpr char kDefaultEventTemplate[] =
    "[{{.Operation}}] {{.APIVersion}}/{{.Resource}}/{{.Name}}";
inline constexpr char kDefaultGroupTemplate[] =
    "{{.Author}} on {{.GitTarget}}: {{.Count}} resource(s)";
inline constexpr char kDefaultReconcileTemplate[] =
    "reconciled {{.Count}} {{if .Resource}}{{.Resource}}{{else}}resources{{end}}"
    "{{if .Revision}} (last resourceVersion: {{.Revision}}){{end}}";

// The three templates of a GitProvider's commit settings; empty fields mean the default.
struct CommitTemplates {
  std::string event = kDefaultEventTemplate;
  std::string group = kDefaultGroupTemplate;
  std::string reconcile = kDefaultReconcileTemplate;
};

// One resource change of a window. `operation` is CREATE, UPDATE or DELETE.
struct ChangedResource {
  std::string operation;
  core::GroupVersionResource gvr;
  std::string namespace_;
  std::string name;
};

// Event template variables: Operation, Group, Version, Resource, Namespace, Name, APIVersion,
// Username, GitTarget.
struct EventMessageData {
  ChangedResource resource;
  std::string username;
  std::string git_target;
  gotemplate::Value ToValue() const;
};

// Group template variables: Author, GitTarget, Count, Operations (CREATE/UPDATE/DELETE → count;
// all three keys always present so `{{.Operations.DELETE}}` never fails at run time),
// Resources (list of {Group, Version, Resource, Namespace, Name}).
struct GroupMessageData {
  std::string author;
  std::string git_target;
  std::vector<ChangedResource> resources;
  gotemplate::Value ToValue() const;
};

// Reconcile template variables: Count (the documents the resync created, updated or deleted —
// not the size of the desired set), GitTarget, Group, Version, Resource, APIVersion, Revision
// (the resourceVersion the resync was pinned to; empty for a pure sweep). Without a type scope
// the type variables are empty strings.
struct ReconcileMessageData {
  int64_t count = 0;
  std::string git_target;
  std::optional<core::GroupVersionResource> scope;
  std::string revision;
  gotemplate::Value ToValue() const;
};

// Each renders with `limits` (libs/gotemplate): ResourceExhausted when a template exceeds them.
absl::StatusOr<std::string> RenderEventMessage(const std::string& tmpl,
                                               const EventMessageData& data,
                                               const gotemplate::Limits& limits = {});
absl::StatusOr<std::string> RenderGroupMessage(const std::string& tmpl,
                                               const GroupMessageData& data,
                                               const gotemplate::Limits& limits = {});
absl::StatusOr<std::string> RenderReconcileMessage(const std::string& tmpl,
                                                   const ReconcileMessageData& data,
                                                   const gotemplate::Limits& limits = {});

// The message of a finalized window: the event template when it holds exactly one change,
// the group template otherwise. `author` is the window's username.
absl::StatusOr<std::string> RenderWindowMessage(const CommitTemplates& templates,
                                                const std::string& author,
                                                const std::string& git_target,
                                                const std::vector<ChangedResource>& changes,
                                                const gotemplate::Limits& limits = {});
// Which template RenderWindowMessage uses for `changes`: "event" or "group".
const char* WindowTemplateKind(const std::vector<ChangedResource>& changes);

// Admission-time check: parses each template and renders it against sample data (including the
// reconcile scope apps/v1 deployments at revision 12345), so a typo in a variable name is
// refused up front instead of failing a commit later. The error names the template.
absl::Status ValidateTemplates(const CommitTemplates& templates,
                               const gotemplate::Limits& limits = {});

}  // namespace reverser::commitmeta
