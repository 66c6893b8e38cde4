#include "libs/sops/sops.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "libs/core/status.h"
#include "libs/sops/text_formats.h"
#include "re2/re2.h"

namespace reverser::sops {
namespace {

using Path = std::vector<std::string>;
using LeafFn = std::function<absl::Status(Tree& leaf, const Path& path)>;

constexpr size_t kDataKeySize = 32;
constexpr size_t kIvSize = 32;

// Calls `fn` on every non-null scalar in document order. Sequence indexes are not part of the
// path (sops: every item of `a_list:` has the AAD `a_list:`); the top-level `sops` key is skipped.
absl::Status Walk(Tree& node, Path& path, const LeafFn& fn, bool top_level) {
  if (node.is_object()) {
    for (auto& item : node.items()) {
      if (top_level && item.key() == "sops") continue;
      path.push_back(item.key());
      RETURN_IF_ERROR(Walk(item.value(), path, fn, false));
      path.pop_back();
    }
    return absl::OkStatus();
  }
  if (node.is_array()) {
    for (Tree& item : node) RETURN_IF_ERROR(Walk(item, path, fn, false));
    return absl::OkStatus();
  }
  if (node.is_null()) return absl::OkStatus();
  return fn(node, path);
}

std::string Aad(const Path& path) { return absl::StrCat(absl::StrJoin(path, ":"), ":"); }

// strconv.FormatFloat(f, 'f', -1, 64).
std::string GoFormatFloatF(double f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f > 0 ? "+Inf" : "-Inf";
  char buf[400];
  auto result = std::to_chars(buf, buf + sizeof(buf), f, std::chars_format::fixed);
  return std::string(buf, result.ptr);
}

struct LeafBytes {
  std::string bytes;
  std::string type;
};

// sops.ToBytes plus the ENC type name: the exact bytes encrypted and hashed into the MAC.
absl::StatusOr<LeafBytes> ToBytes(const Tree& leaf) {
  switch (leaf.type()) {
    case Tree::value_t::string:
      return LeafBytes{leaf.get<std::string>(), "str"};
    case Tree::value_t::number_integer:
      return LeafBytes{absl::StrCat(leaf.get<int64_t>()), "int"};
    case Tree::value_t::number_unsigned:
      if (leaf.get<uint64_t>() > uint64_t{INT64_MAX})
        return absl::InvalidArgumentError("integer beyond int64 (sops: unknown type uint64)");
      return LeafBytes{absl::StrCat(leaf.get<uint64_t>()), "int"};
    case Tree::value_t::number_float:
      return LeafBytes{GoFormatFloatF(leaf.get<double>()), "float"};
    case Tree::value_t::boolean:
      return LeafBytes{leaf.get<bool>() ? "True" : "False", "bool"};
    default:
      return absl::InvalidArgumentError("unsupported leaf type");
  }
}

// How much of a refused pattern an error message repeats (a pattern from Git can be huge).
constexpr size_t kMaxPatternEcho = 200;

std::string Shortened(absl::string_view text) {
  if (text.size() <= kMaxPatternEcho) return std::string(text);
  return absl::StrCat(text.substr(0, kMaxPatternEcho), "...");
}

// Which leaves a rule selects (sops Metadata.shouldBeEncrypted), with Go regexp.Match's
// unanchored search semantics. Patterns come from configuration and from the `sops` block of
// files in Git, and keys from objects, so they are matched with RE2: linear time, no recursion,
// and the syntax of Go's regexp, which sops uses (std::regex backtracks, recursing per
// character). A pattern RE2 does not take (backreferences, lookaround) is InvalidArgument.
class Selector {
 public:
  static absl::StatusOr<Selector> Create(const EncryptionRule& rule) {
    Selector s;
    s.rule_ = rule;
    if (rule.kind == EncryptionRule::Kind::kEncryptedRegex ||
        rule.kind == EncryptionRule::Kind::kUnencryptedRegex) {
      RE2::Options options;
      options.set_log_errors(false);
      auto regex = std::make_shared<const RE2>(rule.value, options);
      if (!regex->ok()) {
        return absl::InvalidArgumentError(absl::StrCat("unsupported ", rule.MetadataKey(), ": ",
                                                       Shortened(rule.value), " (",
                                                       Shortened(regex->error()), ")"));
      }
      s.regex_ = std::move(regex);
    }
    return s;
  }

  bool Selected(const Path& path) const {
    bool any = false;
    for (const std::string& key : path) {
      switch (rule_.kind) {
        case EncryptionRule::Kind::kEncryptedRegex:
        case EncryptionRule::Kind::kUnencryptedRegex:
          any = RE2::PartialMatch(key, *regex_);
          break;
        case EncryptionRule::Kind::kEncryptedSuffix:
        case EncryptionRule::Kind::kUnencryptedSuffix:
          any = absl::EndsWith(key, rule_.value);
          break;
      }
      if (any) break;
    }
    const bool positive = rule_.kind == EncryptionRule::Kind::kEncryptedRegex ||
                          rule_.kind == EncryptionRule::Kind::kEncryptedSuffix;
    return positive ? any : !any;
  }

 private:
  EncryptionRule rule_;
  std::shared_ptr<const RE2> regex_;  // shared: a Selector is copied, RE2 is not copyable
};

absl::StatusOr<std::string> EncryptValue(absl::string_view key, absl::string_view plaintext,
                                         absl::string_view type, absl::string_view aad,
                                         crypto::Random& random) {
  ASSIGN_OR_RETURN(std::string iv, random.Bytes(kIvSize));
  ASSIGN_OR_RETURN(crypto::GcmSealed sealed, crypto::AesGcmSeal(key, iv, aad, plaintext));
  return FormatEncryptedValue(EncryptedValue{std::move(sealed.ciphertext), std::move(iv),
                                             std::move(sealed.tag), std::string(type)});
}

absl::StatusOr<EncryptedValue> OpenValue(absl::string_view key, absl::string_view text,
                                         absl::string_view aad, std::string* plaintext) {
  ASSIGN_OR_RETURN(EncryptedValue value, ParseEncryptedValue(text));
  auto opened = crypto::AesGcmOpen(key, value.iv, aad, value.data, value.tag);
  if (!opened.ok()) {
    return absl::DataLossError(absl::StrCat("value at ", aad,
                                            " failed authentication (wrong data key, moved "
                                            "value or tampering)"));
  }
  *plaintext = *std::move(opened);
  return value;
}

// Turns decrypted bytes back into a typed leaf (sops aes.Cipher.Decrypt).
absl::StatusOr<Tree> TypedLeaf(const std::string& bytes, const std::string& type,
                               absl::string_view aad) {
  if (type == "str") return Tree(bytes);
  if (type == "int") {
    int64_t v = 0;
    const char* end = bytes.data() + bytes.size();
    const char* begin = bytes.data() + (absl::StartsWith(bytes, "+") ? 1 : 0);
    auto r = std::from_chars(begin, end, v);
    if (bytes.empty() || r.ec != std::errc() || r.ptr != end)
      return absl::DataLossError(absl::StrCat("value at ", aad, " is not an int"));
    return Tree(v);
  }
  if (type == "float") {
    char* end = nullptr;
    const double v = std::strtod(bytes.c_str(), &end);
    if (bytes.empty() || end != bytes.c_str() + bytes.size())
      return absl::DataLossError(absl::StrCat("value at ", aad, " is not a float"));
    return Tree(v);
  }
  if (type == "bool") {
    if (bytes == "1" || bytes == "t" || bytes == "T" || bytes == "TRUE" || bytes == "true" ||
        bytes == "True")
      return Tree(true);
    if (bytes == "0" || bytes == "f" || bytes == "F" || bytes == "FALSE" || bytes == "false" ||
        bytes == "False")
      return Tree(false);
    return absl::DataLossError(absl::StrCat("value at ", aad, " is not a bool"));
  }
  return absl::UnimplementedError(absl::StrCat("value at ", aad, " has unsupported type ", type));
}

// Go's time.Time.Format(time.RFC3339) of a parsed RFC 3339 string: fraction dropped, a zero
// offset written as Z. This string is the MAC's AAD.
absl::StatusOr<std::string> CanonicalLastModified(const std::string& text) {
  const std::optional<Rfc3339Parts> parts = MatchRfc3339(text);
  if (!parts)
    return absl::InvalidArgumentError(absl::StrCat("sops.lastmodified is not RFC 3339: ", text));
  std::string base(parts->date_time);
  base[10] = 'T';
  std::string zone(parts->zone);
  if (zone == "z" || zone == "+00:00" || zone == "-00:00") zone = "Z";
  return base + zone;
}

absl::StatusOr<EncryptionRule> RuleFromMetadata(const Tree& sops) {
  std::vector<EncryptionRule> rules;
  const std::pair<const char*, EncryptionRule::Kind> kKeys[] = {
      {"encrypted_regex", EncryptionRule::Kind::kEncryptedRegex},
      {"unencrypted_regex", EncryptionRule::Kind::kUnencryptedRegex},
      {"encrypted_suffix", EncryptionRule::Kind::kEncryptedSuffix},
      {"unencrypted_suffix", EncryptionRule::Kind::kUnencryptedSuffix},
  };
  for (const auto& [key, kind] : kKeys) {
    auto it = sops.find(key);
    if (it == sops.end() || it->is_null()) continue;
    if (!it->is_string() || it->get<std::string>().empty()) continue;
    rules.push_back(EncryptionRule{kind, it->get<std::string>()});
  }
  if (rules.size() > 1)
    return absl::InvalidArgumentError("sops metadata sets more than one encryption rule");
  if (rules.empty())
    return EncryptionRule{EncryptionRule::Kind::kUnencryptedSuffix, "_unencrypted"};
  return rules.front();
}

std::string StringField(const Tree& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

std::string EncryptionRule::MetadataKey() const {
  switch (kind) {
    case Kind::kEncryptedRegex:
      return "encrypted_regex";
    case Kind::kUnencryptedRegex:
      return "unencrypted_regex";
    case Kind::kEncryptedSuffix:
      return "encrypted_suffix";
    case Kind::kUnencryptedSuffix:
      return "unencrypted_suffix";
  }
  return "encrypted_regex";
}

absl::StatusOr<EncryptedValue> ParseEncryptedValue(absl::string_view text) {
  // sops' reader regex (not end-anchored); see MatchEncValue.
  const std::optional<EncParts> parts = MatchEncValue(text);
  if (!parts) return absl::DataLossError("value is not an ENC[AES256_GCM,...] string");
  EncryptedValue value;
  auto data = crypto::Base64Decode(parts->data);
  auto iv = crypto::Base64Decode(parts->iv);
  auto tag = crypto::Base64Decode(parts->tag);
  if (!data.ok() || !iv.ok() || !tag.ok() || iv->empty() || tag->size() != 16)
    return absl::DataLossError("ENC value has malformed data, iv or tag");
  value.data = *std::move(data);
  value.iv = *std::move(iv);
  value.tag = *std::move(tag);
  value.type = std::string(parts->type);
  return value;
}

std::string FormatEncryptedValue(const EncryptedValue& value) {
  return absl::StrCat("ENC[AES256_GCM,data:", crypto::Base64Encode(value.data),
                      ",iv:", crypto::Base64Encode(value.iv),
                      ",tag:", crypto::Base64Encode(value.tag), ",type:", value.type, "]");
}

absl::StatusOr<Tree> EncryptTree(const Tree& plaintext,
                                 const std::vector<age::X25519Recipient>& recipients,
                                 const EncryptOptions& options) {
  if (!plaintext.is_object())
    return absl::InvalidArgumentError("sops: the document must be a mapping");
  if (plaintext.contains("sops"))
    return absl::InvalidArgumentError("sops: the document already has a top-level `sops` key");
  if (recipients.empty())
    return absl::FailedPreconditionError("sops: no age recipients; refusing to encrypt");
  if (options.random == nullptr) return absl::InvalidArgumentError("sops: no random source");
  if (!NestingDepthWithin(plaintext)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sops: the document nests deeper than ", kMaxNestingDepth, " levels"));
  }
  crypto::Random& random = *options.random;
  ASSIGN_OR_RETURN(Selector selector, Selector::Create(options.rule));

  ASSIGN_OR_RETURN(std::string data_key, random.Bytes(kDataKeySize));
  if (options.data_key_out != nullptr) *options.data_key_out = data_key;
  Tree age_entries = Tree::array();
  for (const age::X25519Recipient& recipient : recipients) {
    // One age file per recipient, as sops does.
    ASSIGN_OR_RETURN(std::string enc, age::EncryptArmored(data_key, {recipient}, random));
    Tree entry = Tree::object();
    entry["recipient"] = recipient.String();
    entry["enc"] = std::move(enc);
    age_entries.push_back(std::move(entry));
  }

  Tree tree = plaintext;
  std::string mac_input;
  Path path;
  RETURN_IF_ERROR(Walk(
      tree, path,
      [&](Tree& leaf, const Path& leaf_path) -> absl::Status {
        ASSIGN_OR_RETURN(LeafBytes bytes, ToBytes(leaf));
        mac_input += bytes.bytes;
        if (!selector.Selected(leaf_path)) return absl::OkStatus();
        // sops leaves "" as is: ENC[...,data:,...] would not match its own reader.
        if (leaf.is_string() && bytes.bytes.empty()) return absl::OkStatus();
        ASSIGN_OR_RETURN(std::string enc,
                         EncryptValue(data_key, bytes.bytes, bytes.type, Aad(leaf_path), random));
        leaf = std::move(enc);
        return absl::OkStatus();
      },
      true));

  const std::string lastmodified =
      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", options.now, absl::UTCTimeZone());
  const std::string mac_hex = crypto::HexEncode(crypto::Sha512(mac_input), /*upper=*/true);
  ASSIGN_OR_RETURN(std::string mac, EncryptValue(data_key, mac_hex, "str", lastmodified, random));

  // sops 3.10 - 3.12 field order (what the reference's sops 3.11.0 writes).
  Tree metadata = Tree::object();
  metadata["age"] = std::move(age_entries);
  metadata["lastmodified"] = lastmodified;
  metadata["mac"] = std::move(mac);
  metadata[options.rule.MetadataKey()] = options.rule.value;
  metadata["version"] = options.version;
  tree["sops"] = std::move(metadata);
  return tree;
}

absl::StatusOr<DecryptedDocument> DecryptTreeWithDataKey(const Tree& encrypted,
                                                         absl::string_view data_key) {
  if (!encrypted.is_object()) return absl::InvalidArgumentError("sops: not a mapping");
  auto sops_it = encrypted.find("sops");
  if (sops_it == encrypted.end() || !sops_it->is_object())
    return absl::InvalidArgumentError("sops: no `sops` metadata; the file is not encrypted");
  const Tree& metadata = *sops_it;
  if (data_key.size() != kDataKeySize)
    return absl::InvalidArgumentError("sops: data key must be 32 bytes");
  if (!NestingDepthWithin(encrypted)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sops: the document nests deeper than ", kMaxNestingDepth, " levels"));
  }
  ASSIGN_OR_RETURN(EncryptionRule rule, RuleFromMetadata(metadata));
  ASSIGN_OR_RETURN(Selector selector, Selector::Create(rule));
  ASSIGN_OR_RETURN(std::string lastmodified,
                   CanonicalLastModified(StringField(metadata, "lastmodified")));
  const std::string stored_mac = StringField(metadata, "mac");
  if (stored_mac.empty()) return absl::InvalidArgumentError("sops: metadata has no mac");
  auto mac_only = metadata.find("mac_only_encrypted");
  const bool mac_only_encrypted =
      mac_only != metadata.end() && mac_only->is_boolean() && mac_only->get<bool>();

  DecryptedDocument result;
  result.plaintext = encrypted;
  result.plaintext.erase("sops");
  std::string mac_input;
  if (mac_only_encrypted) mac_input = crypto::Sha256("sops");
  Path path;
  RETURN_IF_ERROR(Walk(
      result.plaintext, path,
      [&](Tree& leaf, const Path& leaf_path) -> absl::Status {
        const bool selected = selector.Selected(leaf_path);
        const std::string aad = Aad(leaf_path);
        if (selected) {
          if (!leaf.is_string())
            return absl::DataLossError(absl::StrCat("value at ", aad, " is not encrypted"));
          const std::string text = leaf.get<std::string>();
          if (!text.empty()) {
            std::string bytes;
            ASSIGN_OR_RETURN(EncryptedValue value, OpenValue(data_key, text, aad, &bytes));
            ASSIGN_OR_RETURN(leaf, TypedLeaf(bytes, value.type, aad));
          }
        }
        if (!mac_only_encrypted || selected) {
          ASSIGN_OR_RETURN(LeafBytes bytes, ToBytes(leaf));
          mac_input += bytes.bytes;
        }
        return absl::OkStatus();
      },
      true));

  std::string mac;
  ASSIGN_OR_RETURN(EncryptedValue mac_value, OpenValue(data_key, stored_mac, lastmodified, &mac));
  (void)mac_value;
  const std::string computed = crypto::HexEncode(crypto::Sha512(mac_input), /*upper=*/true);
  if (mac != computed) {
    return absl::DataLossError(
        absl::StrCat("sops: MAC mismatch. File has ", mac, ", computed ", computed));
  }
  result.data_key = std::string(data_key);
  result.mac = std::move(mac);
  result.lastmodified = std::move(lastmodified);
  return result;
}

absl::StatusOr<DecryptedDocument> DecryptTree(const Tree& encrypted,
                                              const std::vector<age::X25519Identity>& identities) {
  if (!encrypted.is_object() || !encrypted.contains("sops") || !encrypted["sops"].is_object())
    return absl::InvalidArgumentError("sops: no `sops` metadata; the file is not encrypted");
  const Tree& metadata = encrypted["sops"];
  std::vector<const Tree*> entries;
  auto collect = [&entries](const Tree& group) {
    auto it = group.find("age");
    if (it == group.end() || !it->is_array()) return;
    for (const Tree& entry : *it) {
      if (entry.is_object()) entries.push_back(&entry);
    }
  };
  collect(metadata);
  if (auto groups = metadata.find("key_groups"); groups != metadata.end() && groups->is_array()) {
    for (const Tree& group : *groups) {
      if (group.is_object()) collect(group);
    }
  }
  bool saw_x25519 = false;
  bool saw_unsupported = false;
  std::vector<std::string> recipients;
  for (const Tree* entry : entries) {
    const std::string recipient = StringField(*entry, "recipient");
    recipients.push_back(recipient);
    if (!absl::StartsWith(recipient, "age1") || absl::StartsWith(recipient, "age1pq1") ||
        recipient.size() != 62) {
      saw_unsupported = true;  // post-quantum, plugin, tag or SSH recipient
      continue;
    }
    saw_x25519 = true;
    auto data_key = age::DecryptArmored(StringField(*entry, "enc"), identities);
    if (!data_key.ok()) continue;  // not ours (or damaged): try the next entry
    if (data_key->size() != kDataKeySize)
      return absl::DataLossError("sops: the age-wrapped data key is not 32 bytes");
    return DecryptTreeWithDataKey(encrypted, *data_key);
  }
  if (!saw_x25519 && saw_unsupported) {
    return absl::UnimplementedError(absl::StrCat(
        "sops: unsupported age recipient type (only X25519 age1... keys are supported): ",
        absl::StrJoin(recipients, ", ")));
  }
  if (entries.empty()) return absl::NotFoundError("sops: the file has no age recipients");
  return absl::NotFoundError(absl::StrCat("sops: no identity decrypts the data key for recipients ",
                                          absl::StrJoin(recipients, ", ")));
}

absl::StatusOr<std::string> EncryptYaml(const Tree& plaintext,
                                        const std::vector<age::X25519Recipient>& recipients,
                                        const EncryptOptions& options) {
  ASSIGN_OR_RETURN(Tree encrypted, EncryptTree(plaintext, recipients, options));
  return EmitSopsYaml(encrypted);
}

absl::StatusOr<DecryptedDocument> DecryptYaml(absl::string_view text,
                                              const std::vector<age::X25519Identity>& identities) {
  ASSIGN_OR_RETURN(Tree tree, ParseSopsYaml(text));
  return DecryptTree(tree, identities);
}

}  // namespace reverser::sops
