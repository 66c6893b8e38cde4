#include "services/gitworker/work_dir.h"

#include <gtest/gtest.h>

#include "tests/fixtures/temp_dir.h"

namespace reverser::gitworker {
namespace {

// Two gitworker processes on one work dir would both update the same clones: the second is
// refused, naming the folder, and the dir is free again once the holder is gone.
TEST(WorkDirLockTest, OneHolderAtATime) {
  testing::ScopedTempDir dir{"workdir"};
  ASSERT_TRUE(PreparePrivateWorkDir(dir.path() + "/work").ok());
  auto first = WorkDirLock::Acquire(dir.path() + "/work");
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = WorkDirLock::Acquire(dir.path() + "/work");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("in use by another gitworker process"),
            std::string::npos)
      << second.status();
  first->reset();
  EXPECT_TRUE(WorkDirLock::Acquire(dir.path() + "/work").ok());
}

}  // namespace
}  // namespace reverser::gitworker
