#include "libs/typeset/policy.h"

#include "gtest/gtest.h"

namespace reverser::typeset {
namespace {

TEST(WatchPolicyTest, DefaultExclusions) {
  WatchPolicy p = WatchPolicy::Default();
  EXPECT_TRUE(p.Excluded("", "pods"));
  EXPECT_TRUE(p.Excluded("", "events"));
  EXPECT_TRUE(p.Excluded("events.k8s.io", "events"));
  EXPECT_TRUE(p.Excluded("", "endpoints"));
  EXPECT_TRUE(p.Excluded("discovery.k8s.io", "endpointslices"));
  EXPECT_TRUE(p.Excluded("coordination.k8s.io", "leases"));
  EXPECT_TRUE(p.Excluded("apps", "controllerrevisions"));
  EXPECT_TRUE(p.Excluded("flowcontrol.apiserver.k8s.io", "flowschemas"));
  EXPECT_TRUE(p.Excluded("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations"));
  EXPECT_TRUE(p.Excluded("batch", "jobs"));
  EXPECT_TRUE(p.Excluded("batch", "cronjobs"));
  EXPECT_FALSE(p.Excluded("", "configmaps"));
  EXPECT_FALSE(p.Excluded("example.com", "pods"));  // a CRD named pods is not the core one
  EXPECT_FALSE(WatchPolicy::AllowAll().Excluded("", "pods"));
}

TEST(SensitivePolicyTest, CoreSecretsAlwaysPlusAdditionalEntries) {
  SensitivePolicy defaults;
  EXPECT_TRUE(defaults.IsSensitive("", "secrets"));
  EXPECT_FALSE(defaults.IsSensitive("example.com", "secrets"));
  EXPECT_FALSE(defaults.IsSensitive("", "configmaps"));

  auto p = SensitivePolicy::Create({"configmaps", " bitnami.com/SealedSecrets "});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->IsSensitive("", "secrets"));
  EXPECT_TRUE(p->IsSensitive("", "configmaps"));
  EXPECT_FALSE(p->IsSensitive("example.com", "configmaps"));
  EXPECT_TRUE(p->IsSensitive("bitnami.com", "sealedsecrets"));
}

TEST(SensitivePolicyTest, RejectsMalformedEntries) {
  for (const char* bad : {"", "/", "a/", "/b", "a/b/c"}) {
    auto p = SensitivePolicy::Create({bad});
    EXPECT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace reverser::typeset
