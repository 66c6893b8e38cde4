#include "libs/commitmeta/identity.h"

#include "gtest/gtest.h"

namespace reverser::commitmeta {
namespace {

TEST(IdentityTest, DefaultCommitter) {
  EXPECT_EQ(DefaultCommitter(), (Signature{"GitOps Reverser", "noreply@configbutler.ai"}));
}

TEST(IdentityTest, ConstructSafeEmailFromUsernames) {
  EXPECT_EQ(ConstructSafeEmail("system:serviceaccount:flux-system:kustomize-controller"),
            "systemserviceaccountflux-systemkustomize-controller@noreply.cluster.local");
  EXPECT_EQ(ConstructSafeEmail("Alice.Smith"), "alice.smith@noreply.cluster.local");
  EXPECT_EQ(ConstructSafeEmail("kubernetes-admin"), "kubernetes-admin@noreply.cluster.local");
  EXPECT_EQ(ConstructSafeEmail("alice@example.com"), "alice@example.com");
  EXPECT_EQ(ConstructSafeEmail(""), "unknown-user@noreply.cluster.local");
  EXPECT_EQ(ConstructSafeEmail("::@@ "), "unknown-user@noreply.cluster.local");
  EXPECT_EQ(ConstructSafeEmail("oidc:Zoë_Ünal"), "oidczonal@noreply.cluster.local");
  EXPECT_EQ(ConstructSafeEmail("x", "example.org"), "x@noreply.example.org");
  // Go's ToLower turns the Kelvin sign into 'k' and U+0130 into 'i' + a combining dot.
  EXPECT_EQ(ConstructSafeEmail("\xE2\x84\xAA" "elvin-\xC4\xB0"), "kelvin-i@noreply.cluster.local");
}

TEST(IdentityTest, EmailValidationFollowsTheReferenceRegex) {
  EXPECT_TRUE(IsValidEmail("a.b+c_d%e-f@sub.example.co"));
  EXPECT_TRUE(IsValidEmail("x@a.b.cd"));
  EXPECT_FALSE(IsValidEmail("x@a.c"));        // TLD shorter than 2
  EXPECT_FALSE(IsValidEmail("x@example"));    // no dot
  EXPECT_FALSE(IsValidEmail("x@.com"));       // empty host
  EXPECT_FALSE(IsValidEmail("@example.com"));
  EXPECT_FALSE(IsValidEmail("x@@example.com"));
  EXPECT_FALSE(IsValidEmail("x@example.c0m"));
  EXPECT_FALSE(IsValidEmail("a b@example.com"));
  EXPECT_FALSE(IsValidEmail("x@example.com\n"));
  EXPECT_FALSE(IsValidEmail(""));
}

TEST(IdentityTest, AuthorNameAndEmailFromClaims) {
  const Actor actor = Actor::FromUserInfo(
      "oidc:alice", {{kDisplayNameClaim, {"  Alice Smith "}},
                     {kEmailClaim, {" alice@example.com", "ignored@example.com"}},
                     {"other", {"x"}}});
  EXPECT_EQ(actor.display_name, "  Alice Smith ");
  EXPECT_EQ(AuthorName(actor), "Alice Smith");
  EXPECT_EQ(AuthorEmail(actor), "alice@example.com");
  EXPECT_EQ(AuthorFor(actor, DefaultCommitter()),
            (Signature{"Alice Smith", "alice@example.com"}));
}

TEST(IdentityTest, UnsafeOrMissingClaimsFallBackToTheUsername) {
  for (const char* bad_name : {"Eve <eve@x.io>", "line\nbreak", "tab\tname", "c1\xC2\x85x",
                               "   ", ""}) {
    SCOPED_TRACE(bad_name);
    EXPECT_EQ(AuthorName({"eve", bad_name, ""}), "eve");
  }
  EXPECT_EQ(AuthorName({"eve", "Zoë Ünal", ""}), "Zoë Ünal");
  // A username a signature cannot hold loses what it cannot hold.
  EXPECT_EQ(AuthorName({"eve <x>\nlater", "", ""}), "eve xlater");
  EXPECT_EQ(AuthorName({"c1\xC2\x85x", "", ""}), "c1x");
  EXPECT_EQ(AuthorName({" <> ", "", ""}), "unknown-user");
  EXPECT_EQ(AuthorName({"   ", "", ""}), "unknown-user");
  EXPECT_EQ(AuthorEmail({"Eve", "", "not-an-email"}), "eve@noreply.cluster.local");
  EXPECT_EQ(AuthorEmail({"eve@corp.example", "", ""}), "eve@corp.example");
  EXPECT_EQ(Actor::FromUserInfo("bob", {{kEmailClaim, {}}}).email, "");
}

TEST(IdentityTest, NoActorMeansTheCommitterAuthors) {
  const Signature committer{"Ops", "ops@example.com"};
  EXPECT_EQ(AuthorFor(std::nullopt, committer), committer);
  EXPECT_EQ(AuthorFor(Actor{"", "Someone", "s@example.com"}, committer), committer);
  EXPECT_EQ(AuthorFor(Actor{"system:serviceaccount:flux-system:kustomize-controller", "", ""},
                      committer),
            (Signature{"system:serviceaccount:flux-system:kustomize-controller",
                       "systemserviceaccountflux-systemkustomize-controller@noreply.cluster.local"}));
}

}  // namespace
}  // namespace reverser::commitmeta
