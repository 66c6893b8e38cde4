#include "libs/sops/crypto.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace reverser::sops::crypto {
namespace {

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct PkeyCtxFree {
  void operator()(EVP_PKEY_CTX* p) const { EVP_PKEY_CTX_free(p); }
};
struct CipherCtxFree {
  void operator()(EVP_CIPHER_CTX* p) const { EVP_CIPHER_CTX_free(p); }
};
struct KdfFree {
  void operator()(EVP_KDF* p) const { EVP_KDF_free(p); }
};
struct KdfCtxFree {
  void operator()(EVP_KDF_CTX* p) const { EVP_KDF_CTX_free(p); }
};
struct MacFree {
  void operator()(EVP_MAC* p) const { EVP_MAC_free(p); }
};
struct MacCtxFree {
  void operator()(EVP_MAC_CTX* p) const { EVP_MAC_CTX_free(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using PkeyCtx = std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree>;
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, CipherCtxFree>;

const unsigned char* U(absl::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}
unsigned char* U(std::string& s) { return reinterpret_cast<unsigned char*>(s.data()); }

absl::Status OpensslError(absl::string_view what) {
  return absl::InternalError(absl::StrCat("OpenSSL ", what, " failed"));
}

class OpensslRandom final : public Random {
 public:
  absl::StatusOr<std::string> Bytes(size_t n) override {
    std::string out(n, '\0');
    if (n > 0 && RAND_bytes(U(out), static_cast<int>(n)) != 1) return OpensslError("RAND_bytes");
    return out;
  }
};

// One AEAD pass (encrypt or decrypt) with OpenSSL's generic cipher API.
absl::StatusOr<std::string> AeadCrypt(const EVP_CIPHER* cipher, bool encrypt, absl::string_view key,
                                      absl::string_view iv, absl::string_view aad,
                                      absl::string_view input,
                                      std::string* tag /* out on encrypt, in on decrypt */) {
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  if (!ctx) return OpensslError("EVP_CIPHER_CTX_new");
  const int enc = encrypt ? 1 : 0;
  if (EVP_CipherInit_ex(ctx.get(), cipher, nullptr, nullptr, nullptr, enc) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_AEAD_SET_IVLEN, static_cast<int>(iv.size()),
                          nullptr) != 1 ||
      EVP_CipherInit_ex(ctx.get(), nullptr, nullptr, U(key), U(iv), enc) != 1) {
    return OpensslError("AEAD init");
  }
  int len = 0;
  if (!aad.empty() &&
      EVP_CipherUpdate(ctx.get(), nullptr, &len, U(aad), static_cast<int>(aad.size())) != 1) {
    return OpensslError("AEAD aad");
  }
  std::string out(input.size() + 16, '\0');
  int out_len = 0;
  if (!input.empty()) {
    if (EVP_CipherUpdate(ctx.get(), U(out), &len, U(input), static_cast<int>(input.size())) != 1)
      return OpensslError("AEAD update");
    out_len = len;
  }
  if (!encrypt) {
    if (tag->size() != 16) return absl::InvalidArgumentError("authentication tag must be 16 bytes");
    if (EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_AEAD_SET_TAG, 16, tag->data()) != 1)
      return OpensslError("AEAD set tag");
  }
  if (EVP_CipherFinal_ex(ctx.get(), U(out) + out_len, &len) != 1) {
    if (!encrypt) return absl::PermissionDeniedError("authentication failed");
    return OpensslError("AEAD final");
  }
  out_len += len;
  out.resize(out_len);
  if (encrypt) {
    tag->assign(16, '\0');
    if (EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_AEAD_GET_TAG, 16, tag->data()) != 1)
      return OpensslError("AEAD get tag");
  }
  return out;
}

int Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

Random& SystemRandom() {
  static OpensslRandom random;
  return random;
}

absl::StatusOr<std::string> X25519PublicKey(absl::string_view secret) {
  if (secret.size() != 32) return absl::InvalidArgumentError("X25519 secret must be 32 bytes");
  Pkey key(EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nullptr, U(secret), secret.size()));
  if (!key) return OpensslError("X25519 private key");
  std::string pub(32, '\0');
  size_t len = pub.size();
  if (EVP_PKEY_get_raw_public_key(key.get(), U(pub), &len) != 1 || len != 32)
    return OpensslError("X25519 public key");
  return pub;
}

absl::StatusOr<std::string> X25519(absl::string_view secret, absl::string_view peer_public) {
  if (secret.size() != 32 || peer_public.size() != 32)
    return absl::InvalidArgumentError("X25519 keys must be 32 bytes");
  Pkey key(EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nullptr, U(secret), secret.size()));
  Pkey peer(
      EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nullptr, U(peer_public), peer_public.size()));
  if (!key || !peer) return OpensslError("X25519 key import");
  PkeyCtx ctx(EVP_PKEY_CTX_new(key.get(), nullptr));
  if (!ctx || EVP_PKEY_derive_init(ctx.get()) != 1 ||
      EVP_PKEY_derive_set_peer(ctx.get(), peer.get()) != 1) {
    return OpensslError("X25519 derive init");
  }
  std::string shared(32, '\0');
  size_t len = shared.size();
  // OpenSSL refuses an all-zero result (a low-order peer point); age requires exactly that.
  if (EVP_PKEY_derive(ctx.get(), U(shared), &len) != 1 || len != 32) {
    return absl::InvalidArgumentError("X25519 shared secret is all zero (low-order point)");
  }
  return shared;
}

absl::StatusOr<std::string> HkdfSha256(absl::string_view ikm, absl::string_view salt,
                                       absl::string_view info, size_t length) {
  std::unique_ptr<EVP_KDF, KdfFree> kdf(EVP_KDF_fetch(nullptr, "HKDF", nullptr));
  if (!kdf) return OpensslError("EVP_KDF_fetch(HKDF)");
  std::unique_ptr<EVP_KDF_CTX, KdfCtxFree> ctx(EVP_KDF_CTX_new(kdf.get()));
  if (!ctx) return OpensslError("EVP_KDF_CTX_new");
  char digest[] = "SHA256";
  OSSL_PARAM params[5];
  int n = 0;
  params[n++] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0);
  params[n++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<char*>(ikm.data()),
                                                  ikm.size());
  if (!salt.empty()) {
    params[n++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT,
                                                    const_cast<char*>(salt.data()), salt.size());
  }
  params[n++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO,
                                                  const_cast<char*>(info.data()), info.size());
  params[n] = OSSL_PARAM_construct_end();
  std::string out(length, '\0');
  if (EVP_KDF_derive(ctx.get(), U(out), out.size(), params) != 1) return OpensslError("HKDF");
  return out;
}

absl::StatusOr<std::string> HmacSha256(absl::string_view key, absl::string_view data) {
  std::unique_ptr<EVP_MAC, MacFree> mac(EVP_MAC_fetch(nullptr, "HMAC", nullptr));
  if (!mac) return OpensslError("EVP_MAC_fetch(HMAC)");
  std::unique_ptr<EVP_MAC_CTX, MacCtxFree> ctx(EVP_MAC_CTX_new(mac.get()));
  if (!ctx) return OpensslError("EVP_MAC_CTX_new");
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                         OSSL_PARAM_construct_end()};
  std::string out(32, '\0');
  size_t len = 0;
  if (EVP_MAC_init(ctx.get(), U(key), key.size(), params) != 1 ||
      EVP_MAC_update(ctx.get(), U(data), data.size()) != 1 ||
      EVP_MAC_final(ctx.get(), U(out), &len, out.size()) != 1 || len != 32) {
    return OpensslError("HMAC-SHA256");
  }
  return out;
}

std::string Sha256(absl::string_view data) {
  std::string out(32, '\0');
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), U(out), &len, EVP_sha256(), nullptr);
  return out;
}

std::string Sha512(absl::string_view data) {
  std::string out(64, '\0');
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), U(out), &len, EVP_sha512(), nullptr);
  return out;
}

absl::StatusOr<std::string> ChaChaSeal(absl::string_view key, absl::string_view nonce,
                                       absl::string_view aad, absl::string_view plaintext) {
  if (key.size() != 32 || nonce.size() != 12)
    return absl::InvalidArgumentError("ChaCha20-Poly1305 needs a 32-byte key and 12-byte nonce");
  std::string tag;
  auto ct = AeadCrypt(EVP_chacha20_poly1305(), true, key, nonce, aad, plaintext, &tag);
  if (!ct.ok()) return ct.status();
  return *ct + tag;
}

absl::StatusOr<std::string> ChaChaOpen(absl::string_view key, absl::string_view nonce,
                                       absl::string_view aad, absl::string_view sealed) {
  if (key.size() != 32 || nonce.size() != 12)
    return absl::InvalidArgumentError("ChaCha20-Poly1305 needs a 32-byte key and 12-byte nonce");
  if (sealed.size() < 16) return absl::InvalidArgumentError("ciphertext shorter than its tag");
  std::string tag(sealed.substr(sealed.size() - 16));
  return AeadCrypt(EVP_chacha20_poly1305(), false, key, nonce, aad,
                   sealed.substr(0, sealed.size() - 16), &tag);
}

absl::StatusOr<GcmSealed> AesGcmSeal(absl::string_view key, absl::string_view iv,
                                     absl::string_view aad, absl::string_view plaintext) {
  if (key.size() != 32 || iv.empty())
    return absl::InvalidArgumentError("AES-256-GCM needs a 32-byte key and a non-empty IV");
  GcmSealed sealed;
  auto ct = AeadCrypt(EVP_aes_256_gcm(), true, key, iv, aad, plaintext, &sealed.tag);
  if (!ct.ok()) return ct.status();
  sealed.ciphertext = std::move(*ct);
  return sealed;
}

absl::StatusOr<std::string> AesGcmOpen(absl::string_view key, absl::string_view iv,
                                       absl::string_view aad, absl::string_view ciphertext,
                                       absl::string_view tag) {
  if (key.size() != 32 || iv.empty())
    return absl::InvalidArgumentError("AES-256-GCM needs a 32-byte key and a non-empty IV");
  std::string tag_copy(tag);
  return AeadCrypt(EVP_aes_256_gcm(), false, key, iv, aad, ciphertext, &tag_copy);
}

std::string Base64Encode(absl::string_view data, bool padded) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((data.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= data.size(); i += 3) {
    uint32_t v = (uint8_t(data[i]) << 16) | (uint8_t(data[i + 1]) << 8) | uint8_t(data[i + 2]);
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  const size_t rest = data.size() - i;
  if (rest == 1) {
    uint32_t v = uint8_t(data[i]) << 16;
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    if (padded) out += "==";
  } else if (rest == 2) {
    uint32_t v = (uint8_t(data[i]) << 16) | (uint8_t(data[i + 1]) << 8);
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    if (padded) out += '=';
  }
  return out;
}

absl::StatusOr<std::string> Base64Decode(absl::string_view text, bool padded) {
  size_t data_len = text.size();
  if (padded) {
    if (text.size() % 4 != 0)
      return absl::InvalidArgumentError("base64 length not a multiple of 4");
    while (data_len > 0 && text[data_len - 1] == '=' && text.size() - data_len < 2) --data_len;
  }
  if (data_len % 4 == 1) return absl::InvalidArgumentError("base64 has a dangling character");
  std::string out;
  out.reserve(data_len * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < data_len; ++i) {
    const int v = Base64Value(text[i]);
    if (v < 0) return absl::InvalidArgumentError("base64 has an invalid character");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  // Canonical encoding: the bits left over after the last full byte must be zero.
  if (bits > 0 && (acc & ((1u << bits) - 1)) != 0)
    return absl::InvalidArgumentError("base64 is not canonical (non-zero padding bits)");
  return out;
}

std::string HexEncode(absl::string_view data, bool upper) {
  const char* digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string out;
  out.reserve(data.size() * 2);
  for (unsigned char c : data) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

absl::StatusOr<std::string> HexDecode(absl::string_view hex) {
  if (hex.size() % 2 != 0) return absl::InvalidArgumentError("hex has an odd length");
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = nibble(hex[i]);
    const int lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return absl::InvalidArgumentError("hex has an invalid character");
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace reverser::sops::crypto
