#include "libs/core/status.h"

#include "gtest/gtest.h"

namespace reverser::core {
namespace {

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::StatusOr<int> Quarter(int x) {
  ASSIGN_OR_RETURN(int half, Half(x));
  ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

absl::Status CheckEven(int x) {
  RETURN_IF_ERROR(Half(x).status());
  return absl::OkStatus();
}

TEST(StatusTest, MacrosPropagateErrors) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckEven(2).ok());
  EXPECT_FALSE(CheckEven(3).ok());
}

TEST(StatusTest, AnnotateKeepsCode) {
  absl::Status s = Annotate(absl::NotFoundError("no file"), "reading kubeconfig");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "reading kubeconfig: no file");
  EXPECT_TRUE(Annotate(absl::OkStatus(), "x").ok());
}

TEST(StatusTest, AnnotateKeepsPayloads) {
  absl::Status tagged = absl::InvalidArgumentError("bad");
  tagged.SetPayload("type.example/why", absl::Cord("7"));
  absl::Status s = Annotate(tagged, "writing");
  ASSERT_TRUE(s.GetPayload("type.example/why").has_value());
  EXPECT_EQ(std::string(*s.GetPayload("type.example/why")), "7");
}

}  // namespace
}  // namespace reverser::core
