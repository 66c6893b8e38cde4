#include "services/splicer/refusal_book.h"

#include <gtest/gtest.h>

#include "libs/core/proto_convert.h"
#include "libs/core/refusal_text.h"

namespace reverser::splicer {
namespace {

reverser::v1::GitTargetRef Target() {
  reverser::v1::GitTargetRef target;
  target.set_namespace_("team");
  target.set_name("mirror");
  target.set_uid("uid-1");
  return target;
}

reverser::v1::Claim Claim(const std::string& resource, const std::string& ns = "team") {
  reverser::v1::Claim claim;
  claim.mutable_type()->mutable_gvr()->set_version("v1");
  claim.mutable_type()->mutable_gvr()->set_resource(resource);
  claim.mutable_scope()->set_namespace_(ns);
  return claim;
}

reverser::v1::ObjectBody Object(const std::string& resource, const std::string& name) {
  reverser::v1::ObjectBody body;
  body.mutable_ref()->mutable_gvr()->set_version("v1");
  body.mutable_ref()->mutable_gvr()->set_resource(resource);
  body.mutable_ref()->set_namespace_("team");
  body.mutable_ref()->set_name(name);
  return body;
}

reverser::v1::Refusal Refused(const reverser::v1::Claim& claim, const std::string& name,
                              uint64_t rv, const std::string& message = "no recipients") {
  reverser::v1::Refusal refusal;
  *refusal.mutable_target() = Target();
  *refusal.mutable_claim() = claim;
  refusal.mutable_position()->set_rv(rv);
  if (!name.empty()) {
    *refusal.mutable_object() = Object(claim.type().gvr().resource(), name).ref();
    refusal.set_kind("Secret");
  }
  refusal.set_reason(reverser::v1::REFUSAL_REASON_ENCRYPTION_UNAVAILABLE);
  refusal.set_message(message);
  return refusal;
}

reverser::v1::DeliveryAck Ack(const reverser::v1::Claim& claim, uint64_t rv) {
  reverser::v1::DeliveryAck ack;
  *ack.mutable_target() = Target();
  *ack.mutable_claim() = claim;
  ack.mutable_position()->set_rv(rv);
  return ack;
}

reverser::v1::StreamSummary Summary(const RefusalBook& book) {
  reverser::v1::StreamSummary summary;
  *summary.mutable_target() = Target();
  book.Fill(&summary);
  return summary;
}

std::vector<std::string> Names(const reverser::v1::StreamSummary& summary) {
  std::vector<std::string> out;
  for (const auto& refusal : summary.refusals()) {
    out.push_back(refusal.file().empty() ? refusal.object().name() : refusal.file());
  }
  return out;
}

const reverser::v1::Claim kSecrets = Claim("secrets");

TEST(RefusalBook, ARefusedObjectStandsThroughItsOwnAckAndIsDeduplicated) {
  RefusalBook book;
  book.OnEventSent(Target(), kSecrets, core::StreamPosition(10, 0), Object("secrets", "s"));
  book.OnRefusal(Refused(kSecrets, "s", 10));
  book.OnAck(Ack(kSecrets, 10));  // the refused item is acked too
  EXPECT_EQ(Summary(book).refused_objects(), 1u);
  // Delivered again and refused again (the refusal precedes the ack): still one object.
  book.OnEventSent(Target(), kSecrets, core::StreamPosition(11, 0), Object("secrets", "s"));
  book.OnRefusal(Refused(kSecrets, "s", 11, "still no recipients"));
  book.OnAck(Ack(kSecrets, 11));
  auto summary = Summary(book);
  ASSERT_EQ(summary.refused_objects(), 1u);
  ASSERT_EQ(summary.refusals_size(), 1);
  EXPECT_EQ(summary.refusals(0).message(), "still no recipients");
  EXPECT_EQ(summary.refusals(0).position().rv(), 11u);
}

TEST(RefusalBook, ALaterSuccessfulDeliveryOfTheObjectClearsIt) {
  RefusalBook book;
  book.OnRefusal(Refused(kSecrets, "s", 10));
  book.OnRefusal(Refused(kSecrets, "t", 11));
  // Another object's success settles nothing for s; s's own success clears it.
  book.OnEventSent(Target(), kSecrets, core::StreamPosition(12, 0), Object("secrets", "u"));
  book.OnEventSent(Target(), kSecrets, core::StreamPosition(13, 0), Object("secrets", "s"));
  EXPECT_EQ(Summary(book).refused_objects(), 2u) << "not before the ack";
  book.OnAck(Ack(kSecrets, 13));
  auto summary = Summary(book);
  EXPECT_EQ(summary.refused_objects(), 1u);
  EXPECT_EQ(Names(summary), std::vector<std::string>{"t"});
}

TEST(RefusalBook, AResyncClearsWhatItNoLongerRefusesInItsStreamOnly) {
  RefusalBook book;
  const reverser::v1::Claim other = Claim("configmaps");
  book.OnRefusal(Refused(kSecrets, "gone", 5));
  book.OnRefusal(Refused(kSecrets, "kept", 6));
  book.OnRefusal(Refused(other, "elsewhere", 7));
  book.OnResyncSent(Target(), kSecrets, core::StreamPosition(20, UINT64_MAX));
  book.OnRefusal(Refused(kSecrets, "kept", 20));  // the resync refuses it again
  book.OnAck(Ack(kSecrets, 19));                  // not yet the resync
  EXPECT_EQ(Summary(book).refused_objects(), 3u);
  reverser::v1::DeliveryAck resync_ack = Ack(kSecrets, 20);
  resync_ack.mutable_position()->set_seq(UINT64_MAX);
  book.OnAck(resync_ack);
  auto summary = Summary(book);
  EXPECT_EQ(summary.refused_objects(), 2u);
  EXPECT_EQ(Names(summary), (std::vector<std::string>{"kept", "elsewhere"}));
}

TEST(RefusalBook, MessageLevelRefusalsClearOnAnyLaterAckedDelivery) {
  RefusalBook book;
  reverser::v1::Refusal config;
  *config.mutable_target() = Target();
  config.set_reason(reverser::v1::REFUSAL_REASON_INVALID_TARGET_CONFIG);
  config.set_message("bad template");
  book.OnRefusal(config);
  ASSERT_EQ(Summary(book).refused_objects(), 1u);
  book.OnEventSent(Target(), kSecrets, core::StreamPosition(3, 0), Object("secrets", "a"));
  book.OnAck(Ack(kSecrets, 3));
  EXPECT_EQ(Summary(book).refused_objects(), 0u);
}

TEST(RefusalBook, BoundedToTheNewestObjectsAndSampled) {
  RefusalBook book({/*max_objects=*/3, /*sample=*/2});
  for (int i = 0; i < 5; ++i) book.OnRefusal(Refused(kSecrets, "s" + std::to_string(i), 10 + i));
  auto summary = Summary(book);
  EXPECT_EQ(summary.refused_objects(), 3u);
  EXPECT_EQ(Names(summary), (std::vector<std::string>{"s4", "s3"}));
}

TEST(RefusalBook, FilesAreReplacedByEachCompleteSet) {
  RefusalBook book;
  reverser::v1::RefusedFiles files;
  *files.mutable_target() = Target();
  for (const char* path : {"clusters/a/big.yaml", "clusters/a/bomb.yaml"}) {
    auto* refusal = files.add_refusals();
    *refusal->mutable_target() = Target();
    refusal->set_file(path);
    refusal->set_reason(reverser::v1::REFUSAL_REASON_UNSUPPORTED_CONTENT);
  }
  book.OnRefusedFiles(files);
  auto summary = Summary(book);
  EXPECT_EQ(summary.refused_files(), 2u);
  EXPECT_EQ(summary.refused_objects(), 0u);
  EXPECT_EQ(Names(summary),
            (std::vector<std::string>{"clusters/a/big.yaml", "clusters/a/bomb.yaml"}));
  files.clear_refusals();
  book.OnRefusedFiles(files);
  EXPECT_EQ(Summary(book).refused_files(), 0u);
}

TEST(RefusalBook, SamplesCutLongNamesAndForgottenTargetsReportNothing) {
  RefusalBook book;
  book.OnRefusal(Refused(Claim("roles"), std::string(100000, 'r'), 1));
  auto summary = Summary(book);
  ASSERT_EQ(summary.refusals_size(), 1);
  EXPECT_LE(summary.refusals(0).object().name().size(), core::kRefusalNameBytes + 3);
  book.ForgetTarget("uid-1");
  EXPECT_EQ(Summary(book).refused_objects(), 0u);
  EXPECT_EQ(Summary(book).refusals_size(), 0);
}

TEST(RefusalBookTest, APathRefusalStandsUntilAcceptedOrALaterDeliveryIsAcked) {
  RefusalBook book;
  reverser::v1::PathRefusal refusal;
  *refusal.mutable_target() = Target();
  refusal.set_path("clusters/a");
  refusal.set_reason("UnsupportedContent");
  refusal.set_message("Git path refused at clusters/a: duplicate: x");
  refusal.set_issue_count(1);
  book.OnPathRefusal(refusal);
  EXPECT_EQ(Summary(book).path_refusal().message(), refusal.message());
  // The gitworker accepts the path again.
  reverser::v1::PathRefusal accepted;
  *accepted.mutable_target() = Target();
  book.OnPathRefusal(accepted);
  EXPECT_FALSE(Summary(book).has_path_refusal());

  // A delivery sent before the refusal arrived settles nothing; one sent after it, once acked
  // (held writes never are), means the path took writes again.
  const auto claim = Claim("configmaps");
  book.OnPathRefusal(refusal);
  book.OnEventSent(Target(), claim, {20, 0}, Object("configmaps", "a"));
  book.OnPathRefusal(refusal);
  book.OnAck(Ack(claim, 20));
  EXPECT_TRUE(Summary(book).has_path_refusal());
  book.OnEventSent(Target(), claim, {21, 0}, Object("configmaps", "b"));
  book.OnAck(Ack(claim, 21));
  EXPECT_FALSE(Summary(book).has_path_refusal());
}

}  // namespace
}  // namespace reverser::splicer
