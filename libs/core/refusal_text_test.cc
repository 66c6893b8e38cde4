#include "libs/core/refusal_text.h"

#include <gtest/gtest.h>

namespace reverser::core {
namespace {

TEST(RefusalText, ReasonNamesAreCamelCase) {
  EXPECT_EQ(RefusalReasonName(reverser::v1::REFUSAL_REASON_ENCRYPTION_UNAVAILABLE),
            "EncryptionUnavailable");
  EXPECT_EQ(RefusalReasonName(reverser::v1::REFUSAL_REASON_UNSUPPORTED_CONTENT),
            "UnsupportedContent");
  EXPECT_EQ(RefusalReasonName(reverser::v1::REFUSAL_REASON_UNSPECIFIED), "Unspecified");
}

TEST(RefusalText, SubjectsNameKindNamespaceAndName) {
  reverser::v1::Refusal refusal;
  refusal.set_kind("ConfigMap");
  refusal.mutable_object()->set_namespace_("demo");
  refusal.mutable_object()->set_name("web");
  EXPECT_EQ(RefusedSubjectText(refusal), "ConfigMap demo/web");
  refusal.mutable_object()->clear_namespace_();
  refusal.set_kind("");
  refusal.mutable_object()->mutable_gvr()->set_resource("clusterroles");
  EXPECT_EQ(RefusedSubjectText(refusal), "clusterroles web");
  reverser::v1::Refusal file;
  file.set_file("clusters/a/x.yaml");
  EXPECT_EQ(RefusedSubjectText(file), "file clusters/a/x.yaml");
  EXPECT_EQ(RefusedSubjectText(reverser::v1::Refusal()), "GitTarget delivery");
}

TEST(RefusalText, HostileNamesAreEscapedAndCut) {
  EXPECT_EQ(EscapeAndAbbreviate("a\\b\x01"
                                "c",
                                100),
            "a\\\\b\\x01c");
  EXPECT_EQ(EscapeAndAbbreviate(std::string(300, 'x'), 10), "xxxxxxxxxx...");
  // An escape is never cut in half, nor a UTF-8 sequence.
  EXPECT_EQ(EscapeAndAbbreviate("abc\x01", 5), "abc...");
  EXPECT_EQ(EscapeAndAbbreviate("ab\xC3\xA9", 3), "ab...");
  EXPECT_EQ(EscapeAndAbbreviate("ab\xC3\xA9", 4), "ab\xC3\xA9");
}

}  // namespace
}  // namespace reverser::core
