// Signed commits on a signing target (BranchWorker with a SigningKeyResolver) judged with
// `git verify-commit`, and the Secret sources the resolvers read (files, the API of kube-sim).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "libs/kube/httplib_transport.h"
#include "libs/kube/secret_data.h"
#include "services/gitworker/branch_worker.h"
#include "services/gitworker/secret_source.h"
#include "services/gitworker/test_support.h"
#include "tests/fixtures/git_repos.h"
#include "tests/fixtures/temp_dir.h"
#include "tools/kube-sim/kube_sim.h"

namespace reverser::gitworker {
namespace {

using ::reverser::testing::Git;
using namespace ::reverser::gitworker::testsupport;  // NOLINT

constexpr char kSigningSecret[] = "team/signing";

class SignedBranchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto remote = testing::CreateBareRemote(dir_.path());
    ASSERT_TRUE(remote.ok()) << remote.status();
    remote_ = *remote;
    auto key = git::SshSigningKey::Generate();
    ASSERT_TRUE(key.ok());
    key_ = std::make_shared<const git::SshSigningKey>(*key);
    config_ = Config(remote_, 0);
    config_.set_signing_secret(kSigningSecret);
  }

  std::unique_ptr<BranchWorker> MakeWorker(SigningKeyResolver resolver) {
    BranchWorkerOptions options;
    options.pack_threshold = 50;
    options.key = {"team", "repo", "main"};
    options.remote_url = remote_;
    options.work_dir = dir_.path() + "/work";
    options.push_cooldown = absl::ZeroDuration();
    options.signing_keys = std::move(resolver);
    options.clock = &clock_;
    options.metrics = &metrics_;
    return std::make_unique<BranchWorker>(options);
  }
  SigningKeyResolver FixedKey() {
    return [this](const std::string& secret)
               -> absl::StatusOr<std::shared_ptr<const git::SshSigningKey>> {
      EXPECT_EQ(secret, kSigningSecret);
      return key_;
    };
  }

  WorkItem Item(reverser::v1::LiveEvent event) {
    WorkItem item;
    item.kind = WorkItem::Kind::kEvent;
    item.settings = *SettingsFromConfig(config_);
    item.event = std::move(event);
    item.covers.push_back(CoverageOf(item, sink_));
    return item;
  }
  WorkItem Create(const std::string& name, uint64_t rv) {
    return Item(Event(config_, ConfigMaps(), reverser::v1::OPERATION_CREATE, "default", name, "v",
                      rv, "alice"));
  }
  WorkItem Resync(int count, uint64_t rv) {
    std::vector<reverser::v1::ObjectBody> objects;
    for (int i = 0; i < count; ++i) {
      objects.push_back(Object(ConfigMaps(), "default", absl::StrCat("cm", i), "r"));
    }
    WorkItem item;
    item.kind = WorkItem::Kind::kResync;
    item.settings = *SettingsFromConfig(config_);
    item.resync = Snapshot(config_, ConfigMaps(), std::move(objects), rv);
    item.covers.push_back(CoverageOf(item, sink_));
    return item;
  }

  // "<committer name>|<%G?>" per commit on the remote's main, newest first, as `git log` judges
  // the SSH signatures against the allowed signers file of `authorized_key`.
  std::vector<std::string> SignatureVerdicts(const std::string& authorized_key) {
    const std::string allowed = dir_.path() + "/allowed_signers";
    EXPECT_TRUE(
        testing::WriteFile(allowed, absl::StrCat("noreply@configbutler.ai ", authorized_key, "\n"))
            .ok());
    auto log = Git(remote_, {"-c", "gpg.format=ssh", "-c", "gpg.ssh.allowedSignersFile=" + allowed,
                             "log", "--format=%cn|%G?", "main"});
    EXPECT_TRUE(log.ok()) << log.status();
    return absl::StrSplit(log.value_or(""), '\n', absl::SkipEmpty());
  }

  testing::ScopedTempDir dir_{"signed"};
  std::string remote_;
  std::shared_ptr<const git::SshSigningKey> key_;
  reverser::v1::GitTargetConfig config_;
  core::FakeClock clock_;
  runtime::MetricsRegistry metrics_;
  std::shared_ptr<RecordingSink> sink_ = std::make_shared<RecordingSink>();
};

TEST_F(SignedBranchTest, EveryCommitIsSignedResyncPackedEventsAndReplays) {
  auto worker = MakeWorker(FixedKey());
  // A resync above the pack threshold (written through the bulk writer), then an event.
  worker->Add(Resync(60, 100));
  worker->Add(Create("event", 101));
  worker->PushIfDue();
  ASSERT_EQ(sink_->AckedRv(ConfigMaps()), 101u);
  // Someone else pushes: the next write is replayed on the new tip and signed again.
  auto clone = testing::CloneRepo(remote_, dir_.path());
  ASSERT_TRUE(clone.ok()) << clone.status();
  ASSERT_TRUE(testing::WriteFile(*clone + "/foreign.txt", "f").ok());
  ASSERT_TRUE(testing::CommitAndPush(*clone, "foreign").ok());
  worker->Add(Create("after-conflict", 102));
  worker->PushIfDue(/*force=*/true);
  ASSERT_EQ(sink_->AckedRv(ConfigMaps()), 102u);
  EXPECT_EQ(metrics_
                .GetCounter(
                    "reverser_gitworker_push_conflicts_total", "",
                    {{"provider_namespace", "team"}, {"provider_name", "repo"}, {"branch", "main"}})
                .Value(),
            1.0);

  // Ours are good signatures ("G"); the foreign and seed commits carry none ("N").
  EXPECT_THAT(SignatureVerdicts(key_->AuthorizedKey()),
              ::testing::ElementsAre("GitOps Reverser|G", "Test Author|N", "GitOps Reverser|G",
                                     "GitOps Reverser|G", "Test Author|N"));
  // Against another key the same commits do not verify.
  auto other = git::SshSigningKey::Generate();
  ASSERT_TRUE(other.ok());
  for (const std::string& verdict : SignatureVerdicts(other->AuthorizedKey())) {
    EXPECT_FALSE(absl::EndsWith(verdict, "|G")) << verdict;
  }
  auto fsck = Git(remote_, {"fsck", "--strict"});
  EXPECT_TRUE(fsck.ok()) << fsck.status();
}

TEST_F(SignedBranchTest, WritesWaitForAnUnavailableKeyAndAreNeverCommittedUnsigned) {
  std::atomic<bool> available{false};
  std::atomic<int> calls{0};
  auto worker = MakeWorker(
      [&](const std::string&) -> absl::StatusOr<std::shared_ptr<const git::SshSigningKey>> {
        ++calls;
        if (!available) return absl::NotFoundError("secret team/signing not found");
        return key_;
      });
  worker->Add(Create("a", 10));
  worker->Add(Create("b", 11));
  worker->PushIfDue();
  EXPECT_EQ(SignatureVerdicts(key_->AuthorizedKey()).size(), 1u) << "only the seed commit";
  EXPECT_EQ(sink_->AckedRv(ConfigMaps()), 0u);
  EXPECT_TRUE(sink_->rejected().empty()) << "held, not dropped";
  EXPECT_EQ(worker->Status().pending_writes(), 2u);
  EXPECT_THAT(worker->Status().last_error(),
              ::testing::HasSubstr("signing key from Secret team/signing"));
  EXPECT_GT(metrics_
                .GetCounter(
                    "reverser_gitworker_signing_key_unavailable_total", "",
                    {{"provider_namespace", "team"}, {"provider_name", "repo"}, {"branch", "main"}})
                .Value(),
            0.0);
  // Retried at the push cadence.
  ASSERT_TRUE(worker->NextPushAt().has_value());
  EXPECT_GT(*worker->NextPushAt(), clock_.Now());

  available = true;
  clock_.Advance(absl::Seconds(1));
  worker->PushIfDue();
  EXPECT_EQ(sink_->AckedRv(ConfigMaps()), 11u);
  EXPECT_TRUE(worker->Status().last_error().empty());
  EXPECT_THAT(SignatureVerdicts(key_->AuthorizedKey()),
              ::testing::ElementsAre("GitOps Reverser|G", "GitOps Reverser|G", "Test Author|N"));
  EXPECT_GT(calls.load(), 2);
}

TEST_F(SignedBranchTest, WithoutASecretSourceSigningTargetsWaitAndSaySo) {
  auto worker = MakeWorker(nullptr);
  worker->Add(Create("a", 10));
  worker->PushIfDue();
  EXPECT_EQ(sink_->AckedRv(ConfigMaps()), 0u);
  EXPECT_THAT(worker->Status().last_error(), ::testing::HasSubstr("--secrets_source=api"));
  EXPECT_EQ(worker->Status().pending_writes(), 1u);
  EXPECT_EQ(SignatureVerdicts(key_->AuthorizedKey()).size(), 1u) << "only the seed commit";
}

class SecretSourceTest : public ::testing::Test {
 protected:
  void Put(const std::string& secret, const std::string& key, const std::string& value) {
    std::filesystem::create_directories(dir_.path() + "/" + secret);
    ASSERT_TRUE(testing::WriteFile(dir_.path() + "/" + secret + "/" + key, value).ok());
  }
  testing::ScopedTempDir dir_{"secrets"};
  core::FakeClock clock_;
};

TEST_F(SecretSourceTest, SigningKeysFromFilesAreCachedForTheTtl) {
  auto first = git::SshSigningKey::Generate();
  auto second = git::SshSigningKey::Generate();
  ASSERT_TRUE(first.ok() && second.ok());
  Put("team/signing", "signing.key", first->OpenSshPrivateKey());
  Put("team/signing", "..data", "ignored");
  auto resolve =
      CachingSigningKeyResolver(DirectorySecretReader(dir_.path()), absl::Seconds(30), &clock_);
  auto key = resolve("team/signing");
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ((*key)->AuthorizedKey(), first->AuthorizedKey());

  // Rotated: the cached key is used until the TTL passes.
  Put("team/signing", "signing.key", second->OpenSshPrivateKey());
  clock_.Advance(absl::Seconds(29));
  EXPECT_EQ((*resolve("team/signing"))->AuthorizedKey(), first->AuthorizedKey());
  clock_.Advance(absl::Seconds(2));
  EXPECT_EQ((*resolve("team/signing"))->AuthorizedKey(), second->AuthorizedKey());

  // Failures are not cached, and name what is wrong.
  EXPECT_EQ(resolve("team/absent").status().code(), absl::StatusCode::kNotFound);
  Put("team/absent", "signing.key", "garbage");
  EXPECT_EQ(resolve("team/absent").status().code(), absl::StatusCode::kInvalidArgument);
  Put("team/absent", "signing.key", first->OpenSshPrivateKey());
  EXPECT_TRUE(resolve("team/absent").ok());
  Put("team/nokey", "signing.pub", first->AuthorizedKey());
  EXPECT_EQ(resolve("team/nokey").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(resolve("../escape").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(SecretSourceTest, ApiReaderGetsSecretsThroughTheApiServer) {
  auto sim = kubesim::KubeSim::Start({});
  ASSERT_TRUE(sim.ok()) << sim.status();
  kube::ClusterConfig config;
  config.server = (*sim)->url();
  auto client = kube::NewHttplibRestClient(config, "test");
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE(
      (*client)->Create({"", "v1", "namespaces"}, "", {{"metadata", {{"name", "team"}}}}).ok());
  auto key = git::SshSigningKey::Generate();
  ASSERT_TRUE(key.ok());
  ASSERT_TRUE(
      (*client)
          ->Create({"", "v1", "secrets"}, "team",
                   {{"metadata", {{"name", "signing"}}},
                    {"data", kube::EncodeSecretData({{"signing.key", key->OpenSshPrivateKey()},
                                                     {"username", "bot"},
                                                     {"password", "pw"}})}})
          .ok());
  {
    // Scoped: the readers share the client, whose connections must close before Stop.
    SecretReader reader = ApiSecretReader(*client);
    auto resolve = CachingSigningKeyResolver(reader, absl::Seconds(30), &clock_);
    auto resolved = resolve("team/signing");
    ASSERT_TRUE(resolved.ok()) << resolved.status();
    EXPECT_EQ((*resolved)->AuthorizedKey(), key->AuthorizedKey());
    EXPECT_EQ(resolve("team/missing").status().code(), absl::StatusCode::kNotFound);
    auto credentials = SecretCredentialsResolver(reader)("team/signing");
    ASSERT_TRUE(credentials.ok()) << credentials.status();
    EXPECT_EQ(credentials->kind, git::GitCredentials::Kind::kBasic);
    EXPECT_EQ(credentials->username, "bot");
  }
  client->reset();
  (*sim)->Stop();
}

}  // namespace
}  // namespace reverser::gitworker
