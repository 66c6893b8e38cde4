#include "libs/rules/stream_readiness.h"

#include "gtest/gtest.h"

namespace reverser::rules {
namespace {

reverser::v1::StreamReadiness Stream(const std::string& group, const std::string& resource,
                                     const std::string& ns, reverser::v1::StreamState state,
                                     const std::string& reason = "") {
  reverser::v1::StreamReadiness s;
  auto* gvr = s.mutable_claim()->mutable_type()->mutable_gvr();
  gvr->set_group(group);
  gvr->set_version("v1");
  gvr->set_resource(resource);
  if (ns.empty()) {
    s.mutable_claim()->mutable_scope()->set_cluster(true);
  } else {
    s.mutable_claim()->mutable_scope()->set_namespace_(ns);
  }
  s.set_state(state);
  s.set_reason(reason);
  return s;
}

constexpr auto kStreaming = reverser::v1::STREAM_STATE_STREAMING;
constexpr auto kReplaying = reverser::v1::STREAM_STATE_REPLAYING;
constexpr auto kBlocked = reverser::v1::STREAM_STATE_BLOCKED;

TEST(StreamReadinessTest, NoStreamsIsNoResolvedTypes) {
  StreamRollup r = RollUpStreams({});
  EXPECT_EQ(r.total, 0u);
  EXPECT_FALSE(r.running());
  EXPECT_EQ(r.reason, "NoResolvedTypes");
  EXPECT_EQ(r.message, "0/0 streams running; no resolved resource types");
  EXPECT_TRUE(r.pending_sample.empty());
}

TEST(StreamReadinessTest, AllStreamingIsAllStreamsReady) {
  StreamRollup r = RollUpStreams({Stream("", "configmaps", "a", kStreaming, "AllStreamsReady"),
                                  Stream("apps", "deployments", "a", kStreaming)});
  EXPECT_TRUE(r.running());
  EXPECT_EQ(r.reason, "AllStreamsReady");
  EXPECT_EQ(r.message, "2/2 streams running");
}

// A type followed in several namespaces counts once, with the strongest state of its streams.
TEST(StreamReadinessTest, TypesCountOnceWithTheirStrongestState) {
  StreamRollup r = RollUpStreams({Stream("", "configmaps", "a", kStreaming),
                                  Stream("", "configmaps", "b", kReplaying, "InitialReplay"),
                                  Stream("apps", "deployments", "a", kStreaming),
                                  Stream("apps", "deployments", "b", kStreaming)});
  EXPECT_EQ(r.total, 2u);
  EXPECT_EQ(r.ready, 1u);
  EXPECT_EQ(r.replaying, 1u);
  EXPECT_EQ(r.blocked, 0u);
  EXPECT_EQ(r.reason, "Replaying");
  EXPECT_EQ(r.message, "1/2 streams running; 1 replaying (configmaps)");
  EXPECT_EQ(r.pending_sample, (std::vector<std::string>{"configmaps"}));

  // Blocked beats replaying beats streaming, whatever the order.
  StreamRollup b = RollUpStreams({Stream("", "configmaps", "b", kBlocked, "WatchError"),
                                  Stream("", "configmaps", "a", kReplaying),
                                  Stream("", "configmaps", "c", kStreaming)});
  EXPECT_EQ(b.total, 1u);
  EXPECT_EQ(b.blocked, 1u);
  EXPECT_EQ(b.reason, "WatchError");
}

// A blocked stream's reason is the roll-up's — WatchNotPermitted wherever a type is forbidden —
// never Replaying; the sample lists blocked types first.
TEST(StreamReadinessTest, BlockedReasonAndMessage) {
  StreamRollup r =
      RollUpStreams({Stream("", "secrets", "a", kReplaying, "InitialReplay"),
                     Stream("example.com", "widgets", "", kBlocked, "ExpiredResourceVersion"),
                     Stream("apps", "deployments", "", kBlocked, "WatchNotPermitted"),
                     Stream("", "configmaps", "a", kStreaming)});
  EXPECT_EQ(r.total, 4u);
  EXPECT_EQ(r.ready, 1u);
  EXPECT_EQ(r.replaying, 1u);
  EXPECT_EQ(r.blocked, 2u);
  EXPECT_EQ(r.reason, "WatchNotPermitted");
  EXPECT_EQ(r.message, "1/4 streams running; 3 blocked (deployments.apps, widgets.example.com)");
  EXPECT_EQ(r.pending_sample,
            (std::vector<std::string>{"deployments.apps", "widgets.example.com", "secrets"}));

  // Without a forbidden type: the blocked stream's own reason (the first by name).
  StreamRollup own = RollUpStreams({Stream("b.io", "bs", "", kBlocked, "RedisStateLost"),
                                    Stream("a.io", "as", "", kBlocked, "WatchError")});
  EXPECT_EQ(own.reason, "WatchError");
  StreamRollup unnamed = RollUpStreams({Stream("", "configmaps", "", kBlocked, "")});
  EXPECT_EQ(unnamed.reason, "WatchError");
}

TEST(StreamReadinessTest, SampleAndMessageNamesAreBoundedToFive) {
  std::vector<reverser::v1::StreamReadiness> streams;
  for (char c = 'a'; c <= 'g'; ++c) {
    streams.push_back(Stream("", std::string(1, c) + "s", "ns", kReplaying));
  }
  StreamRollup r = RollUpStreams(streams);
  EXPECT_EQ(r.pending_sample, (std::vector<std::string>{"as", "bs", "cs", "ds", "es"}));
  EXPECT_EQ(r.message, "0/7 streams running; 7 replaying (as, bs, cs, ds, es)");

  reverser::v1::StreamSummary summary;
  summary.add_pending_sample("stale");
  FillSummary(r, &summary);
  EXPECT_EQ(summary.total(), 7u);
  EXPECT_EQ(summary.replaying(), 7u);
  EXPECT_EQ(summary.reason(), "Replaying");
  EXPECT_EQ(summary.message(), r.message);
  ASSERT_EQ(summary.pending_sample_size(), 5);
  EXPECT_EQ(summary.pending_sample(0), "as");
}

TEST(StreamReadinessTest, DisplayNames) {
  reverser::v1::GroupVersionResource core;
  core.set_version("v1");
  core.set_resource("configmaps");
  EXPECT_EQ(StreamDisplayName(core), "configmaps");
  reverser::v1::GroupVersionResource apps;
  apps.set_group("apps");
  apps.set_version("v1");
  apps.set_resource("deployments");
  EXPECT_EQ(StreamDisplayName(apps), "deployments.apps");
}

}  // namespace
}  // namespace reverser::rules
