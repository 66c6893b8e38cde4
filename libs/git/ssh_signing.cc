#include "libs/git/ssh_signing.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/rand.h>

#include <cstdint>
#include <cstring>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "libs/core/status.h"

namespace reverser::git {
namespace {

constexpr char kKeyType[] = "ssh-ed25519";
constexpr size_t kSeedSize = 32;
constexpr size_t kPublicSize = 32;
constexpr size_t kSignatureSize = 64;
constexpr char kOpenSshBegin[] = "-----BEGIN OPENSSH PRIVATE KEY-----";
constexpr char kOpenSshEnd[] = "-----END OPENSSH PRIVATE KEY-----";
constexpr char kOpenSshMagic[] = "openssh-key-v1";  // followed by a NUL byte
constexpr char kSignatureBegin[] = "-----BEGIN SSH SIGNATURE-----";
constexpr char kSignatureEnd[] = "-----END SSH SIGNATURE-----";
constexpr char kSshSigMagic[] = "SSHSIG";
constexpr uint32_t kSshSigVersion = 1;
constexpr char kHashAlgorithm[] = "sha512";
// ssh-keygen wraps the base64 of private keys and signatures at 70 columns.
constexpr size_t kArmorColumns = 70;

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* p) const { EVP_MD_CTX_free(p); }
};
struct BioFree {
  void operator()(BIO* p) const { BIO_free(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;

const unsigned char* U(absl::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

// SSH wire format (RFC 4251): uint32 big-endian, string = uint32 length + bytes.
void PutU32(std::string* out, uint32_t v) {
  const char bytes[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                         static_cast<char>(v >> 8), static_cast<char>(v)};
  out->append(bytes, 4);
}
void PutString(std::string* out, absl::string_view s) {
  PutU32(out, static_cast<uint32_t>(s.size()));
  out->append(s.data(), s.size());
}

class WireReader {
 public:
  explicit WireReader(absl::string_view data) : data_(data) {}
  bool U32(uint32_t* v) {
    if (data_.size() < 4) return false;
    const auto* b = U(data_);
    *v = (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
    data_.remove_prefix(4);
    return true;
  }
  bool String(absl::string_view* s) {
    uint32_t size = 0;
    if (!U32(&size) || size > data_.size()) return false;
    *s = data_.substr(0, size);
    data_.remove_prefix(size);
    return true;
  }
  absl::string_view rest() const { return data_; }

 private:
  absl::string_view data_;
};

std::string Armor(absl::string_view begin, absl::string_view end, absl::string_view blob) {
  const std::string encoded = absl::Base64Escape(blob);
  std::string out = absl::StrCat(begin, "\n");
  for (size_t at = 0; at < encoded.size(); at += kArmorColumns) {
    absl::StrAppend(&out, absl::string_view(encoded).substr(at, kArmorColumns), "\n");
  }
  absl::StrAppend(&out, end);
  return out;
}

absl::Status Malformed(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("OpenSSH private key: ", what));
}

absl::StatusOr<std::string> Unarmor(absl::string_view text) {
  size_t begin = text.find(kOpenSshBegin);
  size_t end = text.find(kOpenSshEnd);
  if (begin == absl::string_view::npos || end == absl::string_view::npos || end < begin) {
    return Malformed("no BEGIN/END OPENSSH PRIVATE KEY armor");
  }
  absl::string_view body =
      text.substr(begin + strlen(kOpenSshBegin), end - begin - strlen(kOpenSshBegin));
  std::string compact;
  compact.reserve(body.size());
  for (char c : body) {
    if (!absl::ascii_isspace(static_cast<unsigned char>(c))) compact.push_back(c);
  }
  std::string blob;
  if (!absl::Base64Unescape(compact, &blob)) return Malformed("the armored body is not base64");
  return blob;
}

// The unencrypted OpenSSH key format (PROTOCOL.key in OpenSSH's sources).
absl::StatusOr<std::string> SeedFromOpenSsh(absl::string_view text, absl::string_view passphrase) {
  ASSIGN_OR_RETURN(std::string blob, Unarmor(text));
  absl::string_view data = blob;
  const absl::string_view magic(kOpenSshMagic, sizeof(kOpenSshMagic));  // with its NUL
  if (!absl::StartsWith(data, magic)) return Malformed("missing the openssh-key-v1 magic");
  WireReader reader(data.substr(magic.size()));
  absl::string_view cipher, kdf, kdf_options, public_blob, private_section;
  uint32_t key_count = 0;
  if (!reader.String(&cipher) || !reader.String(&kdf) || !reader.String(&kdf_options) ||
      !reader.U32(&key_count)) {
    return Malformed("truncated header");
  }
  if (cipher != "none" || kdf != "none") {
    if (passphrase.empty()) {
      return absl::InvalidArgumentError(
          "the OpenSSH private key is passphrase-protected and no passphrase is set");
    }
    return absl::UnimplementedError(absl::StrCat(
        "passphrase-protected OpenSSH private keys (cipher ", cipher, ", kdf ", kdf,
        ") are not supported; store the key unencrypted or as an encrypted PKCS#8 PEM key"));
  }
  if (key_count != 1) return Malformed(absl::StrCat("holds ", key_count, " keys, not one"));
  if (!reader.String(&public_blob) || !reader.String(&private_section)) {
    return Malformed("truncated key sections");
  }
  if (private_section.size() % 8 != 0) return Malformed("private section is not padded");
  WireReader priv(private_section);
  uint32_t check1 = 0, check2 = 0;
  absl::string_view type, public_key, private_key, comment;
  if (!priv.U32(&check1) || !priv.U32(&check2)) return Malformed("truncated private section");
  if (check1 != check2) return Malformed("check bytes differ (corrupt or wrong passphrase)");
  if (!priv.String(&type)) return Malformed("truncated private section");
  if (type != kKeyType) {
    return absl::UnimplementedError(
        absl::StrCat("signing keys must be ed25519; this key is ", type));
  }
  if (!priv.String(&public_key) || !priv.String(&private_key) || !priv.String(&comment)) {
    return Malformed("truncated ed25519 key");
  }
  if (public_key.size() != kPublicSize || private_key.size() != kSeedSize + kPublicSize ||
      private_key.substr(kSeedSize) != public_key) {
    return Malformed("inconsistent ed25519 key sizes or halves");
  }
  // Padding is 1, 2, 3, ... up to the block size.
  absl::string_view padding = priv.rest();
  for (size_t i = 0; i < padding.size(); ++i) {
    if (static_cast<unsigned char>(padding[i]) != i + 1) return Malformed("bad padding");
  }
  return std::string(private_key.substr(0, kSeedSize));
}

int PassphraseCallback(char* buf, int size, int /*rwflag*/, void* user) {
  const auto* passphrase = static_cast<const absl::string_view*>(user);
  // 0 = no passphrase: OpenSSL fails instead of prompting on a terminal.
  if (passphrase->empty() || passphrase->size() > static_cast<size_t>(size)) return 0;
  memcpy(buf, passphrase->data(), passphrase->size());
  return static_cast<int>(passphrase->size());
}

absl::StatusOr<std::string> SeedFromPem(absl::string_view text, absl::string_view passphrase) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
  if (!bio) return absl::ResourceExhaustedError("BIO_new_mem_buf failed");
  Pkey key(PEM_read_bio_PrivateKey(bio.get(), nullptr, &PassphraseCallback, &passphrase));
  if (!key) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrContains(text, "ENCRYPTED") && passphrase.empty()
            ? "the PEM private key is encrypted and no passphrase is set"
            : "not a readable PEM private key (or a wrong passphrase)");
  }
  if (EVP_PKEY_id(key.get()) != EVP_PKEY_ED25519) {
    return absl::UnimplementedError(absl::StrCat("signing keys must be ed25519; this PEM key is ",
                                                 OBJ_nid2sn(EVP_PKEY_id(key.get()))));
  }
  std::string seed(kSeedSize, '\0');
  size_t size = seed.size();
  if (EVP_PKEY_get_raw_private_key(key.get(), reinterpret_cast<unsigned char*>(seed.data()),
                                   &size) != 1 ||
      size != kSeedSize) {
    return absl::InvalidArgumentError("cannot read the ed25519 private key");
  }
  return seed;
}

absl::StatusOr<Pkey> PrivateKey(absl::string_view seed) {
  Pkey key(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, U(seed), seed.size()));
  if (!key) return absl::InvalidArgumentError("not an ed25519 private key");
  return key;
}

}  // namespace

absl::StatusOr<SshSigningKey> SshSigningKey::FromSeed(absl::string_view seed) {
  if (seed.size() != kSeedSize) return absl::InvalidArgumentError("ed25519 seed is not 32 bytes");
  ASSIGN_OR_RETURN(Pkey key, PrivateKey(seed));
  std::string public_key(kPublicSize, '\0');
  size_t size = public_key.size();
  if (EVP_PKEY_get_raw_public_key(key.get(), reinterpret_cast<unsigned char*>(public_key.data()),
                                  &size) != 1 ||
      size != kPublicSize) {
    return absl::InternalError("cannot derive the ed25519 public key");
  }
  return SshSigningKey(std::string(seed), std::move(public_key));
}

absl::StatusOr<SshSigningKey> SshSigningKey::Parse(absl::string_view private_key,
                                                   absl::string_view passphrase) {
  std::string seed;
  if (absl::StrContains(private_key, kOpenSshBegin)) {
    ASSIGN_OR_RETURN(seed, SeedFromOpenSsh(private_key, passphrase));
  } else if (absl::StrContains(private_key, "-----BEGIN ")) {
    ASSIGN_OR_RETURN(seed, SeedFromPem(private_key, passphrase));
  } else {
    return absl::InvalidArgumentError(
        "not a private key: expected -----BEGIN OPENSSH PRIVATE KEY----- or a PEM PKCS#8 key");
  }
  return FromSeed(seed);
}

absl::StatusOr<SshSigningKey> SshSigningKey::FromSecretData(
    const std::map<std::string, std::string>& data) {
  auto key = data.find(kSigningKeyDataKey);
  if (key == data.end() || key->second.empty()) {
    return absl::NotFoundError(absl::StrCat("no ", kSigningKeyDataKey, " key"));
  }
  auto passphrase = data.find(kSigningPassphraseDataKey);
  return Parse(key->second, passphrase == data.end() ? "" : passphrase->second);
}

absl::StatusOr<SshSigningKey> SshSigningKey::Generate() {
  std::string seed(kSeedSize, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(seed.data()), static_cast<int>(seed.size())) !=
      1) {
    return absl::UnavailableError("the random source failed");
  }
  return FromSeed(seed);
}

std::string SshSigningKey::PublicKeyBlob() const {
  std::string blob;
  PutString(&blob, kKeyType);
  PutString(&blob, public_key_);
  return blob;
}

std::string SshSigningKey::AuthorizedKey() const {
  return absl::StrCat(kKeyType, " ", absl::Base64Escape(PublicKeyBlob()));
}

std::string SshSigningKey::OpenSshPrivateKey(absl::string_view comment) const {
  uint32_t check = 0;
  RAND_bytes(reinterpret_cast<unsigned char*>(&check), sizeof(check));  // any value is valid
  std::string section;
  PutU32(&section, check);
  PutU32(&section, check);
  PutString(&section, kKeyType);
  PutString(&section, public_key_);
  PutString(&section, absl::StrCat(seed_, public_key_));
  PutString(&section, comment);
  for (char pad = 1; section.size() % 8 != 0; ++pad) section.push_back(pad);

  std::string blob(kOpenSshMagic, sizeof(kOpenSshMagic));  // with its NUL
  PutString(&blob, "none");
  PutString(&blob, "none");
  PutString(&blob, "");
  PutU32(&blob, 1);
  PutString(&blob, PublicKeyBlob());
  PutString(&blob, section);
  return absl::StrCat(Armor(kOpenSshBegin, kOpenSshEnd, blob), "\n");
}

absl::StatusOr<std::string> SshSigningKey::EncryptedPkcs8PrivateKey(
    absl::string_view passphrase) const {
  if (passphrase.empty()) return absl::InvalidArgumentError("the passphrase is empty");
  ASSIGN_OR_RETURN(Pkey key, PrivateKey(seed_));
  std::unique_ptr<BIO, BioFree> bio(BIO_new(BIO_s_mem()));
  std::string pass(passphrase);
  if (!bio || PEM_write_bio_PKCS8PrivateKey(bio.get(), key.get(), EVP_aes_256_cbc(), pass.data(),
                                            static_cast<int>(pass.size()), nullptr, nullptr) != 1) {
    ERR_clear_error();
    return absl::InternalError("cannot encrypt the private key");
  }
  char* data = nullptr;
  long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

absl::StatusOr<std::string> SshSigningKey::Sign(absl::string_view message,
                                                absl::string_view signature_namespace) const {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_size = 0;
  if (EVP_Digest(message.data(), message.size(), digest, &digest_size, EVP_sha512(), nullptr) !=
      1) {
    return absl::InternalError("SHA-512 failed");
  }
  // PROTOCOL.sshsig: the signature covers the magic, namespace, reserved, hash name and digest.
  std::string to_sign(kSshSigMagic);
  PutString(&to_sign, signature_namespace);
  PutString(&to_sign, "");
  PutString(&to_sign, kHashAlgorithm);
  PutString(&to_sign, absl::string_view(reinterpret_cast<const char*>(digest), digest_size));

  ASSIGN_OR_RETURN(Pkey key, PrivateKey(seed_));
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  std::string signature(kSignatureSize, '\0');
  size_t signature_size = signature.size();
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1 ||
      EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(signature.data()), &signature_size,
                     U(to_sign), to_sign.size()) != 1 ||
      signature_size != kSignatureSize) {
    return absl::InternalError("ed25519 signing failed");
  }
  std::string signature_blob;
  PutString(&signature_blob, kKeyType);
  PutString(&signature_blob, signature);

  std::string blob(kSshSigMagic);
  PutU32(&blob, kSshSigVersion);
  PutString(&blob, PublicKeyBlob());
  PutString(&blob, signature_namespace);
  PutString(&blob, "");
  PutString(&blob, kHashAlgorithm);
  PutString(&blob, signature_blob);
  return Armor(kSignatureBegin, kSignatureEnd, blob);
}

}  // namespace reverser::git
