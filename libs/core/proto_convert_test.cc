#include "libs/core/proto_convert.h"

#include "gtest/gtest.h"

namespace reverser::core {
namespace {

TEST(ProtoConvertTest, RoundTrips) {
  ResourceRef ref{{"apps", "v1", "deployments"}, "default", "web", "uid-1"};
  EXPECT_EQ(FromProto(ToProto(ref)), ref);
  EXPECT_EQ(FromProto(ToProto(StreamPosition(10, 3))), StreamPosition(10, 3));
  EXPECT_EQ(FromProto(ToProto(WatchScope::Namespace("a"))), WatchScope::Namespace("a"));
  EXPECT_TRUE(FromProto(ToProto(WatchScope::Cluster())).IsCluster());
  GroupVersionKind gvk{"", "v1", "ConfigMap"};
  EXPECT_EQ(FromProto(ToProto(gvk)), gvk);
}

}  // namespace
}  // namespace reverser::core
