// Poison input through the real gitworker process: a Secret of a mebibyte with encryption on,
// files in Git beyond the read limits, a commit template that would never end, objects that
// cannot be rendered. Each time the service stays up (/healthz), everything else is mirrored,
// and the refusal shows in /metrics and in the `rejected` feedback. No timing or memory figures
// are asserted: surviving and counting is the behaviour.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "libs/sops/sops.h"
#include "libs/sops/sops_yaml.h"
#include "services/gitworker/test_support.h"
#include "tests/fixtures/git_repos.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/service_process.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::gitworker {
namespace {

using ::reverser::testing::Git;
using namespace ::reverser::gitworker::testsupport;  // NOLINT
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr absl::Duration kWait = absl::Seconds(60);

// One level of ten-fold alias expansion per line: up to `last` ('b' … 'h').
std::string AliasBomb(char last) {
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= last; ++c) {
    const std::string prev = std::string("*") + static_cast<char>(c - 1);
    bomb += std::string(1, c) + ": &" + c + " [" + prev;
    for (int i = 1; i < 10; ++i) bomb += ", " + prev;
    bomb += "]\n";
  }
  return bomb;
}

std::string Repeat(const std::string& document, int times) {
  std::string out;
  for (int i = 0; i < times; ++i) out += "---\n" + document;
  return out;
}

class PoisonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto remote = testing::CreateBareRemote(dir_.path());
    ASSERT_TRUE(remote.ok()) << remote.status();
    remote_ = *remote;
  }

  void StartService(std::vector<std::string> flags = {}) {
    flags.push_back("--work_dir=" + dir_.path() + "/work");
    flags.push_back("--push_cooldown=0s");
    auto service = testing::ServiceProcess::Start(
        "gitworker", testing::RunfilePath("services/gitworker/gitworker"), flags);
    ASSERT_TRUE(service.ok()) << service.status();
    service_ = std::move(*service);
    ASSERT_EQ(service_->WaitReady(), absl::OkStatus());
  }

  void ExpectHealthy() {
    auto health = service_->HttpGet("/healthz");
    ASSERT_TRUE(health.ok()) << health.status() << service_->Logs();
    EXPECT_EQ(health->first, 200);
    EXPECT_TRUE(service_->process().Running());
  }

  // The sum of the series of `name` whose labels contain each of `labels` (`reason="x"`).
  double Metric(const std::string& name, const std::vector<std::string>& labels = {}) {
    auto metrics = service_->HttpGet("/metrics");
    EXPECT_TRUE(metrics.ok()) << metrics.status();
    if (!metrics.ok()) return -1;
    double sum = 0;
    for (absl::string_view line : absl::StrSplit(metrics->second, '\n')) {
      if (!absl::StartsWith(line, name + "{") && !absl::StartsWith(line, name + " ")) continue;
      bool match = true;
      for (const std::string& label : labels) match &= absl::StrContains(line, label);
      double value = 0;
      if (match && absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &value)) sum += value;
    }
    return sum;
  }

  std::vector<std::string> Files() {
    auto files = testing::ListFiles(remote_, "main");
    EXPECT_TRUE(files.ok()) << files.status();
    return files.value_or(std::vector<std::string>{});
  }

  std::string BlobId(const std::string& path) {
    auto id = Git(remote_, {"rev-parse", "main:" + path});
    return id.ok() ? std::string(absl::StripAsciiWhitespace(*id)) : "";
  }

  std::vector<std::string> Subjects() {
    auto log = Git(remote_, {"log", "--format=%s", "main"});
    EXPECT_TRUE(log.ok()) << log.status();
    return absl::StrSplit(log.value_or(""), '\n', absl::SkipEmpty());
  }

  // The first refusal of the object named `name` (or of the file `name`), or an empty one.
  static reverser::v1::Refusal RefusalOf(const std::vector<reverser::v1::Refusal>& refusals,
                                         const std::string& name) {
    for (const auto& refusal : refusals) {
      if (refusal.object().name() == name || refusal.file() == name) return refusal;
    }
    return {};
  }

  testing::ScopedTempDir dir_{"gitworker-poison"};
  std::string remote_;
  std::unique_ptr<testing::ServiceProcess> service_;
};

// (a) etcd holds objects up to 1.5 MiB: a Secret with a 1 MiB data value is encrypted and
// written beside the other objects, and its file decrypts — the data key unwrapped by the `age`
// CLI — to the value sent.
TEST_F(PoisonTest, MebibyteSecretIsMirroredEncryptedBesideTheOtherObjects) {
  StartService();
  auto keygen = testing::RunCommand({"age-keygen"});
  ASSERT_TRUE(keygen.ok() && keygen->exit_code == 0);
  const std::string key_file = dir_.path() + "/age.txt";
  ASSERT_TRUE(testing::WriteFile(key_file, keygen->out).ok());
  auto recipient = testing::RunCommand({"age-keygen", "-y", key_file});
  ASSERT_TRUE(recipient.ok() && recipient->exit_code == 0);

  auto config = Config(remote_, 0);
  config.add_age_recipients(std::string(absl::StripAsciiWhitespace(recipient->out)));
  const auto secrets = Claim("", "v1", "secrets", "Secret");
  std::string bytes(768 << 10, '\0');  // 1 MiB once base64-encoded, as the API server sends it
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 131 + i / 7);
  const std::string value = absl::Base64Escape(bytes);
  ASSERT_EQ(value.size(), 1u << 20);
  auto secret = Event(config, secrets, reverser::v1::OPERATION_CREATE, "default", "big", value, 10);
  secret.mutable_object()->set_sensitive(true);

  DeliveryClient client(service_->grpc_target());
  client.SendConfig(config);
  client.SendEvent(
      Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE, "default", "a", "1", 9));
  client.SendEvent(secret);
  client.SendEvent(
      Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE, "default", "b", "2", 11));
  ASSERT_TRUE(testing::WaitFor(
      [&] { return client.AckedRv(secrets) == 10 && client.AckedRv(ConfigMaps()) == 11; }, kWait))
      << service_->Logs();
  ExpectHealthy();
  EXPECT_TRUE(client.Refusals().empty()) << client.Refusals().front().DebugString();
  const auto files = Files();
  EXPECT_THAT(files, Contains("clusters/a/default/configmaps/a.yaml"));
  EXPECT_THAT(files, Contains("clusters/a/default/configmaps/b.yaml"));
  ASSERT_THAT(files, Contains("clusters/a/default/secrets/big.sops.yaml"));

  auto text = testing::ShowFile(remote_, "main", "clusters/a/default/secrets/big.sops.yaml");
  ASSERT_TRUE(text.ok());
  EXPECT_FALSE(absl::StrContains(*text, value.substr(0, 64))) << "never in plaintext";
  auto tree = sops::ParseSopsYaml(*text);
  ASSERT_TRUE(tree.ok()) << tree.status();
  const std::string wrapped = (*tree)["sops"]["age"][0]["enc"].get<std::string>();
  auto data_key = testing::RunCommand({"age", "-d", "-i", key_file}, wrapped);
  ASSERT_TRUE(data_key.ok() && data_key->exit_code == 0) << data_key->err;
  ASSERT_EQ(data_key->out.size(), 32u);
  auto decrypted = sops::DecryptTreeWithDataKey(*tree, data_key->out);
  ASSERT_TRUE(decrypted.ok()) << decrypted.status();
  EXPECT_TRUE(decrypted->plaintext["data"]["key"] == value);
  EXPECT_EQ(Metric("reverser_gitworker_refusals_total"), 0);
}

// (b) Files a person pushes under the target path are read when the branch moves: a stream of
// alias documents each harmless alone, an alias bomb, and a file over --max_git_file_bytes are
// not read and left exactly as they are (never swept, never overwritten); every other file and
// object is served.
TEST_F(PoisonTest, FilesOverTheReadLimitsAreLeftAloneAndEverythingElseIsWritten) {
  StartService({"--max_git_file_bytes=1048576"});
  auto config = Config(remote_, 0);
  DeliveryClient client(service_->grpc_target());
  client.SendConfig(config);
  client.SendResync(
      Snapshot(config, ConfigMaps(), {Object(ConfigMaps(), "default", "a", "1")}, 100));
  ASSERT_TRUE(testing::WaitFor([&] { return client.AckedRv(ConfigMaps()) == 100; }, kWait))
      << service_->Logs();

  auto human = testing::CloneRepo(remote_, dir_.path(), "human");
  ASSERT_TRUE(human.ok()) << human.status();
  // 20 documents of 12,330 alias-copied nodes: over the per-file alias cap only together.
  ASSERT_TRUE(testing::WriteFile(*human + "/clusters/a/many.yaml", Repeat(AliasBomb('d'), 20)).ok());
  // 30 documents of 111,110 alias-copied nodes each, in 6 KB.
  ASSERT_TRUE(testing::WriteFile(*human + "/clusters/a/bomb.yaml", Repeat(AliasBomb('e'), 30)).ok());
  std::string huge =
      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: huge\n  namespace: default\ndata:\n";
  for (int i = 0; huge.size() < (2u << 20); ++i) huge += absl::StrCat("  k", i, ": value\n");
  ASSERT_TRUE(testing::WriteFile(*human + "/clusters/a/default/configmaps/huge.yaml", huge).ok());
  ASSERT_TRUE(testing::CommitAndPush(*human, "hand-written files").ok());
  ASSERT_TRUE(testing::WriteFile(*human + "/notes.txt", "moved again\n").ok());
  ASSERT_TRUE(testing::CommitAndPush(*human, "notes").ok());
  const std::vector<std::string> refused = {"clusters/a/many.yaml", "clusters/a/bomb.yaml",
                                            "clusters/a/default/configmaps/huge.yaml"};
  std::vector<std::string> blobs;
  for (const std::string& path : refused) blobs.push_back(BlobId(path));

  // Our next write meets the moved branch: fetch, and the index is rebuilt over those files.
  client.SendEvent(
      Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE, "default", "b", "2", 101));
  // The object whose file is the refused one is not written over it.
  client.SendEvent(
      Event(config, ConfigMaps(), reverser::v1::OPERATION_UPDATE, "default", "huge", "x", 102));
  // A resync of the type sweeps nothing it could not read, and still writes the rest.
  client.SendResync(Snapshot(config, ConfigMaps(),
                             {Object(ConfigMaps(), "default", "a", "1"),
                              Object(ConfigMaps(), "default", "b", "2"),
                              Object(ConfigMaps(), "default", "c", "3")},
                             103));
  ASSERT_TRUE(testing::WaitFor([&] { return client.AckedRv(ConfigMaps()) == 103; }, kWait))
      << service_->Logs();
  ExpectHealthy();

  const auto files = Files();
  for (const char* name : {"a", "b", "c"}) {
    EXPECT_THAT(files, Contains(absl::StrCat("clusters/a/default/configmaps/", name, ".yaml")));
  }
  EXPECT_THAT(files, Contains("notes.txt"));
  for (size_t i = 0; i < refused.size(); ++i) {
    EXPECT_EQ(BlobId(refused[i]), blobs[i]) << refused[i] << " must be left alone";
  }
  // Counted once per file, though the branch moved several times since.
  EXPECT_EQ(Metric("reverser_gitworker_refusals_total", {"reason=\"UnsupportedContent\""}), 3);
  EXPECT_GE(Metric("reverser_gitworker_refusals_total", {"reason=\"CommitRefused\""}), 1);
  // The target's refused files, complete, with why and which content.
  auto reported = client.RefusedFiles();
  ASSERT_TRUE(reported.count("tgt"));
  ASSERT_EQ(reported["tgt"].refusals_size(), 3);
  for (size_t i = 0; i < refused.size(); ++i) {
    const auto refusal = RefusalOf(
        {reported["tgt"].refusals().begin(), reported["tgt"].refusals().end()}, refused[i]);
    EXPECT_EQ(refusal.reason(), reverser::v1::REFUSAL_REASON_UNSUPPORTED_CONTENT) << refused[i];
    EXPECT_THAT(refusal.message(), HasSubstr("blob " + blobs[i])) << refused[i];
  }
  EXPECT_THAT(
      RefusalOf({reported["tgt"].refusals().begin(), reported["tgt"].refusals().end()}, refused[0])
          .message(),
      HasSubstr("aliases expand to more than 100000 nodes"));
  EXPECT_THAT(
      RefusalOf({reported["tgt"].refusals().begin(), reported["tgt"].refusals().end()}, refused[2])
          .message(),
      HasSubstr("more than the limit of 1048576"));
  const auto huge_refusal = RefusalOf(client.Refusals(), "huge");
  EXPECT_EQ(huge_refusal.reason(), reverser::v1::REFUSAL_REASON_COMMIT_REFUSED);
  EXPECT_THAT(huge_refusal.message(), HasSubstr("clusters/a/default/configmaps/huge.yaml"));
  const std::string logs = service_->Logs();
  EXPECT_THAT(logs, HasSubstr("\"file\":\"clusters/a/bomb.yaml\""));
  EXPECT_THAT(logs, HasSubstr("blob " + blobs[1]));
}

// (c) A nested range over a window of 100 resources would run 10^6 iterations (10^12 for a
// window of 10,000): the commit still happens, with the default template's message, and the
// refusal is counted once per target and template.
TEST_F(PoisonTest, CommitTemplateThatWouldNeverEndFallsBackToTheDefaultMessage) {
  StartService();
  auto config = Config(remote_, 3'600'000);  // windows close when the author changes
  config.set_group_template(
      "{{range .Resources}}{{range $.Resources}}{{range $.Resources}}{{.Name}}{{end}}{{end}}"
      "{{end}}");
  DeliveryClient client(service_->grpc_target());
  client.SendConfig(config);
  uint64_t rv = 10;
  auto burst = [&](const std::string& author, int count) {
    for (int i = 0; i < count; ++i, ++rv) {
      client.SendEvent(Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE, "default",
                             absl::StrCat(author, i), "1", rv, author));
    }
  };
  burst("alice", 100);
  const uint64_t alice_last = rv - 1;
  burst("bob", 50);  // its first event closes alice's window
  const uint64_t bob_last = rv - 1;
  ASSERT_TRUE(
      testing::WaitFor([&] { return client.AckedRv(ConfigMaps()) == alice_last; }, kWait))
      << service_->Logs();
  EXPECT_EQ(Subjects().front(), "alice on tgt: 100 resource(s)");
  ExpectHealthy();
  EXPECT_EQ(Metric("reverser_gitworker_template_fallbacks_total", {"template=\"group\""}), 1);

  burst("carol", 1);  // closes bob's window: the same template fails the same way
  ASSERT_TRUE(testing::WaitFor([&] { return client.AckedRv(ConfigMaps()) == bob_last; }, kWait))
      << service_->Logs();
  EXPECT_EQ(Subjects().front(), "bob on tgt: 50 resource(s)");
  EXPECT_EQ(Metric("reverser_gitworker_template_fallbacks_total", {"template=\"group\""}), 1);
  EXPECT_EQ(Files().size(), 3u + 150);  // seed README, bootstrap files, alice's and bob's
  ExpectHealthy();
  const auto refusals = client.Refusals();
  ASSERT_EQ(refusals.size(), 1u);
  EXPECT_EQ(refusals[0].reason(), reverser::v1::REFUSAL_REASON_LIMIT_EXCEEDED);
  EXPECT_FALSE(refusals[0].has_object());
  EXPECT_THAT(refusals[0].message(),
              HasSubstr("group commit template failed, the default template's message is used"));
  EXPECT_THAT(service_->Logs(), HasSubstr("range iterations exceed the limit of 100000"));
}

// (d) Objects that can never be rendered — invalid JSON, no operation, an unsafe name, nesting
// deeper or more nodes than a file may hold, larger than a file may be, a Secret whose
// encryption fails — are refused
// and acked in order; the objects around them are mirrored, and so is an object whose author
// name a Git signature cannot hold as it is.
TEST_F(PoisonTest, ObjectsThatCannotBeRenderedAreRefusedAckedAndTheRestIsMirrored) {
  StartService({"--max_git_file_bytes=262144", "--max_yaml_nodes=50000"});
  auto config = Config(remote_, 0);
  auto encrypted = Config(remote_, 0, "clusters/enc", "tgt-enc");
  encrypted.add_age_recipients("age1notarecipient");
  const auto secrets = Claim("", "v1", "secrets", "Secret");
  auto event = [&](const std::string& name, uint64_t rv) {
    return Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE, "default", name, "1", rv);
  };
  DeliveryClient client(service_->grpc_target());
  client.SendConfig(config);
  client.SendConfig(encrypted);
  client.SendEvent(event("a", 10));
  auto invalid = event("invalid", 11);
  invalid.mutable_object()->set_sanitized_json("{\"apiVersion\": ");
  client.SendEvent(invalid);
  auto deep = event("deep", 12);
  deep.mutable_object()->set_sanitized_json(
      absl::StrCat(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"deep",)",
                   R"("namespace":"default"},"data":{"k":)", std::string(2000, '['),
                   std::string(2000, ']'), "}}"));
  client.SendEvent(deep);
  client.SendEvent(Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE, "default", "large",
                         std::string(300 << 10, 'v'), 13));
  std::string items = "1";
  for (int i = 1; i < 60000; ++i) items += ",1";
  auto many = event("many", 13);
  many.mutable_object()->set_sanitized_json(
      absl::StrCat(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"many",)",
                   R"("namespace":"default"},"spec":{"items":[)", items, "]}}"));
  client.SendEvent(many);
  auto no_operation = event("no-operation", 14);
  no_operation.set_operation(reverser::v1::OPERATION_UNSPECIFIED);
  client.SendEvent(no_operation);
  client.SendEvent(event("..", 15));
  client.SendEvent(event("b", 16));
  // An author a Git signature cannot hold as it is: committed under a cleaned name.
  client.SendEvent(Event(config, ConfigMaps(), reverser::v1::OPERATION_CREATE, "default", "signed",
                         "1", 17, "eve <eve@example.com>\n"));
  auto secret = Event(encrypted, secrets, reverser::v1::OPERATION_CREATE, "default", "s",
                      "aHVudGVyMg==", 20);
  secret.mutable_object()->set_sensitive(true);
  client.SendEvent(secret);
  client.SendEvent(
      Event(encrypted, ConfigMaps(), reverser::v1::OPERATION_CREATE, "default", "c", "1", 21));
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        return client.AckedRv(ConfigMaps(), "tgt") == 17 &&
               client.AckedRv(ConfigMaps(), "tgt-enc") == 21 &&
               client.AckedRv(secrets, "tgt-enc") == 20;
      },
      kWait))
      << service_->Logs();
  ExpectHealthy();

  const auto files = Files();
  EXPECT_THAT(files, Contains("clusters/a/default/configmaps/a.yaml"));
  EXPECT_THAT(files, Contains("clusters/a/default/configmaps/b.yaml"));
  EXPECT_THAT(files, Contains("clusters/enc/default/configmaps/c.yaml"));
  EXPECT_THAT(files, Contains("clusters/a/default/configmaps/signed.yaml"));
  auto author = Git(remote_, {"log", "-1", "--format=%an", "main", "--",
                              "clusters/a/default/configmaps/signed.yaml"});
  ASSERT_TRUE(author.ok());
  EXPECT_EQ(*author, "eve eve@example.com\n");
  for (const auto& file : files) {
    EXPECT_THAT(file, Not(HasSubstr("invalid")));
    EXPECT_THAT(file, Not(HasSubstr("deep")));
    EXPECT_THAT(file, Not(HasSubstr("large")));
    EXPECT_THAT(file, Not(HasSubstr("many")));
    EXPECT_THAT(file, Not(HasSubstr("no-operation")));
    EXPECT_THAT(file, Not(HasSubstr("secrets")));
  }
  auto reason = [&](const char* name) {
    return Metric("reverser_gitworker_refusals_total", {absl::StrCat("reason=\"", name, "\"")});
  };
  EXPECT_EQ(reason("MalformedMessage"), 2);  // the JSON and the missing operation
  EXPECT_EQ(reason("LimitExceeded"), 3);     // too deep, too many nodes, too large
  EXPECT_EQ(reason("UnsafeIdentity"), 1);
  EXPECT_EQ(reason("EncryptionUnavailable"), 1);
  const auto refusals = client.Refusals();
  EXPECT_EQ(refusals.size(), 7u);
  const auto expect = [&](const std::string& name, reverser::v1::RefusalReason code,
                          const std::string& message, uint64_t rv) {
    const auto refusal = RefusalOf(refusals, name);
    EXPECT_EQ(refusal.reason(), code) << name;
    EXPECT_THAT(refusal.message(), HasSubstr(message)) << name;
    EXPECT_EQ(refusal.position().rv(), rv) << name;
  };
  expect("invalid", reverser::v1::REFUSAL_REASON_MALFORMED_MESSAGE, "not a JSON object", 11);
  expect("deep", reverser::v1::REFUSAL_REASON_LIMIT_EXCEEDED, "object nested deeper than 512", 12);
  expect("many", reverser::v1::REFUSAL_REASON_LIMIT_EXCEEDED, "object more than 50000 nodes", 13);
  expect("large", reverser::v1::REFUSAL_REASON_LIMIT_EXCEEDED, "more than the file limit", 13);
  expect("no-operation", reverser::v1::REFUSAL_REASON_MALFORMED_MESSAGE, "without operation", 14);
  expect("..", reverser::v1::REFUSAL_REASON_UNSAFE_IDENTITY, "", 15);
  expect("s", reverser::v1::REFUSAL_REASON_ENCRYPTION_UNAVAILABLE, "sensitive object not written",
         20);
  EXPECT_EQ(RefusalOf(refusals, "deep").kind(), "ConfigMap");
  EXPECT_EQ(RefusalOf(refusals, "s").target().name(), "tgt-enc");
  EXPECT_THAT(service_->Logs(), HasSubstr("\"reason\":\"EncryptionUnavailable\""));
}

}  // namespace
}  // namespace reverser::gitworker
