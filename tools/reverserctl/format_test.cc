// The human-readable output: aligned tables and each command's formatter, from hand-built
// responses.

#include "tools/reverserctl/format.h"

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tools/reverserctl/table.h"

namespace reverser::reverserctl {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

reverser::v1::Claim ConfigMapsIn(const std::string& ns) {
  reverser::v1::Claim claim;
  claim.mutable_type()->mutable_gvr()->set_version("v1");
  claim.mutable_type()->mutable_gvr()->set_resource("configmaps");
  claim.mutable_type()->mutable_gvk()->set_version("v1");
  claim.mutable_type()->mutable_gvk()->set_kind("ConfigMap");
  if (ns.empty()) {
    claim.mutable_scope()->set_cluster(true);
  } else {
    claim.mutable_scope()->set_namespace_(ns);
  }
  return claim;
}

TEST(TableTest, ColumnsAreAlignedAndEmptyCellsShowADash) {
  Table table({"NAME", "STATE"});
  table.AddRow({"a-long-name", "ok"});
  table.AddRow({"b", ""});
  table.AddRow({"multi\nline"});
  EXPECT_EQ(table.Render(),
            "NAME         STATE\n"
            "a-long-name  ok\n"
            "b            -\n"
            "multi line   -\n");
}

TEST(TableTest, WidthCountsCharactersNotBytes) {
  Table table({"A", "B"});
  table.AddRow({"—x", "1"});  // an em dash is 3 bytes, 1 column
  table.AddRow({"abc", "2"});
  EXPECT_EQ(table.Render(), "A    B\n—x   1\nabc  2\n");
}

TEST(FormatTest, TypesShowVerdictsAndWhyNotFollowed) {
  reverser::v1::ListTypesResponse types;
  types.set_generation(7);
  auto* followed = types.add_records();
  followed->mutable_identity()->mutable_gvr()->set_group("apps");
  followed->mutable_identity()->mutable_gvr()->set_version("v1");
  followed->mutable_identity()->mutable_gvr()->set_resource("deployments");
  followed->mutable_identity()->mutable_gvk()->set_kind("Deployment");
  followed->mutable_identity()->set_scope(reverser::v1::RESOURCE_SCOPE_NAMESPACED);
  followed->set_origin("builtin");
  followed->set_preferred_version(true);
  followed->set_verdict(reverser::v1::FOLLOW_VERDICT_FOLLOWABLE);
  auto* refused = types.add_records();
  refused->mutable_identity()->mutable_gvr()->set_group("authentication.k8s.io");
  refused->mutable_identity()->mutable_gvr()->set_version("v1");
  refused->mutable_identity()->mutable_gvr()->set_resource("tokenreviews");
  refused->mutable_identity()->mutable_gvk()->set_kind("TokenReview");
  refused->mutable_identity()->set_scope(reverser::v1::RESOURCE_SCOPE_CLUSTER);
  refused->set_origin("builtin");
  refused->set_verdict(reverser::v1::FOLLOW_VERDICT_REFUSED);
  auto* check = refused->add_checks();
  check->set_requirement("verbs");
  check->set_reason("missing-verbs");
  check->set_detail("list, watch");
  refused->add_checks()->set_requirement("served");
  refused->mutable_checks(1)->set_passed(true);

  auto plain = Lines(FormatTypes(types, /*why=*/false));
  ASSERT_EQ(plain.size(), 4u);
  // RESOURCE is as wide as the longest name plus two blanks; every column starts aligned.
  const std::string longest = "authentication.k8s.io/v1/tokenreviews";
  EXPECT_EQ(plain[0], "RESOURCE" + std::string(longest.size() - 8 + 2, ' ') +
                          "KIND         SCOPE       ORIGIN   VERDICT");
  EXPECT_EQ(plain[1], "apps/v1/deployments" + std::string(longest.size() - 19 + 2, ' ') +
                          "Deployment*  namespaced  builtin  FOLLOWABLE");
  EXPECT_EQ(plain[2], longest + "  TokenReview  cluster     builtin  REFUSED");
  EXPECT_EQ(plain[3], "2 type(s) at registry generation 7 (* = preferred version)");

  auto why = Lines(FormatTypes(types, /*why=*/true));
  EXPECT_TRUE(absl::EndsWith(why[0], "VERDICT     REASON")) << why[0];
  EXPECT_TRUE(absl::EndsWith(why[1], "FOLLOWABLE  -")) << why[1];
  EXPECT_TRUE(absl::EndsWith(why[2], "REFUSED     verbs: missing-verbs (list, watch)")) << why[2];
}

TEST(FormatTest, ClaimsAndTables) {
  reverser::v1::ClaimSet claims;
  claims.set_generation(3);
  *claims.add_claims() = ConfigMapsIn("team");
  *claims.add_claims() = ConfigMapsIn("");
  EXPECT_EQ(FormatClaims(claims),
            "CLAIM               KIND       SCOPE\n"
            "v1/configmaps@team  ConfigMap  team\n"
            "v1/configmaps       ConfigMap  cluster\n"
            "2 claim(s) at generation 3\n");

  reverser::v1::TableUpdate update;
  update.set_generation(4);
  update.set_full(false);
  auto* table = update.add_upserted();
  table->mutable_target()->set_namespace_("team");
  table->mutable_target()->set_name("mirror");
  table->mutable_destination()->set_provider_namespace("team");
  table->mutable_destination()->set_provider_name("repo");
  table->mutable_destination()->set_branch("main");
  table->mutable_destination()->set_path("clusters/a");
  auto* type = table->add_types();
  *type->mutable_type() = ConfigMapsIn("team").type();
  (*type->mutable_namespaces())["team"].add_operations(reverser::v1::OPERATION_CREATE);
  (*type->mutable_namespaces())["team"].add_operations(reverser::v1::OPERATION_DELETE);
  (*type->mutable_namespaces())[""].set_all(true);
  update.add_removed()->set_namespace_("team");
  update.mutable_removed(0)->set_name("old");
  EXPECT_EQ(FormatTables(update),
            "TARGET       DESTINATION                TYPE           NAMESPACE  OPERATIONS\n"
            "team/mirror  team/repo main:clusters/a  v1/configmaps  (all)      all\n"
            "team/mirror  team/repo main:clusters/a  v1/configmaps  team       CREATE,DELETE\n"
            "removed: team/old\n"
            "1 table(s) at generation 4 (changes only)\n");
}

TEST(FormatTest, StreamsSummaryAndDetail) {
  reverser::v1::ListStreamsResponse streams;
  auto* s = streams.add_summaries();
  s->mutable_target()->set_namespace_("team");
  s->mutable_target()->set_name("mirror");
  s->set_total(2);
  s->set_ready(1);
  s->set_replaying(1);
  s->set_reason("Replaying");
  s->add_pending_sample("v1/secrets team");
  auto* stream = s->add_streams();
  *stream->mutable_claim() = ConfigMapsIn("team");
  stream->set_state(reverser::v1::STREAM_STATE_STREAMING);
  auto summary = Lines(FormatStreams(streams, /*detail=*/false));
  ASSERT_EQ(summary.size(), 2u);
  EXPECT_EQ(summary[1], "team/mirror  1/2    1          0        Replaying  v1/secrets team  -");
  auto detail = FormatStreams(streams, /*detail=*/true);
  EXPECT_TRUE(absl::StrContains(detail, "team/mirror  v1/configmaps  team   STREAMING  -       -"))
      << detail;
}

TEST(FormatTest, BranchesShowWindowPendingAndLastPush) {
  reverser::v1::ListBranchesResponse branches;
  auto* b = branches.add_branches();
  b->mutable_destination()->set_provider_namespace("team");
  b->mutable_destination()->set_provider_name("repo");
  b->mutable_destination()->set_branch("main");
  b->mutable_destination()->set_path("clusters/a");
  b->set_head_sha("0123456789abcdef0123456789abcdef01234567");
  b->set_pending_writes(3);
  b->set_window_open(true);
  b->mutable_last_push()->set_seconds(1764440000);  // 2025-11-29T18:13:20Z
  b->set_last_error("push rejected:\nnon-fast-forward");
  EXPECT_EQ(FormatBranches(branches),
            "PROVIDER   BRANCH  PATH        HEAD          PENDING  WINDOW  LAST PUSH             "
            "LAST ERROR\n"
            "team/repo  main    clusters/a  0123456789ab  3        open    2025-11-29T18:13:20Z  "
            "push rejected: non-fast-forward\n");
}

TEST(FormatTest, BranchesOfReplicasNameTheirOwnerAndWhoDidNotAnswer) {
  reverser::v1::ListBranchesResponse branches;
  for (const char* owner : {"gw-a", "gw-b"}) {
    auto* b = branches.add_branches();
    b->mutable_destination()->set_provider_namespace("team");
    b->mutable_destination()->set_provider_name("repo");
    b->mutable_destination()->set_branch(std::string("b-") + owner);
    b->set_owner_replica(owner);
    b->set_reported_by(owner);
  }
  auto* a = branches.add_replicas();
  a->set_replica("gw-a");
  a->set_answered(true);
  auto* c = branches.add_replicas();
  c->set_replica("gw-c");
  c->set_address("10.0.0.3:9090");
  c->set_error("Deadline Exceeded");
  const std::string out = FormatBranches(branches);
  EXPECT_TRUE(absl::StrContains(out, "PROVIDER   BRANCH  OWNER  PATH")) << out;
  EXPECT_TRUE(absl::StrContains(out, "team/repo  b-gw-a  gw-a")) << out;
  EXPECT_TRUE(absl::StrContains(out, "team/repo  b-gw-b  gw-b")) << out;
  EXPECT_TRUE(absl::StrContains(out,
                                "replica gw-c at 10.0.0.3:9090 did not answer: Deadline "
                                "Exceeded\n"))
      << out;
  EXPECT_FALSE(absl::StrContains(out, "replica gw-a")) << out;
}

TEST(FormatTest, StatusListsComponentsAndSortedDetails) {
  reverser::v1::ServiceStatus status;
  status.set_service("splicer");
  status.set_instance("pod-1");
  status.set_ready(false);
  auto* c = status.add_components();
  c->set_name("tables");
  c->set_detail("waiting for watched-type tables");
  (*status.mutable_details())["z"] = "1";
  (*status.mutable_details())["a"] = "2";
  std::string out = FormatStatus(status);
  EXPECT_TRUE(absl::StrContains(out, "splicer  pod-1     -        no")) << out;
  EXPECT_TRUE(absl::StrContains(out, "tables     no     waiting for watched-type tables")) << out;
  EXPECT_LT(out.find("a       2"), out.find("z       1")) << out;
}

TEST(FormatTest, JsonIsProtobufJsonWithDefaults) {
  reverser::v1::RespliceResponse response;
  EXPECT_EQ(ToJson(response, /*pretty=*/false), "{\"streams\":0,\"claims\":[]}\n");
  reverser::v1::ClaimSet claims;
  *claims.add_claims() = ConfigMapsIn("team");
  auto doc = nlohmann::json::parse(ToJson(claims));
  EXPECT_EQ(doc["claims"][0]["scope"]["namespace"], "team");
  EXPECT_EQ(doc["claims"][0]["type"]["gvr"]["resource"], "configmaps");
}

TEST(FormatTest, TimesAreUtcAndUnsetIsEmpty) {
  google::protobuf::Timestamp t;
  EXPECT_EQ(FormatTime(t), "");
  t.set_seconds(0);
  t.set_nanos(5);
  EXPECT_EQ(FormatTime(t), "1970-01-01T00:00:00Z");
}

}  // namespace
}  // namespace reverser::reverserctl
