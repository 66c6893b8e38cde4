#include "libs/commitmeta/messages.h"

#include "absl/strings/str_cat.h"
#include "libs/core/status.h"
#include "libs/gotemplate/template.h"

namespace reverser::commitmeta {
namespace {

using gotemplate::Value;

absl::StatusOr<std::string> RenderNamed(const char* kind, const std::string& tmpl,
                                        const Value& data, const gotemplate::Limits& limits) {
  absl::StatusOr<std::string> out = gotemplate::Render(kind, tmpl, data, limits);
  if (!out.ok()) return core::Annotate(out.status(), absl::StrCat(kind, " commit template"));
  return out;
}

Value::Map ResourceFields(const ChangedResource& r) {
  return {{"Group", r.gvr.group},
          {"Version", r.gvr.version},
          {"Resource", r.gvr.resource},
          {"Namespace", r.namespace_},
          {"Name", r.name}};
}

}  // namespace

Value EventMessageData::ToValue() const {
  Value::Map fields = ResourceFields(resource);
  fields["Operation"] = resource.operation;
  fields["APIVersion"] = resource.gvr.ApiVersion();
  fields["Username"] = username;
  fields["GitTarget"] = git_target;
  return Value(std::move(fields));
}

Value GroupMessageData::ToValue() const {
  Value::Map operations{{"CREATE", 0}, {"UPDATE", 0}, {"DELETE", 0}};
  Value::List list;
  for (const ChangedResource& r : resources) {
    Value& count = operations[r.operation];
    count = Value((count.is_int() ? count.integer() : 0) + 1);
    list.push_back(Value(ResourceFields(r)));
  }
  return Value(Value::Map{{"Author", author},
                          {"GitTarget", git_target},
                          {"Count", static_cast<int64_t>(resources.size())},
                          {"Operations", std::move(operations)},
                          {"Resources", std::move(list)}});
}

Value ReconcileMessageData::ToValue() const {
  const core::GroupVersionResource gvr = scope.value_or(core::GroupVersionResource{});
  return Value(Value::Map{{"Count", count},
                          {"GitTarget", git_target},
                          {"Group", gvr.group},
                          {"Version", gvr.version},
                          {"Resource", gvr.resource},
                          {"APIVersion", scope ? gvr.ApiVersion() : ""},
                          {"Revision", revision}});
}

absl::StatusOr<std::string> RenderEventMessage(const std::string& tmpl,
                                               const EventMessageData& data,
                                               const gotemplate::Limits& limits) {
  return RenderNamed("event", tmpl.empty() ? kDefaultEventTemplate : tmpl, data.ToValue(), limits);
}

absl::StatusOr<std::string> RenderGroupMessage(const std::string& tmpl,
                                               const GroupMessageData& data,
                                               const gotemplate::Limits& limits) {
  return RenderNamed("group", tmpl.empty() ? kDefaultGroupTemplate : tmpl, data.ToValue(), limits);
}

absl::StatusOr<std::string> RenderReconcileMessage(const std::string& tmpl,
                                                   const ReconcileMessageData& data,
                                                   const gotemplate::Limits& limits) {
  return RenderNamed("reconcile", tmpl.empty() ? kDefaultReconcileTemplate : tmpl, data.ToValue(),
                     limits);
}

const char* WindowTemplateKind(const std::vector<ChangedResource>& changes) {
  return changes.size() == 1 ? "event" : "group";
}

absl::StatusOr<std::string> RenderWindowMessage(const CommitTemplates& templates,
                                                const std::string& author,
                                                const std::string& git_target,
                                                const std::vector<ChangedResource>& changes,
                                                const gotemplate::Limits& limits) {
  if (changes.size() == 1) {
    return RenderEventMessage(templates.event, {changes.front(), author, git_target}, limits);
  }
  return RenderGroupMessage(templates.group, {author, git_target, changes}, limits);
}

absl::Status ValidateTemplates(const CommitTemplates& templates, const gotemplate::Limits& limits) {
  const ChangedResource sample{"CREATE", {"apps", "v1", "deployments"}, "default", "example"};
  RETURN_IF_ERROR(
      RenderEventMessage(templates.event, {sample, "template-validator", "example-target"}, limits)
          .status());
  RETURN_IF_ERROR(RenderGroupMessage(templates.group,
                                     {"template-validator",
                                      "example-target",
                                      {sample, {"UPDATE", sample.gvr, "default", "other"}}},
                                     limits)
                      .status());
  RETURN_IF_ERROR(
      RenderReconcileMessage(templates.reconcile, {1, "example-target", std::nullopt, ""}, limits)
          .status());
  RETURN_IF_ERROR(RenderReconcileMessage(templates.reconcile,
                                         {1, "example-target", sample.gvr, "12345"}, limits)
                      .status());
  return absl::OkStatus();
}

}  // namespace reverser::commitmeta
