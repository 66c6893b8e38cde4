// Operators' tokens reviewed against kube-sim's TokenReview and SubjectAccessReview, answered from
// its tokens and RBAC rules: who may look, who may change, what is cached and what is not.

#include "libs/kube/access_review.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "libs/kube/config.h"
#include "libs/kube/httplib_transport.h"
#include "tools/kube-sim/kube_sim.h"

namespace reverser::kube {
namespace {

class AccessReviewTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto sim = kubesim::KubeSim::Start({});
    ASSERT_TRUE(sim.ok()) << sim.status();
    sim_ = std::move(*sim);
    sim_->authenticator().AddToken("service-token", {"system:serviceaccount:reverser:splicer",
                                                     "uid-s", {"system:authenticated"}, {}});
    sim_->authenticator().AddToken("viewer-token",
                                   {"viewer", "uid-v", {"operators", "system:authenticated"}, {}});
    sim_->authenticator().AddToken("bystander-token",
                                   {"bystander", "uid-b", {"system:authenticated"}, {}});
    kubesim::RbacRule delegate;
    delegate.users = {"system:serviceaccount:reverser:splicer"};
    delegate.verbs = {"create"};
    delegate.api_groups = {"authentication.k8s.io", "authorization.k8s.io"};
    delegate.resources = {"tokenreviews", "subjectaccessreviews"};
    sim_->authorizer().AddRule(delegate);
    kubesim::RbacRule view;  // by group: the review carries the user's groups
    view.groups = {"operators"};
    view.verbs = {"get"};
    view.api_groups = {"configbutler.ai"};
    view.resources = {"reverser/admin"};
    sim_->authorizer().AddRule(view);
  }
  void TearDown() override {
    if (sim_) sim_->Stop();
  }

  std::unique_ptr<KubeAccessReviewer> Reviewer(const std::string& token) {
    auto config = ParseKubeconfig(sim_->Kubeconfig(token), "");
    EXPECT_TRUE(config.ok()) << config.status();
    auto client = NewHttplibRestClient(*config, "access-review-test");
    EXPECT_TRUE(client.ok()) << client.status();
    AccessReviewOptions options;
    options.now = [this] { return now_; };
    return std::make_unique<KubeAccessReviewer>(*client, options);
  }

  static runtime::OperatorCall Call(const std::string& verb) {
    return {"splicer", verb == "get" ? "/reverser.v1.SplicerAdmin/Status"
                                     : "/reverser.v1.SplicerAdmin/Resplice",
            verb};
  }

  std::unique_ptr<kubesim::KubeSim> sim_;
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
};

TEST_F(AccessReviewTest, TheApiServersRbacDecidesAndTheDecisionIsCachedBriefly) {
  auto reviewer = Reviewer("service-token");
  absl::StatusOr<std::string> viewer = reviewer->Review("viewer-token", Call("get"));
  ASSERT_TRUE(viewer.ok()) << viewer.status();
  EXPECT_EQ(*viewer, "viewer");
  EXPECT_EQ(reviewer->reviews_requested(), 2);  // a TokenReview and a SubjectAccessReview

  absl::StatusOr<std::string> change = reviewer->Review("viewer-token", Call("update"));
  EXPECT_TRUE(absl::IsPermissionDenied(change.status())) << change.status();
  EXPECT_TRUE(absl::StrContains(change.status().message(),
                                "user \"viewer\" may not update reverser/admin \"splicer\""))
      << change.status();
  EXPECT_TRUE(absl::StrContains(change.status().message(), "resources: [reverser/admin]"));

  absl::StatusOr<std::string> bystander = reviewer->Review("bystander-token", Call("get"));
  EXPECT_TRUE(absl::IsPermissionDenied(bystander.status())) << bystander.status();
  absl::StatusOr<std::string> forged = reviewer->Review("forged-token", Call("get"));
  EXPECT_TRUE(absl::IsUnauthenticated(forged.status())) << forged.status();
  EXPECT_TRUE(absl::StrContains(forged.status().message(), "not valid")) << forged.status();

  // Within the cache's time nothing is asked again, allowed or refused.
  const int64_t asked = reviewer->reviews_requested();
  EXPECT_TRUE(reviewer->Review("viewer-token", Call("get")).ok());
  EXPECT_TRUE(absl::IsPermissionDenied(reviewer->Review("viewer-token", Call("update")).status()));
  EXPECT_TRUE(absl::IsUnauthenticated(reviewer->Review("forged-token", Call("get")).status()));
  EXPECT_EQ(reviewer->reviews_requested(), asked);

  // Once it expires, RBAC is asked again: a granted update takes effect.
  kubesim::RbacRule change_rule;
  change_rule.users = {"viewer"};
  change_rule.verbs = {"update"};
  change_rule.api_groups = {"configbutler.ai"};
  change_rule.resources = {"reverser/admin"};
  sim_->authorizer().AddRule(change_rule);
  now_ += absl::Seconds(3);  // past the 2 s of a refusal, within the 10 s of an allowance
  EXPECT_TRUE(reviewer->Review("viewer-token", Call("update")).ok());
  EXPECT_EQ(reviewer->reviews_requested(), asked + 2);
}

TEST_F(AccessReviewTest, AServiceThatMayNotReviewSaysSoInsteadOfBlamingTheOperator) {
  auto reviewer = Reviewer("bystander-token");  // no create on tokenreviews
  absl::StatusOr<std::string> user = reviewer->Review("viewer-token", Call("get"));
  EXPECT_TRUE(absl::IsFailedPrecondition(user.status())) << user.status();
  EXPECT_TRUE(absl::StrContains(user.status().message(), "system:auth-delegator"))
      << user.status();
  // Not cached: once the service is granted the reviews, the same call passes.
  kubesim::RbacRule delegate;
  delegate.users = {"bystander"};
  delegate.verbs = {"create"};
  delegate.api_groups = {"authentication.k8s.io", "authorization.k8s.io"};
  delegate.resources = {"tokenreviews", "subjectaccessreviews"};
  sim_->authorizer().AddRule(delegate);
  EXPECT_TRUE(reviewer->Review("viewer-token", Call("get")).ok());
}

TEST_F(AccessReviewTest, AnApiServerThatDoesNotAnswerIsUnavailableAndNotCached) {
  auto config = ParseKubeconfig(sim_->Kubeconfig("service-token"), "");
  ASSERT_TRUE(config.ok());
  config->server = "http://127.0.0.1:1";  // nothing listens there
  auto client = NewHttplibRestClient(*config, "access-review-test");
  ASSERT_TRUE(client.ok());
  KubeAccessReviewer reviewer(*client);
  absl::StatusOr<std::string> user = reviewer.Review("viewer-token", Call("get"));
  EXPECT_FALSE(user.ok());
  EXPECT_FALSE(absl::IsUnauthenticated(user.status())) << user.status();
  EXPECT_FALSE(absl::IsPermissionDenied(user.status())) << user.status();
  EXPECT_EQ(reviewer.reviews_requested(), 1);
  EXPECT_FALSE(reviewer.Review("viewer-token", Call("get")).ok());
  EXPECT_EQ(reviewer.reviews_requested(), 2);  // asked again
}

}  // namespace
}  // namespace reverser::kube
