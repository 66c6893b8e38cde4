#include "libs/runtime/call_policy.h"

#include "gtest/gtest.h"
#include "proto/reverser/v1/catalog.pb.h"
#include "proto/reverser/v1/gitworker.pb.h"
#include "proto/reverser/v1/materializer.pb.h"
#include "proto/reverser/v1/splicer.pb.h"

namespace reverser::runtime {
namespace {

using enum CallerRole;

TEST(CallPolicyTest, RolesComeFromTheReverserNamesOfACertificate) {
  EXPECT_EQ(RolesOf({"reverser-splicer", "localhost", "127.0.0.1"}),
            (std::set<CallerRole>{kSplicer}));
  EXPECT_EQ(RolesOf({"splicer", "reverser-splicer.example.com", "Reverser-Splicer"}),
            std::set<CallerRole>{});
  EXPECT_EQ(RolesOf({"reverser-admin", "reverser-catalog"}),
            (std::set<CallerRole>{kCatalog, kAdmin}));
  EXPECT_EQ(RoleCertificateName(kGitWorker), "reverser-gitworker");
}

TEST(CallPolicyTest, EachDataPlaneCallHasItsOnePeer) {
  EXPECT_TRUE(AuthorizeCall("/reverser.v1.GitWorker/Deliver", {kSplicer}).ok());
  absl::Status denied = AuthorizeCall("/reverser.v1.GitWorker/Deliver", {kMaterializer});
  EXPECT_TRUE(absl::IsPermissionDenied(denied)) << denied;
  EXPECT_EQ(denied.message(),
            "/reverser.v1.GitWorker/Deliver may be called by reverser-splicer, not by "
            "reverser-materializer");
  // Not even an operator delivers content or names a remote.
  EXPECT_TRUE(absl::IsPermissionDenied(AuthorizeCall("/reverser.v1.GitWorker/Deliver", {kAdmin})));
  EXPECT_TRUE(AuthorizeCall("/reverser.v1.Catalog/WatchClaims", {kMaterializer}).ok());
  EXPECT_TRUE(absl::IsPermissionDenied(AuthorizeCall("/reverser.v1.Catalog/WatchClaims", {kSplicer})));
  EXPECT_TRUE(AuthorizeCall("/reverser.v1.Catalog/ReportStreamSummary", {kSplicer}).ok());
  EXPECT_TRUE(absl::IsPermissionDenied(
      AuthorizeCall("/reverser.v1.Catalog/ReportStreamSummary", {kAdmin})));
}

TEST(CallPolicyTest, AdminServicesAndReflectionAreForOperatorsHealthForEveryone) {
  for (const char* path : {"/reverser.v1.MaterializerAdmin/Compact",
                           "/reverser.v1.SplicerAdmin/Resplice", "/reverser.v1.CatalogAdmin/Rescan",
                           "/reverser.v1.GitWorkerAdmin/Status",
                           "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"}) {
    EXPECT_TRUE(AuthorizeCall(path, {kAdmin}).ok()) << path;
    EXPECT_TRUE(absl::IsPermissionDenied(AuthorizeCall(path, {kSplicer, kGitWorker}))) << path;
  }
  for (CallerRole role : {kCatalog, kMaterializer, kSplicer, kGitWorker, kAdmin}) {
    EXPECT_TRUE(AuthorizeCall("/grpc.health.v1.Health/Check", {role}).ok());
  }
}

TEST(CallPolicyTest, AnOperatorsCallsAreReviewedAsReadsOrWritesAServicesAreNot) {
  using enum OperatorAccess;
  EXPECT_EQ(OperatorAccessOf("/reverser.v1.GitWorkerAdmin/Status", {kAdmin}), kRead);
  EXPECT_EQ(OperatorAccessOf("/reverser.v1.Catalog/WatchTables", {kAdmin}), kRead);
  EXPECT_EQ(OperatorAccessOf("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                             {kAdmin}),
            kRead);
  for (const char* path : {"/reverser.v1.MaterializerAdmin/Compact",
                           "/reverser.v1.SplicerAdmin/Resplice", "/reverser.v1.CatalogAdmin/Rescan"}) {
    EXPECT_EQ(OperatorAccessOf(path, {kAdmin}), kWrite) << path;
    EXPECT_TRUE(AuthorizeCall(path, {kAdmin}).ok()) << path;
  }
  EXPECT_EQ(OperatorVerb(kWrite), "update");
  EXPECT_EQ(OperatorVerb(kRead), "get");
  // A service following tables with its own role is not an operator; health is the mesh's.
  EXPECT_EQ(OperatorAccessOf("/reverser.v1.Catalog/WatchTables", {kSplicer}), kNone);
  EXPECT_EQ(OperatorAccessOf("/reverser.v1.Catalog/WatchTables", {kSplicer, kAdmin}), kNone);
  EXPECT_EQ(OperatorAccessOf("/grpc.health.v1.Health/Check", {kAdmin}), kNone);
  EXPECT_EQ(OperatorAccessOf("/reverser.v1.GitWorker/Deliver", {kSplicer}), kNone);
}

TEST(CallPolicyTest, UnknownCallsAndUnknownCallersAreRefused) {
  EXPECT_TRUE(absl::IsUnauthenticated(AuthorizeCall("/grpc.health.v1.Health/Check", {})));
  EXPECT_TRUE(absl::IsPermissionDenied(AuthorizeCall("/reverser.v1.GitWorker/Smuggle", {kAdmin})));
  EXPECT_TRUE(absl::IsPermissionDenied(AuthorizeCall("", {kAdmin})));
  // A wildcard covers one service's methods, not a longer path or a look-alike service.
  EXPECT_TRUE(absl::IsPermissionDenied(
      AuthorizeCall("/reverser.v1.SplicerAdmin/Resplice/extra", {kAdmin})));
  EXPECT_TRUE(absl::IsPermissionDenied(AuthorizeCall("/reverser.v1.SplicerAdmin/", {kAdmin})));
  EXPECT_TRUE(absl::IsPermissionDenied(
      AuthorizeCall("/reverser.v1.SplicerAdminX/Resplice", {kAdmin})));
}

TEST(CallPolicyTest, EveryRpcOfTheProtocolsHasARoleThatMayCallIt) {
  // Read from the protocol itself: a new RPC fails here until the table (and docs/security.md)
  // says who may call it.
  const std::set<CallerRole> everyone = {kCatalog, kMaterializer, kSplicer, kGitWorker, kAdmin};
  int methods = 0;
  for (const google::protobuf::FileDescriptor* file :
       {reverser::v1::ClaimSet::descriptor()->file(),
        reverser::v1::MaterializationState::descriptor()->file(),
        reverser::v1::ClusterSnapshot::descriptor()->file(),
        reverser::v1::DeliveryMessage::descriptor()->file()}) {
    for (int s = 0; s < file->service_count(); ++s) {
      const google::protobuf::ServiceDescriptor* service = file->service(s);
      for (int m = 0; m < service->method_count(); ++m) {
        const std::string path =
            "/" + service->full_name() + "/" + service->method(m)->name();
        EXPECT_TRUE(AuthorizeCall(path, everyone).ok()) << path;
        ++methods;
      }
    }
  }
  EXPECT_GE(methods, 18);  // the four files and their services were found
}

}  // namespace
}  // namespace reverser::runtime
