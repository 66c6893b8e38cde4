#include "libs/commitmeta/messages.h"

#include "gtest/gtest.h"

namespace reverser::commitmeta {
namespace {

const ChangedResource kDeploy{"CREATE", {"apps", "v1", "deployments"}, "default", "web"};
const ChangedResource kConfigMap{"UPDATE", {"", "v1", "configmaps"}, "default", "settings"};
const ChangedResource kGone{"DELETE", {"", "v1", "configmaps"}, "default", "old"};

TEST(MessagesTest, DefaultEventMessage) {
  EXPECT_EQ(*RenderEventMessage("", {kDeploy, "alice", "prod"}),
            "[CREATE] apps/v1/deployments/web");
  EXPECT_EQ(*RenderEventMessage(kDefaultEventTemplate, {kConfigMap, "alice", "prod"}),
            "[UPDATE] v1/configmaps/settings");
}

TEST(MessagesTest, EventVariablesUseTheReferenceNames) {
  EXPECT_EQ(*RenderEventMessage("{{.Operation}} {{.Group}} {{.Version}} {{.Resource}} "
                                "{{.Namespace}} {{.Name}} {{.APIVersion}} {{.Username}} "
                                "{{.GitTarget}}",
                                {kDeploy, "alice", "prod"}),
            "CREATE apps v1 deployments default web apps/v1 alice prod");
}

TEST(MessagesTest, DefaultGroupMessageAndVariables) {
  const GroupMessageData data{"alice", "prod", {kDeploy, kConfigMap, kGone}};
  EXPECT_EQ(*RenderGroupMessage("", data), "alice on prod: 3 resource(s)");
  EXPECT_EQ(*RenderGroupMessage("{{range $op, $n := .Operations}}{{$op}}={{$n}} {{end}}"
                                "{{range .Resources}}[{{.Group}}|{{.Version}}|{{.Resource}}|"
                                "{{.Namespace}}|{{.Name}}]{{end}}",
                                data),
            "CREATE=1 DELETE=1 UPDATE=1 [apps|v1|deployments|default|web]"
            "[|v1|configmaps|default|settings][|v1|configmaps|default|old]");
  // All three operation keys exist even when a window has none of one kind.
  EXPECT_EQ(*RenderGroupMessage("{{.Operations.DELETE}}", {"a", "t", {kDeploy}}), "0");
}

TEST(MessagesTest, DefaultReconcileMessage) {
  EXPECT_EQ(*RenderReconcileMessage(
                "", {42, "prod", core::GroupVersionResource{"apiextensions.k8s.io", "v1",
                                                            "customresourcedefinitions"},
                     "121494"}),
            "reconciled 42 customresourcedefinitions (last resourceVersion: 121494)");
  EXPECT_EQ(*RenderReconcileMessage("", {3, "prod", std::nullopt, ""}), "reconciled 3 resources");
  EXPECT_EQ(*RenderReconcileMessage("{{.APIVersion}}|{{.Group}}|{{.Version}}|{{.GitTarget}}",
                                    {1, "prod", core::GroupVersionResource{"", "v1", "secrets"},
                                     "9"}),
            "v1||v1|prod");
}

TEST(MessagesTest, WindowWithOneEventUsesTheEventTemplate) {
  const CommitTemplates defaults;
  EXPECT_EQ(*RenderWindowMessage(defaults, "alice", "prod", {kDeploy}),
            "[CREATE] apps/v1/deployments/web");
  EXPECT_EQ(*RenderWindowMessage(defaults, "alice", "prod", {kDeploy, kGone}),
            "alice on prod: 2 resource(s)");
}

TEST(MessagesTest, ValidationRefusesBrokenTemplatesAndNamesThem) {
  EXPECT_TRUE(ValidateTemplates(CommitTemplates{}).ok());
  CommitTemplates custom;
  custom.event = "{{.Operation}} by {{.Username}}";
  custom.reconcile = "sync {{.APIVersion}} @{{.Revision}}";
  EXPECT_TRUE(ValidateTemplates(custom).ok());

  CommitTemplates typo;
  typo.group = "{{.Authr}} did things";
  const absl::Status status = ValidateTemplates(typo);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "group commit template: template: group:1:2: executing \"group\" at <.Authr>: "
            "map has no entry for key \"Authr\"");

  CommitTemplates syntax;
  syntax.reconcile = "{{if .Count}}unterminated";
  EXPECT_EQ(ValidateTemplates(syntax).message(),
            "reconcile commit template: template: reconcile:1: unexpected EOF");
}

}  // namespace
}  // namespace reverser::commitmeta
