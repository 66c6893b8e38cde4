#include "libs/sops/age.h"

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "libs/core/status.h"
#include "libs/sops/bech32.h"

namespace reverser::sops::age {
namespace {

constexpr absl::string_view kIntro = "age-encryption.org/v1";
constexpr absl::string_view kX25519Label = "age-encryption.org/v1/X25519";
constexpr absl::string_view kArmorBegin = "-----BEGIN AGE ENCRYPTED FILE-----";
constexpr absl::string_view kArmorEnd = "-----END AGE ENCRYPTED FILE-----";
constexpr size_t kColumns = 64;           // base64 characters per line (header and armor)
constexpr size_t kBytesPerLine = 48;      // bytes encoded by one full line
constexpr size_t kChunkSize = 64 * 1024;  // STREAM plaintext chunk
constexpr size_t kTagSize = 16;
constexpr size_t kEncChunkSize = kChunkSize + kTagSize;
constexpr size_t kMaxArmorWhitespace = 1024;

absl::Status HeaderError(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("age header: ", what));
}
absl::Status PayloadError(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("age payload: ", what));
}
absl::Status ArmorError(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("age armor: ", what));
}

// Refuses recipient/identity encodings this X25519-only implementation cannot use, by name.
absl::Status UnsupportedKind(absl::string_view text) {
  if (absl::StartsWithIgnoreCase(text, "age1pq1") ||
      absl::StartsWithIgnoreCase(text, "AGE-SECRET-KEY-PQ-1")) {
    return absl::UnimplementedError(
        "unsupported age recipient type: post-quantum (ML-KEM-768 hybrid) keys need sops >= 3.12");
  }
  if (absl::StartsWith(text, "ssh-")) {
    return absl::UnimplementedError("unsupported age recipient type: SSH keys");
  }
  if (absl::StartsWithIgnoreCase(text, "age1") || absl::StartsWithIgnoreCase(text, "AGE-PLUGIN-")) {
    return absl::UnimplementedError("unsupported age recipient type: plugin or tag recipient");
  }
  return absl::OkStatus();
}

// Names a would-be recipient in errors without ever echoing secret material: only text that
// looks like a public key is quoted.
std::string DescribeRecipient(absl::string_view text) {
  if (absl::StartsWithIgnoreCase(text, "AGE-SECRET-KEY-")) {
    return "(a secret key was given; use its public age1... recipient)";
  }
  if (absl::StartsWith(text, "age1") && text.size() <= 100) return absl::StrCat("\"", text, "\"");
  return "(not an age1... public key)";
}

bool IsArgChar(char c) { return c >= 0x21 && c <= 0x7E; }

// The 12-byte STREAM nonce: 11-byte big-endian counter, then the last-chunk flag.
std::string ChunkNonce(uint64_t counter, bool last) {
  std::string nonce(12, '\0');
  for (int i = 0; i < 8; ++i) nonce[10 - i] = static_cast<char>((counter >> (8 * i)) & 0xFF);
  nonce[11] = last ? 1 : 0;
  return nonce;
}

// Reads one '\n'-terminated line starting at *pos; the line excludes the '\n'.
bool NextLine(absl::string_view file, size_t* pos, absl::string_view* line) {
  const size_t end = file.find('\n', *pos);
  if (end == absl::string_view::npos) return false;
  *line = file.substr(*pos, end - *pos);
  *pos = end + 1;
  return true;
}

absl::StatusOr<std::string> UnwrapX25519(const X25519Identity& identity, const Stanza& stanza,
                                         bool* matched) {
  *matched = false;
  if (stanza.args.size() != 2) return HeaderError("X25519 stanza needs exactly one argument");
  auto share = crypto::Base64Decode(stanza.args[1], /*padded=*/false);
  if (!share.ok() || share->size() != 32)
    return HeaderError("X25519 share is not canonical base64 of 32 bytes");
  if (stanza.body.size() != 32) return HeaderError("X25519 stanza body must be 32 bytes");
  auto shared = crypto::X25519(identity.secret_key(), *share);
  if (!shared.ok()) return HeaderError("X25519 share is a low-order point");
  const std::string salt = *share + identity.Recipient().public_key();
  ASSIGN_OR_RETURN(std::string wrap_key, crypto::HkdfSha256(*shared, salt, kX25519Label, 32));
  auto file_key = crypto::ChaChaOpen(wrap_key, std::string(12, '\0'), "", stanza.body);
  if (!file_key.ok()) {
    if (absl::IsPermissionDenied(file_key.status())) return std::string();  // not ours
    return file_key.status();
  }
  *matched = true;
  return file_key;
}

absl::StatusOr<std::string> StreamDecrypt(absl::string_view key, absl::string_view data) {
  std::string out;
  size_t off = 0;
  for (uint64_t counter = 0;; ++counter) {
    const size_t remaining = data.size() - off;
    if (remaining == 0) return PayloadError("missing final chunk");
    const size_t n = std::min(remaining, kEncChunkSize);
    const absl::string_view chunk = data.substr(off, n);
    if (n < kTagSize) return PayloadError("chunk shorter than its tag");
    bool last = false;
    absl::StatusOr<std::string> plain;
    if (n < kEncChunkSize) {
      last = true;
      plain = crypto::ChaChaOpen(key, ChunkNonce(counter, true), "", chunk);
      if (plain.ok() && plain->empty() && counter > 0) return PayloadError("empty last chunk");
    } else {
      // A full chunk is usually not the last one; if it is, only the last flag authenticates.
      plain = crypto::ChaChaOpen(key, ChunkNonce(counter, false), "", chunk);
      if (!plain.ok()) {
        last = true;
        plain = crypto::ChaChaOpen(key, ChunkNonce(counter, true), "", chunk);
      }
    }
    if (!plain.ok()) return PayloadError("chunk authentication failed");
    out += *plain;
    off += n;
    if (last) {
      if (off != data.size()) return PayloadError("trailing data after the final chunk");
      return out;
    }
  }
}

}  // namespace

absl::StatusOr<X25519Recipient> X25519Recipient::Parse(absl::string_view text) {
  if (absl::StartsWith(text, "age1pq1") || absl::StartsWith(text, "ssh-")) {
    return UnsupportedKind(text);
  }
  auto decoded = bech32::Decode(text);
  if (!decoded.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid age recipient ", DescribeRecipient(text), ": ", decoded.status().message()));
  }
  if (decoded->hrp != "age") {
    RETURN_IF_ERROR(UnsupportedKind(text));
    return absl::InvalidArgumentError(absl::StrCat("invalid age recipient ",
                                                   DescribeRecipient(text),
                                                   ": expected an age1... X25519 public key"));
  }
  return FromPublicKey(decoded->data);
}

absl::StatusOr<X25519Recipient> X25519Recipient::FromPublicKey(absl::string_view public_key) {
  if (public_key.size() != 32)
    return absl::InvalidArgumentError("invalid age recipient: public key must be 32 bytes");
  X25519Recipient recipient;
  recipient.public_key_ = std::string(public_key);
  return recipient;
}

std::string X25519Recipient::String() const {
  return bech32::Encode("age", public_key_).value_or("");
}

absl::StatusOr<X25519Identity> X25519Identity::Parse(absl::string_view text) {
  auto decoded = bech32::Decode(text);
  if (!decoded.ok()) {
    RETURN_IF_ERROR(UnsupportedKind(text));
    // The bech32 error says nothing about the key, so it is safe to include.
    return absl::InvalidArgumentError(
        absl::StrCat("invalid age identity: ", decoded.status().message()));
  }
  if (decoded->hrp != "AGE-SECRET-KEY-") {
    RETURN_IF_ERROR(UnsupportedKind(text));
    return absl::InvalidArgumentError("invalid age identity: expected AGE-SECRET-KEY-1...");
  }
  return FromSecretKey(decoded->data);
}

absl::StatusOr<X25519Identity> X25519Identity::FromSecretKey(absl::string_view secret_key) {
  if (secret_key.size() != 32)
    return absl::InvalidArgumentError("invalid age identity: secret key must be 32 bytes");
  ASSIGN_OR_RETURN(std::string public_key, crypto::X25519PublicKey(secret_key));
  X25519Identity identity;
  identity.secret_key_ = std::string(secret_key);
  ASSIGN_OR_RETURN(identity.recipient_, X25519Recipient::FromPublicKey(public_key));
  return identity;
}

absl::StatusOr<X25519Identity> X25519Identity::Generate(crypto::Random& random) {
  ASSIGN_OR_RETURN(std::string secret, random.Bytes(32));
  return FromSecretKey(secret);
}

std::string X25519Identity::String() const {
  return bech32::Encode("AGE-SECRET-KEY-", secret_key_).value_or("");
}

absl::StatusOr<std::vector<X25519Identity>> ParseIdentityFile(absl::string_view text) {
  std::vector<X25519Identity> identities;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    if (absl::EndsWith(line, "\r")) line.remove_suffix(1);
    if (line.empty() || absl::StartsWith(line, "#")) continue;
    auto identity = X25519Identity::Parse(line);
    if (!identity.ok()) {
      return absl::Status(
          identity.status().code(),
          absl::StrCat("identity file line ", line_number, ": ", identity.status().message()));
    }
    identities.push_back(*std::move(identity));
  }
  if (identities.empty()) return absl::InvalidArgumentError("identity file has no identities");
  return identities;
}

absl::StatusOr<Header> ParseHeader(absl::string_view file) {
  Header header;
  size_t pos = 0;
  absl::string_view line;
  if (!NextLine(file, &pos, &line) || line != kIntro)
    return HeaderError("missing or unsupported version line");
  while (true) {
    const size_t line_start = pos;
    if (!NextLine(file, &pos, &line)) return HeaderError("unexpected end of header");
    if (absl::StartsWith(line, "---")) {
      std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
      if (parts[0] != "---" || parts.size() != 2) return HeaderError("malformed MAC line");
      auto mac = crypto::Base64Decode(parts[1], /*padded=*/false);
      if (!mac.ok() || mac->size() != 32)
        return HeaderError("MAC is not canonical base64 of 32 bytes");
      header.mac = *std::move(mac);
      header.mac_input_end = line_start + 3;
      header.payload_offset = pos;
      return header;
    }
    if (!absl::StartsWith(line, "->")) return HeaderError("unexpected line");
    std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
    if (parts[0] != "->" || parts.size() < 2) return HeaderError("stanza without arguments");
    Stanza stanza;
    for (size_t i = 1; i < parts.size(); ++i) {
      if (parts[i].empty() || !std::all_of(parts[i].begin(), parts[i].end(), IsArgChar))
        return HeaderError("invalid stanza argument");
      stanza.args.emplace_back(parts[i]);
    }
    // Body: full 64-column lines, ended by the first shorter line (possibly empty).
    while (true) {
      if (!NextLine(file, &pos, &line)) return HeaderError("unexpected end of stanza body");
      if (line.size() > kColumns) return HeaderError("stanza body line too long");
      auto chunk = crypto::Base64Decode(line, /*padded=*/false);
      if (!chunk.ok()) return HeaderError("stanza body is not canonical base64");
      stanza.body += *chunk;
      if (chunk->size() < kBytesPerLine) break;
    }
    header.stanzas.push_back(std::move(stanza));
  }
}

absl::StatusOr<std::string> Encrypt(absl::string_view plaintext,
                                    const std::vector<X25519Recipient>& recipients,
                                    crypto::Random& random) {
  if (recipients.empty()) return absl::InvalidArgumentError("age: no recipients");
  ASSIGN_OR_RETURN(std::string file_key, random.Bytes(16));
  std::string header = absl::StrCat(kIntro, "\n");
  for (const X25519Recipient& recipient : recipients) {
    ASSIGN_OR_RETURN(std::string ephemeral, random.Bytes(32));
    ASSIGN_OR_RETURN(std::string share, crypto::X25519PublicKey(ephemeral));
    ASSIGN_OR_RETURN(std::string shared, crypto::X25519(ephemeral, recipient.public_key()));
    ASSIGN_OR_RETURN(std::string wrap_key,
                     crypto::HkdfSha256(shared, share + recipient.public_key(), kX25519Label, 32));
    ASSIGN_OR_RETURN(std::string body,
                     crypto::ChaChaSeal(wrap_key, std::string(12, '\0'), "", file_key));
    absl::StrAppend(&header, "-> X25519 ", crypto::Base64Encode(share, false), "\n");
    // Body wrapped at 64 columns; always ends with a line shorter than 64 (maybe empty).
    const std::string encoded = crypto::Base64Encode(body, false);
    for (size_t i = 0;; i += kColumns) {
      const std::string piece = encoded.substr(std::min(i, encoded.size()), kColumns);
      absl::StrAppend(&header, piece, "\n");
      if (piece.size() < kColumns) break;
    }
  }
  header += "---";
  ASSIGN_OR_RETURN(std::string hmac_key, crypto::HkdfSha256(file_key, "", "header", 32));
  ASSIGN_OR_RETURN(std::string mac, crypto::HmacSha256(hmac_key, header));
  std::string out = absl::StrCat(header, " ", crypto::Base64Encode(mac, false), "\n");

  ASSIGN_OR_RETURN(std::string nonce, random.Bytes(16));
  ASSIGN_OR_RETURN(std::string payload_key, crypto::HkdfSha256(file_key, nonce, "payload", 32));
  out += nonce;
  uint64_t counter = 0;
  size_t off = 0;
  do {
    const size_t n = std::min(kChunkSize, plaintext.size() - off);
    const bool last = off + n == plaintext.size();
    ASSIGN_OR_RETURN(std::string sealed, crypto::ChaChaSeal(payload_key, ChunkNonce(counter, last),
                                                            "", plaintext.substr(off, n)));
    out += sealed;
    off += n;
    ++counter;
  } while (off < plaintext.size());
  return out;
}

absl::StatusOr<std::string> Decrypt(absl::string_view file,
                                    const std::vector<X25519Identity>& identities) {
  ASSIGN_OR_RETURN(Header header, ParseHeader(file));
  const bool has_scrypt = std::any_of(header.stanzas.begin(), header.stanzas.end(),
                                      [](const Stanza& s) { return s.args[0] == "scrypt"; });
  if (has_scrypt && header.stanzas.size() != 1)
    return HeaderError("an scrypt stanza must be the only stanza");

  std::string file_key;
  bool found = false;
  for (const X25519Identity& identity : identities) {
    for (const Stanza& stanza : header.stanzas) {
      if (stanza.args[0] != "X25519") continue;  // other types (and grease) are not ours
      bool matched = false;
      ASSIGN_OR_RETURN(std::string key, UnwrapX25519(identity, stanza, &matched));
      if (matched) {
        file_key = std::move(key);
        found = true;
        break;
      }
    }
    if (found) break;
  }
  if (!found) return absl::NotFoundError("age: no identity matched any recipient stanza");
  if (file_key.size() != 16) return HeaderError("file key must be 16 bytes");

  ASSIGN_OR_RETURN(std::string hmac_key, crypto::HkdfSha256(file_key, "", "header", 32));
  ASSIGN_OR_RETURN(std::string mac,
                   crypto::HmacSha256(hmac_key, file.substr(0, header.mac_input_end)));
  if (!crypto::ConstantTimeEquals(mac, header.mac))
    return absl::UnauthenticatedError("age: header MAC mismatch");

  const absl::string_view payload = file.substr(header.payload_offset);
  if (payload.size() < 16) return HeaderError("payload nonce missing or short");
  ASSIGN_OR_RETURN(std::string payload_key,
                   crypto::HkdfSha256(file_key, payload.substr(0, 16), "payload", 32));
  return StreamDecrypt(payload_key, payload.substr(16));
}

std::string Armor(absl::string_view binary) {
  const std::string encoded = crypto::Base64Encode(binary, true);
  std::string out = absl::StrCat(kArmorBegin, "\n");
  for (size_t i = 0; i < encoded.size(); i += kColumns) {
    absl::StrAppend(&out, encoded.substr(i, kColumns), "\n");
  }
  absl::StrAppend(&out, kArmorEnd, "\n");
  return out;
}

absl::StatusOr<std::string> Dearmor(absl::string_view text) {
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  size_t pos = 0;
  while (pos < text.size() && is_space(text[pos])) ++pos;
  if (pos > kMaxArmorWhitespace) return ArmorError("too much leading whitespace");
  // Lines end in "\n" or "\r\n"; the END line may also end the input.
  auto next_line = [&](absl::string_view* line) {
    if (pos >= text.size()) return false;
    size_t end = text.find('\n', pos);
    if (end == absl::string_view::npos) end = text.size();
    *line = text.substr(pos, end - pos);
    if (absl::EndsWith(*line, "\r")) line->remove_suffix(1);
    pos = std::min(end + 1, text.size() + 1);
    return true;
  };
  absl::string_view line;
  if (!next_line(&line) || line != kArmorBegin) return ArmorError("missing BEGIN line");
  std::string out;
  bool need_end = false;
  while (true) {
    if (!next_line(&line)) return ArmorError("missing END line");
    if (line == kArmorEnd) break;
    if (need_end) return ArmorError("a short line must be the last one");
    if (line.empty() || line.size() > kColumns) return ArmorError("bad line length");
    auto chunk = crypto::Base64Decode(line, /*padded=*/true);
    if (!chunk.ok()) return ArmorError(chunk.status().message());
    out += *chunk;
    need_end = chunk->size() < kBytesPerLine;
  }
  if (pos < text.size()) {
    const absl::string_view rest = text.substr(pos);
    if (!std::all_of(rest.begin(), rest.end(), is_space))
      return ArmorError("data after the END line");
    if (rest.size() > kMaxArmorWhitespace) return ArmorError("too much trailing whitespace");
  }
  return out;
}

absl::StatusOr<std::string> EncryptArmored(absl::string_view plaintext,
                                           const std::vector<X25519Recipient>& recipients,
                                           crypto::Random& random) {
  ASSIGN_OR_RETURN(std::string binary, Encrypt(plaintext, recipients, random));
  return Armor(binary);
}

absl::StatusOr<std::string> DecryptArmored(absl::string_view text,
                                           const std::vector<X25519Identity>& identities) {
  ASSIGN_OR_RETURN(std::string binary, Dearmor(text));
  return Decrypt(binary, identities);
}

}  // namespace reverser::sops::age
