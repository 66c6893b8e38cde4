// SSH commit signing against the independent tools: keys from ssh-keygen and openssl, signatures
// checked by `ssh-keygen -Y verify`, commits by `git verify-commit` (gpg.format=ssh).

#include "libs/git/ssh_signing.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "libs/git/repository.h"
#include "libs/git/test_support.h"
#include "tests/fixtures/git_repos.h"
#include "tests/fixtures/process.h"
#include "tests/fixtures/temp_dir.h"

namespace reverser::git {
namespace {

using testutil::Trim;

class SshSigningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access("/usr/bin/ssh-keygen", X_OK) != 0) GTEST_SKIP() << "openssh-client is missing";
  }

  std::string Path(const std::string& name) const { return absl::StrCat(dir_.path(), "/", name); }

  testing::CommandResult Run(const std::vector<std::string>& argv, const std::string& in = "") {
    auto result = testing::RunCommand(argv, in);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : testing::CommandResult{};
  }

  // An ed25519 key written by ssh-keygen; returns the private key file's path.
  std::string KeygenKey(const std::string& name, const std::string& passphrase = "",
                        const std::string& type = "ed25519") {
    const std::string path = Path(name);
    std::vector<std::string> argv = {"ssh-keygen",       "-q", "-t", type, "-N", passphrase, "-C",
                                     "test@example.com", "-f", path};
    if (type == "rsa") argv.insert(argv.end(), {"-b", "1024"});
    auto gen = Run(argv);
    EXPECT_EQ(gen.exit_code, 0) << gen.err;
    return path;
  }

  std::string Read(const std::string& path) {
    auto text = testing::ReadFile(path);
    EXPECT_TRUE(text.ok()) << text.status();
    return text.ok() ? *text : "";
  }

  void Write(const std::string& path, const std::string& content, mode_t mode = 0600) {
    ASSERT_TRUE(testing::WriteFile(path, content).ok());
    ASSERT_EQ(chmod(path.c_str(), mode), 0);
  }

  // `ssh-keygen -Y verify` of `signature` over `message` against `authorized_key`.
  testing::CommandResult Verify(const std::string& authorized_key, const std::string& signature,
                                const std::string& message) {
    Write(Path("allowed_signers"), absl::StrCat("signer@example.com ", authorized_key, "\n"));
    Write(Path("message.sig"), signature);
    return Run({"ssh-keygen", "-Y", "verify", "-f", Path("allowed_signers"), "-I",
                "signer@example.com", "-n", "git", "-s", Path("message.sig")},
               message);
  }

  testing::ScopedTempDir dir_{"sshsig"};
};

// The first two fields of an authorized_keys / .pub line.
std::string KeyFields(const std::string& line) {
  std::vector<std::string> fields = absl::StrSplit(Trim(line), ' ');
  return fields.size() >= 2 ? absl::StrCat(fields[0], " ", fields[1]) : line;
}

TEST_F(SshSigningTest, ReadsSshKeygenKeysAndSignsWhatSshKeygenVerifies) {
  const std::string path = KeygenKey("id");
  auto key = SshSigningKey::Parse(Read(path));
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(key->AuthorizedKey(), KeyFields(Read(path + ".pub")));

  const std::string message = "tree 0123\nauthor A <a@example.com> 1 +0000\n\nhello\n";
  auto signature = key->Sign(message);
  ASSERT_TRUE(signature.ok()) << signature.status();
  EXPECT_TRUE(absl::StartsWith(*signature, "-----BEGIN SSH SIGNATURE-----\n"));
  EXPECT_TRUE(absl::EndsWith(*signature, "\n-----END SSH SIGNATURE-----"));

  auto good = Verify(key->AuthorizedKey(), absl::StrCat(*signature, "\n"), message);
  EXPECT_EQ(good.exit_code, 0) << good.out << good.err;
  EXPECT_TRUE(absl::StrContains(good.out, "Good \"git\" signature")) << good.out;
  // The check is real: another message, or another namespace, does not verify.
  auto tampered = Verify(key->AuthorizedKey(), absl::StrCat(*signature, "\n"), message + "x");
  EXPECT_NE(tampered.exit_code, 0);
  auto other_namespace = key->Sign(message, "file");
  ASSERT_TRUE(other_namespace.ok());
  EXPECT_NE(Verify(key->AuthorizedKey(), absl::StrCat(*other_namespace, "\n"), message).exit_code,
            0);
}

TEST_F(SshSigningTest, SignatureIsByteIdenticalToSshKeygenSign) {
  // Ed25519 is deterministic, so both implementations of SSHSIG must produce the same bytes.
  const std::string path = KeygenKey("id");
  const std::string message = "some commit object\n";
  Write(Path("data"), message);
  auto sign = Run({"ssh-keygen", "-Y", "sign", "-f", path, "-n", "git", Path("data")});
  ASSERT_EQ(sign.exit_code, 0) << sign.err;
  auto key = SshSigningKey::Parse(Read(path));
  ASSERT_TRUE(key.ok()) << key.status();
  auto ours = key->Sign(message);
  ASSERT_TRUE(ours.ok());
  EXPECT_EQ(absl::StrCat(*ours, "\n"), Read(Path("data.sig")));
}

TEST_F(SshSigningTest, GeneratedKeysAreAcceptedBySshKeygen) {
  auto key = SshSigningKey::Generate();
  ASSERT_TRUE(key.ok()) << key.status();
  auto other = SshSigningKey::Generate();
  ASSERT_TRUE(other.ok());
  EXPECT_NE(key->AuthorizedKey(), other->AuthorizedKey());
  EXPECT_TRUE(absl::StartsWith(key->AuthorizedKey(), "ssh-ed25519 AAAA"));

  const std::string text = key->OpenSshPrivateKey();
  EXPECT_TRUE(absl::StartsWith(text, "-----BEGIN OPENSSH PRIVATE KEY-----\n"));
  EXPECT_TRUE(absl::EndsWith(text, "-----END OPENSSH PRIVATE KEY-----\n"));
  Write(Path("generated"), text);
  auto public_key = Run({"ssh-keygen", "-y", "-f", Path("generated")});
  ASSERT_EQ(public_key.exit_code, 0) << public_key.err;
  EXPECT_EQ(KeyFields(public_key.out), key->AuthorizedKey());

  // ssh-keygen signs with the generated key, and that verifies against our public key.
  Write(Path("data"), "payload\n");
  auto sign = Run({"ssh-keygen", "-Y", "sign", "-f", Path("generated"), "-n", "git", Path("data")});
  ASSERT_EQ(sign.exit_code, 0) << sign.err;
  auto verified = Verify(key->AuthorizedKey(), Read(Path("data.sig")), "payload\n");
  EXPECT_EQ(verified.exit_code, 0) << verified.err;

  // And our parser reads back what we wrote.
  auto again = SshSigningKey::Parse(text);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->AuthorizedKey(), key->AuthorizedKey());
}

TEST_F(SshSigningTest, ReadsPkcs8PemKeysPlainAndEncrypted) {
  if (access("/usr/bin/openssl", X_OK) != 0) GTEST_SKIP() << "openssl is missing";
  auto gen = Run({"openssl", "genpkey", "-algorithm", "ed25519", "-out", Path("k.pem")});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  auto enc = Run({"openssl", "pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", Path("k.pem"),
                  "-passout", "pass:s3cret", "-out", Path("k.enc.pem")});
  ASSERT_EQ(enc.exit_code, 0) << enc.err;
  // The public key as openssl sees it: the last 32 bytes of the SubjectPublicKeyInfo.
  auto der = Run({"openssl", "pkey", "-in", Path("k.pem"), "-pubout", "-outform", "DER"});
  ASSERT_EQ(der.exit_code, 0);
  ASSERT_GE(der.out.size(), 32u);
  std::string blob;
  for (const std::string& part :
       {std::string("ssh-ed25519"), der.out.substr(der.out.size() - 32)}) {
    const uint32_t n = part.size();
    blob += std::string{static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                        static_cast<char>(n >> 8), static_cast<char>(n)};
    blob += part;
  }
  const std::string expected = absl::StrCat("ssh-ed25519 ", absl::Base64Escape(blob));

  auto plain = SshSigningKey::Parse(Read(Path("k.pem")));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->AuthorizedKey(), expected);
  auto encrypted = SshSigningKey::FromSecretData(
      {{"signing.key", Read(Path("k.enc.pem"))}, {"passphrase", "s3cret"}});
  ASSERT_TRUE(encrypted.ok()) << encrypted.status();
  EXPECT_EQ(encrypted->AuthorizedKey(), expected);

  auto no_passphrase = SshSigningKey::Parse(Read(Path("k.enc.pem")));
  EXPECT_EQ(no_passphrase.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(no_passphrase.status().message(), "passphrase"));
  auto wrong = SshSigningKey::Parse(Read(Path("k.enc.pem")), "nope");
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);

  auto signature = plain->Sign("x");
  ASSERT_TRUE(signature.ok());
  EXPECT_EQ(Verify(expected, absl::StrCat(*signature, "\n"), "x").exit_code, 0);

  // What we write for a passphrase: encrypted PKCS#8 that openssl and our parser read.
  auto locked = plain->EncryptedPkcs8PrivateKey("pw2");
  ASSERT_TRUE(locked.ok()) << locked.status();
  EXPECT_TRUE(absl::StartsWith(*locked, "-----BEGIN ENCRYPTED PRIVATE KEY-----\n"));
  Write(Path("locked.pem"), *locked);
  auto pub_der = Run({"openssl", "pkey", "-in", Path("locked.pem"), "-passin", "pass:pw2",
                      "-pubout", "-outform", "DER"});
  ASSERT_EQ(pub_der.exit_code, 0) << pub_der.err;
  EXPECT_EQ(pub_der.out, der.out);
  auto reread = SshSigningKey::Parse(*locked, "pw2");
  ASSERT_TRUE(reread.ok()) << reread.status();
  EXPECT_EQ(reread->AuthorizedKey(), expected);

  auto ec = Run({"openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
                 "-out", Path("ec.pem")});
  ASSERT_EQ(ec.exit_code, 0);
  auto refused = SshSigningKey::Parse(Read(Path("ec.pem")));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "ed25519"));
}

TEST_F(SshSigningTest, RefusesMalformedEncryptedAndForeignKeys) {
  auto garbage = SshSigningKey::Parse("not a key");
  EXPECT_EQ(garbage.status().code(), absl::StatusCode::kInvalidArgument);
  auto missing = SshSigningKey::FromSecretData({{"signing.pub", "ssh-ed25519 AAAA"}});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);

  const std::string text = Read(KeygenKey("id"));
  // Cut the body short: every truncation is a clear InvalidArgument, never a crash.
  const size_t body = text.find('\n') + 1;
  for (size_t keep : {size_t{0}, size_t{20}, size_t{100}, size_t{200}}) {
    std::string cut =
        absl::StrCat(text.substr(0, body + keep), "\n-----END OPENSSH PRIVATE KEY-----\n");
    auto parsed = SshSigningKey::Parse(cut);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << keep;
  }
  std::string flipped = text;
  flipped[body + 10] = flipped[body + 10] == 'A' ? 'B' : 'A';
  EXPECT_FALSE(SshSigningKey::Parse(flipped).ok());

  const std::string protected_key = Read(KeygenKey("locked", "pw"));
  auto locked = SshSigningKey::Parse(protected_key);
  EXPECT_EQ(locked.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(locked.status().message(), "passphrase"));
  auto unsupported = SshSigningKey::Parse(protected_key, "pw");
  EXPECT_EQ(unsupported.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(unsupported.status().message(), "not supported"));

  auto rsa = SshSigningKey::Parse(Read(KeygenKey("rsa", "", "rsa")));
  EXPECT_EQ(rsa.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(rsa.status().message(), "ssh-rsa"));
}

class SignedCommitTest : public SshSigningTest {
 protected:
  // `git verify-commit` with SSH signatures trusted for `authorized_key`.
  testing::CommandResult VerifyCommit(const std::string& repo, const std::string& sha,
                                      const std::string& authorized_key) {
    Write(Path("git_allowed_signers"),
          absl::StrCat("noreply@configbutler.ai ", authorized_key, "\n"));
    return Run({"git", "-C", repo, "-c", "gpg.format=ssh", "-c",
                "gpg.ssh.allowedSignersFile=" + Path("git_allowed_signers"), "verify-commit", "-v",
                sha});
  }
};

TEST_F(SignedCommitTest, CommitsVerifyWithGitVerifyCommitLooseAndPacked) {
  auto remote = testing::CreateBareRemote(dir_.path());
  ASSERT_TRUE(remote.ok()) << remote.status();
  RepositoryOptions options{Path("clone"), *remote, {}};
  options.pack_threshold = 3;
  auto repo = Repository::Open(options);
  ASSERT_TRUE(repo.ok()) << repo.status();
  ASSERT_TRUE((*repo)->Fetch().ok());
  auto base = (*repo)->ResolveBranchBase("main");
  ASSERT_TRUE(base.ok());
  ASSERT_TRUE((*repo)->ResetBranch("main", base->commit).ok());

  auto key = SshSigningKey::Generate();
  ASSERT_TRUE(key.ok());
  CommitSpec spec = testutil::TestCommitSpec("signed\n\nwith a body\n");
  spec.signer = &*key;
  auto loose = (*repo)->CommitOnBranch("main", {{"a.yaml", "a: 1\n"}}, spec);
  ASSERT_TRUE(loose.ok()) << loose.status();
  ASSERT_TRUE(loose->has_value());
  // A change set at the pack threshold goes through the bulk writer.
  auto packed = (*repo)->CommitOnBranch(
      "main", {{"b.yaml", "b: 1\n"}, {"c.yaml", "c: 1\n"}, {"d.yaml", "d: 1\n"}}, spec);
  ASSERT_TRUE(packed.ok()) << packed.status();
  ASSERT_TRUE(packed->has_value());
  CommitSpec unsigned_spec = testutil::TestCommitSpec("unsigned");
  auto plain = (*repo)->CommitOnBranch("main", {{"e.yaml", "e: 1\n"}}, unsigned_spec);
  ASSERT_TRUE(plain.ok() && plain->has_value());

  const std::string clone = Path("clone");
  for (const std::string& sha : {**loose, **packed}) {
    auto verified = VerifyCommit(clone, sha, key->AuthorizedKey());
    EXPECT_EQ(verified.exit_code, 0) << verified.err;
    EXPECT_TRUE(absl::StrContains(verified.err, "Good \"git\" signature")) << verified.err;
    auto other = SshSigningKey::Generate();
    ASSERT_TRUE(other.ok());
    EXPECT_NE(VerifyCommit(clone, sha, other->AuthorizedKey()).exit_code, 0);
  }
  EXPECT_NE(VerifyCommit(clone, **plain, key->AuthorizedKey()).exit_code, 0);

  // The object is what git itself writes: the signature header after the committer, the
  // identities and message unchanged, and fsck accepts it.
  auto object = testing::Git(clone, {"cat-file", "commit", **loose});
  ASSERT_TRUE(object.ok());
  EXPECT_TRUE(absl::StrContains(*object,
                                "\ncommitter GitOps Reverser <noreply@configbutler.ai> "
                                "1700000100 +0000\ngpgsig -----BEGIN SSH SIGNATURE-----\n"))
      << *object;
  EXPECT_TRUE(absl::StrContains(*object, " -----END SSH SIGNATURE-----\n\nsigned\n\nwith a body\n"))
      << *object;
  auto log = testing::Git(clone, {"log", "-1", "--format=%an <%ae>|%s", **loose});
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(Trim(*log), "Jane Doe <jane@example.com>|signed");
  EXPECT_TRUE(testing::Git(clone, {"fsck", "--strict"}).ok());
}

}  // namespace
}  // namespace reverser::git
