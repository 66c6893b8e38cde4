#include "libs/typeset/lookup.h"

#include "gtest/gtest.h"
#include "libs/typeset/registry.h"
#include "libs/typeset/scan_builder.h"

namespace reverser::typeset {
namespace {

TEST(RecordIndexTest, ServesACopyOfTheRegistryThroughTheSameInterface) {
  core::FakeClock clock;
  Registry registry(clock);
  ApiResourceCatalog catalog;
  RecordIndex index;
  const TypeLookup& lookup = index;
  EXPECT_FALSE(lookup.Ready());
  EXPECT_FALSE(lookup.ByGVK({"", "v1", "ConfigMap"}).has_value());

  registry.UpdateFromScan(
      catalog.Update(testing::ScanBuilder()
                         .Core({testing::Res("configmaps", "ConfigMap")})
                         .Group("apps", "v1", {testing::Res("deployments", "Deployment")})
                         .Build()));
  index.Replace(registry.All(), registry.revision());
  EXPECT_TRUE(lookup.Ready());
  EXPECT_EQ(index.size(), 2u);
  EXPECT_EQ(index.generation(), registry.revision());
  auto d = lookup.ByGVK({"apps", "v1", "Deployment"});
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->gvr.resource, "deployments");
  EXPECT_EQ(d->followability, registry.ByGVR(d->gvr)->followability);
  EXPECT_FALSE(lookup.ByGVR({"apps", "v1", "statefulsets"}).has_value());

  const TypeLookup& live = registry;
  EXPECT_EQ(live.ByGVK({"", "v1", "ConfigMap"})->gvr,
            (core::GroupVersionResource{"", "v1", "configmaps"}));
}

}  // namespace
}  // namespace reverser::typeset
