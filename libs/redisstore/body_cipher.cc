#include "libs/redisstore/body_cipher.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace reverser::redisstore {
namespace {

constexpr absl::string_view kPrefix = "rvenc1:";
constexpr size_t kKeyBytes = 32, kNonceBytes = 12, kTagBytes = 16;

std::string Hmac(absl::string_view key, absl::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &length);
  return std::string(reinterpret_cast<const char*>(out), length);
}

bool ValidKeyId(absl::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

using CipherContext = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

}  // namespace

absl::StatusOr<std::unique_ptr<BodyCipher>> BodyCipher::FromKeys(
    std::vector<std::pair<std::string, std::string>> keys) {
  if (keys.empty()) return absl::InvalidArgumentError("no body key given");
  std::vector<Key> out;
  for (auto& [id, raw] : keys) {
    if (!ValidKeyId(id)) {
      return absl::InvalidArgumentError(
          absl::StrCat("body key id \"", id, "\" is not [A-Za-z0-9._-]{1,64}"));
    }
    if (raw.size() != kKeyBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("body key \"", id, "\" has ", raw.size(), " bytes, not 32"));
    }
    for (const Key& seen : out) {
      if (seen.id == id) return absl::InvalidArgumentError(absl::StrCat("body key id \"", id, "\" twice"));
    }
    out.push_back({id, raw, Hmac(raw, "reverser body nonce")});
  }
  return std::unique_ptr<BodyCipher>(new BodyCipher(std::move(out)));
}

absl::StatusOr<std::unique_ptr<BodyCipher>> BodyCipher::FromKeyFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read body key file ", path));
  std::stringstream text;
  text << in.rdbuf();
  std::vector<std::pair<std::string, std::string>> keys;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text.str(), '\n')) {
    ++number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    std::pair<absl::string_view, absl::string_view> parts = absl::StrSplit(line, absl::MaxSplits(':', 1));
    std::string raw;
    if (parts.second.empty() || !absl::Base64Unescape(parts.second, &raw)) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ":", number, ": not `<key id>:<base64 of 32 bytes>`"));
    }
    keys.emplace_back(std::string(parts.first), std::move(raw));
  }
  auto cipher = FromKeys(std::move(keys));
  if (!cipher.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", cipher.status().message()));
  }
  return cipher;
}

bool BodyCipher::IsSealed(absl::string_view stored) { return absl::StartsWith(stored, kPrefix); }

std::string BodyCipher::Seal(absl::string_view plaintext) const {
  const Key& key = keys_.front();
  const std::string nonce = Hmac(key.nonce_key, plaintext).substr(0, kNonceBytes);
  std::string sealed(kNonceBytes + plaintext.size() + kTagBytes, '\0');
  sealed.replace(0, kNonceBytes, nonce);
  CipherContext ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  int length = 0;
  auto* out = reinterpret_cast<unsigned char*>(sealed.data());
  // The key id is authenticated: a body cannot be passed off as sealed under another key.
  EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr);
  EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, kNonceBytes, nullptr);
  EVP_EncryptInit_ex(ctx.get(), nullptr, nullptr,
                     reinterpret_cast<const unsigned char*>(key.body_key.data()),
                     reinterpret_cast<const unsigned char*>(nonce.data()));
  EVP_EncryptUpdate(ctx.get(), nullptr, &length,
                    reinterpret_cast<const unsigned char*>(key.id.data()),
                    static_cast<int>(key.id.size()));
  EVP_EncryptUpdate(ctx.get(), out + kNonceBytes, &length,
                    reinterpret_cast<const unsigned char*>(plaintext.data()),
                    static_cast<int>(plaintext.size()));
  EVP_EncryptFinal_ex(ctx.get(), out + kNonceBytes + length, &length);
  EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagBytes,
                      out + kNonceBytes + plaintext.size());
  return absl::StrCat(kPrefix, key.id, ":", absl::Base64Escape(sealed));
}

absl::StatusOr<std::string> BodyCipher::Open(absl::string_view stored) const {
  if (!IsSealed(stored)) return absl::InvalidArgumentError("not a sealed body");
  stored.remove_prefix(kPrefix.size());
  const size_t colon = stored.find(':');
  if (colon == absl::string_view::npos) return absl::DataLossError("sealed body without a key id");
  const absl::string_view id = stored.substr(0, colon);
  const Key* key = nullptr;
  for (const Key& k : keys_) {
    if (k.id == id) key = &k;
  }
  if (key == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "a body sealed with key \"", id, "\", which the body key file does not hold"));
  }
  std::string sealed;
  if (!absl::Base64Unescape(stored.substr(colon + 1), &sealed) ||
      sealed.size() < kNonceBytes + kTagBytes) {
    return absl::DataLossError(absl::StrCat("sealed body (key \"", id, "\") is not well formed"));
  }
  const size_t text_bytes = sealed.size() - kNonceBytes - kTagBytes;
  std::string plaintext(text_bytes, '\0');
  CipherContext ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  int length = 0;
  const auto* in = reinterpret_cast<const unsigned char*>(sealed.data());
  EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr);
  EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, kNonceBytes, nullptr);
  EVP_DecryptInit_ex(ctx.get(), nullptr, nullptr,
                     reinterpret_cast<const unsigned char*>(key->body_key.data()), in);
  EVP_DecryptUpdate(ctx.get(), nullptr, &length,
                    reinterpret_cast<const unsigned char*>(key->id.data()),
                    static_cast<int>(key->id.size()));
  EVP_DecryptUpdate(ctx.get(), reinterpret_cast<unsigned char*>(plaintext.data()), &length,
                    in + kNonceBytes, static_cast<int>(text_bytes));
  EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagBytes,
                      const_cast<unsigned char*>(in + kNonceBytes + text_bytes));
  int final_length = 0;
  if (EVP_DecryptFinal_ex(ctx.get(), reinterpret_cast<unsigned char*>(plaintext.data()) + length,
                          &final_length) != 1) {
    return absl::DataLossError(
        absl::StrCat("sealed body (key \"", id, "\") failed authentication: altered or damaged"));
  }
  return plaintext;
}

}  // namespace reverser::redisstore
